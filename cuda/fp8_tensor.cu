// Per-tensor FP8 ("fp8": current and delayed scaling, E4M3/E5M2; spec §2, §3)
// and the global amax every per-tensor format shares. The bytes equal
// plugins/fp8's CPU kernels:
//
//	current: amax = max |x| (NaN ignored) or the caller's; scale =
//	         ScaleFromAmax(amax, fp8_max, pow2, eps, FLT_MAX)
//	delayed: scale from the quantizer state; amax = max |x| is written and staged
//	q = RNE_sat_fp8(fl32(x · scale)); scale_inv = 1/scale; columnwise data is
//	the transpose [K, M].
//
// Current scaling reads the input twice (amax, then cast); delayed scaling
// casts and reduces the amax in one pass. Rowwise + columnwise come from one
// cast kernel over 128×128 tiles (columnwise alone: 256×64), or, at a token count M that is not a
// multiple of 16, from one that walks strips of 64 columns down M
// (cast_strip_kernel) so that the transposed rows go out as aligned stores;
// where the input rows are not 16-byte aligned (an odd K), from the flat
// cast of the rowwise codes and a byte transpose of them (launch_cast).
#include <float.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <mutex>
#include <vector>

#include "common.cuh"

namespace lq {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ bool d_aligned16(const void *p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// Block-wide max of v, then one atomicMax of the result into each of the
// non-NULL outs (float bits; non-negative floats order like their bits).
__device__ __forceinline__ void block_max_atomic3(uint32_t v, uint32_t *a, uint32_t *b, uint32_t *c) {
  __shared__ uint32_t red[32];
  v = warp_max(v);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  if (warp == 0) {
    int nw = (blockDim.x + 31) >> 5;
    v = lane < nw ? red[lane] : 0;
    v = warp_max(v);
    if (v != 0) {
      if (lane == 0 && a) atomicMax(a, v);
      if (lane == 1 && b) atomicMax(b, v);
      if (lane == 2 && c) atomicMax(c, v);
    }
  }
}

// Block-wide max of v, then one atomicMax of the result into *out (float bits;
// non-negative floats order like their bits).
__device__ __forceinline__ void block_max_atomic(uint32_t v, uint32_t *out) {
  __shared__ uint32_t red[32];
  v = warp_max(v);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  if (warp == 0) {
    int nw = (blockDim.x + 31) >> 5;
    v = lane < nw ? red[lane] : 0;
    v = warp_max(v);
    if (lane == 0 && v != 0) atomicMax(out, v);
  }
}

// Block-wide max of v stored into *out (a one-CTA launch: no zeroing first).
__device__ __forceinline__ void block_max_store(uint32_t v, uint32_t *out) {
  __shared__ uint32_t red[32];
  v = warp_max(v);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  if (warp == 0) {
    int nw = (blockDim.x + 31) >> 5;
    v = lane < nw ? red[lane] : 0;
    v = warp_max(v);
    if (lane == 0) *out = v;
  }
}

// max |x| over n elements, NaN ignored, into *out (which the caller zeroed;
// with ONE, a one-CTA launch that stores it instead).
// The per-element max is one float max with |x| (fmaxf ignores NaN; the
// magnitudes being non-negative, the largest has the same bits as
// amax_bits_nan_ignored's), or for 16-bit inputs one packed max per two
// elements on the raw words.
template <typename T, bool VEC, bool ONE>
__global__ void __launch_bounds__(kThreads) amax_kernel(const T *__restrict__ x, int64_t n, uint32_t *out) {
  pdl_wait();
  float m = 0.0f;
  uint32_t m2 = 0;  // 16-bit inputs: packed magnitudes
  int64_t groups = n / 8;
  int64_t stride = (int64_t)gridDim.x * blockDim.x;
  int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  constexpr bool kPacked = VEC && sizeof(T) == 2;
  if constexpr (kPacked) {
    // Eight 16-byte loads in flight per thread; the last round's are
    // predicated (zeros do not change a max), so none waits on another.
    for (; g < groups; g += 8 * stride) {
      uint4 u[8];
#pragma unroll
      for (int j = 0; j < 8; j++)
        u[j] = g + j * stride < groups ? __ldg(reinterpret_cast<const uint4 *>(x + (g + j * stride) * 8)) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int j = 0; j < 8; j++) {
        m2 = hmax2_mag<T>(m2, u[j].x);
        m2 = hmax2_mag<T>(m2, u[j].y);
        m2 = hmax2_mag<T>(m2, u[j].z);
        m2 = hmax2_mag<T>(m2, u[j].w);
      }
    }
  } else {
    // Four groups of 8 per iteration, so that several loads are in flight.
    for (; g + 3 * stride < groups; g += 4 * stride) {
      float v[4][8];
#pragma unroll
      for (int u = 0; u < 4; u++) load8<T, VEC>(x + (g + u * stride) * 8, v[u]);
#pragma unroll
      for (int u = 0; u < 4; u++)
#pragma unroll
        for (int i = 0; i < 8; i++) m = fmaxf(m, fabsf(v[u][i]));
    }
    for (; g < groups; g += stride) {
      float v[8];
      load8<T, VEC>(x + g * 8, v);
#pragma unroll
      for (int i = 0; i < 8; i++) m = fmaxf(m, fabsf(v[i]));
    }
  }
  if (blockIdx.x == 0 && threadIdx.x < (n & 7)) m = fmaxf(m, fabsf(to_f32(x[groups * 8 + threadIdx.x])));
  uint32_t bits = __float_as_uint(m);
  if constexpr (kPacked) bits = max(bits, hmax2_bits<T>(m2));
  if constexpr (ONE) block_max_store(bits, out);
  else block_max_atomic(bits, out);
}

// Inputs of at most this many elements get a one-CTA amax (decode and MoE
// sizes, where the launches are the cost).
constexpr int64_t kSmallAmaxN = 65536;

template <typename T>
int32_t launch_amax(const void *x, int64_t n, uint32_t *out, cudaStream_t s, quant_plugin_error *err) {
  int64_t groups = n / 8;
  int64_t blocks = n <= kSmallAmaxN ? 1 : ceil_div(groups > 0 ? groups : 1, kThreads * (sizeof(T) == 2 ? 8 : 4));
  if (blocks > grid_cap()) blocks = grid_cap();
  if (blocks < 1) blocks = 1;
  if (blocks == 1) {
    // One CTA stores the amax: no memset of *out first (one launch, not two).
    if (aligned16(x)) launch_kernel(amax_kernel<T, true, true>, 1, kThreads, 0, s, (const T *)x, n, out);
    else launch_kernel(amax_kernel<T, false, true>, 1, kThreads, 0, s, (const T *)x, n, out);
  } else {
    LQ_TRY(zero_words(s, err, out));
    if (aligned16(x)) launch_kernel(amax_kernel<T, true, false>, (unsigned)blocks, kThreads, 0, s, (const T *)x, n, out);
    else launch_kernel(amax_kernel<T, false, false>, (unsigned)blocks, kThreads, 0, s, (const T *)x, n, out);
  }
  LQ_LAUNCHED("amax kernel launch");
  return QUANT_OK;
}

// Parameters of one per-tensor cast.
struct CastParams {
  const void *in;
  int64_t m, k;
  uint8_t *row, *col;                    // data buffers (NULL: direction not asked)
  float *row_scale_inv, *col_scale_inv;  // scale_inv [1]
  float *row_amax, *col_amax;            // amax [1]
  const float *amax_src;                 // current scaling: where the amax is
  uint32_t *amax_accum, *amax_accum2;    // delayed scaling: the amax is reduced here (both directions' buffers)
  float delayed_scale;
  const float *scale_dev;                // delayed scaling, state on the device: the scale
  uint32_t *hist0;                       // ... and the history's staging slot h[0]
  float fp8_max, eps;
  int pow2, delayed;
};

__device__ __forceinline__ float delayed_scale_of(const CastParams &p) { return p.scale_dev ? *p.scale_dev : p.delayed_scale; }

__device__ __forceinline__ float cast_scale(const CastParams &p) {
  return p.delayed ? delayed_scale_of(p) : scale_from_amax(*p.amax_src, p.fp8_max, p.pow2 != 0, p.eps, FLT_MAX);
}

// One CTA writes the scalars: scale_inv = 1/scale at cast time (spec §2.3), and
// with current scaling the amax into each direction (delayed scaling's amax is
// only known after the last CTA; the host copies it).
__device__ __forceinline__ void write_scalars(const CastParams &p, float scale) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  float si = __frcp_rn(scale);
  if (p.row_scale_inv) *p.row_scale_inv = si;
  if (p.col_scale_inv) *p.col_scale_inv = si;
  if (!p.delayed) {
    float a = *p.amax_src;
    if (p.row_amax && p.row_amax != p.amax_src) *p.row_amax = a;
    if (p.col_amax && p.col_amax != p.amax_src) *p.col_amax = a;
  }
}

