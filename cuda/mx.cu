// MX formats ("mxfp8": E4M3/E5M2, "mxfp4": E2M1; spec §4): one E8M0 scale per
// 32 elements, 1×32 blocks rowwise and 32×1 blocks columnwise, equal byte for
// byte to plugins/mxfp8's CPU kernels:
//
//	amax = max |x| over the block (NaN skipped, as TE's fmaxf reduction does)
//	e    = RCEIL: float_to_e8m0(fl32(amax · fl32(1/max)))
//	       FLOOR: max(0, floor_e8m0(amax) − emax), NaN/Inf amax → 0xFF
//	q_i  = encode(fl32(x_i · 2^(127−e)))
//
// One pass: each CTA reads a 32×256 tile once and writes both directions from
// registers; the columnwise block amaxes meet in shared memory. Scales go out
// compact or GEMM-swizzled as the spec asks, padding zeroed.
//
// Any M ≥ 1, K ≥ 1 (spec §14): a kernel computes on the zero-padded tensor
// (elements outside [M, K] load as zeros) and stores only what lies inside the
// buffers: [M, K] FP8 codes, [M, ⌈K/2⌉] / [K, ⌈M/2⌉] packed FP4 rows (the
// nibbles of padded positions zeroed), scales on ⌈K/32⌉ / ⌈M/32⌉ blocks.
#include <stdlib.h>

#include <mutex>
#include <type_traits>

#include "common.cuh"

namespace lq {
namespace {

constexpr int kThreads = 256, kTileR = 32, kTileC = 256;

enum El { kE4M3 = 0, kE5M2 = 1, kE2M1 = 2 };

// The block's scale from its amax, a magnitude (+0 .. +Inf: NaN is skipped,
// so never NaN), which keeps the rules' NaN and -Inf cases out of every
// block's instructions.
template <int EL>
__device__ __forceinline__ uint32_t mx_exponent(float amax, int floor) {
  constexpr uint32_t emax = EL == kE4M3 ? 8 : EL == kE5M2 ? 15 : 2;
  constexpr uint32_t rcp = EL == kE4M3 ? 0x3B124925u : EL == kE5M2 ? 0x37924925u : 0x3E2AAAABu;
  if (floor) {
    // numeric.Float32ToE8M0Floor: the exponent field (0 for a subnormal),
    // 0xFF for +Inf.
    const uint32_t b = (__float_as_uint(amax) & 0x7FFFFFFFu) >> 23;
    return b == 0xFF ? b : max(b, emax) - emax;
  }
  return lq_e8m0_round_up_mag(__fmul_rn(amax, __uint_as_float(rcp)));
}

// A scale buffer: compact (row-major [rows, cols], or j-major for mxfp8
// columnwise) or swizzled; i is the non-contraction index, j the block index.
struct ScaleOut {
  uint8_t *buf = nullptr;
  int64_t pad_i = 0, pad_j = 0;
  int64_t ni = 0, nj = 0;  // the valid entries; the rest of pad_i × pad_j is 0 (plugins/mxfp8 zeroPadding)
  int j_major = 0, swizzled = 0;
  __device__ __forceinline__ int64_t index(int64_t i, int64_t j) const {
    if (swizzled) return swizzle_index(i, j, pad_j);
    if (j_major) return j * pad_i + i;
    return i * pad_j + j;
  }
  // index(i, j) = row_base(i) + row_off(j): row i's part once per row, j's
  // per entry (swizzled: j's fields are the low bits and j/4·512, disjoint
  // from i's).
  __device__ __forceinline__ int64_t row_base(int64_t i) const { return swizzled ? swizzle_index(i, 0, pad_j) : j_major ? i : i * pad_j; }
  __device__ __forceinline__ int64_t row_off(int j) const {
    return swizzled ? (int64_t)((j >> 2) * 512 + (j & 3)) : j_major ? (int64_t)j * pad_i : (int64_t)j;
  }
};

struct MxParams {
  const void *in;
  int64_t m, k;
  uint8_t *row, *col;  // data
  int64_t row_pitch, col_pitch;  // bytes per stored row (FP8: k; FP4: ⌈k/2⌉ rowwise, ⌈m/2⌉ columnwise)
  ScaleOut row_s, col_s;
  int floor;
  int vec;   // RowLoad: how input rows may be loaded
  int fs;    // the fast MXFP4 kernel: 64-row sub-tiles per CTA
  int zpad;  // which scale buffers have padding (bit 0 rowwise, 1 columnwise), for the kernel or mx_zero_padding to zero
  int flat;  // MXFP8, rows kRowsShifted: code f of each code buffer is 8-byte aligned where element f is 16-byte aligned (mx8_flat_tile)
};

// Encodes 8 scaled values: 8 FP8 bytes (uint2) or 8 E2M1 nibbles (low 32
// bits). mn: max |v| with NaN propagated; E2M1 takes lq_e2m1_fast where
// fl(mn·f) < 7 (false for a NaN), lq_e2m1 otherwise.
template <int EL>
__device__ __forceinline__ uint2 encode8(const float (&v)[8], float f, float mn) {
  if constexpr (EL == kE2M1) {
    if (__fmul_rn(mn, f) < 7.0f) return make_uint2(e2m1_fast_pack<8>(v, f), 0);
    uint32_t w = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) w |= e2m1(__fmul_rn(v[i], f)) << (4 * i);
    return make_uint2(w, 0);
  } else {
    constexpr Fp8 F = EL == kE4M3 ? Fp8::E4M3 : Fp8::E5M2;
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; i++) w[i] = fp8x2<F>(__fmul_rn(v[2 * i], f), __fmul_rn(v[2 * i + 1], f));
    return make_uint2(w[0] | (w[1] << 16), w[2] | (w[3] << 16));
  }
}

// 8 input elements as raw 16-byte words (two for float32), so that the next
// tile's loads can be in flight while this one is processed.
template <typename T>
struct Raw8 {
  uint4 w[sizeof(T) == 4 ? 2 : 1];
};

template <typename T>
__device__ __forceinline__ void raw_load(const T *p, Raw8<T> &r) {
#pragma unroll
  for (int j = 0; j < (int)(sizeof(T) == 4 ? 2 : 1); j++) r.w[j] = __ldg(reinterpret_cast<const uint4 *>(p) + j);
}

template <typename T>
__device__ __forceinline__ void raw_convert(const Raw8<T> &r, float (&v)[8]) {
  const T *h = reinterpret_cast<const T *>(&r.w[0]);
#pragma unroll
  for (int i = 0; i < 8; i++) v[i] = to_f32(h[i]);
}

// EDGE MXFP8, 16-bit rows at any even offset (spec §14), interior tiles: the
// flat frame. Both code buffers have the input's layout [M, K] (spec §4.5),
// so code f of either is element f of the input in flat order, and an
// aligned 16-byte input chunk (8 elements) gives an aligned 8-byte code
// word whatever K is; only the 32-element blocks start at odd places. The
// rows w + 8i of warp w share one offset a = (flat index of the row's
// first tile element) mod 8 (8 rows are 8·K elements apart), and lane l
// works on aligned chunk l under each of them: tile columns 8l - a ..
// 8l - a + 7. Lane 0 takes its elements e < a from chunk 32 instead (tile
// columns 256 - a + e), so that lane l's element e is tile column
// (8l - a + e) mod 256 in every lane: its elements e ≥ a (the "high" part)
// lie in row block l/4, its elements e < a (the "low" part) in block l/4 - 1
// (mod 8) where l % 4 = 0 and in block l/4 otherwise. Loads and code stores
// are aligned vectors with no shifts (lane 0 stores its word in two pieces);
// the row block maxima combine the parts across lanes with shuffles; the
// column maxima meet in shared memory at the rotated columns, padded one
// word in nine (kPadC) so that those accesses are free of bank conflicts.
// (H100, 8191², the previous interior code shifted each row out of its
// chunks and each code run into place through switches on the offsets:
// 9104 instructions of SASS for the both-direction kernel, 8 cases live in
// a CTA at once, 0.204 ms.)
using StageRows = uint4[4][kTileC / 8 + 1];  // a warp's 4 rows as the 33 aligned 16-byte chunks under each
constexpr int kPadC = kTileC + kTileC / 8;    // the padded column arrays of the flat frame
__device__ __forceinline__ int pad_col(int c) { return c + (c >> 3); }

// Copies the 33 aligned chunks under each of the warp's rows row0 + i·step
// bytes (step a multiple of 16) into st: cp.async, in flight until a wait.
__device__ __forceinline__ void stage_rows4(StageRows &st, const void *row0, int64_t step, int lane) {
  const uintptr_t b0 = reinterpret_cast<uintptr_t>(row0) & ~(uintptr_t)15;
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const uintptr_t base = b0 + i * step;
    cp_async16(&st[i][lane], reinterpret_cast<const void *>(base + 16 * lane));
    if (lane == 0) cp_async16(&st[i][32], reinterpret_cast<const void *>(base + 16 * 32));
  }
}

// The bits of the 16-bit halves (elements 2w, 2w+1 of a chunk) of the low
// part, elements e < a.
__device__ __forceinline__ uint32_t low_half_mask(int w, int a) {
  return (2 * w < a ? 0xFFFFu : 0u) | (2 * w + 1 < a ? 0xFFFF0000u : 0u);
}

// max |x| over the 16-bit pairs w & mask (mask within 0x7FFF7FFF), NaN
// ignored, into m (max.{bf16,f16}x2 returns the other operand where one is
// NaN; m starts at +0).
template <typename T>
__device__ __forceinline__ uint32_t hmax2_masked(uint32_t m, uint32_t w, uint32_t mask) {
  uint32_t d, x = w & mask;
  if constexpr (InTraits<T>::kind == InType::BF16) asm("max.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(m), "r"(x));
  else asm("max.f16x2 %0, %1, %2;" : "=r"(d) : "r"(m), "r"(x));
  return d;
}

// Lane l's 8 elements of one staged row in the flat frame, as floats; PARTS:
// the row's low and high part maxima (float32 bits of magnitudes, NaN
// ignored). sel: low_half_mask of the warp's offset.
template <typename T, bool PARTS>
__device__ __forceinline__ void flat_row(const uint4 (&row)[kTileC / 8 + 1], int lane, const uint32_t (&sel)[4], float (&v)[8],
                                         uint32_t &lo, uint32_t &hi) {
  using R = Raw16<T>;
  const uint4 c = row[lane], d = row[32];
  const uint32_t cw[4] = {c.x, c.y, c.z, c.w}, dw[4] = {d.x, d.y, d.z, d.w};
  uint32_t l16 = 0, h16 = 0;
#pragma unroll
  for (int j = 0; j < 4; j++) {
    const uint32_t mk = lane == 0 ? sel[j] : 0u;
    const uint32_t w = (dw[j] & mk) | (cw[j] & ~mk);
    if constexpr (PARTS) {
      l16 = hmax2_masked<T>(l16, w, sel[j] & 0x7FFF7FFFu);
      h16 = hmax2_masked<T>(h16, w, ~sel[j] & 0x7FFF7FFFu);
    }
    v[2 * j] = R::lo(w);
    v[2 * j + 1] = R::hi(w);
  }
  if constexpr (PARTS) {
    lo = hmax2_bits<T>(l16);
    hi = hmax2_bits<T>(h16);
  }
}

// 8 codes of v[e]·f[e].
template <int EL>
__device__ __forceinline__ uint2 encode8f(const float (&v)[8], const float (&f)[8]) {
  constexpr Fp8 F = EL == kE4M3 ? Fp8::E4M3 : Fp8::E5M2;
  uint32_t w[4];
#pragma unroll
  for (int j = 0; j < 4; j++) w[j] = fp8x2<F>(__fmul_rn(v[2 * j], f[2 * j]), __fmul_rn(v[2 * j + 1], f[2 * j + 1]));
  return make_uint2(w[0] | (w[1] << 16), w[2] | (w[3] << 16));
}

// Lane l's code word q in the flat frame (every lane of the warp calls it);
// dst: the row's aligned code word under tile column -a (8-byte aligned).
// Lane 0's word straddles the tile's ends where a ≠ 0: its byte e goes to
// dst + e (e ≥ a) or dst + 256 + e (e < a, tile column 256 - a + e), one
// byte from each of lanes 0-7, so that no lane runs a path of its own (H100,
// 8191², both directions: lane 0 storing its two pieces alone took about
// 50 of the tile's 1580 warp instructions per row and direction).
__device__ __forceinline__ void store_flat8(uint8_t *dst, uint2 q, int lane, int a) {
  if (lane != 0 || a == 0) *reinterpret_cast<uint2 *>(dst + 8 * lane) = q;
  const uint32_t x = __shfl_sync(0xFFFFFFFFu, q.x, 0), y = __shfl_sync(0xFFFFFFFFu, q.y, 0);
  if (a != 0 && lane < 8) dst[(lane < a ? kTileC : 0) + lane] = (uint8_t)((lane < 4 ? x : y) >> (8 * (lane & 3)));
}

// An interior tile of the EDGE MXFP8 instance in the flat frame (see
// above): warp w's rows r0 + w + 8i are staged in st (the copies waited
// for). Each row is read from the stage where it is used (once for the
// rowwise codes and the column maxima, once more for the columnwise codes),
// so that no row's values stay live across the tile: registers for 3 CTAs
// per SM in every direction. part, colf: the CTA's padded column arrays.
template <typename T, int EL, bool ROW, bool COL>
__device__ __forceinline__ void mx8_flat_tile(const MxParams &p, const StageRows &st, int64_t r0, int64_t c0, int warp, int lane,
                                              uint32_t (*part)[kPadC], float *colf) {
  const int a = (int)(((r0 + warp) * p.k + c0) & 7);
  const int64_t f0 = (r0 + warp) * p.k + c0 - a;  // flat index of row r0 + w's chunk 0
  uint32_t sel[4];
#pragma unroll
  for (int j = 0; j < 4; j++) sel[j] = low_half_mask(j, a);
  float pm[8];
#pragma unroll
  for (int e = 0; e < 8; e++) pm[e] = 0.0f;
  // The rowwise scale of block l/4 of row r0 + w + 8i at rs + i·rstep (the
  // tile's rows lie in one 32-row group: 8 rows are 128 entries apart
  // swizzled).
  uint8_t *rs = nullptr;
  int64_t rstep = 0;
  if constexpr (ROW) {
    rs = p.row_s.buf + p.row_s.index(r0 + warp, c0 / 32 + lane / 4);
    rstep = p.row_s.swizzled ? 128 : 8 * p.row_s.pad_j;
  }
#pragma unroll
  for (int i = 0; i < 4; i++) {
    float v[8];
    uint32_t lo, hi;
    flat_row<T, ROW>(st[i], lane, sel, v, lo, hi);
    if constexpr (ROW) {
      // Block l/4 of the quad: the high parts of its first lane, both parts
      // of the other three, the low part of the next quad's first lane.
      uint32_t m = (lane & 3) ? max(lo, hi) : hi;
      m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, 1));
      m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, 2));
      m = max(m, __shfl_sync(0xFFFFFFFFu, lo, (lane + 4) & 28));
      const uint32_t e8 = mx_exponent<EL>(__uint_as_float(m), p.floor);
      const float fh = e8m0_rcp(e8);
      const float fl = __shfl_sync(0xFFFFFFFFu, fh, (lane & 3) ? lane : (lane + 31) & 31);  // l % 4 = 0: block l/4 - 1's
      float f[8];
#pragma unroll
      for (int e = 0; e < 8; e++) f[e] = e < a ? fl : fh;
      store_flat8(p.row + f0 + 8 * i * p.k, encode8f<EL>(v, f), lane, a);
      if ((lane & 3) == 0) rs[i * rstep] = (uint8_t)e8;
    }
    if constexpr (COL) {
#pragma unroll
      for (int e = 0; e < 8; e++) pm[e] = amax_f(pm[e], v[e]);
    }
  }
  if constexpr (COL) {
    // Lane l's element e is tile column (8l - a + e) mod 256.
#pragma unroll
    for (int e = 0; e < 8; e++) part[warp][pad_col((8 * lane - a + e) & (kTileC - 1))] = __float_as_uint(pm[e]);
    __syncthreads();
    {
      const int t = threadIdx.x, ct = pad_col(t);
      uint32_t m = part[0][ct];
#pragma unroll
      for (int w = 1; w < kThreads / 32; w++) m = max(m, part[w][ct]);
      const uint32_t e8 = mx_exponent<EL>(__uint_as_float(m), p.floor);
      colf[ct] = e8m0_rcp(e8);
      p.col_s.buf[p.col_s.index(c0 + t, r0 / 32)] = (uint8_t)e8;
    }
    __syncthreads();
    float f[8];
#pragma unroll
    for (int e = 0; e < 8; e++) f[e] = colf[pad_col((8 * lane - a + e) & (kTileC - 1))];
#pragma unroll
    for (int i = 0; i < 4; i++) {
      float v[8];
      uint32_t lo, hi;
      flat_row<T, false>(st[i], lane, sel, v, lo, hi);
      store_flat8(p.col + f0 + 8 * i * p.k, encode8f<EL>(v, f), lane, a);
    }
  }
}

// CTAs per SM that the kernel's registers must allow (0: no bound), for the
// MXFP8 instances of one 16-bit tensor. H100, 8191², both directions, EDGE:
// 3 CTAs per SM (80 registers; the flat frame's interior path has no spills
// there, the checked path a few) ran 0.170 ms, 2 (126 registers, no spills)
// 0.180 ms. H200 (bench/RESULTS.md, 2026-11-28), ms, bound against none or
// the previous one: one direction asks for 4 (64 registers, 24-220 bytes of
// spills) in the EDGE instance (8191², rowwise 0.086 against 0.094 at 3,
// columnwise 0.074 against 0.081) and the aligned rowwise one (8192², 0.060
// against 0.065 at 72 registers), while the aligned columnwise one runs
// faster unbounded (0.057 at 75 registers against 0.061 at 4); both
// directions ask for 3 (RAGM at 8191×8192: 0.081 against 0.085 at 94
// registers, 2 CTAs; aligned: 76-80 registers either way).
constexpr int mx_min_ctas(int el, bool row, bool col, bool edge, int elem, bool group) {
  if (el == kE2M1 || elem != 2 || group) return 0;
  if (row && col) return 3;
  return edge || row ? 4 : 0;
}

