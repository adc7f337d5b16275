// Host time per CUDA launch on this machine (issue #15: what a quantize call
// cannot go below). Each figure is the host's enqueue time per call over
// batches of 100 calls, the GPU idle before each batch (a longer loop would
// fill the launch queue and time the GPU instead); the fastest and the median
// of 50 batches. Launch paths compared: the runtime's <<<>>>, the runtime's
// cudaLaunchKernel, and the driver's cuLaunchKernel on a CUfunction resolved
// once (cudaGetFuncBySymbol, or the context-independent CUkernel of
// cudaGetKernel; the driver entry through cudaGetDriverEntryPointByVersion,
// so no -lcuda). Built and run on the GPU machine:
//   nvcc -O2 -arch=sm_90 -o build/launch_floor bench/launch_floor.cu && build/launch_floor
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cuda.h>
#include <cuda_runtime.h>
#include <vector>

template <int N>
struct Params {
  char bytes[N];
};

__global__ void empty_kernel() {}
// Reads its parameter block so that the compiler keeps it; writes nothing.
template <int N>
__global__ void params_kernel(Params<N> p, int *never) {
  if (p.bytes[N - 1] == 123 && threadIdx.x == 999) *never = 1;
}

template <typename F>
static void per_call_us(const char *name, cudaStream_t s, F f) {
  const int batches = 50, n = 100;
  std::vector<double> t;
  for (int i = 0; i < 200; i++) f();
  for (int b = 0; b < batches; b++) {
    cudaStreamSynchronize(s);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; i++) f();
    auto t1 = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / n);
  }
  cudaStreamSynchronize(s);
  std::sort(t.begin(), t.end());
  printf("%-44s fastest %.2f us  median %.2f us\n", name, t[0], t[t.size() / 2]);
}

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **, void **);

int main() {
  cudaStream_t s;
  if (cudaStreamCreate(&s) != cudaSuccess) return 1;
  float *d = nullptr;
  cudaMalloc(&d, 64);
  int dev = 0;
  int *never = nullptr;
  cudaMalloc(&never, 4);
  Params<16> p16{};
  Params<256> p256{};
  per_call_us("empty kernel <<<>>>", s, [&] { empty_kernel<<<1, 32, 0, s>>>(); });
  per_call_us("kernel, 16+8 parameter bytes <<<>>>", s, [&] { params_kernel<<<1, 256, 0, s>>>(p16, never); });
  per_call_us("kernel, 256+8 parameter bytes <<<>>>", s, [&] { params_kernel<<<1, 256, 0, s>>>(p256, never); });
  void *args256[] = {&p256, &never};
  per_call_us("kernel, 256+8 bytes cudaLaunchKernel", s, [&] {
    cudaLaunchKernel((const void *)params_kernel<256>, dim3(1), dim3(256), args256, 0, s);
  });
  CUfunction fn = nullptr;
  launch_fn launch = nullptr;
  cudaDriverEntryPointQueryResult q;
  if (cudaGetFuncBySymbol(&fn, (const void *)params_kernel<256>) == cudaSuccess &&
      cudaGetDriverEntryPointByVersion("cuLaunchKernel", (void **)&launch, 12000, cudaEnableDefault, &q) == cudaSuccess && launch != nullptr) {
    per_call_us("kernel, 256+8 bytes cuLaunchKernel (driver)", s, [&] { launch(fn, 1, 1, 1, 256, 1, 1, 0, (CUstream)s, args256, nullptr); });
  } else {
    printf("driver entry point not available\n");
  }
  cudaKernel_t kh = nullptr;
  if (launch != nullptr && cudaGetKernel(&kh, (const void *)params_kernel<256>) == cudaSuccess) {
    per_call_us("kernel, 256+8 bytes cuLaunchKernel (CUkernel)", s,
                [&] { launch((CUfunction)kh, 1, 1, 1, 256, 1, 1, 0, (CUstream)s, args256, nullptr); });
  }
  // What the plugin's launch_kernel does (cuda/launch.cuh): cudaLaunchKernelEx
  // with the programmatic stream serialization attribute, against the
  // driver's cuLaunchKernelEx with the same attribute on the CUkernel.
  cudaLaunchAttribute rattr[1];
  rattr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  rattr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t rcfg = {};
  rcfg.gridDim = dim3(1);
  rcfg.blockDim = dim3(256);
  rcfg.stream = s;
  rcfg.attrs = rattr;
  rcfg.numAttrs = 1;
  per_call_us("kernel, 256+8 bytes cudaLaunchKernelEx + PDL", s, [&] { cudaLaunchKernelEx(&rcfg, params_kernel<256>, p256, never); });
  typedef CUresult (*launch_ex_fn)(const CUlaunchConfig *, CUfunction, void **, void **);
  launch_ex_fn launch_ex = nullptr;
  if (kh != nullptr && cudaGetDriverEntryPointByVersion("cuLaunchKernelEx", (void **)&launch_ex, 12000, cudaEnableDefault, &q) == cudaSuccess &&
      launch_ex != nullptr) {
    CUlaunchAttribute dattr[1];
    dattr[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    dattr[0].value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig dcfg = {};
    dcfg.gridDimX = dcfg.gridDimY = dcfg.gridDimZ = 1;
    dcfg.blockDimX = 256;
    dcfg.blockDimY = dcfg.blockDimZ = 1;
    dcfg.hStream = (CUstream)s;
    dcfg.attrs = dattr;
    dcfg.numAttrs = 1;
    per_call_us("kernel, 256+8 bytes cuLaunchKernelEx + PDL (CUkernel)", s, [&] { launch_ex(&dcfg, (CUfunction)kh, args256, nullptr); });
    per_call_us("  the same + cudaGetKernel per call", s, [&] {
      cudaKernel_t k2 = nullptr;
      cudaGetKernel(&k2, (const void *)params_kernel<256>);
      launch_ex(&dcfg, (CUfunction)k2, args256, nullptr);
    });
  }
  per_call_us("cudaMemsetAsync 4 bytes", s, [&] { cudaMemsetAsync(d, 0, 4, s); });
  per_call_us("cudaMemcpyAsync D2D 4 bytes", s, [&] { cudaMemcpyAsync(d + 1, d, 4, cudaMemcpyDeviceToDevice, s); });
  per_call_us("cudaGetDevice", s, [&] { cudaGetDevice(&dev); });
  per_call_us("cudaGetLastError", s, [&] { (void)cudaGetLastError(); });
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
