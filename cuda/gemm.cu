// GEMM on the GPU (quant.h, quant_gemm; plugin ABI 2, quant_plugin_gemm):
//
//	D = alpha·op(A)·op(B) + beta·C + bias (+ old D when accumulate), row-major
//
// on cuBLASLt, FP32 accumulation, every M, N, K (spec §14 item 5), every
// transpose pair, D in FP32/BF16/FP16. The operands take one of three paths:
//
//   - FP8 per-tensor × FP8 per-tensor (E4M3×E4M3, E4M3×E5M2, E5M2×E4M3):
//     native FP8 tensor cores, the two scale_inv factors read by cuBLASLt
//     from device memory (A/B scale pointers). The host hands the direction
//     whose contraction dim is contiguous (TE's rule), so the call is always
//     TN. N and K must be multiples of 16 (cuBLASLt's FP8 alignment; any
//     M); other shapes run the BF16 path. FP8 block scaling likewise (any M,
//     A zero-padded to 16 rows where M is not a multiple of 16).
//   - BF16 / FP16 / FP32 dense operands of one dtype: cuBLASLt directly (FP32
//     without TF32).
//   - Everything else, every mixed pair included: each operand is expanded
//     to BF16 where its values are exactly BF16 (FP8 codes; MXFP8/MXFP4 code
//     × E8M0 scale; NVFP4 E2M1 × E4M3 block scale; BF16), else to FP32 (FP16
//     or FP32 dense, FP8 block codes × FP32 scale), then one cuBLASLt GEMM in
//     that type. MX and NVFP4 operands read along their rows (K contiguous,
//     as the host hands them) expand by expand_contig_kernel, an instance per
//     pair of kinds; MXFP8 operands contracted along their physical rows (the
//     columnwise copies a linear layer's dgrad and wgrad read) expand in
//     their own layout by expand_phys_kernel, and cuBLASLt reads them
//     transposed; the rest (dense, strided, FP8) by expand_kernel.
//     Per-tensor factors (FP8 scale_inv, NVFP4 amax/(6·448)) are not
//     expanded: they live in device memory, so alpha·fa·fb is formed on the
//     device in float64 and rounded once (as the CPU GEMM does, spec §11) by
//     alpha_kernel (or, in the same code, by the first thread of
//     expand_contig_kernel: one launch fewer), and cuBLASLt reads it as a
//     device alpha (CUBLASLT_POINTER_MODE_DEVICE; CUDA 13's
//     BF16/FP32 algorithms on an H100 take it, D bit-identical to a host
//     alpha of the same value: bench/lt_alpha_probe.cu, bench/RESULTS.md)
//     where nothing else is added; with C, bias or accumulate (or a cuBLASLt
//     without such an algorithm), cuBLASLt writes the FP32 sums and
//     epilogue_kernel multiplies them. Nothing waits on the host.
//
// The epilogue: cuBLASLt writes D itself where it can (no bias, and no C or
// C of D's dtype, or accumulate as C = D; per-tensor factors left to apply
// only without C or accumulate, as a device alpha); otherwise it writes FP32
// sums Σ into scratch and epilogue_kernel computes alpha_eff·Σ + beta·C + bias + old D in FP32 and rounds once to D
// (host/gemm_cpu.go's order).
//
// Accuracy: the BF16, FP16 and FP32 paths multiply exact operand values with
// FP32 accumulation (host/gemm_test.go's bound). The native FP8 path does
// not: Hopper's FP8 tensor-core MMA accumulates with fewer bits (about 14,
// DeepSeek-V3 report §3.3.2) between cuBLASLt's promotions to FP32; the
// support table says so.
//
// Handles: one cuBLASLt handle per device and one 32 MiB cuBLASLt workspace
// per (device, stream) (two streams never share one), created on first use
// under a mutex (inside a stream capture, where cudaMalloc is refused, a
// stream without one takes its algorithm's workspace in stream order from the
// plugin's pool for that call); the host's workspace
// (quant_plugin_gemm_args.workspace) is used instead where the algorithm fits
// in it. Plans: the matmul descriptor,
// the four matrix layouts and the heuristic's algorithm are made once per key
// (device, shapes, leading dims, types, transposes, scale modes, whether C is
// read, the pointers' alignment; LtKey) and kept (at most kMaxPlans, least
// recently used dropped), so a repeated GEMM sets only its FP8 scale pointers
// and calls cublasLtMatmul. The expansion of both operands is one launch
// (two where one is contiguous MX/NVFP4 and the other not, or for FP32), its
// scratch and the FP32 sums one stream-ordered allocation (the plugin's
// pool, pool_malloc_async); alpha·fa·fb is formed by the kernel that uses it. No
// host synchronisation.
#include <cublasLt.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "common.cuh"
#include "gemm_fused.cuh"

namespace lq {
namespace {

// ---------------------------------------------------------------------------
// Operands
// ---------------------------------------------------------------------------

enum class Kind {
  Dense,     // a dense tensor or the identity format: data [rows, cols]
  Fp8,       // per-tensor FP8: data rowwise [R, C], columnwise transposed [C, R]; scale_inv [1]
  Fp8Block,  // fp8_block: data rowwise [R, C], columnwise [C, R]; FP32 block scales
  Mxfp8,     // data [R, C] both directions; E8M0 scales
  Mxfp4,     // packed E2M1 rowwise [R, ⌈C/2⌉], columnwise [C, ⌈R/2⌉]; E8M0 scales
  Nvfp4,     // packed E2M1 as mxfp4; E4M3 scales per 16; FP32 amax [1]
};

// Everything a kernel needs to read element (r, c) of an operand's logical
// [R, C] view, without its per-tensor factor.
struct OpView {
  Kind kind;
  const uint8_t *data;
  int64_t R, C;
  int64_t pitch;  // bytes per physical row
  int colwise;    // the direction read is columnwise
  int transposed; // physical layout is [C, R] (the transposed copy)
  int trans;      // op(X) = X^T
  int el;         // Dense: 0 f32, 1 bf16, 2 f16; Fp8/Mxfp8: 0 e4m3, 1 e5m2
  const void *scale;
  int64_t s_pad_i, s_pad_j;  // MX/NVFP4 scale layout (i: non-contraction index, j: block)
  int s_jmajor, s_swizzled;
  int64_t s_stride;  // fp8_block
  int s_two_d;
  const float *factor;  // per-tensor factor source (Fp8 scale_inv, Nvfp4 amax), or NULL
};

// The byte index of block scale (i, j) of an MX or NVFP4 operand: i the
// non-contraction index, j the block along the contraction dim (compact
// [pad(i), pad4(j)], MXFP8 columnwise [pad4(j), pad(i)], or GEMM-swizzled,
// whose four consecutive j of one i are four consecutive bytes).
__device__ __forceinline__ int64_t block_scale_index(const OpView &v, int64_t i, int64_t j) {
  return v.s_swizzled ? swizzle_index(i, j, v.s_pad_j) : v.s_jmajor ? j * v.s_pad_i + i : i * v.s_pad_j + j;
}

// The value of logical element (r, c) (the per-tensor factor not applied).
__device__ __forceinline__ float op_value(const OpView &v, int64_t r, int64_t c) {
  // Physical (pr, pc) in the direction's data.
  const int64_t pr = v.transposed ? c : r, pc = v.transposed ? r : c;
  switch (v.kind) {
    case Kind::Dense: {
      const int64_t idx = pr * v.pitch + pc;
      if (v.el == 0) return reinterpret_cast<const float *>(v.data)[idx];
      if (v.el == 1) return __bfloat162float(reinterpret_cast<const __nv_bfloat16 *>(v.data)[idx]);
      return __half2float(reinterpret_cast<const __half *>(v.data)[idx]);
    }
    case Kind::Fp8: {
      uint8_t q = v.data[pr * v.pitch + pc];
      return v.el ? fp8_decode<Fp8::E5M2>(q) : fp8_decode<Fp8::E4M3>(q);
    }
    case Kind::Fp8Block: {
      uint8_t q = v.data[pr * v.pitch + pc];
      const float *s = reinterpret_cast<const float *>(v.scale);
      float si = v.s_two_d ? s[(pr / 128) * v.s_stride + pc / 128] : s[(pc / 128) * v.s_stride + pr];
      return __fmul_rn(fp8_decode<Fp8::E4M3>(q), si);
    }
    case Kind::Mxfp8:
    case Kind::Mxfp4: {
      // Scale (i, j): i the non-contraction index, j the 32-block along the
      // contraction dim (rowwise: (r, c/32); columnwise: (c, r/32)).
      const int64_t i = v.colwise ? c : r, j = v.colwise ? r / 32 : c / 32;
      const float s = e8m0_decode(reinterpret_cast<const uint8_t *>(v.scale)[block_scale_index(v, i, j)]);
      float x;
      if (v.kind == Kind::Mxfp8) {
        uint8_t q = v.data[pr * v.pitch + pc];
        x = v.el ? fp8_decode<Fp8::E5M2>(q) : fp8_decode<Fp8::E4M3>(q);
      } else {
        x = e2m1_decode((v.data[pr * v.pitch + pc / 2] >> (4 * (pc & 1))) & 0xF);
      }
      return __fmul_rn(s, x);
    }
    case Kind::Nvfp4: {
      const int64_t i = v.colwise ? c : r, j = v.colwise ? r / 16 : c / 16;
      const float s = fp8_decode<Fp8::E4M3>(reinterpret_cast<const uint8_t *>(v.scale)[block_scale_index(v, i, j)]);
      const float x = e2m1_decode((v.data[pr * v.pitch + pc / 2] >> (4 * (pc & 1))) & 0xF);
      return __fmul_rn(s, x);  // exact: 2 × 4 significant bits
    }
  }
  return 0.0f;
}

// The codes of elements p0 .. p0+15 (n of them inside; the rest 0) of
// physical row i, little-endian in w: 16 bytes (FP8) or 8 (E2M1, FP4), in
// one 16-byte (FP8) or 8-byte (E2M1) load where aligned.
template <bool FP4>
__device__ __forceinline__ void load_codes16(const OpView &v, int64_t i, int64_t p0, int n, uint32_t (&w)[4]) {
  const uint8_t *q = v.data + i * v.pitch + (FP4 ? p0 / 2 : p0);
  const int nb = FP4 ? (n + 1) / 2 : n;  // bytes to read
  const uintptr_t ad = reinterpret_cast<uintptr_t>(q);
  w[0] = w[1] = w[2] = w[3] = 0u;
  if (nb == (FP4 ? 8 : 16) && (ad & 3) == 0) {
    if (!FP4 && (ad & 15) == 0) {
      const uint4 t = *reinterpret_cast<const uint4 *>(q);
      w[0] = t.x, w[1] = t.y, w[2] = t.z, w[3] = t.w;
    } else if ((ad & 7) == 0) {
#pragma unroll
      for (int h = 0; h < 2; h++)
        if (2 * h < nb / 4) {
          const uint2 t = reinterpret_cast<const uint2 *>(q)[h];
          w[2 * h] = t.x, w[2 * h + 1] = t.y;
        }
    } else {
#pragma unroll
      for (int h = 0; h < 4; h++)
        if (h < nb / 4) w[h] = reinterpret_cast<const uint32_t *>(q)[h];
    }
  } else {
#pragma unroll
    for (int b = 0; b < 16; b++)
      if (b < nb) w[b >> 2] |= (uint32_t)q[b] << (8 * (b & 3));
  }
}

// N FP8 codes (element e at byte e of w) as values: the code (E4M3 or
// E5M2) times s (an E8M0 or FP32 block scale; FP8 per-tensor: none, its
// factor goes into alpha) in FP32, the elements from n on 0.
template <Kind K, Fp8 F, int N>
__device__ __forceinline__ void fp8_values(const uint32_t (&w)[N / 4], float s, int n, float (&x)[N]) {
#pragma unroll
  for (int e = 0; e < N; e++) {
    const float c = fp8_decode<F>((uint8_t)(w[e >> 2] >> (8 * (e & 3))));
    x[e] = e < n ? (K == Kind::Fp8 ? c : __fmul_rn(s, c)) : 0.0f;
  }
}

template <Kind K, int N>
__device__ __forceinline__ void fp8_values(const uint32_t (&w)[N / 4], int el, float s, int n, float (&x)[N]) {
  if (K == Kind::Fp8Block || el == 0) fp8_values<K, Fp8::E4M3, N>(w, s, n, x);
  else fp8_values<K, Fp8::E5M2, N>(w, s, n, x);
}

// Elements p0 .. p0+15 (n of them inside) of row i of an FP8, FP8 block or
// MXFP8 operand whose physical row i holds them contiguously, the
// contraction dim being the physical one (the copy TE's rule picks for a
// quantized operand): the codes (load_codes16) and one scale (blocks of 32
// or 128 along p, p0 % 16 == 0).
template <Kind K>
__device__ __forceinline__ void expand16_contig(const OpView &v, int64_t i, int64_t p0, int n, float (&x)[16]) {
  uint32_t w[4];
  load_codes16<false>(v, i, p0, n, w);
  float s = 1.0f;
  if constexpr (K == Kind::Fp8Block) {
    const float *sc = reinterpret_cast<const float *>(v.scale);
    s = v.s_two_d ? sc[(i / 128) * v.s_stride + p0 / 128] : sc[(p0 / 128) * v.s_stride + i];
  } else if constexpr (K == Kind::Mxfp8) {
    s = e8m0_decode(reinterpret_cast<const uint8_t *>(v.scale)[block_scale_index(v, i, p0 / 32)]);
  }
  fp8_values<K, 16>(w, v.el, s, n, x);
}

// Four E2M1 codes (code e at bits 4e of c4's low 16 bits) as BF16, exactly:
// the magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 are BF16 0x0000, 0x3F00, 0x3F80,
// 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0, looked up by byte permutes (high
// and low bytes), interleaved into two BF16 pairs, and the sign (bit 3 of a
// code) moved to bit 15 of its half. e2m1_decode's values, bit for bit.
__device__ __forceinline__ void e2m1x4_to_bf16x2(uint32_t c4, uint32_t &w01, uint32_t &w23) {
  const uint32_t sel = c4 & 0x7777u;
  const uint32_t hi = __byte_perm(0x3F3F3F00u, 0x40404040u, sel);
  const uint32_t lo = __byte_perm(0xC0800000u, 0xC0804000u, sel);
  w01 = __byte_perm(lo, hi, 0x5140u) | ((c4 << 12) & 0x8000u) | ((c4 << 24) & 0x80000000u);
  w23 = __byte_perm(lo, hi, 0x7362u) | ((c4 << 4) & 0x8000u) | ((c4 << 16) & 0x80000000u);
}

__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
  uint32_t r;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}

// 8 E2M1 codes (element e at bits 4e of w) times the block scale whose byte
// is b (NV: an E4M3 NVFP4 scale, else an E8M0 MXFP4 one), straight to 4 BF16
// pairs (element 2h in the low half of o[h]): code × scale in BF16 (exact:
// the code has at most 2 significant bits, the scale is a power of two (E8M0;
// 0xFF NaN) or an E4M3 value of at most 4 significant bits, so the product
// fits BF16's 8; no product is subnormal but for E8M0 scales 2^-127 and
// 2^-126, which take FP32; overflow as in FP32).
template <bool NV>
__device__ __forceinline__ void fp4x8_bf16(uint32_t w, uint32_t b, uint32_t (&o)[4]) {
  uint32_t sb;
  if (!NV) {
    if (b <= 1u) {
      // Scales 2^-127 and 2^-126 make subnormal products: formed in FP32
      // (IEEE, subnormals kept) rather than trusting BF16 arithmetic with them.
      const float s = e8m0_decode(b);
#pragma unroll
      for (int h = 0; h < 2; h++) {
        uint32_t a, c;
        e2m1x4_to_bf16x2(w >> (16 * h), a, c);
        const uint32_t in[2] = {a, c};
#pragma unroll
        for (int q = 0; q < 2; q++) {
          const uint32_t lo = __float_as_uint(__fmul_rn(__uint_as_float(in[q] << 16), s)) >> 16;
          const uint32_t hi = __float_as_uint(__fmul_rn(__uint_as_float(in[q] & 0xFFFF0000u), s)) >> 16;
          o[2 * h + q] = lo | hi << 16;  // exact: at most 2 significant bits
        }
      }
      return;
    }
    sb = b == 0xFFu ? 0x7FC0u : b << 7;
  } else {
    sb = __float_as_uint(fp8_decode<Fp8::E4M3>((uint8_t)b)) >> 16;  // exact in BF16
  }
  const uint32_t s2 = sb | sb << 16;
#pragma unroll
  for (int h = 0; h < 2; h++) {
    uint32_t a, c;
    e2m1x4_to_bf16x2(w >> (16 * h), a, c);
    o[2 * h] = bf16x2_mul(a, s2);
    o[2 * h + 1] = bf16x2_mul(c, s2);
  }
}

// expand16_contig for MXFP4 and NVFP4 (NV), straight to BF16 pairs
// (fp4x8_bf16), the elements from n on 0.
template <bool NV>
__device__ __forceinline__ void expand16_fp4(const OpView &v, int64_t i, int64_t p0, int n, uint32_t (&o)[8]) {
  uint32_t w[4];
  load_codes16<true>(v, i, p0, n, w);
  const uint32_t b = reinterpret_cast<const uint8_t *>(v.scale)[block_scale_index(v, i, p0 / (NV ? 16 : 32))];
  uint32_t lo[4], hi[4];
  fp4x8_bf16<NV>(w[0], b, lo);
  fp4x8_bf16<NV>(w[1], b, hi);
#pragma unroll
  for (int h = 0; h < 4; h++) o[h] = lo[h], o[4 + h] = hi[h];
  if (n < 16) {  // elements past the row's end (a NaN scale's products too): zero
#pragma unroll
    for (int e = 0; e < 16; e++)
      if (e >= n) o[e >> 1] &= (e & 1) ? 0x0000FFFFu : 0xFFFF0000u;
  }
}

// 16 elements of an output row at dst (16-element aligned): FP32 values
// (exactly BF16 ones where OT is BF16).
template <typename OT>
__device__ __forceinline__ void store16(OT *dst, const float (&xs)[16]) {
  if constexpr (sizeof(OT) == 2) {
    __align__(16) __nv_bfloat16 o[16];
#pragma unroll
    for (int e = 0; e < 16; e++) o[e] = __float2bfloat16_rn(xs[e]);  // exact: a BF16 value
    reinterpret_cast<uint4 *>(dst)[0] = reinterpret_cast<const uint4 *>(o)[0];
    reinterpret_cast<uint4 *>(dst)[1] = reinterpret_cast<const uint4 *>(o)[1];
  } else {
#pragma unroll
    for (int h = 0; h < 4; h++) reinterpret_cast<float4 *>(dst)[h] = make_float4(xs[4 * h], xs[4 * h + 1], xs[4 * h + 2], xs[4 * h + 3]);
  }
}

// ---------------------------------------------------------------------------
// The generic expansion (dense operands, strided reads, FP8 and FP8 block)
// ---------------------------------------------------------------------------

// One operand to expand: op(X) into a row-major [rows, k] buffer of OT with
// row pitch ld (a multiple of 16 elements, so that every group of 16 is one
// or two aligned vector stores; the columns k .. ld-1 get zeros): for A,
// op(A) [M, K]; for B, op(B)ᵀ [N, K] (so that cuBLASLt always gets "TN").
// contig: an FP8 or FP8 block operand whose physical rows are op rows
// (expand16_contig; MX and NVFP4 ones read so take expand_contig_kernel),
// else element by element (op_value). pfast: consecutive threads take
// consecutive groups of one output row (the contraction index p is
// contiguous in memory), else the same group of consecutive rows (op row i
// is, physical (p, i)), so that a warp's reads are coalesced either way.
template <typename OT>
struct Expansion {
  OpView v;
  int64_t rows, ld;
  int is_b, contig, pfast;
  OT *out;
};

int contiguous(const OpView &v, bool is_b);

template <typename OT>
Expansion<OT> expansion(const OpView &v, int64_t rows, int64_t ld, bool is_b, OT *out) {
  const int rows_along_p = contiguous(v, is_b);
  const int contig = rows_along_p && (v.kind == Kind::Fp8 || v.kind == Kind::Fp8Block);
  const bool t = is_b ? !v.trans : v.trans;  // logical (r, c) = t ? (p, i) : (i, p)
  const int pfast = rows_along_p || (v.kind == Kind::Dense && !t);
  return Expansion<OT>{v, rows, ld, is_b ? 1 : 0, contig, pfast, out};
}

// Group g (16 consecutive elements of one output row) of one operand.
template <typename OT>
__device__ __forceinline__ void expand_group(const Expansion<OT> &x, int64_t k, int64_t groups, int64_t g) {
  int64_t i, p0;
  if (x.pfast) i = g / groups, p0 = (g % groups) * 16;
  else i = g % x.rows, p0 = (g / x.rows) * 16;
  OT *dst = x.out + i * x.ld + p0;  // 16-element aligned: ld % 16 == 0, p0 % 16 == 0
  float xs[16];
  const int n = (int)(k - p0 < 16 ? k - p0 : 16);
  if (x.contig) {
    if (x.v.kind == Kind::Fp8Block) expand16_contig<Kind::Fp8Block>(x.v, i, p0, n, xs);
    else expand16_contig<Kind::Fp8>(x.v, i, p0, n, xs);
  } else {
    // op(A)[i, p] = A[i, p] or A[p, i]; op(B)ᵀ[i, p] = op(B)[p, i] = B[p, i] or B[i, p].
    const bool t = x.is_b ? !x.v.trans : x.v.trans;
#pragma unroll
    for (int e = 0; e < 16; e++) {
      const int64_t p = p0 + e;
      xs[e] = p < k ? (t ? op_value(x.v, p, i) : op_value(x.v, i, p)) : 0.0f;
    }
  }
  store16(dst, xs);
}

// Both operands' expansions in one launch (one of them may have no rows):
// groups [0, na) are A's, the rest B's.
template <typename OT>
__global__ void __launch_bounds__(256) expand_kernel(Expansion<OT> a, Expansion<OT> b, int64_t k) {
  pdl_wait();
  const int64_t groups = (k + 15) / 16, na = a.rows * groups, n = na + b.rows * groups;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; g < n; g += stride) {
    if (g < na) expand_group(a, k, groups, g);
    else expand_group(b, k, groups, g - na);
  }
}