// A persistent grid walks the tiles; with vector loads (an aligned input) the
// next tile is loaded into registers before the current one is processed, so
// that loads stay in flight through the compute and the stores.
//
// EDGE: the instance for shapes with partial blocks or unaligned rows (spec
// §14): row bounds, partial 8-element groups, rows at any even offset staged
// as aligned chunks in shared memory and shifted (a warp's row has one
// offset), FP8 runs stored through store_run8. Without EDGE (M a multiple of
// 32, K of 8, aligned rows and buffers) none of that is compiled in, so
// aligned shapes keep their registers and speed.
//
// RAGM (not EDGE; MXFP8): the aligned instance for an M that is not a
// multiple of 32 (a token count) but otherwise aligned: in the last tile
// row, the rows past M are loaded as copies of row M-1 and none of their
// codes is stored (MXFP8's codes are [M, K] in both directions, spec §4.5).
// The bytes are the zero-padded tensor's (spec §14): a column block's amax
// over its valid rows and copies of one of them is the amax over the valid
// rows, which zeros (|0| = 0 ≤ any amax, NaN ignored either way) do not change
// either. (H100, 8191×8192: the EDGE instance ran at 55-80 % of the aligned
// speed.)
//
// G: Single<MxParams> (one tensor) or MxGroup (quantize_grouped: the tiles of
// every tensor of the group, numbered tensor after tensor; a tile's tensor
// comes from grp.locate).
template <typename T, int EL, bool ROW, bool COL, bool EDGE, bool RAGM, typename G>
__global__ void __launch_bounds__(kThreads, mx_min_ctas(EL, ROW, COL, EDGE, (int)sizeof(T), G::kGroup)) mx_quantize_kernel(const __grid_constant__ G grp) {
  pdl_wait();
  static_assert(!(EDGE && RAGM) && !(RAGM && EL == kE2M1), "RAGM: the aligned MXFP8 instance");
  // kFlat: the EDGE MXFP8 instance of 16-bit rows, whose interior tiles work
  // in the flat frame (mx8_flat_tile), their column arrays padded (kPadC).
  constexpr bool kFlat = EDGE && EL != kE2M1 && sizeof(T) == 2;
  __shared__ __align__(16) uint32_t part[kThreads / 32][kFlat ? kPadC : kTileC];
  __shared__ __align__(16) float colf[kFlat ? kPadC : kTileC];
  __shared__ uint16_t colb[EL == kE2M1 ? kTileC : 1][kTileR / 4 + 1];
  // EDGE: a warp's rows as aligned chunks.
  __shared__ __align__(16) uint4 stage[EDGE && sizeof(T) == 2 ? kThreads / 32 : 1][4][kTileC / 8 + 1];
  const int64_t ntiles = grp.total();
  // The tiles of this CTA: blockIdx.x, + gridDim.x, ... for one tensor; a
  // group's CTA takes a run of consecutive tiles instead, so that it moves
  // to another tensor (whose parameters may be far in the constant cache)
  // once or twice, not at every tile.
  int64_t tile0 = blockIdx.x, step = gridDim.x, end = ntiles;
  if constexpr (G::kGroup) {
    const int64_t per = (ntiles + gridDim.x - 1) / gridDim.x;
    tile0 = blockIdx.x * per;
    step = 1;
    end = tile0 + per < ntiles ? tile0 + per : ntiles;
  }
  int cur = grp.index_of(tile0 < end ? tile0 : 0), nxt = cur;  // the tensors of this tile and of the prefetched one
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  // The tile rows of warp w: 4w .. 4w+3; in the EDGE MXFP8 instance w, w+8,
  // w+16, w+24 instead, which share one 16-byte input offset and one 8-byte
  // code offset (8 rows are 16·K input bytes and 8·pitch code bytes apart),
  // so that the warp's four shifts take one case of their switch and its
  // four runs one store pattern. (MXFP4 packs a warp's 4 rows into the
  // transposed nibbles, colb, so it keeps 4w + i.)
  constexpr bool kSpread = EDGE && EL != kE2M1;
  auto row_of = [&](int64_t r0, int i) -> int64_t {
    if constexpr (kSpread) return r0 + warp + 8 * i;
    else return r0 + 4 * warp + i;
  };
  Raw8<T> next[4];
  // EDGE MXFP8, 16-bit rows at any even offset: an interior tile, whose 32
  // rows and 256 columns, and the 33rd chunk of every row, lie inside the
  // tensor (uniform over the CTA). & and |, not && and ||: the short-circuit
  // branches took 1.4 of the kernel's 38.7 warp instructions per 32 elements
  // (H200, 8191² both, bench/RESULTS.md 2026-11-29 16:45 section).
  auto interior = [&](const MxParams &q, int64_t r0, int64_t c0) -> bool {
    return (q.vec == kRowsShifted) & (q.flat != 0) & (r0 + kTileR <= q.m) & (c0 + kTileC <= q.k) &
           ((r0 + kTileR < q.m) | (c0 + kTileC + 8 <= q.k));
  };
  // The first row and column of local tile lt: by one 32-bit division
  // (tile_rc) where the tensor changes between tiles (a group) or the
  // instance is EDGE (H200, mxfp8: the MoE batch's columnwise 0.102 -> 0.095
  // ms and both 0.168 -> 0.163, 8191² both 0.138 -> 0.128); the aligned
  // single-tensor instance keeps the int64 division, as measured (8192² both
  // 0.076 ms with it against 0.077-0.078 with tile_rc in one run, a
  // difference that later runs of the unchanged instance, 0.078, put within
  // the noise; bench/RESULTS.md, 2026-11-29 09:55 section, calls 5-8).
  auto rc_of = [&](int64_t lt, int64_t tiles_c, int64_t *r0, int64_t *c0) {
    if constexpr (G::kGroup || EDGE) {
      tile_rc(lt, tiles_c, r0, c0);
      *r0 *= kTileR, *c0 *= kTileC;
    } else {
      *r0 = (lt / tiles_c) * kTileR, *c0 = (lt % tiles_c) * kTileC;
    }
  };
  // Loads tile `tile` into next where its tensor's rows are vector-loadable
  // (the same test the tile's own pass makes before it reads next).
  auto prefetch = [&](int64_t tile) {
    int64_t lt;
    const MxParams &q = grp.locate_from(tile, &nxt, &lt);
    if (EDGE && q.vec != kRowsAligned) return;
    const int64_t qtc = (q.k + kTileC - 1) / kTileC;
    int64_t r0, gc;
    rc_of(lt, qtc, &r0, &gc);
    gc += 8 * lane;
    const T *qx = (const T *)q.in;
    if (EDGE ? gc + 8 <= q.k : gc < q.k) {
#pragma unroll
      for (int i = 0; i < 4; i++) {
        if constexpr (RAGM) {  // the tile's last row in place of rows past M
          const int last = (int)(q.m - r0 < kTileR ? q.m - r0 : kTileR) - 1;
          raw_load<T>(qx + (r0 + min(4 * warp + i, last)) * q.k + gc, next[i]);
        } else if (!EDGE || row_of(r0, i) < q.m) {
          raw_load<T>(qx + row_of(r0, i) * q.k + gc, next[i]);
        }
      }
    }
  };
  // The EDGE instance of one tensor runs one CTA per tile (launch_mx_tiles):
  // it loads its tile's aligned rows at the tile's start rather than the
  // next tile's during this one, so that next is not live through the
  // tile's work (with it, the straight-line interior code below took the
  // bf16 instances from 80 / 102 / 128 registers to 90-96 / 87-96 / 134-148,
  // rowwise / columnwise / both; without it 80 / 80 / 113, so columnwise
  // runs 3 CTAs per SM instead of 2).
  constexpr bool kAhead = !EDGE || G::kGroup;
  // A group: each tile zeroes its share of its tensor's padding (a loop over
  // the whole group in every CTA cost more than the quantize).
  auto group_zpad = [&](const MxParams &q, int64_t lt, int64_t tiles_c) {
    if constexpr (G::kGroup) {
      if (q.zpad) {
        const int64_t parts = ((q.m + kTileR - 1) / kTileR) * tiles_c;
        zero_scale_padding(q.row_s, lt, parts);
        zero_scale_padding(q.col_s, lt, parts);
      }
    }
  };
  if (kAhead && tile0 < end) prefetch(tile0);
  for (int64_t tile = tile0; tile < end; tile += step) {
  if constexpr (!kAhead) prefetch(tile);
  int64_t lt;
  const MxParams &p = grp.locate_from(tile, &cur, &lt);
  const T *x = (const T *)p.in;
  const int64_t tiles_c = (p.k + kTileC - 1) / kTileC;
  const bool vec = !EDGE || p.vec == kRowsAligned;
  int64_t r0, c0;
  rc_of(lt, tiles_c, &r0, &c0);
  int64_t gc = c0 + 8 * lane;
  bool valid = gc < p.k;  // some of this thread's 8 columns are inside the tensor
  const bool full = !EDGE || gc + 8 <= p.k;
  const int64_t ncols = valid ? (full ? 8 : p.k - gc) : 0;  // of them, inside
  // Whether row_of(r0, i) lies inside the tensor: always, in the aligned
  // instance; RAGM, in 32 bits (the tile's rows inside it, at most kTileR).
  auto row_in = [&](int i) -> bool {
    if constexpr (RAGM) return 4 * warp + i < (int)(p.m - r0 < kTileR ? p.m - r0 : kTileR);
    else if constexpr (EDGE) return row_of(r0, i) < p.m;
    else return true;
  };
  float v[4][8];
  // EDGE, 16-bit rows at any even offset (K odd, say): the warp copies the
  // 33 aligned 16-byte chunks under each of its four rows' 256 elements into
  // its own shared memory (cp.async: all 4·33 in flight, none in registers),
  // then each lane shifts its 8 elements out of chunks lane and lane + 1 by
  // the row's offset, which the warp's lanes share. With the chunks in
  // registers (two per lane and row) this instance used 116–160 registers
  // and ran at 40–44 % of the aligned one (H100, 8191²). A chunk is copied
  // only where it ends inside the tensor; a lane whose chunks were not all
  // copied (the tensor's last bytes) loads element by element.
  //
  // inner (EDGE MXFP8, 16-bit rows at any even offset, code buffers in the
  // input's flat alignment, MxParams::flat): an interior tile, whose 32 rows
  // and 256 columns, and the 33rd chunk of every row, lie inside the tensor.
  // The test is uniform over the CTA, so no warp diverges on it. Such a
  // tile copies its chunks without bound checks and is quantized in the
  // flat frame (mx8_flat_tile: aligned loads and code words, no shifts);
  // only the last tile row and column, and tensors whose code buffers are
  // not in the input's flat alignment, take the checked path (H100, 8191²:
  // the checked path on every tile executed 2.4× the aligned instructions).
  bool staged[4] = {false, false, false, false};
  bool inner = false;
  if constexpr (kFlat) inner = interior(p, r0, c0);
  if constexpr (EDGE && sizeof(T) == 2) {
    if (p.vec == kRowsShifted) {
      __syncwarp();  // the warp's last tile has read its chunks
      if (inner) {
        // Row row_of(r0, i) is x + (r0 + warp)·K + 8·i·K.
        stage_rows4(stage[warp], x + (r0 + warp) * p.k + c0, 16 * p.k, lane);
      } else {
        const uintptr_t end = reinterpret_cast<uintptr_t>(x + p.m * p.k);
#pragma unroll
        for (int i = 0; i < 4; i++) {
          int64_t r = row_of(r0, i);
          const uintptr_t base = reinterpret_cast<uintptr_t>(x + r * p.k + c0) & ~(uintptr_t)15;
          if (r < p.m) {
            if (base + 16 * (lane + 1) <= end) cp_async16(&stage[warp][i][lane], reinterpret_cast<const void *>(base + 16 * lane));
            if (lane == 0 && base + 16 * 33 <= end) cp_async16(&stage[warp][i][32], reinterpret_cast<const void *>(base + 16 * 32));
          }
          staged[i] = r < p.m && full && base + 16 * (lane + 2) <= end;
        }
      }
      cp_async_commit();
      cp_async_wait_all();
      __syncwarp();
    }
  }
  if constexpr (kFlat) {
    if (inner) {
      if (kAhead && tile + step < end) prefetch(tile + step);
      mx8_flat_tile<T, EL, ROW, COL>(p, stage[warp], r0, c0, warp, lane, part, colf);
      if (COL) __syncthreads();  // the next tile reuses the shared arrays
      group_zpad(p, lt, tiles_c);
      continue;
    }
  }
#pragma unroll
  for (int i = 0; i < 4; i++) {
    int64_t r = row_of(r0, i);
    const bool rin = row_in(i);
    if (!EDGE && valid) raw_convert<T>(next[i], v[i]);
    else if (!EDGE) {
#pragma unroll
      for (int e = 0; e < 8; e++) v[i][e] = 0.0f;
    } else if (rin && full && vec) raw_convert<T>(next[i], v[i]);
    else if (staged[i]) {
      const uint4 a = stage[warp][i][lane], b = stage[warp][i][lane + 1];
      const uint32_t raw8[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
      Raw8<T> raw;
      shift_uniform<4>(raw8, (int)(reinterpret_cast<uintptr_t>(x + r * p.k + gc) & 15), *reinterpret_cast<uint32_t(*)[4]>(&raw.w[0]));
      raw_convert<T>(raw, v[i]);
    } else if (rin && full) load8<T, false>(x + r * p.k + gc, v[i]);
    else if (rin && valid) {
#pragma unroll
      for (int e = 0; e < 8; e++) v[i][e] = e < ncols ? to_f32(x[r * p.k + gc + e]) : 0.0f;
    } else {
#pragma unroll
      for (int e = 0; e < 8; e++) v[i][e] = 0.0f;
    }
  }
  if (kAhead && tile + step < end) prefetch(tile + step);
  if (ROW) {
    // The scale of the lane's block in row row_of(r0, i) at rs + i·rstep:
    // the tile's rows lie in one 32-row group (swizzled, rows 1 apart are 16
    // entries apart) and rowwise scales are never j-major. One index per
    // tile, not one per row: each ScaleOut::index read the layout's fields
    // again, and in a group (whose tensor changes between tiles) every read
    // is a load from the parameter block (bench/RESULTS.md, the MoE batch's
    // ncu, 2026-11-29 09:55 section).
    uint8_t *const rs = p.row_s.buf + p.row_s.index(row_of(r0, 0), gc / 32);
    const int64_t rstep = (kSpread ? 8 : 1) * (p.row_s.swizzled ? 16 : p.row_s.pad_j);
#pragma unroll
    for (int i = 0; i < 4; i++) {
      int64_t r = row_of(r0, i);
      // MXFP4: one max per element (NaN propagated); only a lane that saw a
      // NaN recomputes its amax with NaN ignored. MXFP8: one max per element
      // with NaN ignored (amax_f, one FMNMX; the integer compare-and-select
      // it replaced took about four instructions an element, where the
      // kernel is issue-bound on the H200).
      float mn = 0.0f;
      uint32_t m = 0;
      if constexpr (EL == kE2M1) {
#pragma unroll
        for (int e = 0; e < 8; e++) mn = amax_nan(mn, v[i][e]);
        float ml = mn;
        if (isnan(mn)) {
          ml = 0.0f;
#pragma unroll
          for (int e = 0; e < 8; e++) ml = amax_f(ml, v[i][e]);
        }
        m = __float_as_uint(ml);
      } else {
        float mf = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; e++) mf = amax_f(mf, v[i][e]);
        m = __float_as_uint(mf);
      }
      m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, 1));
      m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, 2));
      uint32_t e8 = mx_exponent<EL>(__uint_as_float(m), p.floor);
      uint2 q = encode8<EL>(v[i], e8m0_rcp(e8), mn);
      if (!EDGE) {
        if (valid && row_in(i)) {
          if (EL == kE2M1) *reinterpret_cast<uint32_t *>(p.row + (r * p.k + gc) / 2) = q.x;
          else *reinterpret_cast<uint2 *>(p.row + r * p.k + gc) = q;
          if ((lane & 3) == 0) rs[i * rstep] = (uint8_t)e8;
        }
      } else {
        const bool rin = r < p.m;
        if (EL != kE2M1) store_run8(p.row + r * p.row_pitch + gc, q, rin ? (int)ncols : 0);
        if (valid && rin) {
          if (EL == kE2M1) {
            uint32_t w1[1] = {q.x};
            keep_nibbles(w1, ncols);
            store_bytes(p.row + r * p.row_pitch + gc / 2, w1, p.row_pitch - gc / 2);
          }
          if ((lane & 3) == 0) rs[i * rstep] = (uint8_t)e8;
        }
      }
    }
  }
  if (COL) {
    uint32_t pm[8];
    float pmn[8];  // MXFP4: per column of this thread's 4 rows, NaN propagated
#pragma unroll
    for (int e = 0; e < 8; e++) {
      pmn[e] = 0.0f;
      if constexpr (EL == kE2M1) {
#pragma unroll
        for (int i = 0; i < 4; i++) pmn[e] = amax_nan(pmn[e], v[i][e]);
        float ml = pmn[e];
        if (isnan(ml)) {
          ml = 0.0f;
#pragma unroll
          for (int i = 0; i < 4; i++) ml = amax_f(ml, v[i][e]);
        }
        pm[e] = __float_as_uint(ml);
      } else {
        float mf = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; i++) mf = amax_f(mf, v[i][e]);
        pm[e] = __float_as_uint(mf);
      }
    }
    uint4 *pp = reinterpret_cast<uint4 *>(&part[warp][8 * lane]);
    pp[0] = make_uint4(pm[0], pm[1], pm[2], pm[3]);
    pp[1] = make_uint4(pm[4], pm[5], pm[6], pm[7]);
    __syncthreads();
    {
      int t = threadIdx.x;
      uint32_t m = part[0][t];
#pragma unroll
      for (int w = 1; w < kThreads / 32; w++) m = max(m, part[w][t]);
      uint32_t e8 = mx_exponent<EL>(__uint_as_float(m), p.floor);
      colf[t] = e8m0_rcp(e8);
      if (c0 + t < p.k) p.col_s.buf[p.col_s.index(c0 + t, r0 / 32)] = (uint8_t)e8;
    }
    __syncthreads();
    float f[8];
