// What programmatic dependent launch (PDL) saves between back-to-back
// memory-bound kernels on this machine (issue #15 item 3: 2048×7168 and the
// MoE batch, where a quantize call lasts 10-30 µs and the boundary between two
// calls is a visible share of it).
//
// The kernel stands in for a rowwise 8-bit quantize: a persistent grid reads
// BF16 rows 16 bytes at a time and writes one byte per element (3 bytes moved
// per element, like mxfp8 rowwise). Back-to-back calls rotate over three
// inputs larger together than the L2, timed between CUDA events; the figure is
// the median time per call over 20 samples. Modes:
//   plain    <<<>>>
//   wait     cudaLaunchKernelEx with programmatic stream serialization; the
//            kernel runs griddepcontrol.wait before touching global memory
//   trigger  as wait, and each CTA runs griddepcontrol.launch_dependents at
//            its start, so the next call's CTAs are scheduled while this one
//            drains (they wait for its completion and memory flush)
// and the host's enqueue time per launch of the same kernel in each mode.
// Built and run on the GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/pdl_probe bench/pdl_probe.cu && /tmp/pdl_probe
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <vector>

template <int MODE>
__global__ void __launch_bounds__(256) cast_kernel(const uint4 *__restrict__ in, uint2 *__restrict__ out, long n8) {
  if (MODE >= 1) asm volatile("griddepcontrol.wait;" ::: "memory");
  if (MODE == 2) asm volatile("griddepcontrol.launch_dependents;");
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n8; i += (long)gridDim.x * blockDim.x) {
    uint4 v = in[i];
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v);
    unsigned w[2] = {0, 0};
#pragma unroll
    for (int j = 0; j < 4; j++) {
      float2 f = __bfloat1622float2(h[j]);
      unsigned b = ((__float_as_uint(f.x) >> 24) & 0xff) | (((__float_as_uint(f.y) >> 24) & 0xff) << 8);
      w[j / 2] |= b << (16 * (j % 2));
    }
    out[i] = make_uint2(w[0], w[1]);
  }
}

template <int MODE>
static void launch(cudaStream_t s, int grid, const uint4 *in, uint2 *out, long n8) {
  if (MODE == 0) {
    cast_kernel<0><<<grid, 256, 0, s>>>(in, out, n8);
    return;
  }
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(256);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  cudaLaunchKernelEx(&cfg, cast_kernel<MODE>, in, out, n8);
}

template <int MODE>
static double per_call_us(cudaStream_t s, int grid, const uint4 *const *in, uint2 *out, long n8, int reps) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < 10; i++) launch<MODE>(s, grid, in[i % 3], out, n8);
  std::vector<float> t;
  for (int sample = 0; sample < 20; sample++) {
    cudaEventRecord(a, s);
    for (int i = 0; i < reps; i++) launch<MODE>(s, grid, in[i % 3], out, n8);
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float ms;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms * 1000 / reps);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <int MODE>
static double host_us(cudaStream_t s, int grid, const uint4 *in, uint2 *out) {
  std::vector<double> t;
  for (int b = 0; b < 50; b++) {
    cudaStreamSynchronize(s);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 100; i++) launch<MODE>(s, grid, in, out, 1);
    auto t1 = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / 100);
  }
  cudaStreamSynchronize(s);
  std::sort(t.begin(), t.end());
  return t[0];
}

int main() {
  cudaStream_t s;
  if (cudaStreamCreate(&s) != cudaSuccess) return 1;
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  struct Shape {
    long m, k;
  } shapes[] = {{45, 4096}, {256, 7168}, {2048, 7168}, {4096, 7168}, {8192, 8192}};
  const long maxn = 8192L * 8192;
  uint4 *in[3];
  uint2 *out;
  for (auto &p : in) {
    cudaMalloc(&p, maxn * 2);
    cudaMemset(p, 0x3c, maxn * 2);
  }
  cudaMalloc(&out, maxn);
  printf("SMs %d; us per call (median of 20 samples of back-to-back calls), GB/s at 3 bytes per element\n", sms);
  printf("%-12s %6s %9s %9s %9s  %7s %7s\n", "shape", "grid", "plain", "wait", "trigger", "w/p", "t/p");
  for (auto sh : shapes) {
    long n8 = sh.m * sh.k / 8;
    int grid = (int)std::min<long>(sms * 8L, (n8 + 255) / 256);
    int reps = sh.m * sh.k > 50000000 ? 50 : 200;
    double p = per_call_us<0>(s, grid, in, out, n8, reps);
    double w = per_call_us<1>(s, grid, in, out, n8, reps);
    double t = per_call_us<2>(s, grid, in, out, n8, reps);
    double p2 = per_call_us<0>(s, grid, in, out, n8, reps);
    char name[32];
    snprintf(name, sizeof name, "%ldx%ld", sh.m, sh.k);
    printf("%-12s %6d %6.2f/%.2f %9.2f %9.2f  %7.3f %7.3f   (%.0f / %.0f / %.0f GB/s)\n", name, grid, p, p2, w, t, w / p, t / p,
           3.0 * sh.m * sh.k / p / 1e3, 3.0 * sh.m * sh.k / w / 1e3, 3.0 * sh.m * sh.k / t / 1e3);
  }
  printf("host enqueue per launch, fastest of 50 batches of 100: plain %.2f us, PDL %.2f us, PDL+trigger %.2f us\n",
         host_us<0>(s, 1, in[0], out), host_us<1>(s, 1, in[0], out), host_us<2>(s, 1, in[0], out));
  cudaError_t e = cudaDeviceSynchronize();
  printf("status: %s\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
