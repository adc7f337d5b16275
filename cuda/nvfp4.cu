// NVFP4 ("nvfp4", spec §5): E2M1 in 1×16 blocks (or 16×16 tiles), an E4M3
// scale per block and an FP32 global amax per direction, the 16-point random
// Hadamard transform of the columnwise copy and counter-based stochastic
// rounding. Bytes equal plugins/nvfp4's CPU kernels, whose definitions this
// follows line by line (scale.go, rht.go, stochastic.go, kernels.go):
//
//	S_enc = fminf(2688/amax, FLT_MAX), 1 when amax == 0 or S_enc == 0
//	S_dec = fl32(1/(double)S_enc)
//	code  = e4m3(fl32(bamax · fl32(S_enc · fl32(1/6))))     bamax: NaN ignored
//	enc_b = fminf(1/fl32(float(code) · S_dec), FLT_MAX)
//	q     = e2m1(fl32(x · enc_b))  or stochastic rounding with Philox bits
//
// The global amaxes come first (one read of the input), then one kernel reads
// 64×128 tiles once and writes both directions: rowwise from registers,
// columnwise (transposed) from shared memory. With the RHT on a columnwise
// copy, its amax pass also writes the transformed tensor (rounded to BF16),
// whose plain columnwise quantize is that copy (rht_col_params).
//
// Any M ≥ 1, K ≥ 1 (spec §14): the kernels compute on the zero-padded tensor
// (elements outside [M, K] load as zeros; the RHT transforms a partial
// 16-row group zero-padded) and store only inside the buffers: packed rows of
// ⌈K/2⌉ bytes rowwise, ⌈M/2⌉ columnwise, the nibbles of padded positions
// zeroed, scales on ⌈K/16⌉ / ⌈M/16⌉ blocks. Stochastic rounding keys each
// element by its place in the stored direction (sr_bytes).
#include <float.h>
#include <stdlib.h>

#include <mutex>
#include <type_traits>

#include "common.cuh"

namespace lq {
namespace {

constexpr int kThreads = 256, kTileR = 64, kTileC = 128, kStride = kTileC + 4;

struct GlobalScale {
  float s_enc_div6, s_dec;
};

// GlobalEncodeScale, GlobalDecodeScale (scale.go).
__device__ __forceinline__ GlobalScale global_scale(float amax) {
  float s = __fdiv_rn(2688.0f, amax);
  if (!(s <= FLT_MAX)) s = FLT_MAX;
  if (amax == 0.0f || s == 0.0f) s = 1.0f;
  GlobalScale g;
  g.s_enc_div6 = __fmul_rn(s, __uint_as_float(0x3E2AAAABu));
  g.s_dec = (float)(1.0 / (double)s);
  return g;
}

// blockScale (scale.go): the E4M3 scale code and the element factor.
__device__ __forceinline__ float block_scale(const GlobalScale &g, float bamax, uint32_t *code) {
  *code = fp8<Fp8::E4M3>(__fmul_rn(bamax, g.s_enc_div6));
  float enc = __frcp_rn(__fmul_rn(fp8_decode<Fp8::E4M3>((uint8_t)*code), g.s_dec));
  return enc > FLT_MAX ? FLT_MAX : enc;
}

// amaxBits over 16 values: NaN ignored.
__device__ __forceinline__ uint32_t amax16(const float (&v)[16]) {
  float m = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; i++) m = amax_f(m, v[i]);
  return __float_as_uint(m);
}

// max |x| over 16 values, NaN if one is NaN (the test for e2m1_fast_pack<8, true>).
__device__ __forceinline__ float amax16_nan(const float (&v)[16]) {
  float m = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; i++) m = amax_nan(m, v[i]);
  return m;
}

struct SR {
  uint2 key;
  uint32_t off0, off1;
};

// The block's four Philox words (stochastic.go): counter (b, b>>32 | dir<<31,
// offset), key seed.
__device__ __forceinline__ uint4 sr_words(const SR &sr, uint32_t dir, uint64_t b) {
  return philox4x32_10(make_uint4((uint32_t)b, (uint32_t)(b >> 32) | (dir << 31), sr.off0, sr.off1), sr.key);
}

// The random bytes of the 16 elements f0 .. f0+15 of a direction's stored
// [rows, cols] order (f = row·cols + col of the logical, unpadded shape),
// byte i for element f0+i: element f takes byte f%16 of the words of counter
// f/16 (spec §14 item 3). Where cols is a multiple of 16, f0/16 is the block
// index and this is sr_words; otherwise a block straddles two counters.
__device__ __forceinline__ uint4 sr_bytes(const SR &sr, uint32_t dir, uint64_t f0) {
  uint4 a = sr_words(sr, dir, f0 >> 4);
  const int s = (int)(f0 & 15);
  if (s == 0) return a;
  uint4 b = sr_words(sr, dir, (f0 >> 4) + 1);
  const uint32_t c[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
  const int ws = s >> 2, bs = (s & 3) * 8;
  uint32_t s1[7], s2[5];
#pragma unroll
  for (int j = 0; j < 7; j++) s1[j] = (ws & 1) ? c[j + 1] : c[j];
#pragma unroll
  for (int j = 0; j < 5; j++) s2[j] = (ws & 2) ? s1[j + 2] : s1[j];
  return make_uint4(__funnelshift_r(s2[0], s2[1], bs), __funnelshift_r(s2[1], s2[2], bs), __funnelshift_r(s2[2], s2[3], bs),
                    __funnelshift_r(s2[3], s2[4], bs));
}

// Stores the 16 codes q (element i in bits 4i) of elements col .. col+15 of
// a stored row of cols elements at dst (the row's byte col/2, pitch - col/2
// bytes left in the row), zeroing the nibbles past cols.
__device__ __forceinline__ void store_codes16(uint8_t *dst, uint64_t q, int64_t col, int64_t cols, int64_t left) {
  uint32_t w[2] = {(uint32_t)q, (uint32_t)(q >> 32)};
  if (col + 16 > cols) keep_nibbles(w, cols - col);
  store_bytes(dst, w, left);
}

// 16 codes, element i in bits 4i (encodeRN / encodeSR).
template <bool SRON>
__device__ __forceinline__ uint64_t encode16(const float (&v)[16], float enc, uint4 w) {
  uint32_t half[2] = {0, 0};  // 32-bit halves: cheaper shifts than one 64-bit word
#pragma unroll
  for (int i = 0; i < 16; i++) {
    float y = __fmul_rn(v[i], enc);
    uint32_t c;
    if (SRON) {
      uint32_t word = i < 4 ? w.x : i < 8 ? w.y : i < 12 ? w.z : w.w;
      c = lq_e2m1_sr(y, word, i & 3);
    } else {
      c = e2m1(y);
    }
    half[i >> 3] |= c << (4 * (i & 7));
  }
  return (uint64_t)half[0] | ((uint64_t)half[1] << 32);
}

// The RHT of 16 values (rht.go): float64 sums, butterfly when every partial sum
// is exact, else in ascending i; times 1/4; a zero made +0. y holds the sums.
__device__ __forceinline__ bool hadamard_neg(int i, int j) { return __popc(i & j) & 1; }

// One butterfly stage of fwht16 (constant H, so y stays in registers), in F.
template <int H, typename F>
__device__ __forceinline__ void wht_stage(F (&y)[16]) {
#pragma unroll
  for (int i = 0; i < 16; i += 2 * H)
#pragma unroll
    for (int j = 0; j < H; j++) {
      F a = y[i + j], b = y[i + j + H];
      y[i + j] = a + b;
      y[i + j + H] = a - b;
    }
}

// Returns whether an input is an infinity or NaN ("special"). Rounded once to
// BF16 (rhtBF16), these are the values the columnwise copy quantizes
// (rht_chunk_max_as writes them).
__device__ __forceinline__ bool rht_forward(const float (&v)[16], uint32_t mask, double (&y)[16]) {
  uint32_t lo = 255, hi = 0;
  bool special = false;
#pragma unroll
  for (int i = 0; i < 16; i++) {
    uint32_t a = mag_bits(v[i]);
    if (a == 0) continue;
    uint32_t e = a >> 23;
    if (e == 255) special = true;
    if (e == 0) e = 1;
    lo = min(lo, e);
    hi = max(hi, e);
  }
  if (special || hi <= lo + 41) {
#pragma unroll
    for (int i = 0; i < 16; i++) y[i] = ((mask >> i) & 1) ? -(double)v[i] : (double)v[i];
    wht_stage<1>(y);
    wht_stage<2>(y);
    wht_stage<4>(y);
    wht_stage<8>(y);
  } else {
    // Fully unrolled, so that v and y stay in registers.
#pragma unroll
    for (int j = 0; j < 16; j++) {
      double acc = 0.0;
#pragma unroll
      for (int i = 0; i < 16; i++) {
        double t = ((mask >> i) & 1) ? -(double)v[i] : (double)v[i];
        if (hadamard_neg(i, j)) t = -t;
        acc = i == 0 ? t : acc + t;
      }
      y[j] = acc;
    }
  }
#pragma unroll
  for (int j = 0; j < 16; j++) {
    y[j] *= 0.25;
    if (y[j] == 0.0) y[j] = 0.0;
  }
  return special;
}

struct ScaleBuf {
  uint8_t *buf = nullptr;
  int64_t pad_j = 0;  // pad4(stored cols / 16)
  int swizzled = 0;
  __device__ __forceinline__ int64_t index(int64_t i, int64_t j) const {
    return swizzled ? swizzle_index(i, j, pad_j) : i * pad_j + j;
  }
};

struct NvParams {
  const void *in;
  int64_t m, k;
  // Rows loaded (rows past it load as zeros): m, or for the RHT's transformed
  // tensor (rht_col_params) its ⌈m/16⌉·16 rows: the transform of a partial
  // 16-row group is nonzero in its padded rows, and the block amaxes are
  // those of the padded tensor's transform (spec §14); only m rows are stored.
  int64_t m_load;
  uint8_t *row, *col;
  int64_t row_pitch, col_pitch;  // bytes per stored row: ⌈k/2⌉, ⌈m/2⌉ (or the layout's padded pitch)
  ScaleBuf row_s, col_s;
  const float *row_amax, *col_amax;  // where each direction's global amax is read
  // Scalar copies the kernel makes (CTA 0, thread 0) instead of separate
  // cudaMemcpyAsync calls: amax_dst[i] = *amax_src[i] where amax_dst[i] is set.
  float *amax_dst[2];
  const float *amax_src[2];
  uint32_t mask;
  int rht;
  int vec;     // RowLoad: how input rows may be loaded
  int fs;      // fast kernel: 64-row sub-tiles per CTA (1 .. kFS)
  int row_s2;  // the rowwise scale buffer is 2-byte aligned
  int col_s4;  // the columnwise scale buffer is 4-byte aligned
  // Small tensors (nv_self_amax): every CTA reduces the input's global amax
  // itself instead of reading row_amax / col_amax, and the tensor's first CTA
  // stores it into self_dst[i] where set: one launch per quantize, not two.
  int self_amax;
  float *self_dst[2];
  SR sr;
};

// By the tensor's first CTA (unit 0).
__device__ __forceinline__ void copy_scalars(const NvParams &p, int64_t unit) {
  if (unit == 0 && threadIdx.x == 0) {
    if (p.amax_dst[0]) *p.amax_dst[0] = *p.amax_src[0];
    if (p.amax_dst[1]) *p.amax_dst[1] = *p.amax_src[1];
  }
}

// The global amaxes a CTA quantizes with (*ar rowwise, *ac columnwise):
// read from row_amax / col_amax, or with self_amax reduced over the whole
// input by this CTA (max |x|, NaN ignored: the amax pass's rule, amax_range),
// which the tensor's first CTA also stores. Every thread of the CTA calls it
// (a barrier when self_amax).
template <typename T>
__device__ __forceinline__ void nv_amaxes(const NvParams &p, int64_t unit, bool row, bool col, float *ar, float *ac) {
  if (p.self_amax) {
    __shared__ uint32_t red[kThreads / 32];
    uint32_t v = warp_max(amax_range<T, 8>((const T *)p.in, 0, p.m * p.k));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
#pragma unroll
    for (int w = 0; w < kThreads / 32; w++) v = max(v, red[w]);
    const float a = __uint_as_float(v);
    if (unit == 0 && threadIdx.x == 0) {
      if (p.self_dst[0]) *p.self_dst[0] = a;
      if (p.self_dst[1]) *p.self_dst[1] = a;
    }
    *ar = *ac = a;
    return;
  }
  if (row) *ar = *p.row_amax;
  if (col) *ac = *p.col_amax;
}

// Loads input elements c .. c+15 of row r as float32, zeros outside the
// tensor (the zero padding of spec §14), with vector loads where rows allow.
// UNI: the rows of the calling warp share one 16-byte offset (shifted loads
// take a switch on it, load_shifted_uniform, instead of selects).
template <typename T>
__device__ __forceinline__ void load16(const T *p, float (&v)[16], int vec);

template <typename T, bool UNI = false>
__device__ __forceinline__ void load_row16(const T *x, int64_t m, int64_t k, int mode, int64_t r, int64_t c, float (&v)[16]) {
  const T *p = x + r * k + c;
  if (r >= m || c >= k) {
#pragma unroll
    for (int i = 0; i < 16; i++) v[i] = 0.0f;
  } else if (c + 16 > k) {
#pragma unroll
    for (int i = 0; i < 16; i++) v[i] = c + i < k ? to_f32(p[i]) : 0.0f;
  } else if constexpr (sizeof(T) == 2) {
    if (mode == kRowsShifted && shifted_fits<8>(reinterpret_cast<const uint16_t *>(p), x + m * k)) {
      uint32_t w[8];
      if (UNI) load_shifted_uniform<8>(reinterpret_cast<const uint16_t *>(p), w);
      else load_shifted<8>(reinterpret_cast<const uint16_t *>(p), w);
      const T *h = reinterpret_cast<const T *>(w);
#pragma unroll
      for (int i = 0; i < 16; i++) v[i] = to_f32(h[i]);
    } else {
      load16<T>(p, v, mode == kRowsAligned);
    }
  } else {
    load16<T>(p, v, mode == kRowsAligned);
  }
}

template <typename T>
__device__ __forceinline__ void load16(const T *p, float (&v)[16], int vec) {
  float a[8], b[8];
  if (vec) {
    load8<T, true>(p, a);
    load8<T, true>(p + 8, b);
  } else {
    load8<T, false>(p, a);
    load8<T, false>(p + 8, b);
  }
#pragma unroll
  for (int i = 0; i < 8; i++) {
    v[i] = a[i];
    v[8 + i] = b[i];
  }
}

// A scale buffer's padding (rows ni..pad_i, columns nj..pad_j: spec §14
// item 4) for zero_scale_padding; a null buf: none.
struct NvPad : ScaleBuf {
  int64_t ni = 0, nj = 0, pad_i = 0;
};

// One tensor's launch: its parameters, and the padding of its scale buffers,
// which its kernel zeroes (every CTA a share, beside its own work: no
// separate launch ahead of it; 1.4–1.6 µs of a decode step's quantize on an
// H200, bench/RESULTS.md).
struct NvOne : Single<NvParams> {
  NvPad zr, zc;
};

// Zeroes z's padding, a share per thread of the grid: rows ni..pad_i as
// 4-byte words (entries (i, 4g .. 4g+3) are four consecutive bytes in both
// layouts: pad_j is a multiple of 4 and the swizzle keeps j % 4 innermost),
// where the buffer is 4-byte aligned, then columns nj..pad_j of the valid
// rows (fewer than 4 a row) byte by byte. 32-bit index arithmetic: the host
// checked that the count fits (nv_pad_fits).
__device__ __forceinline__ void nv_zero_pad(const NvPad &z) {
  if (z.buf == nullptr) return;
  const uint32_t gj = (uint32_t)(z.pad_j / 4), ni = (uint32_t)z.ni, nj = (uint32_t)z.nj;
  const uint32_t words = (uint32_t)(z.pad_i - z.ni) * gj, w = (uint32_t)(z.pad_j - z.nj), n = words + ni * w;
  const bool al = (reinterpret_cast<uintptr_t>(z.buf) & 3) == 0;
  for (uint32_t idx = blockIdx.x * blockDim.x + threadIdx.x; idx < n; idx += gridDim.x * blockDim.x) {
    if (idx < words) {
      uint8_t *d = z.buf + z.index(ni + idx / gj, 4 * (idx % gj));
      if (al) *reinterpret_cast<uint32_t *>(d) = 0;
      else d[0] = d[1] = d[2] = d[3] = 0;
    } else {
      const uint32_t r = idx - words;
      z.buf[z.index(r / w, nj + r % w)] = 0;
    }
  }
}
bool nv_pad_fits(const NvPad &z) { return z.pad_i * z.pad_j < ((int64_t)1 << 31); }

// The scale padding a kernel zeroes: a single tensor's (NvOne), none for a
// group's (launch_scale_padding first).
template <typename G>
__device__ __forceinline__ void nv_zero_pads(const G &grp) {
  if constexpr (std::is_same<G, NvOne>::value) {
    nv_zero_pad(grp.zr);
    nv_zero_pad(grp.zc);
  }
}

// The kernels take G: NvOne (one tensor) or NvGroup (quantize_grouped: the
// units of every tensor of the group, numbered tensor after tensor; a CTA's
// tensor comes from grp.locate).
//
// 1×16 blocks (tile1D).
template <typename T, bool ROW, bool COL, bool SRON, typename G>
__global__ void __launch_bounds__(kThreads) nvfp4_1d_kernel(const __grid_constant__ G grp) {
  pdl_wait();
  nv_zero_pads(grp);
  __shared__ __align__(16) float tile[kTileR * kStride];  // float4 stores: 16-byte aligned whatever else is static
  // A whole tile's columnwise codes and scales, [row block][column], stored
  // after the column pass as whole 32-byte sectors (see below).
  __shared__ uint64_t cq[COL ? kTileR / 16 : 1][COL ? kTileC : 1];
  __shared__ uint8_t csb[COL ? kTileR / 16 : 1][COL ? kTileC : 4];
  int64_t unit;
  const NvParams &p = grp.locate(blockIdx.x, &unit);
  copy_scalars(p, unit);
  const T *x = (const T *)p.in;
  int64_t tiles_c = (p.k + kTileC - 1) / kTileC;
  int64_t r0 = (unit / tiles_c) * kTileR, c0 = (unit % tiles_c) * kTileC;
  GlobalScale grow, gcol;
  float arow = 0.0f, acol = 0.0f;
  nv_amaxes<T>(p, unit, ROW, COL, &arow, &acol);
  if (ROW) grow = global_scale(arow);
  if (COL) gcol = global_scale(acol);
  const int64_t mb = ceil_div(p.m, 16);
#pragma unroll
  for (int it = 0; it < 2; it++) {
    // Warp w holds rows w, w+8, w+16, w+24 (+32): rows 8 apart have the same
    // 16-byte offset when K is odd (spec §14), so shifted loads are uniform.
    int lr = (threadIdx.x >> 5) + 8 * ((threadIdx.x & 31) >> 3) + 32 * it, cb = threadIdx.x % 8;
    int64_t r = r0 + lr, c = c0 + 16 * cb;
    bool valid = r < p.m && c < p.k;
    float v[16];
    load_row16<T, true>(x, p.m_load, p.k, p.vec, r, c, v);
    if (ROW && valid) {
      uint32_t code;
      float enc = block_scale(grow, __uint_as_float(amax16(v)), &code);
      uint4 w = make_uint4(0, 0, 0, 0);
      if (SRON) w = sr_bytes(p.sr, 0, (uint64_t)r * p.k + c);
      uint64_t q;
      if (!SRON && !isnan(amax16_nan(v))) q = (uint64_t)e2m1_fast_pack<8, true>(v, enc) | ((uint64_t)e2m1_fast_pack<8, true>(v + 8, enc) << 32);
      else q = encode16<SRON>(v, enc, w);
      store_codes16(p.row + r * p.row_pitch + c / 2, q, c, p.k, p.row_pitch - c / 2);
      p.row_s.buf[p.row_s.index(r, c / 16)] = (uint8_t)code;
    }
    if (COL) {
      float4 *s = reinterpret_cast<float4 *>(&tile[lr * kStride + 16 * cb]);
#pragma unroll
      for (int i = 0; i < 4; i++) s[i] = make_float4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]);
    }
  }
  if (COL) {
    __syncthreads();
    // Thread t: column c0 + t%128, row blocks 2·(t/128) and 2·(t/128)+1 of the
    // tile; stored row c, stored block (r0/16 + b).
    int lc = threadIdx.x % kTileC, h = threadIdx.x / kTileC;
    int64_t c = c0 + lc;
    // Whole: the tile's 64 rows inside M and every stored row's 32 bytes
    // 16-byte aligned (the same for the whole CTA). Stored from here, each
    // thread's two 8-byte pieces of 32 different columns touched 32 sectors
    // per store instruction and each scale byte one more (H200 ncu, RHT
    // columnwise 8192²: L2 65 % busy, DRAM 20 %).
    const bool whole = r0 + kTileR <= p.m && (p.col_pitch & 15) == 0 && (reinterpret_cast<uintptr_t>(p.col) & 15) == 0;
#pragma unroll
    for (int bb = 0; bb < 2; bb++) {
      int lb = 2 * h + bb;
      int64_t rb = r0 / 16 + lb;
      if (c >= p.k || rb >= mb) continue;
      float v[16];
#pragma unroll
      for (int i = 0; i < 16; i++) v[i] = tile[(16 * lb + i) * kStride + lc];
      // Round to nearest as the rows above: through e2m1_fast_pack<8, true>
      // (lq_e2m1_capped: the same codes for every non-NaN value, most of the
      // work on the FMA pipe) where the 16 values hold no NaN.
      uint32_t code;
      float enc = block_scale(gcol, __uint_as_float(amax16(v)), &code);
      uint4 w = make_uint4(0, 0, 0, 0);
      if (SRON) w = sr_bytes(p.sr, 1, (uint64_t)c * p.m + 16 * rb);
      uint64_t q;
      if (!SRON && !isnan(amax16_nan(v))) q = (uint64_t)e2m1_fast_pack<8, true>(v, enc) | ((uint64_t)e2m1_fast_pack<8, true>(v + 8, enc) << 32);
      else q = encode16<SRON>(v, enc, w);
      if (whole) {
        cq[lb][lc] = q;
        csb[lb][lc] = (uint8_t)code;
        continue;
      }
      store_codes16(p.col + c * p.col_pitch + rb * 8, q, 16 * rb, p.m, p.col_pitch - rb * 8);
      p.col_s.buf[p.col_s.index(c, rb)] = (uint8_t)code;
    }
    if (whole) {
      __syncthreads();
      // Lanes 2i and 2i+1: the two 16-byte halves of column i's 32 bytes
      // (row blocks 0-1 and 2-3), so that a store instruction writes 16
      // whole sectors; lane 2i also the column's four scale bytes, as one
      // 4-byte store where the layout keeps them together (compact rows of
      // pad4 blocks; the swizzled layout's groups of 4 blocks).
      const int col = threadIdx.x >> 1, hh = threadIdx.x & 1;
      const int64_t cc = c0 + col, rb0 = r0 / 16;
      if (cc < p.k) {
        const uint64_t a = cq[2 * hh][col], b = cq[2 * hh + 1][col];
        *reinterpret_cast<uint4 *>(p.col + cc * p.col_pitch + r0 / 2 + 16 * hh) =
            make_uint4((uint32_t)a, (uint32_t)(a >> 32), (uint32_t)b, (uint32_t)(b >> 32));
        if (hh == 0) {
          const uint32_t word = (uint32_t)csb[0][col] | ((uint32_t)csb[1][col] << 8) | ((uint32_t)csb[2][col] << 16) | ((uint32_t)csb[3][col] << 24);
          uint8_t *d = p.col_s.buf + p.col_s.index(cc, rb0);
          if (p.col_s.buf + p.col_s.index(cc, rb0 + 3) == d + 3 && (reinterpret_cast<uintptr_t>(d) & 3) == 0) {
            *reinterpret_cast<uint32_t *>(d) = word;
          } else {
#pragma unroll
            for (int i = 0; i < 4; i++) p.col_s.buf[p.col_s.index(cc, rb0 + i)] = (uint8_t)(word >> (8 * i));
          }
        }
      }
    }
  }
}