// alpha, beta and the per-tensor factors still to apply (FP8 scale_inv,
// NVFP4 amax; NULL: none), read on the device: alpha_eff = alpha·fa·fb in
// float64, rounded once (host/gemm_cpu.go, spec §11).
struct Alpha {
  const float *fa, *fb;
  int nva, nvb;  // the factor is an NVFP4 amax
  float alpha, beta;
};

__device__ __forceinline__ float alpha_eff(const Alpha &a) { return qfused::alpha_factors(a.alpha, a.fa, a.nva, a.fb, a.nvb); }

// alpha_eff into out[0] and 0 into out[1]: cuBLASLt's alpha and beta in its
// device pointer mode (no C), where no expand_contig_kernel writes them.
__global__ void alpha_kernel(Alpha a, float *out) {
  pdl_wait();
  out[0] = alpha_eff(a), out[1] = 0.0f;
}

// ---------------------------------------------------------------------------
// The contiguous MX/NVFP4 expansion (expand_contig_kernel)
// ---------------------------------------------------------------------------
//
// MXFP8, MXFP4 and NVFP4 operands whose physical rows are op rows (K
// contiguous: what TE's rule hands a GEMM but for MXFP8's columnwise copy)
// expand by a kernel of their own, templated on each operand's kind, so that
// an instance holds only its kinds' conversions. The work is split in units
// of 8 elements of the padded output rows (ld = pad16(K) = 8·upr elements), a
// row's units numbered along K and the rows one after another, so that unit
// u's output is out + 8u: one 16-byte BF16 store. A warp takes 32·kSlots
// consecutive units: lane l the units l, l + 32, .., so that each of the
// warp's stores writes 512 consecutive bytes (whole 32-byte sectors and
// 128-byte lines; a first version with 16 or 32 elements per lane, its
// stores 32 or 64 bytes apart across the warp, ran L2-bound: 1.8x the L2
// write sectors and 2x the time for FP4, bench/RESULTS.md) and
// each code load reads 256 (FP8) or 128 (E2M1) consecutive bytes. Every
// lane issues all its kSlots code loads and their block-scale loads before
// it converts any. A unit not wholly inside K, in rows not aligned for the
// 8- or 4-byte load, or an MXFP4 block of scale 2^-127 or 2^-126 goes after
// them through the 16-element helpers above (expand16_contig, expand16_fp4:
// any alignment, zeros past K, subnormal products in FP32), in a loop not
// unrolled, its half of the group stored. The values are the helpers'
// (fp8_values, fp4x8_bf16): the same bits.

enum : int { kCNone = 0, kCMxfp8 = 1, kCMxfp4 = 2, kCNvfp4 = 3 };
constexpr int kSlots = 8;

template <typename OT>
struct ContigOp {
  OpView v;
  OT *out;
  uint64_t units;  // rows · upr
  int64_t upr;     // units per padded row: pad16(K) / 8
  int vec;         // rows aligned for one 8-byte (FP8) or 4-byte (E2M1) load per unit
};

// 8 output elements at dst (8-element aligned): FP32 values (exactly BF16
// ones where OT is BF16), or 4 BF16 pairs.
template <typename OT>
__device__ __forceinline__ void store8(OT *dst, const float (&xs)[8]) {
  if constexpr (sizeof(OT) == 2) {
    uint32_t o[4];
#pragma unroll
    for (int h = 0; h < 4; h++) o[h] = (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(xs[2 * h])) |  // exact: BF16 values
                                       (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(xs[2 * h + 1])) << 16;
    store_v4(dst, o[0], o[1], o[2], o[3]);
  } else {
#pragma unroll
    for (int h = 0; h < 2; h++)
      store_v4(dst + 4 * h, __float_as_uint(xs[4 * h]), __float_as_uint(xs[4 * h + 1]), __float_as_uint(xs[4 * h + 2]), __float_as_uint(xs[4 * h + 3]));
  }
}

template <typename OT>
__device__ __forceinline__ void store8(OT *dst, const uint32_t (&o)[4]) {
  if constexpr (sizeof(OT) == 2) {
    store_v4(dst, o[0], o[1], o[2], o[3]);
  } else {
#pragma unroll
    for (int h = 0; h < 2; h++) store_v4(dst + 4 * h, o[2 * h] << 16, o[2 * h] & 0xFFFF0000u, o[2 * h + 1] << 16, o[2 * h + 1] & 0xFFFF0000u);
  }
}

// Block scale (i, j)'s byte offset (block_scale_index, never j-major here)
// as a row part and a column part, so that a lane pays the row part's
// products only when its units move to another row: swizzle_index(i, j, c)
// = ((i/128)·(c/4) + j/4)·512 + (i%32)·16 + ((i%128)/32)·4 + j%4.
__device__ __forceinline__ uint64_t scale_row(const OpView &v, uint64_t i) {
  return v.s_swizzled ? (i >> 7) * ((uint64_t)v.s_pad_j >> 2) * 512 + (i & 31) * 16 + ((i >> 5) & 3) * 4 : i * (uint64_t)v.s_pad_j;
}
__device__ __forceinline__ uint64_t scale_col(const OpView &v, uint64_t j) { return v.s_swizzled ? (j >> 2) * 512 + (j & 3) : j; }

