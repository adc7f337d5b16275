// The fused Hopper GEMM's interface (cuda/gemm_fused.cu has the kernel and
// what it computes; cuda/gemm.cu dispatches to it).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace qfused {

// Element codes of an operand.
enum Elem : int32_t { kE4M3 = 0, kE5M2 = 1, kE2M1 = 2 };

// One K-major operand: data [rows, K] codes (E4M3/E5M2) or packed E2M1
// [rows, ⌈K/2⌉] (element 2c in the low nibble of byte c), ld bytes per row;
// scales one row per data row, scale_stride bytes per row (the padded count
// of K blocks, spec §4.6/§5.3), compact or GEMM-swizzled (spec §4.7), E8M0
// per 32 or E4M3 per 16.
struct Operand {
  const uint8_t *data;
  const uint8_t *scale;
  int64_t rows;
  int64_t ld;
  int64_t scale_stride;
  int32_t swizzled;
  int32_t elem;
  int32_t s16;  // nonzero: E4M3 scales per 16 (NVFP4), else E8M0 per 32
};

struct Params {
  Operand a, b;  // a: M rows, b: N rows, both [rows, K]
  int64_t M, N, K;
  // D = alpha·fa·fb · A·Bᵀ: fa and fb the host's A's and B's per-tensor
  // factors in device memory (NULL: none; nva, nvb: an NVFP4 amax), which the
  // kernels read (alpha_factors), so that no kernel ahead of them forms it.
  // They stay with the host's operands where the kernels swap a and b.
  float alpha;
  const float *fa, *fb;
  int32_t nva, nvb;
  void *d;          // FP32, BF16 or FP16 (d_dt)
  int64_t ldd;      // elements per row of D
  int32_t d_dt;     // D's type: 0 FP32, 1 BF16, 2 FP16 (cuda/gemm.cu dense_code's numbering)
  int32_t d_trans;  // nonzero: write D[j*ldd + i] (the swapped-operand GEMM Dᵀ = B·Aᵀ)
  int32_t sb16;     // nonzero: both operands NVFP4 (sets both s16), else each operand's s16
  // NULL, or one element per column of D (D's ldd columns, whatever d_trans),
  // of type bias_dt (d_dt's numbering), added after alpha (store_d).
  const void *bias;
  int32_t bias_dt;
};

// An operand's per-tensor factor, read on the device: NVFP4's fl32(amax ·
// fl32(1/2688)) (plugins/nvfp4 TensorScale), an FP8 scale_inv as it is, 1
// for none (NULL).
__device__ __forceinline__ float op_factor(const float *f, int nv) {
  if (f == nullptr) return 1.0f;
  if (nv) return __fmul_rn(*f, __uint_as_float(0x39C30C31u));  // fl32(1/2688)
  return *f;
}

// alpha·fa·fb in float64, rounded once (spec §11, host/gemm_cpu.go).
__device__ __forceinline__ float alpha_factors(float alpha, const float *fa, int nva, const float *fb, int nvb) {
  return (float)((double)alpha * (double)op_factor(fa, nva) * (double)op_factor(fb, nvb));
}

// The epilogue of every fused kernel: D's element at (i, j) of the kernel's
// view (row i of a, row j of b; D[j][i] where d_trans) from its sum s, in
// epilogue_kernel's order (cuda/gemm.cu; host/gemm_cpu.go cpuEpilogue):
// x = fl32(alpha·s); x = fl32(x + bias[column]); D = x rounded to D's type.
// __fmul_rn and __fadd_rn keep the two roundings apart (no fma contraction),
// so a bias costs no second kernel and no FP32 scratch, and D's bits are
// those of the sums-then-epilogue_kernel flow.
__device__ __forceinline__ void store_d(const Params &P, float alpha, int64_t i, int64_t j, float s) {
  const int64_t row = P.d_trans ? j : i, col = P.d_trans ? i : j;
  float x = __fmul_rn(alpha, s);
  if (P.bias != nullptr) {
    const float b = P.bias_dt == 0   ? static_cast<const float *>(P.bias)[col]
                    : P.bias_dt == 1 ? __bfloat162float(static_cast<const __nv_bfloat16 *>(P.bias)[col])
                                     : __half2float(static_cast<const __half *>(P.bias)[col]);
    x = __fadd_rn(x, b);
  }
  const int64_t idx = row * P.ldd + col;
  if (P.d_dt == 1)
    static_cast<__nv_bfloat16 *>(P.d)[idx] = __float2bfloat16_rn(x);
  else if (P.d_dt == 2)
    static_cast<__half *>(P.d)[idx] = __float2half_rn(x);
  else
    static_cast<float *>(P.d)[idx] = x;
}

// Runs D = alpha · A·Bᵀ (+ bias) (both operands K-major) on the stream. Returns
// cudaErrorInvalidValue for arguments the kernels do not take.
cudaError_t gemm(Params p, cudaStream_t stream);

// Whether gemm(p) runs a kernel that beats expanding the operands to BF16
// where one operand has at most 64 rows (quant_gemm's default dispatch):
// the decode kernels (K % 32 == 0, aligned rows; the only ones for E2M1
// and NVFP4 operands), else the tile kernel with both operands' FP8 codes
// loaded by TMA (K % 16 == 0, 16-byte aligned rows) where the large operand
// has 8192 rows or more, or 4096 or more against at most 32. Elsewhere
// gemm(p) may still run the tile kernel (at fewer rows) but loses.
bool beats_expansion(Params p);

// Whether the kernel runs on device dev (compute capability 9.0: its machine
// code is sm_90a).
bool device_ok(int dev);

}  // namespace qfused