#pragma unroll
    for (int e = 0; e < 8; e++) f[e] = colf[8 * lane + e];
    if constexpr (EL == kE2M1) {
      // Transposed [K, M/2]: column c's 32 codes are 16 bytes; this thread holds
      // rows 4w..4w+3, two bytes of each of its 8 columns.
#pragma unroll
      for (int e = 0; e < 8; e++) {
        float col4[4] = {v[0][e], v[1][e], v[2][e], v[3][e]};
        uint32_t packed;
        if (__fmul_rn(pmn[e], f[e]) < 7.0f) {
          packed = e2m1_fast_pack<4>(col4, f[e]);
        } else {
          uint32_t c[4];
#pragma unroll
          for (int i = 0; i < 4; i++) c[i] = e2m1(__fmul_rn(col4[i], f[e]));
          packed = c[0] | (c[1] << 4) | (c[2] << 8) | (c[3] << 12);
        }
        colb[8 * lane + e][warp] = (uint16_t)packed;
      }
      __syncthreads();
      int t = threadIdx.x;
      if (c0 + t < p.k) {
        uint32_t w[4];
#pragma unroll
        for (int j = 0; j < 4; j++) w[j] = (uint32_t)colb[t][2 * j] | ((uint32_t)colb[t][2 * j + 1] << 16);
        if (EDGE) {
          keep_nibbles(w, p.m - r0);
          store_bytes(p.col + (c0 + t) * p.col_pitch + r0 / 2, w, p.col_pitch - r0 / 2);
        } else {
          *reinterpret_cast<uint4 *>(p.col + (c0 + t) * (p.m / 2) + r0 / 2) = make_uint4(w[0], w[1], w[2], w[3]);
        }
      }
    } else {
      // Not transposed [M, K] (spec §4.5): same place as the rowwise data.
      constexpr Fp8 F = EL == kE4M3 ? Fp8::E4M3 : Fp8::E5M2;
      if (EDGE || valid) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
          int64_t r = row_of(r0, i);
          uint32_t w[4];
#pragma unroll
          for (int j = 0; j < 4; j++) w[j] = fp8x2<F>(__fmul_rn(v[i][2 * j], f[2 * j]), __fmul_rn(v[i][2 * j + 1], f[2 * j + 1]));
          uint2 q = make_uint2(w[0] | (w[1] << 16), w[2] | (w[3] << 16));
          if (EDGE) store_run8(p.col + r * p.col_pitch + gc, q, r < p.m ? (int)ncols : 0);
          else if (row_in(i)) *reinterpret_cast<uint2 *>(p.col + r * p.k + gc) = q;
        }
      }
    }
  }
  if (COL) __syncthreads();  // the next tile reuses the shared arrays
  group_zpad(p, lt, tiles_c);
  }
  if constexpr (!G::kGroup) {
    // Last, where no tile's registers are live any more.
    zero_scale_padding(grp.tensor(0).row_s, blockIdx.x, gridDim.x);
    zero_scale_padding(grp.tensor(0).col_s, blockIdx.x, gridDim.x);
  }
}

// ---------------------------------------------------------------------------
// MXFP4 with BF16/FP16 input, and MXFP8 rowwise-only with aligned BF16/FP16
// rows of whole blocks in a group (a single tensor of aligned rows, any M,
// takes mx8_tile_kernel): the fast kernel. nvfp4.cu's nvfp4_fast_kernel (see
// there) adapted to 32-element blocks and E8M0 scales: a CTA walks a strip of
// 64×128 sub-tiles; a row-phase thread holds one 32-element block (16 words
// of raw pairs, its amax and NaN test from max.u16x2); the transpose goes
// through shared memory; every store instruction writes whole 32-byte
// sectors (H100 run 2: the old kernel's columnwise pass, with 16-byte stores
// of lanes in different rows and single scale bytes, made six L2 write
// sectors per useful one). Same bytes as mx_quantize_kernel<T, EL>, which
// keeps FP32 input, misaligned buffers and MXFP8's other cases. (MXFP8
// rowwise there: a block is four lanes' 8 elements, so its amax takes two
// shuffles and each lane derives the scale; here one thread has the block.)
// ---------------------------------------------------------------------------
constexpr int kXR = 64, kXC = 128, kXS = 8;
constexpr int kHS = 4;  // sub-tiles per strip at most (mx4_subtiles)

// Codes of 8 values v[i]·f (lq_e2m1), element i in bits 4i.
__device__ __forceinline__ uint32_t e2m1_ref_pack8(const float (&v)[8], float f) {
  uint32_t x = 0;
#pragma unroll
  for (int i = 0; i < 8; i++) x |= e2m1(__fmul_rn(v[i], f)) << (4 * i);
  return x;
}

// The codes of 8G elements of one block (G = 4: the whole block; 2: a half)
// held as 4G words of element pairs (element i is half i%2 of word w[i/2]):
// element i in bits 4(i%8) of o[i/8]. e8: the block's scale, f =
// e8m0_rcp(e8); amax and nan: the whole block's.
//
// BF16 with e8 <= 251 (f, f/2 and f/4 normal BF16 numbers), no NaN and
// fl(amax·f) < 7: two elements an instruction (e2m1_bf16x2_mags: 3 fma + 2
// min per pair against 2 × (3 FP32 ops + 2 min + conversion and packing);
// H100, 8192², mxfp4 both, see bench/RESULTS.md, branch mx4both); every
// other block through the reference encoding, as FP16 blocks that fail the
// FP32 fast form's test.
template <typename T, int G>
__device__ __forceinline__ void mx4_encode(const uint32_t *w, uint32_t e8, float amax, bool nan, uint32_t (&o)[G]) {
  using R = Raw16<T>;
  const float f = e8m0_rcp(e8);
  // One branch per block, not per 8 codes (a select per group compiled to
  // four branch regions, each recomputing f/2 and f/4).
  const bool fast = !nan && __fmul_rn(amax, f) < 7.0f && (InTraits<T>::kind != InType::BF16 || e8 <= 251u);
  if (fast) {
#pragma unroll
    for (int g = 0; g < G; g++) {
      if constexpr (InTraits<T>::kind == InType::BF16) {
        o[g] = e2m1_bf16x2_pack8(&w[4 * g], (254u - e8) * 0x00800080u);
      } else {
        float v[8];
#pragma unroll
        for (int i = 0; i < 8; i++) v[i] = (i & 1) ? R::hi(w[4 * g + i / 2]) : R::lo(w[4 * g + i / 2]);
        o[g] = e2m1_fast_pack<8>(v, f);
      }
    }
  } else {
#pragma unroll
    for (int g = 0; g < G; g++) {
      float v[8];
#pragma unroll
      for (int i = 0; i < 8; i++) v[i] = (i & 1) ? R::hi(w[4 * g + i / 2]) : R::lo(w[4 * g + i / 2]);
      o[g] = e2m1_ref_pack8(v, f);
    }
  }
}
template <typename T>
__device__ __forceinline__ uint4 mx4_encode32(const uint32_t *w, uint32_t e8, float amax, bool nan) {
  uint32_t o[4];
  mx4_encode<T, 4>(w, e8, amax, nan, o);
  return make_uint4(o[0], o[1], o[2], o[3]);
}

// max |x| over such a block, NaN ignored, from its 16-bit magnitude max m16
// (or, where that says NaN, from the values).
template <typename T>
__device__ __forceinline__ float mx4_amax(const uint32_t *w, uint32_t m16) {
  using R = Raw16<T>;
  if (m16 <= R::kInf) return R::mag(m16);
  float a = 0.0f;
#pragma unroll
  for (int j = 0; j < 16; j++) a = amax_f(amax_f(a, R::lo(w[j])), R::hi(w[j]));
  return a;
}

// The 32 FP8 codes of one such block (spec §4: fl(x·f) rounded to the
// element, f = e8m0_rcp(e8)), code i in byte i of o.
template <typename T, int EL>
__device__ __forceinline__ void mx8_encode32(const uint32_t *w, uint32_t e8, uint4 (&o)[2]) {
  using R = Raw16<T>;
  constexpr Fp8 F = EL == kE4M3 ? Fp8::E4M3 : Fp8::E5M2;
  const float f = e8m0_rcp(e8);
  uint32_t c[8];
#pragma unroll
  for (int i = 0; i < 8; i++)
    c[i] = fp8x2<F>(__fmul_rn(R::lo(w[2 * i]), f), __fmul_rn(R::hi(w[2 * i]), f)) |
           (fp8x2<F>(__fmul_rn(R::lo(w[2 * i + 1]), f), __fmul_rn(R::hi(w[2 * i + 1]), f)) << 16);
  o[0] = make_uint4(c[0], c[1], c[2], c[3]);
  o[1] = make_uint4(c[4], c[5], c[6], c[7]);
}