// A lane's first unit u0 of a warp task (units numbered along rows of upr
// units): its row *i0 and unit *q0 within the row (32-bit division where the
// units fit), and how many of its kSlots units (u0, u0 + 32, ..) exist.
// (contig_task spells the same out: through this helper, NVCC compiled its
// same-kind instances differently, and they were not re-measured.)
__device__ __forceinline__ int task_start(uint64_t units, int64_t upr, uint64_t u0, int64_t *i0, int64_t *q0) {
  if (units <= 0xFFFFFFFFull) {
    const uint32_t u = (uint32_t)u0, r = (uint32_t)upr;
    *i0 = u / r, *q0 = u % r;
  } else {
    *i0 = (int64_t)(u0 / (uint64_t)upr), *q0 = (int64_t)(u0 % (uint64_t)upr);
  }
  return units - u0 > 32 * (kSlots - 1) ? kSlots : (int)((units - u0 + 31) / 32);
}

// Units u0, u0 + 32, .., u0 + 32·(kSlots-1) of one operand: the whole ones'
// loads first, then their conversions and stores, then the rest.
template <int CK, typename OT>
__device__ __forceinline__ void contig_task(const ContigOp<OT> &x, int64_t k, uint64_t u0) {
  if (u0 >= x.units) return;
  int64_t i0, q0;  // row and unit within the row of u0
  if (x.units <= 0xFFFFFFFFull) {
    const uint32_t u = (uint32_t)u0, r = (uint32_t)x.upr;
    i0 = u / r, q0 = u % r;
  } else {
    i0 = (int64_t)(u0 / (uint64_t)x.upr), q0 = (int64_t)(u0 % (uint64_t)x.upr);
  }
  const int nslots = x.units - u0 > 32 * (kSlots - 1) ? kSlots : (int)((x.units - u0 + 31) / 32);
  constexpr int JS = CK == kCNvfp4 ? 1 : 2;  // unit q's block: q >> JS (16 or 32 elements)
  uint32_t w[kSlots][CK == kCMxfp8 ? 2 : 1];
  uint32_t sb[kSlots];
  uint32_t whole = 0;
  const uint8_t *scales = reinterpret_cast<const uint8_t *>(x.v.scale);
  int64_t i = i0, q = q0;
  const uint8_t *crow = x.v.data + i * x.v.pitch;  // row i's codes
  uint64_t srow = scale_row(x.v, i);              // and block scales
#pragma unroll
  for (int s = 0; s < kSlots; s++) {
    if (s > 0) {
      q += 32;
      if (q >= x.upr) {
        do q -= x.upr, i++;
        while (q >= x.upr);
        crow = x.v.data + i * x.v.pitch;
        srow = scale_row(x.v, i);
      }
    }
    if (s < nslots && x.vec && q * 8 + 8 <= k) {
      whole |= 1u << s;
      if constexpr (CK == kCMxfp8) {
        const uint2 c = __ldg(reinterpret_cast<const uint2 *>(crow + q * 8));
        w[s][0] = c.x, w[s][1] = c.y;
      } else {
        w[s][0] = __ldg(reinterpret_cast<const uint32_t *>(crow + q * 4));
      }
      sb[s] = __ldg(scales + srow + scale_col(x.v, (uint64_t)q >> JS));
    }
  }
  uint32_t rest = 0;  // slots left to the helpers
#pragma unroll
  for (int s = 0; s < kSlots; s++) {
    if (s >= nslots) break;
    OT *dst = x.out + (u0 + 32 * s) * 8;
    if (!(whole >> s & 1u) || (CK == kCMxfp4 && sb[s] <= 1u)) {
      rest |= 1u << s;
    } else if constexpr (CK == kCMxfp8) {
      float xs[8];
      fp8_values<Kind::Mxfp8, 8>(w[s], x.v.el, e8m0_decode(sb[s]), 8, xs);
      store8(dst, xs);
    } else {
      uint32_t o[4];
      fp4x8_bf16<CK == kCNvfp4>(w[s][0], sb[s], o);
      store8(dst, o);
    }
  }
  if (rest == 0) return;
  i = i0, q = q0;
#pragma unroll 1
  for (int s = 0; s < nslots; s++) {
    if (s > 0) {
      q += 32;
      while (q >= x.upr) q -= x.upr, i++;
    }
    if (!(rest >> s & 1u)) continue;
    // The 16-element group holding the unit (inside the padded row, so
    // starting before k), and the unit's half of it.
    const int64_t pg = (q * 8) & ~(int64_t)15;
    const int n = (int)(k - pg < 16 ? k - pg : 16), half = (int)(q & 1);
    OT *dst = x.out + (u0 + 32 * s) * 8;
    if constexpr (CK == kCMxfp8) {
      float xs[16], h8[8];
      expand16_contig<Kind::Mxfp8>(x.v, i, pg, n, xs);
#pragma unroll
      for (int e = 0; e < 8; e++) h8[e] = half ? xs[8 + e] : xs[e];
      store8(dst, h8);
    } else {
      uint32_t o[8], h4[4];
      expand16_fp4<CK == kCNvfp4>(x.v, i, pg, n, o);
#pragma unroll
      for (int e = 0; e < 4; e++) h4[e] = half ? o[4 + e] : o[e];
      store8(dst, h4);
    }
  }
}

