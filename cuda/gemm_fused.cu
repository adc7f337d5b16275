// The fused Hopper GEMM (issue #12, DESIGN.md "GEMM" path 3): MXFP8, MXFP4 and
// NVFP4 operands multiplied as codes on the FP8 tensor cores (wgmma, sm_90a),
// the block scales applied in FP32 registers when each K block's partial sum
// is promoted.
//
//   D[i, j] = alpha · Σ_b  sa(i, b) · sb(j, b) · T_b(i, j),
//   T_b(i, j) = Σ_{k in block b} a(i, k) · b(j, k)        (one wgmma k32)
//
// Both operands are K-major, [rows, K] (the only FP8 wgmma layout): A is op(A)
// [M, K] and B is op(B)ᵀ [N, K]. MXFP8 rowwise data is K-major for an A that
// is not transposed and for a transposed B (fprop X·Wᵀ); MXFP8 columnwise data
// is [M, K] NOT transposed (spec §4.5), so it is K-major only when the GEMM
// contracts over its last dim, which the dispatch checks. NVFP4 and MXFP4 data
// is packed E2M1 [rows, ⌈K/2⌉] in both directions (columnwise transposed,
// spec §5.3), always K-major.
//
// Element types. E4M3 and E5M2 codes go to the tensor cores as they are. E2M1
// codes (the decode kernels only) go in as integers or widened to FP16 or
// E4M3 in registers (decode_body, decode_wg_kernel): every E2M1 value (0,
// ±0.5, ±1, ±1.5, ±2, ±3, ±4, ±6) is an E4M3 and an FP16 value, so the
// widening is exact.
//
// Scales. E8M0 per 32 (MXFP8, MXFP4): one wgmma m64nNk32 covers exactly one
// block, whose FP32 result T_b is promoted as acc = fma(T_b, sa·sb, acc).
// sa·sb is a power of two; it is exact in FP32 whenever its exponent lies in
// [-149, 127] (then the fma rounds once). A stage whose E8M0 exponents could
// leave that range (adversarial scales, spec §4.3 allows 2^-127..2^127 on both
// sides) is promoted in FP64 instead, where the product and the sum are exact
// up to one FP64 rounding before the FP32 one. NVFP4 (E4M3 scales per 16,
// the decode kernels only): against an FP8 operand, and against NVFP4 where a
// warp holds 8 or more tiles, the E4M3 scales go into the FP16 codes
// (exactly), so a 32-block's two 16-block sums chain in the mma and are
// promoted once; otherwise each 16-block's sum is promoted with its own
// scales; decode_body says how. The NVFP4 global scales are folded into
// alpha by the caller (spec §5.2).
//
// Any shape (spec §14): rows past M or N and K past the end are loaded as zeros
// and their scales as 1.0, so padded positions contribute exact zeros; loads
// and stores are bounds-checked, nothing outside a buffer is read or written.
//
// Numerics of the tensor-core sum (the bound the tests use; README "Fused
// Hopper GEMM"). FP8 wgmma does not add in FP32. Measured on an H100 and an
// H200 (cuda/gputest/fused_check.cu probe, bench/RESULTS.md; the sum's rows
// on the H200 only): inside one k32
// instruction every product p_k is aligned to the largest one, of exponent
// e, and truncated toward −∞ to a multiple of 2^(e−13); the truncated
// products add, and their sum S' is kept to 13 fraction bits of its own
// magnitude (16·L + L·2^-9 survives, 16·L + L·2^-10 gives 16·L), with no
// truncation of partial sums in between (rows that cancel inside the block
// keep L·2^-13). So one block's sum T_b, scale-free, has
//   |S' − Σ p_k| < n·2^-13·max|p_k|,   |T_b − S'| < 2^-13·|S'|,
//   |T_b − Σ p_k| < 2^-13·(n·(1 + 2^-13)·max|p_k| + Σ|p_k|),
// n ≤ 32 products (NVFP4: 16 nonzero of the 32). Promotion rounds once per
// block (the fma, or FP64 then FP32 on the slow path: two roundings of 2^-53
// and 2^-24), alpha once more, so with s_b = sa·sb and R the exact result:
//   |D − R| ≤ |α|·Σ_b s_b·(32·2^-13·(1 + 2^-13)·max_k|p_bk| + (2^-13 + 2^-24)·Σ_k|p_bk|)
//             + (n_blocks + 2)·2^-24·|α|·Σ_k|a_k·b_k| + (n_blocks + 2)·2^-149,
// plus the rounding to D's dtype. fused_check tests every element of its
// GEMMs against this bound with the measured 13, and fails if a device keeps
// fewer bits or truncates partial sums; cuda/gputest/fused_test.go checks
// quant_gemm against it.
//
// Structure: one CTA per BM×BN output tile; warpgroup 0 is the producer (FP8
// codes by TMA, both operands' rows 16-byte aligned and K % 16 == 0, into
// 128-byte-swizzled stages; the E8M0 scales by cp.async, converted to floats;
// signalled by mbarriers),
// warpgroups 1..BM/64 are consumers (wgmma from shared memory via descriptors,
// promotion, epilogue). It takes MXFP8 pairs only: the dispatch sends it
// nothing else (qfused::beats_expansion), because E2M1 codes widened by its
// producer, NVFP4's per-16 scales and codes through cp.async or registers all
// ran slower than the BF16 expansion (README "When it runs"), so those paths
// were deleted. Two more kernels take few rows of one operand (the decode
// shapes; gemm() below dispatches): decode_kernel (mma.sync on register
// fragments, 1..64 rows, every pair) and decode_wg_kernel (MXFP8 × MXFP8 at
// 1..16 rows, wgmma with the weight on the m64 side), each described above it.

#include <cuda.h>  // CUtensorMap (the type only: the encoder is looked up at run time, libcuda is not linked)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <initializer_list>
#include <type_traits>
#include <utility>

#include "gemm_fused.cuh"
#include "launch.cuh"

namespace qfused {

using lq::launch_kernel;
using lq::launch_kernel_cluster;
using lq::pdl_wait;

constexpr int kBK = 128;  // K elements per stage: one 128-byte swizzle row

// ---------------------------------------------------------------------------
// PTX wrappers
// ---------------------------------------------------------------------------

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
  asm volatile("{\n\t.reg .b64 st;\n\tmbarrier.arrive.shared::cta.b64 st, [%0];\n\t}" ::"r"(smem_u32(bar)) : "memory");
}

__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
  asm volatile(
      "{\n\t.reg .pred P1;\n"
      "LAB_WAIT:\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n\t"
      "@P1 bra DONE;\n\t"
      "bra LAB_WAIT;\n"
      "DONE:\n\t}" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
}

// Tensor memory access (TMA): sets the stage's expected bytes (with one
// arrival), and one box of a 2-D tensor map into shared memory, completing
// those bytes on the barrier.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t *bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void tma_load_2d(uint8_t *dst, const CUtensorMap *map, int c0, int c1, uint64_t *bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(smem_u32(dst)),
               "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_u32(bar))
               : "memory");
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// Thread-block clusters (the decode kernel's split K): this CTA's rank, the
// cluster barrier in its two halves (every thread of the cluster arrives;
// the wait returns once all have, and acquires what a releasing arrive
// published), a shared-memory address of this CTA mapped into the CTA of
// another rank, and a store there.
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_arrive_release() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
__device__ __forceinline__ uint32_t cluster_map(uint32_t addr, uint32_t rank) {
  uint32_t d;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(d) : "r"(addr), "r"(rank));
  return d;
}
__device__ __forceinline__ void st_cluster_f32(uint32_t addr, float v) {
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(addr), "f"(v) : "memory");
}

// The shared-memory matrix descriptor of a K-major tile with 128-byte
// swizzle: rows of 128 bytes, 8-row atoms of 1024 bytes (stride byte offset),
// leading byte offset unused (1), layout type 1 = SWIZZLE_128B. Moving along
// K inside the atom adds the byte offset to the start address.
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr) {
  uint64_t d = 0;
  d |= (uint64_t)((addr & 0x3FFFF) >> 4);
  d |= (uint64_t)1 << 16;
  d |= (uint64_t)(1024 >> 4) << 32;
  d |= (uint64_t)1 << 62;
  return d;
}

// The wgmma instructions exist in the sm_90a build only. The Makefile builds
// this file for sm_90a alone; another target (compute_90 PTX) gets empty
// ones, and the kernels trap there; the host launches them on sm_90 only
// (device_ok), which runs the sm_90a machine code.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
#else
__device__ __forceinline__ void wgmma_fence() {}
__device__ __forceinline__ void wgmma_commit() {}
template <int N>
__device__ __forceinline__ void wgmma_wait() {}
#endif
__device__ __forceinline__ void reg_fence(float &x) { asm volatile("" : "+f"(x)::"memory"); }

// wgmma m64nNk32 (N = 128, 16 or 8), FP32 accumulators, D = A·B (scale-d =
// 0: the block sum alone). TA/TB: 0 = e4m3, 1 = e5m2.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define QF_HAVE_WGMMA 1
#define QF_R8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define QF_N128_REGS                                                                                                       \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, " \
  "%25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "  \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define QF_WGMMA128(T)                                                                                             \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\nwgmma.mma_async.sync.aligned.m64n128k32.f32." T " " \
               QF_N128_REGS ", %64, %65, p, 1, 1;\n}\n"                                                            \
               : QF_R8(0), QF_R8(8), QF_R8(16), QF_R8(24), QF_R8(32), QF_R8(40), QF_R8(48), QF_R8(56)              \
               : "l"(da), "l"(db), "r"(0))
#define QF_WGMMA16(T)                                                                                                         \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\nwgmma.mma_async.sync.aligned.m64n16k32.f32." T                \
               " {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1;\n}\n"                                                  \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]) \
               : "l"(da), "l"(db), "r"(0))
#define QF_WGMMA8(T)                                                                                                      \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\nwgmma.mma_async.sync.aligned.m64n8k32.f32." T " {%0, %1, %2, %3}, " \
               "%4, %5, p, 1, 1;\n}\n"                                                                                     \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                                          \
               : "l"(da), "l"(db), "r"(0))
#else
#define QF_HAVE_WGMMA 0
#endif

template <int BN, int TA, int TB>
__device__ __forceinline__ void wgmma_k32(float *d, uint64_t da, uint64_t db) {
#if QF_HAVE_WGMMA
  if constexpr (BN == 128) {
    if constexpr (TA == 0 && TB == 0) QF_WGMMA128("e4m3.e4m3");
    if constexpr (TA == 0 && TB == 1) QF_WGMMA128("e4m3.e5m2");
    if constexpr (TA == 1 && TB == 0) QF_WGMMA128("e5m2.e4m3");
    if constexpr (TA == 1 && TB == 1) QF_WGMMA128("e5m2.e5m2");
  } else if constexpr (BN == 8) {
    if constexpr (TA == 0 && TB == 0) QF_WGMMA8("e4m3.e4m3");
    if constexpr (TA == 0 && TB == 1) QF_WGMMA8("e4m3.e5m2");
    if constexpr (TA == 1 && TB == 0) QF_WGMMA8("e5m2.e4m3");
    if constexpr (TA == 1 && TB == 1) QF_WGMMA8("e5m2.e5m2");
  } else {
    static_assert(BN == 16, "tile width");
    if constexpr (TA == 0 && TB == 0) QF_WGMMA16("e4m3.e4m3");
    if constexpr (TA == 0 && TB == 1) QF_WGMMA16("e4m3.e5m2");
    if constexpr (TA == 1 && TB == 0) QF_WGMMA16("e5m2.e4m3");
    if constexpr (TA == 1 && TB == 1) QF_WGMMA16("e5m2.e5m2");
  }
#else
  __trap();  // only the sm_90a build has wgmma; the host never launches it elsewhere
#endif
}

// wgmma m64n8k32 with A from registers (W4 runs at 1..8 rows): four words a thread,
// E4M3 codes (the widened E2M1 weight of decode_wg_kernel's W4 path); B from
// shared memory, TB: 0 = e4m3, 1 = e5m2. The register fragment of A (PTX ISA,
// wgmma .m64nNk32 with 8-bit A): warp w holds rows 16w..16w+15; thread l of
// the warp rows g = l/4 (words 0, 2) and g + 8 (words 1, 3), K slots 4c..4c+3
// (words 0, 1) and 16+4c..16+4c+3 (words 2, 3), c = l % 4.
#if QF_HAVE_WGMMA
#define QF_WGMMA8_RS(T)                                                                                                     \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\nwgmma.mma_async.sync.aligned.m64n8k32.f32." T                  \
               " {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1;\n}\n"                                                  \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                                          \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(0))
#endif
template <int BN, int TB>
__device__ __forceinline__ void wgmma_k32_rs(float *d, const uint32_t *a, uint64_t db) {
  static_assert(BN == 8, "W4 runs at 1..8 rows of A only (launch_wd)");
#if QF_HAVE_WGMMA
  if constexpr (TB == 0) QF_WGMMA8_RS("e4m3.e4m3");
  else QF_WGMMA8_RS("e4m3.e5m2");
#else
  __trap();
#endif
}

// Four 8x8 matrices of 16-bit words from shared memory (ldmatrix): lanes
// 8i..8i+7 give the row addresses of matrix i; thread l gets word l % 4 of
// row l / 4 of each.
__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}

// ---------------------------------------------------------------------------
// Codecs
// ---------------------------------------------------------------------------

// Eight E2M1 codes (a word, the first in the low nibble) as eight E4M3 bytes
// (lo: codes 0..3, hi: 4..7, the first in the low byte): the magnitudes by a
// byte permute from the table {0, 0.5, 1, 1.5, 2, 3, 4, 6} = {00 30 38 3C 40
// 44 48 4C}, the signs by a byte permute in sign-replicate mode from x << 4
// (an even code's sign in its byte's msb) and x (an odd code's). Every E2M1
// value is an E4M3 value, so this is exact. (It replaced a four-code form,
// two calls a word, with the same bytes for every word.)
__device__ __forceinline__ void e2m1x8_to_e4m3x8(uint32_t x, uint32_t &lo, uint32_t &hi) {
  const uint32_t y = x & 0x77777777u, a = x << 4;
  const uint32_t m0 = __byte_perm(0x3C383000u, 0x4C484440u, y), m1 = __byte_perm(0x3C383000u, 0x4C484440u, y >> 16);
  const uint32_t s0 = __byte_perm(a, x, 0xD9C8u), s1 = __byte_perm(a, x, 0xFBEAu);
  lo = m0 | (s0 & 0x80808080u), hi = m1 | (s1 & 0x80808080u);
}

__device__ __forceinline__ float e8m0_to_float(uint32_t e) {
  if (e == 0) return __int_as_float(0x00400000);  // 2^-127
  if (e == 255) return __int_as_float(0x7FC00000);
  return __int_as_float(e << 23);
}

// Index of scale (row r, K block j) in a compact or GEMM-swizzled buffer with
// stride bytes per row (spec §4.6, §4.7).
__device__ __forceinline__ int64_t scale_index(int64_t r, int64_t j, int64_t stride, bool swz) {
  if (!swz) return r * stride + j;
  int64_t tiles = stride / 4;
  return ((r / 128) * tiles + j / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + (j % 4);
}

// ---------------------------------------------------------------------------
// Kernel
// ---------------------------------------------------------------------------

template <int BM, int BN>
struct Layout {
  static constexpr int NB = 4;                           // E8M0 scale blocks (of 32) per stage
  static constexpr int A_BYTES = BM * 128;
  static constexpr int B_BYTES = BN * 128;
  static constexpr int SA_OFF = A_BYTES + B_BYTES;       // scales as floats, [NB][BM]
  static constexpr int SB_OFF = SA_OFF + NB * BM * 4;    // [NB][BN]
  static constexpr int FLAG_OFF = SB_OFF + NB * BN * 4;  // E8M0 exponent range, 4 producer warps × 4
  static constexpr int SRAW_OFF = FLAG_OFF + 64;         // raw scale bytes as loaded, 8 per row
  static constexpr int END = SRAW_OFF + (BM + BN) * 8;
  static constexpr int STAGE = (END + 1023) / 1024 * 1024;
  static constexpr int STAGES = (220 * 1024) / STAGE > 6 ? 6 : (220 * 1024) / STAGE;
  static constexpr int SMEM = STAGES * STAGE + 1024;
};

// Whether an operand's scale bytes can come by 4-byte cp.async (uniform over
// the grid): 4-byte aligned rows of scales.
__device__ __forceinline__ bool scales_cp(const Operand &op) { return op.scale_stride % 4 == 0 && (uintptr_t)op.scale % 4 == 0; }

// Issues the loads of the raw scale bytes of row p (< NROWS) for the stage's
// K blocks [j0, j0+NB): groups of 4 consecutive blocks are 4 aligned bytes in
// both layouts (j0 is a multiple of 4; spec §4.6, §4.7). Bytes past the
// buffer's row (j ≥ stride) or past the operand's rows are not read.
template <int NROWS, int NB, int NT>
__device__ __forceinline__ void issue_scales(const Operand &op, bool cpscale, int64_t r0, int64_t j0, uint8_t *sraw, int p0) {
  for (int p = p0; p < NROWS; p += NT) {
  const int64_t gr = r0 + p;
#pragma unroll
  for (int g = 0; g < NB / 4; g++) {
    const int64_t j = j0 + 4 * g;
    const bool valid = gr < op.rows && j < op.scale_stride;
    const int64_t idx = valid ? scale_index(gr, j, op.scale_stride, op.swizzled) : 0;
    uint8_t *dst = sraw + p * 8 + 4 * g;
    if (cpscale) {
      asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(smem_u32(dst)), "l"(op.scale + idx), "r"(valid ? 4 : 0) : "memory");
    } else {
      uint32_t w = 0;
      if (valid)
        for (int i = 0; i < 4; i++) w |= (uint32_t)__ldg(op.scale + idx + i) << (8 * i);
      *reinterpret_cast<uint32_t *>(dst) = w;
    }
  }
  }
}

// Converts row p's raw E8M0 scale bytes to floats [NB][NROWS]; blocks past
// the data and rows past the operand read as 1.0 (their data are zeros).
// Tracks the min and max exponent.
template <int NROWS, int NB, int NT>
__device__ __forceinline__ void convert_scales(const Operand &op, int64_t r0, int64_t j0, int64_t nblocks, const uint8_t *sraw, float *dst, int p0,
                                               int &emin, int &emax) {
  for (int p = p0; p < NROWS; p += NT) {
  const bool rv = r0 + p < op.rows;
#pragma unroll
  for (int j = 0; j < NB; j++) {
    float f = 1.0f;
    if (rv && j0 + j < nblocks) {
      const uint32_t s = sraw[p * 8 + j];
      f = e8m0_to_float(s);
      emin = min(emin, (int)s);
      emax = max(emax, (int)s);
    }
    dst[j * NROWS + p] = f;
  }
  }
}

// The TMA descriptors of the tile kernel and of decode_wg_kernel: A's and B's
// codes as 2-D byte tensors [rows, K] of pitch ld (tma_map: boxes of 128
// bytes of K × the tile's rows, 128-byte swizzle; tma_map_e2m1: below),
// elements past K or past the rows filled with zeros.
struct TmaMaps {
  CUtensorMap a, b;
};

