// What read bandwidth the decode kernel's access pattern can reach, with no
// arithmetic (issue #12, MXFP8 decode: cuda/gemm_fused.cu decode_kernel), and
// what decode_kernel itself runs in on the same weight. Streams a [N, K] byte
// matrix (the MXFP8 weight's codes) under several patterns:
//   - v4:   a plain grid-stride stream of 16-byte loads (the ceiling);
//   - cp:   decode_kernel's: a CTA of WK warps owns NW·8 rows; warp w takes
//           the 128-byte K groups w, w+WK, ... (CONTIG: a contiguous run of
//           them) through its own ring of S stages by cp.async, 16 rows of a
//           small A (L2-resident) beside each stage (WITH_A);
//   - tma:  the same rings, each stage one 2-D tensor-map copy (128 bytes ×
//           NW·8 rows, 128-byte swizzle) and, with A, one more, completing on
//           an mbarrier.
// Then decode_kernel as dispatched (MXFP8 E4M3 × E4M3, 16 tokens and 1).
// The figures: bench/RESULTS.md, "the decode kernel against its own stream"
// (H200) and "what the MXFP8 decode kernel's stream can reach" (H100). Two
// register-stream kernels once measured here (rs_mma_kernel,
// rs_wgmma_kernel: "the MXFP8 decode kernel through registers") were slower
// than decode_kernel and are in git history.
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o build/decode_stream_probe bench/decode_stream_probe.cu
// Run:   build/decode_stream_probe [N K]   (default 8192 8192; prints µs and GB/s per pattern)
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "../cuda/gemm_fused.cu"
#include "probe_common.cuh"

using qfused::smem_u32;

__global__ void fill(uint8_t *p, size_t n, uint32_t seed) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = (uint8_t)probe_hash(i, seed);
}

template <int U>
__global__ void __launch_bounds__(256) stream_v4(const uint4 *p, size_t n16, uint32_t *out) {
  uint32_t x = 0;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += stride * U) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; u++) v[u] = i + u * stride < n16 ? __ldcs(p + i + u * stride) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < U; u++) x ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  out[(size_t)blockIdx.x * blockDim.x + threadIdx.x] = x;
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ int swz(int r, int c) { return r * 128 + ((c ^ (r & 7)) << 4); }

// Reads lane (g, q)'s fragments of one stage (A: rows g, g+8; B: rows 8t+g),
// 8 bytes per 32-block, as decode_kernel's FP8 path does.
template <int NW, bool WITH_A>
__device__ __forceinline__ uint32_t consume(const uint8_t *st, int lane) {
  const int g = lane / 4, q = lane % 4;
  uint32_t x = 0;
#pragma unroll
  for (int u = 0; u < 4; u++) {
    if (WITH_A)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const uint2 v = *reinterpret_cast<const uint2 *>(st + swz(8 * h + g, 2 * u + (q >> 1)) + 8 * (q & 1));
        x += v.x ^ v.y;
      }
    const uint8_t *b = st + (WITH_A ? 16 * 128 : 0);
#pragma unroll
    for (int t = 0; t < NW; t++) {
      const uint2 v = *reinterpret_cast<const uint2 *>(b + swz(8 * t + g, 2 * u + (q >> 1)) + 8 * (q & 1));
      x += v.x ^ v.y;
    }
  }
  return x;
}

template <int NW, bool WITH_A>
__host__ __device__ constexpr int stage_bytes() {
  return (WITH_A ? 16 * 128 : 0) + NW * 8 * 128;
}