// Both operands in one launch (KA or KB kCNone: that operand has none):
// warp tasks [0, tasks_a) are A's, the rest B's. alpha_out (or NULL): where
// alpha_eff(ab) and beta 0 go for the GEMM after it (alpha_kernel's work,
// one launch fewer).
template <typename OT, int KA, int KB>
__global__ void __launch_bounds__(256, 4) expand_contig_kernel(const __grid_constant__ ContigOp<OT> a, const __grid_constant__ ContigOp<OT> b, int64_t k, uint64_t tasks_a,
                                                                  uint64_t tasks, Alpha ab, float *alpha_out) {
  pdl_wait();
  if (alpha_out != nullptr && blockIdx.x == 0 && threadIdx.x == 0) alpha_out[0] = alpha_eff(ab), alpha_out[1] = 0.0f;  // alpha_kernel's
  const uint64_t lane = threadIdx.x & 31, stride = (uint64_t)gridDim.x * (blockDim.x / 32);
  for (uint64_t t = (uint64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; t < tasks; t += stride) {
    if constexpr (KA == KB) {  // one copy of the code (the operand's fields read from the kernel's parameters)
      const bool in_a = t < tasks_a;
      contig_task<KA>(in_a ? a : b, k, (in_a ? t : t - tasks_a) * (32 * kSlots) + lane);
    } else if (KA != kCNone && t < tasks_a) {
      if constexpr (KA != kCNone) contig_task<KA>(a, k, t * (32 * kSlots) + lane);
    } else if constexpr (KB != kCNone) {
      contig_task<KB>(b, k, (t - tasks_a) * (32 * kSlots) + lane);
    }
  }
}

// ---------------------------------------------------------------------------
// MXFP8 operands expanded in their physical layout (expand_phys_kernel)
// ---------------------------------------------------------------------------
//
// An MXFP8 operand that expand_contig_kernel does not take (the contraction
// dim runs along its physical rows: the columnwise copy of dY and X in a
// linear layer's wgrad, of W in its dgrad; or the columnwise copy contracted
// along its rows) is expanded element by element in its own layout, E[r, c] =
// code(r, c) · scale, E row-major [R, pad8(C)], and cuBLASLt reads E with the
// transpose that makes it op(X) (a BF16 GEMM takes every transpose pair). So
// no expansion transposes: expand_kernel transposed such operands 16
// elements per thread down a column (H100, a linear layer at M 8192 K 4096
// N 4096: 515 us for the three such operands of one step, against about 85 us
// of DRAM traffic). Units of 8 consecutive elements of a physical row, lanes
// on consecutive units, every lane's loads first (as expand_contig_kernel).
// The values are op_value's, bit for bit: fl32(e8m0 scale · code), stored as
// BF16 (exact) or FP32.
template <typename OT>
struct PhysOp {
  OpView v;
  OT *out;
  uint64_t units;  // R · upr
  int64_t upr;     // units per row: ⌈C / 8⌉ (the output pitch is 8·upr)
  int vec;         // codes 8-byte aligned (data and pitch): one load per unit
  int svec;        // blocks along R, compact j-major scales: a unit's 8 scales are 8 aligned bytes
};

template <typename OT, bool CB>
__device__ __forceinline__ void phys_task(const PhysOp<OT> &x, uint64_t u0) {
  if (u0 >= x.units) return;
  const OpView &v = x.v;
  int64_t r0, q0;  // row and unit within the row of u0
  const int nslots = task_start(x.units, x.upr, u0, &r0, &q0);
  // Whole units of aligned rows (and, blocks along R, compact scales) load
  // here, all slots first; the others (a row's last unit, unaligned rows,
  // swizzled scales) go to op_value afterwards, in a loop not unrolled.
  uint32_t w[kSlots][2], sb[kSlots][CB ? 2 : 1];  // codes; scale bytes (blocks along C: one; along R (CB): one per element)
  uint32_t fast = 0;
  const uint8_t *scales = reinterpret_cast<const uint8_t *>(v.scale);
  const bool vec = x.vec && (!CB || x.svec);
  int64_t r = r0, q = q0;
#pragma unroll
  for (int s = 0; s < kSlots; s++) {
    if (s > 0) {
      q += 32;
      while (q >= x.upr) q -= x.upr, r++;
    }
    if (s >= nslots) break;
    const int64_t c = 8 * q;
    if (!vec || c + 8 > v.C) continue;
    fast |= 1u << s;
    const uint2 t = __ldg(reinterpret_cast<const uint2 *>(v.data + r * v.pitch + c));
    w[s][0] = t.x, w[s][1] = t.y;
    if constexpr (CB) {
      const uint2 b = __ldg(reinterpret_cast<const uint2 *>(scales + (r / 32) * v.s_pad_i + c));  // (c + e, r/32), j-major
      sb[s][0] = b.x, sb[s][1] = b.y;
    } else {
      sb[s][0] = scales[block_scale_index(v, r, c / 32)];  // (r, c/32): the unit lies in one block
    }
  }
#pragma unroll
  for (int s = 0; s < kSlots; s++) {
    if (!(fast >> s & 1u)) continue;
    // Codes two at a time through the FP8x2 -> FP16x2 conversion (exact:
    // E4M3 and E5M2 values are FP16 values), then op_value's FP32 product,
    // rounded to BF16 two at a time (the same RN as one at a time).
    float xs[8];
#pragma unroll
    for (int h = 0; h < 4; h++) {
      const __nv_fp8x2_storage_t pair = (__nv_fp8x2_storage_t)(w[s][h >> 1] >> (16 * (h & 1)));
      const __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2(pair, v.el ? __NV_E5M2 : __NV_E4M3);
      const float2 f = __half22float2(__half2(hr));
#pragma unroll
      for (int j = 0; j < 2; j++) {
        const int e = 2 * h + j;
        const uint32_t b = CB ? (sb[s][CB ? e >> 2 : 0] >> (8 * (e & 3))) & 0xFFu : sb[s][0];
        xs[e] = __fmul_rn(e8m0_decode(b), j ? f.y : f.x);  // op_value's product
      }
    }
    OT *dst = x.out + (u0 + 32 * s) * 8;  // unit u's output: row r, columns 8q .. 8q+7 of pitch 8·upr
    if constexpr (sizeof(OT) == 2) {
      uint32_t o[4];
#pragma unroll
      for (int h = 0; h < 4; h++) {
        const __nv_bfloat162 p2 = __floats2bfloat162_rn(xs[2 * h], xs[2 * h + 1]);
        o[h] = *reinterpret_cast<const uint32_t *>(&p2);
      }
      store8(dst, o);
    } else {
      store8(dst, xs);
    }
  }
  if (fast == (nslots == 32 ? ~0u : (1u << nslots) - 1u)) return;
  r = r0, q = q0;
#pragma unroll 1
  for (int s = 0; s < nslots; s++) {
    if (s > 0) {
      q += 32;
      while (q >= x.upr) q -= x.upr, r++;
    }
    if (fast >> s & 1u) continue;
    float xs[8];
#pragma unroll
    for (int e = 0; e < 8; e++) xs[e] = 8 * q + e < v.C ? op_value(v, r, 8 * q + e) : 0.0f;
    store8(x.out + (u0 + 32 * s) * 8, xs);
  }
}

// One operand per launch; CB: its blocks run along R (the columnwise copy),
// so that each instance holds one scale lookup.
template <typename OT, bool CB>
__global__ void __launch_bounds__(256, 3) expand_phys_kernel(const __grid_constant__ PhysOp<OT> x, uint64_t tasks) {
  pdl_wait();
  const uint64_t lane = threadIdx.x & 31, stride = (uint64_t)gridDim.x * (blockDim.x / 32);
  for (uint64_t t = (uint64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; t < tasks; t += stride)
    phys_task<OT, CB>(x, t * (32 * kSlots) + lane);
}

__device__ __forceinline__ float load_any(const void *p, int dt, int64_t i) {
  if (dt == 0) return reinterpret_cast<const float *>(p)[i];
  if (dt == 1) return __bfloat162float(reinterpret_cast<const __nv_bfloat16 *>(p)[i]);
  return __half2float(reinterpret_cast<const __half *>(p)[i]);
}

__device__ __forceinline__ void store_any(void *p, int dt, int64_t i, float x) {
  if (dt == 0) store_out(reinterpret_cast<float *>(p) + i, x);
  else if (dt == 1) store_out(reinterpret_cast<__nv_bfloat16 *>(p) + i, x);
  else store_out(reinterpret_cast<__half *>(p) + i, x);
}

// x = alpha_eff·s (0 without s); x += beta·c; x += bias[j]; x += d_old;
// D = round(x) (host/gemm_cpu.go cpuEpilogue). alpha_eff is formed here from
// the device factors (no kernel of its own).
__global__ void epilogue_kernel(const float *s, const void *c, int cdt, Alpha ab, const void *bias, int bdt, void *d, int ddt,
                                int accumulate, int64_t m, int64_t n) {
  pdl_wait();
  const int64_t total = m * n, stride = (int64_t)gridDim.x * blockDim.x;
  const float al = s ? alpha_eff(ab) : 0.0f, bt = c ? ab.beta : 0.0f;
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += stride) {
    float x = s ? al * s[idx] : 0.0f;
    if (c) x += bt * load_any(c, cdt, idx);
    if (bias) x += load_any(bias, bdt, idx % n);
    if (accumulate) x += load_any(d, ddt, idx);
    store_any(d, ddt, idx, x);
  }
}

// The plain epilogue, D = round(alpha_eff·s) (epilogue_kernel without C,
// bias or accumulate: the same product and rounding), four elements per
// thread: one 16-byte load of sums and one 16- or 8-byte store. s is 16-byte
// aligned (scratch), d as wide as its store (the caller checks).
__global__ void scale_kernel(const float *s, Alpha ab, void *d, int ddt, int64_t total) {
  pdl_wait();
  const int64_t n4 = total / 4, stride = (int64_t)gridDim.x * blockDim.x;
  const float al = alpha_eff(ab);
  for (int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; q < n4; q += stride) {
    const float4 v = reinterpret_cast<const float4 *>(s)[q];
    const float x[4] = {al * v.x, al * v.y, al * v.z, al * v.w};
    if (ddt == 0) {
      reinterpret_cast<float4 *>(d)[q] = make_float4(x[0], x[1], x[2], x[3]);
    } else {
      uint16_t h[4];
#pragma unroll
      for (int e = 0; e < 4; e++) h[e] = ddt == 1 ? f32_to_bf16_bits(x[e]) : f32_to_f16_bits(x[e]);
      reinterpret_cast<uint2 *>(d)[q] = make_uint2(h[0] | (uint32_t)h[1] << 16, h[2] | (uint32_t)h[3] << 16);
    }
  }
  for (int64_t idx = n4 * 4 + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += stride) store_any(d, ddt, idx, al * s[idx]);
}

// FP8 block scaling at M % 16 != 0 (gemm()): A's codes [M, K] (16-byte
// aligned, K % 128 == 0) and its 1x128 scales [K/128, sp] (sp = pad4(M), the
// format's pitch) copied into zero-padded [Mp, K] and [K/128, Mp], Mp =
// pad16(M), the shape cuBLASLt reads. The padded rows' codes and scales are
// zero: their sums are zero and never read.
__global__ void pad_fp8_block_kernel(const uint8_t *x, const float *sx, int64_t sp, int64_t M, int64_t Mp, int64_t K, uint8_t *px,
                                     float *ps) {
  pdl_wait();
  const int64_t stride = (int64_t)gridDim.x * blockDim.x, t0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t nq = Mp * K / 16, mq = M * K / 16;
  for (int64_t q = t0; q < nq; q += stride)
    reinterpret_cast<uint4 *>(px)[q] = q < mq ? reinterpret_cast<const uint4 *>(x)[q] : make_uint4(0, 0, 0, 0);
  const int64_t ns = K / 128 * Mp;
  for (int64_t i = t0; i < ns; i += stride) {
    const int64_t m = i % Mp;
    ps[i] = m < M ? sx[i / Mp * sp + m] : 0.0f;
  }
}

// ---------------------------------------------------------------------------
// Argument decoding
// ---------------------------------------------------------------------------

int dense_code(DLDataType t) {
  if (dtype_is(t, kDLFloat, 32)) return 0;
  if (dtype_is(t, kDLBfloat, 16)) return 1;
  if (dtype_is(t, kDLFloat, 16)) return 2;
  return -1;
}

bool is_format(const char *f, const char *name) { return strncmp(f, name, QUANT_PLUGIN_FORMAT_LEN) == 0; }

int32_t decode_operand(const quant_plugin_gemm_operand &o, const char *name, OpView *v, quant_plugin_error *err) {
  *v = OpView{};
  v->R = o.rows;
  v->C = o.cols;
  v->trans = o.trans != 0;
  v->colwise = o.direction == QUANT_DIRECTION_COLUMNWISE;
  const quant_plugin_storage &st = o.storage;
  const quant_plugin_tensor *data = find_buffer(st, QUANT_BUFFER_DATA);
  if (data == nullptr) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%s: the operand has no data buffer", name);
  if (data->device_type != kDLCUDA) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%s: data is not on a CUDA device", name);
  v->data = (const uint8_t *)data->data;
  const char *f = o.format;
  auto scale_of = [&](const char *what, const void **out) -> int32_t {
    const quant_plugin_tensor *s = find_buffer(st, QUANT_BUFFER_SCALE_INV);
    if (s == nullptr) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%s: the %s operand has no scale_inv buffer", name, what);
    *out = s->data;
    return QUANT_OK;
  };
  const int64_t R = o.rows, C = o.cols;
  if (is_format(f, "identity") || o.params == nullptr) {
    v->kind = Kind::Dense;
    v->el = dense_code(data->dtype);
    if (v->el < 0)
      return fail(err, QUANT_ERROR_UNSUPPORTED, "%s: dense dtype (code %d, bits %d) not supported (want float32, bfloat16 or float16)", name,
                  data->dtype.code, data->dtype.bits);
    v->pitch = C;
    return QUANT_OK;
  }
  const quant_plugin_params *p = o.params;
  if (is_format(f, "fp8")) {
    v->kind = Kind::Fp8;
    v->el = p->element == QUANT_ELEMENT_E5M2;
    v->transposed = v->colwise;
    v->pitch = v->colwise ? R : C;
    const quant_plugin_tensor *s = find_buffer(st, QUANT_BUFFER_SCALE_INV);
    if (s == nullptr) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%s: the fp8 operand has no scale_inv buffer", name);
    v->factor = (const float *)s->data;
    return QUANT_OK;
  }
  if (is_format(f, "fp8_block")) {
    v->kind = Kind::Fp8Block;
    v->transposed = v->colwise;
    v->pitch = v->colwise ? R : C;
    v->s_two_d = p->block_dims == 2;
    const int64_t pr = v->colwise ? C : R, pc = v->colwise ? R : C;  // physical [pr, pc]
    v->s_stride = pad_to(v->s_two_d ? ceil_div(pc, 128) : pr, 4);
    return scale_of("fp8_block", &v->scale);
  }
  if (is_format(f, "mxfp8") || is_format(f, "mxfp4")) {
    const bool fp4 = is_format(f, "mxfp4");
    v->kind = fp4 ? Kind::Mxfp4 : Kind::Mxfp8;
    v->el = !fp4 && p->element == QUANT_ELEMENT_E5M2;
    v->transposed = fp4 && v->colwise;
    v->pitch = fp4 ? ceil_div(v->colwise ? R : C, 2) : C;
    const int64_t ni = v->colwise ? C : R, nj = ceil_div(v->colwise ? R : C, 32);
    v->s_pad_i = pad_to(ni, 128);
    v->s_pad_j = pad_to(nj, 4);
    v->s_jmajor = !fp4 && v->colwise;
    v->s_swizzled = p->gemm_swizzled_scales != 0;
    return scale_of(f, &v->scale);
  }
  if (is_format(f, "nvfp4")) {
    v->kind = Kind::Nvfp4;
    v->transposed = v->colwise;
    v->pitch = ceil_div(v->colwise ? R : C, 2);
    const int64_t ni = v->colwise ? C : R, nj = ceil_div(v->colwise ? R : C, 16);
    v->s_pad_i = pad_to(ni, 128);
    v->s_pad_j = pad_to(nj, 4);
    v->s_swizzled = p->gemm_swizzled_scales != 0;
    const quant_plugin_tensor *am = find_buffer(st, QUANT_BUFFER_AMAX);
    if (am == nullptr) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%s: the nvfp4 operand has no amax buffer", name);
    v->factor = (const float *)am->data;
    return scale_of("nvfp4", &v->scale);
  }
  return fail(err, QUANT_ERROR_UNSUPPORTED, "%s: the CUDA GEMM does not know format %.32s", name, f);
}

// ---------------------------------------------------------------------------
// cuBLASLt
// ---------------------------------------------------------------------------

const char *lt_status(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case CUBLAS_STATUS_MAPPING_ERROR: return "mapping error";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "execution failed";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "internal error";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported";
    default: return "error";
  }
}

#define LQ_LT(call, what)                                                                                       \
  do {                                                                                                          \
    cublasStatus_t lq_s_ = (call);                                                                              \
    if (lq_s_ != CUBLAS_STATUS_SUCCESS)                                                                         \
      return fail(err, lq_s_ == CUBLAS_STATUS_ALLOC_FAILED ? QUANT_ERROR_OUT_OF_MEMORY : QUANT_ERROR_PLUGIN,      \
                  "cuBLASLt %s: %s (status %d)", what, lt_status(lq_s_), (int)lq_s_);                          \
  } while (0)

constexpr size_t kWorkspace = 32u << 20;
// The workspace the heuristic may plan for on the FP8 tensor-core paths: 1 MiB,
// the cap torch's FP8 GEMMs give it (CUBLASLT_WORKSPACE_SIZE's default). With
// 32 MiB it picked, for M16 N8192 K8192 1x128 x 128x128 on the H200, a split-K
// algorithm (two K halves and a reduction kernel) at 0.030 ms over the
// unsplit one it picks under 1 MiB, 0.027 ms. With this cap every FP8 pair
// at bench/gpu_gemm.py's four shapes runs the kernel torch runs (its kernel
// table; bench/RESULTS.md, "the FP8 heuristic's workspace cap").
constexpr size_t kFp8HeuristicWorkspace = 1u << 20;

// One cuBLASLt matmul in column-major terms: D'[m', n'] = alpha·op(A')·op(B')
// + beta·C', where A' is op(B) of the row-major problem and B' op(A).
struct LtCall {
  int64_t m, n, k;              // m' = N, n' = M, k' = K
  cudaDataType_t ta, tb, tc, td;
  cublasOperation_t opa, opb;
  const void *a, *b;
  int64_t lda, ldb;
  const void *c;                // may equal d
  void *d;
  int64_t ldd;
  float alpha, beta;            // host scalars
  const float *alpha_beta;      // or alpha and beta in device memory (CUBLASLT_POINTER_MODE_DEVICE)
  bool use_c;
  const float *a_scale, *b_scale;  // FP8 scale pointers (device), or NULL
  int32_t a_scale_mode, b_scale_mode;  // cublasLtMatmulMatrixScale_t (0: per-tensor scalar)
  cublasComputeType_t compute;
  const void *bias;               // [m'] added in cuBLASLt's epilogue (CUBLASLT_EPILOGUE_BIAS), or NULL
  cudaDataType_t bias_type;
};

// The largest power of two (at most 256) dividing the address: what the
// heuristic is told of each matrix's alignment (its default assumes 256).
uint32_t align_of(const void *p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 1 && (a & (al - 1)) != 0) al >>= 1;
  return al;
}

// Everything the descriptor, the layouts and the heuristic's answer depend
// on (not the pointers, alpha or beta): the plan cache's key. Plain integers
// only, zeroed first, so that memcmp orders it.
struct LtKey {
  int64_t m, n, k, lda, ldb, ldd;
  int32_t dev, ta, tb, tc, td, opa, opb, compute;
  int32_t a_scale_mode, b_scale_mode, a_scaled, b_scaled, use_c, dev_alpha;
  int32_t bias_type;  // 0: no bias epilogue; else the bias's cudaDataType_t + 1
  uint32_t align_a, align_b, align_c, align_d;
  bool operator<(const LtKey &o) const { return memcmp(this, &o, sizeof *this) < 0; }
};

LtKey key_of(const LtCall &c, int dev) {
  LtKey k;
  memset(&k, 0, sizeof k);
  k.m = c.m, k.n = c.n, k.k = c.k, k.lda = c.lda, k.ldb = c.ldb, k.ldd = c.ldd;
  k.dev = dev, k.ta = c.ta, k.tb = c.tb, k.tc = c.tc, k.td = c.td, k.opa = c.opa, k.opb = c.opb, k.compute = c.compute;
  k.a_scale_mode = c.a_scale_mode, k.b_scale_mode = c.b_scale_mode;
  k.a_scaled = c.a_scale != nullptr, k.b_scaled = c.b_scale != nullptr, k.use_c = c.use_c, k.dev_alpha = c.alpha_beta != nullptr;
  k.bias_type = c.bias != nullptr ? (int32_t)c.bias_type + 1 : 0;
  k.align_a = align_of(c.a), k.align_b = align_of(c.b), k.align_c = align_of(c.use_c ? c.c : c.d), k.align_d = align_of(c.d);
  return k;
}