// 16×16 tiles (tile2D): one amax and scale per tile; each element is rounded
// once (SR with the rowwise bits); columnwise holds the transposed codes and
// both directions repeat the tile's scale over its 16 stored rows.
template <typename T, bool ROW, bool COL, bool SRON, typename G>
__global__ void __launch_bounds__(kThreads) nvfp4_2d_kernel(const __grid_constant__ G grp) {
  pdl_wait();
  nv_zero_pads(grp);
  __shared__ uint32_t bam[kTileR][kTileC / 16];
  __shared__ uint64_t codes[kTileR][kTileC / 16];
  __shared__ uint8_t tcode[kTileR / 16][kTileC / 16];
  int64_t unit;
  const NvParams &p = grp.locate(blockIdx.x, &unit);
  copy_scalars(p, unit);
  const T *x = (const T *)p.in;
  int64_t tiles_c = (p.k + kTileC - 1) / kTileC;
  int64_t r0 = (unit / tiles_c) * kTileR, c0 = (unit % tiles_c) * kTileC;
  float arow = 0.0f, acol = 0.0f;
  nv_amaxes<T>(p, unit, ROW, !ROW, &arow, &acol);
  GlobalScale g = global_scale(ROW ? arow : acol);
  const int64_t mb = ceil_div(p.m, 16);
  float v[2][16];
#pragma unroll
  for (int it = 0; it < 2; it++) {
    int lr = threadIdx.x / 8 + 32 * it, cb = threadIdx.x % 8;
    int64_t r = r0 + lr, c = c0 + 16 * cb;
    load_row16<T>(x, p.m_load, p.k, p.vec, r, c, v[it]);
    bam[lr][cb] = amax16(v[it]);
  }
  __syncthreads();
#pragma unroll
  for (int it = 0; it < 2; it++) {
    int lr = threadIdx.x / 8 + 32 * it, cb = threadIdx.x % 8;
    int64_t r = r0 + lr, c = c0 + 16 * cb;
    int tr = lr / 16;
    uint32_t m = 0;
#pragma unroll
    for (int i = 0; i < 16; i++) m = max(m, bam[16 * tr + i][cb]);
    uint32_t code;
    float enc = block_scale(g, __uint_as_float(m), &code);
    uint4 w = make_uint4(0, 0, 0, 0);
    bool valid = r < p.m && c < p.k;
    if (SRON && valid) w = sr_bytes(p.sr, 0, (uint64_t)r * p.k + c);
    uint64_t q = encode16<SRON>(v[it], enc, w);
    codes[lr][cb] = q;
    if ((lr & 15) == 0) tcode[tr][cb] = (uint8_t)code;
    if (ROW && valid) {
      store_codes16(p.row + r * p.row_pitch + c / 2, q, c, p.k, p.row_pitch - c / 2);
      p.row_s.buf[p.row_s.index(r, c / 16)] = (uint8_t)code;
    }
  }
  if (COL) {
    __syncthreads();
    int lc = threadIdx.x % kTileC, h = threadIdx.x / kTileC;
    int64_t c = c0 + lc;
#pragma unroll
    for (int bb = 0; bb < 2; bb++) {
      int lb = 2 * h + bb;
      int64_t rb = r0 / 16 + lb;
      if (c >= p.k || rb >= mb) continue;
      uint64_t q = 0;
#pragma unroll
      for (int i = 0; i < 16; i++) q |= ((codes[16 * lb + i][lc / 16] >> (4 * (lc % 16))) & 0xFull) << (4 * i);
      store_codes16(p.col + c * p.col_pitch + rb * 8, q, 16 * rb, p.m, p.col_pitch - rb * 8);
      p.col_s.buf[p.col_s.index(c, rb)] = tcode[lb][lc / 16];
    }
  }
}

// ---------------------------------------------------------------------------
// 16-bit inputs (BF16, FP16), round to nearest or (1×16 blocks) stochastic
// rounding, without the RHT: the fast kernel. Same bytes as nvfp4_1d_kernel /
// nvfp4_2d_kernel (which still serve FP32 input and 16×16 tiles with
// stochastic rounding), fewer instructions:
//   - block amaxes from the raw 16-bit words: |bits| (one LOP3 per pair) and an
//     unsigned 16x2 max (max.u16x2, one per pair) give max |x| and, at the same
//     time, whether the block holds a NaN (a magnitude above the Inf pattern);
//   - the E2M1 encode is lq_e2m1_fast's (3 FMA-pipe ops, 1 VIMNMX3 an element;
//     signs from the raw words by prmt), for blocks without NaN, fl(bamax·enc) < 7;
//     other blocks use lq_e2m1 exactly as before;
//   - enc_b comes from a 128-entry table per CTA (one IEEE reciprocal per
//     E4M3 code instead of one per block);
//   - the transpose goes through shared memory as raw 16-bit values (16 KB per
//     64×128 tile, swizzled so that neither side has bank conflicts), each
//     thread taking a column pair so that one 16x2 max serves both columns.
// ---------------------------------------------------------------------------

// Σ_i 0x4B000000·16^i mod 2^32 over 8 nibbles: what lq_e2m1_mag_m's bias adds
// to a packed word of 8 codes.
constexpr uint32_t pack_bias() {
  uint32_t k = 0;
  for (int i = 0; i < 8; i++) k += LQ_E2M1_M_BITS << (4 * i);
  return k;
}
constexpr uint32_t kPackBias = pack_bias();

// The sign bits of two columns of 16 rows held as raw pairs (row i: wc[i],
// column 0 in the low half, column 1 in the high half), column h's in s[h]
// (row i at bit 4i+3).
__device__ __forceinline__ void signs16_cols(const uint32_t (&wc)[16], uint64_t (&s)[2]) {
  uint32_t lo[2][2];
#pragma unroll
  for (int g = 0; g < 2; g++) {
    const uint32_t *r = &wc[8 * g];
    // [c0 r, c0 r+1, c1 r, c1 r+1] for rows r = 0, 2, 4, 6 of the eight
    const uint32_t a = prmt(r[0], r[1], 0xFBD9u), b = prmt(r[2], r[3], 0xFBD9u);
    const uint32_t c = prmt(r[4], r[5], 0xFBD9u), d = prmt(r[6], r[7], 0xFBD9u);
    const uint32_t abe = prmt(a, b, 0x6240u), cde = prmt(c, d, 0x6240u);  // even rows: [c0, c0, c1, c1]
    const uint32_t abo = prmt(a, b, 0x7351u), cdo = prmt(c, d, 0x7351u);  // odd rows
    lo[g][0] = sign_bits8(prmt(abe, cde, 0x5410u), prmt(abo, cdo, 0x5410u));
    lo[g][1] = sign_bits8(prmt(abe, cde, 0x7632u), prmt(abo, cdo, 0x7632u));
  }
  s[0] = (uint64_t)lo[0][0] | ((uint64_t)lo[1][0] << 32);
  s[1] = (uint64_t)lo[0][1] | ((uint64_t)lo[1][1] << 32);
}

// lq_e2m1_fast of v[i]·enc for 16 values, element i in bits 4i, with the
// sign bits sgn (signs8_pairs, signs16_cols). The caller checked: no NaN
// among v, and fl(max |v| · enc) < 7.
__device__ __forceinline__ uint64_t encode16_fast(const float (&v)[16], float enc, uint64_t sgn) {
  uint32_t h[2] = {0u, 0u};
#pragma unroll
  for (int i = 0; i < 16; i++) {
    float y = __fmul_rn(v[i], enc);
    uint32_t m = __float_as_uint(lq_e2m1_mag_m(fabsf(y)));
    h[i >> 3] += m << (4 * (i & 7));
  }
  return ((uint64_t)(h[0] - kPackBias) | ((uint64_t)(h[1] - kPackBias) << 32)) | sgn;
}

// One block: fast encode, or lq_e2m1 where the block has a NaN or large |y|.
__device__ __forceinline__ uint64_t encode16_rn(const float (&v)[16], float enc, float bamax, bool nan, uint64_t sgn) {
  if (!nan && __fmul_rn(bamax, enc) < 7.0f) return encode16_fast(v, enc, sgn);
  return encode16<false>(v, enc, make_uint4(0, 0, 0, 0));
}

// S_enc (GlobalEncodeScale).
__device__ __forceinline__ float global_s_enc(float amax) {
  float s = __fdiv_rn(2688.0f, amax);
  if (!(s <= FLT_MAX)) s = FLT_MAX;
  if (amax == 0.0f || s == 0.0f) s = 1.0f;
  return s;
}

// enc_b of E4M3 scale code c (blockScale's second half).
__device__ __forceinline__ float enc_of_code(uint32_t c, float s_dec) {
  float enc = __frcp_rn(__fmul_rn(fp8_decode<Fp8::E4M3>((uint8_t)c), s_dec));
  return enc > FLT_MAX ? FLT_MAX : enc;
}