template <int BM, int BN, int TA, int TB, bool PIPE>
__global__ void __launch_bounds__((BM / 64 + 1) * 128, 1) fused_gemm_kernel(const Params P, const __grid_constant__ TmaMaps T) {
  pdl_wait();
  using L = Layout<BM, BN>;
  constexpr int NWG = BM / 64;
  constexpr int NB = L::NB;
  constexpr int S = L::STAGES;
  __shared__ __align__(8) uint64_t full[S], empty[S];
  extern __shared__ uint8_t smem_raw[];
  // Aligned to 1024 bytes (the 128-byte swizzle's atom) by an offset, so that
  // the compiler still knows these are shared-memory addresses (ld.shared,
  // not generic loads, for the scales the consumers read).
  uint8_t *smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);

  const int tid = threadIdx.x;
  const int wg = tid / 128;
  // Tiles in groups of 8 tile rows, column by column inside a group, so that
  // the CTAs running together share A rows and B columns in L2.
  int64_t mt, nt;
  {
    const int64_t nM = gridDim.y, nN = gridDim.x, id = (int64_t)blockIdx.y * nN + blockIdx.x;
    const int64_t G = 8, group = id / (G * nN), first = group * G, gs = nM - first < G ? nM - first : G;
    mt = first + (id % (G * nN)) % gs;
    nt = (id % (G * nN)) / gs;
  }
  const int64_t m0 = mt * BM, n0 = nt * BN;
  const int64_t K = P.K;
  const int KT = (int)((K + kBK - 1) / kBK);
  const int64_t nblocks = (K + 31) / 32;

  if (tid == 0) {
    for (int s = 0; s < S; s++) {
      mbar_init(&full[s], 33);  // the producer warp of the stage and its lane 0's expected bytes
      mbar_init(&empty[s], NWG * 128);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    // ---------------- producer ----------------
    // Warp w of the producer warpgroup fills stages w, w+PW, w+2·PW, ...: it
    // issues a stage's loads (the codes by TMA, the scales by its lanes),
    // waits for its own, converts the scales, fences and signals. PW stages are in flight at once, one per
    // warp, whatever the proxy fence costs (run 2, H100: with LAG stages in
    // flight behind one thread's fence, every stage paid a full memory
    // latency, as if the fence waited for all of the thread's copies). PW ≤ S
    // keeps every wait on an empty barrier at most one phase ahead (a warp
    // reaching stage kt+S has finished kt+S−PW, which needed the consumers
    // past kt−PW ≥ kt−S), as parity waits require.
#if QF_HAVE_WGMMA
    if constexpr (NWG == 2) asm volatile("setmaxnreg.dec.sync.aligned.u32 96;\n" ::: "memory");
#endif
    constexpr int PW = S < 4 ? S : 4;
    const int w = tid / 32, lane = tid % 32;
    const bool csa = scales_cp(P.a), csb = scales_cp(P.b);
    for (int kt = w; kt < KT && w < PW; kt += PW) {
      const int s = kt % S;
      if (kt >= S) mbar_wait(&empty[s], ((kt / S) + 1) & 1);
      uint8_t *st = smem + s * L::STAGE;
      const int64_t k0 = (int64_t)kt * kBK;
      // The codes by TMA: the stage's full barrier completes when they have
      // landed, besides the warp's arrivals below.
      if (lane == 0) {
        mbar_arrive_expect_tx(&full[s], (BM + BN) * kBK);
        tma_load_2d(st, &T.a, (int)k0, (int)m0, &full[s]);
        tma_load_2d(st + L::A_BYTES, &T.b, (int)k0, (int)n0, &full[s]);
      }
      issue_scales<BM, NB, 32>(P.a, csa, m0, (int64_t)kt * NB, st + L::SRAW_OFF, lane);
      issue_scales<BN, NB, 32>(P.b, csb, n0, (int64_t)kt * NB, st + L::SRAW_OFF + BM * 8, lane);
      cp_async_commit();
      cp_async_wait<0>();  // this thread's scale loads of the stage have landed
      int ea0 = 255, ea1 = 0, eb0 = 255, eb1 = 0;
      convert_scales<BM, NB, 32>(P.a, m0, (int64_t)kt * NB, nblocks, st + L::SRAW_OFF, reinterpret_cast<float *>(st + L::SA_OFF), lane, ea0, ea1);
      convert_scales<BN, NB, 32>(P.b, n0, (int64_t)kt * NB, nblocks, st + L::SRAW_OFF + BM * 8, reinterpret_cast<float *>(st + L::SB_OFF), lane, eb0,
                                 eb1);
      // The stage's exponent range (the consumers read it from slot 0).
      ea0 = __reduce_min_sync(0xffffffffu, ea0);
      ea1 = __reduce_max_sync(0xffffffffu, ea1);
      eb0 = __reduce_min_sync(0xffffffffu, eb0);
      eb1 = __reduce_max_sync(0xffffffffu, eb1);
      if (lane == 0) {
        int *fl = reinterpret_cast<int *>(st + L::FLAG_OFF);
        fl[0] = ea0, fl[1] = ea1, fl[2] = eb0, fl[3] = eb1;
      }
      fence_proxy_async();  // our writes (cp.async and st.shared) before the tensor cores read them
      mbar_arrive(&full[s]);
    }
    return;
  }

  // ---------------- consumers ----------------
#if QF_HAVE_WGMMA
  // 128·96 + 256·200 registers: the accumulator and the block sum (64 + 64
  // per thread) without spills.
  if constexpr (NWG == 2) asm volatile("setmaxnreg.inc.sync.aligned.u32 200;\n" ::: "memory");
#endif
  const int g = wg - 1;  // consumer warpgroup: rows g*64 .. g*64+63 of the tile
  const int t = tid % 128, warp = t / 32, lane = t % 32;
  const int rloc = g * 64 + warp * 16 + lane / 4;  // this thread's first row (second: +8)
  const int cq = 2 * (lane % 4);                   // this thread's first column in each 8-column group
  constexpr int NR = BN / 2;                       // accumulator registers
  float acc[NR], tmp[2][NR];
#pragma unroll
  for (int i = 0; i < NR; i++) acc[i] = 0.f, tmp[0][i] = 0.f, tmp[1][i] = 0.f;

  for (int kt = 0; kt < KT; kt++) {
    const int s = kt % S;
    mbar_wait(&full[s], (kt / S) & 1);
    const uint8_t *st = smem + s * L::STAGE;
    const float *sA = reinterpret_cast<const float *>(st + L::SA_OFF);
    const float *sB = reinterpret_cast<const float *>(st + L::SB_OFF);
    const int *fl = reinterpret_cast<const int *>(st + L::FLAG_OFF);
    const int ea0 = fl[0], ea1 = fl[1], eb0 = fl[2], eb1 = fl[3];
    // sa·sb = 2^(ea+eb-254) is exact in FP32 for exponents in [-149, 127]; 255 is NaN.
    const bool fast = ea1 < 255 && eb1 < 255 && ea1 + eb1 - 254 <= 127 && ea0 + eb0 - 254 >= -149;
    const uint32_t a_base = smem_u32(st) + g * 64 * 128;
    const uint32_t b_base = smem_u32(st + L::A_BYTES);
    // Step u: the wgmma of K block u. PIPE: step u's wgmma is issued before
    // step u-1's sum is promoted, into the other register set, so that the
    // tensor core and the promotion overlap inside the warpgroup too.
    constexpr int NSTEP = NB;
    auto issue = [&](int u) {
      wgmma_fence();
      wgmma_k32<BN, TA, TB>(tmp[u & 1], sw128_desc(a_base + 32 * u), sw128_desc(b_base + 32 * u));
      wgmma_commit();
    };
    auto promote = [&](int u) {
      float *t = tmp[u & 1];
#pragma unroll
      for (int i = 0; i < NR; i++) reg_fence(t[i]);
      const float sa0 = sA[u * BM + rloc], sa1 = sA[u * BM + rloc + 8];
      if (fast) {
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
          const float2 sb = *reinterpret_cast<const float2 *>(sB + u * BN + 8 * j + cq);
          acc[4 * j + 0] = fmaf(t[4 * j + 0], sa0 * sb.x, acc[4 * j + 0]);
          acc[4 * j + 1] = fmaf(t[4 * j + 1], sa0 * sb.y, acc[4 * j + 1]);
          acc[4 * j + 2] = fmaf(t[4 * j + 2], sa1 * sb.x, acc[4 * j + 2]);
          acc[4 * j + 3] = fmaf(t[4 * j + 3], sa1 * sb.y, acc[4 * j + 3]);
        }
      } else {
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
          const float2 sb = *reinterpret_cast<const float2 *>(sB + u * BN + 8 * j + cq);
          acc[4 * j + 0] = (float)fma((double)t[4 * j + 0], (double)sa0 * sb.x, (double)acc[4 * j + 0]);
          acc[4 * j + 1] = (float)fma((double)t[4 * j + 1], (double)sa0 * sb.y, (double)acc[4 * j + 1]);
          acc[4 * j + 2] = (float)fma((double)t[4 * j + 2], (double)sa1 * sb.x, (double)acc[4 * j + 2]);
          acc[4 * j + 3] = (float)fma((double)t[4 * j + 3], (double)sa1 * sb.y, (double)acc[4 * j + 3]);
        }
      }
    };
    if constexpr (PIPE) {
#pragma unroll
      for (int u = 0; u < NSTEP; u++) {
        issue(u);
        if (u > 0) {
          wgmma_wait<1>();
          promote(u - 1);
        }
      }
      wgmma_wait<0>();
      promote(NSTEP - 1);
    } else {
#pragma unroll
      for (int u = 0; u < NSTEP; u++) {
        issue(u);
        wgmma_wait<0>();
        promote(u);
      }
    }
    mbar_arrive(&empty[s]);
  }

  // ---------------- epilogue ----------------
  const float alpha = alpha_factors(P.alpha, P.fa, P.nva, P.fb, P.nvb);
  const int64_t r0 = m0 + rloc;
#pragma unroll
  for (int j = 0; j < BN / 8; j++) {
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int64_t i = r0 + (e >> 1) * 8;
      const int64_t jj = n0 + 8 * j + cq + (e & 1);
      if (i < P.M && jj < P.N) store_d(P, alpha, i, jj, acc[4 * j + e]);
    }
  }
}

// ---------------------------------------------------------------------------
// Decode kernel: few rows of A (M ≤ 64), memory-bound
// ---------------------------------------------------------------------------
// At decode shapes (M = 1..64 tokens against a [N, K] weight) the GEMM reads
// the weight once and does 2·M flops per weight byte: the time is the weight's
// bytes over the memory bandwidth, half of BF16's for MXFP8 and a quarter for
// MXFP4/NVFP4. The tile kernel above spends a 64-row wgmma on M ≤ 16 useful
// rows behind one producer warpgroup; this kernel streams the weight with
// every warp and runs mma.sync on register fragments.
//
// Each K block of 16 rows of A against 8 rows of B is one block sum T_b from
// the tensor cores, promoted with the tile kernel's rule (acc = fma(T_b,
// sa·sb, acc) up to the order of the two exact scalings, FP64 where the E8M0
// exponents are extreme):
//   - FP4 × FP4 with E8M0 scales on one side at least (MXFP4, MXFP4 ×
//     NVFP4): the E2M1 codes as integers holding twice their values, one
//     integer mma.sync m16n8k32 per 32-block (with NVFP4: m16n8k16 per
//     16-block): 4·T_b exact in int32, the 1/4 folded into a scale. A's
//     codes go in as int8; B's, converted once per use, as uint8 2v + 12
//     (two byte permutes per four codes), the 12·ΣA that this adds taken out
//     by the mma's C, one more mma per block of A; C also carries the bits of
//     1.5·2^23 so that the sum reads as a float with one FP32 subtraction
//     (the int-to-float unit runs at a quarter rate).
//   - NVFP4 × NVFP4: FP16 mma.sync m16n8k16 per 16-block with A's E4M3 scale
//     multiplied into A's codes (exact in FP16), so that the block sum comes
//     out as T_b·sa, exactly, and the promotion is one FMA with sb (the
//     kernel's NVFP4 branch says why the bits are those of the integer path).
//   - a pair with an FP8 operand (MXFP8, MXFP8 × MXFP4): the codes converted
//     to FP16 (exact: every E4M3, E5M2 and E2M1 value is an FP16 value) and
//     two chained mma.sync m16n8k16 FP16 → FP32 per 32-block, which is what
//     ptxas makes of an FP8 mma.sync on sm_90 (Hopper's FP8 tensor cores take
//     wgmma only), with A converted once per block instead of once per mma.
// The fragments take a K permutation inside each 32-block, the same for A
// and B, so the block sums are unchanged: lane (g, q) = (lane / 4, lane % 4)
// holds 8 elements of each 32-block of its rows, as two registers of 4 (low,
// high): elements 8q .. 8q+7 (one 8-byte load of FP8 codes, 4 bytes of E2M1);
// the FP16 path gives the low registers to the first k16, the high ones to the
// second. NVFP4: elements 4q .. 4q+3 and 16+4q .. 16+4q+3, so that the low
// registers are the first 16-block, the high ones the second, one k16 each
// (NVFP4 × NVFP4 pairs elements (4q, 4q+2) and (4q+1, 4q+3) in its FP16
// registers: e2m1x8_to_f16x).
//
// Numerics. The probe (cuda/gputest/fused_check.cu, bench/RESULTS.md)
// measures 17 fraction bits kept relative to the largest product inside an
// FP16 block sum, against 13 for the tile kernel's wgmma; FP4 × FP4 block
// sums are exact. The tile kernel's bound, with its 13, holds for both
// kernels, and the tests use it.
//
// Work: a CTA owns NW·8 rows of B (output columns) and all of K; its WK warps
// take the 128-element K groups in turn (warp w: groups w, w+WK, ...). At
// small N (decode_shape) a tile's K groups are split over the KS CTAs of a
// thread-block cluster instead (warp w of rank r: groups r·WK + w, then
// every WK·KS), and rank 0 adds the others' sums (decode_body's end). Each
// warp streams its groups through its own ring of S shared-memory stages by
// cp.async (A rows, B rows, one scale word per row: coalesced 16-byte pieces,
// no registers held by loads in flight) and reads the fragments from there.
// The warps' partial results are added in shared memory in warp order, and
// the split K's ranks in rank order (deterministic); that split of Σ_b is
// one more reassociation inside the bound's (n_blocks + 2)·2^-24 term.
//
// Requirements (else the tile kernel runs where it can, gemm()): K % 32 == 0 (a 16-byte piece is
// whole inside or outside K), rows 16-byte aligned (ld and the data pointer:
// the cp.async pieces), scales 4-byte aligned with a row stride that is a
// multiple of 4 (groups of 4 blocks are 4 aligned bytes in both layouts,
// spec §4.6/§4.7).

constexpr int kDecodeRows = 64;  // the largest M the decode kernel takes
// The large operand's rows from which the tile kernel by TMA beats the BF16
// expansion against up to 64 rows of the other (half of it against up to 32;
// beats_expansion).
constexpr int64_t kTileBig = 8192;

// 1.0 as four E8M0 bytes and as four E4M3 bytes: the decode kernel's scale
// words for rows past an operand and blocks past K (a global-memory source
// for cp.async).
__device__ uint32_t kDecodeOne[2] = {0x7F7F7F7Fu, 0x38383838u};
__device__ __forceinline__ const uint8_t *decode_one(bool e4m3) { return reinterpret_cast<const uint8_t *>(kDecodeOne + e4m3); }

// Two E4M3 codes, the low (H = 0) or high (H = 1) half of w, as an FP16
// pair (the low code in the low half). The half is named in PTX so that
// ptxas reads it through the conversion's own half selector (F2FP R.H1): the
// intrinsic on w >> 16 cost a shift per pair, 20 of the 191 instructions of
// each 32-block at NW 8 (H200, M16 N28672 K8192 at 4/8/2: 0.0855 -> 0.0773
// ms; bench/RESULTS.md).
template <int H>
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t w) {
  uint32_t d;
  if constexpr (H == 0)
    asm("{\n\t.reg .b16 lo, hi;\n\tmov.b32 {lo, hi}, %1;\n\tcvt.rn.f16x2.e4m3x2 %0, lo;\n\t}" : "=r"(d) : "r"(w));
  else
    asm("{\n\t.reg .b16 lo, hi;\n\tmov.b32 {lo, hi}, %1;\n\tcvt.rn.f16x2.e4m3x2 %0, hi;\n\t}" : "=r"(d) : "r"(w));
  return d;
}

// Eight FP8 codes (lo: elements 0..3, hi: 4..7) as four FP16 pairs, exact
// (every E4M3 and E5M2 value is an FP16 value; E5M2 is FP16's top byte).
template <int T>
__device__ __forceinline__ void fp8x8_to_f16(uint32_t lo, uint32_t hi, uint32_t (&h)[4]) {
  if constexpr (T == 0) {
    h[0] = e4m3x2_to_f16x2<0>(lo), h[1] = e4m3x2_to_f16x2<1>(lo);
    h[2] = e4m3x2_to_f16x2<0>(hi), h[3] = e4m3x2_to_f16x2<1>(hi);
  } else {
    h[0] = __byte_perm(lo, 0, 0x1404), h[1] = __byte_perm(lo, 0, 0x3424);
    h[2] = __byte_perm(hi, 0, 0x1404), h[3] = __byte_perm(hi, 0, 0x3424);
  }
}

// d = A·B + c, FP16 operands, FP32 accumulators, one 16×8 tile, k16.
__device__ __forceinline__ void hmma_k16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1,
                                         const float (&c)[4]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

// d = A·B for one 16×8 tile and one 32-block of FP16 codes as two chained
// k16 mmas, the second taking the first's sum as its C (a[x], b[2x..2x+1]:
// k16 x), the chained paths' form (decode_body).
__device__ __forceinline__ void hmma_k32_chain(float (&d)[4], const uint32_t (&a)[2][4], const uint32_t (&b)[4]) {
  const float z[4] = {0.f, 0.f, 0.f, 0.f};
  float d0[4];
  hmma_k16(d0, a[0][0], a[0][1], a[0][2], a[0][3], b[0], b[1], z);
  hmma_k16(d, a[1][0], a[1][1], a[1][2], a[1][3], b[2], b[3], d0);
}

// d = A·B + c (int8 codes, int32 sums, c the same in every element) for one
// 16×8 tile and one 32-block: exact.
__device__ __forceinline__ void mma_s8_k32(int (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, int c) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %10, %10, %10};\n"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(c));
}

// The same for a 16-block: A rows g and g+8, B column g, elements 4q..4q+3.
__device__ __forceinline__ void mma_s8_k16(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t b0, int c) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%7, %7, %7, %7};\n"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
               : "r"(a0), "r"(a1), "r"(b0), "r"(c));
}

// Integer block sums to floats without the conversion unit (a quarter of the
// FP32 rate on sm_90): the mma adds the bits of 1.5·2^23 to its sum x, and
// for |x| < 2^22 those bits are the float 1.5·2^23 + x (exponent 23, one
// unit per ulp), from which one FP32 subtraction takes x exactly.
constexpr int kMagicBits = 0x4B400000;
constexpr float kMagic = 12582912.0f;  // 1.5·2^23

// d = A·B + c with A int8 and B uint8 codes, int32 sums: one 16×8 tile and
// one 32-block, exact.
__device__ __forceinline__ void mma_s8u8_k32(int (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, const int (&c)[4]) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
}

// The same for a 16-block (the lanes of mma_s8_k16).
__device__ __forceinline__ void mma_s8u8_k16(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t b0, const int (&c)[4]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.u8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%7, %8, %9, %10};\n"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
               : "r"(a0), "r"(a1), "r"(b0), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
}

// prmt in its default mode: byte n of the result is byte (s >> 4n) & 7 of
// {y, x}, or, where bit 3 of that selector nibble is set, that byte's top bit
// copied to all eight bits.
__device__ __forceinline__ uint32_t prmt(uint32_t x, uint32_t y, uint32_t s) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(s));
  return r;
}

// The bias of B's codes on the integer path: B's E2M1 codes go to the tensor
// cores as uint8 2·v + 12 (in [0, 24]), and A·B = A·(2v + 12) - 12·ΣA, the
// second term by one more mma per block of A (A against bytes of -12), shared
// by every B tile; the sums stay exact in int32.
constexpr int kE2M1Bias = 12;
constexpr uint32_t kNegBias = 0xF4F4F4F4u;  // -12 in each int8 byte

// Eight E2M1 codes (nibbles of h, element 0 lowest) as eight uint8 bytes
// 2·v + 12: bytes of elements 0..3 in lo, 4..7 in hi. Two byte permutes per
// four codes: with the code as the selector nibble, a positive code picks
// 12 + 2|v| from P and a negative one copies P's top bit (0); with the sign
// flipped, a negative code picks 12 - 2|v| from Q and a positive one gets 0.
// p0 and q0: the tables' low words (kU8P0, kU8Q0) in registers the caller
// keeps (as constants, ptxas moved them into a register before every permute).
constexpr uint32_t kU8P0 = 0x0F0E0D0Cu, kU8P1 = 0x18141210u;  // 12 + {0, 1, 2, 3, 4, 6, 8, 12}
constexpr uint32_t kU8Q0 = 0x090A0B0Cu, kU8Q1 = 0x00040608u;  // 12 - {0, 1, 2, 3, 4, 6, 8, 12}
static_assert((kU8P0 & 0xFF) == kE2M1Bias && (kU8Q0 & 0xFF) == kE2M1Bias && (uint8_t)(kNegBias & 0xFF) == (uint8_t)-kE2M1Bias, "the bias");
__device__ uint32_t kU8Tables[2] = {kU8P0, kU8Q0};
__device__ __forceinline__ void e2m1x8_to_u8(uint32_t h, uint32_t &lo, uint32_t &hi, uint32_t p0, uint32_t q0) {
  const uint32_t x = h ^ 0x88888888u;
  lo = prmt(p0, kU8P1, h) | prmt(q0, kU8Q1, x);
  hi = prmt(p0, kU8P1, h >> 16) | prmt(q0, kU8Q1, x >> 16);
}