// A matmul made once per key: the descriptor, the four layouts and the
// heuristic's algorithm (or that there is none). The layouts and the
// algorithm are read-only once made and shared by every thread; the
// descriptor carries the FP8 scale pointers, which change per call, so a call
// that sets them holds mu until its cublasLtMatmul has been enqueued.
struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr, ld = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;  // bytes the algorithm needs
  bool found = false;    // false: cuBLASLt has no algorithm for the key
  uint64_t used = 0;     // LRU tick (under g_mu)
  std::mutex mu;
  ~LtPlan() {
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

// Stream-ordered scratch freed when the call returns (the frees are ordered
// after the work on the stream).
// Slices of the host's workspace come first (a lent workspace: the host's
// allocator holds every buffer, e.g. a CUDA graph capture's pool); what is
// left of it after them goes to cuBLASLt (rest).
struct Scratch {
  cudaStream_t s;
  void *p[4] = {nullptr, nullptr, nullptr, nullptr};
  int n = 0;
  char *lent;
  size_t lent_bytes, used = 0;
  Scratch(cudaStream_t st, void *ws, size_t ws_bytes) : s(st), lent(static_cast<char *>(ws)), lent_bytes(ws_bytes) {}
  ~Scratch() {
    for (int i = 0; i < n; i++) cudaFreeAsync(p[i], s);
  }
  int32_t get(size_t bytes, void **out, const char *what, quant_plugin_error *err) {
    const size_t need = (bytes + 255) / 256 * 256;
    if (lent != nullptr && (reinterpret_cast<uintptr_t>(lent) & 255) == 0 && lent_bytes - used >= need + kWorkspace) {
      *out = lent + used;
      used += need;
      return QUANT_OK;
    }
    LQ_CUDA(pool_malloc_async(out, bytes > 0 ? bytes : 16, s), "allocating %zu bytes for %s", bytes, what);
    p[n++] = *out;
    return QUANT_OK;
  }
  void *rest() const { return lent != nullptr ? lent + used : nullptr; }
  size_t rest_bytes() const { return lent != nullptr ? lent_bytes - used : 0; }
};

// Plans kept at most (least recently used dropped first; a plan in use by
// another thread lives on through its shared_ptr until that call returns).
constexpr size_t kMaxPlans = 1024;

struct DeviceState {
  cublasLtHandle_t handle = nullptr;
  std::map<cudaStream_t, void *> workspaces;
};

std::mutex g_mu;  // guards g_devices, g_plans and g_tick
std::map<int, DeviceState> g_devices;
std::map<LtKey, std::shared_ptr<LtPlan>> g_plans;
uint64_t g_tick = 0;

// The device's handle and this stream's workspace, made on first use (not
// when the host lends one: own_ws false; *ws is then NULL; nor where may_alloc
// is false and the stream has none yet: *ws NULL too), and the key's plan if
// there is one yet.
int32_t lt_state(int dev, cudaStream_t s, const LtKey &key, bool own_ws, bool may_alloc, cublasLtHandle_t *h, void **ws,
                 std::shared_ptr<LtPlan> *plan, quant_plugin_error *err) {
  std::lock_guard<std::mutex> lock(g_mu);
  DeviceState &d = g_devices[dev];
  if (d.handle == nullptr) LQ_LT(cublasLtCreate(&d.handle), "handle creation");
  *h = d.handle;
  *ws = nullptr;
  if (own_ws) {
    auto it = d.workspaces.find(s);
    if (it == d.workspaces.end() && may_alloc) {
      void *p = nullptr;
      LQ_CUDA(cudaMalloc(&p, kWorkspace), "allocating the cuBLASLt workspace (%zu bytes) on cuda:%d", kWorkspace, dev);
      it = d.workspaces.emplace(s, p).first;
    }
    if (it != d.workspaces.end()) *ws = it->second;
  }
  auto pi = g_plans.find(key);
  if (pi != g_plans.end()) {
    pi->second->used = ++g_tick;
    *plan = pi->second;
  }
  return QUANT_OK;
}

// Sets the per-call descriptor attributes: the FP8 scale pointers and the
// bias pointer.
int32_t lt_set_pointers(cublasLtMatmulDesc_t op, const LtCall &c, quant_plugin_error *err) {
  if (c.a_scale) LQ_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &c.a_scale, sizeof c.a_scale), "A scale");
  if (c.b_scale) LQ_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &c.b_scale, sizeof c.b_scale), "B scale");
  if (c.bias) LQ_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &c.bias, sizeof c.bias), "bias");
  return QUANT_OK;
}

// FP8 block scaling with 128x128 weight blocks (A' = the weight): cuBLASLt
// offers one algorithm, a tile of 128 weight rows by 128 rows of the
// activation, so a decode step's GEMM has one tile per 128 weight rows, 32 at
// N = 4096 on a GPU of 132 SMs, and the heuristic seldom splits K (at M16
// N2048 K8192 it split in 3). Where the tiles cover at most a quarter of the
// SMs, K is split so that the tiles times the split cover about half of
// them, each part at least 8 blocks of 128 (H200, CUDA graphs,
// bench/lt_block_probe.cu, bench/RESULTS.md "fp8_block's 128x128 weights at
// small N": M16 N4096 K4096 13.4 → 10.3 µs at 2, 12.5 at 4; M16 N2048 K8192
// 12.9 at the heuristic's 3 → 10.2 at 4, 12.4 at 8; M64 N4096 K4096 13.5 →
// 11.4 at 2; from N8192 on, every split was slower). The partial sums are
// reduced in FP32 (the compute type), so the FP8 path's bound (each 128-block
// promoted, FP32 sums) holds as before. The heuristic's algorithm stays where
// cuBLASLt refuses the split (cublasLtMatmulAlgoCheck).
void split_block_weights(const LtCall &c, const LtKey &key, cublasLtHandle_t h, LtPlan *p) {
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, key.dev) != cudaSuccess || sms <= 0) {
    cudaGetLastError();
    return;
  }
  const int64_t tiles = ceil_div(c.m, (int64_t)128) * ceil_div(c.n, (int64_t)128);
  int64_t parts = (sms / 2) / tiles;
  if (parts > c.k / 1024) parts = c.k / 1024;
  if (parts < 2) return;
  cublasLtMatmulAlgo_t a = p->algo;
  const int32_t sk = (int32_t)parts;
  const uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  if (cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &sk, sizeof sk) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof scheme) != CUBLAS_STATUS_SUCCESS)
    return;
  cublasLtMatmulHeuristicResult_t r{};
  if (cublasLtMatmulAlgoCheck(h, p->op, p->la, p->lb, p->lc, p->ld, &a, &r) != CUBLAS_STATUS_SUCCESS || r.workspaceSize > kWorkspace) return;
  p->algo = a;
  p->workspace = r.workspaceSize;
}

// Makes the plan of c (a cache miss): descriptor, layouts, heuristic.
int32_t lt_plan(const LtCall &c, const LtKey &key, cublasLtHandle_t h, LtPlan *p, quant_plugin_error *err) {
  LQ_LT(cublasLtMatmulDescCreate(&p->op, c.compute, CUDA_R_32F), "matmul descriptor");
  LQ_LT(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &c.opa, sizeof c.opa), "transa");
  LQ_LT(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &c.opb, sizeof c.opb), "transb");
  if (c.a_scale_mode) LQ_LT(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &c.a_scale_mode, sizeof c.a_scale_mode), "A scale mode");
  if (c.b_scale_mode) LQ_LT(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &c.b_scale_mode, sizeof c.b_scale_mode), "B scale mode");
  if (c.bias) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    LQ_LT(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), "epilogue");
    LQ_LT(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &c.bias_type, sizeof c.bias_type), "bias type");
  }
  LQ_TRY(lt_set_pointers(p->op, c, err));
  if (c.alpha_beta) {
    const cublasLtPointerMode_t pm = CUBLASLT_POINTER_MODE_DEVICE;
    LQ_LT(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof pm), "pointer mode");
  }
  // Stored (column-major) shapes: A' is [m', k'] after opa.
  const uint64_t ar = c.opa == CUBLAS_OP_N ? c.m : c.k, ac = c.opa == CUBLAS_OP_N ? c.k : c.m;
  const uint64_t br = c.opb == CUBLAS_OP_N ? c.k : c.n, bc = c.opb == CUBLAS_OP_N ? c.n : c.k;
  LQ_LT(cublasLtMatrixLayoutCreate(&p->la, c.ta, ar, ac, c.lda), "A layout");
  LQ_LT(cublasLtMatrixLayoutCreate(&p->lb, c.tb, br, bc, c.ldb), "B layout");
  LQ_LT(cublasLtMatrixLayoutCreate(&p->lc, c.tc, c.m, c.n, c.ldd), "C layout");
  LQ_LT(cublasLtMatrixLayoutCreate(&p->ld, c.td, c.m, c.n, c.ldd), "D layout");
  cublasLtMatmulPreference_t pref = nullptr;
  LQ_LT(cublasLtMatmulPreferenceCreate(&pref), "preference");
  auto body = [&]() -> int32_t {
    const bool fp8 = c.ta == CUDA_R_8F_E4M3 || c.ta == CUDA_R_8F_E5M2;
    size_t wsz = fp8 ? kFp8HeuristicWorkspace : kWorkspace;
    LQ_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsz, sizeof wsz), "workspace size");
    // Split-K partial sums only in the compute type (FP32): a reduction in
    // D's type or in place in D rounds partial sums to BF16/FP16 (H100 run 3:
    // BF16 accumulate into D was off by more than one rounding).
    uint32_t red = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    LQ_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &red, sizeof red), "reduction schemes");
    // The pointers' alignment (part of the key): an algorithm that needs
    // more than a later call's pointers have is never picked.
    const uint32_t al[4] = {key.align_a, key.align_b, key.align_c, key.align_d};
    const cublasLtMatmulPreferenceAttributes_t at[4] = {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; i++) LQ_LT(cublasLtMatmulPreferenceSetAttribute(pref, at[i], &al[i], sizeof al[i]), "alignment");
    cublasLtMatmulHeuristicResult_t res{};
    int found = 0;
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(h, p->op, p->la, p->lb, p->lc, p->ld, pref, 1, &res, &found);
    if (hs == CUBLAS_STATUS_NOT_SUPPORTED) found = 0;
    else LQ_LT(hs, "algorithm search");
    p->found = found > 0;
    if (p->found) {
      p->algo = res.algo;
      p->workspace = res.workspaceSize;
      if (c.a_scale_mode == CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F) split_block_weights(c, key, h, p);
    }
    return QUANT_OK;
  };
  const int32_t st = body();
  cublasLtMatmulPreferenceDestroy(pref);
  return st;
}

// The driver's cuCtxGetCurrent, looked up once (no link to libcuda); null
// where the lookup fails.
using CtxGetCurrentFn = int (*)(void **);
CtxGetCurrentFn ctx_get_current() {
  static const CtxGetCurrentFn fn = [] {
    void *f = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &f, 12000, cudaEnableDefault, &q) != cudaSuccess || q != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return (CtxGetCurrentFn) nullptr;
    }
    return reinterpret_cast<CtxGetCurrentFn>(f);
  }();
  return fn;
}

// Makes cuda:dev's primary context current on this thread where no context
// is (a context the caller made current is kept). cudaSetDevice, not a
// runtime call that merely needs a context: cudaFree(NULL), which did this
// before, is refused while any stream captures a CUDA graph in the global
// mode (torch.cuda.graph's default: the capture was invalidated,
// bench/RESULTS.md), while cudaSetDevice neither synchronises nor touches a
// stream. A thread inside a capture has its context current and never gets
// here.
int32_t make_context_current(int dev, quant_plugin_error *err) {
  void *ctx = nullptr;
  const CtxGetCurrentFn get = ctx_get_current();
  if (get != nullptr && get(&ctx) == 0 && ctx != nullptr) return QUANT_OK;
  LQ_CUDA(cudaSetDevice(dev), "making cuda:%d's context current", dev);
  return QUANT_OK;
}

// Runs c on stream s: the cached plan of its key (made on a miss), then only
// the per-call scale pointers and cublasLtMatmul. The cuBLASLt workspace is
// the host's (host_ws, host_ws_bytes) where it is large enough for the
// algorithm, else the device's own for this stream.
int32_t lt_run(const LtCall &c, int dev, cudaStream_t s, void *host_ws, size_t host_ws_bytes, quant_plugin_error *err) {
  const LtKey key = key_of(c, dev);
  cublasLtHandle_t h;
  void *ws;
  std::shared_ptr<LtPlan> plan;
  // A host workspace of kWorkspace bytes or more serves every algorithm the
  // heuristic may pick (its preference caps them at kWorkspace).
  const bool lent = host_ws != nullptr && host_ws_bytes >= kWorkspace && (reinterpret_cast<uintptr_t>(host_ws) & 255) == 0;
  // Inside a stream capture (a CUDA graph) a stream without its workspace
  // yet must not cudaMalloc one: under cudaStreamCaptureModeGlobal that
  // invalidates the capture (cudaErrorStreamCaptureInvalidated at its end).
  // The matmul then takes what its algorithm needs from the plugin's pool in
  // stream order (an allocation node of the graph), freed after it.
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  if (!lent) LQ_CUDA(cudaStreamIsCapturing(s, &cap), "querying whether the stream is being captured");
  LQ_TRY(lt_state(dev, s, key, !lent, cap == cudaStreamCaptureStatusNone, &h, &ws, &plan, err));
  if (!plan) {
    auto fresh = std::make_shared<LtPlan>();
    LQ_TRY(lt_plan(c, key, h, fresh.get(), err));
    std::lock_guard<std::mutex> lock(g_mu);
    auto ins = g_plans.emplace(key, fresh);  // another thread may have made it meanwhile: use the first
    plan = ins.first->second;
    plan->used = ++g_tick;
    if (g_plans.size() > kMaxPlans) {
      auto old = g_plans.begin();
      for (auto it = g_plans.begin(); it != g_plans.end(); ++it)
        if (it->second->used < old->second->used) old = it;
      g_plans.erase(old);
    }
  }
  if (!plan->found)
    return fail(err, QUANT_ERROR_UNSUPPORTED, "cuBLASLt has no algorithm for this GEMM (m'=%lld n'=%lld k'=%lld)", (long long)c.m,
                (long long)c.n, (long long)c.k);
  size_t wsz = kWorkspace;
  Scratch own(s, nullptr, 0);  // a capture's workspace (above), freed on return
  if (lent) {
    ws = host_ws;
    wsz = host_ws_bytes;
  } else if (ws == nullptr) {
    wsz = plan->workspace;
    if (wsz > 0) LQ_TRY(own.get(wsz, &ws, "the cuBLASLt workspace inside a stream capture", err));
  }
  const void *cptr = c.use_c ? c.c : c.d;
  const void *alpha = c.alpha_beta ? (const void *)c.alpha_beta : &c.alpha, *beta = c.alpha_beta ? (const void *)(c.alpha_beta + 1) : &c.beta;
  // A CUDA error already pending on this thread, taken before the matmul,
  // whose launch check would otherwise report it as "execution failed".
  const cudaError_t before = cudaPeekAtLastError();
  // The scale and bias pointers live in the shared plan's descriptor: held
  // under its lock from setting them through the matmul that reads them.
  std::unique_lock<std::mutex> lock(plan->mu, std::defer_lock);
  if (c.a_scale || c.b_scale || c.bias) {
    lock.lock();
    LQ_TRY(lt_set_pointers(plan->op, c, err));
  }
  const cublasStatus_t st =
      cublasLtMatmul(h, plan->op, alpha, c.a, plan->la, c.b, plan->lb, beta, cptr, plan->lc, c.d, plan->ld, &plan->algo, ws, wsz, s);
  if (st == CUBLAS_STATUS_EXECUTION_FAILED) {
    const cudaError_t e = cudaGetLastError();
    return fail(err, QUANT_ERROR_PLUGIN, "cuBLASLt matmul: execution failed (status 13; CUDA: %s; pending before the call: %s; algorithm workspace %zu of %zu bytes)",
                cudaGetErrorName(e), cudaGetErrorName(before), plan->workspace, wsz);
  }
  LQ_LT(st, "matmul");
  return QUANT_OK;
}