// The fast kernel's CTA walks a strip of up to kFS sub-tiles of 64 rows × 128
// columns (by default it loads the next sub-tile after finishing the current
// one and keeps 4 CTAs per SM; see launch_fast for the measured variants). Stores are arranged so that each warp instruction writes
// whole 32-byte sectors (H100 run 1: the columnwise pass with 8-byte stores of
// lanes in different rows ran at half the rowwise pass's speed): transposed
// codes are staged in shared memory and written 16 bytes a lane, two lanes per
// 32-byte run; the columnwise scales of the strip (4·kFS bytes per column) are
// written once, at the end, 8 lanes per column.
constexpr int kFR = 64, kFC = 128, kFS = 8;

// max over the eight warps' partial 16×16 amaxes (EDGE layout of redx).
__device__ __forceinline__ uint32_t tile_amax(const uint32_t (&v)[8]) {
  uint4 a = *reinterpret_cast<const uint4 *>(&v[0]), b = *reinterpret_cast<const uint4 *>(&v[4]);
  return max(max(max(a.x, a.y), max(a.z, a.w)), max(max(b.x, b.y), max(b.z, b.w)));
}

// MINB: CTAs per SM the register allocation must allow (launch bounds);
// PREF: load the next sub-tile while working on this one (else after it).
//
// EDGE: the instance for partial blocks or rows at any offset (spec §14):
// rows lr ≡ w (mod 8) in warp w, so that a warp's rows share one 16-byte
// offset (shifted loads, load_chunk); each warp then holds rows of all four
// 16-row tiles, so the 16×16 amaxes meet across warps in red (EDGE layout
// [tile][column block][warp]); stores check bounds and alignment. (H100,
// 8191²: copying each warp's next rows into shared memory while it processes
// the current ones, as the mxfp4 kernel's both-directions instance does,
// was 1–5 % slower for five of the six block shapes and usages and level for
// the sixth: bench/RESULTS.md, branch fp4ragged.)
//
// SRON: stochastic rounding (1×16 blocks only: a 16×16 tile rounds each
// element once with its rowwise bits, which the columnwise pass here does not
// hold), each block with its direction's bits (sr_bytes), as nvfp4_1d_kernel.
//
// Units: strips of p.fs sub-tiles.
template <typename T, bool ROW, bool COL, bool TWO_D, int MINB, bool PREF, bool EDGE, bool SRON, typename G>
__global__ void __launch_bounds__(kThreads, MINB) nvfp4_fast_kernel(const __grid_constant__ G grp) {
  pdl_wait();
  nv_zero_pads(grp);
  static_assert(!(SRON && TWO_D), "16x16 tiles with stochastic rounding take nvfp4_2d_kernel");
  using R = Raw16<T>;
  constexpr int kCS = kFC + 4;  // ccodes row stride (uint2): 16-byte aligned rows, no bank conflicts
  // kAsync: the aligned instance copies each sub-tile into shared memory
  // with cp.async, the next one while the CTA works on this one (two
  // buffers): bytes in flight without registers. The row phase reads its
  // chunk back from there. Each warp copies the eight rows its row phase
  // holds, so that without a columnwise pass a warp barrier orders them.
  constexpr bool kAsync = !EDGE;
  __shared__ __align__(16) uint16_t tile[COL || kAsync ? (kAsync ? 2 : 1) * kFR * kFC : 8];
  __shared__ float enc_tab[2][128];
  __shared__ uint32_t red[TWO_D && !EDGE ? kThreads / 32 : 1][8];
  __shared__ __align__(16) uint32_t redx[TWO_D && EDGE ? kFR / 16 : 1][8][kThreads / 32];
  __shared__ __align__(16) uint2 ccodes[COL ? 4 : 1][kCS];              // [row block][column]: 16 codes
  __shared__ __align__(4) uint8_t csc[COL ? 4 * kFS : 1][kFC + 4];       // [row block in strip][column]
  int64_t strip;
  const NvParams &p = grp.locate(blockIdx.x, &strip);
  copy_scalars(p, strip);
  const int t = threadIdx.x;
  const int64_t tiles_c = (p.k + kFC - 1) / kFC;
  const int64_t rs = (strip / tiles_c) * (kFR * p.fs), c0 = (strip % tiles_c) * kFC;
  const int64_t rows_left = p.m - rs;
  const int nsub = rows_left >= kFR * p.fs ? p.fs : (int)((rows_left + kFR - 1) / kFR);

  // Row phase: thread t holds row lr = t/4 of the sub-tile, columns 32q ..
  // 32q+31 (q = t%4): blocks 2q and 2q+1, w[0..7] and w[8..15], pairs of
  // elements.
  const int lr = EDGE ? (t >> 5) + 8 * ((t & 31) >> 2) : t >> 2, q = t & 3;
  const int64_t c = c0 + 32 * q;
  uint32_t w[16], wn[16];
  // kAsync: sub-tile rows r0s .. into buffer b; warp w's 128 chunks of 16
  // bytes (rows 8w .. 8w+7, the rows of its row phase) lane after lane, so
  // that one warp instruction copies two whole rows. Rows past M (a ragged
  // M) are zero-filled: the column blocks and 16×16 tiles they end are those
  // of the zero-padded tensor (spec §14). Lane l's chunk i is row 8w + 2i +
  // l/16, columns 8·(l%16) ..: its four rows are 2 apart in x (one address,
  // then a stride) and in the tile (swz depends on the row's low bit only),
  // and a row past m_load copies 0 bytes (src-size) instead of branching.
  // (H200: recomputing every chunk's addresses and bounds took 37
  // instructions a chunk, 14 % of the "both" instance's.)
  const int crow = 8 * (t >> 5) + ((t & 31) >> 4);
  const uint32_t tile_s = (uint32_t)__cvta_generic_to_shared(tile) + 2u * (uint32_t)swz(crow, 8 * (t & 15));
  auto issue = [&](int64_t r0s, int b) {
    if (c0 + 8 * (t & 15) < p.k) {
      const int64_t row0 = r0s + crow, left = p.m_load - row0;
      const T *g = (const T *)p.in + row0 * p.k + c0 + 8 * (t & 15);
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const bool ok = left > 2 * i;
        cp_async16_n(tile_s + 2u * (uint32_t)(b * kFR * kFC + 2 * i * kFC), ok ? (const void *)(g + 2 * i * p.k) : p.in,
                     ok ? 16u : 0u);
      }
    }
    cp_async_commit();
  };
  if (kAsync) issue(rs, 0);
  else load_chunk<T, EDGE>(p.in, p.m_load, p.k, p.vec, rs + lr, c, w);

  // Global scales and the enc_b tables (rowwise in [0], columnwise in [1]).
  float arow = 0.0f, acol = 0.0f;
  nv_amaxes<T>(p, strip, ROW, !ROW || (COL && !TWO_D), &arow, &acol);
  const float s_row = global_s_enc(ROW ? arow : acol);
  const float s_col = (COL && !TWO_D) ? global_s_enc(acol) : s_row;
  const float sd6_row = __fmul_rn(s_row, __uint_as_float(0x3E2AAAABu));
  const float sd6_col = __fmul_rn(s_col, __uint_as_float(0x3E2AAAABu));
  {
    float s = t < 128 ? s_row : s_col;
    enc_tab[t >> 7][t & 127] = enc_of_code(t & 127, (float)(1.0 / (double)s));
  }

  for (int sub = 0; sub < nsub; sub++) {
    const int64_t r0 = rs + (int64_t)sub * kFR, r = r0 + lr;
    const bool b0 = r < p.m && c < p.k, b1 = r < p.m && c + 16 < p.k;
    const uint16_t *cur = &tile[kAsync ? (sub & 1) * kFR * kFC : 0];
    if (kAsync) {
      // The buffer the next copy overwrites was last read by this warp's
      // row phase (and, with a columnwise pass, by every warp before the
      // previous sub-tile's second barrier).
      if (sub + 1 < nsub) {
        if (!COL) __syncwarp();
        issue(r0 + kFR, (sub + 1) & 1);
        cp_async_wait_1();
      } else {
        cp_async_wait_all();
      }
      // The columnwise pass reads every warp's rows; rowwise alone, a warp
      // reads its own (the block barrier the first time: enc_tab).
      if (COL || sub == 0) __syncthreads();
      else __syncwarp();
      // (Rows and columns outside the tensor: stale, never used.)
      const int x = ((q >> 1) & 1) | ((lr & 1) << 1);
#pragma unroll
      for (int j = 0; j < 4; j++) {
        uint4 u = *reinterpret_cast<const uint4 *>(&cur[lr * 128 + 32 * q + 8 * (j ^ x)]);
        w[4 * j] = u.x; w[4 * j + 1] = u.y; w[4 * j + 2] = u.z; w[4 * j + 3] = u.w;
      }
    }
    if (!kAsync && PREF && sub + 1 < nsub) load_chunk<T, EDGE>(p.in, p.m_load, p.k, p.vec, r + kFR, c, wn);

    // The raw sub-tile into shared memory for the columnwise pass.
    if (COL && !kAsync) store_chunk_swz<EDGE>(tile, lr, q, w);

    // Row blocks: amax (NaN ignored) and NaN flags.
    float bam[2];
    bool bnan[2];
#pragma unroll
    for (int b = 0; b < 2; b++) {
      uint32_t m16 = mag16(&w[8 * b]);
      bnan[b] = m16 > R::kInf;
      if (bnan[b]) {
        float v[16];
#pragma unroll
        for (int j = 0; j < 8; j++) {
          v[2 * j] = R::lo(w[8 * b + j]);
          v[2 * j + 1] = R::hi(w[8 * b + j]);
        }
        bam[b] = __uint_as_float(amax16(v));
      } else {
        bam[b] = R::mag(m16);
      }
    }
    if (TWO_D && EDGE) {
      // Lanes 4i+q hold row w + 8i, of tile i/2: pair lanes i, i^1, then
      // the eight warps meet in redx.
      uint32_t m0 = __float_as_uint(bam[0]), m1 = __float_as_uint(bam[1]);
      m0 = max(m0, __shfl_xor_sync(0xFFFFFFFFu, m0, 4));
      m1 = max(m1, __shfl_xor_sync(0xFFFFFFFFu, m1, 4));
      if (((t & 31) >> 2 & 1) == 0) {
        const int tr = (t & 31) >> 3;
        redx[tr][2 * q][t >> 5] = m0;
        redx[tr][2 * q + 1][t >> 5] = m1;
      }
    } else if (TWO_D) {
      // 16×16 tiles: the 16 rows of one are lanes with the same q in two
      // consecutive warps.
      uint32_t m0 = __float_as_uint(bam[0]), m1 = __float_as_uint(bam[1]);
#pragma unroll
      for (int o = 4; o < 32; o <<= 1) {
        m0 = max(m0, __shfl_xor_sync(0xFFFFFFFFu, m0, o));
        m1 = max(m1, __shfl_xor_sync(0xFFFFFFFFu, m1, o));
      }
      if ((t & 31) < 4) {
        red[t >> 5][2 * q] = m0;
        red[t >> 5][2 * q + 1] = m1;
      }
    }
    if ((COL && !kAsync) || TWO_D || (sub == 0 && !kAsync)) __syncthreads();  // the tile, red; enc_tab the first time

    // Rowwise: 16 bytes of codes and 2 scale bytes per thread.
    if (ROW && b0) {
      uint32_t code[2] = {0, 0};
      uint64_t qd[2] = {0, 0};
#pragma unroll
      for (int b = 0; b < 2; b++) {
        if (b == 1 && !b1) break;
        float scale_amax = bam[b];
        if (TWO_D && EDGE) {
          scale_amax = __uint_as_float(tile_amax(redx[lr >> 4][2 * q + b]));
        } else if (TWO_D) {
          int wt = 2 * (lr >> 4);
          scale_amax = __uint_as_float(max(red[wt][2 * q + b], red[wt + 1][2 * q + b]));
        }
        code[b] = fp8<Fp8::E4M3>(__fmul_rn(scale_amax, sd6_row));
        float enc = enc_tab[0][code[b] & 127];
        float v[16];
#pragma unroll
        for (int j = 0; j < 8; j++) {
          v[2 * j] = R::lo(w[8 * b + j]);
          v[2 * j + 1] = R::hi(w[8 * b + j]);
        }
        if constexpr (SRON) {
          qd[b] = encode16<true>(v, enc, sr_bytes(p.sr, 0, (uint64_t)r * p.k + c + 16 * b));
        } else {
          const uint64_t sgn = (uint64_t)signs8_pairs(&w[8 * b]) | ((uint64_t)signs8_pairs(&w[8 * b + 4]) << 32);
          qd[b] = encode16_rn(v, enc, bam[b], bnan[b], sgn);
        }
      }
      uint32_t ow[4] = {(uint32_t)qd[0], (uint32_t)(qd[0] >> 32), (uint32_t)qd[1], (uint32_t)(qd[1] >> 32)};
      if (EDGE) {
        if (c + 32 > p.k) keep_nibbles(ow, p.k - c);
        store_bytes(p.row + r * p.row_pitch + c / 2, ow, p.row_pitch - c / 2);
      } else {
        // (>> 1: non-negative; / 2 on int64 took a sign fix-up. store_v4: a
        // uint4 store here was merged with the 8-byte one below into an
        // 8-byte and two 4-byte stores.)
        uint8_t *drow = p.row + r * (p.k >> 1) + (c >> 1);
        if (b1) store_v4(drow, ow[0], ow[1], ow[2], ow[3]);
        else *reinterpret_cast<uint2 *>(drow) = make_uint2(ow[0], ow[1]);
      }
      int64_t si = p.row_s.index(r, c / 16);
      if (b1 && p.row_s2) {
        *reinterpret_cast<uint16_t *>(p.row_s.buf + si) = (uint16_t)(code[0] | (code[1] << 8));
      } else {
        p.row_s.buf[si] = (uint8_t)code[0];
        if (b1) p.row_s.buf[p.row_s.index(r, c / 16 + 1)] = (uint8_t)code[1];
      }
    }

    if (COL) {
      // Thread t: columns 2pp and 2pp+1 of the sub-tile, rows 16·rb ..
      // 16·rb+15; codes to ccodes, scales to csc.
      const int pp = t & 63, rb = t >> 6;
      if (c0 + 2 * pp < p.k && r0 + 16 * rb < p.m) {
        uint32_t wc[16];
#pragma unroll
        for (int i = 0; i < 16; i++) wc[i] = *reinterpret_cast<const uint32_t *>(&cur[swz<EDGE>(16 * rb + i, 2 * pp)]);
        uint32_t mm = wc[0] & 0x7FFF7FFFu;
#pragma unroll
        for (int i = 1; i < 16; i++) mm = vmax_u16x2(mm, wc[i] & 0x7FFF7FFFu);
        uint64_t qd[2], sgn[2];
        signs16_cols(wc, sgn);
#pragma unroll
        for (int h = 0; h < 2; h++) {
          uint32_t m16 = h == 0 ? (mm & 0xFFFFu) : (mm >> 16);
          float v[16];
#pragma unroll
          for (int i = 0; i < 16; i++) v[i] = h == 0 ? R::lo(wc[i]) : R::hi(wc[i]);
          bool nan = m16 > R::kInf;
          float bamax = nan ? __uint_as_float(amax16(v)) : R::mag(m16);
          float scale_amax = bamax;
          if (TWO_D && EDGE) {
            scale_amax = __uint_as_float(tile_amax(redx[rb][(2 * pp) >> 4]));
          } else if (TWO_D) {
            int cb = (2 * pp) >> 4;
            scale_amax = __uint_as_float(max(red[2 * rb][cb], red[2 * rb + 1][cb]));
          }
          uint32_t code = fp8<Fp8::E4M3>(__fmul_rn(scale_amax, sd6_col));
          float enc = enc_tab[TWO_D ? 0 : 1][code & 127];
          if constexpr (SRON)
            qd[h] = encode16<true>(v, enc, sr_bytes(p.sr, 1, (uint64_t)(c0 + 2 * pp + h) * p.m + r0 + 16 * rb));
          else
            qd[h] = encode16_rn(v, enc, bamax, nan, sgn[h]);
          csc[4 * sub + rb][2 * pp + h] = (uint8_t)code;
        }
        *reinterpret_cast<uint4 *>(&ccodes[rb][2 * pp]) =
            make_uint4((uint32_t)qd[0], (uint32_t)(qd[0] >> 32), (uint32_t)qd[1], (uint32_t)(qd[1] >> 32));
      }
      __syncthreads();
      // Thread t: column t/2 of the sub-tile, row blocks 2·(t%2) and
      // 2·(t%2)+1: lanes 2i and 2i+1 write one 32-byte run of the column.
      const int col = t >> 1, hh = t & 1;
      const int64_t cc = c0 + col, rr = r0 + 32 * hh;
      if (cc < p.k && rr < p.m) {
        uint2 a = ccodes[2 * hh][col], b = ccodes[2 * hh + 1][col];
        uint32_t ow[4] = {a.x, a.y, b.x, b.y};
        if (EDGE || (p.m & 31) != 0) {
          // Rows of ⌈M/2⌉ bytes at any alignment; the padded rows' nibbles
          // dropped (spec §14), not coded.
          if (rr + 32 > p.m) keep_nibbles(ow, p.m - rr);
          store_bytes(p.col + cc * p.col_pitch + rr / 2, ow, p.col_pitch - rr / 2);
        } else {
          *reinterpret_cast<uint4 *>(p.col + cc * (p.m >> 1) + (rr >> 1)) = make_uint4(ow[0], ow[1], ow[2], ow[3]);
        }
      }
    }
    if (TWO_D && !COL) __syncthreads();  // red/redx is rewritten next round
    if (sub + 1 < nsub && !kAsync) {
      if (PREF) {
#pragma unroll
        for (int j = 0; j < 16; j++) w[j] = wn[j];
      } else {
        load_chunk<T, EDGE>(p.in, p.m_load, p.k, p.vec, r + kFR, c, w);
      }
    }
  }

  if (COL) {
    // The strip's columnwise scales: column c0 + col's row blocks rs/16 ..
    // are consecutive bytes in the compact layout (and 4 at a time in the
    // swizzled one). A word holds a sub-tile's four; a strip of p.fs <= 4
    // sub-tiles (nv_subtiles) has at most 4 words a column, so thread t
    // writes word t%4 of column t/4 (+64 per pass: two passes, where 8
    // lanes a column and four passes left half the lanes idle at fs 4 and
    // recomputed the index in each: H200 ncu, about 300 of the "both"
    // instance's 481 instructions per warp and strip); kFS's 8 take 8.
    const int64_t rb0 = rs / 16;
    const int64_t nrb_all = ceil_div(p.m, 16) - rb0;
    const int nrb = nrb_all < 4 * p.fs ? (int)nrb_all : 4 * p.fs;
    const int sh = p.fs <= 4 ? 2 : 3;
    for (int idx = t; idx < (kFC << sh); idx += kThreads) {
      const int col = idx >> sh, wd = idx & ((1 << sh) - 1);
      const int64_t cc = c0 + col;
      if (cc < p.k && 4 * wd < nrb) {
        uint32_t word = (uint32_t)csc[4 * wd][col] | ((uint32_t)csc[4 * wd + 1][col] << 8) |
                        ((uint32_t)csc[4 * wd + 2][col] << 16) | ((uint32_t)csc[4 * wd + 3][col] << 24);
        if (4 * wd + 4 <= nrb && p.col_s4) {
          *reinterpret_cast<uint32_t *>(p.col_s.buf + p.col_s.index(cc, rb0 + 4 * wd)) = word;
        } else {
          for (int i = 0; i < 4 && 4 * wd + i < nrb; i++) p.col_s.buf[p.col_s.index(cc, rb0 + 4 * wd + i)] = (uint8_t)(word >> (8 * i));
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// NVFP4 1×16 rowwise alone from 16-bit rows at any even offset (an odd K,
// spec §14), round to nearest: the rows walked as mx4_rows_kernel walks
// them (common.cuh: fp4_row_walk), lane l shifting its chunk by the row's
// offset (fp4_row_cols) so that it holds block L = 32t + l of the row
// (columns 16L .. 16L + 15) whole, and storing its 8 code bytes, bytes 8L ..
// 8L + 7 of the row, as mx4_rows_kernel does (Fp4RowStore). Each lane's
// block needs no other lane: its amax, E4M3 scale and codes are the fast
// kernel's (block_scale through enc_tab, encode16_rn). The fast kernel's
// EDGE instance, which ran these rows before, loads each 32-element piece
// shifted and stores byte runs. The caller has zeroed the scale padding
// and any row padding (nv_prepare).
// ---------------------------------------------------------------------------
constexpr int kRowThreads = 256;

struct Nv4RowParams : Fp4RowPlace {
  ScaleBuf s;
  const float *amax;  // the rowwise global amax
  float *amax_dst[2];  // NvParams' scalar copies, made by CTA 0
  const float *amax_src[2];
};

// The NVFP4 rows kernels' setup: CTA 0's amax copies, the global encode
// scale's S_enc/6 (returned) and the enc_b table of the 128 E4M3 codes.
// Every thread of the CTA calls it (a barrier).
__device__ __forceinline__ float nv4_rows_setup(const Nv4RowParams &p, float *enc_tab) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    if (p.amax_dst[0]) *p.amax_dst[0] = *p.amax_src[0];
    if (p.amax_dst[1]) *p.amax_dst[1] = *p.amax_src[1];
  }
  const float s_enc = global_s_enc(*p.amax);
  if (threadIdx.x < 128) enc_tab[threadIdx.x] = enc_of_code(threadIdx.x, (float)(1.0 / (double)s_enc));
  __syncthreads();
  return __fmul_rn(s_enc, __uint_as_float(0x3E2AAAABu));
}

// A lane's 1×16 block x of a rows kernel's step: its elements as floats in v,
// whether one is a NaN (*nan), and its amax, NaN ignored (amax16 where a NaN
// is there).
template <typename T>
__device__ __forceinline__ float nv4_block(const uint32_t (&x)[8], float (&v)[16], bool *nan) {
  using R = Raw16<T>;
  const uint32_t m16 = mag16(x);
  *nan = m16 > R::kInf;
#pragma unroll
  for (int j = 0; j < 8; j++) {
    v[2 * j] = R::lo(x[j]);
    v[2 * j + 1] = R::hi(x[j]);
  }
  return *nan ? __uint_as_float(amax16(v)) : R::mag(m16);
}

// The block's 16 codes (block L of the row: columns past k code 0, spec §14)
// at the scale of amax sa (the block's own amax bam, or its 16×16 tile's),
// whose E4M3 code goes to *code.
__device__ __forceinline__ uint64_t nv4_codes(const uint32_t (&x)[8], const float (&v)[16], float bam, bool nan, float sa,
                                              const float *enc_tab, float sd6, int L, int k, uint32_t *code) {
  *code = fp8<Fp8::E4M3>(__fmul_rn(sa, sd6));
  const uint64_t sgn = (uint64_t)signs8_pairs(&x[0]) | ((uint64_t)signs8_pairs(&x[4]) << 32);
  const uint64_t q = encode16_rn(v, enc_tab[*code & 127], bam, nan, sgn);
  uint32_t c[2] = {(uint32_t)q, (uint32_t)(q >> 32)};
  if (16 * L + 16 > k) keep_nibbles(c, k - 16 * L);
  return (uint64_t)c[0] | ((uint64_t)c[1] << 32);
}

template <typename T>
__global__ void __launch_bounds__(kRowThreads, 4) nv4_rows_kernel(const __grid_constant__ Nv4RowParams p) {
  pdl_wait();
  static_assert(kRowThreads == 256, "flat_item: 8 warps per CTA");
  __shared__ float enc_tab[128];
  const float sd6 = nv4_rows_setup(p, enc_tab);
  const int lane = threadIdx.x & 31;
  const int64_t warps = (int64_t)gridDim.x * (kRowThreads / 32), items = p.m * p.nseg;
  const int nb = (int)((p.k + 15) / 16), k = (int)p.k, pitch = (int)p.pitch;  // k < kFlatRowMax
  const int steps = (nb + 31) / 32;
  const bool words = (pitch % 8 == 0) & ((reinterpret_cast<uintptr_t>(p.out) & 7) == 0);
  // ScaleBuf::index(r, j + 32) = index(r, j) + sstep (swizzled: 8 groups of 4 columns, each 512 bytes).
  const int64_t sstep = p.s.swizzled ? 4096 : 32;
  for (int64_t item = (int64_t)blockIdx.x * (kRowThreads / 32) + threadIdx.x / 32; item < items; item += warps) {
    int t0, t1;
    const int64_t r = flat_item(p, item, steps, &t0, &t1);
    uint8_t *spt = p.s.buf + p.s.index(r, lane) + t0 * sstep;
    fp4_row_walk<T>(p, r, t0, t1, words, [&](int t, const uint32_t(&x)[8], Fp4RowStore &st) {
      float v[16];
      bool nan;
      const float bam = nv4_block<T>(x, v, &nan);
      const int L = 32 * t + lane;
      uint32_t code;
      const uint64_t q = nv4_codes(x, v, bam, nan, bam, enc_tab, sd6, L, k, &code);
      if (L < nb) *spt = (uint8_t)code;
      spt += sstep;
      st.store(q, t);
    });
  }
}

// ---------------------------------------------------------------------------
// NVFP4 16×16 rowwise alone, the same rows: a CTA of 16 warps walks one
// 16-row group along K (or a segment of its steps), warp w row 16g + w
// exactly as nv4_rows_kernel walks a row; at each step the warps' block
// amaxes meet in shared memory (two buffers, one barrier a step), and each
// lane codes its block at the scale of the 16×16 tile's amax (the fast
// kernel's rule: the tile's scale, the block's own amax for its fast-encode
// test). Rows past M are the zero padding (spec §14): their warps load row M
// − 1, zero it, and store nothing. Grid: one CTA per (group, segment).
// ---------------------------------------------------------------------------
constexpr int kBandWarps = 16;

template <typename T>
__global__ void __launch_bounds__(32 * kBandWarps, 2) nv4_band16_kernel(const __grid_constant__ Nv4RowParams p) {
  pdl_wait();
  __shared__ float enc_tab[128];
  __shared__ uint32_t tmax[2][kBandWarps][32];
  const float sd6 = nv4_rows_setup(p, enc_tab);
  const int lane = threadIdx.x & 31, wi = threadIdx.x >> 5;
  const int nb = (int)((p.k + 15) / 16), k = (int)p.k, pitch = (int)p.pitch;  // k < kFlatRowMax
  const int steps = (nb + 31) / 32;
  const bool words = (pitch % 8 == 0) & ((reinterpret_cast<uintptr_t>(p.out) & 7) == 0);
  const int64_t sstep = p.s.swizzled ? 4096 : 32;
  const int64_t g = blockIdx.x / (unsigned)p.nseg;
  const int t0 = (int)(blockIdx.x - g * p.nseg) * p.seg_steps, t1 = min(t0 + p.seg_steps, steps);
  const int64_t r = 16 * g + wi;
  const bool valid = r < p.m;
  const int64_t rr = valid ? r : p.m - 1;
  uint8_t *spt = p.s.buf + p.s.index(rr, lane) + t0 * sstep;
  fp4_row_walk<T>(p, rr, t0, t1, words, [&](int t, uint32_t(&x)[8], Fp4RowStore &st) {
    if (!valid) {
#pragma unroll
      for (int j = 0; j < 8; j++) x[j] = 0;
    }
    float v[16];
    bool nan;
    const float bam = nv4_block<T>(x, v, &nan);
    uint32_t(*const b)[32] = tmax[t & 1];
    b[wi][lane] = __float_as_uint(bam);
    __syncthreads();
    uint32_t tm = b[0][lane];
#pragma unroll
    for (int i = 1; i < kBandWarps; i++) tm = max(tm, b[i][lane]);  // non-negative floats order as their bits
    if (valid) {
      const int L = 32 * t + lane;
      uint32_t code;
      const uint64_t q = nv4_codes(x, v, bam, nan, __uint_as_float(tm), enc_tab, sd6, L, k, &code);
      if (L < nb) *spt = (uint8_t)code;
      st.store(q, t);
    }
    spt += sstep;
  });
}

// Columnwise amax with the RHT (rhtAmax): max |y| over the BF16-rounded
// transform of every 16-row chunk of every column, NaN ignored. BF16 rounding
// is monotone, so rounding each |y| before the max equals rounding the max.
// rht_chunk_max: max |y| of one chunk's 16 values (v zero-padded past M, spec
// §14 item 2), folded into best. Where the nonzero inputs' exponents lie
// within 12 of each other (and none is an infinity, a NaN or within 2^5 of
// FP32's overflow), FP32 sums are exact too: every input is a multiple of
// u = 2^(lo−134) (the ulp of a BF16 at the smallest exponent lo, 8
// significant bits), every partial sum of at most 16 is below
// 16·2^(hi−126) = 2^(hi−lo+12)·u ≤ 2^24·u, an integer multiple of u that
// FP32's 24-bit significand holds. Then the FP32 butterfly's max |y| equals
// rht_forward's float64 one, at a quarter of the FP64 pipe's cost (H100, 8192²
// Gaussian BF16: 161 µs with float64 everywhere).
// rht_f32_ok: that test, on lo and hi, the smallest and the largest exponent
// (at least 1) of the nonzero values (lo = 255, hi = 0 where all are zero).
__device__ __forceinline__ bool rht_f32_ok(uint32_t lo, uint32_t hi) { return hi <= lo + 12 && hi <= 250; }

// rht_chunk_max with the test's answer given (f32). With o, the 16
// transformed values rounded to BF16 too (rht_bf16's bits): in FP32 the sums
// are exact (rht_f32_ok) and so is ×1/4 (every BF16 value, and so every sum,
// is a multiple of 2^-133, which FP32 holds down to 2^-149), so one RN to
// BF16 of the FP32 value is that of the exact value.
__device__ __forceinline__ void rht_chunk_max_as(const float (&v)[16], uint32_t mask, bool f32, double &best, uint16_t *o = nullptr) {
  if (f32) {
    float y[16];
#pragma unroll
    for (int i = 0; i < 16; i++) y[i] = __uint_as_float(__float_as_uint(v[i]) ^ (((mask >> i) & 1u) << 31));
    wht_stage<1>(y);
    wht_stage<2>(y);
    wht_stage<4>(y);
    wht_stage<8>(y);
    float m = 0.0f;
#pragma unroll
    for (int j = 0; j < 16; j++) m = fmaxf(m, fabsf(y[j]));
    best = fmax(best, (double)m * 0.25);
    if (o != nullptr) {
#pragma unroll
      for (int j = 0; j < 16; j += 2) {
        // ×1/4 and a zero made +0 (as rht_forward does) in one FFMA: the
        // product is exact, adding +0 changes only a −0 (to +0, under RN).
        const float a = __fmaf_rn(y[j], 0.25f, 0.0f), b = __fmaf_rn(y[j + 1], 0.25f, 0.0f);
        const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
        o[j] = __bfloat16_as_ushort(h.x);
        o[j + 1] = __bfloat16_as_ushort(h.y);
      }
    }
    return;
  }
  double y[16];
  rht_forward(v, mask, y);
#pragma unroll
  for (int j = 0; j < 16; j++) {
    double a = fabs(y[j]);
    if (a > best) best = a;
    if (o != nullptr) o[j] = f64_to_bf16_bits(y[j]);
  }
}

__device__ __forceinline__ void rht_chunk_max(const float (&v)[16], uint32_t mask, double &best, uint16_t *o = nullptr) {
  uint32_t lo = 255, hi = 0;
#pragma unroll
  for (int i = 0; i < 16; i++) {
    const uint32_t a = mag_bits(v[i]);
    const uint32_t e = a >> 23 > 1 ? a >> 23 : 1;
    lo = a != 0 ? min(lo, e) : lo;
    hi = a != 0 ? max(hi, e) : hi;
  }
  rht_chunk_max_as(v, mask, rht_f32_ok(lo, hi), best, o);
}

// rht_chunk_max's exponent range for a column pair held as 16 words of BF16
// pairs (row i in w[i], the left column in the low half), on the raw halves
// two at a time (the exponent of a BF16 is its FP32 one): whether each
// column's FP32 butterfly is exact.
__device__ __forceinline__ void rht_pair_f32_ok(const uint32_t (&w)[16], bool &left, bool &right) {
  uint32_t mx = 0, mn = 0x7FFF7FFFu;
#pragma unroll
  for (int i = 0; i < 16; i++) {
    const uint32_t a = w[i] & 0x7FFF7FFFu;
    // Bit 15 of each half of a + 0x7FFF7FFF: the half is nonzero (a half is
    // at most 0x7FFF, so no carry crosses into the other); zeros become
    // 0x7FFF for the minimum.
    const uint32_t zero = (((a + 0x7FFF7FFFu) & 0x80008000u) ^ 0x80008000u) >> 15;
    mx = vmax_u16x2(mx, a);
    mn = vmin_u16x2(mn, a | (zero * 0x7FFFu));
  }
  auto ok = [](uint32_t hmax, uint32_t hmin) {
    const uint32_t hi = hmax == 0 ? 0 : max(hmax >> 7, 1u), lo = hmin == 0x7FFFu ? 255 : max(hmin >> 7, 1u);
    return rht_f32_ok(lo, hi);
  };
  left = ok(mx & 0xFFFFu, mn & 0xFFFFu);
  right = ok(mx >> 16, mn >> 16);
}

// Rows of the RHT's transformed tensor: whole 16-row groups.
__host__ __device__ __forceinline__ int64_t rht_rows(int64_t m) { return (m + 15) / 16 * 16; }

// rht_amax_kernel's ODD instance (an odd K): the 16 rows of a chunk at col
// (&x[16b, c]), column pair (c, c + 1) (c even; lane l of a warp has
// c = c_w + 2l) into w from aligned 4-byte words only. An even row starts
// 4-byte aligned: the pair is the word at &x[row, c]. An odd row's aligned
// words are (c + 1, c + 2): each lane loads its own, and the pair is the
// high half of the word of the lane below (c − 1, c) and the low half of
// its own; lane 0 loads the word below itself (the row above ends there).
// Every word read holds only elements of the row where column c + 1 exists
// (c + 2 ≤ K − 1, as K is odd); the last column's lane (has2 false) loads a
// 2-byte element in an even row and no word of its own in an odd one, and
// its second column reads as zero. All loads first, then the shuffles, so
// that the chunk's loads are in flight together (with a shuffle after each
// odd row's load, H200 8191²: 140 µs against 120). act: the lane's column exists; rows:
// the chunk's rows inside the tensor. Every lane of the warp must call it.
__device__ __forceinline__ void rht_load_odd(const __nv_bfloat16 *col, int64_t k, int rows, bool act, bool has2, int lane, uint32_t (&w)[16]) {
  uint32_t below[8];
#pragma unroll
  for (int i = 0; i < 16; i++) {
    const uint16_t *h = reinterpret_cast<const uint16_t *>(col + i * k);
    const bool ok = act && i < rows;
    if ((i & 1) == 0) {
      uint32_t v = ok && has2 ? __ldg(reinterpret_cast<const unsigned int *>(h)) : 0u;
      if (ok && !has2) v = __ldg(h);
      w[i] = v;
    } else {
      w[i] = ok && has2 ? __ldg(reinterpret_cast<const unsigned int *>(h + 1)) : 0u;
      below[i >> 1] = ok && lane == 0 ? __ldg(reinterpret_cast<const unsigned int *>(h - 1)) : 0u;
    }
  }
#pragma unroll
  for (int i = 1; i < 16; i += 2) {
    const uint32_t up = __shfl_up_sync(0xFFFFFFFFu, w[i], 1);
    w[i] = ((lane == 0 ? below[i >> 1] : up) >> 16) | (w[i] << 16);
  }
}

// The stores that match rht_load_odd: the transformed pair (column c in the
// low half) of row i into d (&t[row, c]). An odd row's aligned word
// (c + 1, c + 2) takes the next lane's column c + 2: lane 31 stores its
// column c + 1 alone and lane 0 its column c alone (the word below belongs
// to another warp). Every lane of the warp must call it (the shuffle).
template <bool ODD_ROW>
__device__ __forceinline__ void rht_store_odd(uint16_t *d, uint32_t pair, bool act, bool has2, int lane) {
  if constexpr (!ODD_ROW) {
    if (act && has2) *reinterpret_cast<uint32_t *>(d) = pair;
    else if (act) d[0] = (uint16_t)pair;
    return;
  }
  const uint32_t next = __shfl_down_sync(0xFFFFFFFFu, pair, 1);
  if (!act) return;
  if (lane == 0) d[0] = (uint16_t)pair;
  if (has2 && lane != 31) *reinterpret_cast<uint32_t *>(d + 1) = (pair >> 16) | (next << 16);
  else if (has2) d[1] = (uint16_t)(pair >> 16);
}

// One tensor: thread t of CTA (bx, by) takes columns (bx·kThreads + t)·P ..
// +P-1 (P = 2 where K is even: one 4-byte load per row gives both) and the
// chunks by, by + gridDim.y, ... with no division in the loop; a warp's load
// of one row is 64·P consecutive bytes, 16 rows in flight per chunk. (H100,
// 8192²: the idx = chunk·k + column loop above, a 64-bit division and 16
// two-byte loads per chunk, took 141 µs.) P = 2 tests exactness on the raw
// pairs (rht_pair_f32_ok) and is held to 3 CTAs per SM (80 registers; 94
// unbounded, 2 CTAs). H200 ncu, 8192²: 92.6 µs with the scalar test, 80.1
// with the packed one at 94 registers, 74.9 at 80 (bench/RESULTS.md).
// With t (STORE), the transformed tensor rounded to BF16 is written there,
// [rht_rows(m), k]: every row group's 16 rows, the last one's padding
// included (rhtBF16's bits, for the columnwise quantize, rht_col_params);
// with out null, no amax is reduced. With plain, the input's own amax too
// (max |x|, NaN ignored: amax_range's rule), which a rowwise copy takes:
// one read of x fewer.
//
// ODD (P = 2 at an odd K, spec §14: any shape): rows alternate between a
// 4-byte aligned start (even rows) and a 2-byte one (odd rows), and a row
// group's 16 rows start at an even row, so row i of a chunk is aligned
// exactly when i is even: a compile-time fact in the unrolled loops. Every
// load and store is an aligned word, an odd row's pairs assembled by lane
// shuffles (rht_load_odd, rht_store_odd), so every lane of a warp runs the
// loop (act: its column exists). The last column (c = K − 1) has no
// partner: its second column reads as zeros, whose transform is zero (no
// effect on either maximum), and is not stored. (H200, 8191², the
// columnwise RHT copy: this pass took 149 µs with a pair per lane from two
// unaligned halves and 2-byte stores (L1 hits 50 %, 17.5 of 32 bytes per
// stored sector), a columnwise quantize as long as with one 2-byte load and
// store per element (P = 1); 140 µs with the shuffles after each odd row's
// load, 120 µs with the chunk's loads first; 82 µs at 8192²,
// bench/RESULTS.md.)
//
// rht_amax_cols is one CTA's work: column block cb (columns cb·kThreads·P ..)
// and the chunks b0, b0 + bstep, ...; rht_amax_kernel runs it on a grid of
// column blocks × chunk slices, nv_group_rht_kernel on a group's units.
template <int P, bool STORE, bool ODD>
__device__ __forceinline__ void rht_amax_cols(const __nv_bfloat16 *__restrict__ x, int64_t m, int64_t k, uint32_t mask, uint32_t *out,
                                              uint16_t *__restrict__ t, uint32_t *plain, int64_t cb, int64_t b0, int64_t bstep) {
  static_assert(!ODD || P == 2, "ODD is the column-pair instance's");
  const int64_t chunks = (m + 15) / 16, c = (cb * kThreads + threadIdx.x) * P;
  const bool act = c < k, has2 = !ODD || c + 1 < k;  // ODD: whether columns c and c + 1 exist
  const int lane = threadIdx.x & 31;
  double best = 0.0;
  float pm = 0.0f;
  if (ODD || act)
    for (int64_t b = b0; b < chunks; b += bstep) {
      const __nv_bfloat16 *col = x + 16 * b * k + c;
      const int rows = m - 16 * b < 16 ? (int)(m - 16 * b) : 16;
      float v[P][16];
      if constexpr (P == 2) {
        // The exactness test on the raw pairs (rht_pair_f32_ok: 16 packed
        // steps for both columns instead of 32 scalar ones).
        uint32_t w[16];
        if constexpr (ODD) {
          rht_load_odd(col, k, rows, act, has2, lane, w);
        } else {
#pragma unroll
          for (int i = 0; i < 16; i++) w[i] = i < rows ? *reinterpret_cast<const uint32_t *>(col + i * k) : 0u;
        }
        bool f0, f1;
        rht_pair_f32_ok(w, f0, f1);
        if constexpr (STORE) {
          // The RHT's signs (mask bit i negates row i) on both columns at
          // once, on the raw pairs: one XOR per row instead of one per
          // element; the transforms below then take mask 0 (a negated input
          // is all the mask does, in either path; |x| for the plain amax is
          // unchanged). (The amax-only instance keeps the mask: there the
          // XORs moved it from 0 to 44 bytes of spills.)
#pragma unroll
          for (int i = 0; i < 16; i++) w[i] ^= ((mask >> i) & 1u) * 0x80008000u;
          // One column at a time, each one's output taking its half of w
          // (fewer live registers: the two at once spilled at 80).
          uint16_t o[16];
#pragma unroll
          for (int i = 0; i < 16; i++) v[0][i] = __uint_as_float(w[i] << 16);
          if (plain != nullptr)
#pragma unroll
            for (int i = 0; i < 16; i++) pm = amax_f(pm, v[0][i]);
          rht_chunk_max_as(v[0], 0u, f0, best, o);
#pragma unroll
          for (int i = 0; i < 16; i++) w[i] = (w[i] & 0xFFFF0000u) | o[i];
#pragma unroll
          for (int i = 0; i < 16; i++) v[1][i] = __uint_as_float(w[i] & 0xFFFF0000u);
          if (plain != nullptr)
#pragma unroll
            for (int i = 0; i < 16; i++) pm = amax_f(pm, v[1][i]);
          rht_chunk_max_as(v[1], 0u, f1, best, o);
          uint16_t *d = t + 16 * b * k + c;
#pragma unroll
          for (int i = 0; i < 16; i++) {
            const uint32_t pair = (w[i] & 0xFFFFu) | ((uint32_t)o[i] << 16);
            if constexpr (ODD) {
              if ((i & 1) == 0) rht_store_odd<false>(d + i * k, pair, act, has2, lane);
              else rht_store_odd<true>(d + i * k, pair, act, has2, lane);
            }
            else *reinterpret_cast<uint32_t *>(d + i * k) = pair;
          }
        } else {
#pragma unroll
          for (int i = 0; i < 16; i++) {
            v[0][i] = __uint_as_float(w[i] << 16);
            v[1][i] = __uint_as_float(w[i] & 0xFFFF0000u);
          }
          if (plain != nullptr)
#pragma unroll
            for (int i = 0; i < 16; i++) pm = amax_f(amax_f(pm, v[0][i]), v[1][i]);
          rht_chunk_max_as(v[0], mask, f0, best);
          rht_chunk_max_as(v[1], mask, f1, best);
        }
      } else {
#pragma unroll
        for (int i = 0; i < 16; i++) v[0][i] = i < rows ? __bfloat162float(col[i * k]) : 0.0f;
        if (plain != nullptr)
#pragma unroll
          for (int i = 0; i < 16; i++) pm = amax_f(pm, v[0][i]);
        uint16_t o[16];
        rht_chunk_max(v[0], mask, best, STORE ? o : nullptr);
        if (STORE) {
          uint16_t *d = t + 16 * b * k + c;
#pragma unroll
          for (int i = 0; i < 16; i++) d[i * k] = o[i];
        }
      }
    }
  if (out != nullptr) cta_max_atomic((uint32_t)f64_to_bf16_bits(best) << 16, out);
  if (plain != nullptr) cta_max_atomic(__float_as_uint(pm), plain);
}

template <int P, bool STORE, bool ODD>
__global__ void __launch_bounds__(kThreads, P == 2 ? 3 : 1) rht_amax_kernel(const __nv_bfloat16 *__restrict__ x, int64_t m, int64_t k,
                                                           uint32_t mask, uint32_t *out, uint16_t *__restrict__ t, uint32_t *plain) {
  pdl_wait();
  rht_amax_cols<P, STORE, ODD>(x, m, k, mask, out, t, plain, blockIdx.x, blockIdx.y, gridDim.y);
}

// The global amaxes of a grouped quantize, in one launch: an item is one
// direction's amax of one tensor, plain (max |x|, nv_group_amax_kernel) or
// with the RHT (bf16 input only, nv_group_rht_kernel: rht_amax_kernel's
// work), reduced into *out, which nv_amax_zero_kernel zeroed. A group holds
// items of one kind (with the RHT's columnwise copy every item is one).
struct NvAmaxItem {
  const void *in;
  int64_t m, k;
  uint32_t *out;
  uint32_t mask;
  int rht;
  uint16_t *t;      // with the RHT: where the transformed tensor goes
  uint32_t *plain;  // with the RHT: where the input's own amax goes (the rowwise one), or null
};

// Zeroes every item's accumulators before the amax kernels.
template <typename G>
__global__ void nv_amax_zero_kernel(const __grid_constant__ G g) {
  pdl_wait();
  for (int i = threadIdx.x; i < g.size(); i += blockDim.x) {
    *g.tensor(i).out = 0;
    if (g.tensor(i).plain != nullptr) *g.tensor(i).plain = 0;
  }
}

// An RHT item's units for nv_group_rht_kernel: rht_amax_kernel's column
// blocks (pairs of columns where the input and t are 4-byte aligned) times
// slices of kRhtSliceChunks chunks of 16 rows (an MoE expert of 256 rows:
// 4 slices, so that a 64-expert group runs 3584 CTAs of 4 chunks each).
// (The grouped amax walked idx = chunk·k + column with a 64-bit division
// and 16 two-byte loads per chunk: H200, 64 × 256×7168, 380 µs against
// rht_amax_kernel's 140 at 16384×7168, bench/RESULTS.md.)
constexpr int64_t kRhtSliceChunks = 4;
__host__ __device__ __forceinline__ bool rht_item_pairs(const NvAmaxItem &it) {
  return ((reinterpret_cast<uintptr_t>(it.in) | reinterpret_cast<uintptr_t>(it.t)) & 3) == 0;
}
__host__ __device__ __forceinline__ int64_t rht_item_cblocks(const NvAmaxItem &it) {
  return (it.k + kThreads * (rht_item_pairs(it) ? 2 : 1) - 1) / (kThreads * (rht_item_pairs(it) ? 2 : 1));
}
__host__ __device__ __forceinline__ int64_t rht_item_slices(const NvAmaxItem &it) {
  return ((it.m + 15) / 16 + kRhtSliceChunks - 1) / kRhtSliceChunks;
}

inline int64_t nv_amax_units(const NvAmaxItem &it) {
  return it.rht ? rht_item_cblocks(it) * rht_item_slices(it) : amax_units(it.m * it.k);
}

template <typename T, typename G>
__global__ void __launch_bounds__(kAmaxThreads) nv_group_amax_kernel(const __grid_constant__ G g) {
  pdl_wait();
  int64_t unit;
  const NvAmaxItem &it = g.locate(blockIdx.x, &unit);
  const int64_t n = it.m * it.k, lo = unit * kAmaxUnitElems, hi = lo + kAmaxUnitElems < n ? lo + kAmaxUnitElems : n;
  cta_max_atomic(amax_range<T>((const T *)it.in, lo, hi), it.out);
}

// Unit u of an RHT item: column block u mod cblocks, chunks s, s + slices,
// ... (s = u / cblocks). One instance per launch (rht_amax's choice: P = 2
// where the input and t are 4-byte aligned, ODD at an odd K): the group's
// items go out in up to three launches, one per instance they need (three
// bodies in one kernel spilled 144 bytes at its 80 registers).
template <int P, bool ODD, typename G>
__global__ void __launch_bounds__(kThreads, P == 2 ? 3 : 1) nv_group_rht_kernel(const __grid_constant__ G g) {
  pdl_wait();
  int64_t unit;
  const NvAmaxItem &it = g.locate(blockIdx.x, &unit);
  // 32-bit division: a launch has fewer than 2^31 units (checked).
  const uint32_t cbs = (uint32_t)rht_item_cblocks(it), cb = (uint32_t)unit % cbs, sl = (uint32_t)unit / cbs;
  rht_amax_cols<P, true, ODD>((const __nv_bfloat16 *)it.in, it.m, it.k, it.mask, it.out, it.t, it.plain, cb, sl, rht_item_slices(it));
}

struct NvSpec {
  bool two_d, rht, sr;
  uint32_t mask;
  int swizzled;
};

int32_t nv_spec(const quant_plugin_params *p, NvSpec *s, quant_plugin_error *err) {
  if (p->element != QUANT_ELEMENT_DEFAULT && p->element != QUANT_ELEMENT_E2M1)
    return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "params.element: nvfp4 elements are e2m1");
  if (p->block_dims != 0 && p->block_dims != 1 && p->block_dims != 2)
    return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "params.block_dims: %d is not 1 or 2", p->block_dims);
  s->two_d = p->block_dims == 2;
  s->rht = p->rht != QUANT_RHT_OFF;
  s->mask = p->rht == QUANT_RHT_CUSTOM_MASK ? (p->rht_sign_mask & 0xFFFFu) : 0xD7E8u;
  s->sr = p->stochastic_rounding != 0;
  s->swizzled = p->gemm_swizzled_scales;
  if (s->rht && s->two_d) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "params.rht: not with 16×16 tiles");
  return QUANT_OK;
}