// Four E2M1 codes (nibbles of h, element 0 lowest) as four int8 bytes holding
// twice their values: 2·{0, 0.5, 1, 1.5, 2, 3, 4, 6} = {0, 1, 2, 3, 4, 6, 8,
// 12} and their negatives, exact. Magnitude and negated magnitude by byte
// permute; the sign picks between them through prmt's sign-replicating mode
// (a selector nibble with bit 3 set, the code's sign, copies the selected
// byte's top bit: 0 from 0x7F).
__device__ __forceinline__ uint32_t e2m1x4_to_s8(uint32_t h) {
  const uint32_t sel = h & 0x7777u;
  const uint32_t pos = __byte_perm(0x03020100u, 0x0C080604u, sel);
  const uint32_t neg = __byte_perm(0xFDFEFF00u, 0xF4F8FAFCu, sel);
  uint32_t keep;  // 0x7F per positive code, 0x00 per negative one
  asm("prmt.b32 %0, %1, %1, %2;" : "=r"(keep) : "r"(0x7F7F7F7Fu), "r"(h & 0xFFFFu));
  const uint32_t t = keep ^ 0x7F7F7F7Fu, full = t | (t << 1);  // 0xFF per negative code
  return (pos & ~full) | (neg & full);
}

// Two E4M3 scales of one row, bytes 2h and 2h+1 of w (h = 1: the high half),
// as floats, exact: one conversion of the half in place and two FP16 -> FP32
// moves. (The scales of a 32-block's two 16-blocks, 2u and 2u+1, are bytes
// (2u) % 4 and (2u) % 4 + 1 of word u / 2: the half u % 2.) It replaced a
// pairing of two rows' bytes j by a byte permute before the conversion, one
// more instruction per pair (bench/RESULTS.md, "the decode kernel's E4M3
// scales"). e4m3_half_f16: the same two scales as an FP16 pair (low half:
// byte 2h), for the paths that multiply them into FP16 codes.
__device__ __forceinline__ uint32_t e4m3_half_f16(uint32_t w, int h) { return h ? e4m3x2_to_f16x2<1>(w) : e4m3x2_to_f16x2<0>(w); }
__device__ __forceinline__ float2 e4m3_half(uint32_t w, int h) {
  const uint32_t d = e4m3_half_f16(w, h);
  return __half22float2(*reinterpret_cast<const __half2 *>(&d));
}

// Eight E2M1 codes (nibbles of v, element 0 lowest) as four FP16 pairs
// holding 2^-14 times their values, exact: a code's magnitude bits [e1 e0 m]
// at FP16 bits 11..9 (the exponent's two low bits and the mantissa's top one)
// read as 2^-14 times the E2M1 value, normal or subnormal alike (E2M1's
// exponent bias 1 against FP16's 15), and its sign goes to bit 15. The low
// byte of every such FP16 value is 0: the high bytes are made four at a time,
// h = c2 + 7·(c2 & 0x10) with c2 = (code << 1) in a byte (a sign at bit 4
// becomes 16 + 112 = 128; no carry leaves the byte), then placed by byte
// permutes. r[0] = (n0, n2), r[1] = (n1, n3), r[2] = (n4, n6), r[3] = (n5,
// n7), the first nibble in the low half.
__device__ __forceinline__ void e2m1x8_to_f16x(uint32_t v, uint32_t (&r)[4]) {
  const uint32_t e = (v << 1) & 0x1E1E1E1Eu, o = (v >> 3) & 0x1E1E1E1Eu;  // nibbles 0, 2, 4, 6 and 1, 3, 5, 7
  const uint32_t he = e + 7u * (e & 0x10101010u), ho = o + 7u * (o & 0x10101010u);
  r[0] = __byte_perm(he, 0, 0x1404), r[2] = __byte_perm(he, 0, 0x3424);
  r[1] = __byte_perm(ho, 0, 0x1404), r[3] = __byte_perm(ho, 0, 0x3424);
}

// e2m1x8_to_f16x with each pair across the two halves of v (two 16-blocks'
// codes in decode_body's NVFP4 fragments): r[0] = (n0, n4), r[1] = (n1, n5),
// r[2] = (n2, n6), r[3] = (n3, n7).
__device__ __forceinline__ void e2m1x8_to_f16x_cross(uint32_t v, uint32_t (&r)[4]) {
  const uint32_t e = (v << 1) & 0x1E1E1E1Eu, o = (v >> 3) & 0x1E1E1E1Eu;  // nibbles 0, 2, 4, 6 and 1, 3, 5, 7
  const uint32_t he = e + 7u * (e & 0x10101010u), ho = o + 7u * (o & 0x10101010u);
  r[0] = __byte_perm(he, 0, 0x2404), r[2] = __byte_perm(he, 0, 0x3414);
  r[1] = __byte_perm(ho, 0, 0x2404), r[3] = __byte_perm(ho, 0, 0x3414);
}

// E4M3 bytes j and j+1 of w as the FP16 pairs (s_j, s_j) and (s_j+1, s_j+1),
// exact (every E4M3 value is an FP16 value).
__device__ __forceinline__ void e4m3_bcast2(uint32_t w, int j, uint32_t &s0, uint32_t &s1) {
  const uint32_t d = __byte_perm(w, 0, (uint32_t)(j | j << 4 | (j + 1) << 8 | (j + 1) << 12));
  s0 = e4m3x2_to_f16x2<0>(d), s1 = e4m3x2_to_f16x2<1>(d);
}

// a·b per FP16 half, rounded to nearest (no flush of subnormals).
__device__ __forceinline__ uint32_t hmul2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// E8M0 byte u of w as a float, for bytes 1..254 (normal powers of two).
__device__ __forceinline__ float e8m0_byte(uint32_t w, int u) {
  return __uint_as_float((u < 3 ? w << (23 - 8 * u) : w >> 1) & 0x7F800000u);
}

// Bit 7 of each byte of the result is set iff that byte of w has bit 7 ≠ bit
// 6, i.e. lies in [64, 191], the E8M0 exponents of the decode kernels' FP32
// promotion fma(T·sa, sb, acc): AND the results over a group's words and
// compare with 0x80808080.
__device__ __forceinline__ uint32_t e8m0x4_in_fast_range(uint32_t w) { return w ^ (w << 1); }

// The row stride, in floats, of the decode kernel's reduction buffers (its
// warps' partial sums and the cluster's xred) for NW·8 weight rows a CTA:
// two more than a row holds (decode_body's epilogue says why).
__host__ __device__ constexpr int decode_red_stride(int nw) { return nw * 8 + 2; }

template <int MT, int NW, bool FA4, bool FB4, bool SA16, bool SB16, bool TM = false>
struct DecodeStage {
  static constexpr int NWA = SA16 ? 2 : 1, NWB = SB16 ? 2 : 1;  // scale words per row and group
  static constexpr int AR = MT * 16, BR = NW * 8;
  static constexpr int ARB = FA4 ? 64 : 128, BRB = FB4 ? 64 : 128;
  // TM: the codes by TMA, B's box first, both at multiples of the swizzle's
  // atom (512 bytes at 64-byte rows, 1024 at 128), stages 1024-aligned.
  static constexpr int B_OFF = TM ? 0 : AR * ARB, A_OFF = TM ? BR * BRB : 0;
  static constexpr int SA_OFF = TM ? A_OFF + AR * ARB : B_OFF + BR * BRB, SB_OFF = SA_OFF + AR * NWA * 4;
  static constexpr int ALIGN = TM ? 1024 : 16;
  static constexpr int BYTES = (SB_OFF + BR * NWB * 4 + ALIGN - 1) / ALIGN * ALIGN;
  static_assert(!TM || (A_OFF % (ARB * 8) == 0 && B_OFF % (BRB * 8) == 0), "the boxes at the swizzle's atoms");
};

// The decode kernel's dynamic shared memory: the warps' rings, and past them
// (split K) the other ranks' sums that rank 0 adds (decode_body's xred).
template <typename L>
__host__ __device__ constexpr int decode_smem(int WK, int S, int KS) {
  return WK * S * L::BYTES + (KS - 1) * L::AR * decode_red_stride(L::BR / 8) * 4;
}
// With the codes by TMA (decode_kernel_one): room to start the rings at the
// 1024-byte atom, and past them each warp's S stage barriers.
template <typename L>
__host__ __device__ constexpr int decode_tma_smem(int WK, int S, int KS) {
  return decode_smem<L>(WK, S, KS) + 1024 + WK * S * 8;
}

// Byte offset of 16-byte chunk c of row r in a stage's rows of rb bytes.
__device__ __forceinline__ int swz_chunk(int r, int c, int rb) {
  return r * rb + ((rb == 128 ? c ^ (r & 7) : c ^ ((r >> 1) & 3)) << 4);
}

// The kernel's body (decode_kernel, decode_kernel_one below: the same
// arithmetic under two register budgets; TM, decode_kernel_one's: the codes
// by TMA, T their descriptors, instead of the lanes' cp.async).
template <int MT, int NW, int WK, int S, int TA, int TB, bool FA4, bool FB4, bool SA16, bool SB16, int KS, bool TM = false>
__device__ __forceinline__ void decode_body(const Params &P, [[maybe_unused]] const TmaMaps *T = nullptr) {
  using L = DecodeStage<MT, NW, FA4, FB4, SA16, SB16, TM>;
  // NV: NVFP4 × NVFP4. MIX: one operand with E4M3 scales per 16 (NVFP4), the
  // other E8M0 per 32: per-16 block sums, each promoted with its two scales.
  constexpr bool NV = SA16 && SB16, MIX = SA16 != SB16, P16 = SA16 || SB16;
  // NVFP4 × NVFP4 with both E4M3 scales in the FP16 codes and a 32-block's
  // two k16 chained (NV_CHAIN, the first branch below) where a warp holds at
  // least 8 tiles of 8 weight rows by 16 rows of A a group, the shapes whose
  // independent tiles hide the chain's latency; per-16-block sums promoted
  // with the weight's scale otherwise. Measured against each other on the
  // H200 at K8192 (bench/RESULTS.md, "B's scale in B's codes", calls 3-4):
  // the chain 9 % faster at M16 N8192 (8 tiles), 12 % at M32 N8192 and 15 %
  // at M64 N8192 (16 tiles), but, in the form before its cross-block pairs,
  // 4-9 % slower at M16 N28672, N4096, N2048, N1024 and N256 (2 or 4 tiles).
  constexpr bool NV_CHAIN = NV && NW * MT >= 8;
  // FP4 × FP4 but NVFP4 × NVFP4 (its own branch below, on the FP16 tensor
  // cores): the codes as int8 (twice their values) on the integer tensor
  // cores, block sums exact; the 4 comes out of the scales.
  constexpr bool INT = FA4 && FB4 && !NV;
  constexpr float ISC = INT ? 0.25f : 1.0f;
  // An FP8 operand A against E2M1 codes B (MXFP8 × MXFP4, MXFP8 × NVFP4):
  // B's codes go to the FP16 mma as 2^-13 times their values
  // (e2m1x8_to_f16x's 2^-14 times 2 by mul.rn.f16x2, exact: 16 instructions
  // per 8 codes, against 24 through E4M3 and the conversion unit), so the
  // block sums come out times 2^-13, exactly: a power of two scales every
  // product alike, the truncation inside the mma is relative to the largest,
  // and every B value stays a normal FP16 number as before (with 2^-14 the
  // code 0.5 became subnormal, and E5M2 × MXFP4 sums differed from the
  // E4M3-and-back path in 91 of 339482 outputs, within the bound but not the
  // same bits: bench/RESULTS.md, "an FP8 A against E2M1 B"). A's E8M0 scale,
  // applied first in every promotion below, carries the 2^13 back (inside
  // the E8M0 fast range, [2^-63, 2^64] times 2^13, exact). A's FP8 codes pair
  // elements (0, 2) and (1, 3) of each four in its FP16 registers, as
  // e2m1x8_to_f16x does.
  constexpr bool B16X = !FA4 && FB4;
  constexpr float BSC = B16X ? 8192.0f : 1.0f;
  static_assert(!SA16 || FA4, "E4M3 scales per 16 come with E2M1 codes");
  static_assert(!SB16 || FB4, "E4M3 scales per 16 come with E2M1 codes");
  extern __shared__ __align__(16) uint8_t dsm_raw[];
  // TM: the ring at the 1024-byte atom, and each warp's stage barriers (TMA's
  // bytes complete on them) past the ring and xred (the launch allows for both).
  uint8_t *dsm = TM ? dsm_raw + ((1024u - (smem_u32(dsm_raw) & 1023u)) & 1023u) : dsm_raw;
  [[maybe_unused]] uint64_t *tbar = reinterpret_cast<uint64_t *>(dsm + decode_smem<L>(WK, S, KS));
  constexpr int NBA = SA16 ? 8 : 4, NBB = SB16 ? 8 : 4;  // scale blocks per 128-element group
  constexpr int NWA = L::NWA, NWB = L::NWB;
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, q = lane % 4;
  // KS > 1: a cluster of KS CTAs shares the tile's K groups (split K; the
  // CTA of rank r takes the warps' groups of the cluster's warps r·WK ..
  // r·WK + WK − 1), and rank 0 adds the others' sums (at the end below).
  const int rank = KS > 1 ? (int)cluster_rank() : 0;
  if constexpr (KS > 1) cluster_arrive_relaxed();  // this CTA has started (waited for before a peer writes into rank 0)
  const int64_t n0 = (int64_t)(blockIdx.x / KS) * L::BR;
  const int64_t K = P.K;
  const int KG = (int)((K + 127) / 128);
  const int64_t nbA = SA16 ? K / 16 : K / 32, nbB = SB16 ? K / 16 : K / 32;
  const uint32_t oneA = SA16 ? 0x38383838u : 0x7F7F7F7Fu, oneB = SB16 ? 0x38383838u : 0x7F7F7F7Fu;  // 1.0 in E4M3 / E8M0
  uint8_t *ring = dsm + w * S * L::BYTES;
  [[maybe_unused]] uint64_t *bar = tbar + (TM ? w * S : 0);
  if constexpr (TM) {
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&T->b)) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&T->a)) : "memory");
      for (int s = 0; s < S; s++) mbar_init(&bar[s], 1);  // lane 0's arrival with the stage's bytes
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncwarp();
  }
  // e2m1x8_to_u8's tables, held in registers: loaded, since a constant goes
  // to a uniform register and is copied into a vector register before every
  // permute.
  const uint32_t tab_p0 = kU8Tables[0], tab_q0 = kU8Tables[1];
  constexpr int WKS = WK * KS;      // the warps that share the tile's K groups
  const int wk = rank * WK + w;     // this warp among them
  const int G = wk < KG ? (KG - 1 - wk) / WKS + 1 : 0;  // this warp's groups: wk, wk+WKS, ...

  // Stage i of the warp (group kg = wk + i·WKS) by cp.async: 16-byte chunks of
  // rows (TM: one box of each operand by TMA instead), one 4-byte scale word
  // per row (two for NVFP4). The lane's copies
  // are the same in every group but for the group's offset, so their
  // addresses are worked out here once (the per-group address arithmetic
  // was 40 % of the kernel's instructions):
  //   - data: lane l copies chunk l % CH of rows l / CH + RS·j (j < J), CH
  //     the chunks per row (8 FP8, 4 E2M1), RS = 32 / CH. Rows RS apart are
  //     512 bytes apart in the stage, and swz_chunk's pattern repeats every
  //     two j, so the destination is off[j & 1] + 512·j. Rows past the
  //     operand are not copied (their stale bytes only reach outputs that are
  //     never stored); chunks past K are zero-filled (K % 32 == 0: a chunk is
  //     whole inside or outside K), read from the row's start.
  //   - scales: word id = l + 32·j of the stage's AR·NWA + BR·NWB words; rows
  //     past the operand and blocks past K read 1.0 from kDecodeOne (padding
  //     may hold anything; the promotion's fast test reads these words).
  constexpr int ACH = L::ARB / 16, BCH = L::BRB / 16, ARS = 32 / ACH, BRS = 32 / BCH;
  constexpr int JA = L::AR / ARS, JB = L::BR / BRS;
  static_assert(ARS * L::ARB == 512 && BRS * L::BRB == 512, "a lane's copies are 512 bytes apart");
  const int ra0 = lane / ACH, ca0 = lane % ACH, rb0 = lane / BCH, cb0 = lane % BCH;
  const int offA[2] = {swz_chunk(ra0, ca0, L::ARB), swz_chunk(ra0 + ARS, ca0, L::ARB) - 512};
  const int offB[2] = {swz_chunk(rb0, cb0, L::BRB), swz_chunk(rb0 + BRS, cb0, L::BRB) - 512};
  // Copy j's row lies inside its operand where ARS·j < arem (BRS·j < brem):
  // 32-bit tests against an immediate (ptxas redid each copy's test in every
  // group, as a 64-bit compare when it was n0 + rb0 + BRS·j < N).
  const int arem = (int)P.M - ra0;
  const int brem = (int)(P.N - n0 < L::BR ? P.N - n0 : L::BR) - rb0;
  const uint8_t *arow = P.a.data + (int64_t)ra0 * P.a.ld, *brow = P.b.data + (n0 + rb0) * P.b.ld;
  const int64_t astep = (int64_t)ARS * P.a.ld, bstep = (int64_t)BRS * P.b.ld;
  constexpr int NSW = L::AR * NWA + L::BR * NWB, JS = (NSW + 31) / 32;  // scale words per stage, per lane
  const uint8_t *sbase[JS];
  int sstep[JS], kglim[JS];  // word j: group kg's word at sbase + kg·sstep while kg < kglim
#pragma unroll
  for (int j = 0; j < JS; j++) {
    const int id = lane + 32 * j;
    const bool isa = id < L::AR * NWA;
    const int nw = isa ? NWA : NWB, nb = isa ? NBA : NBB;
    const int r = (isa ? id : id - L::AR * NWA) / nw, x = (isa ? id : id - L::AR * NWA) % nw;
    const Operand &op = isa ? P.a : P.b;
    const int64_t row = isa ? r : n0 + r, nbt = isa ? nbA : nbB;
    sbase[j] = decode_one(isa ? SA16 : SB16), sstep[j] = 0, kglim[j] = 0;
    if (id < NSW && row < op.rows) {
      sbase[j] = op.scale + scale_index(row, 4 * x, op.scale_stride, op.swizzled);
      sstep[j] = op.swizzled ? nb / 4 * 512 : nb;
      kglim[j] = (int)((nbt - 4 * x + nb - 1) / nb);
    }
  }
  auto issue = [&](int i) {
    if (i < G) {
      const int kg = wk + i * WKS;
      const uint32_t st = smem_u32(ring + (i % S) * L::BYTES);
      const int64_t k0 = (int64_t)kg * 128;
      // The lane's chunk of this group, or (past K) its row's start, zero-filled.
      const bool kva = k0 + ca0 * (FA4 ? 32 : 16) < K, kvb = k0 + cb0 * (FB4 ? 32 : 16) < K;
      const uint8_t *pa = kva ? arow + (FA4 ? k0 / 2 : k0) + ca0 * 16 : arow;
      const uint8_t *pb = kvb ? brow + (FB4 ? k0 / 2 : k0) + cb0 * 16 : brow;
      if constexpr (TM) {
        // Both boxes by TMA (rows past the operands and K past its end read
        // as zeros), completing on the stage's barrier. Every lane's reads of
        // this stage (group i - 1) precede the __syncwarp at the loop's top;
        // the proxy fence orders them before the TMA's writes.
        if (lane == 0) {
          uint64_t *b = &bar[i % S];
          fence_proxy_async();
          mbar_arrive_expect_tx(b, L::AR * L::ARB + L::BR * L::BRB);
          tma_load_2d(ring + (i % S) * L::BYTES + L::B_OFF, &T->b, (int)(FB4 ? k0 / 2 : k0), (int)n0, b);
          tma_load_2d(ring + (i % S) * L::BYTES + L::A_OFF, &T->a, (int)(FA4 ? k0 / 2 : k0), 0, b);
        }
      } else {
#pragma unroll
        for (int j = 0; j < JA; j++, pa += astep)
          if (ARS * j < arem) cp_async16(st + L::A_OFF + offA[j & 1] + 512 * j, pa, kva);
#pragma unroll
        for (int j = 0; j < JB; j++, pb += bstep)
          if (BRS * j < brem) cp_async16(st + L::B_OFF + offB[j & 1] + 512 * j, pb, kvb);
      }
#pragma unroll
      for (int j = 0; j < JS; j++)
        if (lane + 32 * j < NSW) {
          const uint8_t *src = kg < kglim[j] ? sbase[j] + (int64_t)kg * sstep[j] : decode_one(lane + 32 * j < L::AR * NWA ? SA16 : SB16);
          asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(st + L::SA_OFF + 4 * (lane + 32 * j)), "l"(src) : "memory");
        }
    }
    cp_async_commit();  // also when empty: every iteration waits for the same count
  };

  float acc[MT][NW][4];
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int t = 0; t < NW; t++)
#pragma unroll
      for (int e = 0; e < 4; e++) acc[mt][t][e] = 0.f;