template <int NW, int WK, int S, bool CONTIG, bool WITH_A>
__global__ void __launch_bounds__(WK * 32) cp_kernel(const uint8_t *A, const uint8_t *B, int64_t K, uint32_t *out) {
  extern __shared__ __align__(1024) uint8_t sm[];
  constexpr int SB = stage_bytes<NW, WITH_A>();
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int KG = (int)(K / 128);
  const int per = (KG + WK - 1) / WK;
  const int G = CONTIG ? max(0, min(per, KG - w * per)) : (w < KG ? (KG - 1 - w) / WK + 1 : 0);
  uint8_t *ring = sm + w * S * SB;
  const int64_t n0 = (int64_t)blockIdx.x * NW * 8;
  auto issue = [&](int i) {
    if (i < G) {
      const int kg = CONTIG ? w * per + i : w + i * WK;
      const uint32_t st = smem_u32(ring + (i % S) * SB);
      const int r0 = lane / 8, c = lane % 8;
      if (WITH_A)
#pragma unroll
        for (int j = 0; j < 4; j++) cp_async16(st + swz(r0 + 4 * j, c), A + (int64_t)(r0 + 4 * j) * K + kg * 128 + c * 16);
#pragma unroll
      for (int j = 0; j < NW * 2; j++)
        cp_async16(st + (WITH_A ? 16 * 128 : 0) + swz(r0 + 4 * j, c), B + (n0 + r0 + 4 * j) * K + kg * 128 + c * 16);
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  uint32_t x = 0;
#pragma unroll
  for (int i = 0; i < S - 1; i++) issue(i);
  for (int i = 0; i < G; i++) {
    asm volatile("cp.async.wait_group %0;" ::"n"(S - 2) : "memory");
    __syncwarp();
    issue(i + S - 1);
    x += consume<NW, WITH_A>(ring + (i % S) * SB, lane);
  }
  out[(size_t)blockIdx.x * blockDim.x + threadIdx.x] = x;
}

// ---- TMA ----
__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
  asm volatile(
      "{\n\t.reg .pred P1;\n"
      "W:\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n\t"
      "@P1 bra D;\n\t"
      "bra W;\n"
      "D:\n\t}" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void tma2d(uint32_t dst, const CUtensorMap *map, int x, int y, uint64_t *bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
               "l"(map), "r"(x), "r"(y), "r"(smem_u32(bar))
               : "memory");
}

template <int NW, int WK, int S, bool WITH_A>
__global__ void __launch_bounds__(WK * 32) tma_kernel(const __grid_constant__ CUtensorMap mA, const __grid_constant__ CUtensorMap mB, int64_t K,
                                                      uint32_t *out) {
  extern __shared__ uint8_t sm_raw[];
  uint8_t *sm = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(sm_raw) + 1023) & ~uintptr_t(1023));
  __shared__ __align__(8) uint64_t bars[WK * S];
  constexpr int SB = (stage_bytes<NW, WITH_A>() + 1023) / 1024 * 1024;
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int KG = (int)(K / 128);
  const int G = w < KG ? (KG - 1 - w) / WK + 1 : 0;
  uint8_t *ring = sm + w * S * SB;
  uint64_t *bar = bars + w * S;
  const int n0 = blockIdx.x * NW * 8;
  if (lane == 0) {
    for (int s = 0; s < S; s++) mbar_init(bar + s, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncwarp();
  auto issue = [&](int i) {
    if (i < G && lane == 0) {
      const int kg = w + i * WK;
      const uint32_t st = smem_u32(ring + (i % S) * SB);
      mbar_expect_tx(bar + i % S, stage_bytes<NW, WITH_A>());
      if (WITH_A) tma2d(st, &mA, kg * 128, 0, bar + i % S);
      tma2d(st + (WITH_A ? 16 * 128 : 0), &mB, kg * 128, n0, bar + i % S);
    }
  };
  uint32_t x = 0;
  for (int i = 0; i < S - 1; i++) issue(i);
  for (int i = 0; i < G; i++) {
    mbar_wait(bar + i % S, (i / S) & 1);
    __syncwarp();
    issue(i + S - 1);
    x += consume<NW, WITH_A>(ring + (i % S) * SB, lane);
  }
  out[(size_t)blockIdx.x * blockDim.x + threadIdx.x] = x;
}

typedef CUresult (*EncodeFn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                             const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

[[maybe_unused]] static CUtensorMap make_map(EncodeFn enc, const uint8_t *p, uint64_t rows, uint64_t K, uint32_t box_rows) {
  CUtensorMap m;
  const cuuint64_t dim[2] = {K, rows}, stride[1] = {K};
  const cuuint32_t box[2] = {128, box_rows}, es[2] = {1, 1};
  CUresult r = enc(&m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)p, dim, stride, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                   CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "cuTensorMapEncodeTiled: %d\n", (int)r);
    exit(1);
  }
  return m;
}

template <typename F>
static void timeit(const char *name, double bytes, F launch) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int r = 0; r < 30; r++) {
    CK(cudaEventRecord(a));
    launch();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float t;
    CK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  printf("%-34s median %7.2f us  min %7.2f us  %6.0f GB/s\n", name, ms[15] * 1e3, ms[0] * 1e3, bytes / (ms[15] * 1e-3) / 1e9);
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
}

