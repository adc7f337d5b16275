// Can an exact MX GEMM hide part of its operand expansion behind its own BF16
// GEMM (issue #11: MXFP8 at 4096³ is 0.84× BF16, the expansion at 98 % of copy
// bandwidth and the GEMM cuBLASLt's)? cuBLASLt's persistent kernels take one
// CTA per SM and the whole register file, so nothing runs beside them unless
// the GEMM is told to use fewer SMs (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET).
// At 4096³ a 128×256 tile grid is 512 tiles: 4 waves on 132 SMs or on 128.
// This probe times, with BF16 operands and a stand-in expansion (FP8 bytes ×
// a per-32 power of two to BF16, the traffic of the real one):
//   gemm[sms]        the GEMM alone, SM target 0 (all) or sms;
//   seq              expand A and B, then the GEMM (what libquant does now);
//   split[c, sms, w] expand A and B's first 1/c, then c GEMMs of N/c columns
//                    at the SM target on a high-priority stream while chunk
//                    j+1 of B expands on the caller's stream in w CTAs of 1024
//                    threads (w SMs).
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o build/sm_overlap_probe bench/sm_overlap_probe.cu -lcublasLt
// Run:   build/sm_overlap_probe [M N K]   (default 4096 4096 4096; µs per pass, median of 30)
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "probe_common.cuh"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

// 8 codes (8 bytes) -> 8 BF16 (16 bytes), scale 2^(s-127) per 32 codes.
__global__ void __launch_bounds__(1024) expand(const uint2 *codes, const uint8_t *scales, uint4 *out, size_t units) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < units; i += 4 * stride) {
    uint2 c[4];
    uint8_t s[4];
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const size_t j = i + u * stride;
      c[u] = j < units ? codes[j] : make_uint2(0, 0);
      s[u] = j < units ? scales[j / 4] : 127;
    }
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const size_t j = i + u * stride;
      if (j >= units) break;
      const float f = __uint_as_float((uint32_t)s[u] << 23);
      uint32_t w[4];
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const uint32_t lo = (e < 2 ? c[u].x : c[u].y) >> ((e & 1) * 16);
        const float a = (float)(int8_t)(lo & 0xff) * f, b = (float)(int8_t)((lo >> 8) & 0xff) * f;
        __nv_bfloat162 p = __floats2bfloat162_rn(a, b);
        w[e] = *reinterpret_cast<uint32_t *>(&p);
      }
      out[j] = make_uint4(w[0], w[1], w[2], w[3]);
    }
  }
}

struct Gemm {
  cublasLtHandle_t h;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, ld;
  cublasLtMatmulAlgo_t algo;
  void *ws;
  size_t wsz = 64 << 20;
  // D[n, m] (col-major m x n) = A[m, k]ᵀ-stored · B[n, k]: opA T, opB N, all K-contiguous.
  Gemm(cublasLtHandle_t hh, int m, int n, int k, int sms, void *w) : h(hh), ws(w) {
    LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof nn));
    if (sms > 0) LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sms, sizeof sms));
    LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, k, m, k));
    LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, n, k));
    LT(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, m, n, m));
    cublasLtMatmulPreference_t pref;
    LT(cublasLtMatmulPreferenceCreate(&pref));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsz, sizeof wsz));
    cublasLtMatmulHeuristicResult_t r;
    int found = 0;
    LT(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, ld, ld, pref, 1, &r, &found));
    if (!found) {
      fprintf(stderr, "no algo\n");
      exit(1);
    }
    algo = r.algo;
    int tile = 0, cl = 0;
    size_t sz;
    cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &sz);
    cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cl, sizeof cl, &sz);
    printf("  gemm m%d n%d k%d sms %d: tile id %d cluster id %d\n", m, n, k, sms, tile, cl);
  }
  void run(const void *a, const void *b, void *d, cudaStream_t s) {
    const float one = 1, zero = 0;
    LT(cublasLtMatmul(h, op, &one, a, la, b, lb, &zero, d, ld, d, ld, &algo, ws, wsz, s));
  }
};