#pragma unroll
  for (int i = 0; i < S - 1; i++) issue(i);
  for (int i = 0; i < G; i++) {
    // Stage i-1 is free once every lane has computed group i-1: its refill
    // (group i+S-1) goes out before the wait for stage i, so that it is in
    // flight during that wait as well as during group i's compute.
    __syncwarp();
    issue(i + S - 1);
    cp_async_wait<S - 1>();  // this lane's copies of stage i have landed
    __syncwarp();            // and every lane's
    if constexpr (TM) mbar_wait(&bar[i % S], (uint32_t)(i / S) & 1u);  // and the stage's boxes
    const int kg = wk + i * WKS;
    const uint8_t *st = ring + (i % S) * L::BYTES;
    const bool whole = (int64_t)kg * 128 + 128 <= K;
    // The 32-blocks of a group past K are computed like the others, not
    // skipped: their codes are zero-filled (issue) and their scale bytes 1.0
    // (below), so each adds an exact zero block sum (T = 0 with finite
    // scales: acc + 0 = acc, but for an acc of -0, which only a negative
    // sum below FP32's least subnormal gives, and which becomes +0: within
    // the bound either way). A test per block would end the straight-line
    // code of a group at every 32-block, so that no block's shared loads
    // could be scheduled during the previous block's promotion.

    // Fragments of lane (g, q): 8 elements of each 32-block of row g (+8 for
    // A's second half), as two registers (above the kernel: which).
    // One block sum of FP4 × FP4 codes, A as int8 and B as biased uint8, c
    // from a_corr: kMagic + 4·T_b as a float, exact (|4·T_b| ≤ 32·144 < 2^22;
    // no int32 sum overflows: |A·B'| ≤ 32·12·24, |12·ΣA| ≤ 32·12·12,
    // kMagicBits < 2^31 - 2^14). A scaling by s then reads fmaf(d, s,
    // -kMagic·s): both products exact (s a power of two, or E4M3 / 4: 4
    // significant bits against kMagic's 2), so the one rounding meets the
    // exact 4·T_b·s, which FP32 holds (≤ 13 + 4 significant bits).
    auto block_sum = [&](float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, const int (&c)[4]) {
      int di[4];
      mma_s8u8_k32(di, a, b0, b1, c);
#pragma unroll
      for (int e = 0; e < 4; e++) d[e] = __int_as_float(di[e]);
    };
    // The same for one 16-block (NVFP4): 4·T_b, |4·T_b| ≤ 16·144.
    auto block_sum16 = [&](float (&d)[4], uint32_t a0, uint32_t a1, uint32_t b0, const int (&c)[4]) {
      int di[4];
      mma_s8u8_k16(di, a0, a1, b0, c);
#pragma unroll
      for (int e = 0; e < 4; e++) d[e] = __int_as_float(di[e]);
    };
    // -12·ΣA + kMagicBits over a 32-block (rows g, g+8; the same in every
    // column) and over the two 16-blocks of NVFP4's lanes: B's bias taken out
    // of block_sum, and the float conversion's offset put in.
    auto a_corr = [&](const uint32_t (&a)[4], int (&c)[2][4]) {
      if constexpr (P16) {
        mma_s8_k16(c[0], a[0], a[1], kNegBias, kMagicBits);
        mma_s8_k16(c[1], a[2], a[3], kNegBias, kMagicBits);
      } else {
        mma_s8_k32(c[0], a, kNegBias, kNegBias, kMagicBits);
      }
    };
    // The 8 E2M1 codes of 32-block u of row r that lane (g, q) holds with
    // 16-blocks (P16): elements 4q..4q+3 of each (bytes 2q and 8+2q of the
    // chunk), the first block's in the low 16 bits.
    auto codes16 = [&](const uint8_t *base, int r, int u, int rb) -> uint32_t {
      const uint8_t *c = base + swz_chunk(r, u, rb) + 2 * q;
      return *reinterpret_cast<const uint16_t *>(c) | ((uint32_t) * reinterpret_cast<const uint16_t *>(c + 8) << 16);
    };
    // The 8 E2M1 codes of 32-block u of row r that lane (g, q) holds with
    // 32-blocks: elements 8q..8q+7.
    auto codes32 = [&](const uint8_t *base, int r, int u, int rb) -> uint32_t {
      return *reinterpret_cast<const uint32_t *>(base + swz_chunk(r, u, rb) + 4 * q);
    };
    auto frag = [&](const uint8_t *base, int r, int u, bool fp4, int rb, uint32_t &lo, uint32_t &hi, bool bias = false) {
      if (fp4) {
        uint32_t v;  // 8 codes: elements 8q.., or (P16) 4q.. and 16+4q.. (bytes 2q, 8+2q)
        if constexpr (P16) {
          v = codes16(base, r, u, rb);
        } else {
          v = codes32(base, r, u, rb);
        }
        if (INT && bias)
          e2m1x8_to_u8(v, lo, hi, tab_p0, tab_q0);
        else if constexpr (INT)
          lo = e2m1x4_to_s8(v), hi = e2m1x4_to_s8(v >> 16);
        else
          e2m1x8_to_e4m3x8(v, lo, hi);
      } else if constexpr (P16) {  // elements 4q.. and 16+4q..: chunks 2u and 2u+1
        lo = *reinterpret_cast<const uint32_t *>(base + swz_chunk(r, 2 * u, rb) + 4 * q);
        hi = *reinterpret_cast<const uint32_t *>(base + swz_chunk(r, 2 * u + 1, rb) + 4 * q);
      } else {
        const uint2 v = *reinterpret_cast<const uint2 *>(base + swz_chunk(r, 2 * u + (q >> 1), rb) + 8 * (q & 1));
        lo = v.x, hi = v.y;
      }
    };
    // Scale words (rows past the operand and words past K hold 1.0, copied
    // so); in the last group, the bytes of blocks past K inside a word are
    // set to 1.0 too (padding may hold anything).
    const uint32_t *SA = reinterpret_cast<const uint32_t *>(st + L::SA_OFF), *SBw = reinterpret_cast<const uint32_t *>(st + L::SB_OFF);
    uint32_t sa[MT][2][NWA], sb[NW][2][NWB];
#pragma unroll
    for (int x = 0; x < NWA; x++)
#pragma unroll
      for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) sa[mt][h][x] = SA[(16 * mt + 8 * h + g) * NWA + x];
    // B's scale words of the lane's columns 2q, 2q+1 in every tile. An FP8 A
    // against NVFP4 B reads them only on its FP64 path (its fast path reads
    // row 8t+g's words instead), so there they are loaded in that branch.
    constexpr bool LAZY_SB = B16X && SB16;
    constexpr bool NO_SB = NV && NV_CHAIN;  // B's scales go into its codes (that branch reads them itself)
    auto load_sb = [&]() {
#pragma unroll
      for (int x = 0; x < NWB; x++)
#pragma unroll
        for (int t = 0; t < NW; t++)
#pragma unroll
          for (int e = 0; e < 2; e++) sb[t][e][x] = SBw[(8 * t + 2 * q + e) * NWB + x];
    };
    if constexpr (!LAZY_SB && !NO_SB) load_sb();
    // Bytes of real blocks in word x when `left` blocks of the group are.
    auto real = [](int64_t left, int x) -> uint32_t {
      const int64_t n = left - 4 * x;
      return n <= 0 ? 0u : n < 4 ? 0xFFFFFFFFu >> (32 - 8 * n) : 0xFFFFFFFFu;
    };
    // In the last group, the bytes of blocks past K in scale words wd[r][h][x]
    // (left: the operand's blocks from the group's first on) set to one.
    auto mask_real = [&](auto &wd, int64_t left, uint32_t one) {
      using W = std::remove_reference_t<decltype(wd)>;
      constexpr int R = std::extent<W, 0>::value, H = std::extent<W, 1>::value, X = std::extent<W, 2>::value;
#pragma unroll
      for (int x = 0; x < X; x++) {
        const uint32_t m = real(left, x);
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
          for (int h = 0; h < H; h++) wd[r][h][x] = (wd[r][h][x] & m) | (one & ~m);
      }
    };
    auto mask_sb = [&]() { mask_real(sb, nbB - (int64_t)kg * NBB, oneB); };
    if (!whole) {
      mask_real(sa, nbA - (int64_t)kg * NBA, oneA);
      if constexpr (!LAZY_SB && !NO_SB) mask_sb();
    }
    // The scale words of column g in every tile (row 8t+g of B, which lane
    // (g, q) holds in B's fragments) for the paths that put the weight's E4M3
    // scales into its FP16 codes; in the last group the bytes of blocks past
    // K set to 1.0 as above.
    auto load_sg = [&](uint32_t (&sg)[NW][1][2]) {
#pragma unroll
      for (int t = 0; t < NW; t++)
#pragma unroll
        for (int x = 0; x < 2; x++) sg[t][0][x] = SBw[(8 * t + g) * NWB + x];
      if (!whole) mask_real(sg, nbB - (int64_t)kg * NBB, oneB);
    };
    // Weight row 8t + g's NVFP4 codes of 32-block u as FP16 b·sb·2^-14 in
    // cross-block pairs (e2m1x8_to_f16x_cross: element 4q+i of 16-block 2u,
    // 16+4q+i of 2u+1), one multiply by its scale pair (sb_2u, sb_2u+1) from
    // load_sg's words: exact, subnormal below 2^-14.
    auto b_cross = [&](const uint32_t (&sg)[NW][1][2], int t, int u, uint32_t (&bh)[4]) {
      e2m1x8_to_f16x_cross(codes16(st + L::B_OFF, 8 * t + g, u, L::BRB), bh);
      const uint32_t sp = e4m3_half_f16(sg[t][0][u / 2], u % 2);
      bh[0] = hmul2(bh[0], sp), bh[1] = hmul2(bh[1], sp), bh[2] = hmul2(bh[2], sp), bh[3] = hmul2(bh[3], sp);
    };

    if constexpr (NV && NV_CHAIN) {
      // NVFP4 × NVFP4 on the FP16 tensor cores, both E4M3 scales inside the
      // mma, so that a 32-block's two 16-block sums chain in it (the second
      // k16 takes the first's sum as its C) and each is added to acc once.
      // The K order inside the 32-block is permuted alike on both sides, so
      // that every FP16 pair holds one element of 16-block 2u (low half) and
      // one of 2u+1 (high half), elements 4q+i and 16+4q+i
      // (e2m1x8_to_f16x_cross): one conversion of the two E4M3 scales
      // (e4m3x2_to_f16x2) then multiplies a pair, with no broadcast.
      //   - A's codes as a·sa·2^-14 and B's as b·sb·2^-14 (the widening's
      //     v·2^-14 times the scale pair, one mul.rn.f16x2, exact: v·s =
      //     (2v)·m·2^(E-4) with 2v ≤ 12, m ≤ 15 the scale's significand and
      //     E ≥ -6, so at most 8 significant bits and a multiple of 2^-10, and
      //     times 2^-14 a multiple of 2^-24 below 0.17: an FP16 value,
      //     subnormal below 2^-14);
      //   - the mma's products (a·sa)·(b·sb)·2^-28 are exact, and its sum over
      //     the 32-block, T' = (T_2u·sa_2u·sb_2u + T_2u+1·sa_2u+1·sb_2u+1)·2^-28,
      //     errs by at most 32·2^-F times the larger block's largest product
      //     (F fraction bits kept below the largest term: the probe measures 17
      //     for the FP16 mma, the bound assumes 13), within the two 16-blocks'
      //     terms of the bound, each at least 32·2^-13 times its own largest
      //     product; the C input is added no less precisely than the products
      //     (the probe's chainC rows), as for the FP8 × NVFP4 fast path below;
      //   - acc'' = acc·2^-28 (restored once after the loop, exact) adds T'
      //     with one FP32 rounding per 32-block, inside the bound's
      //     (n_blocks + 2)·2^-24 term; every term is a multiple of 2^-48, so
      //     no rounding meets FP32's subnormal range.
      // Against the other branch's exact 16-block sums T·sa (B at b·2^-14),
      // each promoted by fma(d, sb, acc), it takes per 32-block and 8 weight
      // rows 4 FP16 multiplies, 4 adds and one scale conversion where that
      // takes 8 FMAs and two E4M3 pairs converted to four floats, and half
      // the multiplies and conversions for A (bench/RESULTS.md, "B's scale in
      // B's codes", calls 2 and 4: 6-9 % faster at M16 N8192 K8192). B's
      // scale words: load_sg's.
      uint32_t sg[NW][1][2];
      load_sg(sg);
#pragma unroll
      for (int u = 0; u < 4; u++) {
        uint32_t ah[MT][2][4];  // [row tile][k16 x]: the mma's A registers
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
          uint32_t r0[4], r1[4];
          e2m1x8_to_f16x_cross(codes16(st + L::A_OFF, 16 * mt + g, u, L::ARB), r0);      // row g
          e2m1x8_to_f16x_cross(codes16(st + L::A_OFF, 16 * mt + 8 + g, u, L::ARB), r1);  // row g + 8
          const uint32_t s0 = e4m3_half_f16(sa[mt][0][u / 2], u % 2), s1 = e4m3_half_f16(sa[mt][1][u / 2], u % 2);
#pragma unroll
          for (int x = 0; x < 2; x++) {
            ah[mt][x][0] = hmul2(r0[2 * x], s0), ah[mt][x][1] = hmul2(r1[2 * x], s1);
            ah[mt][x][2] = hmul2(r0[2 * x + 1], s0), ah[mt][x][3] = hmul2(r1[2 * x + 1], s1);
          }
        }
#pragma unroll
        for (int t = 0; t < NW; t++) {
          uint32_t bh[4];
          b_cross(sg, t, u, bh);
#pragma unroll
          for (int mt = 0; mt < MT; mt++) {
            float d[4];
            hmma_k32_chain(d, ah[mt], bh);
            float *o = acc[mt][t];
            o[0] += d[0], o[1] += d[1], o[2] += d[2], o[3] += d[3];
          }
        }
      }
    } else if constexpr (NV) {
      // NVFP4 × NVFP4 on the FP16 tensor cores, A's scale inside the mma:
      // A's codes as FP16 a·sa (e2m1x8_to_f16x's a·2^-14, times 2^14, times
      // sa by mul.rn.f16x2, exact: a·sa has at most 6 significant bits and
      // lies in [2^-10, 2688], a normal FP16 value) and B's as b·2^-14 (normal
      // but for the code 0.5, at 2^-15), one mma k16 per 16-block with c = 0,
      // giving d = T·sa·2^-14 exactly, then acc' = fma(d, sb, acc') where
      // acc' = acc·2^-14 (restored once after the loop). The same bits as
      // fma(T·sa, sb, acc):
      //   - the block sum is exact: its 16 products are multiples of
      //     2^(E-5)·2^-14 (a·b a multiple of 1/4, sa = s·2^(E-3) with s < 16)
      //     below 2^(E+7)·2^-14, so truncating them to F fraction bits below
      //     the largest drops nothing for F ≥ 11, or F ≥ 12 if B's subnormal
      //     0.5 counts at FP16's least normal exponent (the probe measures
      //     17, the bound assumes 13), and the sum (16 significant bits) is an
      //     FP32 value (subnormal E4M3 scales s·2^-9: multiples of 2^-25 below
      //     2^-15, F ≥ 10). A is kept normal: as a subnormal FP16 value (a·sa
      //     times 2^-14, the first form of this code) the margin would need F
      //     up to 17 under that count (bench/RESULTS.md, "an FP8 A against
      //     E2M1 B", where a subnormal B changed E5M2 sums);
      //   - d·sb = T·sa·sb exactly, and every acc' is a multiple of 2^-34
      //     (the terms are multiples of 2^-20 before the 2^-14), so no
      //     rounding meets the subnormal range and each one is the unscaled
      //     rounding times 2^-14.
      // This replaced the integer path here (E2M1 codes as int8 on the IMMA
      // units, the sum then scaled by sa and by sb: two FMAs per element and
      // 16-block, and a correction mma per A block): bench/RESULTS.md, "NVFP4
      // decode on the FP16 tensor cores".
#pragma unroll
      for (int u = 0; u < 4; u++) {
        uint32_t ah[MT][2][4];  // [row tile][16-block 2u + x]: the mma's A registers
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
          uint32_t r0[4], r1[4], s0[2], s1[2];
          e2m1x8_to_f16x(codes16(st + L::A_OFF, 16 * mt + g, u, L::ARB), r0);      // row g
          e2m1x8_to_f16x(codes16(st + L::A_OFF, 16 * mt + 8 + g, u, L::ARB), r1);  // row g + 8
          e4m3_bcast2(sa[mt][0][u / 2], (2 * u) % 4, s0[0], s0[1]);
          e4m3_bcast2(sa[mt][1][u / 2], (2 * u) % 4, s1[0], s1[1]);
#pragma unroll
          for (int x = 0; x < 2; x++) {
            // 0x7400: 2^14 in both halves, so a·2^-14 becomes a, then a·sa.
            ah[mt][x][0] = hmul2(hmul2(r0[2 * x], 0x74007400u), s0[x]), ah[mt][x][1] = hmul2(hmul2(r1[2 * x], 0x74007400u), s1[x]);
            ah[mt][x][2] = hmul2(hmul2(r0[2 * x + 1], 0x74007400u), s0[x]), ah[mt][x][3] = hmul2(hmul2(r1[2 * x + 1], 0x74007400u), s1[x]);
          }
        }
#pragma unroll
        for (int t = 0; t < NW; t++) {
          uint32_t b[4];
          e2m1x8_to_f16x(codes16(st + L::B_OFF, 8 * t + g, u, L::BRB), b);
          // B's scales of 16-blocks 2u (.x) and 2u+1 (.y), columns 2q (c0) and 2q+1 (c1).
          const float2 c0 = e4m3_half(sb[t][0][u / 2], u % 2), c1 = e4m3_half(sb[t][1][u / 2], u % 2);
#pragma unroll
          for (int mt = 0; mt < MT; mt++) {
            const float z[4] = {0.f, 0.f, 0.f, 0.f};
            float d0[4], d1[4];
            hmma_k16(d0, ah[mt][0][0], ah[mt][0][1], ah[mt][0][2], ah[mt][0][3], b[0], b[1], z);  // 16-block 2u
            hmma_k16(d1, ah[mt][1][0], ah[mt][1][1], ah[mt][1][2], ah[mt][1][3], b[2], b[3], z);  // 16-block 2u+1
            float *o = acc[mt][t];
            o[0] = fmaf(d0[0], c0.x, o[0]), o[1] = fmaf(d0[1], c1.x, o[1]), o[2] = fmaf(d0[2], c0.x, o[2]), o[3] = fmaf(d0[3], c1.x, o[3]);
            o[0] = fmaf(d1[0], c0.y, o[0]), o[1] = fmaf(d1[1], c1.y, o[1]), o[2] = fmaf(d1[2], c0.y, o[2]), o[3] = fmaf(d1[3], c1.y, o[3]);
          }
        }
      }
    } else {
      // A's fragments of 32-block u, row tile mt: a (int8 or FP8 codes) and,
      // where the FP16 path runs, ah: the two k16's registers; on the integer
      // path, ac: B's bias correction (a_corr).
      auto a_frags = [&](int mt, int u, uint32_t (&a)[4], [[maybe_unused]] uint32_t (&ah)[2][4], [[maybe_unused]] int (&ac)[2][4]) {
        frag(st + L::A_OFF, 16 * mt + g, u, FA4, L::ARB, a[0], a[2]);
        frag(st + L::A_OFF, 16 * mt + 8 + g, u, FA4, L::ARB, a[1], a[3]);
        if constexpr (INT) {
          a_corr(a, ac);
        } else {
          uint32_t h0[4], h1[4];
          if constexpr (B16X) {  // bytes (0, 2, 1, 3): the pairs of e2m1x8_to_f16x
            fp8x8_to_f16<TA>(prmt(a[0], a[0], 0x3120), prmt(a[2], a[2], 0x3120), h0);
            fp8x8_to_f16<TA>(prmt(a[1], a[1], 0x3120), prmt(a[3], a[3], 0x3120), h1);
          } else {
            fp8x8_to_f16<TA>(a[0], a[2], h0);
            fp8x8_to_f16<TA>(a[1], a[3], h1);
          }
          ah[0][0] = h0[0], ah[0][1] = h1[0], ah[0][2] = h0[1], ah[0][3] = h1[1];
          ah[1][0] = h0[2], ah[1][1] = h1[2], ah[1][2] = h0[3], ah[1][3] = h1[3];
        }
      };
      // B's fragments of 32-block u, row tile t: b0, b1 (integer codes) or,
      // where the FP16 path runs, bh: the two k16's registers (B16X: E2M1
      // codes at 2^-13 times their values).
      auto b_frags = [&](int t, int u, uint32_t &b0, uint32_t &b1, [[maybe_unused]] uint32_t (&bh)[4]) {
        if constexpr (B16X) {
          e2m1x8_to_f16x(P16 ? codes16(st + L::B_OFF, 8 * t + g, u, L::BRB) : codes32(st + L::B_OFF, 8 * t + g, u, L::BRB), bh);
#pragma unroll
          for (int i = 0; i < 4; i++) bh[i] = hmul2(bh[i], 0x40004000u);  // times 2 (FP16 2.0 in both halves): 2^-13
        } else {
          frag(st + L::B_OFF, 8 * t + g, u, FB4, L::BRB, b0, b1, true);
          if constexpr (!INT) fp8x8_to_f16<TB>(b0, b1, bh);
        }
      };
      if constexpr (MIX) {
        // One operand NVFP4 (E4M3 per 16), the other E8M0 per 32: each 16-block
        // sum on its own (FP16: two unchained k16; FP4 × FP4: integer k16),
        // promoted as fma(T·s8, s4, acc), s8 the E8M0 scale (an exact scaling
        // in the fast range, the rule of the E8M0 path below) and s4 the E4M3
        // one: the exact T·s8·s4 + acc rounded once. Fast range: the E8M0
        // side's bytes in [64, 191]; else the group is promoted in FP64. An
        // FP8 A against NVFP4 B takes its own fast path (first in
        // promote_group): B's scales inside the mma, one promotion per 32.
        uint32_t ok = 0x80808080u;
        if constexpr (!SA16) {
#pragma unroll
          for (int mt = 0; mt < MT; mt++) ok &= e8m0x4_in_fast_range(sa[mt][0][0]) & e8m0x4_in_fast_range(sa[mt][1][0]);
        } else {
#pragma unroll
          for (int t = 0; t < NW; t++) ok &= e8m0x4_in_fast_range(sb[t][0][0]) & e8m0x4_in_fast_range(sb[t][1][0]);
        }
        auto promote_group = [&](auto fast_tag) {
          constexpr bool fast = decltype(fast_tag)::value;
          if constexpr (fast && B16X && SB16) {
            // An FP8 A (E8M0 per 32) against NVFP4 B, fast range: B's E4M3
            // scale goes into B's codes, so that a 32-block's two 16-block
            // sums chain in the mma and the promotion is one FMA with A's
            // scale. As in the chained NVFP4 × NVFP4 branch, each FP16 pair
            // holds element 4q+i of 16-block 2u and 16+4q+i of 2u+1 on both
            // sides, and B's codes are v·sb·2^-14 (e2m1x8_to_f16x_cross's
            // v·2^-14 times the scale pair by one mul.rn.f16x2: exact, a
            // multiple of 2^-24 with at most 8 significant bits, subnormal
            // below 2^-14); the mma's products a·v·sb·2^-14 are exact and its
            // 32-element sum T' = (T_2u·sb_2u + T_2u+1·sb_2u+1)·2^-14 errs by
            // at most 32·2^-F times the larger block's largest product, within
            // the two 16-blocks' terms of the bound (each at least 32·2^-F
            // times its own largest product). That takes the second mma's C
            // (the first k16's sum) to be added no less precisely than its
            // products, as the FP8 pairs' two chained k16 per 32-block
            // already do: the probe's chainC rows measure it (L·2^-17, E4M3's
            // reach, survives next to a C of 16·L; bench/RESULTS.md, "the
            // chained mma's C input"). Then acc = fma(T', sa·2^14, acc),
            // sa·2^14 a float and T'·sa·2^14 exact in the fast range: one
            // rounding for the pair of blocks where there were two. B's scale
            // words: load_sg's.
            uint32_t sg[NW][1][2];
            load_sg(sg);
#pragma unroll
            for (int u = 0; u < 4; u++) {
              uint32_t a[MT][4], ah[MT][2][4];
              float ra[MT][2];
#pragma unroll
              for (int mt = 0; mt < MT; mt++) {
                // A's FP8 codes of rows g and g+8 paired across the 16-blocks
                // as B's below: (element 4q+i of block 2u, 16+4q+i of 2u+1).
                frag(st + L::A_OFF, 16 * mt + g, u, false, L::ARB, a[mt][0], a[mt][2]);
                frag(st + L::A_OFF, 16 * mt + 8 + g, u, false, L::ARB, a[mt][1], a[mt][3]);
                uint32_t h0[4], h1[4];
                fp8x8_to_f16<TA>(prmt(a[mt][0], a[mt][2], 0x5140), prmt(a[mt][0], a[mt][2], 0x7362), h0);
                fp8x8_to_f16<TA>(prmt(a[mt][1], a[mt][3], 0x5140), prmt(a[mt][1], a[mt][3], 0x7362), h1);
                ah[mt][0][0] = h0[0], ah[mt][0][1] = h1[0], ah[mt][0][2] = h0[1], ah[mt][0][3] = h1[1];
                ah[mt][1][0] = h0[2], ah[mt][1][1] = h1[2], ah[mt][1][2] = h0[3], ah[mt][1][3] = h1[3];
                // A's E8M0 scale times 2^14, B's codes' 2^-14 (exact in the fast range).
                ra[mt][0] = e8m0_byte(sa[mt][0][0], u) * 16384.0f, ra[mt][1] = e8m0_byte(sa[mt][1][0], u) * 16384.0f;
              }
#pragma unroll
              for (int t = 0; t < NW; t++) {
                uint32_t bh[4];
                b_cross(sg, t, u, bh);  // B's codes as b·sb·2^-14, the chained NVFP4 × NVFP4 branch's
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                  float d[4];
                  hmma_k32_chain(d, ah[mt], bh);
                  float *o = acc[mt][t];
                  o[0] = fmaf(d[0], ra[mt][0], o[0]), o[1] = fmaf(d[1], ra[mt][0], o[1]);
                  o[2] = fmaf(d[2], ra[mt][1], o[2]), o[3] = fmaf(d[3], ra[mt][1], o[3]);
                }
              }
            }
            return;
          }
          if constexpr (LAZY_SB && !fast) {
            load_sb();
            if (!whole) mask_sb();
          }
          // E8M0 byte u of w, times ISC (exact); on the fast path also times
          // BSC (inside the fast range, exact), on the FP64 one not: there
          // the byte may be up to 254 and 2^127·2^13 is no float, so the
          // promotion takes BSC into d in double instead.
          auto e8 = [&](uint32_t w, int u) -> float {
            if constexpr (fast)
              return e8m0_byte(w, u) * ISC * BSC;
            else
              return e8m0_to_float((w >> (8 * u)) & 255) * ISC;
          };
#pragma unroll
          for (int u = 0; u < 4; u++) {
            uint32_t a[MT][4];
            [[maybe_unused]] uint32_t ah[MT][2][4];
            [[maybe_unused]] int ac[MT][2][4];
            float fa[MT][2][2];  // A's scales: [mt][16-block 2u+x][row g, g+8]
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
              a_frags(mt, u, a[mt], ah[mt], ac[mt]);
              if constexpr (SA16) {
                const float2 r0 = e4m3_half(sa[mt][0][u / 2], u % 2), r1 = e4m3_half(sa[mt][1][u / 2], u % 2);  // rows g, g+8
                fa[mt][0][0] = r0.x, fa[mt][0][1] = r1.x, fa[mt][1][0] = r0.y, fa[mt][1][1] = r1.y;
              } else {
                fa[mt][0][0] = fa[mt][1][0] = e8(sa[mt][0][0], u);
                fa[mt][0][1] = fa[mt][1][1] = e8(sa[mt][1][0], u);
              }
            }
#pragma unroll
            for (int t = 0; t < NW; t++) {
              [[maybe_unused]] uint32_t b0, b1;
              [[maybe_unused]] uint32_t bh[4];
              b_frags(t, u, b0, b1, bh);
              float fb[2][2];  // B's scales: [16-block 2u+x][column 2q, 2q+1]
              if constexpr (SB16) {
                const float2 c0 = e4m3_half(sb[t][0][u / 2], u % 2), c1 = e4m3_half(sb[t][1][u / 2], u % 2);  // columns 2q, 2q+1
                fb[0][0] = c0.x, fb[0][1] = c1.x, fb[1][0] = c0.y, fb[1][1] = c1.y;
              } else {
                fb[0][0] = fb[1][0] = e8(sb[t][0][0], u);
                fb[0][1] = fb[1][1] = e8(sb[t][1][0], u);
              }
#pragma unroll
              for (int mt = 0; mt < MT; mt++) {
                float d[2][4];
                if constexpr (INT) {
                  block_sum16(d[0], a[mt][0], a[mt][1], b0, ac[mt][0]);
                  block_sum16(d[1], a[mt][2], a[mt][3], b1, ac[mt][1]);
#pragma unroll
                  for (int e = 0; e < 8; e++) d[e / 4][e % 4] -= kMagic;  // exact: 4·T_b
                } else {
                  const float z[4] = {0.f, 0.f, 0.f, 0.f};
                  hmma_k16(d[0], ah[mt][0][0], ah[mt][0][1], ah[mt][0][2], ah[mt][0][3], bh[0], bh[1], z);
                  hmma_k16(d[1], ah[mt][1][0], ah[mt][1][1], ah[mt][1][2], ah[mt][1][3], bh[2], bh[3], z);
                }
                float *o = acc[mt][t];
#pragma unroll
                for (int x = 0; x < 2; x++)
#pragma unroll
                  for (int e = 0; e < 4; e++) {
                    const float s8 = SA16 ? fb[x][e & 1] : fa[mt][x][e >> 1], s4 = SA16 ? fa[mt][x][e >> 1] : fb[x][e & 1];
                    if constexpr (fast)
                      o[e] = fmaf(d[x][e] * s8, s4, o[e]);
                    else
                      o[e] = (float)fma((double)d[x][e] * BSC, (double)s8 * (double)s4, (double)o[e]);
                  }
              }
            }
          }
        };
        // Warp-uniform: the branches hold mma.sync, which every lane must run.
        if (__all_sync(0xFFFFFFFFu, ok == 0x80808080u))
          promote_group(std::true_type{});
        else
          promote_group(std::false_type{});
      } else {
        // E8M0: the fast path needs every exponent byte in [64, 191] (bit 7 ≠
        // bit 6): then T·sa is an exact power-of-two scaling of T (|T| in
        // [2^-32, 2^37] for FP8 codes, sa in [2^-63, 2^64]) and fma(T·sa, sb,
        // acc) rounds the exact T·sa·sb + acc once, as the tile kernel's
        // fma(T, sa·sb, acc). Otherwise (scales near the ends of the E8M0
        // range, NaN) the group is promoted in FP64.
        uint32_t ok = 0x80808080u;
#pragma unroll
        for (int mt = 0; mt < MT; mt++) ok &= e8m0x4_in_fast_range(sa[mt][0][0]) & e8m0x4_in_fast_range(sa[mt][1][0]);
#pragma unroll
        for (int t = 0; t < NW; t++) ok &= e8m0x4_in_fast_range(sb[t][0][0]) & e8m0x4_in_fast_range(sb[t][1][0]);
        // Warp-uniform: the branches hold mma.sync, which every lane must run.
        const bool fast_group = __all_sync(0xFFFFFFFFu, ok == 0x80808080u);
        // One branch per group: the fast path is straight-line code.
        auto promote_group = [&](auto fast_tag) {
          constexpr bool fast = decltype(fast_tag)::value;
    #pragma unroll
          for (int u = 0; u < 4; u++) {
            // INT: int8 fragments for IMMA. Else FP16 fragments for two HMMA k16
            // (what ptxas makes of an FP8 mma.sync on sm_90, A converted once per
            // block instead of once per mma): the low register's elements are
            // the first k16's, the high one's the second's.
            uint32_t a[MT][4];
            [[maybe_unused]] uint32_t ah[MT][2][4];
            [[maybe_unused]] int ac[MT][2][4];
            float ra[MT][2];
    #pragma unroll
            for (int mt = 0; mt < MT; mt++) {
              a_frags(mt, u, a[mt], ah[mt], ac[mt]);
              ra[mt][0] = e8m0_byte(sa[mt][0][0], u) * ISC * BSC, ra[mt][1] = e8m0_byte(sa[mt][1][0], u) * ISC * BSC;  // exact in the fast range
            }
    #pragma unroll
            for (int t = 0; t < NW; t++) {
              [[maybe_unused]] uint32_t b0, b1;
              [[maybe_unused]] uint32_t bh[4];
              b_frags(t, u, b0, b1, bh);
              const float s0 = e8m0_byte(sb[t][0][0], u), s1 = e8m0_byte(sb[t][1][0], u);
    #pragma unroll
              for (int mt = 0; mt < MT; mt++) {
                float d[4];
                if constexpr (INT) {
                  block_sum(d, a[mt], b0, b1, ac[mt][0]);
                } else {
                  hmma_k32_chain(d, ah[mt], bh);
                }
                float *o = acc[mt][t];
                if constexpr (fast && INT) {
                  const float r0 = ra[mt][0], r1 = ra[mt][1], n0 = -kMagic * r0, n1 = -kMagic * r1;  // exact
                  o[0] = fmaf(fmaf(d[0], r0, n0), s0, o[0]), o[1] = fmaf(fmaf(d[1], r0, n0), s1, o[1]);
                  o[2] = fmaf(fmaf(d[2], r1, n1), s0, o[2]), o[3] = fmaf(fmaf(d[3], r1, n1), s1, o[3]);
                } else if constexpr (fast) {
                  o[0] = fmaf(d[0] * ra[mt][0], s0, o[0]), o[1] = fmaf(d[1] * ra[mt][0], s1, o[1]);
                  o[2] = fmaf(d[2] * ra[mt][1], s0, o[2]), o[3] = fmaf(d[3] * ra[mt][1], s1, o[3]);
                } else {
                  if constexpr (INT)
                    for (int e = 0; e < 4; e++) d[e] -= kMagic;  // exact: 4·T_b
                  const double r0 = (double)e8m0_to_float((sa[mt][0][0] >> (8 * u)) & 255) * ISC * BSC,
                               r1 = (double)e8m0_to_float((sa[mt][1][0] >> (8 * u)) & 255) * ISC * BSC;
                  const double t0 = e8m0_to_float((sb[t][0][0] >> (8 * u)) & 255), t1 = e8m0_to_float((sb[t][1][0] >> (8 * u)) & 255);
                  o[0] = (float)fma((double)d[0], r0 * t0, (double)o[0]), o[1] = (float)fma((double)d[1], r0 * t1, (double)o[1]);
                  o[2] = (float)fma((double)d[2], r1 * t0, (double)o[2]), o[3] = (float)fma((double)d[3], r1 * t1, (double)o[3]);
                }
              }
            }
          }
        };
        if (fast_group)
          promote_group(std::true_type{});
        else
          promote_group(std::false_type{});
      }
    }
  }
  cp_async_wait<0>();
  if constexpr (NV) {  // acc'' = acc·2^-28 or acc' = acc·2^-14 (the NVFP4 branches above): exact
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
      for (int t = 0; t < NW; t++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[mt][t][e] *= NV_CHAIN ? 268435456.0f : 16384.0f;  // 2^28, 2^14
  }

  // Partial results of the warps (in the ring, now free), added in warp order.
  // Rows of RS = COLS + 2 floats: the d_trans epilogue reads down a column
  // (a warp's lanes on 32 rows), which at a stride of COLS (a multiple of 8)
  // fell on 4 or fewer banks, so each of its reads took up to 32 shared-memory
  // wavefronts (H200, M2048 N64 K4096: 19.3 µs against 10.9 for the same
  // kernel at M64 N2048; bench/RESULTS.md "where the fused kernels lose to
  // the BF16 expansion", calls 3-4); at COLS + 2 the 32 rows fall on 16 banks, and a row stays
  // 8-byte aligned for the float2 stores.
  __syncthreads();
  constexpr int ROWS = MT * 16, COLS = NW * 8, RS = decode_red_stride(NW);
  float *red = reinterpret_cast<float *>(dsm);  // [WK][ROWS][RS], COLS used a row
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int t = 0; t < NW; t++)
#pragma unroll
      for (int h = 0; h < 2; h++)
        *reinterpret_cast<float2 *>(red + (w * ROWS + mt * 16 + g + 8 * h) * RS + 8 * t + 2 * q) =
            make_float2(acc[mt][t][2 * h], acc[mt][t][2 * h + 1]);
  __syncthreads();
  // Split K (KS > 1): the CTAs of ranks 1 .. KS−1 add their warps' sums in
  // warp order and write them into rank 0's shared memory past its ring
  // (xred: [KS − 1][ROWS·RS], written while rank 0 may still be in its
  // group loop), and rank 0 adds them to its own in rank order: the same
  // sums in every run (one more reassociation of Σ_b, inside the bound's
  // (n_blocks + 2)·2^-24 term, as the warps' split is).
  float *xred = reinterpret_cast<float *>(dsm + WK * S * L::BYTES);
  if constexpr (KS > 1) {
    cluster_wait();  // every CTA of the cluster has started: rank 0's shared memory is there
    if (rank > 0) {
      const uint32_t dst = cluster_map(smem_u32(xred + (rank - 1) * ROWS * RS), 0);
      for (int o = threadIdx.x; o < ROWS * COLS; o += WK * 32) {
        const int at = o / COLS * RS + o % COLS;
        float v = red[at];
#pragma unroll
        for (int x = 1; x < WK; x++) v += red[x * ROWS * RS + at];
        st_cluster_f32(dst + 4 * at, v);
      }
    }
    cluster_arrive_release();
    cluster_wait();  // rank 0: the others' sums have landed
    if (rank > 0) return;
  }
  const float alpha = alpha_factors(P.alpha, P.fa, P.nva, P.fb, P.nvb);
  for (int o = threadIdx.x; o < ROWS * COLS; o += WK * 32) {
    // d_trans (D is written transposed): walk rows fastest so that stores are contiguous.
    const int m = P.d_trans ? o % ROWS : o / COLS, c = P.d_trans ? o / ROWS : o % COLS;
    const int64_t i = m, j = n0 + c;
    if (i >= P.M || j >= P.N) continue;
    float v = red[m * RS + c];
#pragma unroll
    for (int x = 1; x < WK; x++) v += red[(x * ROWS + m) * RS + c];
#pragma unroll
    for (int r = 1; r < KS; r++) v += xred[(r - 1) * ROWS * RS + m * RS + c];
    store_d(P, alpha, i, j, v);
  }
}