int32_t check_nv_dims(int64_t m, int64_t k, quant_plugin_error *err) {
  if (m < 0 || k < 0)
    return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "shape: [%lld, %lld]: a dim is negative (spec §14 takes any M, K ≥ 0)",
                (long long)m, (long long)k);
  return QUANT_OK;
}

struct NvDir {
  uint8_t *data = nullptr;
  int64_t pitch = 0;  // bytes per stored row
  ScaleBuf s;
  float *amax = nullptr;
  int64_t scale_bytes = 0;
  bool padded = false;
  bool pitch_padded = false;  // rows longer than ⌈cols/2⌉: their tails are zeroed first
  int64_t ni = 0, nj = 0, pad_i = 0;  // the valid scales [ni, nj] of [pad_i, s.pad_j]
};

// A direction's scale padding (none where d is null or has none).
NvPad nv_pad_of(const NvDir *d) { return d == nullptr || !d->padded ? NvPad{} : NvPad{d->s, d->ni, d->nj, d->pad_i}; }

// A single tensor's paddings into o for its kernel (nv_zero_pads), each
// where 32-bit indices reach it; else zeroed here, ahead of the kernel, by
// scale_padding_kernel (launch_scale_padding in common.cuh), as a grouped
// quantize's are.
int32_t nv_one_pads(NvOne *o, const NvDir *r, const NvDir *c, cudaStream_t s, quant_plugin_error *err) {
  const NvPad pr = nv_pad_of(r), pc = nv_pad_of(c);
  const bool fr = nv_pad_fits(pr), fc = nv_pad_fits(pc);
  o->zr = fr ? pr : NvPad{};
  o->zc = fc ? pc : NvPad{};
  if (!fr || !fc) return launch_scale_padding(fr ? NvPad{} : pr, fc ? NvPad{} : pc, s, err);
  return QUANT_OK;
}