static float median_us(const std::function<void()> &f, cudaStream_t s) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; i++) f();
  std::vector<float> t;
  for (int i = 0; i < 30; i++) {
    CK(cudaEventRecord(e0, s));
    for (int j = 0; j < 5; j++) f();
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1000 / 5);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main(int argc, char **argv) {
  const int M = argc > 3 ? atoi(argv[1]) : 4096, N = argc > 3 ? atoi(argv[2]) : 4096, K = argc > 3 ? atoi(argv[3]) : 4096;
  int sms_all = 0;
  CK(cudaDeviceGetAttribute(&sms_all, cudaDevAttrMultiProcessorCount, 0));
  int lo, hi;
  CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  cudaStream_t s, shi;
  CK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, lo));
  CK(cudaStreamCreateWithPriority(&shi, cudaStreamNonBlocking, hi));
  cublasLtHandle_t h;
  LT(cublasLtCreate(&h));
  uint8_t *ca, *cb, *sa, *sb;
  __nv_bfloat16 *ea, *eb, *d;
  void *ws, *ws2;
  CK(cudaMalloc(&ca, (size_t)M * K));
  CK(cudaMalloc(&cb, (size_t)N * K));
  CK(cudaMalloc(&sa, (size_t)M * K / 32));
  CK(cudaMalloc(&sb, (size_t)N * K / 32));
  CK(cudaMemset(ca, 0x22, (size_t)M * K));
  CK(cudaMemset(cb, 0x13, (size_t)N * K));
  CK(cudaMemset(sa, 120, (size_t)M * K / 32));
  CK(cudaMemset(sb, 125, (size_t)N * K / 32));
  CK(cudaMalloc(&ea, (size_t)M * K * 2));
  CK(cudaMalloc(&eb, (size_t)N * K * 2));
  CK(cudaMalloc(&d, (size_t)M * N * 2));
  CK(cudaMalloc(&ws, 64 << 20));
  CK(cudaMalloc(&ws2, 64 << 20));
  printf("%s M %d N %d K %d, %d SMs, stream priorities %d..%d\n", "sm_overlap_probe", M, N, K, sms_all, lo, hi);
  auto ex = [&](const uint8_t *c, const uint8_t *sc, __nv_bfloat16 *o, size_t rows, int ctas, int threads, cudaStream_t st) {
    const size_t units = rows * K / 8;
    expand<<<ctas, threads, 0, st>>>(reinterpret_cast<const uint2 *>(c), sc, reinterpret_cast<uint4 *>(o), units);
  };
  const int full = sms_all * 2;  // 2 CTAs of 1024 per SM
  Gemm g0(h, M, N, K, 0, ws);
  std::vector<int> targets = {sms_all - 4, sms_all - 8, sms_all - 16};
  for (int t : targets) {
    Gemm g(h, M, N, K, t, ws);
    printf("gemm alone, SM target %3d: %.1f us (all SMs %.1f)\n", t, median_us([&] { g.run(ea, eb, d, s); }, s), median_us([&] { g0.run(ea, eb, d, s); }, s));
  }
  const float t_exp = median_us([&] { ex(ca, sa, ea, M, full, 1024, s); ex(cb, sb, eb, N, full, 1024, s); }, s);
  const float t_seq = median_us([&] { ex(ca, sa, ea, M, full, 1024, s); ex(cb, sb, eb, N, full, 1024, s); g0.run(ea, eb, d, s); }, s);
  printf("expand A+B alone %.1f us; seq (expand, gemm) %.1f us; gemm alone %.1f\n", t_exp, t_seq, median_us([&] { g0.run(ea, eb, d, s); }, s));
  cudaEvent_t ev[16];
  for (auto &e : ev) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  for (int c : {2, 4}) {
    for (int t : targets) {
      std::vector<Gemm *> gs;
      for (int j = 0; j < c; j++) gs.push_back(new Gemm(h, M, N / c, K, t, ws));
      const int w = sms_all - t;
      const size_t nc = N / c;
      for (int wc : {w, 2 * w}) {
        auto f = [&] {
          ex(ca, sa, ea, M, full, 1024, s);
          ex(cb, sb, eb, nc, full, 1024, s);
          CK(cudaEventRecord(ev[0], s));
          for (int j = 0; j < c; j++) {
            CK(cudaStreamWaitEvent(shi, ev[j], 0));
            gs[j]->run(ea, eb + (size_t)j * nc * K, d + (size_t)j * nc * M, shi);
            if (j + 1 < c) {
              ex(cb + (size_t)(j + 1) * nc * K, sb + (size_t)(j + 1) * nc * K / 32, eb + (size_t)(j + 1) * nc * K, nc, wc, 1024, s);
              CK(cudaEventRecord(ev[j + 1], s));
            }
          }
          CK(cudaEventRecord(ev[8], shi));
          CK(cudaStreamWaitEvent(s, ev[8], 0));
        };
        printf("split c %d, gemm SM target %3d, expansion CTAs %3d: %.1f us (seq %.1f)\n", c, t, wc, median_us(f, s), t_seq);
      }
      const float te = median_us([&] { ex(cb, sb, eb, nc, w, 1024, s); }, s);
      printf("  one B chunk expanded by %d CTAs alone: %.1f us\n", w, te);
    }
  }
  printf("done\n");
  return 0;
}