// EDGE: the instance for partial column blocks or rows at any offset (spec
// §14): rows lr ≡ w (mod 8) in warp w, so that a warp's rows share one
// 16-byte offset (shifted loads, load_chunk; the columnwise direction alone
// stages its sub-tiles instead, kStaged below), and stores that check bounds
// and alignment; without it the aligned code as measured, which also takes
// any M (rows past M zero-filled, MXFP4's columnwise rows of ⌈M/2⌉ bytes
// stored as EDGE stores them).
//
// EL: kE2M1 (MXFP4, every instance), or kE4M3 / kE5M2 (MXFP8: rowwise only,
// the aligned instance at any M; codes [M, K], spec §4.5).
//
// G: as mx_quantize_kernel's, with strips (of p.fs sub-tiles) as units.
template <typename T, int EL, bool ROW, bool COL, int MINB, bool PREF, bool EDGE, typename G>
__global__ void __launch_bounds__(kThreads, MINB) mx_fast_kernel(const __grid_constant__ G grp) {
  pdl_wait();
  static_assert(EL == kE2M1 || (ROW && !COL && !EDGE), "MXFP8: the rowwise aligned instance");
  using R = Raw16<T>;
  // kAsync: the aligned instance copies each sub-tile into shared memory
  // with cp.async, the next one while the CTA works on this one (two
  // buffers): bytes in flight without registers. The row phase reads its
  // chunk back from there. Warp w copies the rows its row phase holds (8w ..
  // 8w+7), so that without a columnwise pass a warp barrier orders them.
  constexpr bool kAsync = !EDGE;
  // kStaged: the EDGE instance with the columnwise direction alone stages
  // each sub-tile too, the next while the CTA works on this one, as the 18
  // 16-byte chunks from the 32-byte boundary at or below each row's first
  // element (rows at any even offset a, 0 .. 15 elements past it, spec §14:
  // element (row, col) at row·kEP + a + col), and the column phase reads its
  // elements there at each row's offset. A row's offset depends on the row
  // mod 16 alone (16·K elements are whole sectors) and is the same in every
  // sub-tile of the strip (64·K too); the base is only 16-byte aligned here
  // (mx_fast: no kRowsScalar), so offsets come from addresses. (H200,
  // 8191², columnwise, ms: 0.065 with the register loads of load_chunk and
  // a store into the tile; 0.059 staged from 16-byte boundaries, 17 chunks
  // a row, whose lanes then straddled sectors (L2 read requests 4.74 M
  // against 3.57 M from 32-byte boundaries); 0.057 with the copies'
  // addresses by strides; 0.052 now; 8192²'s 0.045-0.046 untouched. Both
  // directions staged, the row phase shifting its 32 elements out of five
  // chunks, ran 0.091 against the interior path's 0.086, and NVFP4's fast
  // kernel staged lost 2-12 % but in 1×16 columnwise (+2 %):
  // bench/RESULTS.md, 2026-12-02 15:05 section.)
  constexpr bool kStaged = EDGE && COL && !ROW;
  constexpr int kAE = 16;         // staged rows start on 32-byte boundaries: offsets 0 .. kAE−1 elements
  constexpr int kEP = kXC + kAE;  // a staged row's pitch (elements): 18 chunks
  // kHoriz: the aligned rowwise-only instance walks strips of sub-tiles side
  // by side (64 rows × 128·fs columns) rather than stacked, so that a row's
  // 4·fs compact scale bytes are adjacent: they gather in rsc and leave as
  // one store per row (a store per row and sub-tile wrote 4 bytes into its
  // own 32-byte sector).
  constexpr bool kHoriz = ROW && !COL && !EDGE;
  __shared__ __align__(16) uint16_t tile[kStaged ? 2 * kXR * kEP : COL || kAsync ? (kAsync ? 2 : 1) * kXR * kXC : 8];
  __shared__ __align__(16) uint8_t rsc[kHoriz ? kXR : 1][4 * kHS];
  __shared__ __align__(16) uint4 ccodes[COL ? 2 : 1][kXC + 4];      // [32-row half][column]: 32 codes
  __shared__ __align__(4) uint8_t csc[COL ? 2 * kXS : 1][kXC + 4];  // [32-row block of the strip][column]
  __shared__ __align__(16) uint4 stage[EDGE && ROW && COL ? kThreads / 32 * 8 * kRowChunks : 1];  // EDGE interior: each warp's next rows
  const int t = threadIdx.x;
  int64_t strip;
  const MxParams &p = grp.locate(blockIdx.x, &strip);
  const int fs = p.fs;
  const int64_t tiles_c = (p.k + kXC - 1) / kXC;
  const int64_t strips_c = kHoriz ? (tiles_c + fs - 1) / fs : tiles_c;  // strips across the columns
  const int64_t rs = (strip / strips_c) * (kHoriz ? kXR : kXR * fs), c0 = (strip % strips_c) * (kHoriz ? kXC * fs : kXC);
  const int64_t rows_left = p.m - rs, tiles_left = tiles_c - c0 / kXC;
  const int nsub = kHoriz ? (tiles_left >= fs ? fs : (int)tiles_left) : rows_left >= kXR * fs ? fs : (int)((rows_left + kXR - 1) / kXR);
  const bool stage_s = kHoriz && !p.row_s.swizzled && !p.row_s.j_major;  // compact rowwise scales: through rsc
  // Row phase: thread t holds row lr = t/4 of the sub-tile (EDGE: row
  // w + 8·(lane/4) of warp w), the block of columns 32q .. 32q+31 (q = t%4).
  const int lr = EDGE ? (t >> 5) + 8 * ((t & 31) >> 2) : t >> 2, q = t & 3;
  const int64_t c = c0 + 32 * q;
  uint32_t w[16], wn[16];
  // EDGE with both directions, an interior strip (uniform over the CTA): its
  // 128 columns and every row up to the one after its last (so that the 18th
  // chunk under each of its rows is inside the tensor) lie in the tensor, rows
  // load as vectors: no bound checks, and each warp copies its next rows into
  // shared memory (stage_rows8) while it processes the current ones. H100,
  // 8191² (bench/RESULTS.md, branch fp4ragged): 1597 → 1675 GB/s for both
  // directions (its registers no longer spill past the 64-register cap: 20 →
  // 12 bytes); one direction ran slower so (rowwise 2352 → 2112 GB/s,
  // columnwise 2080 → 2020): rowwise alone keeps the register loads of
  // load_chunk (where mx4_rows_kernel does not take it), columnwise alone
  // stages whole sub-tiles (kStaged).
  const bool inner = EDGE && ROW && COL && p.vec != kRowsScalar && c0 + kXC <= p.k && rs + (int64_t)kXR * nsub < p.m;
  // (Addresses recomputed where used: live across the loop, they made the
  // both-directions instance spill.)
  // kAsync: the sub-tile at rows r0s .., columns c0s .. into buffer b; warp
  // w's 128 chunks of 16 bytes lane after lane, so that one warp instruction
  // copies two whole rows.
  // With a columnwise direction, rows past M (a ragged M) are zero-filled:
  // the column blocks they end are those of the zero-padded tensor (spec
  // §14); the row phase never reads them (so the rowwise-only instance may
  // fill them too). Lane l's chunk i is row 8w + 2i + l/16, columns
  // 8·(l%16) ..: its four rows are 2 apart in x (one address, then a stride)
  // and in the tile (swz depends on the row's low bit only), and a row past
  // M copies 0 bytes (src-size) instead of branching (nvfp4_fast_kernel's
  // issue: there recomputing each chunk's addresses took 37 instructions).
  const uint32_t tile_s = (uint32_t)__cvta_generic_to_shared(tile) + 2u * (uint32_t)swz(8 * (t >> 5) + ((t & 31) >> 4), 8 * (t & 15));
  auto issue = [&](int64_t r0s, int64_t c0s, int b) {
    if (c0s + 8 * (t & 15) < p.k) {
      const int64_t row0 = r0s + 8 * (t >> 5) + ((t & 31) >> 4), left = p.m - row0;
      const T *g = (const T *)p.in + row0 * p.k + c0s + 8 * (t & 15);
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const bool ok = left > 2 * i;
        cp_async16_n(tile_s + 2u * (uint32_t)(b * kXR * kXC + 2 * i * kXC), ok ? (const void *)(g + 2 * i * p.k) : p.in,
                     ok ? 16u : 0u);
      }
    }
    cp_async_commit();
  };
  // kStaged: the offset (elements past a 32-byte boundary) of the strip's
  // first row at c0, the same for rows rs + 64j, and what each next row adds
  // to it, mod 16.
  const int a0 = (int)((reinterpret_cast<uintptr_t>((const T *)p.in + rs * p.k + c0) >> 1) & (kAE - 1)), kk = (int)(p.k & (kAE - 1));
  // kStaged: the sub-tile at rows r0s .. into buffer b; warp w copies rows
  // 8w .. 8w+7, two rows' chunks 0 .. 15 per instruction (lane l: row
  // 8w + 2u + l/16, chunk l%16, so that lanes 2i and 2i+1 copy one whole
  // sector) and the eight rows' chunks 16 and 17 (where a row starts past a
  // boundary) in lanes 0 .. 15. Only a sub-tile that holds the tensor's last
  // row, or whose rows' chunks could reach past the tensor's end (uniform
  // over the CTA: a row ρ ≤ M − 2 ends its chunks by element ρK + c0 + 144 ≤
  // MK where c0 + 144 ≤ 2K), checks bounds: a row past M copies 0 bytes (its
  // zeros end the column blocks, spec §14), and nothing past the tensor's
  // last element is read (a chunk that ends there copies what lies before
  // it). Each address is the lane's first row's plus a stride (a product per
  // chunk took about a sixth of the kernel's instructions: H200 ncu,
  // bench/RESULTS.md 2026-12-02 15:05 section, call 3).
  const uint32_t tile0 = (uint32_t)__cvta_generic_to_shared(tile);
  auto issue_staged = [&](int64_t r0s, int b) {
    const int lane = t & 31, w8 = 8 * (t >> 5), h = lane >> 4;
    const uint8_t *in8 = reinterpret_cast<const uint8_t *>(p.in);
    const int64_t rowb = p.k * (int64_t)sizeof(T);  // bytes from a row to the next
    const uint8_t *a = in8 + (r0s + w8 + h) * rowb + c0 * (int64_t)sizeof(T);  // the lane's first row at column c0
    const uint32_t d = tile0 + 2u * (uint32_t)(b * kXR * kEP + (w8 + h) * kEP + 8 * (lane & 15));
    // Lanes 0 .. 15: chunk jx of row xr, into dx.
    const int xr = w8 + (lane >> 1), jx = 16 + (lane & 1);
    const uint32_t dx = tile0 + 2u * (uint32_t)(b * kXR * kEP + xr * kEP + 8 * jx);
    const bool extra = lane < 16 && (a0 | kk) != 0;
    // The 32-byte boundary at or below row r0s + row's element at column c0.
    auto base32 = [&](int64_t gr) { return reinterpret_cast<uintptr_t>(in8 + gr * rowb + c0 * (int64_t)sizeof(T)) & ~(uintptr_t)(2 * kAE - 1); };
    const bool last = r0s + kXR >= p.m || c0 + kEP > 2 * p.k;
    if (!last) {
#pragma unroll
      for (int u = 0; u < 4; u++) {
        const uintptr_t src = (reinterpret_cast<uintptr_t>(a + 2 * u * rowb) & ~(uintptr_t)(2 * kAE - 1)) + 16 * (lane & 15);
        cp_async16_n(d + 2u * (uint32_t)(2 * u * kEP), reinterpret_cast<const void *>(src), 16u);
      }
      if (extra) cp_async16_n(dx, reinterpret_cast<const void *>(base32(r0s + xr) + 16 * jx), 16u);
    } else {
      const uintptr_t end = reinterpret_cast<uintptr_t>(in8 + p.m * rowb);
      auto chunk = [&](int row, int j, uint32_t dst) {
        const int64_t gr = r0s + row;
        const uintptr_t src = base32(gr < p.m ? gr : 0) + 16 * j;
        const uint32_t n = gr >= p.m || src >= end ? 0u : end - src >= 16 ? 16u : (uint32_t)(end - src);
        cp_async16_n(dst, n ? (const void *)src : p.in, n);
      };
#pragma unroll
      for (int u = 0; u < 4; u++) chunk(w8 + 2 * u + h, lane & 15, d + 2u * (uint32_t)(2 * u * kEP));
      if (extra) chunk(xr, jx, dx);
    }
    cp_async_commit();
  };
  if (kAsync) issue(rs, c0, 0);
  else if (kStaged) issue_staged(rs, 0);
  else if (inner) stage_rows8(&stage[(t >> 5) * 8 * kRowChunks], (const T *)p.in + (rs + (t >> 5)) * p.k + c0, 16 * p.k);
  else load_chunk<T, EDGE>(p.in, p.m, p.k, p.vec, rs + lr, c, w);

  for (int sub = 0; sub < nsub; sub++) {
    const int64_t r0 = kHoriz ? rs : rs + (int64_t)sub * kXR, r = r0 + lr;
    const int64_t cs = kHoriz ? c0 + (int64_t)sub * kXC : c0;  // the sub-tile's first column
    const int64_t c = cs + 32 * q;
    const uint16_t *cur = &tile[kAsync ? (sub & 1) * kXR * kXC : kStaged ? (sub & 1) * kXR * kEP : 0];
    if (kAsync || kStaged) {
      // The buffer the next copy overwrites was last read before the
      // previous sub-tile's second barrier.
      if (sub + 1 < nsub) {
        if (!COL) __syncwarp();  // (with COL: the previous sub-tile's barriers)
        if (kStaged) issue_staged(r0 + kXR, (sub + 1) & 1);
        else if (kHoriz) issue(r0, cs + kXC, (sub + 1) & 1);
        else issue(r0 + kXR, c0, (sub + 1) & 1);
        cp_async_wait_1();
      } else {
        cp_async_wait_all();
      }
      if (COL) __syncthreads();
      else __syncwarp();
      if (ROW && r < p.m && c < p.k) {
        const int x = ((q >> 1) & 1) | ((lr & 1) << 1);
#pragma unroll
        for (int j = 0; j < 4; j++) {
          uint4 u = *reinterpret_cast<const uint4 *>(&cur[lr * 128 + 32 * q + 8 * (j ^ x)]);
          w[4 * j] = u.x; w[4 * j + 1] = u.y; w[4 * j + 2] = u.z; w[4 * j + 3] = u.w;
        }
      }
    }
    if (inner) {
      // The warp's rows r0 + w + 8i share one offset.
      const T *row0 = (const T *)p.in + (r0 + (t >> 5)) * p.k + c0;
      unstage_rows8(&stage[(t >> 5) * 8 * kRowChunks], row0, 16 * p.k, w);
      if (sub + 1 < nsub) stage_rows8(&stage[(t >> 5) * 8 * kRowChunks], row0 + kXR * p.k, 16 * p.k);
    }
    if (PREF && sub + 1 < nsub) load_chunk<T, EDGE>(p.in, p.m, p.k, p.vec, r + kXR, c, wn);
    if (COL && !kAsync && !kStaged) store_chunk_swz<EDGE>(tile, lr, q, w);
    if (ROW && r < p.m && c < p.k) {
      uint32_t m16 = max(mag16(&w[0]), mag16(&w[8]));
      float amax = mx4_amax<T>(w, m16);
      uint32_t e8 = mx_exponent<EL>(amax, p.floor);
      if constexpr (EL != kE2M1) {
        uint4 o[2];
        mx8_encode32<T, EL>(w, e8, o);
        uint4 *d = reinterpret_cast<uint4 *>(p.row + r * p.k + c);
        d[0] = o[0];
        d[1] = o[1];
      } else {
        uint4 o = mx4_encode32<T>(w, e8, amax, m16 > R::kInf);
        if (EDGE) {
          uint32_t ow[4] = {o.x, o.y, o.z, o.w};
          if (c + 32 > p.k) keep_nibbles(ow, p.k - c);
          store_bytes(p.row + r * p.row_pitch + c / 2, ow, p.row_pitch - c / 2);
        } else {
          *reinterpret_cast<uint4 *>(p.row + ((r * p.k + c) >> 1)) = o;  // (>> 1: non-negative; / 2 on int64 took a sign fix-up)
        }
      }
      if (kHoriz && stage_s) rsc[lr][4 * sub + q] = (uint8_t)e8;
      else p.row_s.buf[p.row_s.index(r, c / 32)] = (uint8_t)e8;
    } else if (kHoriz && r < p.row_s.pad_i && c / 32 < p.row_s.pad_j) {
      // A padding scale (rows M .. pad_i, whose strips mx4_strips adds, or
      // blocks past K): 0 (plugins/mxfp8 zeroPadding), so that no memset
      // runs per call (a decode batch's scales are padded to 128 rows).
      if (stage_s) rsc[lr][4 * sub + q] = 0;
      else p.row_s.buf[p.row_s.index(r, c / 32)] = 0;
    }
    if (COL) {
      if (!kAsync && !kStaged) __syncthreads();
      // Thread t: column t%128 of the sub-tile, rows 32·hb .. 32·hb+31 (hb =
      // t/128), gathered as 16 words of row pairs so that the block is
      // handled exactly as a row block (16 registers; with column pairs of
      // 32 words per thread and half the threads idle this pass spilled
      // under 64 registers and ran slower: H100 run 3).
      {
        const int col = t & 127, hb = t >> 7;
        if (c0 + col < p.k && r0 + 32 * hb < p.m) {
          uint32_t wp[16];
          if constexpr (kStaged) {
            // Row 32hb + i at its offset (that of row i mod 16).
            const uint16_t *cb = cur + 32 * hb * kEP + col;
            int off[kAE];
#pragma unroll
            for (int j = 0; j < kAE; j++) off[j] = (a0 + j * kk) & (kAE - 1);
#pragma unroll
            for (int i = 0; i < 16; i++)
              wp[i] = (uint32_t)cb[2 * i * kEP + off[(2 * i) & (kAE - 1)]] | ((uint32_t)cb[(2 * i + 1) * kEP + off[(2 * i + 1) & (kAE - 1)]] << 16);
          } else {
#pragma unroll
            for (int i = 0; i < 16; i++)
              wp[i] = (uint32_t)cur[swz<EDGE>(32 * hb + 2 * i, col)] | ((uint32_t)cur[swz<EDGE>(32 * hb + 2 * i + 1, col)] << 16);
          }
          // BF16: the words opaque, so that the packed encode (words) and
          // the reference one (values) share them instead of keeping the 32
          // halves as well (that spilled 130-220 bytes at 64 registers).
          if constexpr (InTraits<T>::kind == InType::BF16) {
#pragma unroll
            for (int i = 0; i < 16; i++) asm("" : "+r"(wp[i]));
          }
          uint32_t m16 = max(mag16(&wp[0]), mag16(&wp[8]));
          float amax = mx4_amax<T>(wp, m16);
          uint32_t e8 = mx_exponent<kE2M1>(amax, p.floor);
          ccodes[hb][col] = mx4_encode32<T>(wp, e8, amax, m16 > R::kInf);
          csc[2 * sub + hb][col] = (uint8_t)e8;
        }
      }
      __syncthreads();
      // Lanes 2i and 2i+1: the two 16-byte halves of column i's 32 bytes.
      const int col = t >> 1, hb = t & 1;
      const int64_t cc = c0 + col, rr = r0 + 32 * hb;
      if (cc < p.k && rr < p.m) {
        uint4 o = ccodes[hb][col];
        if (EDGE || (p.m & 31) != 0) {
          // Rows of ⌈M/2⌉ bytes at any alignment (a ragged M). The padded
          // rows' nibbles are dropped, not their codes: a block whose scale
          // is NaN (an Inf in it) codes its zeros as 7 too (spec §14).
          uint32_t ow[4] = {o.x, o.y, o.z, o.w};
          if (rr + 32 > p.m) keep_nibbles(ow, p.m - rr);
          store_bytes(p.col + cc * p.col_pitch + rr / 2, ow, p.col_pitch - rr / 2);
        } else {
          *reinterpret_cast<uint4 *>(p.col + cc * (p.m >> 1) + (rr >> 1)) = o;
        }
      }
    }
    if (sub + 1 < nsub && !inner && !kAsync && !kStaged) {
      if (PREF) {
#pragma unroll
        for (int j = 0; j < 16; j++) w[j] = wn[j];
      } else {
        load_chunk<T, EDGE>(p.in, p.m, p.k, p.vec, r + kXR, c, w);
      }
    }
  }

  if (kHoriz && stage_s) {
    // Lane i < 8 of warp w: row 8w + i's scale bytes of the strip (its warp
    // wrote them), as one 16-byte store where the layout allows.
    __syncwarp();
    const int lane = t & 31, lrw = 8 * (t >> 5) + lane;
    const int64_t r = rs + lrw, j0 = c0 / 32, nbj = p.row_s.pad_j - j0;  // padding included
    const int nb = nbj < 4 * nsub ? (int)nbj : 4 * nsub;
    if (lane < 8 && r < p.row_s.pad_i) {
      uint8_t *dst = p.row_s.buf + p.row_s.index(r, j0);
      const uint8_t *src = rsc[lrw];
      if (nb == 16 && (reinterpret_cast<uintptr_t>(dst) & 15) == 0) {
        *reinterpret_cast<uint4 *>(dst) = *reinterpret_cast<const uint4 *>(src);
      } else if ((nb & 3) == 0 && (reinterpret_cast<uintptr_t>(dst) & 3) == 0) {
        for (int i = 0; i < nb / 4; i++) reinterpret_cast<uint32_t *>(dst)[i] = reinterpret_cast<const uint32_t *>(src)[i];
      } else {
        for (int i = 0; i < nb; i++) dst[i] = src[i];
      }
    }
  }
  if (COL) {
    // The strip's columnwise scales: column cc's blocks j0 .. are consecutive
    // bytes (compact layout; 4 at a time swizzled); thread t writes bytes
    // 4·(t%4) .. +3 of column t/4 (+64 per pass).
    const int64_t j0 = rs / 32;
    const int64_t nj_all = ceil_div(p.m, 32) - j0;
    const int nj = nj_all < 2 * fs ? (int)nj_all : 2 * fs;
#pragma unroll
    for (int pass = 0; pass < 2; pass++) {
      const int col = 64 * pass + (t >> 2), wd = t & 3;
      const int64_t cc = c0 + col, jb = j0 + 4 * wd;
      if (cc < p.k && 4 * wd < nj) {
        uint32_t word = (uint32_t)csc[4 * wd][col] | ((uint32_t)csc[4 * wd + 1][col] << 8) |
                        ((uint32_t)csc[4 * wd + 2][col] << 16) | ((uint32_t)csc[4 * wd + 3][col] << 24);
        uint8_t *dst = p.col_s.buf + p.col_s.index(cc, jb);
        if (4 * wd + 4 <= nj && (jb & 3) == 0 && !p.col_s.j_major && (reinterpret_cast<uintptr_t>(dst) & 3) == 0) {
          *reinterpret_cast<uint32_t *>(dst) = word;
        } else {
          for (int i = 0; i < 4 && 4 * wd + i < nj; i++) p.col_s.buf[p.col_s.index(cc, jb + i)] = (uint8_t)(word >> (8 * i));
        }
      }
    }
  }
}

// Tensors per grouped launch (the group is the kernels' parameter block).
constexpr int kMaxGroup = 128;
using MxGroup = Group<MxParams, kMaxGroup>;
static_assert(sizeof(MxGroup) <= kMaxKernelParams, "an MX group must fit in a kernel's parameters");

// The fast kernel's strips (units) of tensor p at fs sub-tiles per strip,
// stacked, or side by side (horiz: its kHoriz instance, whose strips also
// cover the rowwise scales' padding rows, which it zeroes).
int64_t mx4_strips(const MxParams &p, int fs, bool horiz) {
  if (!horiz) return ceil_div(ceil_div(p.m, kXR), fs) * ceil_div(p.k, kXC);
  const int64_t rows = p.row_s.pad_i > p.m ? p.row_s.pad_i : p.m;
  return ceil_div(rows, kXR) * ceil_div(ceil_div(p.k, kXC), fs);
}

// Sub-tiles per strip for the group's tensors: kHS (4), fewer where that
// would leave under two CTAs per SM's worth of work in all.
template <typename G>
int mx4_subtiles(const G &grp, bool horiz) {
  int fs = kHS;
  for (;;) {
    int64_t strips = 0;
    for (int i = 0; i < grp.size(); i++) strips += mx4_strips(grp.tensor(i), fs, horiz);
    if (fs == 1 || strips >= 2 * 132) return fs;
    fs /= 2;
  }
}

// The fast kernel's launch (16-bit input): 4 CTAs/SM (64 registers), no
// register prefetch: the fastest of the variants measured on the H100
// (cudaperf run 3, bench/RESULTS.md; the others were removed with their
// benchmark switches). One CTA per strip (grp's units). edge: MXFP4's EDGE
// instance (MXFP8 takes this kernel only where it needs none).
template <typename T, int EL, bool ROW, bool COL, typename G>
void launch_mx_fast(const G &grp, bool edge, cudaStream_t s) {
  unsigned g = (unsigned)grp.total();
  if constexpr (EL == kE2M1) {
    if (edge) {
      launch_kernel(mx_fast_kernel<T, EL, ROW, COL, 4, false, true, G>, g, kThreads, 0, s, grp);
      return;
    }
  }
  launch_kernel(mx_fast_kernel<T, EL, ROW, COL, 4, false, false, G>, g, kThreads, 0, s, grp);
}

// CTAs of mx_quantize_kernel<..., EDGE, RAGM, G> that fit on the GPU at once.
template <typename T, int EL, bool ROW, bool COL, bool EDGE, bool RAGM, typename G>
int mx_resident() {
  static const int resident = [] {  // once per instance (a thread-safe static)
    int per_sm = 0, dev = 0, sms = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, mx_quantize_kernel<T, EL, ROW, COL, EDGE, RAGM, G>, kThreads, 0) != cudaSuccess ||
        cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        per_sm < 1) {
      cudaGetLastError();
      per_sm = 2, sms = 132;
    }
    return per_sm * sms;
  }();
  return resident;
}

