// Exhaustive check of e2m1_bf16x2_codes (cuda/common.cuh): every BF16 x
// (subnormals included) in either half of the word, at every scale
// exponent e8 in [0, 251] the MXFP4 kernel uses it with, wherever
// |fl32(x·f)| < 7 and x is not NaN: the code must be lq_e2m1(fl32(x·f)).
// `make e2m1-bf16x2-check` (nvcc, an sm_90 GPU).
#include "../common.cuh"

using namespace lq;

__global__ void check(unsigned long long *bad, unsigned long long *tried, unsigned *first) {
  const uint32_t e8 = blockIdx.y;
  const uint32_t x = blockIdx.x * blockDim.x + threadIdx.x;  // 0 .. 65535
  const float f = e8m0_rcp(e8);
  const uint32_t f1 = (254u - e8) * 0x00800080u;
  const uint32_t xo = (x * 40503u + e8 * 977u) & 0xFFFFu;  // a partner for the other half
  const float y = __fmul_rn(__uint_as_float(x << 16), f), yo = __fmul_rn(__uint_as_float(xo << 16), f);
  const bool ok = !(fabsf(y) >= 7.0f) && y == y, oko = !(fabsf(yo) >= 7.0f) && yo == yo;
  unsigned long long nb = 0, nt = 0;
  if (ok) {
    const uint32_t want = e2m1(y);
    const uint32_t c = e2m1_bf16x2_codes(x | (xo << 16), f1), d = e2m1_bf16x2_codes(xo | (x << 16), f1);
    nt += 2;
    if ((c & 0xF) != want) { nb++; atomicCAS(first, 0xFFFFFFFFu, (e8 << 16) | x); }
    if ((d >> 16) != want) { nb++; atomicCAS(first, 0xFFFFFFFFu, (e8 << 16) | x); }
    if (oko && ((c >> 16) != e2m1(yo) || (d & 0xF) != e2m1(yo))) nb++;
  }
  if (nb) atomicAdd(&bad[e8 < 3 ? 0 : 2], nb);
  atomicAdd(tried, nt);
}

int main() {
  unsigned long long *d, h[3];
  unsigned *fd, fh = 0xFFFFFFFFu;
  cudaMalloc(&d, 24);
  cudaMalloc(&fd, 4);
  cudaMemset(d, 0, 24);
  cudaMemcpy(fd, &fh, 4, cudaMemcpyHostToDevice);
  check<<<dim3(256, 252), 256>>>(d, d + 1, fd);
  cudaError_t err = cudaDeviceSynchronize();
  cudaMemcpy(h, d, 24, cudaMemcpyDeviceToHost);
  cudaMemcpy(&fh, fd, 4, cudaMemcpyDeviceToHost);
  printf("e2m1_bf16x2_check: %s, %llu codes checked, %llu wrong with e8 < 3, %llu with e8 in [3, 251] (first e8<<16|x: %08x)\n",
         cudaGetErrorString(err), h[1], h[0], h[2], fh);
  return err != cudaSuccess || h[0] != 0 || h[2] != 0 || h[1] == 0;
}
