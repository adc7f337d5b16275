// FP8 block scaling ("fp8_block", DeepSeek style; spec §6): E4M3 with an FP32
// scale per 1×128 block (block_dims 1) or 128×128 tile (block_dims 2); rowwise
// data [M, K], columnwise data transposed [K, M]. Equal byte for byte to
// plugins/fp8's block kernels:
//
//	amax      = max |x| over the block (NaN ignored; ragged edge blocks are shorter)
//	scale     = ScaleFromAmax(amax, 448, pow2 = !fp32_scales, amax_epsilon, max of the input dtype)
//	scale_inv = fl32(1/scale);  q = RNE_sat_e4m3(fl32(x · scale))
//
// One pass: a resident grid of CTAs walks the 128×128 tiles, prefetching the
// next tile into shared memory while it casts the current one and writes both
// directions; the columnwise amaxes and the transposed codes go through shared
// memory. A columnwise direction at a token count M that is not a multiple
// of 16 walks strips of 64 or 128 columns down M instead
// (fp8_block_strip_kernel), so that the transposed rows go out as aligned
// stores.
#include <float.h>

#include <mutex>
#include <type_traits>

#include "common.cuh"

namespace lq {
namespace {

constexpr int kThreads = 256, kTile = 128;

struct BlockScales {
  float *buf = nullptr;
  int64_t stride = 0;  // buffer row length (a multiple of 4)
  int64_t valid = 0;   // entries of a row the layout uses; the rest, up to stride, are 0 (zeroPadding)
  int two_d = 0;
  // 1D: (i = data row, j = block) at j*stride + i; 2D: (i, j) tile at i*stride + j.
  __device__ __forceinline__ int64_t index(int64_t i, int64_t j) const { return two_d ? i * stride + j : j * stride + i; }
};

struct BlockParams {
  const void *in;
  int64_t m, k;
  uint8_t *row, *col;
  BlockScales row_s, col_s;
  float eps, vfi;
  int pow2;
  int vec;      // RowLoad of the input rows (kRowsShifted: 16-bit rows at any even offset)
  int row_vec;  // rowwise rows 8-byte aligned (k % 8 == 0): plain 8-byte stores
  int col_vec;  // transposed rows 16-byte aligned (m % 16 == 0): plain 16-byte stores
  int row_flat; // 16-bit rows at any even offset (kRowsShifted, input 16-byte aligned) with the rowwise data 8-byte aligned: flat_tile_2d
};

__device__ __forceinline__ void block_scale(const BlockParams &p, uint32_t amax_bits, float *scale, float *scale_inv) {
  *scale = scale_from_amax(__uint_as_float(amax_bits), 448.0f, p.pow2 != 0, p.eps, p.vfi);
  *scale_inv = __frcp_rn(*scale);
}

// Elements per row of an input stage: 16-bit rows at any even offset
// (kRowsShifted, K not a multiple of 8: spec §14) are copied as the 17
// aligned 16-byte chunks that cover a row's 128 elements, so the stage row has
// room for one more chunk; 32-bit input is staged only with aligned rows.
template <typename T>
__host__ __device__ constexpr int stage_pitch() { return sizeof(T) == 2 ? kTile + 8 : kTile; }

// Words a thread holds per row of its 8×8 piece: 16-bit inputs as the raw
// pairs (element 2j in the low half of word j), 32-bit ones as float bits.
// Raw words rather than 64 floats: half the registers for 16-bit inputs,
// and one packed max per two elements for the block maxima.
template <typename T>
__host__ __device__ constexpr int words_of() { return sizeof(T) == 2 ? 4 : 8; }


// Whether the tile at (r0, c0) is cast from a prefetched stage: inside the
// tensor, with vector-loadable rows, and (shifted rows) the last row's 17th
// chunk ending inside the tensor. Thread t holds rows 8·(t/16) .. +7 and
// columns 8·(t%16) .. +7 of a tile.
template <typename T>
__device__ __forceinline__ bool tile_full(const BlockParams &p, int64_t r0, int64_t c0) {
  if (p.vec == kRowsScalar || r0 + kTile > p.m || c0 + kTile > p.k) return false;
  if (sizeof(T) != 2 || p.vec != kRowsShifted) return p.vec == kRowsAligned;
  const T *x = (const T *)p.in;
  const uintptr_t last = (reinterpret_cast<uintptr_t>(x + (r0 + kTile - 1) * p.k + c0) & ~(uintptr_t)15) + 16 * (kTile / 8 + 1);
  return last <= reinterpret_cast<uintptr_t>(x + p.m * p.k);
}

// Starts the copy of the thread's own 8×8 piece of a full tile into stage
// (row-major 128×128): the thread later reads what it copied (shifted rows:
// and the next lane's first chunk, after a __syncwarp), so its own
// cp.async.wait is the ordering needed, and a warp's rows are rewritten
// only by that warp (or after a CTA barrier where the stage was scratch).
template <typename T>
__device__ __forceinline__ void prefetch_piece(const BlockParams &p, int64_t r0, int64_t c0, T *stage) {
  const int g = threadIdx.x / 16, ch = threadIdx.x % 16;
  const T *row = (const T *)p.in + (r0 + 8 * g) * p.k + c0;  // the thread's first row
  T *dst = stage + 8 * g * stage_pitch<T>() + 8 * ch;
  constexpr int kPer16 = 16 / sizeof(T);
  if (sizeof(T) == 2 && p.vec == kRowsShifted) {
    // The aligned chunks under the row's 128 elements; thread 15 of the row
    // also copies the 17th (read by the shift when the row is not aligned).
#pragma unroll
    for (int i = 0; i < 8; i++) {
      const uint8_t *src = reinterpret_cast<const uint8_t *>(reinterpret_cast<uintptr_t>(row + i * p.k) & ~(uintptr_t)15);
      cp_async16(dst + i * stage_pitch<T>(), src + 16 * ch);
      if (ch == 15) cp_async16(dst + i * stage_pitch<T>() + 8, src + 16 * 16);
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < 8; i++) {
#pragma unroll
    for (int c = 0; c < 8 / kPer16; c++) cp_async16(dst + i * stage_pitch<T>() + c * kPer16, row + i * p.k + 8 * ch + c * kPer16);
  }
}

// The thread's 8×8 piece as words: from the prefetched stage (full tiles;
// shifted rows shifted out of their chunks, the offset the same for the whole
// warp: its two half-warps hold rows 8 apart, 16·K bytes, a multiple of 16,
// so the shift is a switch the warp takes together) or from global memory
// with zeros outside the tensor (edge tiles: whole 8-element pieces as vector
// or shifted loads, the rest element by element).
template <typename T>
__device__ __forceinline__ void load_piece(const BlockParams &p, int64_t r0, int64_t c0, const T *stage, uint32_t (&w)[8][words_of<T>()]) {
  constexpr int W = words_of<T>();
  const T *x = (const T *)p.in;
  const int g = threadIdx.x / 16, ch = threadIdx.x % 16;
  const bool shifted = sizeof(T) == 2 && p.vec == kRowsShifted;
  if (stage != nullptr) {
    const T *srow = stage + 8 * g * stage_pitch<T>();
    if constexpr (sizeof(T) == 2) {
      if (shifted) {
        // Byte offset of row i within its first chunk: rows are 2·K bytes apart.
        const int off0 = (int)(reinterpret_cast<uintptr_t>(x + (r0 + 8 * g) * p.k + c0) & 15), step = (int)((2 * p.k) & 15);
#pragma unroll
        for (int i = 0; i < 8; i++) {
          const uint4 a = reinterpret_cast<const uint4 *>(srow + i * stage_pitch<T>())[ch];
          const uint4 b = reinterpret_cast<const uint4 *>(srow + i * stage_pitch<T>())[ch + 1];
          const uint32_t raw[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
          shift_uniform<4>(raw, (off0 + i * step) & 15, w[i]);
        }
        return;
      }
    }
#pragma unroll
    for (int i = 0; i < 8; i++) {
#pragma unroll
      for (int q = 0; q < W / 4; q++) {
        const uint4 u = *reinterpret_cast<const uint4 *>(srow + i * stage_pitch<T>() + 8 * ch + q * (16 / sizeof(T)));
        w[i][4 * q] = u.x, w[i][4 * q + 1] = u.y, w[i][4 * q + 2] = u.z, w[i][4 * q + 3] = u.w;
      }
    }
    return;
  }
  const int64_t gc = c0 + 8 * ch;
#pragma unroll
  for (int i = 0; i < 8; i++) {
    const int64_t r = r0 + 8 * g + i;
    const T *src = x + r * p.k + gc;
    const bool whole = r < p.m && gc + 8 <= p.k;
    if (whole && p.vec == kRowsAligned) {
#pragma unroll
      for (int q = 0; q < W / 4; q++) {
        const uint4 u = __ldg(reinterpret_cast<const uint4 *>(src) + q);
        w[i][4 * q] = u.x, w[i][4 * q + 1] = u.y, w[i][4 * q + 2] = u.z, w[i][4 * q + 3] = u.w;
      }
      continue;
    }
    if constexpr (sizeof(T) == 2) {
      if (whole && shifted && shifted_fits<4>(reinterpret_cast<const uint16_t *>(src), x + p.m * p.k)) {
        load_shifted<4>(reinterpret_cast<const uint16_t *>(src), w[i]);
        continue;
      }
#pragma unroll
      for (int j = 0; j < 4; j++) {
        const uint16_t *s16 = reinterpret_cast<const uint16_t *>(src);
        const uint32_t lo = r < p.m && gc + 2 * j < p.k ? s16[2 * j] : 0u, hi = r < p.m && gc + 2 * j + 1 < p.k ? s16[2 * j + 1] : 0u;
        w[i][j] = lo | (hi << 16);
      }
    } else {
#pragma unroll
      for (int e = 0; e < 8; e++) w[i][e] = r < p.m && gc + e < p.k ? reinterpret_cast<const uint32_t *>(src)[e] : 0u;
    }
  }
}

// Bank-conflict-free shared-memory positions. The column partial maxima
// (32-bit input): writers (16 lanes, columns 8ch+e, fixed e) would all hit 4
// banks at stride 8 without the pad word per 32; 16-bit input writes its
// packed column pairs as one 16-byte store per thread, words 4ch .. 4ch+3.
// The transposed codes: writers store 8 bytes at row 8ch+e, word 2g; readers
// load 16 bytes of 4 consecutive rows; the XOR of the word with 2·(c/8 mod
// 16) spreads the writers over all banks and that with 8·(c mod 4) the
// readers (it keeps 8-byte pairs and 16-byte groups whole: a group comes back
// with its two halves swapped when bit 1 of the swizzle is set).
__device__ __forceinline__ int part_index(int c) { return c + (c >> 5); }
__device__ __forceinline__ int qt_swizzle(int c) { return (2 * ((c >> 3) & 15)) ^ (8 * (c & 3)); }

// The columnwise scratch of one tile. It lives in the tile's own input stage,
// which every thread has read into registers by then (a barrier separates
// the two).
struct BlockScratch {
  uint32_t part[kThreads / 16][kTile + 4];  // 32-bit input: column partial maxima at part_index(column)
  uint32_t qt[kTile][kTile / 4];            // codes of column c, rows 4w..4w+3, at word w ^ qt_swizzle(c)
};

// The rest of one CTA's shared memory.
// 16-bit input keeps its column partial maxima (packed column pairs) here
// rather than in the stage, so that no barrier has to wait for every thread
// to finish reading the stage before they are written (3 CTAs of 73 KB
// still fit in an SM's 228 KB).
struct BlockShared {
  float colscale[kTile];
  uint32_t red[kThreads / 32];
  uint32_t part16[kThreads / 16][kTile / 2 + 4];  // column pair c/2 at word c/2 (16-byte rows for the writers' 16-byte stores)
};

// Input stages per CTA: the tile being cast and the next one in flight.
// H100, 8192²: three stages at 2 CTAs per SM (110-128 registers, 104 KB)
// left DRAM 68 % busy; two stages of 35 KB let 3 CTAs fit per SM where the
// registers do (16-bit input: ≤ 80). Against three stages at 2 CTAs per SM
// with this kernel (H100, same run): within 1 % at 8192² except both
// directions, where three stages were 1-2 % ahead; 3-10 % behind at 8191²
// rowwise.
constexpr int kStages = 2;
template <typename T>
__host__ __device__ constexpr int min_blocks() { return sizeof(T) == 2 ? 3 : 1; }

// Stage bytes per tile of input type T.
template <typename T>
__host__ __device__ constexpr size_t stage_bytes() { return (size_t)kTile * stage_pitch<T>() * sizeof(T); }
template <typename T>
__host__ __device__ constexpr size_t block_smem() { return kStages * stage_bytes<T>() + sizeof(BlockShared); }
static_assert(sizeof(BlockScratch) <= (size_t)kTile * kTile * 2, "the scratch must fit in a 16-bit input stage");

__device__ __forceinline__ void zero_pad(const BlockScales &s, int64_t row) {
  if (row < 0) return;
  for (int64_t j = s.valid; j < s.stride; j++) s.buf[row * s.stride + j] = 0.0f;
}

// Words j of the staged chunks u (the thread's own) and t (the row's 17th),
// elements 0 .. A−1 from t where sel (all ones in lane ch = 0 of a row, else
// zero); sel_lo = sel & 0xFFFF.
template <int A>
__device__ __forceinline__ void flat_pick(const uint4 &u, const uint4 &t, uint32_t sel, uint32_t sel_lo, uint32_t (&w)[4]) {
  const uint32_t uw[4] = {u.x, u.y, u.z, u.w}, tw[4] = {t.x, t.y, t.z, t.w};
#pragma unroll
  for (int j = 0; j < 4; j++) {
    if (2 * j + 2 <= A) w[j] = (tw[j] & sel) | (uw[j] & ~sel);
    else if (2 * j + 1 == A) w[j] = (tw[j] & sel_lo) | (uw[j] & ~sel_lo);
    else w[j] = uw[j];
  }
}

// A full tile of fp8_block 128×128, rowwise alone, from 16-bit rows at any
// even offset (an odd K, say: spec §14) with the rowwise data 8-byte aligned
// (BlockParams::row_flat). Rowwise data [M, K] at pitch K holds the code of
// input element f at byte f (the flat frame of fp8_block_rows_kernel and
// mx8_flat_tile), so the row's staged aligned chunk ch (8 elements, tile
// columns 8ch − a .. 8ch − a + 7, a the row's offset in elements) is the
// aligned 8-byte word of its codes: no shifts, one aligned store. Chunk 0's
// first a elements are the previous tile's: lane ch = 0 takes the row's 17th
// chunk's first a elements (the tile's last a columns) in their place, and
// its codes go out split, bytes e ≥ a to word 0 and e < a to word 16, one
// byte from each lane ch < 8 of the half-warp. The rows of a warp (8g + i,
// g = 2w and 2w + 1) are 8 apart, 16·K bytes, so a is uniform over the warp
// and its switch (flat_pick) one branch for all lanes. The tile kernel's
// shifted path (load_piece's funnel shifts and store_run8_full's runs) issued
// about twice the aligned instructions here (H200, 8191²: 0.113 ms against
// 0.056 at 8192²; this path 0.108, 13.5 warp instructions per 32 elements,
// latency-bound: bench/RESULTS.md, 2026-11-29 09:55 section, call 2).
template <typename T>
__device__ __forceinline__ void flat_tile_2d(const BlockParams &p, int64_t tr, int64_t tc, const T *stage, BlockShared &sh) {
  const int64_t r0 = tr * kTile, c0 = tc * kTile;
  const int g = threadIdx.x / 16, ch = threadIdx.x % 16;
  const int64_t f0 = (r0 + 8 * g) * p.k + c0;  // flat index of the thread's first row's first element
  const int a0 = (int)(f0 & 7), s = (int)(p.k & 7);  // row i's offset: (a0 + i·s) mod 8
  const uint32_t sel = ch == 0 ? 0xFFFFFFFFu : 0u, sel_lo = sel & 0xFFFFu;
  const T *srow = stage + 8 * g * stage_pitch<T>();
  uint32_t w[8][4];
  uint32_t m = 0;
#pragma unroll
  for (int i = 0; i < 8; i++) {
    const uint4 *row = reinterpret_cast<const uint4 *>(srow + i * stage_pitch<T>());
    const uint4 u = row[ch], t = row[kTile / 8];
    switch ((a0 + i * s) & 7) {
      case 0: flat_pick<0>(u, t, sel, sel_lo, w[i]); break;
      case 1: flat_pick<1>(u, t, sel, sel_lo, w[i]); break;
      case 2: flat_pick<2>(u, t, sel, sel_lo, w[i]); break;
      case 3: flat_pick<3>(u, t, sel, sel_lo, w[i]); break;
      case 4: flat_pick<4>(u, t, sel, sel_lo, w[i]); break;
      case 5: flat_pick<5>(u, t, sel, sel_lo, w[i]); break;
      case 6: flat_pick<6>(u, t, sel, sel_lo, w[i]); break;
      default: flat_pick<7>(u, t, sel, sel_lo, w[i]); break;
    }
#pragma unroll
    for (int j = 0; j < 4; j++) m = mag_acc<T>(m, w[i][j]);
  }
  uint32_t bits = warp_max(mag_bits_of<T>(m));
  if ((threadIdx.x & 31) == 0) sh.red[threadIdx.x >> 5] = bits;
  __syncthreads();
  bits = sh.red[0];
#pragma unroll
  for (int k = 1; k < kThreads / 32; k++) bits = max(bits, sh.red[k]);
  float sc, si;
  block_scale(p, bits, &sc, &si);
  if (threadIdx.x == 0) p.row_s.buf[p.row_s.index(tr, tc)] = si;
#pragma unroll
  for (int i = 0; i < 8; i++) {
    uint32_t c[4];
#pragma unroll
    for (int j = 0; j < 4; j++) c[j] = fp8x2<Fp8::E4M3>(__fmul_rn(elem<T>(w[i], 2 * j), sc), __fmul_rn(elem<T>(w[i], 2 * j + 1), sc));
    const uint2 v = make_uint2(c[0] | (c[1] << 16), c[2] | (c[3] << 16));
    const int a = (a0 + i * s) & 7;
    uint8_t *word0 = p.row + (f0 + i * p.k - a);  // the row's aligned word 0
    if (ch != 0 || a == 0) *reinterpret_cast<uint2 *>(word0 + 8 * ch) = v;
    const uint32_t x = __shfl_sync(0xFFFFFFFFu, v.x, 0, 16), y = __shfl_sync(0xFFFFFFFFu, v.y, 0, 16);
    if (a != 0 && ch < 8) word0[(ch < a ? kTile : 0) + ch] = (uint8_t)((ch < 4 ? x : y) >> (8 * (ch & 3)));
  }
}

// One tile (tr, tc): the thread's 8×8 values come from the prefetched stage
// (full tiles) or straight from global memory with zeros outside the tensor.
template <typename T, bool ROW, bool COL, bool TWO_D>
__device__ __forceinline__ void block_tile(const BlockParams &p, int64_t tr, int64_t tc, const T *stage, BlockScratch &scr,
                                           BlockShared &sh) {
  constexpr int W = words_of<T>();
  const int64_t r0 = tr * kTile, c0 = tc * kTile;
  const bool full = stage != nullptr;
  if (threadIdx.x == 0) {
    // The padding of each scale row (at most 3 entries past valid) is zeroed
    // by the one tile that writes the row's last entry, instead of a 2-D
    // memset per call: rows run along k for rowwise 2-D and columnwise 1-D
    // scales, along m for the other two.
    bool last_c = c0 + kTile >= p.k, last_r = r0 + kTile >= p.m;
    if (ROW) zero_pad(p.row_s, TWO_D ? (last_c ? tr : -1) : (last_r ? tc : -1));
    if (COL) zero_pad(p.col_s, TWO_D ? (last_r ? tc : -1) : (last_c ? tr : -1));
  }
  if constexpr (TWO_D && ROW && !COL && sizeof(T) == 2) {
    if (full && p.row_flat) return flat_tile_2d<T>(p, tr, tc, stage, sh);
  }
  const int g = threadIdx.x / 16, ch = threadIdx.x % 16;
  const int64_t gc = c0 + 8 * ch;
  uint32_t w[8][W];
  load_piece<T>(p, r0, c0, stage, w);
  float rs[8];  // per-row (1D) or tile (2D) scale
  if (TWO_D) {
    uint32_t m = 0;
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
      for (int j = 0; j < W; j++) m = mag_acc<T>(m, w[i][j]);
    uint32_t bits = warp_max(mag_bits_of<T>(m));
    if ((threadIdx.x & 31) == 0) sh.red[threadIdx.x >> 5] = bits;
    __syncthreads();  // also: every piece is in registers, the stage may become scratch
    bits = sh.red[0];
#pragma unroll
    for (int k = 1; k < kThreads / 32; k++) bits = max(bits, sh.red[k]);
    float s, si;
    block_scale(p, bits, &s, &si);
#pragma unroll
    for (int i = 0; i < 8; i++) rs[i] = s;
    if (threadIdx.x == 0) {
      if (ROW) p.row_s.buf[p.row_s.index(tr, tc)] = si;
      if (COL) p.col_s.buf[p.col_s.index(tc, tr)] = si;
    }
  } else if (ROW) {
    // Row maxima over the 16 lanes of a row, as a butterfly that halves the
    // rows each step (8 shuffles, not 4 per row): afterwards lanes 2i and
    // 2i+1 hold row i's, compute its scale once, and the others get it by a
    // shuffle (one scale_from_amax per lane instead of 8).
    uint32_t ra[8];
#pragma unroll
    for (int i = 0; i < 8; i++) {
      uint32_t m = 0;
#pragma unroll
      for (int j = 0; j < W; j++) m = mag_acc<T>(m, w[i][j]);
      ra[i] = mag_bits_of<T>(m);
    }
    const bool b3 = ch & 8, b2 = ch & 4, b1 = ch & 2;
    uint32_t h[4], q[2];
#pragma unroll
    for (int k = 0; k < 4; k++) h[k] = max(b3 ? ra[4 + k] : ra[k], __shfl_xor_sync(0xFFFFFFFFu, b3 ? ra[k] : ra[4 + k], 8));
#pragma unroll
    for (int k = 0; k < 2; k++) q[k] = max(b2 ? h[2 + k] : h[k], __shfl_xor_sync(0xFFFFFFFFu, b2 ? h[k] : h[2 + k], 4));
    uint32_t a = max(b1 ? q[1] : q[0], __shfl_xor_sync(0xFFFFFFFFu, b1 ? q[0] : q[1], 2));
    a = max(a, __shfl_xor_sync(0xFFFFFFFFu, a, 1));  // row 4·b3 + 2·b2 + b1 = ch/2, all 16 lanes
    float s, si;
    block_scale(p, a, &s, &si);
    const int64_t rr = r0 + 8 * g + (ch >> 1);
    if ((ch & 1) == 0 && rr < p.m) p.row_s.buf[p.row_s.index(rr, tc)] = si;
#pragma unroll
    for (int i = 0; i < 8; i++) rs[i] = __shfl_sync(0xFFFFFFFFu, s, 2 * i, 16);
  }
  // Row codes: rowwise data, and (2D) the columns' codes transposed, which
  // keeps them in rc; otherwise each row is cast where it is stored (16
  // registers fewer: 1-D both spilled at the 80 of 3 CTAs per SM).
  auto row_codes = [&](int i) {
    uint32_t c[4];
#pragma unroll
    for (int j = 0; j < 4; j++) c[j] = fp8x2<Fp8::E4M3>(__fmul_rn(elem<T>(w[i], 2 * j), rs[i]), __fmul_rn(elem<T>(w[i], 2 * j + 1), rs[i]));
    return make_uint2(c[0] | (c[1] << 16), c[2] | (c[3] << 16));
  };
  uint2 rc[8];
  if (ROW) {
    uint8_t *dst = p.row + (r0 + 8 * g) * p.k + gc;
#pragma unroll
    for (int i = 0; i < 8; i++) {
      const uint2 v = row_codes(i);
      if (TWO_D && COL) rc[i] = v;
      if (full && p.row_vec) {
        *reinterpret_cast<uint2 *>(dst + i * p.k) = v;
      } else if (full) {
        // An interior tile of a ragged K (spec §14): each half-warp's row is
        // one whole run (no lengths, no bound checks).
        store_run8_full<16>(dst + i * p.k, v);
      } else {
        // The 16 threads of a row write its codes as one run (K or the
        // row's start not a multiple of 8: spec §14).
        const int64_t r = r0 + 8 * g + i, left = p.k - gc;
        const int n = r < p.m ? (left >= 8 ? 8 : left > 0 ? (int)left : 0) : 0;
        store_run<8>(dst + i * p.k, (uint64_t)v.x | ((uint64_t)v.y << 32), n, 1, ch == 0, ch == 15);
      }
    }
  } else if (TWO_D && COL) {
#pragma unroll
    for (int i = 0; i < 8; i++) rc[i] = row_codes(i);
  }
  if (COL) {
    if (TWO_D) {
      // One scale per tile: the columns' codes are the rows' transposed
      // (column 4h+e, rows 0..3 and 4..7).
#pragma unroll
      for (int h = 0; h < 2; h++) {
        uint32_t lo[4], hi[4];
        transpose4x4_bytes(h ? rc[0].y : rc[0].x, h ? rc[1].y : rc[1].x, h ? rc[2].y : rc[2].x, h ? rc[3].y : rc[3].x, lo);
        transpose4x4_bytes(h ? rc[4].y : rc[4].x, h ? rc[5].y : rc[5].x, h ? rc[6].y : rc[6].x, h ? rc[7].y : rc[7].x, hi);
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int c = 8 * ch + 4 * h + e;
          *reinterpret_cast<uint2 *>(&scr.qt[c][(2 * g) ^ qt_swizzle(c)]) = make_uint2(lo[e], hi[e]);
        }
      }
    } else {
      uint32_t ca[W];  // the thread's column maxima over its 8 rows (16-bit: column pairs, packed)
#pragma unroll
      for (int j = 0; j < W; j++) {
        uint32_t m = 0;
#pragma unroll
        for (int i = 0; i < 8; i++) m = mag_acc<T>(m, w[i][j]);
        ca[j] = m;
      }
      if constexpr (W == 4) {
        *reinterpret_cast<uint4 *>(&sh.part16[g][4 * ch]) = make_uint4(ca[0], ca[1], ca[2], ca[3]);
      } else {
        __syncthreads();  // every piece is in registers: the stage becomes scratch
#pragma unroll
        for (int e = 0; e < 8; e++) scr.part[g][part_index(8 * ch + e)] = ca[e];
      }
      __syncthreads();  // (also: every thread has read its piece; the stage may become scratch)
      if (threadIdx.x < kTile) {
        const int c = threadIdx.x;
        uint32_t m;
        if constexpr (W == 4) {
          uint32_t pm = sh.part16[0][c >> 1];
#pragma unroll
          for (int j = 1; j < kThreads / 16; j++) pm = vmax_u16x2(pm, sh.part16[j][c >> 1]);  // magnitudes, no NaN: integer order
          m = mag16_bits<T>((c & 1) ? pm >> 16 : pm & 0xFFFFu);
        } else {
          m = scr.part[0][part_index(c)];
#pragma unroll
          for (int j = 1; j < kThreads / 16; j++) m = max(m, scr.part[j][part_index(c)]);
        }
        float s, si;
        block_scale(p, m, &s, &si);
        sh.colscale[c] = s;
        if (c0 + c < p.k) p.col_s.buf[p.col_s.index(c0 + c, tr)] = si;
      }
      __syncthreads();
      // Codes of column 8ch+e, rows 8g..8g+7, into qt[column][row].
#pragma unroll
      for (int e = 0; e < 8; e++) {
        const float cs = sh.colscale[8 * ch + e];
        uint32_t c4[4];
#pragma unroll
        for (int j = 0; j < 4; j++) c4[j] = fp8x2<Fp8::E4M3>(__fmul_rn(elem<T>(w[2 * j], e), cs), __fmul_rn(elem<T>(w[2 * j + 1], e), cs));
        const int c = 8 * ch + e;
        *reinterpret_cast<uint2 *>(&scr.qt[c][(2 * g) ^ qt_swizzle(c)]) = make_uint2(c4[0] | (c4[1] << 16), c4[2] | (c4[3] << 16));
      }
    }
    __syncthreads();
    // Transposed rows: column c0+c gets 128 bytes.
    if (full && p.col_vec) {
      // Thread t writes half of one, as the 16-byte pieces 2j+h, so that
      // lanes 2i and 2i+1 write one 32-byte sector per store instruction
      // (with pieces 4h+j they wrote half sectors).
      int c = threadIdx.x / 2, h = threadIdx.x % 2;
      int64_t oc = c0 + c;
      int sw = qt_swizzle(c);
#pragma unroll
      for (int j = 0; j < 4; j++) {
        int piece = 2 * j + h;
        uint4 v = *reinterpret_cast<const uint4 *>(&scr.qt[c][(4 * piece) ^ (sw & ~3)]);
        if (sw & 2) v = make_uint4(v.z, v.w, v.x, v.y);
        *reinterpret_cast<uint4 *>(p.col + oc * p.m + r0 + 16 * piece) = v;
      }
    } else {
      // Transposed rows that start anywhere (M not a multiple of 16, spec
      // §14) or end early: each half-warp writes one column's 128 bytes as
      // a run of 8-byte pieces (aligned 8-byte stores, narrower ones at the
      // two ends), 16 columns per pass; in a full tile every run is whole.
      const int l = threadIdx.x & 15;
      const int64_t rows_left = p.m - (r0 + 8 * l);
      const int n = rows_left >= 8 ? 8 : rows_left > 0 ? (int)rows_left : 0;
#pragma unroll 2
      for (int pass = 0; pass < kTile / 16; pass++) {
        const int c = 16 * pass + (threadIdx.x >> 4);
        const int64_t oc = c0 + c;
        const uint2 v = *reinterpret_cast<const uint2 *>(&scr.qt[c][(2 * l) ^ qt_swizzle(c)]);
        if (full) store_run8_full<16>(p.col + oc * p.m + r0 + 8 * l, v);
        else store_run<8>(p.col + oc * p.m + r0 + 8 * l, (uint64_t)v.x | ((uint64_t)v.y << 32), oc < p.k ? n : 0, 1, l == 0, l == 15);
      }
    }
  }
}

// The tiles a launch walks: one tensor's, or a group's (quantize_grouped),
// numbered tensor after tensor.
struct OneTensor {
  BlockParams p;
  int64_t ntiles;
  __device__ __forceinline__ int64_t total() const { return ntiles; }
  __device__ __forceinline__ const BlockParams &locate(int64_t tile, int64_t *local) const {
    *local = tile;
    return p;
  }
};

// Tensors per grouped launch: the group travels as a kernel parameter (up to
// 32 KB since CUDA 12.1).
constexpr int kMaxGroup = 128;

struct TensorGroup {
  int count;
  int64_t first[kMaxGroup + 1];  // first tile of tensor i; first[count] = all tiles
  BlockParams t[kMaxGroup];
  __device__ __forceinline__ int64_t total() const { return first[count]; }
  __device__ __forceinline__ const BlockParams &locate(int64_t tile, int64_t *local) const {
    int lo = 0, hi = count - 1;  // the last i with first[i] <= tile
    while (lo < hi) {
      int mid = (lo + hi + 1) / 2;
      if (first[mid] <= tile) lo = mid;
      else hi = mid - 1;
    }
    *local = tile - first[lo];
    return t[lo];
  }
};

__device__ __forceinline__ int64_t tiles_c_of(const BlockParams &p) { return (p.k + kTile - 1) / kTile; }

// A resident grid walks the tiles; each CTA starts the copy of its next full
// tile into the other shared-memory stage before it works on the current one,
// so that the loads of one tile overlap the arithmetic and stores of the last
// (the one-tile-per-CTA kernel held 64 values per thread in registers, ran 2
// CTAs per SM and left the memory idle while it computed: 48-59 % of copy).
template <typename T, bool ROW, bool COL, bool TWO_D, typename G>
__global__ void __launch_bounds__(kThreads, min_blocks<T>()) fp8_block_kernel(const __grid_constant__ G grp) {
  pdl_wait();
  extern __shared__ __align__(16) uint8_t smem[];
  T *stages = reinterpret_cast<T *>(smem);
  BlockShared &sh = *reinterpret_cast<BlockShared *>(smem + kStages * stage_bytes<T>());
  const int64_t total = grp.total();
  // Tile t's tensor and its tile row and column (32-bit division: a tensor
  // has fewer than 2^31 tiles).
  auto where = [&](int64_t t, int64_t *tr, int64_t *tc) -> const BlockParams & {
    int64_t lt;
    const BlockParams &p = grp.locate(t, &lt);
    const uint32_t tcs = (uint32_t)tiles_c_of(p), q = (uint32_t)lt / tcs;
    *tr = q;
    *tc = (uint32_t)lt - q * tcs;
    return p;
  };
  // Starts the copy of tile t (if it exists and is full) into stage s; bit s
  // of full says whether it did.
  uint32_t full = 0;
  auto prefetch = [&](int64_t t, int s) {
    full &= ~(1u << s);
    if (t < total) {
      int64_t tr, tc;
      const BlockParams &p = where(t, &tr, &tc);
      if (tile_full<T>(p, tr * kTile, tc * kTile)) {
        prefetch_piece<T>(p, tr * kTile, tc * kTile, stages + s * kTile * stage_pitch<T>());
        full |= 1u << s;
      }
    }
    cp_async_commit();
  };
  int64_t tile = blockIdx.x;
#pragma unroll
  for (int s = 0; s < kStages - 1; s++) prefetch(tile + s * (int64_t)gridDim.x, s);
  for (int it = 0; tile < total; tile += gridDim.x, it++) {
    const int cur = it % kStages;
    // Stage (it-1)%kStages was last read (or used as scratch) in iteration
    // it-1, which the barrier at its end closed.
    prefetch(tile + (kStages - 1) * (int64_t)gridDim.x, (it + kStages - 1) % kStages);
    if (kStages == 2) cp_async_wait_1();  // this tile's piece has landed (the later ones may not have)
    else cp_async_wait_2();
    int64_t tr, tc;
    const BlockParams &p = where(tile, &tr, &tc);
    T *stage = stages + cur * kTile * stage_pitch<T>();
    const bool f = (full >> cur) & 1;
    if (f && sizeof(T) == 2 && p.vec == kRowsShifted) __syncwarp();  // a row's 17th chunk is the next lane's copy
    block_tile<T, ROW, COL, TWO_D>(p, tr, tc, f ? stage : nullptr, *reinterpret_cast<BlockScratch *>(stage), sh);
    // The next tiles reuse sh and the scratch; rowwise 1-D tiles share
    // nothing beyond the warp (a warp reads only the rows it copied).
    if (COL || TWO_D) __syncthreads();
    else __syncwarp();
  }
}

// One CTA per tile (the hardware hands tiles to free CTA slots) rather than
// the resident grid: for a tensor of few rounds (below), and for 16-bit rows
// at an odd offset, whose edge tiles (loaded without the stage) cost about 4
// full tiles each, so that the resident grid's CTAs holding one finished
// last (H200, 8191², 128x128 rowwise: 0.108 ms on the resident grid, 0.075
// one CTA per tile; bench/RESULTS.md, 2026-11-29 11:20 section, call 1).
// Groups keep the persistent grid (tile lookups).
inline bool one_cta_per_tile(const OneTensor &one, int64_t ntiles, int resident) {
  return ntiles <= 8 * (int64_t)resident || one.p.vec == kRowsShifted;
}
inline bool one_cta_per_tile(const TensorGroup &, int64_t, int) { return false; }

template <typename T, bool ROW, bool COL, bool TWO_D, typename G>
int32_t launch_b3(const G &grp, int64_t ntiles, cudaStream_t s, quant_plugin_error *err) {
  auto kern = fp8_block_kernel<T, ROW, COL, TWO_D, G>;
  constexpr size_t smem = block_smem<T>();
  // Once per kernel: the dynamic shared-memory limit and how many CTAs fit.
  static const int resident = resident_ctas(kern, kThreads, smem);
  if (resident == 0) return fail(err, QUANT_ERROR_PLUGIN, "fp8_block: the quantize kernel does not fit this GPU (%zu bytes of shared memory)", smem);
  // Every resident CTA, even where the last round is part full (8192²: 4096
  // tiles over 396 CTAs; as few CTAs as keep the 11 rounds, 373, ran 1-4 %
  // slower at 8192² and 4-11 % at 8191² on the H100). A tensor of at most 8
  // rounds of tiles takes one CTA per tile instead: with few rounds the
  // persistent grid's last one runs a third of the SMs' CTAs, while the
  // hardware hands single tiles to whichever CTA slot frees first (H100,
  // 2048×7168 1x128 rowwise / columnwise / both: 74 / 69 / 72 % of copy ->
  // 79 / 75 / 78 %; 4096×8192 85 / 82 / 82 -> 88 / 84 / 86; 8192² unchanged;
  // bench/RESULTS.md). Groups keep the persistent grid (tile lookups).
  unsigned g = (unsigned)(ntiles < resident ? ntiles : resident);
  if (one_cta_per_tile(grp, ntiles, resident)) g = (unsigned)ntiles;
  launch_kernel(kern, g, kThreads, smem, s, grp);
  LQ_LAUNCHED("fp8_block quantize kernel launch");
  return QUANT_OK;
}

template <typename T, bool ROW, bool COL, typename G>
int32_t launch_b2(const G &grp, bool two_d, int64_t ntiles, cudaStream_t s, quant_plugin_error *err) {
  return two_d ? launch_b3<T, ROW, COL, true>(grp, ntiles, s, err) : launch_b3<T, ROW, COL, false>(grp, ntiles, s, err);
}

template <typename T, typename G>
int32_t launch_b(const G &grp, bool row, bool col, bool two_d, int64_t ntiles, cudaStream_t s, quant_plugin_error *err) {
  if (row && col) return launch_b2<T, true, true>(grp, two_d, ntiles, s, err);
  if (row) return launch_b2<T, true, false>(grp, two_d, ntiles, s, err);
  return launch_b2<T, false, true>(grp, two_d, ntiles, s, err);
}

template <typename G>
int32_t launch_typed(InType t, const G &grp, bool row, bool col, bool two_d, int64_t ntiles, cudaStream_t s, quant_plugin_error *err) {
  switch (t) {
    case InType::F32: return launch_b<float>(grp, row, col, two_d, ntiles, s, err);
    case InType::BF16: return launch_b<__nv_bfloat16>(grp, row, col, two_d, ntiles, s, err);
    case InType::F16: return launch_b<__half>(grp, row, col, two_d, ntiles, s, err);
  }
  return fail(err, QUANT_ERROR_INTERNAL, "input type");
}

// ---- Columnwise (and both) at a token count M not a multiple of 16: strips ----
//
// There (spec §14: any M; 16-byte aligned input rows) the transposed rows
// [K, M] start at every offset mod 16, and the tile kernel's 128-byte column
// runs each need shifted partial stores at both ends (H100, 8191×8192: 44 %
// of copy against 86 % at 8192²). This kernel walks strips down M like fp8's
// cast_strip_kernel (common.cuh: StripCols), so that each output row goes
// out as whole 32-byte sectors in the global frame. A chunk of kSH = 128
// rows starts at a multiple of 128 (segments are multiples of kSH rows), so
// it is exactly one 1×128 block of each of its columns, and with strips of
// 128 columns (H = 2 halves of 256 threads, each a StripCols of kSW
// columns) one 128×128 tile and one 1×128 block of each of its rows:
//   1×128 columns: the chunk's column maxima, reduced over the thread's 4
//     rows, the warp's four row groups (shuffles) and the half's 8 warps
//     (shared memory); lane (q, cg) computes the scales of columns 8cg + 2q
//     and 8cg + 2q + 1, and the lanes of its column group get them by shuffles;
//   1×128 rows (both): the row maxima over the 8 lanes of a row piece
//     (shuffles) and the two halves (shared memory);
//   128×128: the chunk's maximum (one scale for both directions).
// One barrier closes the reductions and one the transposed codes in T; the
// first also orders chunk n's stores from T before chunk n + 1's codes, so
// one T buffer per half would do; columnwise 1×128 alone (H = 1) keeps two.
// SHIFTED: 16-bit rows at any even offset (an odd K): each half's chunks
// come staged through shared memory (common.cuh: StripStager), kStripStages
// ahead, instead of kStripDepth chunks of loads held in registers.
// Minimum CTAs a SM for ptxas (0: no hint). The shifted 128x128 instances
// two (64 registers, as ptxas chose unasked before StripStager; without the
// hint 116-122, one CTA a SM).
template <int H, bool TWO_D, bool SHIFTED>
constexpr int strip_min_blocks() { return H == 2 && TWO_D && SHIFTED ? 2 : 0; }

template <typename T, int H, bool ROW, bool TWO_D, bool SHIFTED>
__global__ void __launch_bounds__(kThreads * H, strip_min_blocks<H, TWO_D, SHIFTED>()) fp8_block_strip_kernel(const __grid_constant__ BlockParams p, int strips, int64_t seg_rows) {
  pdl_wait();
  constexpr int NB = H == 1 ? 2 : 1;  // T buffers per half
  constexpr int NW = kThreads / 32;   // warps per half
  __shared__ __align__(16) uint32_t tw[H * NB][kSW * kStripRowWords];
  extern __shared__ __align__(16) uint4 stage_all[];  // SHIFTED: each half's kStripStages staged chunks
  // 1-D: per warp, the chunk's column maxima (16-bit input: packed column
  // pairs, words 0 .. kSW/2 − 1; fp32: float bits); 2-D: word 0, the warp's
  // maximum.
  __shared__ __align__(16) uint32_t part[H * NW][TWO_D ? 1 : kSW];
  __shared__ __align__(16) uint32_t rpart[ROW && !TWO_D ? H : 1][kSH];  // 1-D rows: each half's row maxima
  constexpr int W = words_of<T>();
  constexpr uint32_t kAll = 0xFFFFFFFFu;
  const T *x = (const T *)p.in;
  const int64_t M = p.m, K = p.k;
  const int tid = threadIdx.x % kThreads, half = threadIdx.x / kThreads;
  const int strip = (int)(blockIdx.x % (unsigned)strips);
  const int64_t cs = (int64_t)strip * (kSW * H), c0 = cs + half * kSW;
  const int64_t s0 = (int64_t)(blockIdx.x / (unsigned)strips) * seg_rows;
  const int64_t L = (s0 + seg_rows < M ? s0 + seg_rows : M) - s0;  // rows of this segment
  const int nchunks = (int)((L + kSH - 1) / kSH);
  const StripCols sc(p.col, M, K, c0, s0, tid);
  const int g = sc.g, cg = sc.cg, rl = 4 * g;
  const int warp = tid >> 5, lane = tid & 31, q = lane >> 3, gw = threadIdx.x >> 5;
  constexpr int D = SHIFTED ? 1 : kStripDepth;  // chunks held in registers
  uint32_t raw[D][4][8];
  const StripStager stg(x, K, s0, c0, rl, tid);  // SHIFTED: the thread's staged granules and row offsets
  uint4 *const stage = stage_all + (SHIFTED ? half * kStripStages * kStripStageChunk : 0);
  if constexpr (SHIFTED) {
#pragma unroll
    for (int d = 0; d < kStripStages; d++) {
      if (d < nchunks) stg.stage(stage + d * kStripStageChunk, M, K, s0, s0 + (int64_t)d * kSH, c0, tid);
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
      const int64_t r0 = s0 + (int64_t)n * kSH, blk = r0 / kSH;
      if constexpr (SHIFTED) stg.unstage4(stage + (n % kStripStages) * kStripStageChunk, M, K, r0, rl, c0, cg, raw[d]);
      if (threadIdx.x == 0) {
        // Scale padding (zeroPadding), as the tile kernel's rule: the chunk
        // that writes a scale row's last entry zeroes the row's padding.
        const bool last_r = r0 + kSH >= M, last_c = cs + kSW * H >= K;
        if (TWO_D) {
          if (last_r) zero_pad(p.col_s, strip);
          if (ROW && last_c) zero_pad(p.row_s, blk);
        } else {
          if (last_c) zero_pad(p.col_s, blk);
          if (ROW && last_r) zero_pad(p.row_s, strip);
        }
      }
      uint32_t rmax[4];  // 1-D rows: the half-row maxima (float bits)
      if constexpr (TWO_D) {
        uint32_t m = 0;
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
          for (int j = 0; j < W; j++) m = mag_acc<T>(m, raw[d][i][j]);
        const uint32_t bits = warp_max(mag_bits_of<T>(m));
        if (lane == 0) part[gw][0] = bits;
      } else {
        // Column maxima over the thread's rows (zeros outside the tensor),
        // then over the warp's row groups (lanes 8 and 16 apart).
        uint32_t ca[W];
#pragma unroll
        for (int j = 0; j < W; j++) {
          uint32_t m = 0;
#pragma unroll
          for (int i = 0; i < 4; i++) m = mag_acc<T>(m, raw[d][i][j]);
#pragma unroll
          for (int o = 8; o <= 16; o *= 2) {
            const uint32_t other = __shfl_xor_sync(kAll, m, o);
            if constexpr (W == 4) m = vmax_u16x2(m, other);  // magnitudes, no NaN: integer order
            else m = max(m, other);
          }
          ca[j] = m;
        }
        if (q == 0) {
#pragma unroll
          for (int j = 0; j < W; j += 4) *reinterpret_cast<uint4 *>(&part[gw][W * cg + j]) = make_uint4(ca[j], ca[j + 1], ca[j + 2], ca[j + 3]);
        }
        if constexpr (ROW) {
#pragma unroll
          for (int i = 0; i < 4; i++) {
            uint32_t m = 0;
#pragma unroll
            for (int j = 0; j < W; j++) m = mag_acc<T>(m, raw[d][i][j]);
            m = mag_bits_of<T>(m);
#pragma unroll
            for (int o = 1; o <= 4; o *= 2) m = max(m, __shfl_xor_sync(kAll, m, o));
            rmax[i] = m;
          }
          if (cg == 0) *reinterpret_cast<uint4 *>(&rpart[half][rl]) = make_uint4(rmax[0], rmax[1], rmax[2], rmax[3]);
        }
      }
      // (Also: every thread has stored chunk n − 1 from T.)
      __syncthreads();
      uint32_t rw[4][2];  // columnwise codes of rows 4g+i, columns 8cg+4h .. +3
      if constexpr (TWO_D) {
        uint32_t bits = part[0][0];
#pragma unroll
        for (int w = 1; w < H * NW; w++) bits = max(bits, part[w][0]);
        const float s = scale_from_amax(__uint_as_float(bits), 448.0f, p.pow2 != 0, p.eps, p.vfi);
        if (threadIdx.x == 0) {
          const float si = __frcp_rn(s);
          p.col_s.buf[p.col_s.index(strip, blk)] = si;
          if (ROW) p.row_s.buf[p.row_s.index(blk, strip)] = si;
        }
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
          for (int h = 0; h < 2; h++) {
            const uint32_t lo = fp8x2<Fp8::E4M3>(__fmul_rn(elem<T>(raw[d][i], 4 * h), s), __fmul_rn(elem<T>(raw[d][i], 4 * h + 1), s));
            const uint32_t hi = fp8x2<Fp8::E4M3>(__fmul_rn(elem<T>(raw[d][i], 4 * h + 2), s), __fmul_rn(elem<T>(raw[d][i], 4 * h + 3), s));
            rw[i][h] = lo | (hi << 16);
          }
      } else {
        // Columns 8cg + 2q + b, b = 0, 1: the block maxima and scales.
        const int pw0 = half * NW;
        uint32_t mb[2];
        if constexpr (W == 4) {
          uint32_t pm = part[pw0][4 * cg + q];
#pragma unroll
          for (int w = 1; w < NW; w++) pm = vmax_u16x2(pm, part[pw0 + w][4 * cg + q]);
          mb[0] = mag16_bits<T>(pm & 0xFFFFu);
          mb[1] = mag16_bits<T>(pm >> 16);
        } else {
          uint2 pm = *reinterpret_cast<const uint2 *>(&part[pw0][8 * cg + 2 * q]);
#pragma unroll
          for (int w = 1; w < NW; w++) {
            const uint2 v = *reinterpret_cast<const uint2 *>(&part[pw0 + w][8 * cg + 2 * q]);
            pm.x = max(pm.x, v.x);
            pm.y = max(pm.y, v.y);
          }
          mb[0] = pm.x;
          mb[1] = pm.y;
        }
        float s2[2];
#pragma unroll
        for (int b = 0; b < 2; b++) s2[b] = scale_from_amax(__uint_as_float(mb[b]), 448.0f, p.pow2 != 0, p.eps, p.vfi);
        if (warp == 0) {
          const int64_t c = c0 + 8 * cg + 2 * q;
#pragma unroll
          for (int b = 0; b < 2; b++)
            if (c + b < K) p.col_s.buf[p.col_s.index(c + b, blk)] = __frcp_rn(s2[b]);
        }
        float csc[8];
#pragma unroll
        for (int e = 0; e < 8; e++) csc[e] = __shfl_sync(kAll, s2[e & 1], 8 * (e >> 1) + cg);
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
          for (int h = 0; h < 2; h++) {
            const uint32_t lo = fp8x2<Fp8::E4M3>(__fmul_rn(elem<T>(raw[d][i], 4 * h), csc[4 * h]), __fmul_rn(elem<T>(raw[d][i], 4 * h + 1), csc[4 * h + 1]));
            const uint32_t hi = fp8x2<Fp8::E4M3>(__fmul_rn(elem<T>(raw[d][i], 4 * h + 2), csc[4 * h + 2]), __fmul_rn(elem<T>(raw[d][i], 4 * h + 3), csc[4 * h + 3]));
            rw[i][h] = lo | (hi << 16);
          }
      }
      if constexpr (ROW) {
        // Rowwise codes of rows 4g+i, columns 8cg .. 8cg+7, from registers
        // (8-byte stores, or store_run where K is not a multiple of 8).
        float rs[4];
        if constexpr (!TWO_D) {
          // Row 4g + cg (cg < 4): the maximum of both halves, its scale; the
          // row piece's lanes get the four by shuffles.
          uint32_t mr = 0;
#pragma unroll
          for (int hh = 0; hh < H; hh++) {
            const uint32_t v = rpart[hh][rl + (cg & 3)];
            mr = max(mr, v);
          }
          const float s = scale_from_amax(__uint_as_float(mr), 448.0f, p.pow2 != 0, p.eps, p.vfi);
          const int64_t R = r0 + rl + cg;
          if (half == 0 && cg < 4 && R < M) p.row_s.buf[p.row_s.index(R, strip)] = __frcp_rn(s);
#pragma unroll
          for (int i = 0; i < 4; i++) rs[i] = __shfl_sync(kAll, s, 8 * q + i);
        }
        const int64_t c = c0 + 8 * cg, left = K - c;
        const int nk = left >= 8 ? 8 : left > 0 ? (int)left : 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
          uint64_t me;
          if constexpr (TWO_D) {
            me = (uint64_t)rw[i][0] | ((uint64_t)rw[i][1] << 32);
          } else {
            uint32_t cw[4];
#pragma unroll
            for (int j = 0; j < 4; j++)
              cw[j] = fp8x2<Fp8::E4M3>(__fmul_rn(elem<T>(raw[d][i], 2 * j), rs[i]), __fmul_rn(elem<T>(raw[d][i], 2 * j + 1), rs[i]));
            me = (uint64_t)(cw[0] | (cw[1] << 16)) | ((uint64_t)(cw[2] | (cw[3] << 16)) << 32);
          }
          const int64_t R = r0 + rl + i;
          uint8_t *dst = p.row + R * K + c;
          const int nn = R < M ? nk : 0;
          if (p.row_vec) {
            if (nn == 8) *reinterpret_cast<uint64_t *>(dst) = me;
            else put_bytes(dst, me, nn);
          } else {
            store_run<8>(dst, me, nn, 1, cg == 0, cg == 7);
          }
        }
      }
      if (!SHIFTED && n + kStripDepth < nchunks) strip_load4<T>(x, M, K, r0 + (int64_t)kStripDepth * kSH + rl, c0 + 8 * cg, raw[d]);
      sc.put(tw[half * NB + n % NB], tw[half * NB + (n + 1) % NB], rw);
      if constexpr (SHIFTED) cp_async_wait_n<kStripStages - 2>();  // chunk n + 1, this thread's copies
      __syncthreads();
      if constexpr (SHIFTED) {
        if (n + kStripStages < nchunks) stg.stage(stage + (n % kStripStages) * kStripStageChunk, M, K, s0, r0 + (int64_t)kStripStages * kSH, c0, tid);
        cp_async_commit();
      }
      sc.store(tw[half * NB + n % NB], n, L);
    }
  }
  sc.flush(tw[half * NB + (nchunks - 1) % NB], nchunks, L, tid);
}

// Below this M the tile kernel serves every shape (one chunk of kSH rows per
// strip would be mostly padding).
constexpr int64_t kStripMinM = 256;

// Whether a quantize with a columnwise direction takes the strip kernel:
// aligned rows at an M not a multiple of 16, and 16-bit rows at any even
// offset (an odd K) at any M.
inline bool use_strip(const BlockParams &p) {
  if (p.m < kStripMinM || ceil_div(p.k, (int64_t)kSW) > 0x7FFFFFFF) return false;
  return p.vec == kRowsShifted || (p.vec == kRowsAligned && p.m % 16 != 0);
}

template <typename T, int H, bool ROW, bool TWO_D, bool SHIFTED>
void launch_strip_t(const BlockParams &p, cudaStream_t s) {
  constexpr int smem = SHIFTED ? H * kStripStageBytes : 0;
  // Once per instance (a thread-safe static); a query that fails leaves no
  // error behind for the launch check.
  static const int per_sm = [] {
    int b = 0;
    if ((smem > 0 && cudaFuncSetAttribute(fp8_block_strip_kernel<T, H, ROW, TWO_D, SHIFTED>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess) ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, fp8_block_strip_kernel<T, H, ROW, TWO_D, SHIFTED>, kThreads * H, smem) != cudaSuccess || b < 1) {
      cudaGetLastError();
      b = 1;
    }
    return b;
  }();
  int64_t strips, segs, seg_rows;
  strip_grid(p.m, p.k, per_sm, &strips, &segs, &seg_rows, kSW * H);
  launch_kernel(fp8_block_strip_kernel<T, H, ROW, TWO_D, SHIFTED>, (unsigned)(strips * segs), kThreads * H, smem, s, p, (int)strips, seg_rows);
}

// Columnwise 1×128 alone in strips of 64 columns; with rowwise data or
// 128×128 tiles, strips of 128.
template <typename T, bool SHIFTED>
void launch_strip_s(const BlockParams &p, bool row, bool two_d, cudaStream_t s) {
  if (two_d) {
    if (row) launch_strip_t<T, 2, true, true, SHIFTED>(p, s);
    else launch_strip_t<T, 2, false, true, SHIFTED>(p, s);
  } else {
    if (row) launch_strip_t<T, 2, true, false, SHIFTED>(p, s);
    else launch_strip_t<T, 1, false, false, SHIFTED>(p, s);
  }
}

template <typename T>
void launch_strip_d(const BlockParams &p, bool row, bool two_d, cudaStream_t s) {
  if constexpr (sizeof(T) == 2) {
    if (p.vec == kRowsShifted) return launch_strip_s<T, true>(p, row, two_d, s);
  }
  launch_strip_s<T, false>(p, row, two_d, s);
}

int32_t launch_strip(InType t, const BlockParams &p, bool row, bool two_d, cudaStream_t s, quant_plugin_error *err) {
  switch (t) {
    case InType::F32: launch_strip_d<float>(p, row, two_d, s); break;
    case InType::BF16: launch_strip_d<__nv_bfloat16>(p, row, two_d, s); break;
    case InType::F16: launch_strip_d<__half>(p, row, two_d, s); break;
  }
  LQ_LAUNCHED("fp8_block strip kernel launch");
  return QUANT_OK;
}

// ---- Rowwise 1×128 alone: the rows in flat order ----
//
// Rowwise data [M, K] at pitch K holds the code of input element f at byte f,
// so with the input and the output at the same offset mod 16 elements an
// aligned chunk of 16 elements (32 or 64 bytes) maps onto an aligned 16-byte
// chunk of codes whatever K is (spec §14): the loads and stores stay aligned
// and whole, with no shifts; only the 1×128 blocks start at odd places. A
// row's blocks start o = (row's first element) mod 16 elements into chunks
// 8j (j = 0, 1, ...) of the row, so chunk 8j's first o elements are block
// j−1's and the rest block j's; every other chunk of the row is one block's.
// The offset o is the whole row's, so it is a compile-time constant of the
// chunk's arithmetic (a switch per row step: the amax masks and the scale of
// each element are fixed, no selects).
//
// A warp walks one row (or a segment of one: rows too few to fill the GPU
// are cut into segments of several 512-element steps), 32 chunks per step:
// lane l holds chunk 32t + l, lanes 8g .. 8g+7 block 4t + g. Block 4t+3's
// amax also needs the first o elements of the next step's lane 0 chunk, so
// the loads run two steps ahead. Bytes of a chunk that belong to another row
// or segment are left to it (narrow aligned stores at the two ends).
constexpr int kRowThreads = 256;

struct RowParams {
  const void *in_al;  // input rounded down to a 16-element boundary: phase elements before the tensor
  uint8_t *out_al;    // rowwise data rounded down likewise (the same phase)
  int64_t m, k;
  int phase;
  int nseg, seg_steps;  // segments per row, steps per segment
  BlockScales s;
  float eps, vfi;
  int pow2;
};

template <typename T>
__host__ __device__ constexpr int row_min_blocks() { return sizeof(T) == 2 ? 4 : 2; }

template <typename T>
__global__ void __launch_bounds__(kRowThreads, row_min_blocks<T>()) fp8_block_rows_kernel(const __grid_constant__ RowParams p) {
  pdl_wait();
  constexpr uint32_t kAll = 0xFFFFFFFFu;
  const int lane = threadIdx.x & 31, g = lane >> 3, i = lane & 7;
  static_assert(kRowThreads == 256, "flat_item: 8 warps per CTA");
  const int64_t warps = (int64_t)gridDim.x * (kRowThreads / 32), items = p.m * p.nseg;
  const int nb = (int)((p.k + kTile - 1) / kTile), steps = (nb + 3) / 4;
  for (int64_t item = (int64_t)blockIdx.x * (kRowThreads / 32) + threadIdx.x / 32; item < items; item += warps) {
    int t0, t1;
    const int64_t r = flat_item(p, item, steps, &t0, &t1);
    const FlatRow<T> fr(p.in_al, p.out_al, p.phase, r, p.k, t0, t1);
    const int o = fr.o;
    FlatWalk<T> w;
    w.start(fr);
    const uint32_t &lo = w.lo, &hi = w.hi, &lon = w.lon;
    float prev_s = 1.0f;  // block 4t−1's scale
    for (int t = t0; t < t1; t++) {
      w.ahead(fr, t);
      // Block 4t+g: its part of lanes 8g .. 8g+7 and the first o elements of
      // the next chunk (lane 8g+8, or the next step's lane 0).
      uint32_t a = i == 0 ? hi : max(lo, hi);
      const uint32_t nlo = __shfl_down_sync(kAll, i == 0 ? lo : 0u, 8), nlo_step = __shfl_sync(kAll, lon, 0);
      a = max(a, g == 3 ? nlo_step : nlo);
      a = max(a, __shfl_xor_sync(kAll, a, 1));
      a = max(a, __shfl_xor_sync(kAll, a, 2));
      a = max(a, __shfl_xor_sync(kAll, a, 4));
      const float s = scale_from_amax(__uint_as_float(a), 448.0f, p.pow2 != 0, p.eps, p.vfi);
      const int j = 4 * t + g;
      if (i == 0 && j < nb) {
        p.s.buf[(int64_t)j * p.s.stride + r] = __frcp_rn(s);
        if (r == p.m - 1)  // the scale row's padding (zeroPadding)
          for (int64_t x = p.s.valid; x < p.s.stride; x++) p.s.buf[(int64_t)j * p.s.stride + x] = 0.0f;
      }
      // Lane 8g's first o elements are block 4t+g−1's.
      float sp = __shfl_up_sync(kAll, s, 8);
      if (g == 0) sp = prev_s;
      if (i != 0) sp = s;
      prev_s = __shfl_sync(kAll, s, 31);
      uint4 v;
      with_offset(o, [&](auto oc) { v = chunk_codes<T, decltype(oc)::value>(w.cur, sp, s); });
      fr.store(t, v);
      w.next();
    }
    // Step t1's lane 0: its first o elements end block 4·t1−1.
    if (fr.has_tail()) {
      uint4 v;
      with_offset(o, [&](auto oc) { v = chunk_codes<T, decltype(oc)::value>(w.cur, prev_s, prev_s); });
      fr.store_tail(v);
    }
  }
}

// Once per input type: how many CTAs of the rowwise kernel fit (0: none).
template <typename T>
int rows_resident() {
  static const int resident = resident_ctas(fp8_block_rows_kernel<T>, kRowThreads);
  return resident;
}

// Launches the flat rowwise kernel if the input and the rowwise data lie at
// the same offset mod 16 elements (else *done stays false).
int32_t launch_rows(InType t, const BlockParams &bp, cudaStream_t st, bool *done, quant_plugin_error *err) {
  *done = false;
  RowParams p{};
  if (!flat_rows_place(p, bp.in, bp.row, in_size(t), bp.m, bp.k)) return QUANT_OK;
  p.s = bp.row_s;
  p.eps = bp.eps;
  p.vfi = bp.vfi;
  p.pow2 = bp.pow2;
  auto kern = t == InType::F32 ? fp8_block_rows_kernel<float> : t == InType::BF16 ? fp8_block_rows_kernel<__nv_bfloat16>
                                                                                     : fp8_block_rows_kernel<__half>;
  const int res = t == InType::F32 ? rows_resident<float>() : t == InType::BF16 ? rows_resident<__nv_bfloat16>() : rows_resident<__half>();
  if (res == 0) return fail(err, QUANT_ERROR_PLUGIN, "fp8_block: the rowwise kernel does not fit this GPU");
  const int64_t ctas = flat_rows_plan(p, res, kRowThreads, (ceil_div(p.k, (int64_t)kTile) + 3) / 4);
  launch_kernel(kern, (unsigned)ctas, kRowThreads, 0, st, p);
  LQ_LAUNCHED("fp8_block rowwise kernel launch");
  *done = true;
  return QUANT_OK;
}

// The scale layout of a direction (blockScaleLayoutOf): rows, stride, valid
// entries per row.
void block_geom(bool two_d, bool colwise, int64_t m, int64_t k, int64_t *rows, int64_t *stride, int64_t *valid) {
  int64_t r = colwise ? k : m, c = colwise ? m : k;
  if (two_d) {
    *rows = ceil_div(r, kTile);
    *valid = ceil_div(c, kTile);
  } else {
    *rows = ceil_div(c, kTile);
    *valid = r;
  }
  *stride = pad_to(*valid, 4);
}

struct BlockDir {
  uint8_t *data = nullptr;
  BlockScales s;
  int64_t rows = 0, valid = 0;
};

int32_t block_dir(const quant_plugin_storage &st, bool two_d, bool colwise, int64_t m, int64_t k, BlockDir *d, quant_plugin_error *err) {
  block_geom(two_d, colwise, m, k, &d->rows, &d->s.stride, &d->valid);
  d->s.valid = d->valid;
  d->s.two_d = two_d;
  // Constant names, not snprintf on every call (host time per call, issue #15).
  LQ_TRY(get_buffer(st, QUANT_BUFFER_DATA, colwise ? "columnwise data" : "rowwise data", m * k, (void **)&d->data, err));
  LQ_TRY(get_buffer(st, QUANT_BUFFER_SCALE_INV, colwise ? "columnwise scale_inv" : "rowwise scale_inv", d->rows * d->s.stride,
                    (void **)&d->s.buf, err));
  return QUANT_OK;
}

int32_t block_params(const quant_plugin_params *p, bool *two_d, quant_plugin_error *err) {
  if (p->element != QUANT_ELEMENT_DEFAULT && p->element != QUANT_ELEMENT_E4M3)
    return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "params.element: fp8_block is e4m3 only");
  if (p->block_dims != 0 && p->block_dims != 1 && p->block_dims != 2)
    return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "params.block_dims: %d is not 1 or 2", p->block_dims);
  *two_d = p->block_dims == 2;
  return QUANT_OK;
}