// Launch policy, from the H100 measurements in bench/RESULTS.md: MXFP8 with
// both directions runs a persistent grid (as many CTAs as fit walk all tiles,
// prefetching: 88 % of copy against 73 % with one CTA per tile); one direction,
// and MXFP4, run one CTA per tile (87-93 % and better for MXFP4). A group
// always runs a persistent grid, each CTA a run of consecutive tiles: with one
// CTA per tile, every CTA would first search the group for its tensor (H100
// MoE batch: a loop over the group's parameters in every CTA made one
// direction 10 % of copy). The kernel is the same either way. fast: MXFP4 of
// 16-bit input, the fast kernel (grp's units are its strips; otherwise 32×256
// tiles).
template <typename T, int EL, bool ROW, bool COL, bool EDGE, bool RAGM, typename G>
void launch_mx_tiles(const G &grp, cudaStream_t s) {
  const int64_t ntiles = grp.total();
  const bool persistent = G::kGroup || (ROW && COL && EL != kE2M1 && !EDGE);  // the EDGE instance does not prefetch
  const int64_t cap = persistent ? mx_resident<T, EL, ROW, COL, EDGE, RAGM, G>() : ntiles;
  unsigned g = (unsigned)(ntiles < cap ? ntiles : cap);
  // (The EDGE MXFP8 instance of one 16-bit tensor with both directions ran
  // two tiles per CTA, the second's chunks copied during the first: 4-5 %
  // faster than one CTA per tile on the H100. Rows in the flat frame take
  // mx8_band_kernel now, and the rest, a code buffer off the input's flat
  // alignment or K past kBandMaxK, one CTA per tile as one direction does.)
  launch_kernel(mx_quantize_kernel<T, EL, ROW, COL, EDGE, RAGM, G>, g, kThreads, 0, s, grp);
}

// Which instance of the tiles' kernel (or of the fast MXFP4 one) a tensor or
// a group needs: the most general one any of its tensors needs.
enum MxMode { kMxAligned = 0, kMxRaggedRows = 1, kMxEdge = 2 };

// Whether the fast kernel's instance for these directions and mode is
// kHoriz (rowwise only, not MXFP4's EDGE instance).
bool mx4_horiz(bool fp4, bool row, bool col, int mode) { return row && !col && !(fp4 && mode == kMxEdge); }

template <typename T, int EL, bool ROW, bool COL, typename G>
void launch_mx3(const G &grp, int mode, bool fast, cudaStream_t s) {
  if constexpr (sizeof(T) == 2 && (EL == kE2M1 || (ROW && !COL))) {
    if (fast) {
      launch_mx_fast<T, EL, ROW, COL>(grp, mode == kMxEdge, s);
      return;
    }
  }
  if constexpr (EL != kE2M1) {
    if (mode == kMxRaggedRows) {
      launch_mx_tiles<T, EL, ROW, COL, false, true>(grp, s);
      return;
    }
  }
  if (mode != kMxAligned) launch_mx_tiles<T, EL, ROW, COL, true, false>(grp, s);
  else launch_mx_tiles<T, EL, ROW, COL, false, false>(grp, s);
}

template <typename T, int EL, typename G>
void launch_mx2(const G &grp, bool row, bool col, int mode, bool fast, cudaStream_t s) {
  if (row && col) launch_mx3<T, EL, true, true>(grp, mode, fast, s);
  else if (row) launch_mx3<T, EL, true, false>(grp, mode, fast, s);
  else launch_mx3<T, EL, false, true>(grp, mode, fast, s);
}

template <typename T, typename G>
void launch_mx1(const G &grp, int el, bool row, bool col, int mode, bool fast, cudaStream_t s) {
  if (el == kE4M3) launch_mx2<T, kE4M3>(grp, row, col, mode, fast, s);
  else if (el == kE5M2) launch_mx2<T, kE5M2>(grp, row, col, mode, fast, s);
  else launch_mx2<T, kE2M1>(grp, row, col, mode, fast, s);
}

template <typename G>
void launch_mx(InType t, const G &grp, int el, bool row, bool col, int mode, bool fast, cudaStream_t s) {
  switch (t) {
    case InType::F32: launch_mx1<float>(grp, el, row, col, mode, fast, s); break;
    case InType::BF16: launch_mx1<__nv_bfloat16>(grp, el, row, col, mode, fast, s); break;
    case InType::F16: launch_mx1<__half>(grp, el, row, col, mode, fast, s); break;
  }
}

// ---------------------------------------------------------------------------
// MXFP8 rowwise alone from rows the tile kernels would shift and store as
// unaligned runs (an odd K, spec §14): the rows in flat order, as
// fp8_block_rows_kernel (cuda/fp8_block.cu; common.cuh: the flat rows
// kernels) with 1×32 blocks and E8M0 scales. A warp walks one row (or a
// segment of one: rows too few to fill the GPU are cut into segments of
// several steps) in steps of 32 chunks (512 elements, 16 blocks); lane l
// holds chunk 32t + l. The row's first element lies o elements into its
// first chunk, so block 16t + b is chunk 2b from element o on (lane 2b's
// "hi"), chunk 2b + 1 whole, and the first o elements of chunk 2b + 2 (its
// "lo": lane 2b + 2, or for b = 15 lane 0 of the next step, which the loads
// two steps ahead provide). Lane 2b reduces the block's amax (two shuffles)
// and derives its scale; an odd lane takes its block's scale from the lane
// below, an even lane also the previous block's (for its first o elements)
// from two lanes below (lane 0: the previous step's last block). The kernel
// zeroes its scale padding itself. (H200, 8191², rowwise: the EDGE tile
// instance ran 0.086 ms against 0.055 at 8192².)
// ---------------------------------------------------------------------------
constexpr int kRowThreads = 256;

struct Mx8RowParams {
  const void *in_al;  // input rounded down to a 16-element boundary: phase elements before the tensor
  uint8_t *out_al;    // rowwise codes rounded down likewise (the same phase)
  int64_t m, k;
  int phase;
  int nseg, seg_steps;  // segments per row, steps per segment
  int floor;
  ScaleOut s;
};

template <typename T, int EL>
__global__ void __launch_bounds__(kRowThreads, sizeof(T) == 2 ? 4 : 2) mx8_rows_kernel(const __grid_constant__ Mx8RowParams p) {
  pdl_wait();
  static_assert(EL != kE2M1, "MXFP8");
  static_assert(kRowThreads == 256, "flat_item: 8 warps per CTA");
  constexpr Fp8 F = EL == kE4M3 ? Fp8::E4M3 : Fp8::E5M2;
  constexpr uint32_t kAll = 0xFFFFFFFFu;
  const int lane = threadIdx.x & 31;
  const bool even = (lane & 1) == 0;
  const int64_t warps = (int64_t)gridDim.x * (kRowThreads / 32), items = p.m * p.nseg;
  const int nb = (int)((p.k + 31) / 32);  // k < kFlatRowMax
  const int steps = (nb + 15) / 16;
  for (int64_t item = (int64_t)blockIdx.x * (kRowThreads / 32) + threadIdx.x / 32; item < items; item += warps) {
    int t0, t1;
    const int64_t r = flat_item(p, item, steps, &t0, &t1);
    const FlatRow<T> fr(p.in_al, p.out_al, p.phase, r, p.k, t0, t1);
    // Lane l's block of step t, 16t + l/2: its scale at sp + t·sstep
    // (ScaleOut::row_off(16t + x) = row_off(x) + t·row_off(16), x < 16).
    uint8_t *const sp = p.s.buf + p.s.row_base(r) + p.s.row_off(lane >> 1);
    const int64_t sstep = p.s.row_off(16);
    const int o = fr.o;
    FlatWalk<T> w;
    w.start(fr);
    const uint32_t &lo = w.lo, &hi = w.hi, &lon = w.lon;
    uint32_t prev_e8 = 127;  // block 16t−1's scale (at t0: another segment's, its codes not stored here)
    for (int t = t0; t < t1; t++) {
      w.ahead(fr, t);
      // Block 16t + lane/2 at even lanes: magnitudes' float bits (NaN
      // ignored), which order as integers.
      const uint32_t mine = even ? hi : max(lo, hi);
      uint32_t a = max(mine, __shfl_down_sync(kAll, mine, 1));
      const uint32_t nlo = __shfl_down_sync(kAll, even ? lo : 0u, 2), nlo_step = __shfl_sync(kAll, lon, 0);
      a = max(a, lane == 30 ? nlo_step : nlo);
      const uint32_t e8 = mx_exponent<EL>(__uint_as_float(a), p.floor);
      const int j = 16 * t + (lane >> 1);
      if (even & (j < nb)) sp[t * sstep] = (uint8_t)e8;
      const uint32_t below = __shfl_up_sync(kAll, e8, 1);
      uint32_t pe = __shfl_up_sync(kAll, e8, 2);
      if (lane == 0) pe = prev_e8;
      prev_e8 = __shfl_sync(kAll, e8, 30);
      const float f = e8m0_rcp(even ? e8 : below), fp = even ? e8m0_rcp(pe) : f;
      uint4 v;
      with_offset(o, [&](auto oc) { v = chunk_codes<T, decltype(oc)::value, F>(w.cur, fp, f); });
      fr.store(t, v);
      w.next();
    }
    // Step t1's lane 0: its first o elements end block 16·t1 − 1.
    if (fr.has_tail()) {
      const float fp = e8m0_rcp(prev_e8);
      uint4 v;
      with_offset(o, [&](auto oc) { v = chunk_codes<T, decltype(oc)::value, F>(w.cur, fp, fp); });
      fr.store_tail(v);
    }
  }
  zero_scale_padding(p.s, blockIdx.x, gridDim.x);
}

template <typename T, int EL>
int32_t launch_mx8_rows_t(Mx8RowParams p, cudaStream_t st, quant_plugin_error *err) {
  static const int res = resident_ctas(mx8_rows_kernel<T, EL>, kRowThreads);
  if (res == 0) return fail(err, QUANT_ERROR_PLUGIN, "mxfp8: the rowwise kernel does not fit this GPU");
  const int64_t ctas = flat_rows_plan(p, res, kRowThreads, (ceil_div(p.k, (int64_t)32) + 15) / 16);
  launch_kernel(mx8_rows_kernel<T, EL>, (unsigned)ctas, kRowThreads, 0, st, p);
  LQ_LAUNCHED("mxfp8 rowwise kernel launch");
  return QUANT_OK;
}

// ---------------------------------------------------------------------------
// MXFP8 rowwise alone or columnwise alone from aligned 16-bit rows, any M
// (RAGM: rows past M load as zeros and store nothing, spec §14). Both
// directions' codes keep the input's layout [M, K] (spec
// §4.5): the data moves as in a flat cast; the rowwise maxima run along 4
// lanes' chunks (two shuffles), the columnwise ones down the tile's rows.
// One CTA per tile of 32 rows × kMx8TileC columns: warp w holds rows 4w ..
// 4w+3, lane l the 8-column chunks l + 32v (v < kMx8Chunks) of each, eight
// 16-byte loads in flight. Columnwise, each thread reduces its rows'
// magnitudes as packed 16-bit pairs (hmax2_mag: NaN ignored, as amax_f does
// for MXFP8; the magnitudes' order is their values'); the warps' maxima meet
// in shared memory behind the tile's one barrier, every thread forms the
// scales of its own columns from them and casts its elements, and warp w
// stores byte w of each chunk's eight scales. H200, BF16, of copy, against
// mx_quantize_kernel's columnwise instance (tiles of 32×256 walked with the
// next tile's loads in flight, the maxima as floats, three barriers a tile):
// 8192² 86 → 92 % (swizzled scales 84–85 → 91–92 %), 16384×7168 88 → 95 %;
// against mx_fast_kernel's rowwise instance: 8192² 89–90 → 92–93 %,
// 16384×7168 90–91 → 96 %, 2048×7168 71 → 77–78 %. Both directions at once
// stay on mx_quantize_kernel, which reads the input once for both: this
// kernel with both ran 76–80 % against its 83–86 % (bench/RESULTS.md,
// "MXFP8's columnwise quantize in one pass of 32-row tiles" and "MXFP8's
// rowwise quantize on the same tiles"). Any M (8191×8192 against
// mx_fast_kernel's and mx_quantize_kernel's ragged instances): rowwise 89–90
// → 92 %, columnwise 81 → 89 %. Rows at an odd K stay on the flat-frame
// kernels: this kernel with each row shifted into place in registers (four
// shuffles a chunk in, two out, a switch on the row's offset) ran 8191²
// rowwise in 0.078 ms against mx8_rows_kernel's 0.058, columnwise 0.095
// against 0.069 (bench/RESULTS.md, "MXFP8's tile kernel at any M").
constexpr int kMx8Chunks = 2;
constexpr int kMx8TileC = 32 * 8 * kMx8Chunks;

// MXFP8 of 16-bit input: the rowwise (ROW) or the columnwise (COL) codes of
// one tile; the rowwise blocks are 4 lanes' chunks (two shuffles).
template <typename T, int EL, bool ROW, bool COL, bool RAGM>
__global__ void __launch_bounds__(kThreads, 3) mx8_tile_kernel(const __grid_constant__ MxParams p) {
  pdl_wait();
  static_assert(sizeof(T) == 2 && EL != kE2M1 && ROW != COL, "MXFP8 of 16-bit input, one direction");
  __shared__ uint4 part[COL ? kThreads / 32 : 1][32 * kMx8Chunks];  // per warp and chunk: its 8 columns' maxima, packed
  const int64_t tiles_c = (p.k + kMx8TileC - 1) / kMx8TileC;
  int64_t tr, tc;
  tile_rc(blockIdx.x, tiles_c, &tr, &tc);
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
  const int64_t r0 = tr * kTileR + 4 * w, c0 = tc * kMx8TileC;
  const T *x = (const T *)p.in;
  constexpr Fp8 F = EL == kE4M3 ? Fp8::E4M3 : Fp8::E5M2;
  bool rok[4];  // row r0 + i inside the tensor (RAGM: any M; rows past it are zeros, spec §14)
#pragma unroll
  for (int i = 0; i < 4; i++) rok[i] = !RAGM || r0 + i < p.m;
  uint4 u[kMx8Chunks][4];
#pragma unroll
  for (int v = 0; v < kMx8Chunks; v++) {
    const int64_t gc = c0 + 8 * (l + 32 * v);  // K % 8 == 0: a chunk lies wholly inside or outside
#pragma unroll
    for (int i = 0; i < 4; i++)
      u[v][i] = (gc < p.k) & rok[i] ? __ldg(reinterpret_cast<const uint4 *>(x + (r0 + i) * p.k + gc)) : make_uint4(0, 0, 0, 0);
  }
  if constexpr (COL) {
#pragma unroll
    for (int v = 0; v < kMx8Chunks; v++) {
      uint4 m = make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int i = 0; i < 4; i++) {
        m.x = hmax2_mag<T>(m.x, u[v][i].x), m.y = hmax2_mag<T>(m.y, u[v][i].y);
        m.z = hmax2_mag<T>(m.z, u[v][i].z), m.w = hmax2_mag<T>(m.w, u[v][i].w);
      }
      part[w][l + 32 * v] = m;
    }
  }
  if constexpr (ROW) {
    // Row r0 + i's block of chunk v: lanes 4k .. 4k+3 (K % 32 == 0 in the
    // aligned mode, so a block is whole or past K for all four).
#pragma unroll
    for (int v = 0; v < kMx8Chunks; v++) {
      const int64_t gc = c0 + 8 * (l + 32 * v);
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const uint4 &a = u[v][i];
        uint32_t m = hmax2_mag<T>(hmax2_mag<T>(hmax2_mag<T>(hmax2_mag<T>(0u, a.x), a.y), a.z), a.w);
        m = max(m & 0xFFFFu, m >> 16);  // magnitudes order like their bits
        m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, 1));
        m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, 2));
        if ((gc < p.k) & rok[i]) {
          const uint32_t e8 = mx_exponent<EL>(__uint_as_float(mag16_bits<T>(m)), p.floor);
          const float f = e8m0_rcp(e8);
          const uint32_t wi[4] = {a.x, a.y, a.z, a.w};
          uint32_t q[4];
#pragma unroll
          for (int j = 0; j < 4; j++) q[j] = fp8x2<F>(__fmul_rn(elem<T>(wi, 2 * j), f), __fmul_rn(elem<T>(wi, 2 * j + 1), f));
          *reinterpret_cast<uint2 *>(p.row + (r0 + i) * p.k + gc) = make_uint2(q[0] | (q[1] << 16), q[2] | (q[3] << 16));
          if ((l & 3) == 0) p.row_s.buf[p.row_s.index(r0 + i, gc / 32)] = (uint8_t)e8;
        }
      }
    }
  }
  if constexpr (COL) {
    __syncthreads();
#pragma unroll
    for (int v = 0; v < kMx8Chunks; v++) {
      const int64_t gc = c0 + 8 * (l + 32 * v);
      if (gc >= p.k) continue;
      uint4 m = part[0][l + 32 * v];
#pragma unroll
      for (int j = 1; j < kThreads / 32; j++) {
        const uint4 o = part[j][l + 32 * v];
        m.x = hmax2_mag<T>(m.x, o.x), m.y = hmax2_mag<T>(m.y, o.y), m.z = hmax2_mag<T>(m.z, o.z), m.w = hmax2_mag<T>(m.w, o.w);
      }
      const uint32_t mw[4] = {m.x, m.y, m.z, m.w};
      uint32_t e8[8];
      float f[8];
#pragma unroll
      for (int c = 0; c < 8; c++) {
        e8[c] = mx_exponent<EL>(__uint_as_float(mag16_bits<T>((mw[c >> 1] >> (16 * (c & 1))) & 0xFFFFu)), p.floor);
        f[c] = e8m0_rcp(e8[c]);
      }
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const uint32_t wi[4] = {u[v][i].x, u[v][i].y, u[v][i].z, u[v][i].w};
        uint32_t q[4];
#pragma unroll
        for (int j = 0; j < 4; j++) q[j] = fp8x2<F>(__fmul_rn(elem<T>(wi, 2 * j), f[2 * j]), __fmul_rn(elem<T>(wi, 2 * j + 1), f[2 * j + 1]));
        if (rok[i]) *reinterpret_cast<uint2 *>(p.col + (r0 + i) * p.k + gc) = make_uint2(q[0] | (q[1] << 16), q[2] | (q[3] << 16));
      }
#pragma unroll
      for (int c = 0; c < 8; c++)
        if (c == w) p.col_s.buf[p.col_s.index(gc + c, tr)] = (uint8_t)e8[c];
    }
  }
  if constexpr (ROW) zero_scale_padding(p.row_s, blockIdx.x, gridDim.x);
  if constexpr (COL) zero_scale_padding(p.col_s, blockIdx.x, gridDim.x);
}