// Rowwise casts of groups of 8 elements start, start+stride, ...: returns the
// thread's amax bits (when AMAX). The thread with tail set also does the
// n mod 8 last elements, threads 0 .. n%8-1 one each. scale_of() gives the
// scale; it is called after the first group's load has gone out, so that a
// scale read from global memory (delayed scaling's state, current scaling's
// amax) does not hold every warp before its first input load (H200, fp8
// current rowwise at 2048×7168: up to 0.002 ms of about 0.020 a call; a
// second group in flight per thread gained nothing: bench/RESULTS.md,
// 2026-11-30 16:13 section). ILP > 1 (fp8_small_kernel, one CTA for the whole
// input, whose latency is the kernel's): ILP groups' loads in flight before
// they are cast.
template <typename T, Fp8 F, bool VEC, bool AMAX, int ILP = 1, typename ScaleOf>
__device__ __forceinline__ uint32_t cast_flat_range(const CastParams &p, ScaleOf scale_of, int64_t start, int64_t stride, bool tail,
                                                    int64_t end = INT64_MAX) {
  const T *x = (const T *)p.in;
  int64_t n = p.m * p.k, groups = n / 8;
  uint32_t m = 0;
  if (end > groups) end = groups;
  float scale;
  auto group = [&](int64_t g, const float (&v)[8]) {
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
      if (AMAX) {
        m = amax_bits_nan_ignored(m, v[2 * i]);
        m = amax_bits_nan_ignored(m, v[2 * i + 1]);
      }
      w[i] = fp8x2<F>(__fmul_rn(v[2 * i], scale), __fmul_rn(v[2 * i + 1], scale));
    }
    if (VEC) {
      *reinterpret_cast<uint2 *>(p.row + g * 8) = make_uint2(w[0] | (w[1] << 16), w[2] | (w[3] << 16));
    } else {
#pragma unroll
      for (int i = 0; i < 4; i++) {
        p.row[g * 8 + 2 * i] = (uint8_t)(w[i] & 0xFF);
        p.row[g * 8 + 2 * i + 1] = (uint8_t)(w[i] >> 8);
      }
    }
  };
  int64_t g = start;
  // The first group is peeled: its load goes out before the scale is read.
  if (g < end) {
    float v[8];
    load8<T, VEC>(x + g * 8, v);
    scale = scale_of();
    group(g, v);
    g += stride;
  } else {
    scale = scale_of();
  }
  if constexpr (ILP > 1) {
    for (; g + (ILP - 1) * stride < end; g += ILP * stride) {
      float v[ILP][8];
#pragma unroll
      for (int j = 0; j < ILP; j++) load8<T, VEC>(x + (g + j * stride) * 8, v[j]);
#pragma unroll
      for (int j = 0; j < ILP; j++) group(g + j * stride, v[j]);
    }
  }
  for (; g < end; g += stride) {
    float v[8];
    load8<T, VEC>(x + g * 8, v);
    group(g, v);
  }
  if (tail && threadIdx.x < (n & 7)) {
    int64_t i = groups * 8 + threadIdx.x;
    float v = to_f32(x[i]);
    if (AMAX) m = amax_bits_nan_ignored(m, v);
    p.row[i] = fp8<F>(__fmul_rn(v, scale));
  }
  return m;
}

// Four values cast to packed FP8 codes (the first in the low byte), their
// |x| max-reduced into m when AMAX: the cast-transpose kernel's step, for its
// aligned and its ragged pieces alike.
template <Fp8 F, bool AMAX>
__device__ __forceinline__ uint32_t cast4(const float *u, float scale, uint32_t &m) {
  if (AMAX) {
#pragma unroll
    for (int e = 0; e < 4; e++) m = amax_bits_nan_ignored(m, u[e]);
  }
  return (uint32_t)fp8x2<F>(__fmul_rn(u[0], scale), __fmul_rn(u[1], scale)) |
         ((uint32_t)fp8x2<F>(__fmul_rn(u[2], scale), __fmul_rn(u[3], scale)) << 16);
}

// Rowwise only: a flat pass over m·k elements, 8 per step.
template <typename T, Fp8 F, bool VEC, bool AMAX>
__global__ void __launch_bounds__(kThreads) cast_flat_kernel(CastParams p) {
  pdl_wait();
  float scale = 0.0f;
  uint32_t m = cast_flat_range<T, F, VEC, AMAX>(p, [&] { return scale = cast_scale(p); }, (int64_t)blockIdx.x * blockDim.x + threadIdx.x,
                                                 (int64_t)gridDim.x * blockDim.x, blockIdx.x == 0);
  write_scalars(p, scale);
  if (AMAX) block_max_atomic3(m, p.amax_accum, p.amax_accum2, p.hist0);
}

// How the cast-transpose kernels load input rows (spec §14: any K).
template <typename T>
__device__ __forceinline__ int row_mode(const CastParams &p) {
  return d_aligned16(p.in) ? ((p.k * (int64_t)sizeof(T)) % 16 == 0 ? kRowsAligned : sizeof(T) == 2 ? kRowsShifted : kRowsScalar) : kRowsScalar;
}

// Rowwise and/or columnwise (the transpose) from 128×128 tiles (columnwise
// alone from 256×64: kColTR, launch_cast_transpose), without shared memory: each lane holds 4 rows × 16 columns of the tile (eight
// 16-byte loads in flight), casts them, writes its four 16-byte rowwise
// pieces, transposes its 4×16 codes in registers (two rounds of byte permutes
// per 4×4 block) and writes each of its 16 columns' four bytes. A warp covers
// 64 rows × 32 columns, lanes 2i and 2i+1 side by side in the same rows, so
// that every store instruction writes whole 32-byte sectors: two lanes' 16
// bytes of a row, sixteen lanes' 4 bytes of a transposed row (H100 run 1: with
// a warp of 128 rows × 16 columns the rowwise stores wrote half sectors and
// "both" ran at 56% of copy against 81% for columnwise alone). Threads whose
// piece is ragged or misaligned go element by element. 256 threads per tile.
// One CTA per tile, not a resident grid: walks that kept the next tile's
// pieces in flight (a cp.async ring of 1-3 stages, or registers) ran "both"
// at 8192² 13-17 % slower, and tiles of 64 rows gained nothing (H200,
// bench/RESULTS.md, 2026-12-01 04:43 section).
constexpr int kRT = 128;
constexpr int kColTR = 256;  // columnwise alone: the tiles' rows (launch_cast_transpose)