// Zeroes the padded columns of every scale row (zeroPadding).
int32_t zero_block_scale_padding(const BlockDir &d, cudaStream_t s, quant_plugin_error *err) {
  if (d.valid == d.s.stride) return QUANT_OK;
  LQ_CUDA(cudaMemset2DAsync(d.s.buf + d.valid, d.s.stride * 4, 0, (d.s.stride - d.valid) * 4, d.rows, s), "zeroing scale padding");
  return QUANT_OK;
}

template <typename O>
__global__ void block_dequantize_kernel(const uint8_t *__restrict__ q, BlockScales sc, O *out, int64_t m, int64_t k, int colwise) {
  pdl_wait();
  int64_t n = m * k, stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    int64_t r = idx / k, c = idx % k;
    int64_t dr = colwise ? c : r, dc = colwise ? r : c;  // position in the direction's data
    uint8_t code = colwise ? q[c * m + r] : q[idx];
    float si = sc.buf[sc.index(sc.two_d ? dr / kTile : dr, dc / kTile)];
    store_out(out + idx, __fmul_rn(fp8_decode<Fp8::E4M3>(code), si));
  }
}

__global__ void transpose_scales(const float *__restrict__ src, int64_t src_stride, float *dst, int64_t dst_stride, int64_t mb, int64_t kb) {
  pdl_wait();
  int64_t n = mb * kb, stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    int64_t i = idx / kb, j = idx % kb;
    dst[j * dst_stride + i] = src[i * src_stride + j];
  }
}

}  // namespace
}  // namespace lq