// A direction's buffers (Layout in format.go): data [rows, ⌈cols/2⌉] (a layout
// may pad the pitch; the buffer's last dim says so), scale_inv [pad128(rows),
// pad4(⌈cols/16⌉)], amax [1], with [rows, cols] = [M, K] rowwise and [K, M]
// columnwise (spec §14 item 4).
int32_t nv_dir(const quant_plugin_storage &st, bool colwise, int64_t m, int64_t k, int swizzled, NvDir *d, quant_plugin_error *err) {
  int64_t rows = colwise ? k : m, cols = colwise ? m : k;
  int64_t pr = pad_to(rows, 128), pc = pad_to(ceil_div(cols, 16), 4);
  // Constant names, not snprintf on every call (host time per call, issue
  // #15; a grouped quantize prepares 64 tensors and more per call).
  const char *what = colwise ? "columnwise data" : "rowwise data";
  LQ_TRY(row_pitch(st, QUANT_BUFFER_DATA, what, rows, ceil_div(cols, 2), &d->pitch, err));
  LQ_TRY(get_buffer(st, QUANT_BUFFER_DATA, what, rows * d->pitch, (void **)&d->data, err));
  what = colwise ? "columnwise scale_inv" : "rowwise scale_inv";
  LQ_TRY(get_buffer(st, QUANT_BUFFER_SCALE_INV, what, pr * pc, (void **)&d->s.buf, err));
  what = colwise ? "columnwise amax" : "rowwise amax";
  LQ_TRY(get_buffer(st, QUANT_BUFFER_AMAX, what, 1, (void **)&d->amax, err));
  d->s.pad_j = pc;
  d->s.swizzled = swizzled;
  d->scale_bytes = pr * pc;
  d->padded = pr != rows || pc != ceil_div(cols, 16);
  d->ni = rows;
  d->nj = ceil_div(cols, 16);
  d->pad_i = pr;
  d->pitch_padded = d->pitch != ceil_div(cols, 2);
  return QUANT_OK;
}

