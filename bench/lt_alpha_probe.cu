// lt_alpha_probe: whether cuBLASLt's BF16 GEMMs on this GPU take alpha from
// device memory, and in which pointer modes, for the GEMM cuda/gemm.cu runs
// after expanding MX/NVFP4 operands: column-major D'[N, M] = A'ᵀ·B', A' the
// expanded B [N, K] (TRANSA T), B' the expanded A (TRANSB N), BF16 in, FP32
// compute, D BF16 or FP32. NVFP4's per-tensor factors live in device memory,
// so cuda/gemm.cu has cuBLASLt write FP32 sums and scales them in a second
// pass (scale_kernel); a device alpha would let cuBLASLt write D itself.
//
// For each pointer mode (host alpha: the reference; CUBLASLT_POINTER_MODE_DEVICE;
// ALPHA_DEVICE_VECTOR_BETA_ZERO; ALPHA_DEVICE_VECTOR_BETA_HOST) it prints how
// many algorithms the heuristic returns, whether D equals the host-alpha D bit
// for bit (the same alpha value), and the median time of 20 runs.
//
//   nvcc -O2 -std=c++17 -arch=sm_90 -o build/lt_alpha_probe bench/lt_alpha_probe.cu -lcublasLt
//   build/lt_alpha_probe M N K
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "probe_common.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>


__global__ void fill(__nv_bfloat16 *p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const uint32_t h = probe_hash(i, seed);
    p[i] = __float2bfloat16((float)((int)(h % 13) - 6) * 0.25f);  // E2M1-like values
  }
}
__global__ void fill_f(float *p, int n, float v) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = v;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: lt_alpha_probe M N K\n");
    return 2;
  }
  const int64_t M = atoll(argv[1]), N = atoll(argv[2]), K = atoll(argv[3]);
  const float alpha = 0.7f;  // an alpha_eff that is not a power of two
  cublasLtHandle_t lt;
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) return 1;
  __nv_bfloat16 *A, *B;  // A' [N, K] row-major = column-major K x N; B' [M, K] row-major = column-major K x M
  CK(cudaMalloc(&A, N * K * 2));
  CK(cudaMalloc(&B, M * K * 2));
  fill<<<1024, 256>>>(A, N * K, 1);
  fill<<<1024, 256>>>(B, M * K, 2);
  float *dev_ab, *vec;
  CK(cudaMalloc(&dev_ab, 8));
  CK(cudaMalloc(&vec, N * 4));
  const float ab[2] = {alpha, 0.0f};
  CK(cudaMemcpy(dev_ab, ab, 8, cudaMemcpyHostToDevice));
  fill_f<<<64, 256>>>(vec, (int)N, alpha);
  void *ws;
  const size_t wsb = 32 << 20;
  CK(cudaMalloc(&ws, wsb));
  CK(cudaDeviceSynchronize());

  for (int dt = 0; dt < 2; dt++) {  // D BF16, FP32
    const cudaDataType_t td = dt == 0 ? CUDA_R_16BF : CUDA_R_32F;
    const size_t dsz = dt == 0 ? 2 : 4;
    void *ref, *D;
    CK(cudaMalloc(&ref, M * N * dsz));
    CK(cudaMalloc(&D, M * N * dsz));
    struct Mode {
      const char *name;
      int mode;  // -1: host
    } modes[] = {{"host alpha", -1},
                 {"POINTER_MODE_DEVICE", CUBLASLT_POINTER_MODE_DEVICE},
                 {"ALPHA_DEVICE_VECTOR_BETA_ZERO", CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO},
                 {"ALPHA_DEVICE_VECTOR_BETA_HOST", CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST}};
    for (auto &md : modes) {
      cublasLtMatmulDesc_t op;
      cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
      cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
      if (md.mode >= 0) {
        cublasLtPointerMode_t pm = (cublasLtPointerMode_t)md.mode;
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof pm);
      }
      cublasLtMatrixLayout_t la, lb, ld;
      cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, K, N, K);
      cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, K, M, K);
      cublasLtMatrixLayoutCreate(&ld, td, N, M, N);
      cublasLtMatmulPreference_t pref;
      cublasLtMatmulPreferenceCreate(&pref);
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
      cublasLtMatmulHeuristicResult_t res[8];
      int n = 0;
      cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 8, res, &n);
      printf("%-5s %-32s heuristic status %d, %d algorithms", dt == 0 ? "bf16" : "fp32", md.name, (int)hs, n);
      if (hs == CUBLAS_STATUS_SUCCESS && n > 0) {
        const float beta = 0.0f;
        const void *pa = md.mode == -1 ? (const void *)&alpha : md.mode == CUBLASLT_POINTER_MODE_DEVICE ? (const void *)dev_ab : (const void *)vec;
        const void *pb = md.mode == -1 || md.mode == CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST ? (const void *)&beta
                         : md.mode == CUBLASLT_POINTER_MODE_DEVICE                                       ? (const void *)(dev_ab + 1)
                                                                                                         : nullptr;
        void *out = md.mode == -1 ? ref : D;
        cublasStatus_t rs = cublasLtMatmul(lt, op, pa, A, la, B, lb, pb, out, ld, out, ld, &res[0].algo, ws, wsb, 0);
        CK(cudaDeviceSynchronize());
        if (rs != CUBLAS_STATUS_SUCCESS) {
          printf(", run status %d\n", (int)rs);
        } else {
          std::vector<float> ts;
          cudaEvent_t e0, e1;
          cudaEventCreate(&e0);
          cudaEventCreate(&e1);
          for (int i = 0; i < 20; i++) {
            cudaEventRecord(e0);
            cublasLtMatmul(lt, op, pa, A, la, B, lb, pb, out, ld, out, ld, &res[0].algo, ws, wsb, 0);
            cudaEventRecord(e1);
            cudaEventSynchronize(e1);
            float ms;
            cudaEventElapsedTime(&ms, e0, e1);
            ts.push_back(ms);
          }
          std::sort(ts.begin(), ts.end());
          bool same = true;
          if (md.mode != -1) {
            std::vector<uint8_t> h1(M * N * dsz), h2(M * N * dsz);
            CK(cudaMemcpy(h1.data(), ref, M * N * dsz, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(h2.data(), D, M * N * dsz, cudaMemcpyDeviceToHost));
            same = memcmp(h1.data(), h2.data(), h1.size()) == 0;
          }
          printf(", %.3f ms, D %s the host-alpha D\n", ts[ts.size() / 2], same ? "bit-identical to" : "DIFFERS from");
        }
      } else {
        printf("\n");
      }
      cublasLtMatmulPreferenceDestroy(pref);
      cublasLtMatrixLayoutDestroy(la);
      cublasLtMatrixLayoutDestroy(lb);
      cublasLtMatrixLayoutDestroy(ld);
      cublasLtMatmulDescDestroy(op);
    }
    CK(cudaFree(ref));
    CK(cudaFree(D));
  }
  return 0;
}