using namespace lq;

namespace {

// One tensor's parameters, checks and scale padding (zeroPadding), shared by
// the single and the grouped quantize. *tiles: its 128×128 tiles; *cdir (if
// not null): the columnwise direction's buffers, as parsed.
int32_t block_prepare(const quant_plugin_quantize_args *a, bool two_d, InType t, BlockParams *p, int64_t *tiles, bool *row,
                      bool *col, quant_plugin_error *err, BlockDir *cdir = nullptr) {
  int64_t m = a->input.shape[0], k = a->input.shape[1];
  *row = a->out[0].num_buffers > 0;
  *col = a->out[1].num_buffers > 0;
  if (!*row && !*col) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "out: no direction asked");
  BlockDir rd, cd;
  if (*row) LQ_TRY(block_dir(a->out[0], two_d, false, m, k, &rd, err));
  if (*col) LQ_TRY(block_dir(a->out[1], two_d, true, m, k, &cd, err));
  *tiles = ceil_div(m, kTile) * ceil_div(k, kTile);
  if (*tiles > 0x7FFFFFFF) return fail(err, QUANT_ERROR_UNSUPPORTED, "input: too many tiles");
  *p = BlockParams{};
  p->in = a->input.data;
  p->m = m;
  p->k = k;
  p->row = rd.data;
  p->col = cd.data;
  p->row_s = rd.s;
  p->col_s = cd.s;
  p->eps = a->params->amax_epsilon;
  p->pow2 = !a->params->fp32_scales;
  uint32_t bf16_max = 0x7F7F0000u;  // 0x1.FEp127, the largest BF16
  float bf16_maxf;
  memcpy(&bf16_maxf, &bf16_max, sizeof bf16_maxf);
  p->vfi = t == InType::BF16 ? bf16_maxf : t == InType::F16 ? 65504.0f : FLT_MAX;
  // Any M and K (spec §14): rows of the input load as aligned vectors or
  // shifted ones (16-bit input at any even offset), rows of the outputs
  // that are not 8- / 16-byte aligned are written as runs (store_run); 32-bit
  // input at other offsets goes element by element.
  p->vec = row_load_mode(a->input.data, k, in_size(t));
  p->row_vec = rd.data != nullptr && (reinterpret_cast<uintptr_t>(rd.data) & 7) == 0 && k % 8 == 0;
  p->col_vec = cd.data != nullptr && aligned16(cd.data) && m % 16 == 0;
  p->row_flat = p->vec == kRowsShifted && rd.data != nullptr && (reinterpret_cast<uintptr_t>(rd.data) & 7) == 0;
  if (cdir != nullptr) *cdir = cd;
  return QUANT_OK;
}