// The decode kernel with ptxas's own register budget (shapes that run two
// CTAs per SM), and with one CTA per SM declared (the one-wave shapes of 64
// weight rows per CTA, decode_shape), so that a thread may take up to 255
// registers: without it ptxas stopped at 128 on the FP16 path at 8/8/2 and
// spilled inside the group loop (H200, ncu at M16 N8192 K8192: 49 152
// local-memory requests per launch).
template <int MT, int NW, int WK, int S, int TA, int TB, bool FA4, bool FB4, bool SA16, bool SB16, int KS = 1>
__global__ void __launch_bounds__(WK * 32) decode_kernel(const Params P) {
  pdl_wait();
  decode_body<MT, NW, WK, S, TA, TB, FA4, FB4, SA16, SB16, KS>(P);
}
// decode_kernel_one also takes both operands' codes by TMA (T: their
// descriptors, tma_map_decode), lane 0 of each warp issuing a stage's two
// boxes where 32 lanes issued 10-16 cp.async and their address arithmetic
// (bench/RESULTS.md, "the one-wave decode kernel's codes by TMA": 126
// registers where 160 were at MXFP4 × MXFP4, M16 N8192 K8192 3-8 % faster
// for the FP4 pairs).
template <int MT, int NW, int WK, int S, int TA, int TB, bool FA4, bool FB4, bool SA16, bool SB16, int KS = 1>
__global__ void __launch_bounds__(WK * 32, 1) decode_kernel_one(const Params P, const __grid_constant__ TmaMaps T) {
  pdl_wait();
  decode_body<MT, NW, WK, S, TA, TB, FA4, FB4, SA16, SB16, KS, true>(P, &T);
}

