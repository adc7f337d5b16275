// Host time per CUDA runtime call on this machine (issue #15: what a quantize
// call cannot go below): each call enqueued 20000 times on one stream, no
// synchronization inside the timed loop. Built and run on the GPU machine:
//   nvcc -O2 -arch=sm_90 -o build/launch_floor bench/launch_floor.cu && build/launch_floor
#include <chrono>
#include <cstdio>
#include <cuda_runtime.h>

struct Big {
  char bytes[192];  // a quantize kernel's parameter block is about this size
};

__global__ void empty_kernel() {}
__global__ void big_kernel(Big b) {
  if (b.bytes[0] == 123 && threadIdx.x == 999) printf("never\n");
}

template <typename F>
static double per_call_us(cudaStream_t s, F f) {
  const int n = 20000;
  for (int i = 0; i < 200; i++) f();
  cudaStreamSynchronize(s);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; i++) f();
  auto t1 = std::chrono::steady_clock::now();
  cudaStreamSynchronize(s);
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
}

int main() {
  cudaStream_t s;
  if (cudaStreamCreate(&s) != cudaSuccess) return 1;
  float *d = nullptr;
  cudaMalloc(&d, 64);
  Big b{};
  int dev = 0;
  printf("empty kernel launch         %.2f us\n", per_call_us(s, [&] { empty_kernel<<<1, 32, 0, s>>>(); }));
  printf("kernel, 192-byte parameters %.2f us\n", per_call_us(s, [&] { big_kernel<<<1, 256, 0, s>>>(b); }));
  printf("cudaMemsetAsync 4 bytes     %.2f us\n", per_call_us(s, [&] { cudaMemsetAsync(d, 0, 4, s); }));
  printf("cudaMemcpyAsync D2D 4 bytes %.2f us\n", per_call_us(s, [&] { cudaMemcpyAsync(d + 1, d, 4, cudaMemcpyDeviceToDevice, s); }));
  printf("cudaGetDevice               %.2f us\n", per_call_us(s, [&] { cudaGetDevice(&dev); }));
  printf("cudaGetLastError            %.2f us\n", per_call_us(s, [&] { (void)cudaGetLastError(); }));
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