// The 128×128 columnwise copy from the rowwise one, [m, k] codes at rd with
// scales rs: one scale per tile serves both directions (spec §6), so the
// columnwise codes are the rowwise ones transposed byte for byte and the
// scale grid is transposed (derive, and "both" at an odd K).
int32_t derive_2d(const uint8_t *rd, const BlockScales &rs, const BlockDir &to, int64_t m, int64_t k, cudaStream_t s, quant_plugin_error *err) {
  LQ_TRY(zero_block_scale_padding(to, s, err));
  LQ_TRY(transpose_bytes(rd, to.data, m, k, s, err));
  int64_t mb = ceil_div(m, kTile), kb = ceil_div(k, kTile);
  if (mb * kb > 0) {
    int64_t blocks = ceil_div(mb * kb, 256);
    if (blocks > grid_cap()) blocks = grid_cap();
    launch_kernel(transpose_scales, (unsigned)blocks, 256, 0, s, rs.buf, rs.stride, to.s.buf, to.s.stride, mb, kb);
    LQ_LAUNCHED("fp8_block scale transpose kernel launch");
  }
  return QUANT_OK;
}

}  // namespace

extern "C" int32_t lq_block_quantize(const quant_plugin_quantize_args *a, quant_plugin_error *err) {
  InType t;
  LQ_TRY(input_type(a->input, "input", &t, err));
  LQ_TRY(check_device(a->input, "input", err));
  bool two_d, row, col;
  LQ_TRY(block_params(a->params, &two_d, err));
  OneTensor one;
  BlockDir cd;
  LQ_TRY(block_prepare(a, two_d, t, &one.p, &one.ntiles, &row, &col, err, &cd));
  if (one.ntiles == 0) return QUANT_OK;
  // Rowwise 1×128 alone with rows that the tile kernel would shift and
  // store as unaligned runs (K not a multiple of 8), or fewer rows than a
  // tile (a decode step, whose 128×128 tiles the tile kernel walks mostly
  // empty: H200, 16 × 4096 took 4.8 µs, 1 × 8192 5.4): the rows in flat
  // order. Aligned rows of a taller tensor stay on the tile kernel (H100,
  // 8192²: 0.077 ms against the flat kernel's 0.079; 8191²: 0.153 against
  // 0.085).
  if (row && !col && !two_d && (!(one.p.vec == kRowsAligned && one.p.row_vec) || one.p.m < kTile)) {
    bool done;
    LQ_TRY(launch_rows(t, one.p, stream_of(a->stream), &done, err));
    if (done) return QUANT_OK;
  }
  // 128x128 both directions from rows at an odd offset: the rowwise tiles
  // (the tile kernel, one CTA a tile, rowwise tiles in the flat frame), then
  // the columnwise copy derived from them (derive_2d: the same bytes, as one
  // scale per tile serves both directions). H200, 8191²: 0.133 ms (rowwise
  // tiles 0.074, transpose 0.055) against 0.163 for the tile kernel writing
  // both and 0.177 for the strips (bench/RESULTS.md, 2026-11-29 13:20
  // section).
  if (two_d && row && col && one.p.vec == kRowsShifted) {
    cudaStream_t s = stream_of(a->stream);
    OneTensor r = one;
    r.p.col = nullptr;
    r.p.col_s = BlockScales{};
    r.p.col_vec = 0;
    LQ_TRY(launch_typed(t, r, true, false, true, r.ntiles, s, err));
    return derive_2d(one.p.row, one.p.row_s, cd, one.p.m, one.p.k, s, err);
  }
  // A columnwise direction at M not a multiple of 16, or from rows at any
  // even offset: the strip kernel (both directions in one pass; H100,
  // 8191×8192, 1x128 both: 0.124 ms against 0.170 for the flat rowwise
  // kernel plus the strips and 0.191 for the tile kernel; the columnwise-only
  // cases are faster on the strips than on the tile kernel, 1x128 0.088
  // against 0.101: bench/RESULTS.md, 2026-11-29 11:20 section, call 2).
  if (col && use_strip(one.p)) {
    if (row && !two_d && one.p.vec == kRowsShifted) {
      // 1x128 both directions from 16-bit rows at any even offset (an odd
      // K): the rows in flat order, then the columns by the staged strips,
      // two launches (H200, 8191²: 0.068 + 0.088 ms against 0.19 for the
      // strips writing both, whose rowwise codes go out as unaligned runs).
      bool done;
      LQ_TRY(launch_rows(t, one.p, stream_of(a->stream), &done, err));
      if (done) return launch_strip(t, one.p, false, two_d, stream_of(a->stream), err);
    }
    return launch_strip(t, one.p, row, two_d, stream_of(a->stream), err);
  }
  return launch_typed(t, one, row, col, two_d, one.ntiles, stream_of(a->stream), err);
}