// ---------------------------------------------------------------------------
// Decode by wgmma: MXFP8 × MXFP8 (E4M3, E5M2) at 1..16 rows of A
// ---------------------------------------------------------------------------
// The decode kernel above converts both operands' FP8 codes to FP16 for
// mma.sync (Hopper's FP8 tensor cores take wgmma only), one conversion per
// weight code. This kernel gives the weight to wgmma as it is: the operands
// swap (Dᵀ = B·Aᵀ), the weight's rows fill the m64 side and the 1..16 rows of
// A the n8 or n16 side, so one wgmma m64nBNk32 per 32-block sums a block of
// 64 weight rows against every row of A, straight from shared memory, and
// the promotion is the tile kernel's (acc = fma(T_b, sa·sb, acc), FP64 where
// the E8M0 exponents are extreme): the same block sums, the same bound.
//
// Structure: a CTA owns 64 weight rows (output columns) and, split K (KS 2
// where the tiles cover more than half the SMs but not all: wd_split), the
// stages of rank r of a cluster of KS CTAs (stage q = r, r + KS, ...; rank 0
// adds the others' sums at the end, as the decode kernel's split K does).
// Warp 4 is the producer: per stage of KB k-tiles of 128, lane 0 sets the
// expected bytes and issues one TMA box of each operand per k-tile (zeros
// past K and past the rows), and every lane copies the scale words by
// cp.async, which complete on the same mbarrier
// (cp.async.mbarrier.arrive.noinc): the producer never waits for its own
// copies, only for a free stage. Warps 0..3 are one consumer warpgroup: it
// issues k-tile j+1's four wgmmas before it promotes k-tile j's four block
// sums (two register sets), so that the tensor core and the promotion
// overlap. Each wait sits in straight-line code: a wgmma wait inside a
// branch made ptxas serialize every wgmma (ptxas info C7518), which took the
// prototype from 0.041 ms to 0.025 (H200, M16 N8192 K8192).
//
// Measured on the H200 (bench/RESULTS.md, "Issue 12: decode by wgmma"; graphs
// of 20 launches, M16 N8192 K8192 MXFP8, ms). The prototype (call 8,
// bench/decode_wg_probe.cu): one CTA per tile 0.0257, two per tile (KS 2)
// 0.0223-0.0230, the ring alone without any arithmetic 0.0186, BF16 cuBLAS
// 0.0335 in the same run; N28672 (448 tiles, two CTAs per SM) 0.0717 against
// BF16's 0.1096. Two CTAs of 64 rows per SM ran ahead of one CTA with two or
// three consumer warpgroups (0.0234-0.0297, calls 7-8). Through quant_gemm (call 10):
// 0.0239 against BF16 torch.matmul's 0.0331 (1.39x); the decode kernel had
// run 0.0255 (1.34x) in an earlier lease. With the decode kernel's range test
// and six single-k-tile stages at split K ("Issue 12: the decode-by-wgmma
// promotion", call 4): 0.0219 against 0.0332 (1.52x); N28672 1.64x.
//
// Scales: a consumer thread holds the E8M0 words (four blocks each) of its
// two weight rows and its BN/4 rows of A. The fast path is the decode
// kernel's: every byte in [64, 191] (bit 7 ≠ bit 6, one LOP3 a word), so
// that T·sa is an exact power-of-two scaling of T (|T| in [2^-32, 2^37] for
// FP8 codes, sa in [2^-63, 2^64]) and fma(T·sa, sb, acc) rounds the exact
// T·sa·sb + acc once, as the tile kernel's fma(T, sa·sb, acc) does. The test
// is per warp (__any_sync): a warp with any byte outside promotes that k-tile
// in FP64, exact as the tile kernel's slow path is. Blocks past K (the last
// k-tile) read the scale 1.0: their data are zeros from the TMA, and a
// padding byte of 255 (NaN) must not reach the sum.
//
// Stages (WdShape): one CTA per tile (KS 1) takes stages of two k-tiles,
// four of them; split K (KS 2) six stages of one k-tile. The probe's call 2
// (bench/RESULTS.md, "Issue 12: the decode-by-wgmma promotion") measured
// each: at KS 2 six single k-tiles ran M16 N8192 K8192 in 0.0212-0.0214 ms
// against 0.0223-0.0226 for four pairs; at KS 1 (N14336, N28672) the pairs
// were the faster by 2-4 %.
//
// W4: E2M1 weights (MXFP4: E8M0 scales per 32) against 1..8 FP8 rows of A
// (MXFP8 E4M3 or E5M2). The consumers widen the weight in registers and give
// it to wgmma as its A operand from registers, so nothing is stored back,
// fenced or waited for between the widening and the wgmma:
//   - the weight's k-tile comes by TMA as 64 rows of 64 bytes in the 64-byte
//     swizzle (16-byte block u of row r at u ^ ((r >> 1) & 3): the eight rows
//     of an ldmatrix fall in distinct banks);
//   - each consumer thread takes its words with two ldmatrix.x4 per k-tile:
//     word c of a row's 16-byte block u is codes 8c..8c+7 of 32-block u, for
//     its rows g and g + 8 (wgmma_k32_rs's fragment), and widens them
//     (e2m1x8_to_e4m3x8, exact);
//   - the fragment puts K slots 4c..4c+3 and 16+4c..16+4c+3 of a k32 step in
//     thread c, and thread c holds codes 8c..8c+7: so A's K is permuted the
//     same way inside each 32-block (slot word q holds word 2q of the block
//     for q < 4, word 2(q - 4) + 1 for q ≥ 4). A block sum does not depend on
//     the order of its 32 products (the bound of README "Numerics" counts
//     their largest magnitude and their sum), so the block sums, the
//     promotion and the bound are those of the FP8 path;
//   - the producer warp writes A's k-tile into the stage itself in that
//     order (a 32-byte unit per lane and (row, block): two 16-byte loads, two
//     16-byte stores in the 128-byte swizzle, fence.proxy.async, and an
//     arrival per lane on the stage's barrier).
// The prototype (bench/decode_wg_probe.cu, wgd5_kernel; bench/RESULTS.md,
// "Issue 12: E2M1 weights widened in registers", calls 1-3) ran M16 N8192
// K8192 in 0.0224-0.0225 ms against BF16 cuBLAS's 0.0331-0.0338 (1.50x;
// widened into shared memory for an A descriptor: 0.0271). Through
// quant_gemm (calls 7-8, CUDA graphs, BF16 torch.matmul's time over
// libquant's): at 16 rows of A no faster than the decode kernel (MXFP8 x
// MXFP4 1.38-1.40x both), but at 1..8 rows, where the decode kernel's time
// does not shrink, 13-22 % faster: M1 N8192 K8192 1.71x against 1.45-1.50x,
// M8 1.66x against 1.41x, M1 N28672 2.05x against 1.61x, M1 K28672 1.90x
// against 1.70x. Per k-tile it costs about 0.51 µs at one row of A and 0.67
// at eight, the decode kernel 0.56 past a larger fixed cost, so at eight rows
// and K28672 it lost (1.59x against 1.71x): it runs at one row of A at any
// K and at 2..8 rows up to K = 12288 (launch_wd). K is split over the two
// CTAs of a cluster wherever it runs (at N28672 one CTA per tile lost to
// two: 0.093 against 0.0835 ms, prototype).
//
// A4: MXFP4 rows of A against MXFP4 weights, at the same shapes. The
// producer loads 16 bytes of E2M1 codes a (row, 32-block) unit and widens
// them to E4M3 (exact) before the same permuted stores. E2M1 x E2M1 products
// are multiples of 1/4 below 2^6 and a block sum stays below 2^11, so the
// wgmma's 13-bit truncation keeps every bit: the block sums are exact. At 16
// rows of A (n16) the producer's widening was on the critical path (0.0253
// ms at M16 N8192 in the prototype, slower than the decode kernel); at 1..8
// rows it widens half as many codes a k-tile. H200, CUDA graphs, BF16's time
// over libquant's (bench/RESULTS.md, "MXFP4 rows of A through W4", call 2):
// M1 N8192 K8192 1.59-1.62x against the decode kernel's 1.43-1.44x, M8
// 1.54-1.57x against 1.39-1.40x, M1 N28672 1.75x against 1.43x, M8 K12288
// 1.54x against 1.48x. NVFP4 weights (E4M3 scales per 16) through this path
// by FP16 wgmma ran slower than the decode kernel (same section, call 1),
// which keeps them.
//
// Requirements (else the decode kernel runs): both operands FP8 with at most
// 16 rows of A, or E2M1 weights against FP8 or E2M1 rows of A (W4, A4; rows
// and K as above), with E8M0 scales, K % 32 == 0 (the decode kernel's), the TMA
// descriptors (tma_map, tma_map_e2m1: 16-byte aligned rows and pitch; W4's A
// is loaded by the producer, with the decode kernel's alignment), and N >
// 32·SMs with the CTAs filling the SMs evenly (wd_split).
template <int KS, bool W4 = false>
struct WdShape {
  static constexpr int KB = KS == 1 && !W4 ? 2 : 1;  // k-tiles of 128 per stage
  static constexpr int S = KS == 1 && !W4 ? 4 : 6;   // stages (two CTAs of 86 or 72 KB fit an SM at BN 16; W4 39 KB at BN 8)
};

template <int BN, int KS, bool W4 = false>
struct WdLayout {
  static constexpr int KB = WdShape<KS, W4>::KB, S = WdShape<KS, W4>::S;
  static constexpr int WT = 64 * (W4 ? kBK / 2 : kBK), XT = BN * kBK;  // one k-tile of the weight, of A
  static constexpr int X_OFF = KB * WT, SW_OFF = X_OFF + KB * XT, SX_OFF = SW_OFF + KB * 64 * 4, END = SX_OFF + KB * BN * 4;
  static constexpr int STAGE = (END + 1023) / 1024 * 1024;
  static constexpr int RED = 128 * (BN / 2) * 4;  // one rank's partial sums, [BN/2][128] floats
  static constexpr int SMEM = S * STAGE + (KS - 1) * RED + 1024;
};
static_assert(2 * WdLayout<16, 1>::SMEM <= 227 * 1024 && 2 * WdLayout<16, 2>::SMEM <= 227 * 1024 && 2 * WdLayout<8, 2, true>::SMEM <= 227 * 1024, "two CTAs per SM");

template <int BN, int KS, int TA, int TB, bool W4 = false, bool A4 = false>
__global__ void __launch_bounds__(160, 2) decode_wg_kernel(const Params P, const __grid_constant__ TmaMaps T) {
  pdl_wait();
  static_assert(!A4 || (W4 && TA == 0), "E2M1 rows of A (widened to E4M3 by the producer) against E2M1 weights only");
  using L = WdLayout<BN, KS, W4>;
  constexpr int S = L::S, KB = L::KB, NR = BN / 2;
  __shared__ __align__(8) uint64_t full[S], empty[S];
  extern __shared__ uint8_t smem_raw[];
  uint8_t *smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);  // the 128-byte swizzle's atom
  const int tid = threadIdx.x;
  const int rank = KS > 1 ? (int)cluster_rank() : 0;
  if constexpr (KS > 1) cluster_arrive_relaxed();  // this CTA has started (waited for before a peer writes into rank 0)
  const int64_t n0 = (int64_t)(blockIdx.x / KS) * 64;  // the CTA's weight rows (b)
  const int64_t K = P.K;
  const int KT = (int)((K + kBK - 1) / kBK);
  const int NQ = (KT + KB - 1) / KB;
  const int64_t nblocks = K / 32;
  if (tid == 0) {
    for (int s = 0; s < S; s++) {
      mbar_init(&full[s], W4 ? 65 : 33);  // the producer's 32 lanes (their scale copies; W4: and A's stores) and lane 0's expected bytes
      mbar_init(&empty[s], 128);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const int t = tid % 128, warp = t / 32;
  const int rloc = warp * 16 + (t % 32) / 4, cq = 2 * (t % 4);  // the thread's weight rows (+8) and columns of A (+1) in each 8
  float acc[NR];
#pragma unroll
  for (int i = 0; i < NR; i++) acc[i] = 0.f;
  if (tid >= 128) {
    // ---------------- producer ----------------
    const int lane = tid % 32;
    if constexpr (W4) {
      // W4: the producer's work per stage is on the consumers' critical path
      // (one warp, sharing a scheduler with a consumer warp), so every address
      // that does not depend on the stage is made once: a scale word's index
      // is linear in the k-tile (scale_index: +4 a k-tile compact, +512
      // swizzled), and A's units step by 128 bytes a k-tile. (Made per stage,
      // the W4 kernel ran M16 N8192 K8192 in 29.3 µs against the prototype's
      // 26.2, ncu; bench/RESULTS.md, "E2M1 weights widened in registers".)
      const uint8_t *wsc[2], *xsc = decode_one(false);
      int64_t wstep[2], xstep = 0;
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int64_t gr = n0 + lane + 32 * h;
        const bool in = gr < P.b.rows;
        wsc[h] = in ? P.b.scale + scale_index(gr, 0, P.b.scale_stride, P.b.swizzled) : decode_one(false);
        wstep[h] = in ? (P.b.swizzled ? 512 : 4) : 0;
      }
      if (lane < BN && lane < P.a.rows) {
        xsc = P.a.scale + scale_index(lane, 0, P.a.scale_stride, P.a.swizzled);
        xstep = P.a.swizzled ? 512 : 4;
      }
      // A's units (row r, 32-block u), 32 bytes each (A4: 16 bytes of E2M1
      // codes), lane + 32·pi; past M none (zeros).
      constexpr int NP = BN * 4 / 32, UB = A4 ? 16 : 32, TILE_B = A4 ? kBK / 2 : kBK;
      const uint8_t *xu[NP];
#pragma unroll
      for (int pi = 0; pi < NP; pi++) {
        const int p = lane + 32 * pi, r = p >> 2, u = p & 3;
        xu[pi] = r < P.M ? P.a.data + r * P.a.ld + UB * u : nullptr;
      }
      for (int i = 0;; i++) {
        const int q = rank + i * KS;  // this rank's i-th stage (KB 1: k-tile q)
        if (q >= KT) break;
        const int s = i % S;
        // A's k-tile, loaded before the wait for the stage (zeros past K).
        uint4 xa[NP][2];
#pragma unroll
        for (int pi = 0; pi < NP; pi++) {
          const int u = (lane + 32 * pi) & 3;
          xa[pi][0] = xa[pi][1] = make_uint4(0, 0, 0, 0);
          if (xu[pi] != nullptr && (int64_t)q * kBK + 32 * u < K) {
            const uint4 *src = reinterpret_cast<const uint4 *>(xu[pi] + (int64_t)q * TILE_B);
            xa[pi][0] = src[0];
            if constexpr (!A4) xa[pi][1] = src[1];
          }
        }
        if (i >= S) mbar_wait(&empty[s], ((i / S) + 1) & 1);
        uint8_t *st = smem + s * L::STAGE;
        if (lane == 0) {
          mbar_arrive_expect_tx(&full[s], L::WT);
          tma_load_2d(st, &T.b, q * (kBK / 2), (int)n0, &full[s]);
        }
#pragma unroll
        for (int h = 0; h < 2; h++)
          asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(smem_u32(st + L::SW_OFF + (lane + 32 * h) * 4)), "l"(wsc[h] + q * wstep[h]) : "memory");
        if (lane < BN) asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(smem_u32(st + L::SX_OFF + lane * 4)), "l"(xsc + q * xstep) : "memory");
        asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_u32(&full[s])) : "memory");
        // A's units in the permuted order: words 0, 2, 4, 6 of the block to
        // its first 16-byte slot, 1, 3, 5, 7 to its second (128-byte swizzle).
        // A4: the block's 32 E2M1 codes widened to E4M3 first (exact), word
        // 2i and 2i + 1 from word i of the codes.
