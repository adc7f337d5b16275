// The global amax pass's read rate (issue #15: fp8 current scaling and NVFP4
// read their input twice, once for the amax): variants of amax_kernel
// (cuda/fp8_tensor.cu) on a BF16 tensor, each timed by CUDA events over
// back-to-back launches, against torch-free bounds (a read-only sum of the
// same bytes). Standalone; run on the GPU machine:
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/amax_probe bench/amax_probe.cu
//   /tmp/amax_probe [M K ...]        (default 8192 8192 2048 7168)
//
// Variants (every one's max bits are checked against the first's):
//   stride   amax_kernel as shipped: a grid-stride loop, eight 16-byte loads
//            in flight per thread, each a grid's width apart;
//   contig   each CTA a contiguous range, its eight loads per thread 4 KB
//            apart inside the CTA's 32 KB step;
//   *_l2     the same loads with the L2::256B prefetch hint
//            (ld.global.nc.L1::no_allocate.L2::256B);
// each at 4, 8 and 16 CTAs per SM (the shipped grid: 8).
#include "probe_common.cuh"

#include <cuda_bf16.h>

#include <vector>

constexpr int kT = 256;

__device__ __forceinline__ uint32_t hmax2(uint32_t m, uint32_t w) {
  uint32_t d, a = w & 0x7FFF7FFFu;
  asm("max.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(m), "r"(a));
  return d;
}

template <bool L2>
__device__ __forceinline__ uint4 ld16(const uint4 *p) {
  if constexpr (L2) {
    uint4 u;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w)
                 : "l"(p));
    return u;
  }
  return __ldg(p);
}

__device__ __forceinline__ void cta_store(uint32_t m2, uint32_t *part) {
  __shared__ uint32_t red[kT / 32];
  uint32_t v = max(m2 << 16, m2 & 0xFFFF0000u);
  for (int o = 16; o; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kT / 32; w++) v = max(v, red[w]);
    part[blockIdx.x] = max(v, red[0]);
  }
}

// groups: 16-byte groups of 8 elements (n a multiple of 8 here).
template <bool L2>
__global__ void __launch_bounds__(kT) stride_kernel(const uint4 *x, int64_t groups, uint32_t *part) {
  uint32_t m2 = 0;
  const int64_t stride = (int64_t)gridDim.x * kT;
  for (int64_t g = (int64_t)blockIdx.x * kT + threadIdx.x; g < groups; g += 8 * stride) {
    uint4 u[8];
#pragma unroll
    for (int j = 0; j < 8; j++) u[j] = g + j * stride < groups ? ld16<L2>(x + g + j * stride) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int j = 0; j < 8; j++) m2 = hmax2(hmax2(hmax2(hmax2(m2, u[j].x), u[j].y), u[j].z), u[j].w);
  }
  cta_store(m2, part);
}

template <bool L2>
__global__ void __launch_bounds__(kT) contig_kernel(const uint4 *x, int64_t groups, uint32_t *part) {
  uint32_t m2 = 0;
  const int64_t per = (groups + gridDim.x - 1) / gridDim.x;
  const int64_t lo = (int64_t)blockIdx.x * per, hi = min(groups, lo + per);
  for (int64_t g = lo + threadIdx.x; g < hi; g += 8 * kT) {
    uint4 u[8];
#pragma unroll
    for (int j = 0; j < 8; j++) u[j] = g + j * kT < hi ? ld16<L2>(x + g + j * kT) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int j = 0; j < 8; j++) m2 = hmax2(hmax2(hmax2(hmax2(m2, u[j].x), u[j].y), u[j].z), u[j].w);
  }
  cta_store(m2, part);
}

__global__ void reduce_parts(const uint32_t *part, int n, uint32_t *out) {
  uint32_t v = 0;
  for (int i = threadIdx.x; i < n; i += 32) v = max(v, part[i]);
  for (int o = 16; o; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (threadIdx.x == 0) *out = v;
}

int main(int argc, char **argv) {
  const std::vector<int64_t> shapes = probe_shapes(argc, argv, {8192, 8192, 2048, 7168});
  int dev = 0, sms = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  printf("device: %s, %d SMs\n", prop.name, sms);
  uint32_t *part, *out;
  CK(cudaMalloc(&part, 16 * 1024 * sizeof(uint32_t)));
  CK(cudaMalloc(&out, sizeof(uint32_t)));
  for (size_t s = 0; s < shapes.size(); s += 2) {
    const int64_t n = shapes[s] * shapes[s + 1];
    uint16_t *x;
    CK(cudaMalloc(&x, n * 2));
    probe_fill16<<<1024, 256>>>(x, n, 0x3C00, 0x3FF);  // |x| in [1, 128)
    CK(cudaGetLastError());
    const int64_t groups = n / 8;
    printf("%lld x %lld BF16 (%.1f MB): us per call (GB/s), 50 back-to-back calls, best of 5\n", (long long)shapes[s],
           (long long)shapes[s + 1], n * 2 / 1e6);
    uint32_t want = 0;
    bool first = true;
    for (int v = 0; v < 4; v++) {
      const char *name = v == 0 ? "stride" : v == 1 ? "contig" : v == 2 ? "stride_l2" : "contig_l2";
      auto kern = v == 0 ? stride_kernel<false> : v == 1 ? contig_kernel<false> : v == 2 ? stride_kernel<true> : contig_kernel<true>;
      printf("  %-10s", name);
      for (int per : {4, 8, 16}) {
        const int grid = per * sms;
        const double us = probe_best_us([&] { kern<<<grid, kT>>>(reinterpret_cast<const uint4 *>(x), groups, part); }, 50);
        reduce_parts<<<1, 32>>>(part, grid, out);
        uint32_t got;
        CK(cudaMemcpy(&got, out, 4, cudaMemcpyDeviceToHost));
        if (first) want = got, first = false;
        printf("  %2d/SM %6.2f (%4.0f)%s", per, us, n * 2 / us / 1e3, got == want ? "" : " WRONG");
      }
      printf("\n");
    }
    printf("  amax bits 0x%08x\n", want);
    CK(cudaFree(x));
  }
  return 0;
}