// Every tensor of the group in one launch (up to kMaxGroup tensors per
// launch): the tiles of all of them, numbered tensor after tensor.
extern "C" int32_t lq_block_quantize_grouped(const quant_plugin_quantize_grouped_args *a, quant_plugin_error *err) {
  if (a->count == 0) return QUANT_OK;
  InType t;
  LQ_TRY(input_type(a->items[0].input, "items[0].input", &t, err));
  bool two_d;
  LQ_TRY(block_params(a->items[0].params, &two_d, err));
  static TensorGroup grp;  // 15 KB: not on the stack; guarded by mu
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  bool row0 = false, col0 = false;
  cudaStream_t s = stream_of(a->stream);
  for (uint32_t base = 0; base < a->count; base += kMaxGroup) {
    uint32_t n = a->count - base < (uint32_t)kMaxGroup ? a->count - base : (uint32_t)kMaxGroup;
    grp.count = 0;
    grp.first[0] = 0;
    for (uint32_t j = 0; j < n; j++) {
      const quant_plugin_quantize_args *q = &a->items[base + j];
      InType ti;
      LQ_TRY(input_type(q->input, "items[].input", &ti, err));
      if (ti != t) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "items[%u].input: another dtype than items[0]", base + j);
      LQ_TRY(check_device(q->input, "items[].input", err));
      if (q->stream != a->stream) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "items[%u].stream: not the group's stream", base + j);
      bool row, col;
      int64_t tiles;
      LQ_TRY(block_prepare(q, two_d, t, &grp.t[grp.count], &tiles, &row, &col, err));
      if (base + j == 0) row0 = row, col0 = col;
      else if (row != row0 || col != col0)
        return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "items[%u].out: other directions than items[0]", base + j);
      if (tiles == 0) continue;
      grp.first[grp.count + 1] = grp.first[grp.count] + tiles;
      grp.count++;
    }
    if (grp.count == 0) continue;
    LQ_TRY(launch_typed(t, grp, row0, col0, two_d, grp.first[grp.count], s, err));
  }
  return QUANT_OK;
}