#pragma unroll
        for (int pi = 0; pi < NP; pi++) {
          const int p = lane + 32 * pi, r = p >> 2, u = p & 3;
          uint4 a = xa[pi][0], b = xa[pi][1];
          if constexpr (A4) {
            const uint4 c = xa[pi][0];
            e2m1x8_to_e4m3x8(c.x, a.x, a.y), e2m1x8_to_e4m3x8(c.y, a.z, a.w);
            e2m1x8_to_e4m3x8(c.z, b.x, b.y), e2m1x8_to_e4m3x8(c.w, b.z, b.w);
          }
          uint8_t *row = st + L::X_OFF + r * kBK;
          *reinterpret_cast<uint4 *>(row + (((2 * u) ^ (r & 7)) << 4)) = make_uint4(a.x, a.z, b.x, b.z);
          *reinterpret_cast<uint4 *>(row + (((2 * u + 1) ^ (r & 7)) << 4)) = make_uint4(a.y, a.w, b.y, b.w);
        }
        fence_proxy_async();  // the generic stores, seen by the consumers' wgmma
        mbar_arrive(&full[s]);
      }
    } else {
      for (int i = 0;; i++) {
        const int q = rank + i * KS;  // this rank's i-th stage
        if (q >= NQ) break;
        const int s = i % S;
        if (i >= S) mbar_wait(&empty[s], ((i / S) + 1) & 1);
        uint8_t *st = smem + s * L::STAGE;
        if (lane == 0) {
          mbar_arrive_expect_tx(&full[s], KB * (64 + BN) * kBK);
#pragma unroll
          for (int b = 0; b < KB; b++) {
            const int k0 = (q * KB + b) * kBK;
            tma_load_2d(st + b * L::WT, &T.b, k0, (int)n0, &full[s]);
            tma_load_2d(st + L::X_OFF + b * L::XT, &T.a, k0, 0, &full[s]);
          }
        }
#pragma unroll
        for (int b = 0; b < KB; b++) {
          const int kt = q * KB + b;
          const bool kv = kt < KT;
#pragma unroll
          for (int r = lane; r < 64; r += 32) {
            const int64_t gr = n0 + r;
            const uint8_t *src = kv && gr < P.b.rows ? P.b.scale + scale_index(gr, (int64_t)kt * 4, P.b.scale_stride, P.b.swizzled) : decode_one(false);
            asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(smem_u32(st + L::SW_OFF + (b * 64 + r) * 4)), "l"(src) : "memory");
          }
          if (lane < BN) {
            const uint8_t *src = kv && lane < P.a.rows ? P.a.scale + scale_index(lane, (int64_t)kt * 4, P.a.scale_stride, P.a.swizzled) : decode_one(false);
            asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(smem_u32(st + L::SX_OFF + (b * BN + lane) * 4)), "l"(src) : "memory");
          }
        }
        asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_u32(&full[s])) : "memory");
      }
    }
  } else {
    // ---------------- consumers ----------------
    struct Scales {
      uint32_t wa0, wa1, wb[BN / 8][2];  // E8M0 words: weight rows rloc, rloc + 8; rows of A 8j + cq, + 1
      bool slow;
    };
    float tmp[2][4][NR];
    Scales sc[2];
    // W4: the widened weight fragments of each k32 step (two sets, as tmp:
    // a k-tile's wgmmas read them until they complete).
    uint32_t af[2][4][4];
    // The descriptors' address field plus the byte offset / 16 (no carry out
    // of its 14 bits: shared addresses < 2^18).
    const uint64_t desc0 = sw128_desc(smem_u32(smem));
    // W4: this lane's ldmatrix row (matrix lm / 8: rows g / g + 8, blocks 2v / 2v + 1).
    const int lm = t % 32, mrow = warp * 16 + (lm & 7) + 8 * ((lm >> 3) & 1), mu = lm >> 4;
    const uint32_t wrow = smem_u32(smem) + (uint32_t)mrow * (kBK / 2), wswz = (uint32_t)(mrow >> 1) & 3;
    // This rank's j-th k-tile: stage i = j / KB, its sub-tile j % KB.
    auto ktile = [&](int j) { return (rank + (j / KB) * KS) * KB + j % KB; };
    auto load_issue = [&](int j, auto SET) {
      constexpr int X = decltype(SET)::value;
      const int kt = ktile(j), i = j / KB, b = j % KB, s = i % S;
      if (b == 0) mbar_wait(&full[s], (i / S) & 1);
      const uint8_t *st = smem + s * L::STAGE;
      const uint32_t *sw = reinterpret_cast<const uint32_t *>(st + L::SW_OFF + b * 64 * 4);
      const uint32_t *sx = reinterpret_cast<const uint32_t *>(st + L::SX_OFF + b * BN * 4);
      const int64_t nv = nblocks - 4 * (int64_t)kt;  // blocks of this k-tile inside K
      const uint32_t keep = nv >= 4 ? 0xFFFFFFFFu : (1u << (8 * nv)) - 1u;
      auto inside = [&](uint32_t w) { return (w & keep) | (0x7F7F7F7Fu & ~keep); };
      sc[X].wa0 = inside(sw[rloc]), sc[X].wa1 = inside(sw[rloc + 8]);
      uint32_t ok = e8m0x4_in_fast_range(sc[X].wa0) & e8m0x4_in_fast_range(sc[X].wa1);
#pragma unroll
      for (int jj = 0; jj < BN / 8; jj++) {
        sc[X].wb[jj][0] = inside(sx[8 * jj + cq]), sc[X].wb[jj][1] = inside(sx[8 * jj + cq + 1]);
        ok &= e8m0x4_in_fast_range(sc[X].wb[jj][0]) & e8m0x4_in_fast_range(sc[X].wb[jj][1]);
      }
      sc[X].slow = __any_sync(0xFFFFFFFFu, (ok & 0x80808080u) != 0x80808080u);
      [[maybe_unused]] const uint32_t offW = (uint32_t)(s * L::STAGE + b * L::WT) >> 4;  // W4: A comes from registers
      const uint32_t offX = (uint32_t)(s * L::STAGE + L::X_OFF + b * L::XT) >> 4;
      if constexpr (W4) {
#pragma unroll
        for (int v = 0; v < 2; v++) {
          uint32_t m[4];  // rows g, g + 8 of block 2v, then of block 2v + 1
          ldsm_x4(wrow + s * L::STAGE + ((((uint32_t)(2 * v + mu)) ^ wswz) << 4), m);
#pragma unroll
          for (int h = 0; h < 2; h++) {
            uint32_t *f = af[X][2 * v + h];
            e2m1x8_to_e4m3x8(m[2 * h], f[0], f[2]);
            e2m1x8_to_e4m3x8(m[2 * h + 1], f[1], f[3]);
          }
        }
      }
      wgmma_fence();
#pragma unroll
      for (int u = 0; u < 4; u++) {
        if constexpr (W4) wgmma_k32_rs<BN, TA>(tmp[X][u], af[X][u], desc0 + offX + 2 * u);
        else wgmma_k32<BN, TB, TA>(tmp[X][u], desc0 + offW + 2 * u, desc0 + offX + 2 * u);
        wgmma_commit();
      }
    };
    auto release = [&](int j) {
      if (j % KB == KB - 1 || ktile(j) == KT - 1) mbar_arrive(&empty[(j / KB) % S]);
    };
    auto promote = [&](auto SET) {
      constexpr int X = decltype(SET)::value;
#pragma unroll
      for (int u = 0; u < 4; u++)
#pragma unroll
        for (int i = 0; i < NR; i++) reg_fence(tmp[X][u][i]);
      const uint32_t wa0 = sc[X].wa0, wa1 = sc[X].wa1;
      if (!sc[X].slow) {
#pragma unroll
        for (int u = 0; u < 4; u++) {
          const float *tt = tmp[X][u];
          const float sa0 = e8m0_byte(wa0, u), sa1 = e8m0_byte(wa1, u);
#pragma unroll
          for (int jj = 0; jj < BN / 8; jj++) {
            const float sbx = e8m0_byte(sc[X].wb[jj][0], u), sby = e8m0_byte(sc[X].wb[jj][1], u);
            acc[4 * jj + 0] = fmaf(tt[4 * jj + 0] * sa0, sbx, acc[4 * jj + 0]);
            acc[4 * jj + 1] = fmaf(tt[4 * jj + 1] * sa0, sby, acc[4 * jj + 1]);
            acc[4 * jj + 2] = fmaf(tt[4 * jj + 2] * sa1, sbx, acc[4 * jj + 2]);
            acc[4 * jj + 3] = fmaf(tt[4 * jj + 3] * sa1, sby, acc[4 * jj + 3]);
          }
        }
      } else {
#pragma unroll
        for (int u = 0; u < 4; u++) {
          const float *tt = tmp[X][u];
          const double sa0 = e8m0_to_float((wa0 >> (8 * u)) & 0xFF), sa1 = e8m0_to_float((wa1 >> (8 * u)) & 0xFF);
#pragma unroll
          for (int jj = 0; jj < BN / 8; jj++) {
            const double sbx = e8m0_to_float((sc[X].wb[jj][0] >> (8 * u)) & 0xFF), sby = e8m0_to_float((sc[X].wb[jj][1] >> (8 * u)) & 0xFF);
            acc[4 * jj + 0] = (float)fma((double)tt[4 * jj + 0], sa0 * sbx, (double)acc[4 * jj + 0]);
            acc[4 * jj + 1] = (float)fma((double)tt[4 * jj + 1], sa0 * sby, (double)acc[4 * jj + 1]);
            acc[4 * jj + 2] = (float)fma((double)tt[4 * jj + 2], sa1 * sbx, (double)acc[4 * jj + 2]);
            acc[4 * jj + 3] = (float)fma((double)tt[4 * jj + 3], sa1 * sby, (double)acc[4 * jj + 3]);
          }
        }
      }
    };
    using I0 = std::integral_constant<int, 0>;
    using I1 = std::integral_constant<int, 1>;
    int j = 0;
    if (ktile(0) < KT) {
      load_issue(0, I0{});
      for (;;) {
        if (ktile(j + 1) >= KT) {  // the last k-tile: set 0 in flight
          wgmma_wait<0>();
          release(j);
          promote(I0{});
          break;
        }
        load_issue(j + 1, I1{});
        wgmma_wait<4>();
        release(j);
        promote(I0{});
        j++;
        if (ktile(j + 1) >= KT) {
          wgmma_wait<0>();
          release(j);
          promote(I1{});
          break;
        }
        load_issue(j + 1, I0{});
        wgmma_wait<4>();
        release(j);
        promote(I1{});
        j++;
      }
    }
  }
  // Split K: ranks 1 .. KS−1 write their sums into rank 0's shared memory
  // past its ring (xred, written while rank 0 may still be in its loop), and
  // rank 0 adds them in rank order: the same sums in every run.
  const uint32_t xred = smem_u32(smem) + S * L::STAGE;
  if constexpr (KS > 1) {
    cluster_wait();  // every CTA of the cluster has started: rank 0's shared memory is there
    if (rank > 0 && tid < 128) {
      const uint32_t dst = cluster_map(xred, 0) + ((rank - 1) * NR * 128 + t) * 4;
#pragma unroll
      for (int i = 0; i < NR; i++) st_cluster_f32(dst + i * 128 * 4, acc[i]);
    }
    cluster_arrive_release();
    cluster_wait();  // rank 0: the others' sums have landed
    if (rank > 0) return;
  }
  if (tid >= 128) return;
  if constexpr (KS > 1) {
    const float *xr = reinterpret_cast<const float *>(smem + S * L::STAGE);
    for (int r = 1; r < KS; r++)
#pragma unroll
      for (int i = 0; i < NR; i++) acc[i] += xr[((r - 1) * NR + i) * 128 + t];
  }
  const float alpha = alpha_factors(P.alpha, P.fa, P.nva, P.fb, P.nvb);
#pragma unroll
  for (int jj = 0; jj < BN / 8; jj++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int64_t i = 8 * jj + cq + (e & 1), jn = n0 + rloc + (e >> 1) * 8;  // row of A, weight row
      if (i >= P.M || jn >= P.N) continue;
      store_d(P, alpha, i, jn, acc[4 * jj + e]);
    }
}

// ---------------------------------------------------------------------------
// Host
// ---------------------------------------------------------------------------

// The wgmma type of an operand's codes after widening (E2M1 -> E4M3).
inline int wg_type(int32_t elem) { return elem == kE5M2 ? 1 : 0; }

// The driver's cuTensorMapEncodeTiled, looked up once; null where the lookup
// fails (the tile kernel then loads through cp.async).
using EncodeTiledFn = CUresult (*)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *, const cuuint64_t *,
                                   const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                   CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
EncodeTiledFn encode_tiled() {
  static const EncodeTiledFn fn = [] {
    void *f = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return (EncodeTiledFn) nullptr;
    }
    return reinterpret_cast<EncodeTiledFn>(f);
  }();
  return fn;
}

// Whether TMA can load an FP8 operand's codes: 16-byte aligned codes and
// pitch, K % 16 == 0, and the driver's encoder found.
bool tma_able(const Operand &op, int64_t K) {
  if (op.elem == kE2M1 || op.ld % 16 != 0 || K % 16 != 0 || reinterpret_cast<uintptr_t>(op.data) % 16 != 0 || op.rows <= 0) return false;
  if (K >= (int64_t(1) << 31) || op.rows >= (int64_t(1) << 31)) return false;  // the copies' coordinates are 32-bit
  return encode_tiled() != nullptr;
}

