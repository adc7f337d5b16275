// lt_probe: what cuBLASLt's heuristic picks for one FP8 GEMM under each set
// of preferences the libraries around it use, and how fast each pick runs.
//
// The GEMM is the one cuda/gemm.cu hands cuBLASLt for Y[M, N] = X[M, K]·W[N, K]ᵀ
// (and torch._scaled_mm for the same operands): column-major D'[N, M] =
// op(A')·op(B'), A' = W (TRANSA T, ld K), B' = X (TRANSB N, ld K), E4M3 codes,
// D and C BF16, FP32 compute, the scale pointers set. mode: tensor (per-tensor
// scales), blk2d (A' 128x128 blocks, B' 1x128: libquant's fp8_block 1x128 x
// 128x128), blk1d (both 1x128).
//
// For every combination of the preferences that differ between libquant and
// torch (the workspace limit, the reduction-scheme mask, the alignment hints)
// it asks the heuristic for its top candidates, then times every distinct
// algorithm it returned (median of CUDA-event samples on random codes) and
// prints, per combination, the top pick and its time, and the fastest seen.
//
//   nvcc -O2 -std=c++17 -arch=sm_90 -o build/lt_probe bench/lt_probe.cu -lcublasLt
//   build/lt_probe M N K mode [top]
#include <cublasLt.h>
#include <cuda_runtime.h>

#include "probe_common.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// Random E4M3 codes without NaN (0x7F, 0xFF).
__global__ void fill_codes(uint8_t *p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const uint32_t h = probe_hash(i, seed);
    uint8_t b = (uint8_t)h;
    if ((b & 0x7F) == 0x7F) b ^= 1;
    p[i] = b;
  }
}
__global__ void fill_scales(float *p, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = (i % 3 == 0) ? 0.5f : (i % 3 == 1 ? 1.0f : 2.0f);
}

struct Combo {
  size_t ws;
  bool mask, align;
  std::string name() const {
    char b[96];
    snprintf(b, sizeof b, "ws=%zuMiB mask=%s align=%s", ws >> 20, mask ? "none|compute" : "default", align ? "256" : "default");
    return b;
  }
};