//
// RAGGED (the single quantize of a tensor whose rows or transposed rows are
// not all aligned: vec_ok 0): interior tiles take a path of their own (below);
// the aligned instance is the kernel the H100 measured before it, unchanged.
// TR: the tile's rows (TR × kRT·kRT/TR tiles; the warps 64 rows × 32 columns
// each, TR/64 of them down a column of warps).
template <typename T, Fp8 F, bool ROW, bool AMAX, bool RAGGED = false, int TR = kRT>
__device__ __forceinline__ uint32_t cast_transpose_tile(const CastParams &p, float scale, int64_t tile, int vec_ok) {
  static_assert(!RAGGED || TR == kRT, "the interior path's stage is 128x128");
  constexpr int TC = kRT * kRT / TR, WR = TR / 64;
  const T *x = (const T *)p.in;
  int64_t tiles_c = (p.k + TC - 1) / TC;
  int64_t r0, c0;
  tile_rc(tile, tiles_c, &r0, &c0);
  r0 *= TR, c0 *= TC;
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  int64_t gr = r0 + 64 * (warp % WR) + 4 * (lane >> 1), gc = c0 + 32 * (warp / WR) + 16 * (lane & 1);
  uint32_t m = 0;
  // An interior tile of a ragged tensor: the whole tile inside, rows
  // loadable as vectors or shifted vectors (the last row's last chunk inside
  // the tensor). The same for the whole CTA (its path has a barrier).
  bool interior = false;
  if constexpr (RAGGED) {
    const int mode = row_mode<T>(p);
    interior = !vec_ok && mode != kRowsScalar && r0 + kRT <= p.m && c0 + kRT <= p.k &&
               (mode == kRowsAligned ||
                shifted_fits<8>(reinterpret_cast<const uint16_t *>(x + (r0 + kRT - 1) * p.k + c0 + kRT - 16), x + p.m * p.k));
  }
  // Warp-uniform: the other path's stores shuffle across the warp.
  if (!RAGGED && vec_ok && __all_sync(0xFFFFFFFFu, gr + 4 <= p.m && gc + 16 <= p.k)) {
    float v[4][2][8];
#pragma unroll
    for (int i = 0; i < 4; i++) {
      load8<T, true>(x + (gr + i) * p.k + gc, v[i][0]);
      load8<T, true>(x + (gr + i) * p.k + gc + 8, v[i][1]);
    }
    uint32_t rw[4][4];  // row i, word j: the codes of columns 4j .. 4j+3
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
      for (int j = 0; j < 4; j++) rw[i][j] = cast4<F, AMAX>(&v[i][j >> 1][4 * (j & 1)], scale, m);
    if (ROW) {
#pragma unroll
      for (int i = 0; i < 4; i++)
        *reinterpret_cast<uint4 *>(p.row + (gr + i) * p.k + gc) = make_uint4(rw[i][0], rw[i][1], rw[i][2], rw[i][3]);
    }
#pragma unroll
    for (int j = 0; j < 4; j++) {
      uint32_t cw[4];
      transpose4x4_bytes(rw[0][j], rw[1][j], rw[2][j], rw[3][j], cw);
#pragma unroll
      for (int e = 0; e < 4; e++) *reinterpret_cast<uint32_t *>(p.col + (gc + 4 * j + e) * p.m + gr) = cw[e];
    }
  } else if (interior) {
    // No bound checks: the rows' codes are staged in shared memory so that
    // each half-warp writes a tile row's 128 bytes as one whole run of
    // 8-byte words (store_run8_full<16>) instead of 32-byte runs over two
    // lanes, each with its own ends (H100, 8191²: "both" ran at 30-39 % of
    // its aligned bandwidth, now 45-56 %); each transposed row's 64 bytes go
    // out as one run over its 16 lanes (store_run; a variant without the
    // length shuffle, store_run8_full's scheme for 4-byte pieces, ran 2 %
    // slower).
    // Row rl's 16-byte chunk q lies at chunk q ^ 2·((rl/4) mod 4): the eight
    // lanes of a store phase (four rows 4 apart, two chunks each) hit eight
    // bank groups; a half-warp reading a row's 128 bytes hits all banks.
    __shared__ uint4 stg[kRT][kRT / 16];
    uint32_t rw[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const T *src = x + (gr + i) * p.k + gc;
      float v[16];
      if (row_mode<T>(p) == kRowsAligned) {
        load8<T, true>(src, *reinterpret_cast<float(*)[8]>(&v[0]));
        load8<T, true>(src + 8, *reinterpret_cast<float(*)[8]>(&v[8]));
      } else {
        uint32_t w[8];
        load_shifted<8>(reinterpret_cast<const uint16_t *>(src), w);
        const T *h = reinterpret_cast<const T *>(&w[0]);
#pragma unroll
        for (int e = 0; e < 16; e++) v[e] = to_f32(h[e]);
      }
#pragma unroll
      for (int j = 0; j < 4; j++) rw[i][j] = cast4<F, AMAX>(&v[4 * j], scale, m);
    }
    if constexpr (ROW) {
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const int rl = 64 * (warp & 1) + 4 * (lane >> 1) + i, q = 2 * (warp >> 1) + (lane & 1);
        stg[rl][q ^ (2 * ((rl >> 2) & 3))] = make_uint4(rw[i][0], rw[i][1], rw[i][2], rw[i][3]);
      }
    }
#pragma unroll
    for (int j = 0; j < 4; j++) {
      uint32_t cw[4];
      transpose4x4_bytes(rw[0][j], rw[1][j], rw[2][j], rw[3][j], cw);
#pragma unroll
      for (int e = 0; e < 4; e++) store_run<4>(p.col + (gc + 4 * j + e) * p.m + gr, cw[e], 4, 2, (lane >> 1) == 0, (lane >> 1) == 15);
    }
    if constexpr (ROW) {
      __syncthreads();
      // Half-warp h writes rows h, h+16, ..., lane l their bytes 8l .. 8l+7.
      const int h = threadIdx.x >> 4, l = threadIdx.x & 15;
#pragma unroll
      for (int k = 0; k < kRT / 16; k++) {
        const int rl = h + 16 * k;
        const uint2 v = reinterpret_cast<const uint2 *>(&stg[rl][(l >> 1) ^ (2 * ((rl >> 2) & 3))])[l & 1];
        store_run8_full<16>(p.row + (r0 + rl) * p.k + c0 + 8 * l, v);
      }
      __syncthreads();  // fp8_small_kernel's next tile reuses stg
    }
  } else {
    // Any M and K (spec §14), the warp together: whole 16-element pieces
    // load as vectors (aligned rows) or shifted vectors (16-bit rows at any
    // even offset), the rest element by element with zeros outside; a row's
    // 32 bytes go out as one run over the two lanes that hold it
    // (store_run16), each transposed row's 64 bytes as one run over the 16
    // lanes that hold it (store_run), so that M and K that are not multiples
    // of 16 and 4 cost aligned stores instead of one byte store per code.
    const int mode = row_mode<T>(p);
    uint32_t rw[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const int64_t r = gr + i;
      const T *src = x + r * p.k + gc;
      float v[16];
      if (r < p.m && gc + 16 <= p.k && mode == kRowsAligned) {
        load8<T, true>(src, *reinterpret_cast<float(*)[8]>(&v[0]));
        load8<T, true>(src + 8, *reinterpret_cast<float(*)[8]>(&v[8]));
      } else if (r < p.m && gc + 16 <= p.k && mode == kRowsShifted &&
                 shifted_fits<8>(reinterpret_cast<const uint16_t *>(src), x + p.m * p.k)) {
        uint32_t w[8];
        load_shifted<8>(reinterpret_cast<const uint16_t *>(src), w);
        const T *h = reinterpret_cast<const T *>(&w[0]);
#pragma unroll
        for (int e = 0; e < 16; e++) v[e] = to_f32(h[e]);
      } else {
#pragma unroll
        for (int e = 0; e < 16; e++) v[e] = (r < p.m && gc + e < p.k) ? to_f32(src[e]) : 0.0f;
      }
#pragma unroll
      for (int j = 0; j < 4; j++) rw[i][j] = cast4<F, AMAX>(&v[4 * j], scale, m);
    }
    if (ROW) {
      const int64_t left = p.k - gc;
      const int nk = left >= 16 ? 16 : left > 0 ? (int)left : 0;
#pragma unroll
      for (int i = 0; i < 4; i++) store_run16(p.row + (gr + i) * p.k + gc, rw[i], gr + i < p.m ? nk : 0, 1, (lane & 1) == 0, (lane & 1) == 1);
    }
    const int64_t rows_left = p.m - gr;
    const int nm = rows_left >= 4 ? 4 : rows_left > 0 ? (int)rows_left : 0;
#pragma unroll
    for (int j = 0; j < 4; j++) {
      uint32_t cw[4];
      transpose4x4_bytes(rw[0][j], rw[1][j], rw[2][j], rw[3][j], cw);
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int64_t c = gc + 4 * j + e;
        store_run<4>(p.col + c * p.m + gr, cw[e], c < p.k ? nm : 0, 2, (lane >> 1) == 0, (lane >> 1) == 15);
      }
    }
  }
  return m;
}

template <typename T, Fp8 F, bool ROW, bool AMAX, bool RAGGED, int TR = kRT>
__global__ void __launch_bounds__(kThreads) cast_transpose_kernel(CastParams p, int vec_ok) {
  pdl_wait();
  float scale = cast_scale(p);
  write_scalars(p, scale);
  uint32_t m = cast_transpose_tile<T, F, ROW, AMAX, RAGGED, TR>(p, scale, blockIdx.x, vec_ok);
  if (AMAX) block_max_atomic3(m, p.amax_accum, p.amax_accum2, p.hist0);
}

// Rowwise and/or columnwise at a token count M that is not a multiple of 16
// (spec §14: any M) with 16-byte aligned input rows, where the transposed
// rows [K, M] start at every offset mod 16 and the tile kernel's column runs
// each need shifted partial stores at both ends (H100, 8191×8192, delayed
// scaling: 52 % of copy columnwise and 57 % both against 88 % at 8192²).
// Here a CTA owns a strip of kSW input columns (kSW output rows) over a
// segment of M and walks down it kSH rows at a time: the strip's output is
// one contiguous range per output row, and output row r's offset
// o = addr(r, s0) mod 32 is the same for every chunk (chunks start at
// multiples of 32), so each output row goes out as whole 32-byte sectors
// (aligned 16-byte stores) in the global frame; only where a row's segment
// begins and ends does a partial 16-byte piece go out byte by byte
// (common.cuh: StripCols).
//
// Per chunk: each thread loads 4 rows × 8 columns (a warp's load covers
// four rows' kSW elements), casts, transposes 4×4 bytes
// and writes one word per column into T; a warp then writes four output
// rows, lane j the aligned 16 bytes that hold the chunk's bytes
// [16j − o, 16j − o + 16): a 4-byte and a 16-byte shared load and four
// funnel shifts. T's row holds the previous chunk's last 32 bytes before
// the chunk's (the prefix: the bytes of pieces j = 0, 1 before the chunk), and
// is shifted by 4·⌊o/4⌋ bytes so that the 16-byte load is aligned; its
// 16-byte granules are XOR-swizzled by the row's group of 8 so that a
// warp's transposed words (8 rows, 4 words each) hit 32 banks. Two T
// buffers (one barrier per chunk) and two chunks' loads in flight per thread.
// (Measured and not kept, same run: one chunk in flight, 78 / 74 % of copy
// at 8191×8192 against 80 / 77 %; 16-bit rows at an odd K through shifted
// loads, 44 % columnwise and 27 % both at 8191² against the tile kernel's
// 52 / 40 %: those keep the tile kernel.)
// kSW, kSH, the T layout (strip_word), the loads and the column stores
// (StripCols) are common.cuh's: fp8_block_strip_kernel (cuda/fp8_block.cu)
// walks the same way.
//
// SHIFTED: 16-bit rows at any even offset (an odd K), columnwise alone (see
// use_strip): the chunks come staged through shared memory (common.cuh:
// StripStager), kStripStages ahead, instead of kStripDepth chunks of loads
// held in registers.
// The shifted current-scaling instance at three CTAs a SM (80 registers;
// 95 unhinted since StripStager, two a SM: H200, 8191² columnwise 0.110 ms
// against 0.106 hinted); the delayed one is faster unhinted (73 registers,
// three a SM; 0.070 against 0.073 hinted: bench/RESULTS.md, 2026-12-02 19:48
// section, call 4). 0 gives ptxas no hint.
template <bool AMAX, bool SHIFTED>
constexpr int cast_strip_min_blocks() { return SHIFTED && !AMAX ? 3 : 0; }