cudaDataType_t cuda_type(int code) { return code == 0 ? CUDA_R_32F : code == 1 ? CUDA_R_16BF : CUDA_R_16F; }


// The fused Hopper kernel's operand (cuda/gemm_fused.cu), if v can be one: MX
// (E8M0 per 32) or NVFP4 codes, read K-major (op(A) [M, K] or op(B)ᵀ [N, K]
// with K contiguous: MXFP8 rowwise, MXFP4/NVFP4 either direction), scales
// one row per operand row (compact or GEMM-swizzled).
bool fused_operand(const OpView &v, bool is_b, int64_t rows, qfused::Operand *o) {
  if (v.kind != Kind::Mxfp8 && v.kind != Kind::Mxfp4 && v.kind != Kind::Nvfp4) return false;
  const bool kmajor = is_b ? v.trans != v.transposed : v.trans == v.transposed;
  if (!kmajor || (v.s_jmajor && !v.s_swizzled)) return false;
  o->data = v.data;
  o->scale = reinterpret_cast<const uint8_t *>(v.scale);
  o->rows = rows;
  o->ld = v.pitch;
  o->scale_stride = v.s_pad_j;
  o->swizzled = v.s_swizzled;
  o->elem = v.kind == Kind::Mxfp8 ? (v.el ? qfused::kE5M2 : qfused::kE4M3) : qfused::kE2M1;
  o->s16 = v.kind == Kind::Nvfp4;
  return true;
}

// Where the fused kernel is faster than expanding to BF16 and cuBLASLt
// (H100, N = K = 8192, bench/RESULTS.md "Fused Hopper GEMM"): the expansion
// of the large operand dominates when the other is small. MX: M = 16..256
// fused 0.07-0.21 ms vs 0.32-0.44 ms; at 4096³ and up the BF16 path wins
// 3.5x (the per-32 promotion keeps the FP32 pipes, not the tensor cores,
// busy). NVFP4 (two wgmmas and promotions per 32, two stages of shared
// memory at 128×128): fused wins at M ≤ 32 (0.10-0.19 ms vs 0.34), loses at
// M = 64 (0.37 vs 0.34) and M = 128 (0.54 vs 0.37). At ≤ 32 rows the decode
// kernel runs (cuda/gemm_fused.cu): M16, BF16 path 0.12-0.15 ms, decode
// kernel 0.038-0.050 ms (bench/RESULTS.md "the decode kernel"); since
// 2026-11-30 up to 64 rows (the MX pairs at 33..64 rows: 2.2-5.3x the tile
// kernel's speed on an H200, bench/RESULTS.md "33..64 rows of A").
// On an H200 the BF16 path has since become faster than the tile kernel
// above 64 rows (N = K = 8192, CUDA graphs: M128 MXFP8 0.099 ms against
// 0.213, MXFP4 0.092 against 0.229; M64 in the decode kernel 0.051 and
// 0.072 against the BF16 path's 0.097 and 0.090; NVFP4 at M64 0.066 ms in
// the decode kernel, `fused_check shapes`, against the BF16 path's 0.092;
// bench/RESULTS.md "33..64 rows of A", calls 10-11). So the fused kernels
// run by default where the decode kernel takes the GEMM: at most 64 rows of
// one operand (checked on the H200: bench/RESULTS.md "the fused kernels by
// default at 64 rows"; at M 1-64, N 256-4096, K 4096 and 8192 the fused
// kernels are 1.01-4.16x the BF16 path's speed, and with the operands
// swapped 0.99-1.50x: "where the fused kernels lose to the BF16
// expansion"). Where the decode kernels do not take the GEMM (K % 32 != 0,
// unaligned rows) only the tile kernel on FP8 codes by TMA does, against a
// large operand of 8192 rows or more, or 4096 or more against at most 32
// (qfused::beats_expansion; bench/RESULTS.md "K not a multiple of 32",
// call 9, and "the tile kernel by TMA only against large operands").
#define FUSED_WHERE "min(M,N) <= 64"
bool fused_faster(int64_t M, int64_t N) {
  const int64_t small = M < N ? M : N;
  return small <= 64;
}

// Whether the fused kernels take this GEMM by default (no exact flag): a pair
// they cover (MX × MX, NVFP4 × NVFP4; NVFP4 × MX in the decode kernel only)
// on sm_90, at shapes where they beat the BF16 path (bench/RESULTS.md,
// "Fused Hopper GEMM", "the decode kernel").
bool fused_pick(const OpView &va, const OpView &vb, int64_t M, int64_t N, int64_t K, int dev, qfused::Params *p) {
  const bool nva = va.kind == Kind::Nvfp4, nvb = vb.kind == Kind::Nvfp4;
  if (!fused_operand(va, false, M, &p->a) || !fused_operand(vb, true, N, &p->b)) return false;
  if (!fused_faster(M, N)) return false;
  if (M > 65535 * 64 || N > 65535 * 64) return false;  // the kernel's grid rows (qfused::gemm refuses more)
  if (!qfused::device_ok(dev)) return false;
  p->M = M, p->N = N, p->K = K;
  p->sb16 = nva && nvb;
  return qfused::beats_expansion(*p);  // the decode kernels, or the tile kernel on FP8 codes by TMA
}

// Whether the expansion of op(X) (A) or op(X)ᵀ (B) reads X's physical rows:
// op row i, contraction index p is physical (i, p).
int contiguous(const OpView &v, bool is_b) {
  if (v.kind == Kind::Dense) return 0;
  const bool t = is_b ? !v.trans : v.trans;  // logical (r, c) = t ? (p, i) : (i, p)
  return t == (v.transposed != 0);
}

unsigned grid_for(int64_t n) {
  int64_t b = ceil_div(n > 0 ? n : 1, 256);
  if (b > grid_cap()) b = grid_cap();
  return (unsigned)b;
}

// Blocks of 256 threads of kernel kern resident on the whole GPU at once
// (grid_cap() allows 8 per SM); 4 per SM where the occupancy query fails.
template <typename Kern>
int resident_blocks(Kern kern) {
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, 256, 0) != cudaSuccess || per_sm <= 0) {
    cudaGetLastError();
    per_sm = 4;
  }
  return per_sm * (grid_cap() / 8);
}

// The expansion's grid: one block of 256 threads per 256 groups, at most as
// many as are resident at once (a grid-stride loop does the rest, so no
// block waits for a second wave).
template <typename OT>
unsigned expand_grid(int64_t groups) {
  static const int resident = resident_blocks(expand_kernel<OT>);
  int64_t b = ceil_div(groups > 0 ? groups : 1, 256);
  if (b > resident) b = resident;
  return (unsigned)b;
}

// The kind of expand_contig_kernel that expands op(X) (A) or op(X)ᵀ (B), or
// kCNone (expand_kernel's): X is an MX or NVFP4 operand read along its
// physical rows, whose block scales run along them (not MXFP8's columnwise
// copy, [R, C] with blocks along R: contracted over C it takes op_value; the
// host never hands it so).
int contig_kind(const OpView &v, bool is_b) {
  if (!contiguous(v, is_b) || (v.kind == Kind::Mxfp8 && v.colwise)) return kCNone;
  switch (v.kind) {
    case Kind::Mxfp8: return kCMxfp8;
    case Kind::Mxfp4: return kCMxfp4;
    case Kind::Nvfp4: return kCNvfp4;
    default: return kCNone;
  }
}

// ld: the output rows' pitch, pad16(k) (expand_contig_kernel's unit numbering).
template <typename OT>
ContigOp<OT> contig_op(const OpView &v, int ck, int64_t rows, int64_t k, int64_t ld, OT *out) {
  ContigOp<OT> x{v, out, 0, 1, 0};
  if (ck == kCNone || rows == 0 || k == 0) return x;
  x.upr = ld / 8;
  x.units = (uint64_t)rows * (uint64_t)x.upr;
  const int al = ck == kCMxfp8 ? 8 : 4;  // bytes of one unit's codes
  x.vec = (reinterpret_cast<uintptr_t>(v.data) % al) == 0 && v.pitch % al == 0;
  return x;
}

// What every launch of expand_contig_kernel gets besides its operands: K,
// and where alpha_eff and beta 0 go for cuBLASLt's device pointer mode (or
// NULL: no device alpha, or alpha_kernel writes it).
struct ContigCall {
  int64_t k;
  Alpha ab;
  float *alpha_out;
};

// One launch of expand_contig_kernel<OT, KA, KB>: as many blocks of 256
// threads (8 warp tasks each) as there are tasks, at most as many as are
// resident at once (a grid-stride loop does the rest).
template <typename OT, int KA, int KB>
int32_t launch_contig(const ContigOp<OT> &a, const ContigOp<OT> &b, const ContigCall &c, cudaStream_t s, quant_plugin_error *err) {
  static const int resident = resident_blocks(expand_contig_kernel<OT, KA, KB>);
  constexpr uint64_t per_task = 32 * kSlots;
  const uint64_t ta = (a.units + per_task - 1) / per_task, tasks = ta + (b.units + per_task - 1) / per_task;
  uint64_t blocks = (tasks + 7) / 8;
  if (blocks > (uint64_t)resident) blocks = resident;
  if (blocks == 0) blocks = 1;  // alpha_out, if any
  launch_kernel(expand_contig_kernel<OT, KA, KB>, (unsigned)blocks, 256, 0, s, a, b, c.k, ta, tasks, c.ab, c.alpha_out);
  LQ_LAUNCHED("expand kernel launch");
  return QUANT_OK;
}

template <typename OT, int KA>
int32_t launch_contig_b(int kb, const ContigOp<OT> &a, const ContigOp<OT> &b, const ContigCall &c, cudaStream_t s, quant_plugin_error *err) {
  if constexpr (sizeof(OT) == 4 && KA != kCNone) {
    return launch_contig<OT, KA, kCNone>(a, b, c, s, err);  // FP32: kb is kCNone (expand)
  } else {
    switch (kb) {
      case kCMxfp8: return launch_contig<OT, KA, kCMxfp8>(a, b, c, s, err);
      case kCMxfp4: return launch_contig<OT, KA, kCMxfp4>(a, b, c, s, err);
      case kCNvfp4: return launch_contig<OT, KA, kCNvfp4>(a, b, c, s, err);
      default:
        if constexpr (KA != kCNone) return launch_contig<OT, KA, kCNone>(a, b, c, s, err);
        return QUANT_OK;
    }
  }
}

// An MXFP8 operand for expand_phys_kernel (on: it takes that path), its
// output E at out, [R, pad8(C)].
template <typename OT>
PhysOp<OT> phys_op(const OpView &v, bool on, OT *out) {
  PhysOp<OT> x{v, out, 0, 1, 0, 0};
  if (!on || v.R == 0 || v.C == 0) return x;
  x.upr = ceil_div(v.C, 8);
  x.units = (uint64_t)v.R * (uint64_t)x.upr;
  x.vec = reinterpret_cast<uintptr_t>(v.data) % 8 == 0 && v.pitch % 8 == 0;
  x.svec = v.colwise && v.s_jmajor && !v.s_swizzled && reinterpret_cast<uintptr_t>(v.scale) % 8 == 0 && v.s_pad_i % 8 == 0;
  return x;
}

template <typename OT, bool CB>
int32_t launch_phys1(const PhysOp<OT> &x, cudaStream_t s, quant_plugin_error *err) {
  static const int resident = resident_blocks(expand_phys_kernel<OT, CB>);
  constexpr uint64_t per_task = 32 * kSlots;
  const uint64_t tasks = (x.units + per_task - 1) / per_task;
  if (tasks == 0) return QUANT_OK;
  uint64_t blocks = (tasks + 7) / 8;
  if (blocks > (uint64_t)resident) blocks = resident;
  launch_kernel(expand_phys_kernel<OT, CB>, (unsigned)blocks, 256, 0, s, x, tasks);
  LQ_LAUNCHED("expand kernel launch");
  return QUANT_OK;
}