// MXFP8 with one direction through mx8_tile_kernel: rows of 8-element groups
// that vector loads and stores reach (modes kMxAligned and kMxRaggedRows: K %
// 8 == 0, 16-byte aligned rows and codes at pitch K; K % 32 == 0 for the
// rowwise direction), at least one whole tile row (M >= 32), a 16-bit input
// (else *done stays false). It zeroes the scale padding itself. Below 32
// rows, a decode step's activation, a tile row keeps one warp in eight at
// work and mx_fast_kernel is faster: H200, the MXFP8 quantize of a BF16
// [1, 8192] inside a libquant.torch.Linear call 4.0 µs here against 2.4 µs
// there, the layer's step (with the GEMM) at M 1 / 8 / 16, N = K = 8192,
// 1.41 / 1.30 / 1.29x BF16 against 1.49-1.52 / 1.45 / 1.40-1.42x
// (bench/RESULTS.md, "MXFP8 x NVFP4 decode with cross-block pairs", call 7).
int32_t launch_mx8_tile(InType t, int el, bool packed, int mode, const MxParams &p, cudaStream_t st, bool *done, quant_plugin_error *err) {
  *done = false;
  if (packed || mode == kMxEdge || t == InType::F32 || (p.row != nullptr) == (p.col != nullptr) || (p.row != nullptr && p.k % 32 != 0) ||
      p.m < kTileR)
    return QUANT_OK;
  const int64_t tiles = ceil_div(p.m, (int64_t)kTileR) * ceil_div(p.k, (int64_t)kMx8TileC);
  if (tiles > 0x7FFFFFFF) return QUANT_OK;
  *done = true;
  auto go = [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    void (*kern)(MxParams);
    if (mode == kMxRaggedRows)
      kern = p.row ? (el == kE4M3 ? mx8_tile_kernel<T, kE4M3, true, false, true> : mx8_tile_kernel<T, kE5M2, true, false, true>)
                   : (el == kE4M3 ? mx8_tile_kernel<T, kE4M3, false, true, true> : mx8_tile_kernel<T, kE5M2, false, true, true>);
    else
      kern = p.row ? (el == kE4M3 ? mx8_tile_kernel<T, kE4M3, true, false, false> : mx8_tile_kernel<T, kE5M2, true, false, false>)
                   : (el == kE4M3 ? mx8_tile_kernel<T, kE4M3, false, true, false> : mx8_tile_kernel<T, kE5M2, false, true, false>);
    launch_kernel(kern, (unsigned)tiles, kThreads, 0, st, p);
  };
  if (t == InType::BF16) go((__nv_bfloat16 *)nullptr);
  else go((__half *)nullptr);
  LQ_LAUNCHED("mxfp8 tile kernel launch");
  return QUANT_OK;
}

// ---------------------------------------------------------------------------
// MXFP4 rowwise alone from 16-bit rows at any even offset (an odd K, spec
// §14): the rows walked as the flat rows kernels walk them (common.cuh:
// FlatRow, FlatWalk; lane l holds the aligned chunk 32t + l of step t).
// MXFP4's codes do not follow the input's flat frame (half a byte per
// element, rows of ⌈K/2⌉ bytes), so each lane first shifts its chunk by the
// row's offset o, taking elements 0 .. o−1 from the next lane's chunk (lane
// 31: lane 0's chunk of the next step, which the loads two steps ahead
// hold; common.cuh: fp4_row_cols). It then holds row columns 16L .. 16L +
// 15 (L = 32t + l), half of block 16t + l/2, whose 8 code bytes are bytes
// 8L .. 8L + 7 of the row (common.cuh: Fp4RowStore). The two lanes of a
// block reduce its amax with one shuffle and encode as the tile kernels do
// (mx4_encode). The scale and code addresses advance by a step's bytes
// (0.050 → 0.047-0.048 ms at 8191²). One copy of the whole walk per
// offset (with_offset around the loop instead of the shift) ran 0.08-0.12:
// instruction fetch. The kernel zeroes its scale padding itself. (H200,
// bench/RESULTS.md 2026-11-29 19:38 section, rowwise, ms against the fast
// kernel's EDGE instance: 8191² 0.047-0.048 against 0.054 (0.043 at 8192²),
// 4096×4097 0.020 against 0.035, 4095×8191 0.026 against 0.032.)
// ---------------------------------------------------------------------------
struct Mx4RowParams : Fp4RowPlace {
  int floor;
  ScaleOut s;
};

template <typename T>
__global__ void __launch_bounds__(kRowThreads, 4) mx4_rows_kernel(const __grid_constant__ Mx4RowParams p) {
  pdl_wait();
  static_assert(sizeof(T) == 2, "16-bit input");
  using R = Raw16<T>;
  constexpr uint32_t kAll = 0xFFFFFFFFu;
  const int lane = threadIdx.x & 31;
  const int64_t warps = (int64_t)gridDim.x * (kRowThreads / 32), items = p.m * p.nseg;
  const int nb = (int)((p.k + 31) / 32), k = (int)p.k, pitch = (int)p.pitch;  // k < kFlatRowMax
  const int steps = (nb + 15) / 16;
  // Every row's codes start 8-byte aligned (the grid's test, uniform).
  const bool words = (pitch % 8 == 0) & ((reinterpret_cast<uintptr_t>(p.out) & 7) == 0);
  for (int64_t item = (int64_t)blockIdx.x * (kRowThreads / 32) + threadIdx.x / 32; item < items; item += warps) {
    int t0, t1;
    const int64_t r = flat_item(p, item, steps, &t0, &t1);
    // Lane l's block of step t, 16t + l/2: its scale at spt = sp + t·sstep
    // (ScaleOut::row_off(16t + x) = row_off(x) + t·row_off(16), x < 16).
    uint8_t *const sp = p.s.buf + p.s.row_base(r) + p.s.row_off(lane >> 1);
    const int64_t sstep = p.s.row_off(16);
    uint8_t *spt = sp + t0 * sstep;
    fp4_row_walk<T>(p, r, t0, t1, words, [&](int t, const uint32_t(&x)[8], Fp4RowStore &st) {
      // Block 16t + l/2: lanes l and l ^ 1. A NaN (a magnitude above Inf's)
      // is skipped by the amax, as the tile kernels' mx4_amax skips it.
      uint32_t m16 = mag16(x);
      m16 = max(m16, __shfl_xor_sync(kAll, m16, 1));
      const bool nan = m16 > R::kInf;
      float amax = R::mag(m16);
      if (__any_sync(kAll, nan)) {
        float a = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; j++) a = amax_f(amax_f(a, R::lo(x[j])), R::hi(x[j]));
        a = amax_f(a, __shfl_xor_sync(kAll, a, 1));
        if (nan) amax = a;
      }
      const uint32_t e8 = mx_exponent<kE2M1>(amax, p.floor);
      const int L = 32 * t + lane, j = 16 * t + (lane >> 1);
      if (((lane & 1) == 0) & (j < nb)) *spt = (uint8_t)e8;
      spt += sstep;
      uint32_t c[2];
      mx4_encode<T, 2>(x, e8, amax, nan, c);
      // Columns past K (the padding column K of an odd K) code 0, also in a
      // block whose scale is NaN (spec §14).
      if (16 * L + 16 > k) keep_nibbles(c, k - 16 * L);
      st.store((uint64_t)c[0] | ((uint64_t)c[1] << 32), t);
    });
  }
  zero_scale_padding(p.s, blockIdx.x, gridDim.x);
}

template <typename T>
int32_t launch_mx4_rows_t(Mx4RowParams p, cudaStream_t st, quant_plugin_error *err) {
  static const int res = resident_ctas(mx4_rows_kernel<T>, kRowThreads);
  if (res == 0) return fail(err, QUANT_ERROR_PLUGIN, "mxfp4: the rowwise kernel does not fit this GPU");
  const int64_t ctas = flat_rows_plan(p, res, kRowThreads, (ceil_div(p.k, (int64_t)32) + 15) / 16);
  launch_kernel(mx4_rows_kernel<T>, (unsigned)ctas, kRowThreads, 0, st, p);
  LQ_LAUNCHED("mxfp4 rowwise kernel launch");
  return QUANT_OK;
}

// ---------------------------------------------------------------------------
// MXFP8 with both directions from 16-bit rows at any even offset (an odd K,
// spec §14), in the flat frame
// (MxParams::flat; see mx8_flat_tile): a CTA walks a band of 32 rows, one
// columnwise block row, along K in steps of 256 columns (window t: columns
// 256t .. 256t + 255), each of its 8 warps rows w + 8i of the band (one
// offset o mod 8 elements: 8 rows are 8·K elements apart). Lane l holds the
// aligned 8-element chunk 32t + l of each of its rows (row columns 256t + 8l − o ..),
// and its codes are that chunk's aligned 8-byte code word in both
// directions. For the maxima lane 0 takes its elements e < o (window t − 1's,
// counted there) from chunk 32t + 32 instead, so that the warp's maxima are
// exactly window t's, lane l's element e at column (8l − o + e) mod 256 as
// in the flat tile; its codes e < o take block 8t − 1's scale, kept from the
// last step, and window t − 1's column scales, kept in a ring of two
// windows. Against one CTA per 32×256 tile (mx_quantize_kernel's flat
// frame):
// - the steps are copied into a ring of three shared stages two steps ahead
//   (cp.async, 33 chunks a row), a pointer bump apart, with no per-tile
//   set-up;
// - no code word straddles two tiles: every lane stores its chunk's word
//   whole (the tile wrote lane 0's two pieces byte by byte, a twelfth of
//   its instructions);
// - the band's edges are the walk's own (zero fill past the rows' chunks
//   and rows, the elements past a row's end zeroed in the stage, byte
//   stores at a row's first and last chunk), so no tile takes a checked
//   path.
// A band may be cut into segments of steps (too few bands to fill the
// GPU): a segment's first chunk leaves its bytes e < o to the segment
// before, whose last step stores them (chunk 32·t1's first o codes, with
// its own scales).
// H200 (bench/RESULTS.md, 2026-11-29 18:00 section), ms against the tile
// kernel: 8191² 0.117-0.120 against 0.122-0.124, 2048×7167 0.036 against
// 0.038, 45×4095 0.008-0.009 against 0.013-0.014. Columnwise alone keeps the
// tile kernel (8191²: this walk without its rowwise half ran 0.072 ms against
// 0.069); 16 warps of two rows (32 warps a SM) ran 0.123, issue-bound.
// ---------------------------------------------------------------------------
constexpr int kBandSlots = 3;
constexpr int kBandWarps = 8, kBandRows = kTileR / kBandWarps;  // a warp's rows: w + 8i
constexpr int kBandThreads = 32 * kBandWarps;
using BandStage = uint4[kBandWarps][kBandRows][kTileC / 8 + 1];  // a step's chunks, per warp and row
constexpr int kBandRing = 2 * kTileC;                       // the column scales of two windows
__device__ __forceinline__ int pad_ring(int c) { return c + (c >> 3); }

struct Mx8BandParams {
  MxParams p;
  int steps;            // windows of 256 columns per row
  int nseg, seg_steps;  // segments per band, steps per segment
};

// Shared memory of mx8_band_kernel: the stage ring, the column maxima of the
// warps (padded columns, kPadC) and the column scales' ring.
constexpr size_t kBandSmem =
    kBandSlots * sizeof(BandStage) + sizeof(uint32_t) * kBandWarps * kPadC + sizeof(float) * (kBandRing + kBandRing / 8);

// Bytes a .. b−1 of code word q at dst (8-byte aligned), one byte a store.
// Not inlined: the band kernel calls it at a row's ends only, and inlined
// ptxas predicated its stores into every step (H200: 2.2 of 34.5 warp
// instructions per 32 elements).
__device__ __noinline__ void store_bytes8(uint8_t *dst, uint2 q, int a, int b) {
#pragma unroll
  for (int e = 0; e < 8; e++)
    if ((e >= a) & (e < b)) dst[e] = (uint8_t)((e < 4 ? q.x : q.y) >> (8 * (e & 3)));
}

// The largest K the band kernel takes: its offsets within a band are 32-bit.
constexpr int64_t kBandMaxK = ((int64_t)1 << 31) / (2 * kTileR) - kTileC;

template <typename T, int EL>
__global__ void __launch_bounds__(kBandThreads, 3) mx8_band_kernel(const __grid_constant__ Mx8BandParams bp) {
  pdl_wait();
  using R = Raw16<T>;
  static_assert(sizeof(T) == 2 && EL != kE2M1, "MXFP8 of 16-bit input");
  extern __shared__ __align__(16) uint8_t band_smem[];
  BandStage *stages = reinterpret_cast<BandStage *>(band_smem);
  uint32_t(*part)[kPadC] = reinterpret_cast<uint32_t(*)[kPadC]>(band_smem + kBandSlots * sizeof(BandStage));
  float *colf = reinterpret_cast<float *>(band_smem + kBandSlots * sizeof(BandStage) + sizeof(uint32_t) * kBandWarps * kPadC);

  const MxParams &p = bp.p;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t band = blockIdx.x / bp.nseg;
  const int seg = (int)(blockIdx.x - band * bp.nseg);
  const int t0 = seg * bp.seg_steps, t1 = min(t0 + bp.seg_steps, bp.steps);
  const int64_t r0 = kTileR * band + warp;  // the warp's rows r0 + 8i
  const int64_t f0 = r0 * p.k;
  const int o = (int)(f0 & 7);
  const int lim = (int)p.k + o;  // chunk c holds the row's elements at o − 8c .. lim − 8c − 1 of it
  const int nc = (lim + 7) >> 3;
  const int rows = r0 >= p.m ? 0 : (int)min((int64_t)kBandRows, (p.m - r0 + kBandWarps - 1) / kBandWarps);  // rows of the warp inside the tensor
  // Row r0 + 8i's chunk c: input bytes at in + i·ri + 16c, codes at out + i·rc + 8c
  // (k < kBandMaxK: 32-bit offsets).
  const char *in = reinterpret_cast<const char *>((const T *)p.in + (f0 - o));
  const uint32_t rc = (uint32_t)(kBandWarps * p.k), ri = 2 * rc;
  const int64_t cbase = f0 - o;
  uint32_t sel[4], mk0[4];  // the halves of elements e < o; lane 0's (others 0)
#pragma unroll
  for (int j = 0; j < 4; j++) {
    sel[j] = low_half_mask(j, o);
    mk0[j] = lane == 0 ? sel[j] : 0u;
  }
  uint8_t *const rs = p.row_s.buf + p.row_s.row_base(r0);  // row r0 + 8i's scales at rs + i·rstep (one 32-row group)
  const uint32_t rstep = p.row_s.swizzled ? 16u * kBandWarps : (uint32_t)(kBandWarps * p.row_s.pad_j);
  const int nb = (int)((p.k + 31) >> 5);
  const uint32_t st0 = (uint32_t)__cvta_generic_to_shared(&stages[0][warp][0][lane]);
  uint32_t hs = 0;  // bit i: row r0 + 8i's chunks start 16 bytes past a 32-byte sector
#pragma unroll
  for (int i = 0; i < kBandRows; i++) hs |= (uint32_t)(((reinterpret_cast<uintptr_t>(in) + (uintptr_t)i * ri) >> 4) & 1) << i;

  // Step s's chunks 32s .. 32s + 32 of each row into stage s mod 3 (slot j:
  // chunk 32s + j); zeros past the row's chunks or rows.
  auto stage = [&](int s) {
    const uint32_t d = st0 + (uint32_t)(s % kBandSlots) * (uint32_t)sizeof(BandStage);
    const char *src = in + 512 * (int64_t)s + 16 * lane;
    if ((rows == kBandRows) & (32 * s + 33 <= nc)) {
      // Each row's 32-lane instruction takes the 32 chunks that fill whole
      // 32-byte sectors, lane 0 the one left: chunks 32s .. 32s + 31 and
      // 32s + 32 where chunk 32s starts a sector, else 32s + 1 .. 32s + 32
      // and 32s (bit i of hs; rows 8 apart alternate at an odd K). From
      // chunk 32s always, one sector of those rows was asked for by both
      // instructions (and a third time by the next step's): H200, 8191²,
      // both directions 0.120 → 0.119 ms; the same in the tile kernel's
      // stage_rows4 (columnwise alone) ran 0.069 → 0.070 and fp8_block's
      // tile prefetch level (bench/RESULTS.md, 2026-12-02 17:13 section).
#pragma unroll
      for (int i = 0; i < kBandRows; i++) {
        const uint32_t h = (hs >> i) & 1u;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d + 16 * (33 * i + h)), "l"(src + i * ri + 16 * h) : "memory");
        if (lane == 0) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d + 16 * (33 * i + 32 * (1 - h))), "l"(src + i * ri + 512 * (1 - h)) : "memory");
      }
    } else {
      const int c = 32 * s + lane;
#pragma unroll
      for (int i = 0; i < kBandRows; i++) {
        const bool a = (i < rows) & (c < nc), b = (i < rows) & (c + 32 < nc);
        cp_async16_n(d + 16 * 33 * i, a ? (const void *)(src + i * ri) : p.in, a ? 16u : 0u);
        if (lane == 0) cp_async16_n(d + 16 * (33 * i + 32), b ? (const void *)(src + i * ri + 512) : p.in, b ? 16u : 0u);
      }
    }
    cp_async_commit();
  };

  float prev[kBandRows] = {};  // lane 0: block 8t − 1's scale factor per row
  if (t0 < t1) stage(t0);
  if (t0 + 1 < t1) stage(t0 + 1);
  else cp_async_commit();
  for (int t = t0; t < t1; t++) {
    __syncwarp();  // the warp's lanes are done with stage t − 1, which t + 2 reuses
    if (t + 2 < t1) stage(t + 2);
    else cp_async_commit();
    cp_async_wait_2();
    __syncwarp();
    uint4(*st)[kTileC / 8 + 1] = stages[t % kBandSlots][warp];
    const int c = 32 * t + lane;  // the lane's chunk
    const int nhi = lim - 8 * c, nlo = lim - 8 * (32 * t + 32);
    // A chunk that reaches past the row's end holds the next row's elements
    // (or none): zeroed in the stage, so that they enter no maximum (spec
    // §14); their codes are not stored.
    if (8 * (32 * t + 33) > lim) {
      auto clip = [](uint4 &u, int n) {
        uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int j = 0; j < 4; j++) w[j] &= (2 * j < n ? 0xFFFFu : 0u) | (2 * j + 1 < n ? 0xFFFF0000u : 0u);
        u = make_uint4(w[0], w[1], w[2], w[3]);
      };
#pragma unroll
      for (int i = 0; i < kBandRows; i++) {
        if (nhi < 8) clip(st[i][lane], nhi);
        if ((lane == 0) & (nlo < 8)) clip(st[i][32], nlo);
      }
      __syncwarp();
    }
    // The lane's code bytes a .. b−1 are this segment's: all but lane 0's
    // e < o at the segment's first step (another segment's or row's) and
    // the bytes past the row's end.
    const int sa = (lane == 0) & (t == t0) ? o : 0, sb = nhi < 8 ? (nhi > 0 ? nhi : 0) : 8;
    const bool whole = (sa == 0) & (sb == 8);
    uint32_t pm[4] = {0u, 0u, 0u, 0u};  // column maxima over the warp's rows, 16-bit magnitudes
    float fh[kBandRows], flo[kBandRows];  // rowwise: the scale factors of the lane's elements e ≥ o and e < o, per row
    {
      uint8_t *const rss = rs + p.row_s.row_off(8 * t + (lane >> 2));
      const bool sok = ((lane & 3) == 0) & (8 * t + (lane >> 2) < nb);
#pragma unroll
      for (int i = 0; i < kBandRows; i++) {
        const uint4 cu = st[i][lane], d = st[i][32];
        const uint32_t cw[4] = {cu.x, cu.y, cu.z, cu.w}, dw[4] = {d.x, d.y, d.z, d.w};
        // Block 8t + l/4 (l % 4 = 0: the high part, e ≥ o; the low part is
        // block l/4 − 1's, and for lane 0 block 8t + 7's, from chunk 32t + 32):
        // as mx8_flat_tile.
        uint32_t l16 = 0, h16 = 0;
#pragma unroll
        for (int j = 0; j < 4; j++) {
          const uint32_t x = (dw[j] & mk0[j]) | (cw[j] & ~mk0[j]);
          pm[j] = hmax2_mag<T>(pm[j], x);
          l16 = hmax2_masked<T>(l16, x, sel[j] & 0x7FFF7FFFu);
          h16 = hmax2_masked<T>(h16, x, ~sel[j] & 0x7FFF7FFFu);
        }
        const uint32_t lo = hmax2_bits<T>(l16), hi = hmax2_bits<T>(h16);
        uint32_t m = (lane & 3) ? max(lo, hi) : hi;
        m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, 1));
        m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, 2));
        m = max(m, __shfl_sync(0xFFFFFFFFu, lo, (lane + 4) & 28));
        const uint32_t e8 = mx_exponent<EL>(__uint_as_float(m), p.floor);
        fh[i] = e8m0_rcp(e8);
        const float fl = __shfl_sync(0xFFFFFFFFu, fh[i], (lane & 3) ? lane : (lane + 31) & 31);
        flo[i] = lane == 0 ? prev[i] : fl;
        if (lane == 0) prev[i] = fl;  // block 8t + 7's: the next step's flo, and this one's tail
        if (sok & (i < rows)) rss[i * rstep] = (uint8_t)e8;
      }
    }
    // The column maxima: lane l's element e at padded column (8l − o + e) mod 256.