template <typename T, Fp8 F, bool ROW, bool AMAX, bool SHIFTED>
__global__ void __launch_bounds__(kThreads, cast_strip_min_blocks<AMAX, SHIFTED>()) cast_strip_kernel(CastParams p, int strips, int64_t seg_rows) {
  pdl_wait();
  // Two T buffers: chunk n is written into tw[n & 1] while slower warps
  // still store chunk n − 1 from the other, so one barrier per chunk.
  __shared__ __align__(16) uint32_t tw[2][kSW * kStripRowWords];
  extern __shared__ __align__(16) uint4 stage[];  // SHIFTED: kStripStages staged chunks
  float scale = cast_scale(p);
  write_scalars(p, scale);
  const T *x = (const T *)p.in;
  const int64_t M = p.m, K = p.k;
  const int strip = (int)(blockIdx.x % (unsigned)strips);
  const int64_t c0 = (int64_t)strip * kSW, s0 = (int64_t)(blockIdx.x / (unsigned)strips) * seg_rows;
  const int64_t L = (s0 + seg_rows < M ? s0 + seg_rows : M) - s0;  // rows of this segment
  const int nchunks = (int)((L + kSH - 1) / kSH);
  const StripCols sc(p.col, M, K, c0, s0, threadIdx.x);
  const int g = sc.g, cg = sc.cg;
  const int rl = 4 * g;  // the thread's first row within a chunk
  const bool rowvec = ROW && (K % 8) == 0 && (reinterpret_cast<uintptr_t>(p.row) & 7) == 0;
  uint32_t m2 = 0;  // amax, 16-bit input: packed magnitudes (as amax_kernel)
  float mf = 0.0f;  // amax, fp32 input
  constexpr int D = SHIFTED ? 1 : kStripDepth;  // chunks held in registers
  uint32_t raw[D][4][8];
  const StripStager stg(x, K, s0, c0, rl, threadIdx.x);  // SHIFTED: the thread's staged granules and row offsets
  if constexpr (SHIFTED) {
#pragma unroll
    for (int d = 0; d < kStripStages; d++) {
      if (d < nchunks) stg.stage(stage + d * kStripStageChunk, M, K, s0, s0 + (int64_t)d * kSH, c0, threadIdx.x);
      cp_async_commit();
    }
    cp_async_wait_n<kStripStages - 1>();  // chunk 0
    __syncthreads();
  } else {
#pragma unroll
    for (int d = 0; d < kStripDepth; d++)
      if (d < nchunks) strip_load4<T>(x, M, K, s0 + (int64_t)d * kSH + rl, c0 + 8 * cg, raw[d]);
  }
  for (int n0 = 0; n0 < nchunks; n0 += D) {
#pragma unroll
    for (int d = 0; d < D; d++) {
      const int n = n0 + d;
      if (n >= nchunks) break;
      const int64_t r0 = s0 + (int64_t)n * kSH;
      if constexpr (SHIFTED) stg.unstage4(stage + (n % kStripStages) * kStripStageChunk, M, K, r0, rl, c0, cg, raw[d]);
      uint32_t rw[4][2];
#pragma unroll
      for (int i = 0; i < 4; i++) {
        float v[8];
        if constexpr (sizeof(T) == 2) {
          if (AMAX) {
#pragma unroll
            for (int k = 0; k < 4; k++) m2 = hmax2_mag<T>(m2, raw[d][i][k]);
          }
          const T *h = reinterpret_cast<const T *>(&raw[d][i][0]);
#pragma unroll
          for (int e = 0; e < 8; e++) v[e] = to_f32(h[e]);
        } else {
#pragma unroll
          for (int e = 0; e < 8; e++) {
            v[e] = __uint_as_float(raw[d][i][e]);
            if (AMAX) mf = amax_f(mf, v[e]);
          }
        }
        uint32_t unused = 0;
        rw[i][0] = cast4<F, false>(&v[0], scale, unused);
        rw[i][1] = cast4<F, false>(&v[4], scale, unused);
      }
      if (!SHIFTED && n + kStripDepth < nchunks) strip_load4<T>(x, M, K, r0 + (int64_t)kStripDepth * kSH + rl, c0 + 8 * cg, raw[d]);
      if constexpr (ROW) {
        const int64_t c = c0 + 8 * cg;
        const int64_t left = K - c;
        const int nk = left >= 8 ? 8 : left > 0 ? (int)left : 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
          const int64_t R = r0 + rl + i;
          const uint64_t me = (uint64_t)rw[i][0] | ((uint64_t)rw[i][1] << 32);
          uint8_t *dst = p.row + R * K + c;
          const int nn = R < M ? nk : 0;
          if (rowvec) {
            if (nn == 8) *reinterpret_cast<uint64_t *>(dst) = me;
            else put_bytes(dst, me, nn);
          } else {
            store_run<8>(dst, me, nn, 1, cg == 0, cg == 7);
          }
        }
      }
      sc.put(tw[n & 1], tw[(n & 1) ^ 1], rw);
      if constexpr (SHIFTED) cp_async_wait_n<kStripStages - 2>();  // chunk n + 1, this thread's copies
      __syncthreads();
      if constexpr (SHIFTED) {
        if (n + kStripStages < nchunks) stg.stage(stage + (n % kStripStages) * kStripStageChunk, M, K, s0, r0 + (int64_t)kStripStages * kSH, c0, threadIdx.x);
        cp_async_commit();
      }
      sc.store(tw[n & 1], n, L);
    }
  }
  sc.flush(tw[(nchunks - 1) & 1], nchunks, L, threadIdx.x);
  if constexpr (AMAX) {
    uint32_t m;
    if constexpr (sizeof(T) == 2) m = hmax2_bits<T>(m2);
    else m = __float_as_uint(mf);
    block_max_atomic3(m, p.amax_accum, p.amax_accum2, p.hist0);
  }
}

// Below this M the tile kernel serves every shape (one chunk of kSH rows per
// strip would be mostly padding).
constexpr int64_t kStripMinM = 256;

// Whether the strip kernel takes a cast-transpose (the tile kernel's vector
// condition vec_ok being false): aligned rows at an M not a multiple of 16,
// and columnwise alone from 16-bit rows at any even offset (an odd K) at any
// M. Both directions from such rows take the flat cast and a byte transpose
// (launch_cast; H200, 8191², delayed scaling: 0.152 ms against 0.164 for
// the staged strips writing the rowwise codes as unaligned runs).
inline bool use_strip(const CastParams &p, size_t elem) {
  if (p.m < kStripMinM) return false;
  const int mode = row_load_mode(p.in, p.k, elem);
  return (mode == kRowsShifted && p.row == nullptr) || (mode == kRowsAligned && p.m % 16 != 0);
}

// One wave: as many segments per strip as the resident CTAs allow (the work
// per CTA is uniform, so a second partial wave would cost a whole CTA time).
template <typename T, Fp8 F, bool ROW, bool AMAX, bool SHIFTED>
void launch_strip_inst(const CastParams &p, cudaStream_t s) {
  constexpr int smem = SHIFTED ? kStripStageBytes : 0;
  // Once per instance (a thread-safe static); a query that fails leaves no
  // error behind for the launch check.
  static const int per_sm = [] {
    int b = 0;
    if ((smem > 0 && cudaFuncSetAttribute(cast_strip_kernel<T, F, ROW, AMAX, SHIFTED>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess) ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, cast_strip_kernel<T, F, ROW, AMAX, SHIFTED>, kThreads, smem) != cudaSuccess || b < 1) {
      cudaGetLastError();
      b = 1;
    }
    return b;
  }();
  int64_t strips, segs, seg_rows;
  strip_grid(p.m, p.k, per_sm, &strips, &segs, &seg_rows);
  launch_kernel(cast_strip_kernel<T, F, ROW, AMAX, SHIFTED>, (unsigned)(strips * segs), kThreads, smem, s, p, (int)strips, seg_rows);
}

template <typename T, Fp8 F>
void launch_strip(const CastParams &p, cudaStream_t s) {
  if constexpr (sizeof(T) == 2) {
    if (row_load_mode(p.in, p.k, sizeof(T)) == kRowsShifted) {  // columnwise alone (use_strip)
      if (p.delayed) launch_strip_inst<T, F, false, true, true>(p, s);
      else launch_strip_inst<T, F, false, false, true>(p, s);
      return;
    }
  }
  if (p.row != nullptr) {
    if (p.delayed) launch_strip_inst<T, F, true, true, false>(p, s);
    else launch_strip_inst<T, F, true, false, false>(p, s);
  } else {
    if (p.delayed) launch_strip_inst<T, F, false, true, false>(p, s);
    else launch_strip_inst<T, F, false, false, false>(p, s);
  }
}

// Small tensors (at most kSmallN elements, where the host's launch costs
// exceed the GPU's work: decode batches, MoE experts): the whole quantize in
// one launch of one CTA. It reduces the amax itself (current scaling without a
// caller's amax, and delayed scaling) instead of a memset, an amax kernel and
// a copy, then casts with the same per-element code as the large path, so the
// bytes are the same. With a columnwise copy it walks the 128×128 tiles one
// after the other, about 3.6 µs each (H200: 16×4096 columnwise, 32 tiles,
// 0.116 ms; "both" 0.137), so it takes at most kSmallTiles of them; more go
// to the tiled kernels, one CTA a tile, after the amax pass (lq_fp8_quantize).
// Delayed scaling reduces its amax first too, though its scale is known: the
// amax in the cast loop, one read, ran slower (H200, 16 × 4096: 6.0 µs
// against 4.4; bench/RESULTS.md, 2026-12-01 05:20 section, call 6).
constexpr int64_t kSmallN = 65536;
constexpr int64_t kSmallTiles = 2;

template <typename T, Fp8 F, bool ROW, bool COL>
__global__ void __launch_bounds__(kThreads) fp8_small_kernel(CastParams p, int vec_ok) {
  pdl_wait();
  __shared__ uint32_t red[kThreads / 32];
  const T *x = (const T *)p.in;
  const int64_t n = p.m * p.k;
  uint32_t m = 0;
  bool need_amax = p.delayed || p.amax_src == nullptr;
  if (need_amax) {
    static_assert(kThreads == kAmaxThreads, "amax_range strides by kAmaxThreads");
    m = amax_range<T, 8>(x, 0, n);
    m = warp_max(m);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    m = red[0];
#pragma unroll
    for (int w = 1; w < kThreads / 32; w++) m = max(m, red[w]);
  }
  float amax = __uint_as_float(m);
  float scale = p.delayed ? delayed_scale_of(p)
                          : scale_from_amax(p.amax_src ? *p.amax_src : amax, p.fp8_max, p.pow2 != 0, p.eps, FLT_MAX);
  if (threadIdx.x == 0) {
    float si = __frcp_rn(scale);
    if (p.row_scale_inv) *p.row_scale_inv = si;
    if (p.col_scale_inv) *p.col_scale_inv = si;
    float a = need_amax ? amax : *p.amax_src;
    if (p.row_amax) *p.row_amax = a;
    if (p.col_amax) *p.col_amax = a;
    if (p.delayed && p.hist0 != nullptr && m != 0) atomicMax(p.hist0, m);
  }
  if (COL) {
    int64_t tiles = ((p.m + kRT - 1) / kRT) * ((p.k + kRT - 1) / kRT);
    for (int64_t t = 0; t < tiles; t++) cast_transpose_tile<T, F, ROW, false>(p, scale, t, vec_ok);
  } else if (vec_ok) {
    cast_flat_range<T, F, true, false, 4>(p, [=] { return scale; }, threadIdx.x, kThreads, true);
  } else {
    cast_flat_range<T, F, false, false, 4>(p, [=] { return scale; }, threadIdx.x, kThreads, true);
  }
}