extern "C" int32_t lq_block_dequantize(const quant_plugin_dequantize_args *a, quant_plugin_error *err) {
  LQ_TRY(check_device(a->out, "out", err));
  InType ot;
  LQ_TRY(input_type(a->out, "out", &ot, err));
  bool two_d;
  LQ_TRY(block_params(a->params, &two_d, err));
  bool colwise = a->direction == QUANT_DIRECTION_COLUMNWISE;
  BlockDir d;
  LQ_TRY(block_dir(a->storage, two_d, colwise, a->m, a->k, &d, err));
  cudaStream_t s = stream_of(a->stream);
  int64_t blocks = ceil_div(a->m * a->k > 0 ? a->m * a->k : 1, 256);
  if (blocks > grid_cap()) blocks = grid_cap();
  unsigned g = (unsigned)blocks;
  switch (ot) {
    case InType::F32: launch_kernel(block_dequantize_kernel<float>, g, 256, 0, s, d.data, d.s, (float *)a->out.data, a->m, a->k, colwise); break;
    case InType::BF16:
      launch_kernel(block_dequantize_kernel<__nv_bfloat16>, g, 256, 0, s, d.data, d.s, (__nv_bfloat16 *)a->out.data, a->m, a->k, colwise);
      break;
    case InType::F16: launch_kernel(block_dequantize_kernel<__half>, g, 256, 0, s, d.data, d.s, (__half *)a->out.data, a->m, a->k, colwise); break;
  }
  LQ_LAUNCHED("fp8_block dequantize kernel launch");
  return QUANT_OK;
}

extern "C" int32_t lq_block_derive(const quant_plugin_derive_args *a, quant_plugin_error *err) {
  bool two_d;
  LQ_TRY(block_params(a->params, &two_d, err));
  if (!two_d || a->from_direction != QUANT_DIRECTION_ROWWISE || a->to_direction != QUANT_DIRECTION_COLUMNWISE)
    return fail(err, QUANT_ERROR_STATE, "fp8_block: only 2-D columnwise data can be derived, from rowwise data");
  BlockDir from, to;
  LQ_TRY(block_dir(a->from, true, false, a->m, a->k, &from, err));
  LQ_TRY(block_dir(a->to, true, true, a->m, a->k, &to, err));
  return derive_2d(from.data, from.s, to, a->m, a->k, stream_of(a->stream), err);
}