#pragma unroll
    for (int e = 0; e < 8; e++) part[warp][pad_col((8 * lane - o + e) & (kTileC - 1))] = mag16_bits<T>((pm[e >> 1] >> (16 * (e & 1))) & 0xFFFFu);
    __syncthreads();
    if (threadIdx.x < kTileC) {
      const int x = threadIdx.x, cx = pad_col(x);
      uint32_t m = part[0][cx];
#pragma unroll
      for (int w = 1; w < kBandWarps; w++) m = max(m, part[w][cx]);
      const uint32_t e8 = mx_exponent<EL>(__uint_as_float(m), p.floor);
      colf[pad_ring((kTileC * t + x) & (kBandRing - 1))] = e8m0_rcp(e8);
      const int64_t col = kTileC * (int64_t)t + x;
      if (col < p.k) p.col_s.buf[p.col_s.index(col, band)] = (uint8_t)e8;
    }
    __syncthreads();
    // Lane l's element e is column 256t + 8l − o + e (lane 0's e < o: window
    // t − 1's). Each element is widened once for both directions' codes.
    float f[8];
#pragma unroll
    for (int e = 0; e < 8; e++) f[e] = colf[pad_ring((kTileC * t + 8 * lane - o + e) & (kBandRing - 1))];
    const uint32_t at = 8 * (uint32_t)c;
    uint8_t *const colb = p.col + cbase + at, *const rowb = p.row + cbase + at;
#pragma unroll
    for (int i = 0; i < kBandRows; i++) {
      const uint4 cu = st[i][lane];
      const uint32_t cw[4] = {cu.x, cu.y, cu.z, cu.w};
      float v[8];
#pragma unroll
      for (int e = 0; e < 8; e++) v[e] = (e & 1) ? R::hi(cw[e >> 1]) : R::lo(cw[e >> 1]);
      if (i < rows) {
        const uint2 qc = encode8f<EL>(v, f);
        if (whole) *reinterpret_cast<uint2 *>(colb + i * rc) = qc;
        else store_bytes8(colb + i * rc, qc, sa, sb);
        float fr[8];
#pragma unroll
        for (int e = 0; e < 8; e++) fr[e] = e < o ? flo[i] : fh[i];
        const uint2 qr = encode8f<EL>(v, fr);
        if (whole) *reinterpret_cast<uint2 *>(rowb + i * rc) = qr;
        else store_bytes8(rowb + i * rc, qr, sa, sb);
      }
    }
    // The segment's last step: chunk 32·t1's first o elements (lane 0's
    // e < o above) close block 8t + 7 and window t, so their codes are this
    // segment's (clipped at the row's end).
    if ((t == t1 - 1) & (lane == 0) & (o != 0) & (nlo > 0)) {
      const int n = nlo < o ? nlo : o;
      float fc[8];
#pragma unroll
      for (int e = 0; e < 8; e++) fc[e] = colf[pad_ring((kTileC * t + kTileC - o + e) & (kBandRing - 1))];
#pragma unroll
      for (int i = 0; i < kBandRows; i++) {
        if (i < rows) {
          const uint4 d = st[i][32];
          const uint32_t dw[4] = {d.x, d.y, d.z, d.w};
          float v[8], fr[8];
#pragma unroll
          for (int e = 0; e < 8; e++) {
            v[e] = (e & 1) ? R::hi(dw[e >> 1]) : R::lo(dw[e >> 1]);
            fr[e] = prev[i];
          }
          const uint32_t at = i * rc + 8 * (uint32_t)(32 * t1);
          store_bytes8(p.row + cbase + at, encode8f<EL>(v, fr), 0, n);
          store_bytes8(p.col + cbase + at, encode8f<EL>(v, fc), 0, n);
        }
      }
    }
  }
  cp_async_wait_all();
  zero_scale_padding(p.row_s, blockIdx.x, gridDim.x);
  zero_scale_padding(p.col_s, blockIdx.x, gridDim.x);
}

// Segments per band for mx8_band_kernel's grid (bands × nseg CTAs): one
// step per CTA where the whole walk has fewer steps than the resident CTA
// slots; as many segments as keep the CTAs within one round of the slots
// where the bands are fewer than those (H200, 8191², 256 bands: one segment
// each ran both directions in 0.124 ms, three segments, two rounds of the
// 396 slots, 0.128); else the fewest that fill the last round to 90 % (every
// segment refills the stage ring), or the fullest last round.
inline void band_plan(int64_t bands, int steps, int resident, int *nseg, int *seg_steps) {
  int best = 1;
  double best_eff = 0;
  if (bands * steps <= resident) {
    best = steps;
  } else if (bands <= resident) {
    best = (int)(resident / bands);
  } else {
    for (int n = 1; n <= steps; n++) {
      const int64_t u = bands * n, rounds = ceil_div(u, (int64_t)resident);
      const double eff = (double)u / (double)(rounds * resident);
      if (eff > best_eff + 1e-9) best = n, best_eff = eff;
      if (eff >= 0.9) break;
    }
  }
  *seg_steps = (int)ceil_div((int64_t)steps, (int64_t)best);
  *nseg = (int)ceil_div((int64_t)steps, (int64_t)*seg_steps);
}

template <typename T, int EL>
int32_t launch_mx8_band_t(const MxParams &p, cudaStream_t st, quant_plugin_error *err) {
  auto kern = mx8_band_kernel<T, EL>;
  // Once per instance: the dynamic shared-memory limit and the resident CTAs.
  static const int resident = resident_ctas(kern, kBandThreads, kBandSmem);
  if (resident == 0) return fail(err, QUANT_ERROR_PLUGIN, "mxfp8: the band kernel does not fit this GPU (%zu bytes of shared memory)", kBandSmem);
  Mx8BandParams bp{};
  bp.p = p;
  bp.steps = (int)ceil_div(p.k, (int64_t)kTileC);
  const int64_t bands = ceil_div(p.m, (int64_t)kTileR);
  band_plan(bands, bp.steps, resident, &bp.nseg, &bp.seg_steps);
  launch_kernel(kern, (unsigned)(bands * bp.nseg), kBandThreads, kBandSmem, st, bp);
  LQ_LAUNCHED("mxfp8 band kernel launch");
  return QUANT_OK;
}

// MXFP8 with both directions through mx8_band_kernel, where the rows lie at
// any even offset in the flat frame (MxParams::flat; else *done stays
// false): one tensor, 16-bit input.
int32_t launch_mx8_band(InType t, int el, const MxParams &p, cudaStream_t st, bool *done, quant_plugin_error *err) {
  *done = false;
  if (t == InType::F32 || !p.flat || p.row == nullptr || p.col == nullptr || p.k > kBandMaxK ||
      ceil_div(p.m, (int64_t)kTileR) * ceil_div(p.k, (int64_t)kTileC) > 0x7FFFFFFF)
    return QUANT_OK;
  *done = true;
  if (t == InType::BF16) return el == kE4M3 ? launch_mx8_band_t<__nv_bfloat16, kE4M3>(p, st, err) : launch_mx8_band_t<__nv_bfloat16, kE5M2>(p, st, err);
  return el == kE4M3 ? launch_mx8_band_t<__half, kE4M3>(p, st, err) : launch_mx8_band_t<__half, kE5M2>(p, st, err);
}

struct MxGeom {
  int el;          // kE4M3, kE5M2, kE2M1
  bool packed;     // mxfp4
};

int32_t mx_geom(const quant_plugin_params *p, MxGeom *g, quant_plugin_error *err) {
  bool fp4 = strncmp(p->format, "mxfp4", sizeof p->format) == 0;
  if (fp4) {
    if (p->element != QUANT_ELEMENT_DEFAULT && p->element != QUANT_ELEMENT_E2M1)
      return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "params.element: mxfp4 elements are e2m1");
    *g = MxGeom{kE2M1, true};
    return QUANT_OK;
  }
  switch (p->element) {
    case QUANT_ELEMENT_DEFAULT:
    case QUANT_ELEMENT_E4M3: *g = MxGeom{kE4M3, false}; return QUANT_OK;
    case QUANT_ELEMENT_E5M2: *g = MxGeom{kE5M2, false}; return QUANT_OK;
  }
  return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "params.element: %d not supported by mxfp8", p->element);
}

// MXFP8 rowwise alone through mx8_rows_kernel, where the input and the codes
// lie at the same offset mod 16 elements and the codes' pitch is K (else
// *done stays false).
int32_t launch_mx8_rows(InType t, const MxGeom &g, const MxParams &bp, cudaStream_t st, bool *done, quant_plugin_error *err) {
  *done = false;
  Mx8RowParams p{};
  if (g.packed || bp.col != nullptr || bp.row_pitch != bp.k || !flat_rows_place(p, bp.in, bp.row, in_size(t), bp.m, bp.k)) return QUANT_OK;
  p.floor = bp.floor;
  p.s = bp.row_s;
  *done = true;
  switch (t) {
    case InType::F32: return g.el == kE4M3 ? launch_mx8_rows_t<float, kE4M3>(p, st, err) : launch_mx8_rows_t<float, kE5M2>(p, st, err);
    case InType::BF16:
      return g.el == kE4M3 ? launch_mx8_rows_t<__nv_bfloat16, kE4M3>(p, st, err) : launch_mx8_rows_t<__nv_bfloat16, kE5M2>(p, st, err);
    case InType::F16: return g.el == kE4M3 ? launch_mx8_rows_t<__half, kE4M3>(p, st, err) : launch_mx8_rows_t<__half, kE5M2>(p, st, err);
  }
  return fail(err, QUANT_ERROR_INTERNAL, "input type");
}

// MXFP4 rowwise alone through mx4_rows_kernel, from 16-bit rows at any even
// offset (else *done stays false).
int32_t launch_mx4_rows(InType t, const MxGeom &g, const MxParams &bp, cudaStream_t st, bool *done, quant_plugin_error *err) {
  *done = false;
  if (!g.packed || t == InType::F32 || bp.col != nullptr || bp.vec != kRowsShifted || bp.k >= kFlatRowMax || bp.row_pitch > 0x7FFFFFFF) return QUANT_OK;
  Mx4RowParams p{};
  fp4_rows_place(p, bp.in, bp.m, bp.k, bp.row, bp.row_pitch);
  p.floor = bp.floor;
  p.s = bp.row_s;
  *done = true;
  return t == InType::BF16 ? launch_mx4_rows_t<__nv_bfloat16>(p, st, err) : launch_mx4_rows_t<__half>(p, st, err);
}

// The scale layout of a direction (plugins/mxfp8 scaleLayoutOf): valid (ni, nj)
// on the block ceilings (spec §14 item 4), padded (pad128, pad4).
void scale_geom(const MxGeom &g, bool colwise, int64_t m, int64_t k, int swizzled, ScaleOut *s, int64_t *ni, int64_t *nj) {
  *ni = colwise ? k : m;
  *nj = colwise ? ceil_div(m, 32) : ceil_div(k, 32);
  s->pad_i = pad_to(*ni, 128);
  s->pad_j = pad_to(*nj, 4);
  s->ni = *ni;
  s->nj = *nj;
  s->j_major = colwise && !g.packed;
  s->swizzled = swizzled;
}

// A direction's buffers. Data rows are the layout's: [M, K] FP8 codes (both
// directions), packed FP4 [M, ⌈K/2⌉] rowwise and [K, ⌈M/2⌉] columnwise; a
// layout may pad the row pitch (spec §14 item 4), which the buffer's last dim
// then says, and *pitch returns.
int32_t mx_dir(const quant_plugin_storage &st, const MxGeom &g, bool colwise, int64_t m, int64_t k, int swizzled, uint8_t **data,
               int64_t *pitch, ScaleOut *s, bool *padded, quant_plugin_error *err) {
  int64_t ni, nj;
  scale_geom(g, colwise, m, k, swizzled, s, &ni, &nj);
  // Constant names, not snprintf on every call (host time per call, issue #15).
  const char *what = colwise ? "columnwise data" : "rowwise data";
  int64_t rows = g.packed && colwise ? k : m, cols = g.packed ? ceil_div(colwise ? m : k, 2) : k;
  LQ_TRY(row_pitch(st, QUANT_BUFFER_DATA, what, rows, cols, pitch, err));
  LQ_TRY(get_buffer(st, QUANT_BUFFER_DATA, what, rows * *pitch, (void **)data, err));
  what = colwise ? "columnwise scale_inv" : "rowwise scale_inv";
  LQ_TRY(get_buffer(st, QUANT_BUFFER_SCALE_INV, what, s->pad_i * s->pad_j, (void **)&s->buf, err));
  *padded = s->pad_i != ni || s->pad_j != nj;
  return QUANT_OK;
}

int32_t check_mx_dims(int64_t m, int64_t k, quant_plugin_error *err) {
  if (m < 0 || k < 0)
    return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "shape: [%lld, %lld]: a dim is negative (spec §14 takes any M, K ≥ 0)",
                (long long)m, (long long)k);
  return QUANT_OK;
}

// Dequantize: x = fl32(2^(e−127) · float(q)), rounded to the output dtype.
template <typename O, int EL>
__global__ void mx_dequantize_kernel(const uint8_t *__restrict__ q, int64_t pitch, ScaleOut s, O *out, int64_t m, int64_t k,
                                     int colwise) {
  pdl_wait();
  int64_t n = m * k, stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    int64_t r = idx / k, c = idx % k;
    uint32_t sb = colwise ? s.buf[s.index(c, r / 32)] : s.buf[s.index(r, c / 32)];
    float v;
    if constexpr (EL == kE2M1) {
      uint32_t code = colwise ? (q[c * pitch + r / 2] >> (4 * (r & 1))) & 0xF : (q[r * pitch + c / 2] >> (4 * (c & 1))) & 0xF;
      v = e2m1_decode(code);
    } else {
      v = fp8_decode<EL == kE4M3 ? Fp8::E4M3 : Fp8::E5M2>(q[r * pitch + c]);
    }
    store_out(out + idx, __fmul_rn(e8m0_decode(sb), v));
  }
}