// Tensors per grouped launch (the group is the kernels' parameter block).
constexpr int kMaxGroup = 128;
using NvGroup = Group<NvParams, kMaxGroup>;
using NvAmaxGroup = Group<NvAmaxItem, 2 * kMaxGroup>;  // a tensor's rowwise and (RHT) columnwise amax
static_assert(sizeof(NvGroup) <= kMaxKernelParams && sizeof(NvAmaxGroup) <= kMaxKernelParams,
              "an nvfp4 group must fit in a kernel's parameters");

// The fast kernel's strips (units) of an [m, k] tensor at fs sub-tiles each.
int64_t nv_strips(int64_t m, int64_t k, int fs) { return ceil_div(m, kFR * fs) * ceil_div(k, kFC); }

// Sub-tiles per strip of the fast kernel for the tensors of grp: 4, fewer
// where that would leave under two CTAs per SM's worth of work in all.
template <typename G>
int nv_subtiles(const G &grp) {
  int fs = 4;
  for (;;) {
    int64_t strips = 0;
    for (int i = 0; i < grp.size(); i++) strips += nv_strips(grp.tensor(i).m, grp.tensor(i).k, fs);
    if (fs == 1 || strips >= 2 * 132) return fs;
    fs /= 2;
  }
}

// Whether the fast kernel serves these options (16-bit input, stochastic
// rounding only on 1×16 blocks, no RHT on a columnwise copy: the RHT leaves
// the rowwise one as it is, spec §5.5, so a rowwise-only quantize with the
// RHT on is the plain one; a columnwise copy with the RHT is the plain
// quantize of the transformed tensor, rht_col_params, with the options less
// the RHT).
bool nv_fast(InType t, const NvSpec &sp, bool has_col) { return t != InType::F32 && !(sp.sr && sp.two_d) && !(sp.rht && has_col); }

// Whether a tensor needs the fast kernel's EDGE instance: anything but whole
// 32-element runs and rows of 16-byte-aligned loads and stores. Any M takes
// the aligned instance: its rows past M load as zeros (load_chunk rowwise
// alone; cp.async's zero fill with a columnwise direction), which is the
// zero-padded tensor of spec §14 (so 16×16 amaxes are those of the padded
// tiles), and are neither stored nor given scales (columnwise rows of ⌈M/2⌉
// bytes go out through store_bytes); the scale padding is zeroed by the
// caller. (MXFP4 the same way: H200, 8191×8192 columnwise 0.064 → 0.056 ms
// against the EDGE instance, bench/RESULTS.md.)
bool nv_edge(const NvParams &p) {
  return !(p.k % 32 == 0 && p.vec == kRowsAligned && (!p.row || aligned16(p.row)) && (!p.col || aligned16(p.col)) &&
           (!p.row || p.row_pitch == p.k / 2) && (!p.col || p.col_pitch == ceil_div(p.m, 2)));
}

// Whether the quantize kernel reduces the global amax in every CTA
// (NvParams::self_amax) instead of a separate amax launch: small inputs (a
// one-CTA amax pass, kSmallNvAmax elements at most: decode batches, MoE
// experts, where the launches are the cost, issue #15) over at most one wave
// of CTAs, each of which then reads the whole input once more (from L2), and
// no RHT on a columnwise copy (its amax is of the transformed columns).
constexpr int64_t kSmallNvAmax = 65536;
constexpr int64_t kSelfAmaxUnits = 132;
bool nv_self_amax(const NvParams &p, const NvSpec &sp, bool has_col, bool fast) {
  const int64_t n = p.m * p.k;
  if (n == 0 || n > kSmallNvAmax || (sp.rht && has_col)) return false;
  const int64_t units = fast ? nv_strips(p.m, p.k, 1) : ceil_div(p.m, kTileR) * ceil_div(p.k, kTileC);
  return units <= kSelfAmaxUnits;
}

// The fast kernel's launch: MINB 4 without register prefetch, the fastest of
// the variants measured on the H100 (cudaperf run 3, 8192² BF16, ms row / col /
// both: (2, prefetch: 104-127 registers, 2 CTAs/SM) 0.126 / 0.139 / 0.176;
// (3, prefetch) 0.117 / 0.128 / 0.162; (4, prefetch: small spills) 0.115 /
// 0.129 / 0.166; (4, no prefetch: 64 registers, no spills) 0.112 / 0.121 /
// 0.153; (5, no prefetch: spills) 0.112 / 0.131 / 0.173): occupancy beats the
// register prefetch. The others went with their benchmark switches.
constexpr int kFastMinB = 4;
constexpr bool kFastPref = false;

template <typename T, bool ROW, bool COL, bool TWO_D, bool SRON, typename G>
void launch_fast(const G &grp, bool edge, cudaStream_t s) {
  unsigned g = (unsigned)grp.total();
  if (edge) launch_kernel(nvfp4_fast_kernel<T, ROW, COL, TWO_D, kFastMinB, kFastPref, true, SRON, G>, g, kThreads, 0, s, grp);
  else launch_kernel(nvfp4_fast_kernel<T, ROW, COL, TWO_D, kFastMinB, kFastPref, false, SRON, G>, g, kThreads, 0, s, grp);
}

// fast (nv_fast): grp's units are the fast kernel's strips; otherwise 64×128
// tiles, one CTA each.
template <typename T, bool ROW, bool COL, bool SRON, typename G>
void launch_nv4(const G &grp, bool two_d, bool fast, bool edge, cudaStream_t s) {
  if constexpr (sizeof(T) == 2) {
    if (fast) {  // nv_fast: not 16x16 tiles with stochastic rounding
      if constexpr (SRON) {
        launch_fast<T, ROW, COL, false, true>(grp, edge, s);
      } else {
        if (two_d) launch_fast<T, ROW, COL, true, false>(grp, edge, s);
        else launch_fast<T, ROW, COL, false, false>(grp, edge, s);
      }
      return;
    }
  }
  unsigned grid = (unsigned)grp.total();
  if (two_d) launch_kernel(nvfp4_2d_kernel<T, ROW, COL, SRON, G>, grid, kThreads, 0, s, grp);
  else launch_kernel(nvfp4_1d_kernel<T, ROW, COL, SRON, G>, grid, kThreads, 0, s, grp);
}

template <typename T, bool ROW, bool COL, typename G>
void launch_nv3(const G &grp, const NvSpec &sp, bool fast, bool edge, cudaStream_t s) {
  if (sp.sr) launch_nv4<T, ROW, COL, true>(grp, sp.two_d, fast, edge, s);
  else launch_nv4<T, ROW, COL, false>(grp, sp.two_d, fast, edge, s);
}

template <typename T, typename G>
void launch_nv2(const G &grp, const NvSpec &sp, bool row, bool col, bool fast, bool edge, cudaStream_t s) {
  if (row && col) launch_nv3<T, true, true>(grp, sp, fast, edge, s);
  else if (row) launch_nv3<T, true, false>(grp, sp, fast, edge, s);
  else launch_nv3<T, false, true>(grp, sp, fast, edge, s);
}

template <typename G>
void launch_nv(InType t, const G &grp, const NvSpec &sp, bool row, bool col, bool fast, bool edge, cudaStream_t s) {
  switch (t) {
    case InType::F32: launch_nv2<float>(grp, sp, row, col, fast, edge, s); break;
    case InType::BF16: launch_nv2<__nv_bfloat16>(grp, sp, row, col, fast, edge, s); break;
    case InType::F16: launch_nv2<__half>(grp, sp, row, col, fast, edge, s); break;
  }
}

// The columnwise amax with the RHT into *out (none where out is null),
// where t is set the transformed tensor rounded to BF16 into t
// ([rht_rows(m), k]), and where plain is set the input's own amax (the
// rowwise one) into *plain.
int32_t rht_amax(const quant_plugin_tensor &in, uint32_t mask, float *out, uint16_t *t, float *plain, cudaStream_t s,
                 quant_plugin_error *err) {
  int64_t m = in.shape[0], k = in.shape[1];
  if (out != nullptr || plain != nullptr) LQ_TRY(zero_words(s, err, out, plain));
  // Pairs of columns where the base is 4-byte aligned (and t's): every row
  // starts aligned at an even K, every other row at an odd K (the ODD
  // instance); CTAs down the chunks until the GPU holds grid_cap() of them.
  const bool pair = (reinterpret_cast<uintptr_t>(in.data) & 3) == 0 && (reinterpret_cast<uintptr_t>(t) & 3) == 0;
  const bool odd = k % 2 != 0;
  const int64_t bx = ceil_div(k > 0 ? k : 1, (int64_t)kThreads * (pair ? 2 : 1)), chunks = ceil_div(m > 0 ? m : 1, 16);
  int64_t by = grid_cap() / bx;
  by = by < 1 ? 1 : by > chunks ? chunks : by > 65535 ? 65535 : by;
  if (bx > 0x7FFFFFFF) return fail(err, QUANT_ERROR_UNSUPPORTED, "input: %lld columns", (long long)k);
  const dim3 grid((unsigned)bx, (unsigned)by);
  const __nv_bfloat16 *x = (const __nv_bfloat16 *)in.data;
  uint32_t *o = (uint32_t *)out, *pl = (uint32_t *)plain;
  if (pair && odd && t) launch_kernel(rht_amax_kernel<2, true, true>, grid, kThreads, 0, s, x, m, k, mask, o, t, pl);
  else if (pair && odd) launch_kernel(rht_amax_kernel<2, false, true>, grid, kThreads, 0, s, x, m, k, mask, o, t, pl);
  else if (pair && t) launch_kernel(rht_amax_kernel<2, true, false>, grid, kThreads, 0, s, x, m, k, mask, o, t, pl);
  else if (pair) launch_kernel(rht_amax_kernel<2, false, false>, grid, kThreads, 0, s, x, m, k, mask, o, t, pl);
  else if (t) launch_kernel(rht_amax_kernel<1, true, false>, grid, kThreads, 0, s, x, m, k, mask, o, t, pl);
  else launch_kernel(rht_amax_kernel<1, false, false>, grid, kThreads, 0, s, x, m, k, mask, o, t, pl);
  LQ_LAUNCHED("rht amax kernel launch");
  return QUANT_OK;
}

int32_t rht_dtype_error(quant_plugin_error *err) {
  return fail(err, QUANT_ERROR_INVALID_ARGUMENT,
              "input: the random Hadamard transform of nvfp4's columnwise copy needs bfloat16 input (spec §5.5)");
}

// Dequantize: x = fl32(e2m1 · fl32(fl32(float(scale) · amax) · fl32(1/2688))).
template <typename O>
__global__ void nvfp4_dequantize_kernel(const uint8_t *__restrict__ q, int64_t pitch, ScaleBuf s, const float *amaxp, O *out,
                                        int64_t m, int64_t k, int colwise) {
  pdl_wait();
  float amax = *amaxp;
  int64_t n = m * k, stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    int64_t r = idx / k, c = idx % k;
    int64_t sr = colwise ? c : r, sc = colwise ? r : c;
    uint32_t code = (q[sr * pitch + sc / 2] >> (4 * (sc & 1))) & 0xF;
    float fin = __fmul_rn(__fmul_rn(fp8_decode<Fp8::E4M3>(s.buf[s.index(sr, sc / 16)]), amax), __uint_as_float(0x39C30C31u));
    store_out(out + idx, __fmul_rn(e2m1_decode(code), fin));
  }
}

// Derive (16×16 only): columnwise from rowwise by transposing the nibbles of
// every tile and moving its scale (Derive in kernels.go).
__global__ void nvfp4_derive_kernel(const uint8_t *__restrict__ src, int64_t sp, ScaleBuf ss, uint8_t *dst, int64_t dp, ScaleBuf ds,
                                    int64_t m, int64_t k) {
  pdl_wait();
  int64_t mb = ceil_div(m, 16), n = k * mb, stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    int64_t kk = idx / mb, b = idx % mb;  // stored row kk, block b of the columnwise copy
    uint64_t q = 0;
    for (int i = 0; i < 16; i++) {
      int64_t r = 16 * b + i;
      if (r < m) q |= (uint64_t)((src[r * sp + kk / 2] >> (4 * (kk & 1))) & 0xF) << (4 * i);
    }
    store_codes16(dst + kk * dp + b * 8, q, 16 * b, m, dp - b * 8);
    ds.buf[ds.index(kk, b)] = ss.buf[ss.index(16 * b, kk / 16)];
  }
}