// The cast-transpose kernels' vector condition.
inline int transpose_vec_ok(const CastParams &p) {
  return aligned16(p.in) && (reinterpret_cast<uintptr_t>(p.col) & 3) == 0 && p.k % 16 == 0 && p.m % 4 == 0 &&
         (p.row == nullptr || aligned16(p.row));
}

template <typename T, Fp8 F>
int32_t launch_small(const CastParams &p, cudaStream_t s, quant_plugin_error *err) {
  if (p.col != nullptr) {
    int vec_ok = transpose_vec_ok(p);
    if (p.row != nullptr) launch_kernel(fp8_small_kernel<T, F, true, true>, 1, kThreads, 0, s, p, vec_ok);
    else launch_kernel(fp8_small_kernel<T, F, false, true>, 1, kThreads, 0, s, p, vec_ok);
  } else {
    int vec_ok = aligned16(p.in) && (reinterpret_cast<uintptr_t>(p.row) & 7) == 0;
    launch_kernel(fp8_small_kernel<T, F, true, false>, 1, kThreads, 0, s, p, vec_ok);
  }
  LQ_LAUNCHED("fp8 small-tensor quantize kernel launch");
  return QUANT_OK;
}

template <typename T, Fp8 F, bool RAGGED>
void launch_cast_transpose(const CastParams &p, unsigned g, cudaStream_t s) {
  const int vec_ok = transpose_vec_ok(p);
  if (p.row != nullptr) {
    if (p.delayed) launch_kernel(cast_transpose_kernel<T, F, true, true, RAGGED>, g, kThreads, 0, s, p, vec_ok);
    else launch_kernel(cast_transpose_kernel<T, F, true, false, RAGGED>, g, kThreads, 0, s, p, vec_ok);
  } else if constexpr (!RAGGED) {
    // Columnwise alone on tiles of 256 rows × 64 columns: each transposed
    // row's codes go out as 256-byte runs (H200, bench/transpose_probe.cu:
    // 91 % of copy at 8192² against 88 % on 128×128 tiles).
    // (g counts those tiles: launch_cast.)
    if (p.delayed) launch_kernel(cast_transpose_kernel<T, F, false, true, false, kColTR>, g, kThreads, 0, s, p, vec_ok);
    else launch_kernel(cast_transpose_kernel<T, F, false, false, false, kColTR>, g, kThreads, 0, s, p, vec_ok);
  }
}

// The rowwise codes in flat order (cast_flat_kernel), and every scalar of
// the directions p asks for.
template <typename T, Fp8 F>
void launch_flat(const CastParams &p, cudaStream_t s) {
  const int64_t n = p.m * p.k;
  const bool vec = aligned16(p.in) && (reinterpret_cast<uintptr_t>(p.row) & 7) == 0;
  int64_t blocks = ceil_div(n / 8 > 0 ? n / 8 : 1, kThreads);
  if (blocks > grid_cap()) blocks = grid_cap();
  if (vec) {
    if (p.delayed) launch_kernel(cast_flat_kernel<T, F, true, true>, (unsigned)blocks, kThreads, 0, s, p);
    else launch_kernel(cast_flat_kernel<T, F, true, false>, (unsigned)blocks, kThreads, 0, s, p);
  } else {
    if (p.delayed) launch_kernel(cast_flat_kernel<T, F, false, true>, (unsigned)blocks, kThreads, 0, s, p);
    else launch_kernel(cast_flat_kernel<T, F, false, false>, (unsigned)blocks, kThreads, 0, s, p);
  }
}

template <typename T, Fp8 F>
int32_t launch_cast(const CastParams &p, cudaStream_t s, quant_plugin_error *err) {
  if (p.col == nullptr) {
    launch_flat<T, F>(p, s);
    LQ_LAUNCHED("fp8 cast kernel launch");
    return QUANT_OK;
  }
  // The tiles of launch_cast_transpose: kColTR × kRT²/kColTR for columnwise alone.
  int64_t tiles = p.row == nullptr ? ceil_div(p.m, (int64_t)kColTR) * ceil_div(p.k, (int64_t)(kRT * kRT / kColTR))
                                   : ceil_div(p.m, kRT) * ceil_div(p.k, kRT);
  if (tiles < 1) tiles = 1;
  if (tiles > 0x7FFFFFFF) return fail(err, QUANT_ERROR_UNSUPPORTED, "input: [%lld, %lld] has too many tiles", (long long)p.m, (long long)p.k);
  int vec_ok = transpose_vec_ok(p);
  if (!vec_ok && use_strip(p, sizeof(T)) && ceil_div(p.k, (int64_t)kSW) <= 0x7FFFFFFF) {
    launch_strip<T, F>(p, s);
    LQ_LAUNCHED("fp8 cast-transpose strip kernel launch");
    return QUANT_OK;
  }
  if (p.row != nullptr && row_load_mode(p.in, p.k, sizeof(T)) != kRowsAligned) {
    // Both directions where the input rows are not 16-byte aligned (an odd
    // K of 16-bit input, say): the rowwise codes in flat order (the flat
    // kernel: aligned vectors whatever K is), then the columnwise codes as
    // their transpose. Per-tensor scaling gives both copies one scale, so
    // the columnwise codes are the rowwise ones transposed byte for byte
    // (spec §7: the transposed copy is exact because the scale is shared).
    // H200, 8191², delayed scaling: 0.098 ms (flat cast 0.050, transpose
    // 0.045) against 0.075 at 8192²; the columnwise codes cast again from
    // the input by the staged strips took 0.127 (0.052 + 0.074), the tile
    // kernel shifting every 16-byte piece into place 0.180 (bench/RESULTS.md,
    // 2026-11-29 13:20 and 14:30 sections). (Also measured and not kept: one
    // launch, the strips writing the rowwise codes from the stage in the flat
    // frame too: 0.150 ms; the transpose's tiles casting the codes as they
    // stage them, one read of the input: 0.142-0.157, 15:25 section.)
    launch_flat<T, F>(p, s);  // writes both directions' scalars, the rowwise codes only
    LQ_LAUNCHED("fp8 cast kernel launch");
    return transpose_bytes(p.row, p.col, p.m, p.k, s, err);
  }
  unsigned g = (unsigned)tiles;
  // The RAGGED instance serves both directions; columnwise alone keeps the
  // checked path for every tile (H100, 8191²: its interior path ran 3-10 %
  // slower than the checked one there).
  if (vec_ok || p.row == nullptr) launch_cast_transpose<T, F, false>(p, g, s);
  else launch_cast_transpose<T, F, true>(p, g, s);
  LQ_LAUNCHED("fp8 cast-transpose kernel launch");
  return QUANT_OK;
}

// A group of quantizes (quantize_grouped, MoE experts) in three launches for
// up to kMaxGroup tensors, not three per tensor: zero every amax accumulator;
// (current scaling) reduce every tensor's amax, kAmaxUnit elements per CTA;
// cast, one 128×128 tile (with a columnwise direction) or kFlatUnit elements
// (rowwise only) per CTA. Work units are numbered tensor after tensor. The
// per-element code is the single quantize's, so the bytes are the same.
constexpr int kMaxGroup = 64;
constexpr int64_t kAmaxUnit = 65536, kFlatUnit = 8 * kThreads * 8;

struct Fp8Group {
  int count;
  int64_t amax_first[kMaxGroup + 1];  // first amax unit of tensor i; [count]: all
  int64_t cast_first[kMaxGroup + 1];
  CastParams t[kMaxGroup];
  __device__ __forceinline__ int locate(const int64_t *first, int64_t unit, int64_t *local) const {
    const int i = last_at_or_before(first, count, unit);
    *local = unit - first[i];
    return i;
  }
};