template <int NW, int WK, int S, bool CONTIG, bool WITH_A>
static void run_cp(const uint8_t *A, const uint8_t *B, int64_t N, int64_t K, uint32_t *out, double bytes) {
  const int smem = WK * S * stage_bytes<NW, WITH_A>();
  auto k = cp_kernel<NW, WK, S, CONTIG, WITH_A>;
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  char name[96];
  snprintf(name, sizeof name, "cp NW%d WK%d S%d%s%s", NW, WK, S, CONTIG ? " contig" : "", WITH_A ? " +A" : "");
  timeit(name, bytes, [&] { k<<<(unsigned)(N / (NW * 8)), WK * 32, smem>>>(A, B, K, out); });
}

template <int NW, int WK, int S, bool WITH_A>
static void run_tma(EncodeFn enc, const uint8_t *A, const uint8_t *B, int64_t N, int64_t K, uint32_t *out, double bytes) {
  constexpr int SB = (stage_bytes<NW, WITH_A>() + 1023) / 1024 * 1024;
  const int smem = WK * S * SB + 1024;
  auto k = tma_kernel<NW, WK, S, WITH_A>;
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const CUtensorMap mA = make_map(enc, A, 16, K, 16), mB = make_map(enc, B, N, K, NW * 8);
  char name[96];
  snprintf(name, sizeof name, "tma NW%d WK%d S%d%s", NW, WK, S, WITH_A ? " +A" : "");
  timeit(name, bytes, [&] { k<<<(unsigned)(N / (NW * 8)), WK * 32, smem>>>(mA, mB, K, out); });
}