// Swizzle/Unswizzle of the whole padded matrix (SwizzleScales in kernels.go).
__global__ void nvfp4_swizzle_kernel(const uint8_t *__restrict__ src, uint8_t *dst, int64_t rows, int64_t cols, int to_swizzled) {
  pdl_wait();
  int64_t n = rows * cols, stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    int64_t i = idx / cols, j = idx % cols, s = swizzle_index(i, j, cols);
    if (to_swizzled) dst[s] = src[idx];
    else dst[idx] = src[s];
  }
}

}  // namespace
}  // namespace lq

using namespace lq;

extern "C" int32_t lq_nvfp4_amax(const quant_plugin_amax_args *a, quant_plugin_error *err) {
  InType t;
  LQ_TRY(input_type(a->input, "input", &t, err));
  LQ_TRY(check_device(a->input, "input", err));
  LQ_TRY(check_device(a->out, "out", err));
  if (numel(a->out) != 2) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "out: want 2 elements");
  NvSpec sp;
  LQ_TRY(nv_spec(a->params, &sp, err));
  int64_t m = a->input.shape[0], k = a->input.shape[1];
  LQ_TRY(check_nv_dims(m, k, err));
  cudaStream_t s = stream_of(a->stream);
  float *out = (float *)a->out.data;
  bool col_rht = (a->want & QUANT_USAGE_COLUMNWISE) && sp.rht;
  if (col_rht && t != InType::BF16) return rht_dtype_error(err);
  bool want_row = a->want & QUANT_USAGE_ROWWISE, want_plain_col = (a->want & QUANT_USAGE_COLUMNWISE) && !sp.rht;
  // With the RHT's, the rowwise amax comes from the same pass.
  if (col_rht) return rht_amax(a->input, sp.mask, out + 1, nullptr, want_row ? out : nullptr, s, err);
  if (want_row || want_plain_col) {
    LQ_TRY(global_amax(a->input, t, want_row ? out : out + 1, s, err));
    if (want_row && want_plain_col) LQ_CUDA(cudaMemcpyAsync(out + 1, out, 4, cudaMemcpyDeviceToDevice, s), "copying the amax");
  }
  return QUANT_OK;
}

namespace {

// One tensor's parameters, buffers and row padding (padded row pitches,
// zeroed here), shared by the single and the grouped quantize; the caller
// sets the amax fields and has the scale padding zeroed (nv_one_pads,
// launch_scale_padding).
int32_t nv_prepare(const quant_plugin_quantize_args *a, InType t, const NvSpec &sp, NvParams *pp, NvDir *row, NvDir *col, bool *has_row,
                   bool *has_col, quant_plugin_error *err) {
  int64_t m = a->input.shape[0], k = a->input.shape[1];
  LQ_TRY(check_nv_dims(m, k, err));
  *has_row = a->out[0].num_buffers > 0;
  *has_col = a->out[1].num_buffers > 0;
  if (!*has_row && !*has_col) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "out: no direction asked");
  if (*has_row) LQ_TRY(nv_dir(a->out[0], false, m, k, sp.swizzled, row, err));
  if (*has_col) LQ_TRY(nv_dir(a->out[1], true, m, k, sp.swizzled, col, err));
  if (*has_col && sp.rht && t != InType::BF16) return rht_dtype_error(err);
  if (ceil_div(m, kTileR) * ceil_div(k, kTileC) > 0x7FFFFFFF) return fail(err, QUANT_ERROR_UNSUPPORTED, "input: too many tiles");
  cudaStream_t s = stream_of(a->stream);
  if (*has_row && row->pitch_padded) LQ_CUDA(cudaMemsetAsync(row->data, 0, m * row->pitch, s), "zeroing the rowwise row padding");
  if (*has_col && col->pitch_padded) LQ_CUDA(cudaMemsetAsync(col->data, 0, k * col->pitch, s), "zeroing the columnwise row padding");
  NvParams &p = *pp;
  p = NvParams{};
  p.in = a->input.data;
  p.m = m;
  p.m_load = m;
  p.k = k;
  p.row = row->data;
  p.col = col->data;
  p.row_pitch = row->pitch;
  p.col_pitch = col->pitch;
  p.row_s = row->s;
  p.col_s = col->s;
  p.row_s2 = (reinterpret_cast<uintptr_t>(row->s.buf) & 1) == 0;
  p.col_s4 = (reinterpret_cast<uintptr_t>(col->s.buf) & 3) == 0;
  p.mask = sp.mask;
  p.rht = sp.rht;
  p.fs = 1;
  uint64_t seed = a->params->seed, off = a->params->offset;
  p.sr.key = make_uint2((uint32_t)seed, (uint32_t)(seed >> 32));
  p.sr.off0 = (uint32_t)off;
  p.sr.off1 = (uint32_t)(off >> 32);
  p.vec = row_load_mode(a->input.data, k, in_size(t));
  return QUANT_OK;
}

// The room for the RHT's transformed input(s): the scratch the host lends
// (quant_plugin_quantize_grouped_args.workspace, where a caller's allocator
// holds every device buffer: a CUDA graph capture's pool), or else a
// temporary from the plugin's pool (pool_malloc_async), freed in stream order
// after the work queued before this leaves scope.
struct RhtScratch {
  char *p = nullptr;
  bool own = false;
  cudaStream_t s;
  explicit RhtScratch(cudaStream_t st) : s(st) {}
  RhtScratch(const RhtScratch &) = delete;
  RhtScratch &operator=(const RhtScratch &) = delete;
  ~RhtScratch() {
    if (own) cudaFreeAsync(p, s);
  }
  // bytes: lent (which must hold them) where set, else from the pool.
  int32_t get(const quant_plugin_tensor *lent, int64_t bytes, quant_plugin_error *err) {
    if (lent != nullptr && lent->data != nullptr) {
      LQ_TRY(check_device(*lent, "workspace", err));
      const int64_t n = numel(*lent) * ((lent->dtype.bits * lent->dtype.lanes + 7) / 8);
      if (n < bytes)
        return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "workspace: %lld bytes, the RHT's transformed inputs need %lld", (long long)n,
                    (long long)bytes);
      p = static_cast<char *>(lent->data);
      return QUANT_OK;
    }
    LQ_CUDA(pool_malloc_async(reinterpret_cast<void **>(&p), (size_t)bytes, s), "allocating %lld bytes for the RHT's transformed input",
            (long long)bytes);
    own = true;
    return QUANT_OK;
  }
};

// Sets grp's units for a quantize launch with a columnwise direction or not
// (col) and the options sp; *fast: the fast kernel serves it; returns
// whether that needs its EDGE instance.
template <typename G>
bool nv_units(InType t, G &grp, const NvSpec &sp, bool col, bool *fast) {
  *fast = nv_fast(t, sp, col);
  bool edge = false;
  if constexpr (G::kGroup) {
    const int fs = *fast ? nv_subtiles(grp) : 1;
    for (int i = 0; i < grp.count; i++) {
      NvParams &q = grp.t[i];
      q.fs = fs;
      grp.first[i + 1] = grp.first[i] + (*fast ? nv_strips(q.m, q.k, fs) : ceil_div(q.m, kTileR) * ceil_div(q.k, kTileC));
      edge = edge || (*fast && nv_edge(q));
    }
  } else {
    grp.p.fs = *fast ? nv_subtiles(grp) : 1;
    grp.n = *fast ? nv_strips(grp.p.m, grp.p.k, grp.p.fs) : ceil_div(grp.p.m, kTileR) * ceil_div(grp.p.k, kTileC);
    edge = *fast && nv_edge(grp.p);
  }
  return edge;
}

// NVFP4 rowwise alone through nv4_rows_kernel (1×16) or nv4_band16_kernel
// (16×16), from 16-bit rows at any even offset, round to nearest, the
// global amax read (not self_amax: a small tensor's one launch) (else *done
// stays false). The 16×16 kernel takes tensors of fewer 16-row groups than
// its resident CTAs (2 per SM), each group cut into segments of steps; with
// more, the fast kernel's EDGE instance is as fast or faster (H200, ms with
// the amax pass, EDGE / band: 4096×4097 0.047 / 0.038, 2048×7167 0.030 /
// 0.028, 4095×8191 0.058 / 0.059; 8191² 0.101 / 0.106 with every group a
// CTA, 0.110 with four CTAs' worth of segments per slot: the barrier a step
// holds each CTA's 16 warps together; bench/RESULTS.md, 2026-11-29 21:14
// section).
template <typename T>
int32_t launch_nv4_rows_t(Nv4RowParams p, bool two_d, cudaStream_t st, bool *done, quant_plugin_error *err) {
  const int64_t steps = (ceil_div(p.k, (int64_t)16) + 31) / 32;
  *done = true;
  if (two_d) {
    static const int res = resident_ctas(nv4_band16_kernel<T>, 32 * kBandWarps);
    if (res == 0) return fail(err, QUANT_ERROR_PLUGIN, "nvfp4: the 16x16 rowwise kernel does not fit this GPU");
    const int64_t groups = ceil_div(p.m, (int64_t)16);
    if (groups >= res) {
      *done = false;
      return QUANT_OK;
    }
    int64_t nseg = ceil_div((int64_t)res, groups);
    if (nseg > steps) nseg = steps;
    p.seg_steps = (int)ceil_div(steps, nseg);
    p.nseg = (int)ceil_div(steps, (int64_t)p.seg_steps);
    launch_kernel(nv4_band16_kernel<T>, (unsigned)(groups * p.nseg), 32 * kBandWarps, 0, st, p);
    return QUANT_OK;
  }
  static const int res = resident_ctas(nv4_rows_kernel<T>, kRowThreads);
  if (res == 0) return fail(err, QUANT_ERROR_PLUGIN, "nvfp4: the rowwise kernel does not fit this GPU");
  const int64_t ctas = flat_rows_plan(p, res, kRowThreads, steps);
  launch_kernel(nv4_rows_kernel<T>, (unsigned)ctas, kRowThreads, 0, st, p);
  return QUANT_OK;
}

int32_t launch_nv4_rows(InType t, const NvParams &q, const NvSpec &sp, cudaStream_t st, bool *done, quant_plugin_error *err) {
  *done = false;
  if (t == InType::F32 || sp.sr || q.col != nullptr || q.vec != kRowsShifted || q.self_amax || q.m_load != q.m ||
      q.k >= kFlatRowMax || q.row_pitch > 0x7FFFFFFF)
    return QUANT_OK;
  Nv4RowParams p{};
  fp4_rows_place(p, q.in, q.m, q.k, q.row, q.row_pitch);
  p.s = q.row_s;
  p.amax = q.row_amax;
  for (int i = 0; i < 2; i++) p.amax_dst[i] = q.amax_dst[i], p.amax_src[i] = q.amax_src[i];
  return t == InType::BF16 ? launch_nv4_rows_t<__nv_bfloat16>(p, sp.two_d, st, done, err) : launch_nv4_rows_t<__half>(p, sp.two_d, st, done, err);
}

// One quantize launch over grp's units; what names the input in the error
// when they are more than a grid holds.
template <typename G>
int32_t nv_launch(InType t, G &grp, const NvSpec &sp, bool row, bool col, cudaStream_t s, const char *what,
                  quant_plugin_error *err) {
  if constexpr (!G::kGroup) {
    if (row && !col) {
      bool done;
      LQ_TRY(launch_nv4_rows(t, grp.p, sp, s, &done, err));
      if (done) return launch_scale_padding(grp.zr, grp.zc, s, err);  // that kernel does not zero it
    }
  }
  bool fast;
  const bool edge = nv_units(t, grp, sp, col, &fast);
  if (grp.total() > 0x7FFFFFFF) return fail(err, QUANT_ERROR_UNSUPPORTED, "%s: too many tiles", what);
  launch_nv(t, grp, sp, row, col, fast, edge, s);
  return QUANT_OK;
}

// The RHT's columnwise copy (spec §5.5) as two passes over x: the amax pass
// (rht_amax_kernel) also writes the transform, rounded to BF16, into a
// temporary [m, k] tensor (2 bytes per element, from the pool), and the
// columnwise copy is the plain columnwise quantize of that tensor (the fast
// kernel, stochastic rounding included: the same bytes, as
// the transform's values are what the spec rounds). H200, 8192²: the fused
// cast that transformed in its column phase took 160 µs of a 0.231 ms
// columnwise quantize (bench/RESULTS.md). The rowwise copy, if any, is the
// plain one of x (the RHT leaves it as it is) in its own launch.
// Returns the columnwise copy's parameters: p's, reading t, which holds
// rht_rows(m) rows (the transform of the last row group's padding too).
NvParams rht_col_params(const NvParams &p, const void *t) {
  NvParams c = p;
  c.in = t;
  c.m_load = rht_rows(p.m);
  c.row = nullptr;
  c.row_amax = nullptr;
  c.rht = 0;
  c.vec = row_load_mode(t, p.k, 2);
  return c;
}

NvParams rht_row_params(const NvParams &p) {
  NvParams r = p;
  r.col = nullptr;
  r.col_amax = nullptr;
  r.amax_dst[0] = r.amax_dst[1] = nullptr;  // made by the columnwise launch
  r.rht = 0;
  return r;
}

}  // namespace

extern "C" int32_t lq_nvfp4_quantize(const quant_plugin_quantize_args *a, quant_plugin_error *err) {
  InType t;
  LQ_TRY(input_type(a->input, "input", &t, err));
  LQ_TRY(check_device(a->input, "input", err));
  NvSpec sp;
  LQ_TRY(nv_spec(a->params, &sp, err));
  NvDir row, col;
  bool has_row, has_col;
  NvOne one;
  NvParams &p = one.p;
  LQ_TRY(nv_prepare(a, t, sp, &p, &row, &col, &has_row, &has_col, err));
  cudaStream_t s = stream_of(a->stream);
  LQ_TRY(nv_one_pads(&one, has_row ? &row : nullptr, has_col ? &col : nullptr, s, err));
  // With the RHT on a columnwise copy, the transformed tensor (rht_col_params).
  const bool rht_col = has_col && sp.rht;
  RhtScratch tx(s);
  if (rht_col && p.m * p.k > 0) LQ_TRY(tx.get(nullptr, quant_plugin_rht_workspace(p.m, p.k), err));
  // Global amaxes (amaxes in kernels.go), into the storages' amax buffers.
  // Where a direction's amax is a copy (of the caller's, or of the other
  // direction's), the quantize kernel reads it from the source and makes the
  // copy itself: one CUDA call fewer each.
  int ncopy = 0;
  auto copy_amax = [&](float *dst, const float *src) {
    p.amax_dst[ncopy] = dst;
    p.amax_src[ncopy] = src;
    ncopy++;
  };
  if (a->amax_in.data != nullptr) {
    LQ_TRY(check_device(a->amax_in, "options.amax", err));
    if (numel(a->amax_in) != 2 || !dtype_is(a->amax_in.dtype, kDLFloat, 32))
      return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "options.amax: want float32 [2]");
    const float *in = (const float *)a->amax_in.data;
    const float *row_src = in, *col_src = in + 1;
    if (sp.two_d) row_src = col_src = has_row ? in : in + 1;
    if (has_row) {
      copy_amax(row.amax, row_src);
      p.row_amax = row_src;
    }
    if (has_col) {
      copy_amax(col.amax, col_src);
      p.col_amax = col_src;
    }
    if (tx.p != nullptr) LQ_TRY(rht_amax(a->input, sp.mask, nullptr, (uint16_t *)tx.p, nullptr, s, err));
  } else if (nv_self_amax(p, sp, has_col, nv_fast(t, sp, has_col))) {
    p.self_amax = 1;
    p.self_dst[0] = has_row ? row.amax : nullptr;
    p.self_dst[1] = has_col ? col.amax : nullptr;
  } else {
    // With the RHT's columnwise amax, the rowwise one comes from its pass.
    if (has_row && !rht_col) LQ_TRY(global_amax(a->input, t, row.amax, s, err));
    if (has_row) p.row_amax = row.amax;
    if (has_col) {
      p.col_amax = col.amax;
      if (sp.rht) LQ_TRY(rht_amax(a->input, sp.mask, col.amax, (uint16_t *)tx.p, has_row ? row.amax : nullptr, s, err));
      else if (has_row) {
        copy_amax(col.amax, row.amax);
        p.col_amax = row.amax;
      } else LQ_TRY(global_amax(a->input, t, col.amax, s, err));
    }
  }
  // A copy whose destination is where the kernel reads an amax (a caller's
  // amax array over the storage's own buffers) keeps the old order: copies
  // first, as separate calls.
  bool alias = false;
  for (int i = 0; i < ncopy; i++)
    alias |= p.amax_dst[i] != p.amax_src[i] && (p.amax_dst[i] == p.row_amax || p.amax_dst[i] == p.col_amax);
  if (alias) {
    for (int i = 0; i < ncopy; i++) {
      LQ_CUDA(cudaMemcpyAsync(p.amax_dst[i], p.amax_src[i], 4, cudaMemcpyDeviceToDevice, s), "copying the amax");
      p.amax_dst[i] = nullptr;
    }
    ncopy = 0;
    p.row_amax = has_row ? row.amax : nullptr;
    p.col_amax = has_col ? col.amax : nullptr;
  }
  one.n = ceil_div(p.m, kTileR) * ceil_div(p.k, kTileC);
  if (one.n == 0) {
    LQ_TRY(launch_scale_padding(one.zr, one.zc, s, err));
    for (int i = 0; i < ncopy; i++)
      LQ_CUDA(cudaMemcpyAsync(p.amax_dst[i], p.amax_src[i], 4, cudaMemcpyDeviceToDevice, s), "copying the amax");
    return QUANT_OK;
  }
  if (rht_col) {
    NvSpec plain = sp;
    plain.rht = false;
    if (has_row) {
      NvOne r{{rht_row_params(p), 0}, one.zr, NvPad{}};
      LQ_TRY(nv_launch(t, r, plain, true, false, s, "input", err));
      LQ_LAUNCHED("nvfp4 rowwise quantize kernel launch");
    }
    NvOne c{{rht_col_params(p, tx.p), 0}, NvPad{}, one.zc};
    LQ_TRY(nv_launch(InType::BF16, c, plain, false, true, s, "input", err));
    LQ_LAUNCHED("nvfp4 columnwise quantize kernel launch (the RHT's transformed input)");
    return QUANT_OK;
  }
  LQ_TRY(nv_launch(t, one, sp, has_row, has_col, s, "input", err));
  LQ_LAUNCHED("nvfp4 quantize kernel launch");
  return QUANT_OK;
}

