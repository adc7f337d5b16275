// Probe: the fused tile kernel of cuda/gemm_fused.cu in variants, bit for
// bit against the shipped configuration and timed against it and BF16
// cuBLAS (CUDA events, median). Built by bench/tile_probe/build.sh with
// variants.patch: CW consumer warpgroups (4: each 64x64 of a 128x128 or
// 256x64 tile), PIPE at 128x128 (two block sums in flight with setmaxnreg
// PROD2P / CONS2P), and -DPRODHINT=ns for the producer's wait on an empty
// stage with a suspend-time hint; PRE, the scales' loads and products
// before each wgmma's wait.
#ifndef PROD2P
#define PROD2P 40
#endif
#ifndef CONS2P
#define CONS2P 232
#endif
#ifndef PROD4
#define PROD4 56
#endif
#ifndef CONS4
#define CONS4 104
#endif
#include "tile_part.cuh"
#include <cublas_v2.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <array>
using namespace qfused;
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

using EncodeTiledFn = CUresult (*)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *, const cuuint64_t *,
                                   const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                   CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
static EncodeTiledFn enc() {
  void *f = nullptr; cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
  return (EncodeTiledFn)f;
}
static void tmap(const Operand &op, int64_t K, int rows, CUtensorMap *m) {
  const cuuint64_t dims[2] = {(cuuint64_t)K, (cuuint64_t)op.rows};
  const cuuint64_t strides[1] = {(cuuint64_t)op.ld};
  const cuuint32_t box[2] = {(cuuint32_t)kBK, (cuuint32_t)rows};
  const cuuint32_t estr[2] = {1, 1};
  if (enc()(m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<uint8_t *>(op.data), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) { puts("tmap"); exit(1); }
}
template <int BM, int BN, int CW, bool PIPE = false, bool PRE = false>
static void launch(const Params &p, cudaStream_t s) {
  using L = Layout<BM, BN, false, false>;
  auto kern = fused_gemm_kernel<BM, BN, 0, 0, false, false, PIPE, CW, PRE>;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, L::SMEM));
  TmaMaps t{}; tmap(p.a, p.K, BM, &t.a); tmap(p.b, p.K, BN, &t.b); t.use = 1;
  dim3 grid((unsigned)((p.N + BN - 1) / BN), (unsigned)((p.M + BM - 1) / BM));
  launch_kernel(kern, grid, (CW + 1) * 128, L::SMEM, s, p, t);
  CK(cudaGetLastError());
}
typedef void (*LaunchFn)(const Params &, cudaStream_t);
static const struct { const char *name; LaunchFn f; } kVariants[] = {
    {"128x128 2WG (main)", launch<128, 128, 2>},
    {"128x128 4WG", launch<128, 128, 4>},
    {"128x128 2WG PRE", launch<128, 128, 2, false, true>},
    {"128x128 4WG PRE", launch<128, 128, 4, false, true>},
};
static Operand make(int64_t rows, int64_t K, uint32_t seed, int escale) {
  std::vector<uint8_t> d(rows * K), sc(rows * (K / 32));
  uint32_t x = seed;
  for (auto &v : d) { x = x * 1664525u + 1013904223u; uint8_t c = x >> 24; if ((c & 0x7F) == 0x7F) c ^= 1; v = c; }
  for (auto &v : sc) { x = x * 1664525u + 1013904223u; v = (uint8_t)(127 - escale + (x >> 24) % (2 * escale + 1)); }
  Operand op{}; uint8_t *dd, *ds;
  CK(cudaMalloc(&dd, d.size())); CK(cudaMalloc(&ds, sc.size()));
  CK(cudaMemcpy(dd, d.data(), d.size(), cudaMemcpyHostToDevice)); CK(cudaMemcpy(ds, sc.data(), sc.size(), cudaMemcpyHostToDevice));
  op.data = dd; op.scale = ds; op.rows = rows; op.ld = K; op.scale_stride = K / 32; op.swizzled = 0; op.elem = kE4M3; op.s16 = 0;
  return op;
}
template <typename F> static float med(F f, int n) {
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b)); std::vector<float> t;
  for (int i = 0; i < 3; i++) f();
  for (int i = 0; i < n; i++) { CK(cudaEventRecord(a)); f(); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b)); float ms; CK(cudaEventElapsedTime(&ms, a, b)); t.push_back(ms); }
  std::sort(t.begin(), t.end()); return t[t.size() / 2];
}
int main(int argc, char **argv) {
  cublasHandle_t h; cublasCreate(&h);
  std::vector<std::array<int64_t, 3>> shapes = {{128, 8192, 8192}, {256, 8192, 8192}, {512, 8192, 8192}, {1024, 8192, 8192}, {4096, 4096, 4096}, {8192, 8192, 8192}, {300, 1000, 1024}};
  int only = -1;  // tile_probe M N K [variant]: one shape (for ncu)
  if (argc >= 4) shapes = {{atoll(argv[1]), atoll(argv[2]), atoll(argv[3])}};
  if (argc >= 5) only = atoi(argv[4]);
  const int nv = (int)(sizeof kVariants / sizeof kVariants[0]);
  for (auto &sh : shapes) {
    const int64_t M = sh[0], N = sh[1], K = sh[2];
    for (int esc : {8, 127}) {
      if (esc == 127 && (M > 1024 || only >= 0)) continue;
      Params p{}; p.a = make(M, K, 1, esc); p.b = make(N, K, 2, esc); p.M = M; p.N = N; p.K = K; p.alpha = 1; p.ldd = N; p.d_dt = 0;
      float *d0, *d1; CK(cudaMalloc(&d0, M * N * 4)); CK(cudaMalloc(&d1, M * N * 4));
      std::vector<uint32_t> h0(M * N), h1(M * N);
      const int it = M * N * K > (1LL << 36) ? 5 : 20;
      if (only >= 0) {
        p.d = d0;
        for (int i = 0; i < 3; i++) kVariants[only].f(p, 0);
        CK(cudaDeviceSynchronize());
        printf("ran %s at M%ld N%ld K%ld\n", kVariants[only].name, (long)M, (long)N, (long)K);
        return 0;
      }
      CK(cudaMemset(d0, 0xFF, M * N * 4)); p.d = d0; kVariants[0].f(p, 0); CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(h0.data(), d0, M * N * 4, cudaMemcpyDeviceToHost));
      int nz = 0; for (int64_t i = 0; i < M * N; i += 997) nz += h0[i] != 0;
      printf("M%-5ld N%-5ld K%-5ld scales 2^+-%-3d (nonzero sampled %d) ms:", (long)M, (long)N, (long)K, esc, nz);
      float t0 = 0;
      for (int v = 0; v < nv; v++) {
        CK(cudaMemset(d1, 0xEE, M * N * 4)); p.d = d1; kVariants[v].f(p, 0); CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(h1.data(), d1, M * N * 4, cudaMemcpyDeviceToHost));
        int64_t diff = 0; for (int64_t i = 0; i < M * N; i++) diff += h0[i] != h1[i];
        Params q = p; q.d = d1;
        float t = med([&] { kVariants[v].f(q, 0); }, it);
        if (v == 0) t0 = t;
        printf("  [%s] %.4f (%.2fx, differ %ld)", kVariants[v].name, t, t0 / t, (long)diff);
      }
      if (esc == 8) {
        __nv_bfloat16 *A, *B, *C; CK(cudaMalloc(&A, M * K * 2)); CK(cudaMalloc(&B, N * K * 2)); CK(cudaMalloc(&C, M * N * 2));
        CK(cudaMemset(A, 0, M * K * 2)); CK(cudaMemset(B, 0, N * K * 2));
        float one = 1, zero = 0;
        float tb = med([&] { cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, B, CUDA_R_16BF, (int)K, A, CUDA_R_16BF, (int)K, &zero, C, CUDA_R_16BF, (int)N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT); }, it);
        printf("  BF16 %.4f (main/BF16 %.2fx)", tb, tb / t0);
        CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(C));
      }
      printf("\n");
      fflush(stdout);
      CK(cudaFree(d0)); CK(cudaFree(d1)); CK(cudaFree((void *)p.a.data)); CK(cudaFree((void *)p.a.scale)); CK(cudaFree((void *)p.b.data)); CK(cudaFree((void *)p.b.scale));
    }
  }
  return 0;
}