template <typename O>
void launch_mx_deq(const uint8_t *q, int64_t pitch, const ScaleOut &s, void *out, int64_t m, int64_t k, int colwise, int el,
                   cudaStream_t st) {
  int64_t blocks = ceil_div(m * k > 0 ? m * k : 1, 256);
  if (blocks > grid_cap()) blocks = grid_cap();
  unsigned g = (unsigned)blocks;
  if (el == kE4M3) launch_kernel(mx_dequantize_kernel<O, kE4M3>, g, 256, 0, st, q, pitch, s, (O *)out, m, k, colwise);
  else if (el == kE5M2) launch_kernel(mx_dequantize_kernel<O, kE5M2>, g, 256, 0, st, q, pitch, s, (O *)out, m, k, colwise);
  else launch_kernel(mx_dequantize_kernel<O, kE2M1>, g, 256, 0, st, q, pitch, s, (O *)out, m, k, colwise);
}

// Scale layout conversion: dst[to(i, j)] = src[from(i, j)] for valid (i, j),
// 0 in the padding (plugins/mxfp8 SwizzleScales).
__global__ void mx_reswizzle_kernel(const uint8_t *__restrict__ src, ScaleOut from, ScaleOut to, int64_t ni, int64_t nj) {
  pdl_wait();
  int64_t n = to.pad_i * to.pad_j, stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    int64_t i = idx / to.pad_j, j = idx % to.pad_j;
    to.buf[to.index(i, j)] = (i < ni && j < nj) ? src[from.index(i, j)] : 0;
  }
}

}  // namespace
}  // namespace lq

using namespace lq;

namespace {

// Whether a quantize may take the fast kernel: MXFP4 with 16-bit rows that
// load as vectors (aligned or shifted); MXFP8 rowwise only with aligned
// 16-bit rows of whole blocks (mx_use_fast then asks for the aligned layout).
bool mx_fast(InType t, const MxGeom &g, const quant_plugin_quantize_args &a) {
  if (t == InType::F32) return false;
  const int64_t k = a.input.shape[1];
  const int mode = row_load_mode(a.input.data, k, in_size(t));
  if (g.el == kE2M1) return mode != kRowsScalar;
  return a.out[1].num_buffers == 0 && k % 32 == 0 && mode == kRowsAligned;
}

// Whether the kernel chosen (mode, after mx_prepare) is the fast one: MXFP4
// wherever mx_fast says so, MXFP8 where its aligned instance serves (the
// EDGE instance is MXFP4's alone; a misaligned or padded code buffer keeps
// mx_quantize_kernel).
bool mx_use_fast(bool fast, const MxGeom &g, int mode) { return fast && (g.el == kE2M1 || mode != kMxEdge); }

// Whether the kernel chosen zeroes p's scale padding itself: all but the
// fast kernel's instances with a columnwise direction or MXFP4's EDGE one.
bool mx_kernel_zeroes(bool fast, const MxGeom &g, bool row, bool col, int mode) {
  return !fast || mx4_horiz(g.el == kE2M1, row, col, mode);
}

// The scale padding of p (mx_prepare's p.zpad), for a quantize kernel that
// does not zero it: launch_scale_padding.
int32_t mx_zero_padding(const MxParams &p, cudaStream_t s, quant_plugin_error *err) {
  const ScaleOut none{};
  return launch_scale_padding((p.zpad & 1) ? p.row_s : none, (p.zpad & 2) ? p.col_s : none, s, err);
}

// One tensor's parameters, checks and padding (zeroPadding), shared by the
// single and the grouped quantize: *mode, the instance (MxMode) of the
// kernel that fast picks it needs; *tiles, its 32×256 tiles.
int32_t mx_prepare(const quant_plugin_quantize_args *a, InType t, const MxGeom &g, bool fast, MxParams *pp, int *mode, int64_t *tiles,
                   quant_plugin_error *err) {
  int64_t m = a->input.shape[0], k = a->input.shape[1];
  LQ_TRY(check_mx_dims(m, k, err));
  MxParams &p = *pp;
  p = MxParams{};
  p.in = a->input.data;
  p.m = m;
  p.k = k;
  p.floor = a->params->scale_rounding == QUANT_SCALE_FLOOR;
  p.fs = 1;
  cudaStream_t s = stream_of(a->stream);
  bool padded[2] = {false, false};
  if (a->out[0].num_buffers)
    LQ_TRY(mx_dir(a->out[0], g, false, m, k, a->params->gemm_swizzled_scales, &p.row, &p.row_pitch, &p.row_s, &padded[0], err));
  if (a->out[1].num_buffers)
    LQ_TRY(mx_dir(a->out[1], g, true, m, k, a->params->gemm_swizzled_scales, &p.col, &p.col_pitch, &p.col_s, &padded[1], err));
  // (A direction of a tensor with no elements has NULL buffers: asked for
  // all the same.)
  if (!a->out[0].num_buffers && !a->out[1].num_buffers) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "out: no direction asked");
  // Padding scales are 0 (plugins/mxfp8 zeroPadding), and so are the bytes of
  // a padded row pitch; the kernel writes the rest. p.zpad says which
  // directions' scales have padding (bit 0 rowwise, bit 1 columnwise):
  // mx_quantize_kernel zeroes it after its work, the fast kernel's
  // rowwise-only instance writes zeros there as scales of its own (no memset
  // per call: a decode batch's scales are padded to 128 rows); the fast
  // kernel's other instances, capped at 64 registers, would spill with a
  // zeroing loop, and the caller zeroes theirs with mx_zero_padding once it
  // knows the instance.
  p.vec = row_load_mode(a->input.data, k, in_size(t));
  // The flat frame (EDGE MXFP8 interior tiles): the input base is 16-byte
  // aligned (kRowsShifted), each code buffer 8-byte aligned with rows of K.
  auto flat_out = [&](const uint8_t *d, int64_t pitch) { return d == nullptr || (pitch == k && (reinterpret_cast<uintptr_t>(d) & 7) == 0); };
  p.flat = !g.packed && p.vec == kRowsShifted && flat_out(p.row, p.row_pitch) && flat_out(p.col, p.col_pitch);
  p.zpad = (padded[0] ? 1 : 0) | (padded[1] ? 2 : 0);
  if (p.row && p.row_pitch != (g.packed ? ceil_div(k, 2) : k))
    LQ_CUDA(cudaMemsetAsync(p.row, 0, m * p.row_pitch, s), "zeroing the rowwise row padding");
  if (p.col && p.col_pitch != (g.packed ? ceil_div(m, 2) : k))
    LQ_CUDA(cudaMemsetAsync(p.col, 0, (g.packed ? k : m) * p.col_pitch, s), "zeroing the columnwise row padding");
  *tiles = ceil_div(m, kTileR) * ceil_div(k, kTileC);
  if (*tiles > 0x7FFFFFFF) return fail(err, QUANT_ERROR_UNSUPPORTED, "input: too many tiles");
  // The aligned instance: whole 32-row blocks (MXFP8 also any M, through
  // RAGM: its data rows are [M, K] in both directions), rows of 8-element
  // groups that vector loads and stores reach (the buffers of the layout,
  // unpadded); the fast kernel's also whole 32-element row blocks, and any M
  // for MXFP4 (its rowwise rows are bounded by M, its columnwise blocks read
  // rows past M as zeros and store rows of ⌈M/2⌉ bytes at any alignment;
  // H200, 8191×8192 against the EDGE instance: columnwise 0.064 → 0.056 ms,
  // both 0.090 → 0.085. A separate instance for the ragged M was no faster
  // at 8192² than the one test in the store, bench/RESULTS.md).
  bool edge = !((m % 32 == 0 || !g.packed || fast) && k % 8 == 0 && p.vec == kRowsAligned && (p.row == nullptr || aligned16(p.row)) &&
                (p.col == nullptr || aligned16(p.col)) && (p.row == nullptr || p.row_pitch == (g.packed ? k / 2 : k)) &&
                (p.col == nullptr || p.col_pitch == (g.packed ? ceil_div(m, 2) : k)));
  if (fast) edge = edge || k % 32 != 0;
  *mode = edge ? kMxEdge : m % 32 != 0 ? kMxRaggedRows : kMxAligned;
  return QUANT_OK;
}

}  // namespace

extern "C" int32_t lq_mx_quantize(const quant_plugin_quantize_args *a, quant_plugin_error *err) {
  InType t;
  LQ_TRY(input_type(a->input, "input", &t, err));
  LQ_TRY(check_device(a->input, "input", err));
  MxGeom g;
  LQ_TRY(mx_geom(a->params, &g, err));
  const bool may = mx_fast(t, g, *a);
  Single<MxParams> one;
  int mode;
  LQ_TRY(mx_prepare(a, t, g, may, &one.p, &mode, &one.n, err));
  if (one.n == 0) return QUANT_OK;
  if (mode == kMxEdge && !g.packed && one.p.col == nullptr) {
    // MXFP8 rowwise alone from rows the tiles would shift (an odd K): the
    // rows in flat order, its scale padding zeroed by the kernel.
    bool done;
    LQ_TRY(launch_mx8_rows(t, g, one.p, stream_of(a->stream), &done, err));
    if (done) return QUANT_OK;
  }
  if (mode == kMxEdge && g.packed && one.p.col == nullptr) {
    // MXFP4 rowwise alone from rows at any even offset (an odd K): the rows
    // in flat order, its scale padding zeroed by the kernel.
    bool done;
    LQ_TRY(launch_mx4_rows(t, g, one.p, stream_of(a->stream), &done, err));
    if (done) return QUANT_OK;
  }
  if (mode == kMxEdge && !g.packed && one.p.row != nullptr && one.p.col != nullptr) {
    // MXFP8 with both directions from rows at any even offset: bands of 32
    // rows walked along K, the scale padding zeroed by the kernel.
    bool done;
    LQ_TRY(launch_mx8_band(t, g.el, one.p, stream_of(a->stream), &done, err));
    if (done) return QUANT_OK;
  }
  {
    // MXFP8 with one direction from aligned rows, any M: mx8_tile_kernel.
    bool done;
    LQ_TRY(launch_mx8_tile(t, g.el, g.packed, mode, one.p, stream_of(a->stream), &done, err));
    if (done) return QUANT_OK;
  }
  const bool fast = mx_use_fast(may, g, mode);
  if (!mx_kernel_zeroes(fast, g, one.p.row != nullptr, one.p.col != nullptr, mode)) LQ_TRY(mx_zero_padding(one.p, stream_of(a->stream), err));
  if (fast) {
    const bool horiz = mx4_horiz(g.el == kE2M1, one.p.row != nullptr, one.p.col != nullptr, mode);
    one.p.fs = mx4_subtiles(one, horiz);
    one.n = mx4_strips(one.p, one.p.fs, horiz);
  }
  launch_mx(t, one, g.el, one.p.row != nullptr, one.p.col != nullptr, mode, fast, stream_of(a->stream));
  LQ_LAUNCHED("mx quantize kernel launch");
  return QUANT_OK;
}

// Every tensor of the group in one launch (up to kMaxGroup tensors per
// launch): the units of all of them, numbered tensor after tensor, through
// the single quantize's kernels. Every option of the single call works here;
// the group must share the dtype, the params, the stream and the directions.
extern "C" int32_t lq_mx_quantize_grouped(const quant_plugin_quantize_grouped_args *a, quant_plugin_error *err) {
  if (a->count == 0) return QUANT_OK;
  InType t;
  LQ_TRY(input_type(a->items[0].input, "items[0].input", &t, err));
  const quant_plugin_params *p0 = a->items[0].params;
  MxGeom g;
  LQ_TRY(mx_geom(p0, &g, err));
  // The fast kernel serves the group where it serves every tensor.
  bool may = true;
  for (uint32_t i = 0; i < a->count; i++) {
    const quant_plugin_quantize_args *q = &a->items[i];
    InType ti;
    LQ_TRY(input_type(q->input, "items[].input", &ti, err));
    if (ti != t) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "items[%u].input: another dtype than items[0]", i);
    const quant_plugin_params *pi = q->params;
    if (pi != p0 && (strncmp(pi->format, p0->format, sizeof pi->format) != 0 || pi->element != p0->element ||
                     pi->scale_rounding != p0->scale_rounding || pi->gemm_swizzled_scales != p0->gemm_swizzled_scales))
      return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "items[%u].params: another format, element, scale rounding or scale layout than items[0]", i);
    if (q->stream != a->stream) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "items[%u].stream: not the group's stream", i);
    may = may && mx_fast(t, g, *q);
  }
  static MxGroup grp;  // ~22 KB: not on the stack; guarded by mu
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  bool row0 = false, col0 = false;
  cudaStream_t s = stream_of(a->stream);
  for (uint32_t base = 0; base < a->count; base += kMaxGroup) {
    uint32_t n = a->count - base < (uint32_t)kMaxGroup ? a->count - base : (uint32_t)kMaxGroup;
    grp.clear();
    int mode = kMxAligned;
    for (uint32_t j = 0; j < n; j++) {
      const quant_plugin_quantize_args *q = &a->items[base + j];
      LQ_TRY(check_device(q->input, "items[].input", err));
      MxParams p;
      int e;
      int64_t tiles;
      LQ_TRY(mx_prepare(q, t, g, may, &p, &e, &tiles, err));
      const bool row = q->out[0].num_buffers > 0, col = q->out[1].num_buffers > 0;
      if (base + j == 0) row0 = row, col0 = col;
      else if (row != row0 || col != col0)
        return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "items[%u].out: other directions than items[0]", base + j);
      if (tiles == 0) continue;  // an empty tensor: nothing to write (its scales are empty too)
      mode = e > mode ? e : mode;
      grp.add(p, tiles);
    }
    if (grp.count == 0) continue;
    const bool fast = mx_use_fast(may, g, mode);
    if (!mx_kernel_zeroes(fast, g, row0, col0, mode)) {
      for (int i = 0; i < grp.count; i++) LQ_TRY(mx_zero_padding(grp.t[i], s, err));
    }
    if (fast) {
      const bool horiz = mx4_horiz(g.el == kE2M1, row0, col0, mode);
      const int fs = mx4_subtiles(grp, horiz);
      for (int i = 0; i < grp.count; i++) {
        grp.t[i].fs = fs;
        grp.first[i + 1] = grp.first[i] + mx4_strips(grp.t[i], fs, horiz);
      }
    }
    if (grp.total() > 0x7FFFFFFF) return fail(err, QUANT_ERROR_UNSUPPORTED, "group: too many tiles");
    launch_mx(t, grp, g.el, row0, col0, mode, fast, s);
    LQ_LAUNCHED("mx grouped quantize kernel launch");
  }
  return QUANT_OK;
}

extern "C" int32_t lq_mx_dequantize(const quant_plugin_dequantize_args *a, quant_plugin_error *err) {
  LQ_TRY(check_device(a->out, "out", err));
  InType ot;
  LQ_TRY(input_type(a->out, "out", &ot, err));
  MxGeom g;
  LQ_TRY(mx_geom(a->params, &g, err));
  LQ_TRY(check_mx_dims(a->m, a->k, err));
  bool colwise = a->direction == QUANT_DIRECTION_COLUMNWISE, padded;
  uint8_t *q;
  int64_t pitch;
  ScaleOut sc;
  LQ_TRY(mx_dir(a->storage, g, colwise, a->m, a->k, a->params->gemm_swizzled_scales, &q, &pitch, &sc, &padded, err));
  cudaStream_t s = stream_of(a->stream);
  switch (ot) {
    case InType::F32: launch_mx_deq<float>(q, pitch, sc, a->out.data, a->m, a->k, colwise, g.el, s); break;
    case InType::BF16: launch_mx_deq<__nv_bfloat16>(q, pitch, sc, a->out.data, a->m, a->k, colwise, g.el, s); break;
    case InType::F16: launch_mx_deq<__half>(q, pitch, sc, a->out.data, a->m, a->k, colwise, g.el, s); break;
  }
  LQ_LAUNCHED("mx dequantize kernel launch");
  return QUANT_OK;
}

extern "C" int32_t lq_mx_swizzle(const quant_plugin_swizzle_args *a, quant_plugin_error *err) {
  MxGeom g;
  LQ_TRY(mx_geom(a->params, &g, err));
  LQ_TRY(check_mx_dims(a->m, a->k, err));
  bool colwise = a->direction == QUANT_DIRECTION_COLUMNWISE, padded;
  uint8_t *q;
  int64_t pitch;
  ScaleOut from;
  LQ_TRY(mx_dir(a->storage, g, colwise, a->m, a->k, a->params->gemm_swizzled_scales, &q, &pitch, &from, &padded, err));
  ScaleOut to = from;
  to.swizzled = a->swizzled != 0;
  if (to.swizzled == from.swizzled) return QUANT_OK;
  int64_t ni = colwise ? a->k : a->m, nj = colwise ? ceil_div(a->m, 32) : ceil_div(a->k, 32);
  int64_t n = from.pad_i * from.pad_j;
  cudaStream_t s = stream_of(a->stream);
  uint8_t *tmp = nullptr;
  LQ_CUDA(pool_malloc_async((void **)&tmp, n, s), "allocating %lld bytes for the scale copy", (long long)n);
  cudaError_t e = cudaMemcpyAsync(tmp, from.buf, n, cudaMemcpyDeviceToDevice, s);
  if (e == cudaSuccess) {
    int64_t blocks = ceil_div(n, 256);
    if (blocks > grid_cap()) blocks = grid_cap();
    launch_kernel(mx_reswizzle_kernel, (unsigned)blocks, 256, 0, s, tmp, from, to, ni, nj);
    e = cudaGetLastError();
  }
  cudaError_t fe = cudaFreeAsync(tmp, s);
  LQ_CUDA(e, "scale swizzle");
  LQ_CUDA(fe, "freeing the scale copy");
  return QUANT_OK;
}