__global__ void group_zero_kernel(const __grid_constant__ Fp8Group g) {
  pdl_wait();
  int i = threadIdx.x;
  if (i < g.count) {
    if (g.t[i].amax_accum) *g.t[i].amax_accum = 0;
    if (g.t[i].amax_accum2) *g.t[i].amax_accum2 = 0;
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) group_amax_kernel(const __grid_constant__ Fp8Group g) {
  pdl_wait();
  int64_t local;
  const CastParams &p = g.t[g.locate(g.amax_first, blockIdx.x, &local)];
  const T *x = (const T *)p.in;
  int64_t n = p.m * p.k, lo = local * kAmaxUnit, hi = lo + kAmaxUnit < n ? lo + kAmaxUnit : n;
  uint32_t m = 0;
  if (d_aligned16(p.in)) {
    for (int64_t e = lo + 8 * threadIdx.x; e + 8 <= hi; e += 8 * kThreads) {
      float v[8];
      load8<T, true>(x + e, v);
#pragma unroll
      for (int i = 0; i < 8; i++) m = amax_bits_nan_ignored(m, v[i]);
    }
    int64_t tail = lo + ((hi - lo) / 8) * 8;  // kAmaxUnit is a multiple of 8: only the last unit has a tail
    if (tail + threadIdx.x < hi) m = amax_bits_nan_ignored(m, to_f32(x[tail + threadIdx.x]));
  } else {
    for (int64_t e = lo + threadIdx.x; e < hi; e += kThreads) m = amax_bits_nan_ignored(m, to_f32(x[e]));
  }
  block_max_atomic(m, p.amax_accum);
}

template <typename T, Fp8 F, bool ROW, bool COL, bool AMAX>
__global__ void __launch_bounds__(kThreads) group_cast_kernel(const __grid_constant__ Fp8Group g) {
  pdl_wait();
  int64_t local;
  const CastParams &p = g.t[g.locate(g.cast_first, blockIdx.x, &local)];
  float scale = cast_scale(p);
  if (local == 0 && threadIdx.x == 0) {
    float si = __frcp_rn(scale);
    if (p.row_scale_inv) *p.row_scale_inv = si;
    if (p.col_scale_inv) *p.col_scale_inv = si;
    if (!p.delayed) {
      float a = *p.amax_src;
      if (p.row_amax && p.row_amax != p.amax_src) *p.row_amax = a;
      if (p.col_amax && p.col_amax != p.amax_src) *p.col_amax = a;
    }
  }
  uint32_t m;
  if constexpr (COL) {
    int vec_ok = d_aligned16(p.in) && (reinterpret_cast<uintptr_t>(p.col) & 3) == 0 && p.k % 16 == 0 && p.m % 4 == 0 &&
                 (p.row == nullptr || d_aligned16(p.row));
    m = cast_transpose_tile<T, F, ROW, AMAX>(p, scale, local, vec_ok);
  } else {
    int64_t g0 = local * (kFlatUnit / 8), n = p.m * p.k;
    bool last = (local + 1) * kFlatUnit >= n;
    if (d_aligned16(p.in) && (reinterpret_cast<uintptr_t>(p.row) & 7) == 0)
      m = cast_flat_range<T, F, true, AMAX>(p, [=] { return scale; }, g0 + threadIdx.x, kThreads, last, g0 + kFlatUnit / 8);
    else
      m = cast_flat_range<T, F, false, AMAX>(p, [=] { return scale; }, g0 + threadIdx.x, kThreads, last, g0 + kFlatUnit / 8);
  }
  if (AMAX) block_max_atomic3(m, p.amax_accum, p.amax_accum2, p.hist0);
}

template <typename T, Fp8 F, bool ROW, bool COL>
void launch_group_cast(const Fp8Group &g, bool amax, cudaStream_t s) {
  unsigned n = (unsigned)g.cast_first[g.count];
  if (amax) launch_kernel(group_cast_kernel<T, F, ROW, COL, true>, n, kThreads, 0, s, g);
  else launch_kernel(group_cast_kernel<T, F, ROW, COL, false>, n, kThreads, 0, s, g);
}

template <typename T, Fp8 F>
int32_t launch_group(const Fp8Group &g, bool row, bool col, bool delayed, cudaStream_t s, quant_plugin_error *err) {
  launch_kernel(group_zero_kernel, 1, kMaxGroup, 0, s, g);
  LQ_LAUNCHED("fp8 grouped zero kernel launch");
  if (!delayed) {
    launch_kernel(group_amax_kernel<T>, (unsigned)g.amax_first[g.count], kThreads, 0, s, g);
    LQ_LAUNCHED("fp8 grouped amax kernel launch");
  }
  if (row && col) launch_group_cast<T, F, true, true>(g, delayed, s);
  else if (row) launch_group_cast<T, F, true, false>(g, delayed, s);
  else launch_group_cast<T, F, false, true>(g, delayed, s);
  LQ_LAUNCHED("fp8 grouped cast kernel launch");
  return QUANT_OK;
}

// The delayed-scaling update of spec §2.4 on a state in device memory, in
// one CTA: plugins/fp8's delayedState.Update, step for step. The history
// rolls in chunks of the block: every thread reads its h[i+1] before the
// barrier and writes h[i] after it, and a chunk's reads never touch what an
// earlier chunk wrote. The scale, h[0] and the first chunk's entries are
// loaded together, before anything waits on one of them (a history of up to
// kUpdateThreads entries costs one round trip to memory, not three: the
// update ran ahead of every fp8_delayed linear layer's quantize, 1.1-3.0 µs
// on an H200, bench/RESULTS.md); where h[0] (or the reduced amax) is 0
// nothing is written and the scale stays.
constexpr int kUpdateThreads = 1024;

// One state's update: its buffers and the host's scalars.
struct UpdateItem {
  float *scale, *h;
  int64_t n;
  float reduced, scaled_max;
  int has_reduced, most_recent;
};

// Up to N updates in one launch, one CTA each (delayed_update_grouped: a
// linear layer's forward updates its input's and its weight's states, about
// 1.6 µs a launch at a decode step on an H200; N = 1 for a single update,
// whose parameters stay small).
constexpr int kMaxUpdates = 64;
template <int N>
struct UpdateGroup {
  int count;
  UpdateItem it[N];
};

template <int N>
__global__ void __launch_bounds__(kUpdateThreads) delayed_update_kernel(const __grid_constant__ UpdateGroup<N> g) {
  pdl_wait();
  __shared__ float red[kUpdateThreads / 32];
  const UpdateItem &u = g.it[blockIdx.x];
  float *const h = u.h;
  const int64_t n = u.n;
  const float sc0 = threadIdx.x == 0 ? *u.scale : 0.0f;
  float a0 = h[0];
  if (u.has_reduced && u.reduced != 0.0f) a0 = u.reduced;
  const bool roll = a0 != 0.0f;
  float amax = 0.0f;
  for (int64_t base = 0; base < n; base += kUpdateThreads) {
    const int64_t i = base + threadIdx.x;
    const float next = i < n - 1 ? h[i + 1] : 0.0f;
    __syncthreads();  // every thread has read h[0] and its chunk before any writes them
    if (roll && i < n) {
      const float v = i < n - 1 ? next : a0;
      h[i] = i > 0 ? v : 0.0f;
      amax = fmaxf(amax, v);  // a NaN entry is ignored, as Go's a > amax does
    }
  }
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = amax;
  __syncthreads();
  if (threadIdx.x == 0) {
    amax = red[0];
    for (int w = 1; w < kUpdateThreads / 32; w++) amax = fmaxf(amax, red[w]);
    if (roll && u.most_recent) amax = a0;
    float sc = sc0;
    if (roll && !isinf(amax) && amax > 0.0f) sc = __fdiv_rn(u.scaled_max, amax);
    if (isinf(sc)) sc = FLT_MAX;
    *u.scale = sc;
  }
}

// Dequantize: x = fl32(decode(q) · scale_inv), rounded to the output dtype;
// columnwise data is read transposed.
template <typename O, Fp8 F>
__global__ void dequant_flat_kernel(const uint8_t *__restrict__ q, const float *scale_inv, O *out, int64_t n) {
  pdl_wait();
  float si = *scale_inv;
  int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    store_out(out + i, __fmul_rn(fp8_decode<F>(q[i]), si));
}

// out[r][c] = f(col[c][r]) for the [k, m] columnwise data, through 32×32 tiles.
template <typename O, Fp8 F>
__global__ void dequant_transposed_kernel(const uint8_t *__restrict__ col, const float *scale_inv, O *out, int64_t m,
                                          int64_t k) {
  pdl_wait();
  __shared__ uint8_t t[32][33];
  float si = *scale_inv;
  int64_t tiles_m = (m + 31) / 32;
  int64_t m0 = (int64_t)(blockIdx.x % tiles_m) * 32, k0 = (int64_t)(blockIdx.x / tiles_m) * 32;
  for (int j = threadIdx.y; j < 32; j += blockDim.y) {
    int64_t kk = k0 + j, mm = m0 + threadIdx.x;
    if (kk < k && mm < m) t[j][threadIdx.x] = col[kk * m + mm];
  }
  __syncthreads();
  for (int j = threadIdx.y; j < 32; j += blockDim.y) {
    int64_t mm = m0 + j, kk = k0 + threadIdx.x;
    if (mm < m && kk < k) store_out(out + mm * k + kk, __fmul_rn(fp8_decode<F>(t[threadIdx.x][j]), si));
  }
}

struct Fp8Dir {
  uint8_t *data = nullptr;
  float *scale_inv = nullptr, *amax = nullptr;
};

// Which storage an argument is, for messages: constant names rather than
// snprintf on every call (host time per call, issue #15).
enum StorageArg { kRowwise, kColumnwise, kFrom, kTo };
constexpr const char *kStorageNames[4][3] = {{"rowwise data", "rowwise scale_inv", "rowwise amax"},
                                             {"columnwise data", "columnwise scale_inv", "columnwise amax"},
                                             {"from data", "from scale_inv", "from amax"},
                                             {"to data", "to scale_inv", "to amax"}};

int32_t fp8_storage(const quant_plugin_storage &st, int64_t n, StorageArg which, Fp8Dir *out, quant_plugin_error *err) {
  if (st.num_buffers == 0) return QUANT_OK;
  const char *const *names = kStorageNames[which];
  LQ_TRY(get_buffer(st, QUANT_BUFFER_DATA, names[0], n, (void **)&out->data, err));
  LQ_TRY(get_buffer(st, QUANT_BUFFER_SCALE_INV, names[1], 1, (void **)&out->scale_inv, err));
  LQ_TRY(get_buffer(st, QUANT_BUFFER_AMAX, names[2], 1, (void **)&out->amax, err));
  return QUANT_OK;
}

int32_t element_of(const quant_plugin_params *p, Fp8 *f, quant_plugin_error *err) {
  switch (p->element) {
    case QUANT_ELEMENT_DEFAULT:
    case QUANT_ELEMENT_E4M3: *f = Fp8::E4M3; return QUANT_OK;
    case QUANT_ELEMENT_E5M2: *f = Fp8::E5M2; return QUANT_OK;
  }
  return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "params.element: %d is not e4m3 or e5m2", p->element);
}

}  // namespace