// ---- the kernels: M16 N K MXFP8 (E4M3 × E4M3), weight = the streamed B ----
struct KOps {
  qfused::Params p{};
  float *d;
};
static KOps make_kernel_ops(const uint8_t *A, const uint8_t *B, int64_t N, int64_t K, int64_t M) {
  KOps o{};
  uint8_t *sa, *sb;
  const int64_t stride = (K / 32 + 3) / 4 * 4;
  CK(cudaMalloc(&sa, 128 * stride));
  CK(cudaMalloc(&sb, (N + 127) / 128 * 128 * stride));
  fill<<<1024, 256>>>(sa, 128 * stride, 3);
  fill<<<1024, 256>>>(sb, (N + 127) / 128 * 128 * stride, 4);
  // E8M0 scales 2^-6..2^6 (the fast promotion).
  CK(cudaDeviceSynchronize());
  std::vector<uint8_t> h((N + 127) / 128 * 128 * stride);
  CK(cudaMemcpy(h.data(), sb, h.size(), cudaMemcpyDeviceToHost));
  for (auto &v : h) v = (uint8_t)(121 + v % 13);
  CK(cudaMemcpy(sb, h.data(), h.size(), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(h.data(), sa, 128 * stride, cudaMemcpyDeviceToHost));
  for (int64_t i = 0; i < 128 * stride; i++) h[i] = (uint8_t)(121 + h[i] % 13);
  CK(cudaMemcpy(sa, h.data(), 128 * stride, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&o.d, M * N * 4));
  qfused::Params &p = o.p;
  p.a = {A, sa, M, K, stride, 1, qfused::kE4M3, 0};
  p.b = {B, sb, N, K, stride, 1, qfused::kE4M3, 0};
  p.M = M, p.N = N, p.K = K, p.alpha = 1, p.d = o.d, p.ldd = N, p.d_dt = 0, p.d_trans = 0, p.sb16 = 0;
  return o;
}
__global__ void clear_nan(uint8_t *p, size_t n) {  // E4M3 NaN (0x7F/0xFF) -> 0x38
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    if ((p[i] & 0x7F) == 0x7F) p[i] = 0x38;
}
int main(int argc, char **argv) {
  const int64_t N = argc > 2 ? atoll(argv[1]) : 8192, K = argc > 2 ? atoll(argv[2]) : 8192;
  uint8_t *A, *B;
  uint32_t *out;
  CK(cudaMalloc(&A, 32 * K));
  CK(cudaMalloc(&B, N * K));
  CK(cudaMalloc(&out, 64 << 20));
  fill<<<1024, 256>>>(A, 32 * K, 1);
  fill<<<1024, 256>>>(B, N * K, 2);
  CK(cudaDeviceSynchronize());
  void *fn = nullptr;
  cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
  [[maybe_unused]] const EncodeFn enc = reinterpret_cast<EncodeFn>(fn);
  const double bytes = (double)N * K;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  printf("N %lld K %lld (%.1f MB of B), %d SMs\n", (long long)N, (long long)K, bytes / 1e6, sms);
  clear_nan<<<1024, 256>>>(A, 32 * K);
  clear_nan<<<1024, 256>>>(B, N * K);
  CK(cudaDeviceSynchronize());
  KOps k16 = make_kernel_ops(A, B, N, K, 16), k1 = make_kernel_ops(A, B, N, K, 1);
  // H200 (bench/RESULTS.md, "the decode kernel against its own stream"): the
  // ceiling, the dispatched shape's copies and its neighbours, TMA stages,
  // then decode_kernel as dispatched. (The rs kernels above were measured on
  // the H100 and are no longer run here.)
  for (int rep = 0; rep < 2; rep++) {
    timeit("v4 x4 (8 CTAs/SM)", bytes, [&] { stream_v4<4><<<sms * 8, 256>>>(reinterpret_cast<const uint4 *>(B), N * K / 16, out); });
    timeit("v4 x2 (4 CTAs/SM)", bytes, [&] { stream_v4<2><<<sms * 4, 256>>>(reinterpret_cast<const uint4 *>(B), N * K / 16, out); });
    run_cp<8, 8, 2, false, true>(A, B, N, K, out, bytes);  // decode_kernel's MXFP8 one-wave shape (decode_shape)
    run_cp<8, 8, 2, false, false>(A, B, N, K, out, bytes);
    run_cp<8, 8, 2, true, true>(A, B, N, K, out, bytes);
    run_cp<4, 8, 2, false, true>(A, B, N, K, out, bytes);
    run_cp<4, 16, 2, false, true>(A, B, N, K, out, bytes);
    run_cp<8, 4, 4, false, true>(A, B, N, K, out, bytes);
    run_cp<8, 6, 3, false, true>(A, B, N, K, out, bytes);
    run_tma<8, 8, 2, true>(enc, A, B, N, K, out, bytes);
    run_tma<8, 4, 4, true>(enc, A, B, N, K, out, bytes);
    run_tma<8, 2, 8, true>(enc, A, B, N, K, out, bytes);
    run_tma<4, 8, 3, true>(enc, A, B, N, K, out, bytes);
    timeit("decode_kernel dispatched (M16)", bytes, [&] { CK(qfused::launch_decode(k16.p, 0)); });
    timeit("decode_kernel dispatched (M1)", bytes, [&] { CK(qfused::launch_decode(k1.p, 0)); });
    printf("\n");
  }
  return 0;
}
