// Probe (not part of the plugin): cuBLASLt's algorithms for FP8 block
// scaling (A 1x128 activations, B 1x128 or 128x128 weights) at decode shapes
// on Hopper, each timed in a CUDA graph, against BF16 cuBLASLt. It answers
// whether a split-K or another algorithm than the heuristic's first beats
// the one the plugin runs (gemm.cu lt_plan: the first result under a 1 MiB
// workspace cap) where the weight's tiles are too few for the GPU.
//
//   nvcc -O2 -std=c++17 -o lt_block_probe bench/lt_block_probe.cu -lcublasLt
//   ./lt_block_probe M N K [M N K ...]
//
// Prints, per shape and weight layout, every algorithm the heuristic returns
// under 1 MiB and 32 MiB (tile id, split-K count, reduction scheme, the
// workspace it needs) with its time, and the first algorithm forced to split
// K in 2, 4 and 8 where cublasLtMatmulAlgoCheck accepts it.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "probe_common.cuh"  // CK, LT

static cublasLtHandle_t H;
static cudaStream_t S;
static void *WS;
static const size_t kWs = 32u << 20;

struct Gemm {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la, lb, lc, ld;
  const void *a, *b;
  void *d;
  const float *as, *bs;
};

static float time_graph(const Gemm &g, const cublasLtMatmulAlgo_t *algo, size_t wsz) {
  const float alpha = 1.f, beta = 0.f;
  // Warm-up, then a graph of 20 calls, median of 7 replays.
  if (cublasLtMatmul(H, g.op, &alpha, g.a, g.la, g.b, g.lb, &beta, g.d, g.lc, g.d, g.ld, algo, WS, wsz, S) != CUBLAS_STATUS_SUCCESS) return -1;
  CK(cudaStreamSynchronize(S));
  cudaGraph_t graph;
  cudaGraphExec_t ex;
  CK(cudaStreamBeginCapture(S, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < 20; i++) cublasLtMatmul(H, g.op, &alpha, g.a, g.la, g.b, g.lb, &beta, g.d, g.lc, g.d, g.ld, algo, WS, wsz, S);
  CK(cudaStreamEndCapture(S, &graph));
  CK(cudaGraphInstantiate(&ex, graph, 0));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> t;
  for (int r = 0; r < 7; r++) {
    CK(cudaEventRecord(e0, S));
    CK(cudaGraphLaunch(ex, S));
    CK(cudaEventRecord(e1, S));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1000.f / 20.f);
  }
  CK(cudaGraphExecDestroy(ex));
  CK(cudaGraphDestroy(graph));
  std::sort(t.begin(), t.end());
  return t[3];
}

static void describe(const cublasLtMatmulAlgo_t &a, char *buf, size_t n) {
  int id = 0, tile = 0, sk = 0, red = 0, stages = 0;
  size_t w;
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &sk, sizeof sk, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof red, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &w);
  snprintf(buf, n, "algo %d tile %d stages %d splitK %d red %d", id, tile, stages, sk, red);
}