// Every tensor of the group in three launches per kMaxGroup tensors: zero
// the amax accumulators, every global amax (both directions', the RHT's
// included) in one amax pass, and one quantize pass through the single
// quantize's kernels, the units of all tensors numbered tensor after tensor.
// (With the RHT's columnwise copy: the amax pass is one launch per
// rht_amax_kernel instance the group's tensors need, usually one, and the
// quantize two, rowwise of x and columnwise of the transformed tensors.)
// Every option of the single call works here but the caller's amax
// (options.amax: a grouped quantize computes each tensor's own); the group
// must share the dtype, the params, the stream and the directions.
extern "C" int32_t lq_nvfp4_quantize_grouped(const quant_plugin_quantize_grouped_args *a, quant_plugin_error *err) {
  if (a->count == 0) return QUANT_OK;
  InType t;
  LQ_TRY(input_type(a->items[0].input, "items[0].input", &t, err));
  const quant_plugin_params *p0 = a->items[0].params;
  NvSpec sp;
  LQ_TRY(nv_spec(p0, &sp, err));
  for (uint32_t i = 0; i < a->count; i++) {
    const quant_plugin_quantize_args *q = &a->items[i];
    InType ti;
    LQ_TRY(input_type(q->input, "items[].input", &ti, err));
    if (ti != t) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "items[%u].input: another dtype than items[0]", i);
    const quant_plugin_params *pi = q->params;
    if (pi != p0 && (pi->element != p0->element || pi->block_dims != p0->block_dims || pi->rht != p0->rht ||
                     pi->rht_sign_mask != p0->rht_sign_mask || pi->stochastic_rounding != p0->stochastic_rounding ||
                     pi->seed != p0->seed || pi->offset != p0->offset || pi->gemm_swizzled_scales != p0->gemm_swizzled_scales))
      return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "items[%u].params: other nvfp4 options than items[0]", i);
    if (q->stream != a->stream) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "items[%u].stream: not the group's stream", i);
    if (q->amax_in.data != nullptr)
      return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "items[%u].amax_in: a grouped quantize computes each tensor's amax itself", i);
  }
  static NvGroup grp, grpc;  // ~27 KB each: not on the stack; guarded by mu
  static NvAmaxGroup amaxes, rhtg;  // rhtg: the RHT items of one instance
  static int rht_item[kMaxGroup];  // with the RHT: tensor i's amax item ...
  static int64_t rht_off[kMaxGroup];  // ... and its transformed tensor's offset in this chunk's room
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  bool row0 = false, col0 = false;
  const bool rht_col = sp.rht && a->items[0].out[1].num_buffers > 0;  // every item's directions are items[0]'s (checked below)
  NvSpec plain = sp;
  plain.rht = false;
  const quant_plugin_tensor *lent =
      a->struct_size >= offsetof(quant_plugin_quantize_grouped_args, workspace) + sizeof(quant_plugin_tensor) && a->workspace.data != nullptr
          ? &a->workspace
          : nullptr;
  int64_t tbytes = 0;  // the transformed inputs' room of every item so far (the lent workspace's layout)
  cudaStream_t s = stream_of(a->stream);
  for (uint32_t base = 0; base < a->count; base += kMaxGroup) {
    uint32_t n = a->count - base < (uint32_t)kMaxGroup ? a->count - base : (uint32_t)kMaxGroup;
    grp.clear();
    grpc.clear();
    amaxes.clear();
    const int64_t tbase = tbytes;
    for (uint32_t j = 0; j < n; j++) {
      const quant_plugin_quantize_args *q = &a->items[base + j];
      LQ_TRY(check_device(q->input, "items[].input", err));
      NvDir row, col;
      bool has_row, has_col;
      NvParams p;
      LQ_TRY(nv_prepare(q, t, sp, &p, &row, &col, &has_row, &has_col, err));
      LQ_TRY(launch_scale_padding(nv_pad_of(has_row ? &row : nullptr), nv_pad_of(has_col ? &col : nullptr), s, err));
      if (base + j == 0) row0 = has_row, col0 = has_col;
      else if (has_row != row0 || has_col != col0)
        return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "items[%u].out: other directions than items[0]", base + j);
      const int64_t toff = tbytes - tbase;
      if (rht_col) tbytes += quant_plugin_rht_workspace(p.m, p.k);
      // The amaxes: rowwise (or a plain columnwise alone) of x, the RHT's
      // columnwise (which also writes the transformed tensor, as the single
      // quantize's rht_amax); a plain columnwise one with a rowwise one is
      // its copy, made by the quantize kernel (a tensor with no elements has
      // none to make it: both are reduced, to 0).
      const int64_t tiles = ceil_div(p.m, kTileR) * ceil_div(p.k, kTileC);
      auto amax_of = [&](float *out, bool rht) {
        NvAmaxItem it{q->input.data, p.m, p.k, (uint32_t *)out, sp.mask, rht ? 1 : 0, nullptr, nullptr};
        amaxes.add(it, nv_amax_units(it));
      };
      // With the RHT's columnwise amax, the rowwise one comes from its pass.
      if (has_row && !rht_col) amax_of(row.amax, false);
      if (has_row) p.row_amax = row.amax;
      if (has_col) {
        p.col_amax = col.amax;
        if (sp.rht) {
          amax_of(col.amax, true);
          if (has_row) amaxes.t[amaxes.count - 1].plain = (uint32_t *)row.amax;
        } else if (has_row && tiles > 0) {
          p.amax_dst[0] = col.amax;
          p.amax_src[0] = row.amax;
          p.col_amax = row.amax;
        } else amax_of(col.amax, false);
      }
      if (tiles == 0) continue;
      if (!rht_col) {
        grp.add(p, 0);
        continue;
      }
      if (has_row) grp.add(rht_row_params(p), 0);
      rht_item[grpc.count] = amaxes.count - 1;
      rht_off[grpc.count] = toff;
      grpc.add(rht_col_params(p, q->input.data), 0);  // in: set below
    }
    // The transformed inputs' room, quant_plugin_rht_workspace bytes per item
    // (tbase: those of the chunks before this one).
    RhtScratch tx(s);
    if (tbytes > tbase) {
      if (lent != nullptr) {
        LQ_TRY(tx.get(lent, tbytes, err));
        tx.p += tbase;
      } else {
        LQ_TRY(tx.get(nullptr, tbytes - tbase, err));
      }
    }
    for (int i = 0; i < grpc.count; i++) {
      void *ti = tx.p + rht_off[i];
      amaxes.t[rht_item[i]].t = static_cast<uint16_t *>(ti);
      grpc.t[i] = rht_col_params(grpc.t[i], ti);
    }
    // An RHT item's units depend on t's alignment, known only now (rhtg
    // counts them again per instance; here for the bound below).
    if (rht_col)
      for (int i = 0; i < amaxes.count; i++) amaxes.first[i + 1] = amaxes.first[i] + (amaxes.t[i].t != nullptr ? nv_amax_units(amaxes.t[i]) : 0);
    if (amaxes.count > 0) {
      launch_kernel(nv_amax_zero_kernel<NvAmaxGroup>, 1, 2 * kMaxGroup, 0, s, amaxes);
      LQ_LAUNCHED("nvfp4 grouped amax zeroing kernel launch");
      if (amaxes.total() > 0x7FFFFFFF) return fail(err, QUANT_ERROR_UNSUPPORTED, "group: too many amax units");
      if (amaxes.total() > 0 && rht_col) {
        // Each item's instance: 0 single columns, 1 column pairs of an odd
        // K, 2 of an even K.
        for (int cls = 0; cls < 3; cls++) {
          rhtg.clear();
          for (int i = 0; i < amaxes.count; i++) {
            const NvAmaxItem &it = amaxes.t[i];
            if (it.t != nullptr && (!rht_item_pairs(it) ? 0 : (it.k & 1) ? 1 : 2) == cls) rhtg.add(it, nv_amax_units(it));
          }
          if (rhtg.total() == 0) continue;
          auto kern = cls == 0 ? nv_group_rht_kernel<1, false, NvAmaxGroup> : cls == 1 ? nv_group_rht_kernel<2, true, NvAmaxGroup>
                                                                                      : nv_group_rht_kernel<2, false, NvAmaxGroup>;
          launch_kernel(kern, (unsigned)rhtg.total(), kThreads, 0, s, rhtg);
          LQ_LAUNCHED("nvfp4 grouped RHT amax kernel launch");
        }
      } else if (amaxes.total() > 0) {
        switch (t) {
          case InType::F32: launch_kernel(nv_group_amax_kernel<float, NvAmaxGroup>, (unsigned)amaxes.total(), kAmaxThreads, 0, s, amaxes); break;
          case InType::BF16: launch_kernel(nv_group_amax_kernel<__nv_bfloat16, NvAmaxGroup>, (unsigned)amaxes.total(), kAmaxThreads, 0, s, amaxes); break;
          case InType::F16: launch_kernel(nv_group_amax_kernel<__half, NvAmaxGroup>, (unsigned)amaxes.total(), kAmaxThreads, 0, s, amaxes); break;
        }
        LQ_LAUNCHED("nvfp4 grouped amax kernel launch");
      }
    }
    // The quantize: one launch, or with the RHT's columnwise copy the
    // rowwise one of x (if asked) and the columnwise one of the transformed
    // tensors.
    NvGroup *launches[2] = {&grp, rht_col ? &grpc : nullptr};
    for (NvGroup *g : launches) {
      if (g == nullptr || g->count == 0) continue;
      const bool r = g == &grp && row0, c = rht_col ? g == &grpc : col0;
      LQ_TRY(nv_launch(g == &grpc ? InType::BF16 : t, *g, rht_col ? plain : sp, r, c, s, "group", err));
      LQ_LAUNCHED("nvfp4 grouped quantize kernel launch");
    }
  }
  return QUANT_OK;
}

extern "C" int32_t lq_nvfp4_dequantize(const quant_plugin_dequantize_args *a, quant_plugin_error *err) {
  LQ_TRY(check_device(a->out, "out", err));
  InType ot;
  LQ_TRY(input_type(a->out, "out", &ot, err));
  NvSpec sp;
  LQ_TRY(nv_spec(a->params, &sp, err));
  LQ_TRY(check_nv_dims(a->m, a->k, err));
  bool colwise = a->direction == QUANT_DIRECTION_COLUMNWISE;
  NvDir d;
  LQ_TRY(nv_dir(a->storage, colwise, a->m, a->k, sp.swizzled, &d, err));
  cudaStream_t s = stream_of(a->stream);
  int64_t blocks = ceil_div(a->m * a->k > 0 ? a->m * a->k : 1, 256);
  if (blocks > grid_cap()) blocks = grid_cap();
  unsigned g = (unsigned)blocks;
  switch (ot) {
    case InType::F32:
      launch_kernel(nvfp4_dequantize_kernel<float>, g, 256, 0, s, d.data, d.pitch, d.s, d.amax, (float *)a->out.data, a->m, a->k, colwise);
      break;
    case InType::BF16:
      launch_kernel(nvfp4_dequantize_kernel<__nv_bfloat16>, g, 256, 0, s, d.data, d.pitch, d.s, d.amax, (__nv_bfloat16 *)a->out.data, a->m, a->k, colwise);
      break;
    case InType::F16:
      launch_kernel(nvfp4_dequantize_kernel<__half>, g, 256, 0, s, d.data, d.pitch, d.s, d.amax, (__half *)a->out.data, a->m, a->k, colwise);
      break;
  }
  LQ_LAUNCHED("nvfp4 dequantize kernel launch");
  return QUANT_OK;
}

extern "C" int32_t lq_nvfp4_derive(const quant_plugin_derive_args *a, quant_plugin_error *err) {
  NvSpec sp;
  LQ_TRY(nv_spec(a->params, &sp, err));
  if (!sp.two_d || a->from_direction != QUANT_DIRECTION_ROWWISE || a->to_direction != QUANT_DIRECTION_COLUMNWISE)
    return fail(err, QUANT_ERROR_STATE, "nvfp4: only 16×16-scaled columnwise data can be derived, from rowwise data");
  LQ_TRY(check_nv_dims(a->m, a->k, err));
  NvDir from, to;
  LQ_TRY(nv_dir(a->from, false, a->m, a->k, sp.swizzled, &from, err));
  LQ_TRY(nv_dir(a->to, true, a->m, a->k, sp.swizzled, &to, err));
  cudaStream_t s = stream_of(a->stream);
  if (to.padded) LQ_CUDA(cudaMemsetAsync(to.s.buf, 0, to.scale_bytes, s), "zeroing scale padding");
  if (to.pitch_padded) LQ_CUDA(cudaMemsetAsync(to.data, 0, a->k * to.pitch, s), "zeroing the row padding");
  LQ_CUDA(cudaMemcpyAsync(to.amax, from.amax, 4, cudaMemcpyDeviceToDevice, s), "copying the amax");
  int64_t n = a->k * ceil_div(a->m, 16);
  if (n > 0) {
    int64_t blocks = ceil_div(n, 256);
    if (blocks > grid_cap()) blocks = grid_cap();
    launch_kernel(nvfp4_derive_kernel, (unsigned)blocks, 256, 0, s, from.data, from.pitch, from.s, to.data, to.pitch, to.s, a->m, a->k);
    LQ_LAUNCHED("nvfp4 derive kernel launch");
  }
  return QUANT_OK;
}

extern "C" int32_t lq_nvfp4_swizzle(const quant_plugin_swizzle_args *a, quant_plugin_error *err) {
  NvSpec sp;
  LQ_TRY(nv_spec(a->params, &sp, err));
  LQ_TRY(check_nv_dims(a->m, a->k, err));
  bool colwise = a->direction == QUANT_DIRECTION_COLUMNWISE;
  NvDir d;
  LQ_TRY(nv_dir(a->storage, colwise, a->m, a->k, sp.swizzled, &d, err));
  if ((a->swizzled != 0) == (sp.swizzled != 0)) return QUANT_OK;
  int64_t rows = pad_to(colwise ? a->k : a->m, 128), cols = d.s.pad_j, n = rows * cols;
  cudaStream_t s = stream_of(a->stream);
  uint8_t *tmp = nullptr;
  LQ_CUDA(pool_malloc_async((void **)&tmp, n, s), "allocating %lld bytes for the scale copy", (long long)n);
  cudaError_t e = cudaMemcpyAsync(tmp, d.s.buf, n, cudaMemcpyDeviceToDevice, s);
  if (e == cudaSuccess && n > 0) {
    int64_t blocks = ceil_div(n, 256);
    if (blocks > grid_cap()) blocks = grid_cap();
    launch_kernel(nvfp4_swizzle_kernel, (unsigned)blocks, 256, 0, s, tmp, d.s.buf, rows, cols, a->swizzled != 0);
    e = cudaGetLastError();
  }
  cudaError_t fe = cudaFreeAsync(tmp, s);
  LQ_CUDA(e, "scale swizzle");
  LQ_CUDA(fe, "freeing the scale copy");
  return QUANT_OK;
}