// The global amax of an input (shared with nvfp4): zeroes *out, then reduces.
int32_t global_amax(const quant_plugin_tensor &in, InType t, float *out, cudaStream_t s, quant_plugin_error *err) {
  int64_t n = in.shape[0] * in.shape[1];
  switch (t) {
    case InType::F32: return launch_amax<float>(in.data, n, (uint32_t *)out, s, err);
    case InType::BF16: return launch_amax<__nv_bfloat16>(in.data, n, (uint32_t *)out, s, err);
    case InType::F16: return launch_amax<__half>(in.data, n, (uint32_t *)out, s, err);
  }
  return fail(err, QUANT_ERROR_INTERNAL, "input type");
}

}  // namespace lq

using namespace lq;

// amax of fp8 (and of the MX formats, which report the plain global amax too).
extern "C" int32_t lq_global_amax(const quant_plugin_amax_args *a, quant_plugin_error *err) {
  InType t;
  LQ_TRY(input_type(a->input, "input", &t, err));
  LQ_TRY(check_device(a->input, "input", err));
  LQ_TRY(check_device(a->out, "out", err));
  if (numel(a->out) != 2) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "out: want 2 elements");
  cudaStream_t s = stream_of(a->stream);
  float *out = (float *)a->out.data;
  float *slot = (a->want & QUANT_USAGE_ROWWISE) ? out : out + 1;
  LQ_TRY(global_amax(a->input, t, slot, s, err));
  if ((a->want & QUANT_USAGE_ROWWISE) && (a->want & QUANT_USAGE_COLUMNWISE))
    LQ_CUDA(cudaMemcpyAsync(out + 1, out, sizeof(float), cudaMemcpyDeviceToDevice, s), "copying the amax");
  return QUANT_OK;
}

extern "C" int32_t lq_fp8_amax(const quant_plugin_amax_args *a, quant_plugin_error *err) { return lq_global_amax(a, err); }

namespace {

// One quantize's cast parameters from its arguments (the single and the
// grouped quantize). *first_amax: the first present direction's amax buffer.
int32_t fp8_cast_params(const quant_plugin_quantize_args *a, InType *t, Fp8 *f, CastParams *pp, float **first_amax,
                        float **second_amax, quant_plugin_error *err) {
  LQ_TRY(input_type(a->input, "input", t, err));
  LQ_TRY(check_device(a->input, "input", err));
  LQ_TRY(element_of(a->params, f, err));
  int64_t m = a->input.shape[0], k = a->input.shape[1], n = m * k;
  Fp8Dir row, col;
  LQ_TRY(fp8_storage(a->out[0], n, kRowwise, &row, err));
  LQ_TRY(fp8_storage(a->out[1], n, kColumnwise, &col, err));
  if (row.data == nullptr && col.data == nullptr) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "out: no direction asked");
  CastParams &p = *pp;
  p = CastParams{};
  p.in = a->input.data;
  p.m = m;
  p.k = k;
  p.row = row.data;
  p.col = col.data;
  p.row_scale_inv = row.scale_inv;
  p.col_scale_inv = col.scale_inv;
  p.row_amax = row.amax;
  p.col_amax = col.amax;
  p.fp8_max = *f == Fp8::E4M3 ? 448.0f : 57344.0f;
  p.eps = a->params->amax_epsilon;
  p.pow2 = a->params->force_pow2_scales;
  *first_amax = row.amax ? row.amax : col.amax;
  *second_amax = row.amax && col.amax ? col.amax : nullptr;
  if (a->has_delayed_scale) {
    p.delayed = 1;
    p.delayed_scale = a->delayed_scale;
    // A state in device memory (appended fields): scale read and amax staged
    // on the device, nothing for the host to wait for.
    if (a->struct_size >= offsetof(quant_plugin_quantize_args, delayed_amax_dev) + sizeof(float *) && a->delayed_scale_dev != nullptr) {
      if (a->delayed_amax_dev == nullptr) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "delayed_amax_dev: NULL with delayed_scale_dev set");
      p.scale_dev = a->delayed_scale_dev;
      p.hist0 = (uint32_t *)a->delayed_amax_dev;
    }
  }
  return QUANT_OK;
}

}  // namespace

extern "C" int32_t lq_fp8_quantize(const quant_plugin_quantize_args *a, quant_plugin_error *err) {
  InType t;
  Fp8 f;
  CastParams p;
  float *first_amax, *second_amax;
  LQ_TRY(fp8_cast_params(a, &t, &f, &p, &first_amax, &second_amax, err));
  int64_t n = p.m * p.k;
  cudaStream_t s = stream_of(a->stream);
  bool small = n <= kSmallN && (p.col == nullptr || ceil_div(p.m, (int64_t)kRT) * ceil_div(p.k, (int64_t)kRT) <= kSmallTiles);
  if (p.delayed) {
    p.amax_accum = (uint32_t *)first_amax;
    // Both directions' amax buffers are reduced into by the kernel: zeroing
    // them first costs the host a quarter of what a device-to-device copy
    // after the kernel does, and the GPU no copy-engine round trip (H100 run
    // 2: 64 MoE tensors "both" took 1.47 ms with the copy, 0.45 ms rowwise).
    if (!small && second_amax) p.amax_accum2 = (uint32_t *)second_amax;
    if (!small) LQ_TRY(zero_words(s, err, first_amax, p.amax_accum2));
  } else if (a->amax_in.data != nullptr) {
    LQ_TRY(check_device(a->amax_in, "options.amax", err));
    if (numel(a->amax_in) != 2 || !dtype_is(a->amax_in.dtype, kDLFloat, 32))
      return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "options.amax: want float32 [2]");
    p.amax_src = (const float *)a->amax_in.data + (p.row ? 0 : 1);
  } else if (!small) {
    LQ_TRY(global_amax(a->input, t, first_amax, s, err));
    p.amax_src = first_amax;
  }
  int32_t st = QUANT_ERROR_INTERNAL;
  if (small) {
    switch (t) {
      case InType::F32: st = f == Fp8::E4M3 ? launch_small<float, Fp8::E4M3>(p, s, err) : launch_small<float, Fp8::E5M2>(p, s, err); break;
      case InType::BF16:
        st = f == Fp8::E4M3 ? launch_small<__nv_bfloat16, Fp8::E4M3>(p, s, err) : launch_small<__nv_bfloat16, Fp8::E5M2>(p, s, err);
        break;
      case InType::F16: st = f == Fp8::E4M3 ? launch_small<__half, Fp8::E4M3>(p, s, err) : launch_small<__half, Fp8::E5M2>(p, s, err); break;
    }
    return st;
  }
  switch (t) {
    case InType::F32: st = f == Fp8::E4M3 ? launch_cast<float, Fp8::E4M3>(p, s, err) : launch_cast<float, Fp8::E5M2>(p, s, err); break;
    case InType::BF16:
      st = f == Fp8::E4M3 ? launch_cast<__nv_bfloat16, Fp8::E4M3>(p, s, err) : launch_cast<__nv_bfloat16, Fp8::E5M2>(p, s, err);
      break;
    case InType::F16: st = f == Fp8::E4M3 ? launch_cast<__half, Fp8::E4M3>(p, s, err) : launch_cast<__half, Fp8::E5M2>(p, s, err); break;
  }
  return st;
}

namespace {

// One update's arguments checked (what names an argument: `arg` before it,
// "" for a single update, "items[i]." in a group) into *u.
int32_t update_item(const quant_plugin_delayed_update_args *a, const char *arg, UpdateItem *u, quant_plugin_error *err) {
  if (a->struct_size < sizeof(quant_plugin_delayed_update_args))
    return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%sargs: struct_size %u is too small", arg, a->struct_size);
  char what[48];
  snprintf(what, sizeof what, "%sscale", arg);
  LQ_TRY(check_device(a->scale, what, err));
  snprintf(what, sizeof what, "%shistory", arg);
  LQ_TRY(check_device(a->history, what, err));
  if (numel(a->scale) != 1 || !dtype_is(a->scale.dtype, kDLFloat, 32) || a->scale.data == nullptr)
    return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%sscale: want float32 [1]", arg);
  const int64_t n = numel(a->history);
  if (n < 1 || !dtype_is(a->history.dtype, kDLFloat, 32) || a->history.data == nullptr)
    return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%shistory: want float32 [L], L >= 1", arg);
  if (!(a->reduced_amax >= 0.0f)) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%sreduced_amax: %g must be >= 0", arg, a->reduced_amax);
  *u = UpdateItem{(float *)a->scale.data, (float *)a->history.data, n, a->reduced_amax, a->scaled_max, a->has_reduced,
                  a->params->amax_compute_algo == QUANT_AMAX_MOST_RECENT};
  return QUANT_OK;
}

}  // namespace

extern "C" int32_t lq_fp8_delayed_update(const quant_plugin_delayed_update_args *a, quant_plugin_error *err) {
  UpdateGroup<1> g{1, {}};
  LQ_TRY(update_item(a, "", &g.it[0], err));
  launch_kernel(delayed_update_kernel<1>, 1, kUpdateThreads, 0, stream_of(a->stream), g);
  LQ_LAUNCHED("delayed-scaling update kernel launch");
  return QUANT_OK;
}