// The TMA descriptor of an FP8 operand (TmaMaps), where TMA can load it.
bool tma_map(const Operand &op, int64_t K, int box_rows, CUtensorMap *m) {
  if (!tma_able(op, K)) return false;
  const EncodeTiledFn enc = encode_tiled();
  const cuuint64_t dims[2] = {(cuuint64_t)K, (cuuint64_t)op.rows};
  const cuuint64_t strides[1] = {(cuuint64_t)op.ld};
  const cuuint32_t box[2] = {(cuuint32_t)kBK, (cuuint32_t)box_rows};
  const cuuint32_t estr[2] = {1, 1};
  return enc(m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<uint8_t *>(op.data), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// The TMA descriptor of one operand's codes in boxes of one group of 128
// codes (64 bytes of E2M1 in the 64-byte swizzle, 128 of FP8 in the 128-byte
// one) by box_rows rows, zeros past K and past the rows: decode_wg_kernel's
// E2M1 weight (tma_map_e2m1) and both operands of the one-wave decode kernel
// (decode_kernel_one). The decode kernel's take no L2 promotion: with
// 256-byte promotion it ran 1-4 % slower at M16 N8192 K8192 (bench/RESULTS.md,
// "the one-wave decode kernel's codes by TMA", call 3).
bool tma_map_group(const Operand &op, int64_t K, int box_rows, CUtensorMapL2promotion promotion, CUtensorMap *m) {
  const bool e2m1 = op.elem == kE2M1;
  if (op.ld % 16 != 0 || K % 32 != 0 || reinterpret_cast<uintptr_t>(op.data) % 16 != 0 || op.rows <= 0) return false;
  if (K >= (int64_t(1) << 31) || op.rows >= (int64_t(1) << 31)) return false;
  const EncodeTiledFn enc = encode_tiled();
  if (enc == nullptr) return false;
  const cuuint64_t dims[2] = {(cuuint64_t)(e2m1 ? K / 2 : K), (cuuint64_t)op.rows};
  const cuuint64_t strides[1] = {(cuuint64_t)op.ld};
  const cuuint32_t box[2] = {(cuuint32_t)(e2m1 ? kBK / 2 : kBK), (cuuint32_t)box_rows};
  const cuuint32_t estr[2] = {1, 1};
  return enc(m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<uint8_t *>(op.data), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
             e2m1 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_128B, promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}
bool tma_map_e2m1(const Operand &op, int64_t K, CUtensorMap *m) {
  return op.elem == kE2M1 && tma_map_group(op, K, 64, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, m);
}
bool tma_map_decode(const Operand &op, int64_t K, int box_rows, CUtensorMap *m) {
  return tma_map_group(op, K, box_rows, CU_TENSOR_MAP_L2_PROMOTION_NONE, m);
}

template <int BM, int BN, int TA, int TB>
cudaError_t launch_cfg(const Params &p, cudaStream_t stream) {
  using L = Layout<BM, BN>;
  // The narrow tile (decode) has the registers for two block sums in flight;
  // at 128×128 the second set spills (measured: ~540 bytes), so it waits.
  auto kern = fused_gemm_kernel<BM, BN, TA, TB, BN == 16>;
  TmaMaps t{};
  if (!tma_map(p.a, p.K, BM, &t.a) || !tma_map(p.b, p.K, BN, &t.b)) return cudaErrorInvalidValue;
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, L::SMEM);
  if (e != cudaSuccess) return e;
  dim3 grid((unsigned)((p.N + BN - 1) / BN), (unsigned)((p.M + BM - 1) / BM));
  launch_kernel(kern, grid, (BM / 64 + 1) * 128, L::SMEM, stream, p, t);
  return cudaGetLastError();
}

template <int BM, int BN>
cudaError_t launch_types(const Params &p, cudaStream_t stream) {
  const int ta = wg_type(p.a.elem), tb = wg_type(p.b.elem);
  if (ta == 0 && tb == 0) return launch_cfg<BM, BN, 0, 0>(p, stream);
  if (ta == 0 && tb == 1) return launch_cfg<BM, BN, 0, 1>(p, stream);
  if (ta == 1 && tb == 0) return launch_cfg<BM, BN, 1, 0>(p, stream);
  return launch_cfg<BM, BN, 1, 1>(p, stream);
}

// The decode kernel's shape: a CTA of WK warps owns NW·8 output columns (16
// rows of A: 32, 32 rows: 16), each warp a ring of S stages. Measured on an
// H100 (bench/RESULTS.md, "Decode kernel" and "the decode kernel, fourth
// pass"), M16 N8192 K8192:
//   - first search: of NW/WK/S = 2/8/4, 4/4/4, 4/4/6, 4/8/3, 8/4/3, 4/16/2
//     the last was fastest for MXFP8 (0.042 ms against 0.054-0.099) and
//     within 3 % of the fastest for MXFP4 and NVFP4;
//   - after the fourth pass cut the instructions per group: every shape
//     tried runs MXFP8 in 0.038-0.040 ms (4/16/2 kept); FP4 × FP4 (the
//     integer path, 16 rows) runs fastest at 8/8/3 (MXFP4 0.028-0.029 ms,
//     NVFP4 0.034-0.035; 4/16/2 0.034-0.036 and 0.040-0.042), one CTA of
//     64 weight rows per SM in one wave; 32 rows then kept 2/16/2.
//   (`fused_check shapes` below is `build/decode_shapes shapes` since
//   2026-12-02: make decode-shapes.)
//   - H200 (`fused_check shapes M N K`, 2026-11-29; bench/RESULTS.md, "the
//     decode kernel's shape on the H200"), ms: with at most one CTA of 64
//     weight rows per SM (N ≤ 64·SMs: `one_wave`), 16 rows take 8/8/2 on
//     the FP16 path (MXFP8 M16 N8192 K8192 0.0291, M1 0.0293, against
//     4/16/2's 0.0320 / 0.0327) and 8/8/3 on the integer path (MXFP4 0.0270,
//     NVFP4 0.0334); with more CTAs (M16 N28672 K8192), 4/8/2 (MXFP8 0.0864
//     against 4/16/2's 0.0907 and 8/8/2's 0.0941) and 8/6/3 (MXFP4 0.0825,
//     NVFP4 0.1098 against 8/8/3's 0.0890 / 0.1164), two CTAs per SM. 32 rows
//     take 8/8/2 in one wave (M32 N8192 K8192: MXFP8 0.0373, MXFP4 0.0376,
//     NVFP4 0.0496 against 2/16/2's 0.0524 / 0.0636 / 0.0728), else 4/8/2.
//   - NVFP4 × NVFP4 left the integer path for FP16 (2026-11-30) and keeps
//     the FP4 pairs' shapes (its smaller stages): `fused_check shapes` put
//     the dispatched ones within 4 % of the fastest (bench/RESULTS.md, "NVFP4
//     decode on the FP16 tensor cores", call 3), but for 16 rows in more
//     than one wave, where 4/4/4 (four CTAs of 32 weight rows per SM) ran
//     ahead of 8/6/3 in every run (H200, M16 N28672 K8192, ms: 0.0865 /
//     0.0898, 0.0876 / 0.0900, 0.0892 / 0.0911, 0.0874 / 0.0894, and with
//     the blocks past K computed 0.0855 / 0.0867, 0.0850 / 0.0868;
//     bench/RESULTS.md, "the decode kernel's blocks past K"). MXFP4 stays at
//     8/6/3 (0.0813 against 4/4/4's 0.0892).
//   - Fewer weight rows than 33 per SM (N ≤ 32·SMs: 4224 on 132 SMs): a
//     CTA's time is its own instruction stream's (M16 N4096 on 64 CTAs of
//     64 rows took as long as N8192 on 128), so the CTAs get smaller until
//     they cover more than half the SMs: 32 weight rows where that does it
//     (16 rows of A: 4/16/2, 32 rows: 4/8/2), else 16 (2/8/2, 2/16/2). H200
//     (bench/RESULTS.md, "the decode kernel's blocks past K", call 7), ms,
//     MXFP8 / MXFP4 / NVFP4: M16 N4096 K8192 0.0167 / 0.0185 / 0.0189
//     against 8/8/x's 0.0226 / 0.0246 / 0.0283 (M1 alike), M32 N4096 4/8/2
//     0.0214 / 0.0262 / 0.0276 against 0.0311 / 0.0364 / 0.0393, M16 N2048
//     2/8/2 0.0136 / 0.0152 / 0.0152 against 0.0229 / 0.0252 / 0.0283, M32
//     N2048 2/16/2 0.0167 / 0.0216 / 0.0202 against 0.0316 / 0.0368 /
//     0.0406; from 80 CTAs of 64 rows (N5120, N6144) the one-wave shapes
//     stay within 7 % of the fastest. Where CTAs of 16 rows cover half the
//     SMs or fewer (N ≤ 16·SMs), 16 rows of A took CTAs of 8 (1/16/2; M16
//     N1024 K8192: 0.0110 / 0.0132 / 0.0127 against 2/8/2's 0.0125 / 0.0145
//     / 0.0148, call 10) and 32 rows 2/16/2, until split K (next).
//   - Split K (KS CTAs of a cluster per tile, NW/WK/S kKS): at these small
//     N a warp of the unsplit kernel converts A for one or two tiles only
//     and the SMs hold 8-16 warps. With the tile's K groups shared by two
//     CTAs, twice the CTAs hold twice the tiles per warp: H200, `fused_check
//     shapes`, M16 N1024 K8192 MXFP8 / MXFP4 / NVFP4, median ms: 1/16/2
//     0.0137 / 0.0131 / 0.0130, 2/16/2k2 0.0103 / 0.0113 / 0.0128, 2/8/2k2
//     0.0109 / 0.0117 / 0.0118 (M1 alike); M16 N2048: 2/8/2 0.0138 / 0.0160
//     / 0.0157, 4/8/2k2 0.0137 / 0.0149 / 0.0143; M16 N256: 2/16/2k2 0.0090
//     / – / 0.0096 (MXFP4 not among the five fastest), 2/8/2k4 0.0081 /
//     0.0091 / 0.0085; M32 N1024: 2/16/2 0.0151 / 0.0186 / 0.0180, 2/16/2k2
//     0.0122 / 0.0141 / 0.0134; M32 N2048: 2/16/2 0.0149 / 0.0194 / 0.0185,
//     4/8/2k2 0.0147 / 0.0171 / 0.0172. From N4096 on no split shape ran
//     ahead of the unsplit one (bench/RESULTS.md, "split K").
//   - 33..64 rows of A (MT 4; `fused_check shapes`, H200, MXFP8 / MXFP4 /
//     NVFP4, ms): NW 8 spills at 255 registers (8/6/2 one: M64 N8192 0.0705 /
//     0.0791 / 0.0957), so CTAs of 32 weight rows: 4/4/2, two per SM, 0.0481
//     / 0.0705 / 0.0657 (4/8/2 0.0521 / 0.0717 / 0.0680); M64 N28672 4/4/2
//     0.1558 / 0.2179 / 0.2091 against 4/8/2's 0.1649 / 0.2293 / 0.2214;
//     below, as 32 rows: M64 N4096 4/8/2 0.0288 / 0.0386 / 0.0366, N2048
//     4/8/2k2 0.0209 / 0.0253 / 0.0246, N1024 2/8/2k2 0.0163 / 0.0196 /
//     0.0188 (bench/RESULTS.md, "33..64 rows of A"). Fewer weight rows
//     (kWave4, kWave2: N ≤ 4·SMs), K split four ways: M64 N512 4/8/2k4
//     0.0145 / 0.0179 / 0.0173 against 2/8/2k2's 0.0153 / 0.0204 / 0.0188,
//     M64 N256 2/8/2k4 0.0121 / 0.0140 / 0.0138 against 0.0158 / 0.0195 /
//     0.0186 (64 CTAs each; at N1024 2/8/2k2 stays the fastest;
//     bench/RESULTS.md, "the fused kernels by default at 64 rows", call 8).
//   - MXFP4 × MXFP4 in one wave at up to 16 rows of A: 8/16/2. With its
//     codes by TMA (decode_kernel_one) the instance needs 124 registers, so
//     sixteen warps fit one SM, four a scheduler where there were two (the
//     integer path's group hides its shared-memory loads only in its own
//     unrolled code: unrolled less, it ran 8-15 % slower): H200, CUDA
//     graphs with distinct weights, three alternating rounds, ms: M16 N8192
//     K8192 0.0217 (three times) against 8/8/3's 0.0223-0.0227, N6000
//     0.0212-0.0216 against 0.0220-0.0223, N5000 0.0211-0.0215 against
//     0.0218-0.0220; on a second H200 (call 3), whose BF16 ran 3 % slower,
//     N8192 0.0227-0.0230 against 0.0229-0.0232 (inside its spread), N6000
//     0.0213-0.0219 against 0.0221-0.0223, N5000 0.0213-0.0221 against
//     0.0221-0.0222. The other FP4 pairs keep 8/8/3: at 16 warps their
//     instances spill at 128 registers (NVFP4 × NVFP4 56 bytes, the mixed
//     pairs 32 and 136) and ran 1-26 % slower (bench/RESULTS.md, "one stage
//     more, and the MXFP4 group's loop less unrolled", calls 2-3). A warp's
//     share of K changes with WK, so these outputs are not the bits of
//     8/8/3: the same block sums, added in another order (the bound's
//     reassociation term, as every split of K).
struct DecodeShape {
  int NW, WK, S;
  int KS = 1;  // CTAs of a cluster that split the tile's K groups
};
// How the decode kernel's CTAs cover the GPU (decode_fill): kWaves, more
// CTAs of 64 weight rows than SMs; kWave64, one wave of them that covers
// more than half the SMs (decode_kernel_one); kWave32, kWave16 and kWave8,
// as many CTAs as there are 32, 16 or 8 weight rows, where that covers more
// than half the SMs (CTAs of 32 rows; tiles of 32 rows split over two
// CTAs; tiles of 16 split over two); kWave4, fewer weight rows (16 rows of
// A: tiles of 16 split over four CTAs; 32 rows of A: over two; 64 rows:
// tiles of 32 over four); kWave2, fewer still (as kWave4 but for 64 rows of
// A: tiles of 16 over four).
enum DecodeFill { kWaves, kWave64, kWave32, kWave16, kWave8, kWave4, kWave2 };
constexpr DecodeShape decode_shape(int mt, bool fp4_pair, bool nv, bool e8m0_pair, int fill) {
  if (mt == 4) {  // 33..64 rows of A
    if (fill == kWave32) return DecodeShape{4, 8, 2};
    if (fill == kWave16) return DecodeShape{4, 8, 2, 2};
    if (fill == kWave8) return DecodeShape{2, 8, 2, 2};
    if (fill == kWave4) return DecodeShape{4, 8, 2, 4};
    if (fill == kWave2) return DecodeShape{2, 8, 2, 4};
    return DecodeShape{4, 4, 2};
  }
  if (fill == kWave32) return mt == 2 ? DecodeShape{4, 8, 2} : DecodeShape{4, 16, 2};
  if (fill == kWave16) return DecodeShape{4, 8, 2, 2};
  if (fill == kWave8) return mt == 1 && nv ? DecodeShape{2, 8, 2, 2} : DecodeShape{2, 16, 2, 2};
  if (fill == kWave4 || fill == kWave2) return mt == 2 ? DecodeShape{2, 16, 2, 2} : DecodeShape{2, 8, 2, 4};
  const bool one_wave = fill == kWave64;
  if (mt == 2) return one_wave ? DecodeShape{8, 8, 2} : DecodeShape{4, 8, 2};
  if (nv && !one_wave) return DecodeShape{4, 4, 4};
  if (fp4_pair && e8m0_pair && one_wave) return DecodeShape{8, 16, 2};  // MXFP4 × MXFP4 (above)
  if (fp4_pair) return one_wave ? DecodeShape{8, 8, 3} : DecodeShape{8, 6, 3};
  return one_wave ? DecodeShape{8, 8, 2} : DecodeShape{4, 8, 2};
}

// The current device's SM count, 0 if the query fails (the error cleared).
inline int sm_count() {
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return sms;
}

// decode_shape's fill for N weight rows on this device (its SM count; kWaves
// if the query fails).
inline int decode_fill(const Params &p) {
  const int sms = sm_count();
  if (sms <= 0) return kWaves;
  const int64_t c64 = (p.N + 63) / 64, c32 = (p.N + 31) / 32, c16 = (p.N + 15) / 16;
  if (c64 > sms) return kWaves;
  if (2 * c64 > sms) return kWave64;
  if (2 * c32 > sms) return kWave32;
  if (2 * c16 > sms) return kWave16;
  if (4 * c16 > sms) return kWave8;
  return 8 * c16 > sms ? kWave4 : kWave2;
}

template <int MT, int F, int TA, int TB, bool FA4, bool FB4, bool SA16, bool SB16>
cudaError_t launch_decode_cfg(const Params &p, cudaStream_t stream) {
  constexpr DecodeShape sh = decode_shape(MT, FA4 && FB4, SA16 && SB16, !SA16 && !SB16, F);
  constexpr int NW = sh.NW, WK = sh.WK, S = sh.S, KS = sh.KS;
  using L = DecodeStage<MT, NW, FA4, FB4, SA16, SB16>;
  static_assert(WK * MT * 16 * decode_red_stride(NW) * 4 <= WK * S * L::BYTES, "the reduction fits in the ring");
  const int smem = decode_smem<L>(WK, S, KS);
  auto launch = [&](auto kern) {
    if (smem > 48 * 1024) {
      cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      if (e != cudaSuccess) return e;
    }
    launch_kernel_cluster(kern, (unsigned)((p.N + NW * 8 - 1) / (NW * 8) * KS), WK * 32, smem, stream, KS, p);
    return cudaGetLastError();
  };
  if constexpr (F == kWave64) {
    // The codes by TMA; where the driver gives no descriptor, the CTAs of the
    // shapes past one wave (cp.async) take the GEMM.
    TmaMaps t{};
    if (!tma_map_decode(p.a, p.K, L::AR, &t.a) || !tma_map_decode(p.b, p.K, L::BR, &t.b))
      return launch_decode_cfg<MT, kWaves, TA, TB, FA4, FB4, SA16, SB16>(p, stream);
    using LT = DecodeStage<MT, NW, FA4, FB4, SA16, SB16, true>;
    static_assert(WK * MT * 16 * decode_red_stride(NW) * 4 <= WK * S * LT::BYTES, "the reduction fits in the ring");
    const int smem_t = decode_tma_smem<LT>(WK, S, KS);
    auto kern = decode_kernel_one<MT, NW, WK, S, TA, TB, FA4, FB4, SA16, SB16, KS>;
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_t);
    if (e != cudaSuccess) return e;
    launch_kernel_cluster(kern, (unsigned)((p.N + NW * 8 - 1) / (NW * 8) * KS), WK * 32, smem_t, stream, KS, p, t);
    return cudaGetLastError();
  } else {
    return launch(decode_kernel<MT, NW, WK, S, TA, TB, FA4, FB4, SA16, SB16, KS>);
  }
}

template <int MT, int F>
cudaError_t launch_decode_mt(const Params &p, cudaStream_t stream) {
  if (p.a.s16 && p.b.s16) return launch_decode_cfg<MT, F, 0, 0, true, true, true, true>(p, stream);
  // One side NVFP4 (E2M1, E4M3 per 16), the other MX (E4M3, E5M2 or E2M1).
  if (p.a.s16) {
    switch (p.b.elem) {
      case kE4M3: return launch_decode_cfg<MT, F, 0, 0, true, false, true, false>(p, stream);
      case kE5M2: return launch_decode_cfg<MT, F, 0, 1, true, false, true, false>(p, stream);
      case kE2M1: return launch_decode_cfg<MT, F, 0, 0, true, true, true, false>(p, stream);
    }
    return cudaErrorInvalidValue;
  }
  if (p.b.s16) {
    switch (p.a.elem) {
      case kE4M3: return launch_decode_cfg<MT, F, 0, 0, false, true, false, true>(p, stream);
      case kE5M2: return launch_decode_cfg<MT, F, 1, 0, false, true, false, true>(p, stream);
      case kE2M1: return launch_decode_cfg<MT, F, 0, 0, true, true, false, true>(p, stream);
    }
    return cudaErrorInvalidValue;
  }
  // Element pairs (E4M3, E5M2, E2M1 widened to E4M3): the nine instances.
  switch (p.a.elem * 3 + p.b.elem) {
    case kE4M3 * 3 + kE4M3: return launch_decode_cfg<MT, F, 0, 0, false, false, false, false>(p, stream);
    case kE4M3 * 3 + kE5M2: return launch_decode_cfg<MT, F, 0, 1, false, false, false, false>(p, stream);
    case kE4M3 * 3 + kE2M1: return launch_decode_cfg<MT, F, 0, 0, false, true, false, false>(p, stream);
    case kE5M2 * 3 + kE4M3: return launch_decode_cfg<MT, F, 1, 0, false, false, false, false>(p, stream);
    case kE5M2 * 3 + kE5M2: return launch_decode_cfg<MT, F, 1, 1, false, false, false, false>(p, stream);
    case kE5M2 * 3 + kE2M1: return launch_decode_cfg<MT, F, 1, 0, false, true, false, false>(p, stream);
    case kE2M1 * 3 + kE4M3: return launch_decode_cfg<MT, F, 0, 0, true, false, false, false>(p, stream);
    case kE2M1 * 3 + kE5M2: return launch_decode_cfg<MT, F, 0, 1, true, false, false, false>(p, stream);
    case kE2M1 * 3 + kE2M1: return launch_decode_cfg<MT, F, 0, 0, true, true, false, false>(p, stream);
  }
  return cudaErrorInvalidValue;
}

// Whether the decode kernel takes this GEMM (A the small operand): see its
// requirements above the kernel.
bool decode_ok(const Params &p) {
  if (p.M > kDecodeRows || p.K % 32 != 0) return false;
  for (const Operand *o : {&p.a, &p.b}) {
    if (o->ld % 16 != 0 || (uintptr_t)o->data % 16 != 0) return false;  // 16-byte cp.async pieces
    if (o->scale_stride % 4 != 0 || (uintptr_t)o->scale % 4 != 0) return false;
  }
  return (p.N + 4 * 8 - 1) / (4 * 8) <= 0x7FFFFFFF;  // the grid of the narrowest shape in more than one wave (decode_shape)
}

template <int MT>
cudaError_t launch_decode_fill(const Params &p, cudaStream_t stream) {
  switch (decode_fill(p)) {
    case kWave64: return launch_decode_mt<MT, kWave64>(p, stream);
    case kWave32: return launch_decode_mt<MT, kWave32>(p, stream);
    case kWave16: return launch_decode_mt<MT, kWave16>(p, stream);
    case kWave8: return launch_decode_mt<MT, kWave8>(p, stream);
    case kWave4: return launch_decode_mt<MT, kWave4>(p, stream);
    case kWave2: return launch_decode_mt<MT, kWave2>(p, stream);
  }
  return launch_decode_mt<MT, kWaves>(p, stream);
}

// decode_wg_kernel's split K for N weight rows (tiles of 64) on sms SMs:
// 1, a CTA per tile, where the tiles outnumber the SMs (two CTAs fit an SM);
// 2, each tile's K over the two CTAs of a cluster, where they cover more than
// half the SMs; 0, the decode kernel runs: below half the SMs, and where the
// CTAs fill the SMs' slots unevenly. The kernel's time is set by the SMs that
// run the most CTAs (ceil(CTAs / SMs) of them: each CTA's K streams at the
// same speed), so it takes the GEMM only where CTAs / (SMs · that) ≥ 0.8.
// H200 (132 SMs), CUDA graphs, M16 K8192 (bench/RESULTS.md, "Issue 12:
// decode by wgmma", call 10), ratio to BF16: N8192 (256 CTAs, 0.97) 1.39×,
// N28672 (448 CTAs, 0.85) 1.58×, but N6144 (192 CTAs, 0.73) 1.13× and N4352
// (136, 0.52) 1.08×, where each took as long as N8192; the decode kernel ran
// N4096 at 1.61× (README table). Below half the SMs the decode kernel was the
// faster too (fused_check, each launch timed alone: N1024 0.0105 ms against
// 0.018 split four and eight ways, N2048 0.0133 against 0.021, call 9).
constexpr int wd_split_sms(int64_t n, int sms) {
  if (sms <= 0) return 0;
  const int64_t tiles = (n + 63) / 64;
  if (2 * tiles <= sms) return 0;
  const int ks = tiles > sms ? 1 : 2;
  const int64_t ctas = tiles * ks, per_sm = (ctas + sms - 1) / sms;
  return 5 * ctas >= 4 * (int64_t)sms * per_sm ? ks : 0;
}
static_assert(wd_split_sms(8192, 132) == 2 && wd_split_sms(28672, 132) == 1, "the measured wins take the kernel");
static_assert(wd_split_sms(4352, 132) == 0 && wd_split_sms(6144, 132) == 0 && wd_split_sms(4096, 132) == 0, "the measured losses, and N4096 (no faster, README table), do not");
static_assert(wd_split_sms(11008, 132) == 0 && wd_split_sms(14336, 132) == 1 && wd_split_sms(7168, 132) == 2, "172, 224 and 224 CTAs");

inline int wd_split(const Params &p) { return wd_split_sms(p.N, sm_count()); }

template <int BN, int TA, int TB, bool W4 = false, bool A4 = false>
cudaError_t launch_wd_types(const Params &p, const TmaMaps &t, int ks, cudaStream_t stream) {
  auto go = [&](auto ksc) {
    constexpr int KS = decltype(ksc)::value;
    auto k = decode_wg_kernel<BN, KS, TA, TB, W4, A4>;
    const int smem = WdLayout<BN, KS, W4>::SMEM;
    cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) return e;
    launch_kernel_cluster(k, (unsigned)((p.N + 63) / 64 * KS), 160, smem, stream, (unsigned)KS, p, t);
    return cudaGetLastError();
  };
  if constexpr (W4) return go(std::integral_constant<int, 2>{});  // W4 splits K wherever it runs (above the kernel)
  else return ks == 1 ? go(std::integral_constant<int, 1>{}) : go(std::integral_constant<int, 2>{});
}

// Runs decode_wg_kernel where it takes p (the decode kernel's view: A the
// operand with at most 16 rows): both operands FP8, or E2M1 weights against
// FP8 or E2M1 rows of A (W4, A4: one row at any K, 2..8 rows up to K =
// 12288, as measured above the kernel), with E8M0 scales, TMA descriptors for the
// weight (and A's, FP8 weights), the tiles of 64 weight rows filling the
// SMs (wd_split); returns false otherwise, launching nothing.
bool launch_wd(const Params &p, cudaStream_t stream, cudaError_t *err) {
  const bool w4 = p.b.elem == kE2M1, a4 = p.a.elem == kE2M1;
  if (p.M > 16 || p.a.s16 || p.b.s16 || (a4 && !w4)) return false;
  if ((p.N + 63) / 64 * 2 > 0x7FFFFFFF) return false;
  const int ks = wd_split(p);
  if (ks == 0) return false;
  if (w4 && (p.M > 8 || (p.M > 1 && p.K > 12288))) return false;  // where the decode kernel is as fast or faster (above the kernel)
  TmaMaps t{};
  const int bn = p.M > 8 ? 16 : 8;
  if (w4 ? !tma_map_e2m1(p.b, p.K, &t.b) : !tma_map(p.a, p.K, bn, &t.a) || !tma_map(p.b, p.K, 64, &t.b)) return false;
  const int ta = wg_type(p.a.elem), tb = wg_type(p.b.elem);
  auto types = [&](auto bnc) {
    constexpr int BN = decltype(bnc)::value;
    if constexpr (BN == 8)
      if (w4) {
        if (a4) return launch_wd_types<BN, 0, 0, true, true>(p, t, ks, stream);
        return ta == 0 ? launch_wd_types<BN, 0, 0, true>(p, t, ks, stream) : launch_wd_types<BN, 1, 0, true>(p, t, ks, stream);
      }
    if (ta == 0 && tb == 0) return launch_wd_types<BN, 0, 0>(p, t, ks, stream);
    if (ta == 0 && tb == 1) return launch_wd_types<BN, 0, 1>(p, t, ks, stream);
    if (ta == 1 && tb == 0) return launch_wd_types<BN, 1, 0>(p, t, ks, stream);
    return launch_wd_types<BN, 1, 1>(p, t, ks, stream);
  };
  *err = bn == 16 ? types(std::integral_constant<int, 16>{}) : types(std::integral_constant<int, 8>{});
  return true;
}

cudaError_t launch_decode(const Params &p, cudaStream_t stream) {
  cudaError_t e;
  if (launch_wd(p, stream, &e)) return e;
  if (p.M > 32) return launch_decode_fill<4>(p, stream);
  return p.M > 16 ? launch_decode_fill<2>(p, stream) : launch_decode_fill<1>(p, stream);
}

// Whether the fused kernel can run on this device: sm_90 exactly (wgmma is
// sm_90a; the kernel's machine code is built for sm_90a only).
bool device_ok(int dev) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) return false;
  return major == 9 && minor == 0;
}

// The decode kernel's view of p (A the operand with fewer rows), if it takes
// p; p normalized (sb16 and the operands' s16 agreeing).
static bool normalize(Params &p, Params *decode) {
  if (p.M <= 0 || p.N <= 0 || p.K <= 0) return false;
  if (p.sb16) p.a.s16 = p.b.s16 = 1;
  p.sb16 = p.a.s16 && p.b.s16;
  if ((p.a.s16 && p.a.elem != kE2M1) || (p.b.s16 && p.b.elem != kE2M1)) return false;  // E4M3 scales per 16: NVFP4 codes
  if (p.M > kDecodeRows && p.N > kDecodeRows) return false;
  Params d = p;
  if (d.N < d.M) {  // the small operand is A
    std::swap(d.a, d.b);
    std::swap(d.M, d.N);
    d.d_trans = !d.d_trans;
  }
  if (!decode_ok(d)) return false;
  *decode = d;
  return true;
}

// The tile kernel beats the BF16 expansion at few rows of one operand only
// with FP8 codes by TMA, and only where the large operand's expansion is
// large. H200, CUDA graphs, the exact path's time over the tile kernel's
// (bench/RESULTS.md "K not a multiple of 32"): MXFP8 M16 N8192 K8208 2.28x
// (0.042 ms); through cp.async (K % 16 != 0) 0.11-0.34x (M16 N8192 K8200:
// 0.381 ms against 0.099); E2M1 operands, which the producer widens,
// 0.16-0.57x (MXFP4 M16 N8192 K8208: 0.178 against 0.089). By TMA (call 9
// there): 1.01-3.25x at 8192 and 28672 rows of the large operand, 1.16-1.36x
// at 4096 against 1-32 rows, but 0.97x at 4096 against 64 (K4112), 0.66-0.79x
// at 2048 and 0.43x at 1024: at one CTA per 64 rows and no split of K the
// tile kernel's time stays that of one K loop (about 0.021 ms at K4112),
// while the expansion's shrinks with the rows.
bool beats_expansion(Params p) {
  Params d;
  if (normalize(p, &d)) return true;  // the decode kernels
  if (p.M <= 0 || p.N <= 0 || p.K <= 0 || p.a.s16 || p.b.s16 || p.sb16) return false;
  const int64_t big = p.M > p.N ? p.M : p.N, small = p.M > p.N ? p.N : p.M;
  if (big < kTileBig && !(big >= kTileBig / 2 && small <= 32)) return false;
  return tma_able(p.a, p.K) && tma_able(p.b, p.K);
}

// Runs D = alpha · A·Bᵀ (both K-major): the decode kernels where they take p,
// else the tile kernel. Returns cudaErrorInvalidValue for arguments neither
// takes: outside the decode kernels' shapes, E2M1 or NVFP4 operands, FP8
// codes that TMA cannot load (tma_able), a grid too large. In the tile
// kernel, for few rows of A the operands swap, so that the large operand
// fills the 64-row wgmma tiles: Dᵀ = B·Aᵀ is written transposed.
cudaError_t gemm(Params p, cudaStream_t stream) {
  Params d;
  if (normalize(p, &d)) return launch_decode(d, stream);
  if (p.M <= 0 || p.N <= 0 || p.K <= 0) return cudaErrorInvalidValue;
  // The tile kernel: MXFP8 × MXFP8, codes by TMA.
  if (p.sb16 || p.a.s16 || p.b.s16 || !tma_able(p.a, p.K) || !tma_able(p.b, p.K)) return cudaErrorInvalidValue;
  if (p.M <= 64 && p.N > p.M) {
    std::swap(p.a, p.b);
    std::swap(p.M, p.N);
    p.d_trans = !p.d_trans;
  }
  if ((p.M + 63) / 64 > 65535) return cudaErrorInvalidValue;
  if (p.N <= 64) return launch_types<64, 16>(p, stream);
  return launch_types<128, 128>(p, stream);
}

}  // namespace qfused