// Both operands' physical expansions (an operand with no units has none).
template <typename OT>
int32_t launch_phys(const PhysOp<OT> &a, const PhysOp<OT> &b, cudaStream_t s, quant_plugin_error *err) {
  for (const PhysOp<OT> *x : {&a, &b}) {
    if (x->units == 0) continue;
    if (x->v.colwise) LQ_TRY((launch_phys1<OT, true>(*x, s, err)));
    else LQ_TRY((launch_phys1<OT, false>(*x, s, err)));
  }
  return QUANT_OK;
}

// The expansion of op(A) (ka: its contig kind; ga rows through the generic
// kernel) and op(B)ᵀ (kb, gb) into rows of pitch ld (pad16(K)) at oa and ob.
// BF16 output: both contiguous operands in one launch; FP32 output (the
// rarer pairs with FP32/FP16 dense or FP8 block operands) one launch per
// operand, so that only six FP32 instances are built. *alpha_done: c's
// alpha_out was written (by a contiguous launch).
template <typename OT>
int32_t expand(const OpView &va, const OpView &vb, int ka, int kb, int64_t ga, int64_t gb, int64_t M, int64_t N, int64_t ld, OT *oa,
               OT *ob, const ContigCall &c, bool *alpha_done, cudaStream_t s, quant_plugin_error *err) {
  const int64_t K = c.k;
  if (ga > 0 || gb > 0) {
    const int64_t groups = (ga + gb) * ceil_div(K, 16);
    launch_kernel(expand_kernel<OT>, expand_grid<OT>(groups), 256, 0, s, expansion(va, ga, ld, false, oa), expansion(vb, gb, ld, true, ob), K);
    LQ_LAUNCHED("expand kernel launch");
  }
  if (ka == kCNone && kb == kCNone) return QUANT_OK;
  *alpha_done = c.alpha_out != nullptr;
  const ContigOp<OT> a = contig_op(va, ka, M, K, ld, oa), b = contig_op(vb, kb, N, K, ld, ob);  // kCNone: no units
  if constexpr (sizeof(OT) == 4) {
    if (ka != kCNone && kb != kCNone) {
      LQ_TRY(expand(va, vb, ka, kCNone, 0, 0, M, N, ld, oa, ob, c, alpha_done, s, err));
      return expand(va, vb, kCNone, kb, 0, 0, M, N, ld, oa, ob, c, alpha_done, s, err);
    }
  }
  switch (ka) {
    case kCMxfp8: return launch_contig_b<OT, kCMxfp8>(kb, a, b, c, s, err);
    case kCMxfp4: return launch_contig_b<OT, kCMxfp4>(kb, a, b, c, s, err);
    case kCNvfp4: return launch_contig_b<OT, kCNvfp4>(kb, a, b, c, s, err);
    default: return launch_contig_b<OT, kCNone>(kb, a, b, c, s, err);
  }
}

// allow_native: try cuBLASLt's FP8 paths (per-tensor and block scaling; a
// retry without them follows where cuBLASLt has no algorithm for the GEMM).
int32_t gemm(const quant_plugin_gemm_args *a, quant_plugin_error *err, bool allow_native = true) {
  const int64_t M = a->m, N = a->n, K = a->k;
  if (M < 0 || N < 0 || K < 0) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "m, n, k: negative");
  LQ_TRY(check_device(a->d, "d", err));
  const int ddt = dense_code(a->d.dtype);
  if (ddt < 0) return fail(err, QUANT_ERROR_UNSUPPORTED, "d: dtype not supported (want float32, bfloat16 or float16)");
  if (numel(a->d) != M * N) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "d: %lld elements, want m*n = %lld", (long long)numel(a->d), (long long)(M * N));
  const bool has_c = a->c.data != nullptr, has_bias = a->bias.data != nullptr;
  const int cdt = has_c ? dense_code(a->c.dtype) : -1, bdt = has_bias ? dense_code(a->bias.dtype) : -1;
  if (has_c && (cdt < 0 || numel(a->c) != M * N)) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "c: want [m, n] float32, bfloat16 or float16");
  if (has_bias && (bdt < 0 || numel(a->bias) != N)) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "bias: want [n] float32, bfloat16 or float16");
  if (has_c) LQ_TRY(check_device(a->c, "c", err));
  if (has_bias) LQ_TRY(check_device(a->bias, "bias", err));
  // The host's workspace (quant_plugin_gemm_args.workspace, uint8 bytes on
  // D's device), lent to cuBLASLt where the algorithm fits in it.
  void *host_ws = nullptr;
  size_t host_ws_bytes = 0;
  if (a->workspace.data != nullptr) {
    LQ_TRY(check_device(a->workspace, "workspace", err));
    host_ws = a->workspace.data;
    host_ws_bytes = (size_t)numel(a->workspace) * ((a->workspace.dtype.bits * a->workspace.dtype.lanes + 7) / 8);
  }
  OpView va, vb;
  LQ_TRY(decode_operand(a->a, "a", &va, err));
  LQ_TRY(decode_operand(a->b, "b", &vb, err));
  if ((va.trans ? va.R : va.C) != K || (va.trans ? va.C : va.R) != M || (vb.trans ? vb.C : vb.R) != K || (vb.trans ? vb.R : vb.C) != N)
    return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "a, b: operand views do not make [m=%lld, k=%lld] x [k, n=%lld]", (long long)M, (long long)K,
                (long long)N);
  if (M == 0 || N == 0) return QUANT_OK;
  int dev = 0;
  LQ_TRY(current_device(a->d.device_id, &dev, err));
  // Two of the paths below call the driver directly, in the thread's current
  // context, and a thread whose CUDA calls so far needed none (cudaGetDevice,
  // say: a Go goroutine moved to another OS thread) has none. cuBLASLt's
  // matmul then failed with "execution failed" and no CUDA error (H200,
  // TestGemmConcurrentSameShape in a process of its own: 3-8 of 20 runs); the
  // driver's cuTensorMapEncodeTiled refused the fused kernels' TMA
  // descriptors: the tile kernel failed with "invalid argument" (H200,
  // TestGemmFusedMatchesCPU at 20x4100x336, 5 of 7 runs) and
  // decode_wg_kernel gave way to the slower decode kernel unseen
  // (CUDA_ERROR_INVALID_CONTEXT; bench/RESULTS.md, "the TMA descriptors on
  // threads without a CUDA context").
  LQ_TRY(make_context_current(dev, err));
  cudaStream_t s = stream_of(a->stream);
  Scratch scratch(s, host_ws, host_ws_bytes);

  // cuBLASLt's FP8 GEMMs take any n (M here: A's rows, the tokens of a
  // linear layer) but want m (N) and k (K) multiples of 16; an M of 1 to 15
  // (decode) had taken the BF16 path, which expands the whole weight every
  // call (bench/RESULTS.md, "FP8 at any M").
  const bool fp8_tensor = allow_native && va.kind == Kind::Fp8 && vb.kind == Kind::Fp8 && !(va.el == 1 && vb.el == 1) && N % 16 == 0 &&
                          K % 16 == 0 && aligned16(va.data) && aligned16(vb.data);
  // FP8 block scaling (CUDA >= 12.9 cuBLASLt, Hopper): A 1x128 (VEC128_32F),
  // B 1x128 or 128x128 (BLK128x128_32F), TN as the host hands them, whole
  // 128-blocks along K, and the scale buffers in the layouts cuBLASLt reads:
  // fp8_block's 1-D [K/128, pad4(rows)] is its [K/128, rows] when rows % 4 == 0;
  // the 2-D [N/128, pad4(K/128)] is [N/128, K/128] when (K/128) % 4 == 0.
  // At M % 16 != 0, A's codes and scales go to cuBLASLt zero-padded to Mp =
  // pad16(M) rows (pad_fp8_block_kernel, one launch into this call's
  // scratch), and cuBLASLt's Mp rows of FP32 sums reach D through
  // epilogue_kernel, which reads the first M.
  const bool fp8_block = allow_native && va.kind == Kind::Fp8Block && vb.kind == Kind::Fp8Block && !va.s_two_d &&
                         N % 16 == 0 && K % 128 == 0 && (!vb.s_two_d || (K / 128) % 4 == 0) && aligned16(va.data) && aligned16(vb.data) &&
                         aligned16(va.scale) && aligned16(vb.scale) && contiguous(va, false) && contiguous(vb, true);
  const bool fp8_native = fp8_tensor || fp8_block;
  const bool pad_m = fp8_block && M % 16 != 0;
  const int64_t Mp = pad_m ? pad_to(M, 16) : M;
  // The epilogue runs in cuBLASLt where it is alpha·Σ + beta·C' with C' of
  // D's dtype (C itself, or old D with beta 1 when accumulating) and no
  // per-tensor factor is left to apply, or alpha_eff·Σ with alpha_eff in
  // device memory; else FP32 sums go to scratch and epilogue_kernel finishes.
  // One compute type for both operands (unless native FP8): BF16 when both
  // expand exactly to it, FP16 for two FP16 tensors, else FP32.
  auto bf16_exact = [](const OpView &v) { return v.kind != Kind::Fp8Block && (v.kind != Kind::Dense || v.el == 1); };
  int ct = 0;  // 0 f32, 1 bf16, 2 f16 (dense_code's numbering)
  if (bf16_exact(va) && bf16_exact(vb)) ct = 1;
  else if (va.kind == Kind::Dense && vb.kind == Kind::Dense && va.el == 2 && vb.el == 2) ct = 2;
  const bool factors = !fp8_native && (va.factor != nullptr || vb.factor != nullptr);
  // cuBLASLt writes BF16/FP16 inputs' products to their own type or FP32,
  // FP32 inputs' to FP32, FP8's to any of the three.
  // With C (or old D) added, D of 16 bits goes through the FP32 epilogue:
  // one rounding after the addition, whatever cuBLASLt's epilogue does.
  const bool d_ok = (fp8_native || ddt == 0 || ddt == ct) && (ddt == 0 || !(has_c || a->accumulate));
  // Per-tensor factors (NVFP4's, FP8 scale_inv outside the native paths) go
  // in as a device alpha where nothing else is added (cuBLASLt's pointer mode
  // DEVICE: D bit-identical to a host alpha of the same value, H100, CUDA 13,
  // bench/lt_alpha_probe.cu); with C, bias or accumulate, epilogue_kernel.
  const bool dev_alpha = factors && !has_c && !a->accumulate;
  // A bias of D's 16-bit type on the FP8 paths (per tensor; block scaling
  // without A's row padding): in cuBLASLt's epilogue (CUBLASLT_EPILOGUE_BIAS,
  // FP32: alpha_eff·Σ + bias, one rounding to D), not FP32 sums through
  // scratch and epilogue_kernel: a linear layer's forward in one launch.
  // Within the FP8 paths' bound, which is all they promise (their Σ is the
  // FP8 tensor cores'): TestGemmFP8AnyRowsMatchCPU.
  const bool lt_bias = has_bias && fp8_native && !pad_m && !has_c && !a->accumulate && (ddt == 1 || ddt == 2) && bdt == ddt &&
                       aligned16(a->bias.data);
  const bool direct_epi =
      K > 0 && d_ok && (!factors || dev_alpha) && (!has_bias || lt_bias) && !(has_c && a->accumulate) && (!has_c || cdt == ddt) && !pad_m;
  // alpha, beta and the factors still to apply (cuBLASLt's scale pointers
  // apply the native FP8 paths' own), for epilogue_kernel and alpha_kernel.
  const Alpha ab{fp8_native ? nullptr : va.factor, fp8_native ? nullptr : vb.factor, va.kind == Kind::Nvfp4, vb.kind == Kind::Nvfp4,
                 a->alpha, has_c ? a->beta : 0.0f};
  auto epilogue = [&](const float *sums) -> int32_t {
    if (sums != nullptr && !has_c && !has_bias && !a->accumulate && (reinterpret_cast<uintptr_t>(a->d.data) & (ddt == 0 ? 15 : 7)) == 0) {
      launch_kernel(scale_kernel, grid_for(ceil_div(M * N, 4)), 256, 0, s, sums, ab, a->d.data, ddt, M * N);
      LQ_LAUNCHED("epilogue kernel launch");
      return QUANT_OK;
    }
    launch_kernel(epilogue_kernel, grid_for(M * N), 256, 0, s, sums, has_c ? a->c.data : nullptr, cdt, ab, has_bias ? a->bias.data : nullptr, bdt,
                  a->d.data, ddt, a->accumulate, M, N);
    LQ_LAUNCHED("epilogue kernel launch");
    return QUANT_OK;
  };
  if (K > 0 && !(a->flags & QUANT_PLUGIN_GEMM_EXACT)) {
    qfused::Params fp{};
    if (fused_pick(va, vb, M, N, K, dev, &fp)) {
      // D directly where the epilogue is alpha·Σ (+ bias) into any D type
      // (the kernel forms alpha·fa·fb and adds the bias itself, in
      // epilogue_kernel's order: one launch a GEMM, no scratch; an alpha
      // kernel ahead of it, with its pool allocation, cost 1.7-1.9 µs a call
      // at most decode shapes, 5-9 % of M16 N8192 K8192: H200, CUDA graphs,
      // bench/RESULTS.md "the fused GEMM in one launch"; the bias's
      // epilogue_kernel after it about as much, "a bias in the fused
      // epilogue"), else plain FP32 sums and epilogue_kernel (C, accumulate).
      const bool direct = !has_c && !a->accumulate;
      float *sums = nullptr;
      if (!direct) LQ_TRY(scratch.get((size_t)M * N * sizeof(float), (void **)&sums, "the FP32 sums", err));
      fp.alpha = direct ? a->alpha : 1.0f;
      if (direct) fp.fa = ab.fa, fp.fb = ab.fb, fp.nva = ab.nva, fp.nvb = ab.nvb;
      fp.ldd = N;
      fp.d = direct ? a->d.data : sums;
      fp.d_dt = direct ? ddt : 0;
      if (direct && has_bias) fp.bias = a->bias.data, fp.bias_dt = bdt;
      LQ_CUDA(qfused::gemm(fp, s), "the fused Hopper GEMM (m=%lld n=%lld k=%lld)", (long long)M, (long long)N, (long long)K);
      return direct ? QUANT_OK : epilogue(sums);
    }
  }
  if (K == 0) return epilogue(nullptr);  // no products: the epilogue of zeros

  LtCall c{};
  c.m = N;
  c.n = Mp;
  c.k = K;
  c.compute = CUBLAS_COMPUTE_32F;
  // Scratch of this call, one stream-ordered allocation: the expanded
  // operands and the FP32 sums, each 256-byte aligned.
  size_t off_a = 0, off_b = 0, off_s = 0, off_ab = 0, off_pa = 0, off_ps = 0, total = 0;
  auto take = [&](size_t bytes) {
    const size_t at = total;
    total += (bytes + 255) / 256 * 256;
    return at;
  };
  const size_t esz = ct == 0 ? 4 : 2;
  const int64_t lde = pad_to(K, 16);  // the expanded rows' pitch (expand_group's stores)
  auto direct_op = [&](const OpView &v) { return v.kind == Kind::Dense && v.el == ct; };
  const bool exp_a = !fp8_native && !direct_op(va), exp_b = !fp8_native && !direct_op(vb);
  // MXFP8 operands that expand_contig_kernel does not take expand in their
  // physical layout, [R, pad8(C)] (expand_phys_kernel); cuBLASLt transposes.
  auto phys = [&](const OpView &v, bool is_b) { return v.kind == Kind::Mxfp8 && !v.transposed && contig_kind(v, is_b) == kCNone; };
  const bool phys_a = exp_a && phys(va, false), phys_b = exp_b && phys(vb, true);
  const int64_t lpa = pad_to(va.C, 8), lpb = pad_to(vb.C, 8);
  if (exp_a) off_a = take(phys_a ? (size_t)va.R * lpa * esz : (size_t)M * lde * esz);
  if (exp_b) off_b = take(phys_b ? (size_t)vb.R * lpb * esz : (size_t)N * lde * esz);
  if (!direct_epi) off_s = take((size_t)Mp * N * sizeof(float));
  if (pad_m) off_pa = take((size_t)Mp * K), off_ps = take((size_t)(K / 128) * Mp * sizeof(float));
  if (direct_epi && dev_alpha) off_ab = take(2 * sizeof(float));  // alpha_eff and beta 0 (cuBLASLt's device pointer mode)
  uint8_t *buf = nullptr;
  bool alpha_done = false;  // expand_contig_kernel wrote alpha_eff to buf + off_ab
  if (total > 0) LQ_TRY(scratch.get(total, (void **)&buf, "the expanded operands and FP32 sums", err));
  if (fp8_native) {
    // Both physical copies are [rows, K] row-major (the host picked them so).
    c.ta = vb.el ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
    c.tb = va.el ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
    c.opa = CUBLAS_OP_T;
    c.opb = CUBLAS_OP_N;
    c.a = vb.data;
    c.lda = K;
    c.b = va.data;
    c.ldb = K;
    c.a_scale = vb.factor;
    c.b_scale = va.factor;
    if (fp8_block) {
      c.ta = c.tb = CUDA_R_8F_E4M3;
      c.a_scale = (const float *)vb.scale;
      c.b_scale = (const float *)va.scale;
      c.a_scale_mode = vb.s_two_d ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
      c.b_scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
      if (pad_m) {
        launch_kernel(pad_fp8_block_kernel, grid_for(Mp * K / 16), 256, 0, s, va.data, (const float *)va.scale, va.s_stride, M, Mp, K,
                      buf + off_pa, (float *)(buf + off_ps));
        LQ_LAUNCHED("FP8 block padding kernel launch");
        c.b = buf + off_pa;
        c.b_scale = (const float *)(buf + off_ps);
      }
    }
  } else {
    c.ta = c.tb = cuda_type(ct);
    // An operand goes to cuBLASLt as it is where it is a dense tensor of the
    // compute type; else it is expanded, both in one launch.
    // B' = op(A): dense A [R, C] row-major is column-major [C, R], ld C.
    if (!exp_a) {
      c.b = va.data;
      c.ldb = va.C;
      c.opb = va.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    } else if (phys_a) {
      // E = X [R, C] row-major, column-major [C, R]: op(A) = X (the
      // contraction along C) is E read as [K, M], else Eᵀ.
      c.b = buf + off_a;
      c.ldb = lpa;
      c.opb = contiguous(va, false) ? CUBLAS_OP_N : CUBLAS_OP_T;
    } else {
      c.b = buf + off_a;
      c.ldb = lde;
      c.opb = CUBLAS_OP_N;
    }
    // A' = op(B)ᵀ [N, K].
    if (!exp_b) {
      c.a = vb.data;
      c.lda = vb.C;
      c.opa = vb.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    } else if (phys_b) {
      // E = X [R, C] row-major, column-major [C, R]: op(B) = X (the
      // contraction along R) makes op(B)ᵀ = E as stored, else Eᵀ.
      c.a = buf + off_b;
      c.lda = lpb;
      c.opa = contiguous(vb, true) ? CUBLAS_OP_T : CUBLAS_OP_N;
    } else {
      c.a = buf + off_b;
      c.lda = lde;
      c.opa = CUBLAS_OP_T;
    }
    if (exp_a || exp_b) {
      // Contiguous MX/NVFP4 operands: expand_contig_kernel (one launch for
      // both where the output is BF16); other MXFP8 ones: expand_phys_kernel;
      // the rest: expand_kernel.
      const int ka = exp_a && !phys_a ? contig_kind(va, false) : kCNone, kb = exp_b && !phys_b ? contig_kind(vb, true) : kCNone;
      const int64_t ga = exp_a && !phys_a && ka == kCNone ? M : 0, gb = exp_b && !phys_b && kb == kCNone ? N : 0;
      const ContigCall cc{K, ab, direct_epi && dev_alpha ? (float *)(buf + off_ab) : nullptr};
      if (ct == 0) {
        LQ_TRY(expand(va, vb, ka, kb, ga, gb, M, N, lde, (float *)(buf + off_a), (float *)(buf + off_b), cc, &alpha_done, s, err));
        if (phys_a || phys_b) LQ_TRY(launch_phys(phys_op(va, phys_a, (float *)(buf + off_a)), phys_op(vb, phys_b, (float *)(buf + off_b)), s, err));
      } else {
        LQ_TRY(expand(va, vb, ka, kb, ga, gb, M, N, lde, (__nv_bfloat16 *)(buf + off_a), (__nv_bfloat16 *)(buf + off_b), cc, &alpha_done, s, err));
        if (phys_a || phys_b)
          LQ_TRY(launch_phys(phys_op(va, phys_a, (__nv_bfloat16 *)(buf + off_a)), phys_op(vb, phys_b, (__nv_bfloat16 *)(buf + off_b)), s, err));
      }
    }
  }
  c.ldd = N;
  if (direct_epi) {
    c.td = c.tc = cuda_type(ddt);
    c.d = a->d.data;
    c.alpha = a->alpha;
    if (dev_alpha) {
      float *ab_dev = (float *)(buf + off_ab);
      if (!alpha_done) {
        launch_kernel(alpha_kernel, 1, 1, 0, s, ab, ab_dev);
        LQ_LAUNCHED("alpha kernel launch");
      }
      c.alpha_beta = ab_dev;
    }
    if (has_c) {
      c.use_c = true;
      c.c = a->c.data;
      c.beta = a->beta;
    } else if (a->accumulate) {
      c.use_c = true;  // old D, beta 1
      c.c = a->d.data;
      c.beta = 1.0f;
    }
    if (lt_bias) c.bias = a->bias.data, c.bias_type = cuda_type(bdt);
    const int32_t st = lt_run(c, dev, s, scratch.rest(), scratch.rest_bytes(), err);
    // A cuBLASLt without a device-alpha or bias-epilogue algorithm for this
    // GEMM: FP32 sums and the epilogue pass, as before it had one.
    if (!(st == QUANT_ERROR_UNSUPPORTED && (dev_alpha || lt_bias))) {
      if (st == QUANT_ERROR_UNSUPPORTED && fp8_native) return gemm(a, err, false);
      return st;
    }
    c.bias = nullptr;
  }
  float *sums = nullptr;
  if (direct_epi) LQ_TRY(scratch.get((size_t)M * N * sizeof(float), (void **)&sums, "the FP32 sums", err));
  else sums = (float *)(buf + off_s);
  c.td = c.tc = CUDA_R_32F;
  c.d = sums;
  c.alpha_beta = nullptr;
  c.use_c = false;
  c.alpha = 1.0f;  // Σ; epilogue_kernel applies alpha_eff
  c.beta = 0.0f;
  {
    const int32_t st = lt_run(c, dev, s, scratch.rest(), scratch.rest_bytes(), err);
    if (st == QUANT_ERROR_UNSUPPORTED && fp8_native) return gemm(a, err, false);
    LQ_TRY(st);
  }
  return epilogue(sums);
}