std::string algo_str(const cublasLtMatmulAlgo_t &a) {
  int id = 0, tile = 0, splitk = 0, red = 0, swz = 0, custom = 0, stages = 0;
  uint16_t inner = 0, cluster = 0;
  size_t w;
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof red, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swz, sizeof swz, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom, sizeof custom, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, &inner, sizeof inner, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof cluster, &w);
  char b[160];
  snprintf(b, sizeof b, "id=%d tile=%d stages=%d splitk=%d red=%d swz=%d custom=%d inner=%d cluster=%d", id, tile, stages, splitk, red, swz,
           custom, inner, cluster);
  return b;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: lt_probe M N K tensor|blk2d|blk1d [top]\n");
    return 2;
  }
  const int64_t M = atoll(argv[1]), N = atoll(argv[2]), K = atoll(argv[3]);
  const std::string mode = argv[4];
  const int top = argc > 5 ? atoi(argv[5]) : 8;
  printf("cuBLASLt version %zu (cudart %zu)\n", cublasLtGetVersion(), cublasLtGetCudartVersion());
  uint8_t *x, *w;
  void *d, *ws;
  float *sx, *sw;
  CK(cudaMalloc(&x, M * K));
  CK(cudaMalloc(&w, N * K));
  CK(cudaMalloc(&d, M * N * 2));
  const size_t kWs = 32u << 20;
  CK(cudaMalloc(&ws, kWs));
  const size_t nsx = (size_t)(M + 128) * (K / 128 + 4), nsw = (size_t)(N + 128) * (K / 128 + 4);
  CK(cudaMalloc(&sx, nsx * 4));
  CK(cudaMalloc(&sw, nsw * 4));
  fill_codes<<<1024, 256>>>(x, M * K, 1);
  fill_codes<<<1024, 256>>>(w, N * K, 2);
  fill_scales<<<256, 256>>>(sx, nsx);
  fill_scales<<<256, 256>>>(sw, nsw);
  CK(cudaDeviceSynchronize());
  cublasLtHandle_t h;
  LT(cublasLtCreate(&h));
  cublasLtMatmulDesc_t op;
  LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  if (mode != "tensor") {
    const int32_t am = mode == "blk2d" ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    const int32_t bm = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &am, sizeof am));
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &bm, sizeof bm));
  }
  const float *pa = sw, *pb = sx;
  LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &pa, sizeof pa));
  LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &pb, sizeof pb));
  cublasLtMatrixLayout_t la, lb, lc, ld;
  LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, K, N, K));
  LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, K, M, K));
  LT(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, N, M, N));
  LT(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, N, M, N));

  std::vector<Combo> combos;
  for (size_t wsz : {(size_t)1 << 20, (size_t)4 << 20, kWs})
    for (bool mask : {false, true})
      for (bool align : {false, true}) combos.push_back({wsz, mask, align});
  std::vector<cublasLtMatmulHeuristicResult_t> algos;  // distinct
  std::vector<std::vector<int>> picks(combos.size());  // indices into algos, heuristic order
  for (size_t ci = 0; ci < combos.size(); ci++) {
    const Combo &c = combos[ci];
    cublasLtMatmulPreference_t pref;
    LT(cublasLtMatmulPreferenceCreate(&pref));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &c.ws, sizeof c.ws));
    if (c.mask) {
      uint32_t red = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
      LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &red, sizeof red));
    }
    if (c.align) {
      uint32_t al = 256;
      LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, sizeof al));
      LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al, sizeof al));
      LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al, sizeof al));
      LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al, sizeof al));
    }
    std::vector<cublasLtMatmulHeuristicResult_t> res(top);
    int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, ld, pref, top, res.data(), &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS) {
      printf("%s: heuristic status %d\n", c.name().c_str(), (int)st);
      continue;
    }
    for (int i = 0; i < found; i++) {
      int at = -1;
      for (size_t j = 0; j < algos.size(); j++)
        if (memcmp(&algos[j].algo, &res[i].algo, sizeof res[i].algo) == 0) at = (int)j;
      if (at < 0) {
        at = (int)algos.size();
        algos.push_back(res[i]);
      }
      picks[ci].push_back(at);
    }
  }
  const float alpha = 1.0f, beta = 0.0f;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const double flop = 2.0 * M * N * K;
  const int reps = flop > 3e12 ? 1 : flop > 3e11 ? 5 : 50;
  std::vector<double> ms(algos.size(), -1);
  for (size_t j = 0; j < algos.size(); j++) {
    auto run = [&]() {
      return cublasLtMatmul(h, op, &alpha, w, la, x, lb, &beta, d, lc, d, ld, &algos[j].algo, ws, kWs, 0);
    };
    if (run() != CUBLAS_STATUS_SUCCESS) continue;
    for (int i = 0; i < 3; i++) run();
    std::vector<float> t;
    for (int s = 0; s < 11; s++) {
      CK(cudaEventRecord(e0));
      for (int r = 0; r < reps; r++) run();
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float v;
      CK(cudaEventElapsedTime(&v, e0, e1));
      t.push_back(v / reps);
    }
    CK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    ms[j] = t[t.size() / 2];
  }
  printf("M%lld N%lld K%lld %s: %zu distinct algorithms\n", (long long)M, (long long)N, (long long)K, mode.c_str(), algos.size());
  for (size_t j = 0; j < algos.size(); j++)
    printf("  [%zu] %.4f ms %6.0f TFLOP/s ws=%zu waves=%.2f %s\n", j, ms[j], ms[j] > 0 ? flop / ms[j] / 1e9 : 0.0, algos[j].workspaceSize,
           algos[j].wavesCount, algo_str(algos[j].algo).c_str());
  for (size_t ci = 0; ci < combos.size(); ci++) {
    printf("  %-42s picks", combos[ci].name().c_str());
    for (int p : picks[ci]) printf(" [%d]", p);
    if (!picks[ci].empty()) printf("  top: %.4f ms", ms[picks[ci][0]]);
    printf("\n");
  }
  return 0;
}