static void run_shape(int64_t M, int64_t N, int64_t K, bool two_d) {
  // Column-major terms as the plugin calls it: m' = N (the weight, A' = W
  // [N, K] row-major read transposed), n' = M (the activation), k' = K.
  uint8_t *w, *x;
  float *ws_, *xs;
  __nv_bfloat16 *d;
  CK(cudaMalloc(&w, N * K));
  CK(cudaMalloc(&x, M * K + 256));
  CK(cudaMalloc(&ws_, (N / 128 + 4) * (K / 128 + 4) * 4 + N * (K / 128) * 4));
  CK(cudaMalloc(&xs, (K / 128) * (M + 4) * 4));
  CK(cudaMalloc(&d, M * N * 2));
  CK(cudaMemset(w, 0x38, N * K));  // 1.0 in E4M3
  CK(cudaMemset(x, 0x30, M * K));
  std::vector<float> ones(std::max<int64_t>((N / 128 + 4) * (K / 128 + 4) + N * (K / 128), (K / 128) * (M + 4)), 1.f);
  CK(cudaMemcpy(ws_, ones.data(), ((N / 128 + 4) * (K / 128 + 4) + N * (K / 128)) * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(xs, ones.data(), (K / 128) * (M + 4) * 4, cudaMemcpyHostToDevice));
  Gemm g;
  LT(cublasLtMatmulDescCreate(&g.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  LT(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  LT(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  int32_t am = two_d ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  int32_t bm = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  LT(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &am, sizeof am));
  LT(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &bm, sizeof bm));
  const void *asp = ws_, *bsp = xs;
  LT(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &asp, sizeof asp));
  LT(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &bsp, sizeof bsp));
  LT(cublasLtMatrixLayoutCreate(&g.la, CUDA_R_8F_E4M3, K, N, K));
  LT(cublasLtMatrixLayoutCreate(&g.lb, CUDA_R_8F_E4M3, K, M, K));
  LT(cublasLtMatrixLayoutCreate(&g.lc, CUDA_R_16BF, N, M, N));
  LT(cublasLtMatrixLayoutCreate(&g.ld, CUDA_R_16BF, N, M, N));
  g.a = w, g.b = x, g.d = d;
  printf("\n== M%lld N%lld K%lld, weight %s\n", (long long)M, (long long)N, (long long)K, two_d ? "128x128" : "1x128");
  cublasLtMatmulAlgo_t first{};
  bool have_first = false;
  for (size_t cap : {(size_t)1 << 20, kWs}) {
    cublasLtMatmulPreference_t pref;
    LT(cublasLtMatmulPreferenceCreate(&pref));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &cap, sizeof cap));
    uint32_t red = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &red, sizeof red));
    cublasLtMatmulHeuristicResult_t res[16];
    int found = 0;
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(H, g.op, g.la, g.lb, g.lc, g.ld, pref, 16, res, &found);
    printf("workspace cap %zu: status %d, %d algorithms\n", cap, (int)hs, found);
    for (int i = 0; i < found; i++) {
      char b[160];
      describe(res[i].algo, b, sizeof b);
      printf("  #%d %s ws %zu: %.2f us\n", i, b, res[i].workspaceSize, time_graph(g, &res[i].algo, kWs));
    }
    if (found > 0 && !have_first) first = res[0].algo, have_first = true;
    cublasLtMatmulPreferenceDestroy(pref);
  }
  if (have_first) {
    for (int sk : {2, 4, 8}) {
      cublasLtMatmulAlgo_t a = first;
      uint32_t rs = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
      cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &sk, sizeof sk);
      cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &rs, sizeof rs);
      cublasLtMatmulHeuristicResult_t r{};
      cublasStatus_t cs = cublasLtMatmulAlgoCheck(H, g.op, g.la, g.lb, g.lc, g.ld, &a, &r);
      char b[160];
      describe(a, b, sizeof b);
      if (cs != CUBLAS_STATUS_SUCCESS) printf("  forced %s: check status %d\n", b, (int)cs);
      else printf("  forced %s ws %zu: %.2f us\n", b, r.workspaceSize, time_graph(g, &a, kWs));
    }
  }
  cublasLtMatmulDescDestroy(g.op);
  // The BF16 peer: D = X·Wᵀ with the heuristic's first algorithm (32 MiB).
  __nv_bfloat16 *wb, *xb;
  CK(cudaMalloc(&wb, N * K * 2));
  CK(cudaMalloc(&xb, M * K * 2));
  CK(cudaMemset(wb, 0, N * K * 2));
  CK(cudaMemset(xb, 0, M * K * 2));
  Gemm b;
  LT(cublasLtMatmulDescCreate(&b.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  LT(cublasLtMatmulDescSetAttribute(b.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  LT(cublasLtMatmulDescSetAttribute(b.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  LT(cublasLtMatrixLayoutCreate(&b.la, CUDA_R_16BF, K, N, K));
  LT(cublasLtMatrixLayoutCreate(&b.lb, CUDA_R_16BF, K, M, K));
  b.lc = g.lc, b.ld = g.ld, b.a = wb, b.b = xb, b.d = d;
  cublasLtMatmulPreference_t pref;
  LT(cublasLtMatmulPreferenceCreate(&pref));
  LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWs, sizeof kWs));
  cublasLtMatmulHeuristicResult_t r{};
  int found = 0;
  LT(cublasLtMatmulAlgoGetHeuristic(H, b.op, b.la, b.lb, b.lc, b.ld, pref, 1, &r, &found));
  char bb[160];
  describe(r.algo, bb, sizeof bb);
  printf("BF16 peer: %s ws %zu: %.2f us\n", bb, r.workspaceSize, time_graph(b, &r.algo, kWs));
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatmulDescDestroy(b.op);
  cudaFree(wb), cudaFree(xb), cudaFree(w), cudaFree(x), cudaFree(ws_), cudaFree(xs), cudaFree(d);
}

int main(int argc, char **argv) {
  LT(cublasLtCreate(&H));
  CK(cudaStreamCreate(&S));
  CK(cudaMalloc(&WS, kWs));
  for (int i = 1; i + 2 < argc; i += 3) {
    int64_t M = atoll(argv[i]), N = atoll(argv[i + 1]), K = atoll(argv[i + 2]);
    run_shape(M, N, K, true);
    run_shape(M, N, K, false);
  }
  return 0;
}