// A group of updates in one launch per kMaxUpdates of them: the items'
// buffers must not overlap (one CTA each runs at the same time as the
// others), which the sequence of single updates the group stands for would
// not need, so an overlap is refused.
extern "C" int32_t lq_fp8_delayed_update_grouped(const quant_plugin_delayed_update_grouped_args *a, quant_plugin_error *err) {
  if (a->struct_size < sizeof(quant_plugin_delayed_update_grouped_args))
    return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "args: struct_size %u is too small", a->struct_size);
  std::vector<UpdateItem> its(a->count);
  for (uint32_t i = 0; i < a->count; i++) {
    char arg[32];
    snprintf(arg, sizeof arg, "items[%u].", i);
    LQ_TRY(update_item(&a->items[i], arg, &its[i], err));
  }
  auto range = [](const UpdateItem &u, int which, uintptr_t *lo, uintptr_t *hi) {
    *lo = reinterpret_cast<uintptr_t>(which ? u.h : u.scale);
    *hi = *lo + 4 * (which ? u.n : 1);
  };
  for (uint32_t i = 0; i < a->count; i++)
    for (uint32_t j = i + 1; j < a->count; j++)
      for (int bi = 0; bi < 2; bi++)
        for (int bj = 0; bj < 2; bj++) {
          uintptr_t l1, h1, l2, h2;
          range(its[i], bi, &l1, &h1);
          range(its[j], bj, &l2, &h2);
          if (l1 < h2 && l2 < h1)
            return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "items[%u].%s and items[%u].%s overlap: one launch updates them together", j,
                        bj ? "history" : "scale", i, bi ? "history" : "scale");
        }
  cudaStream_t s = stream_of(a->stream);
  for (uint32_t i0 = 0; i0 < a->count; i0 += kMaxUpdates) {
    UpdateGroup<kMaxUpdates> g{};
    g.count = (int)(a->count - i0 < (uint32_t)kMaxUpdates ? a->count - i0 : kMaxUpdates);
    for (int i = 0; i < g.count; i++) g.it[i] = its[i0 + i];
    launch_kernel(delayed_update_kernel<kMaxUpdates>, (unsigned)g.count, kUpdateThreads, 0, s, g);
    LQ_LAUNCHED("grouped delayed-scaling update kernel launch");
  }
  return QUANT_OK;
}

namespace {
template <typename O>
int32_t launch_dequant(const uint8_t *q, const float *si, void *out, int64_t m, int64_t k, bool colwise, Fp8 f, cudaStream_t s,
                       quant_plugin_error *err) {
  if (!colwise) {
    int64_t blocks = ceil_div(m * k > 0 ? m * k : 1, 256);
    if (blocks > grid_cap()) blocks = grid_cap();
    if (f == Fp8::E4M3) launch_kernel(dequant_flat_kernel<O, Fp8::E4M3>, (unsigned)blocks, 256, 0, s, q, si, (O *)out, m * k);
    else launch_kernel(dequant_flat_kernel<O, Fp8::E5M2>, (unsigned)blocks, 256, 0, s, q, si, (O *)out, m * k);
  } else {
    int64_t tiles = ceil_div(m, 32) * ceil_div(k, 32);
    if (tiles < 1) tiles = 1;
    dim3 block(32, 8);
    if (f == Fp8::E4M3) launch_kernel(dequant_transposed_kernel<O, Fp8::E4M3>, (unsigned)tiles, block, 0, s, q, si, (O *)out, m, k);
    else launch_kernel(dequant_transposed_kernel<O, Fp8::E5M2>, (unsigned)tiles, block, 0, s, q, si, (O *)out, m, k);
  }
  LQ_LAUNCHED("fp8 dequantize kernel launch");
  return QUANT_OK;
}
}  // namespace

extern "C" int32_t lq_fp8_dequantize(const quant_plugin_dequantize_args *a, quant_plugin_error *err) {
  LQ_TRY(check_device(a->out, "out", err));
  InType ot;
  LQ_TRY(input_type(a->out, "out", &ot, err));
  Fp8 f;
  LQ_TRY(element_of(a->params, &f, err));
  Fp8Dir d;
  bool colwise = a->direction == QUANT_DIRECTION_COLUMNWISE;
  LQ_TRY(fp8_storage(a->storage, a->m * a->k, colwise ? kColumnwise : kRowwise, &d, err));
  if (d.data == nullptr) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "storage: empty");
  cudaStream_t s = stream_of(a->stream);
  switch (ot) {
    case InType::F32: return launch_dequant<float>(d.data, d.scale_inv, a->out.data, a->m, a->k, colwise, f, s, err);
    case InType::BF16: return launch_dequant<__nv_bfloat16>(d.data, d.scale_inv, a->out.data, a->m, a->k, colwise, f, s, err);
    case InType::F16: return launch_dequant<__half>(d.data, d.scale_inv, a->out.data, a->m, a->k, colwise, f, s, err);
  }
  return fail(err, QUANT_ERROR_INTERNAL, "output type");
}

extern "C" int32_t lq_fp8_derive(const quant_plugin_derive_args *a, quant_plugin_error *err) {
  if (a->from_direction != QUANT_DIRECTION_ROWWISE || a->to_direction != QUANT_DIRECTION_COLUMNWISE)
    return fail(err, QUANT_ERROR_STATE, "fp8: only columnwise data can be derived, from rowwise data");
  Fp8Dir from, to;
  int64_t n = a->m * a->k;
  LQ_TRY(fp8_storage(a->from, n, kFrom, &from, err));
  LQ_TRY(fp8_storage(a->to, n, kTo, &to, err));
  if (from.data == nullptr || to.data == nullptr) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "storage: empty");
  cudaStream_t s = stream_of(a->stream);
  LQ_TRY(transpose_bytes(from.data, to.data, a->m, a->k, s, err));
  LQ_CUDA(cudaMemcpyAsync(to.scale_inv, from.scale_inv, 4, cudaMemcpyDeviceToDevice, s), "copying scale_inv");
  LQ_CUDA(cudaMemcpyAsync(to.amax, from.amax, 4, cudaMemcpyDeviceToDevice, s), "copying amax");
  return QUANT_OK;
}

// Every quantize of the group in three launches per kMaxGroup tensors.
extern "C" int32_t lq_fp8_quantize_grouped(const quant_plugin_quantize_grouped_args *a, quant_plugin_error *err) {
  if (a->count == 0) return QUANT_OK;
  static Fp8Group g;  // 12 KB: not on the stack; guarded by mu
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  cudaStream_t s = stream_of(a->stream);
  InType t0 = InType::BF16;
  Fp8 f0 = Fp8::E4M3;
  bool row0 = false, col0 = false, delayed0 = false;
  for (uint32_t base = 0; base < a->count; base += kMaxGroup) {
    uint32_t n = a->count - base < (uint32_t)kMaxGroup ? a->count - base : (uint32_t)kMaxGroup;
    g.count = 0;
    g.amax_first[0] = g.cast_first[0] = 0;
    for (uint32_t j = 0; j < n; j++) {
      const quant_plugin_quantize_args *q = &a->items[base + j];
      InType t;
      Fp8 f;
      float *first, *second;
      CastParams &p = g.t[g.count];
      LQ_TRY(fp8_cast_params(q, &t, &f, &p, &first, &second, err));
      if (q->amax_in.data != nullptr) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "items[%u].amax_in: a grouped quantize takes none", base + j);
      if (q->stream != a->stream) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "items[%u].stream: not the group's stream", base + j);
      bool row = p.row != nullptr, col = p.col != nullptr, delayed = p.delayed != 0;
      if (base + j == 0) {
        t0 = t, f0 = f, row0 = row, col0 = col, delayed0 = delayed;
      } else if (t != t0 || f != f0 || row != row0 || col != col0 || delayed != delayed0) {
        return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "items[%u]: another dtype, element, scaling or directions than items[0]", base + j);
      }
      p.amax_accum = (uint32_t *)first;
      if (delayed) p.amax_accum2 = (uint32_t *)second;
      else p.amax_src = first;
      int64_t elems = p.m * p.k;
      if (elems == 0) {
        LQ_TRY(lq_fp8_quantize(q, err));  // only its scalars: as a single quantize writes them
        continue;
      }
      int64_t units = col ? ceil_div(p.m, kRT) * ceil_div(p.k, kRT) : ceil_div(elems, kFlatUnit);
      g.amax_first[g.count + 1] = g.amax_first[g.count] + ceil_div(elems, kAmaxUnit);
      g.cast_first[g.count + 1] = g.cast_first[g.count] + units;
      g.count++;
    }
    if (g.count == 0) continue;
    if (g.cast_first[g.count] > 0x7FFFFFFF || g.amax_first[g.count] > 0x7FFFFFFF) return fail(err, QUANT_ERROR_UNSUPPORTED, "group: too many tiles");
    int32_t st = QUANT_ERROR_INTERNAL;
    switch (t0) {
      case InType::F32:
        st = f0 == Fp8::E4M3 ? launch_group<float, Fp8::E4M3>(g, row0, col0, delayed0, s, err) : launch_group<float, Fp8::E5M2>(g, row0, col0, delayed0, s, err);
        break;
      case InType::BF16:
        st = f0 == Fp8::E4M3 ? launch_group<__nv_bfloat16, Fp8::E4M3>(g, row0, col0, delayed0, s, err)
                             : launch_group<__nv_bfloat16, Fp8::E5M2>(g, row0, col0, delayed0, s, err);
        break;
      case InType::F16:
        st = f0 == Fp8::E4M3 ? launch_group<__half, Fp8::E4M3>(g, row0, col0, delayed0, s, err) : launch_group<__half, Fp8::E5M2>(g, row0, col0, delayed0, s, err);
        break;
    }
    LQ_TRY(st);
  }
  return QUANT_OK;
}