// ---------------------------------------------------------------------------
// Support table
// ---------------------------------------------------------------------------

bool known(const char *f) {
  return is_format(f, "identity") || is_format(f, "fp8") || is_format(f, "fp8_block") || is_format(f, "mxfp8") || is_format(f, "mxfp4") ||
         is_format(f, "nvfp4");
}

// What gemm() runs for format_a × format_b. With parameters (params_a,
// params_b) the answer is the path those operands take; without (the host's
// table, one entry per pair of format names) it is the path of the formats'
// defaults (fp8 E4M3, fp8_block 1x128), and the reason names the parameters
// and shapes that take another path.
int32_t gemm_support(quant_plugin_gemm_support_args *a, quant_plugin_error *err) {
  if (a->format_a == nullptr || a->format_b == nullptr) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "format_a, format_b: NULL");
  const char *fa = a->format_a, *fb = a->format_b;
  auto say = [&](int32_t level, const char *fmt, ...) {
    a->level_out = level;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->reason_out, sizeof a->reason_out, fmt, ap);
    va_end(ap);
    return QUANT_OK;
  };
  if (a->device_type != kDLCUDA) return say(QUANT_GEMM_UNSUPPORTED, "the CUDA plugin's GEMM runs on cuda only");
  for (const char *f : {fa, fb})
    if (!known(f)) return say(QUANT_GEMM_UNSUPPORTED, "the CUDA GEMM does not know format %.32s", f);
  const bool e5a = a->params_a && a->params_a->element == QUANT_ELEMENT_E5M2, e5b = a->params_b && a->params_b->element == QUANT_ELEMENT_E5M2;
  if (is_format(fa, "fp8") && is_format(fb, "fp8")) {
    // gemm(): fp8_tensor (E5M2 x E5M2 has no cuBLASLt FP8 algorithm).
    if (e5a && e5b) return say(QUANT_GEMM_EMULATED, "E5M2 x E5M2: no FP8 tensor-core GEMM; codes to BF16, BF16 tensor cores, FP32 accumulation");
    return say(QUANT_GEMM_NATIVE, "FP8 tensor cores (cuBLASLt) if N, K %% 16 (any M); E5M2 x E5M2 or other shapes: codes to BF16, FP32 accumulation");
  }
  if (is_format(fa, "identity") && is_format(fb, "identity"))
    return say(QUANT_GEMM_NATIVE, "cuBLASLt in the tensors' dtype (BF16, FP16; FP32 without TF32); mixed dtypes in FP32");
  if (is_format(fa, "fp8_block") && is_format(fb, "fp8_block")) {
    // gemm(): fp8_block (cuBLASLt's block scaling takes A 1x128 only).
    if (a->params_a && a->params_a->block_dims == 2)
      return say(QUANT_GEMM_EMULATED, "A 128x128: no block-scaled FP8 GEMM; codes x FP32 block scales expanded to FP32, FP32 GEMM (cuBLASLt)");
    return say(QUANT_GEMM_NATIVE, "FP8 block scaling (cuBLASLt) for A 1x128 if N %% 16, K %% 128 (B 128x128: 512), any M; A 128x128 or other shapes: FP32");
  }
  if (is_format(fa, "fp8_block") || is_format(fb, "fp8_block"))
    return say(QUANT_GEMM_EMULATED, "FP8 codes times FP32 block scales expanded to FP32, FP32 GEMM (cuBLASLt)");
  const bool mx_a = is_format(fa, "mxfp8") || is_format(fa, "mxfp4"), mx_b = is_format(fb, "mxfp8") || is_format(fb, "mxfp4");
  const bool nv_a = is_format(fa, "nvfp4"), nv_b = is_format(fb, "nvfp4");
  if ((mx_a || nv_a) && (mx_b || nv_b)) {
    int dev = 0;
    if (cudaGetDevice(&dev) == cudaSuccess && qfused::device_ok(dev)) {
      if (nv_a == nv_b)
        return say(QUANT_GEMM_NATIVE, "sm_90 fused kernels (README): " FUSED_WHERE
                                      " and K %% 32 == 0, or MXFP8 K %% 16 vs 8192+ rows (4096+ vs <= 32); else/exact: BF16");
      return say(QUANT_GEMM_NATIVE, "sm_90: the decode kernel (README) where min(M,N) <= 64, K %% 32 == 0; else or exact: BF16");
    }
    cudaGetLastError();
  }
  return say(QUANT_GEMM_EMULATED, "expanded exactly to BF16 (FP32 with FP32/FP16 tensors), per-tensor factors into alpha, FP32 accumulation");
}

}  // namespace
}  // namespace lq

extern "C" int32_t lq_gemm(const quant_plugin_gemm_args *a, quant_plugin_error *err) { return lq::gemm(a, err); }
extern "C" int32_t lq_gemm_support(quant_plugin_gemm_support_args *a, quant_plugin_error *err) { return lq::gemm_support(a, err); }
