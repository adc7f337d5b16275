// Why 2-D quantize kernels lose speed at an odd K (issue #18 item 4): a probe
// of the read side alone. A BF16 tensor of R rows is read in column strips,
// the way the columnwise and RHT kernels walk it: CTA (s, g) takes strip s
// (S bytes of every row) over segment g of the rows, each warp one row at a
// time, each lane V-byte aligned loads (V = 4 or 16) covering the row's S
// bytes. With K = 8192 every row segment starts on a 128-byte line; with
// K = 8191 (a pitch of 16382 bytes) it starts 2-byte aligned, the loads cover
// it from the aligned address below (one more word or chunk per row), and a
// warp's row segment touches one more line. The figure is the bandwidth of
// the useful bytes (R·K·2 per pass), median of 20 passes between CUDA events,
// for S = 128 .. 2048 bytes, and the odd/even ratio at the same S and V;
// then the same walk as a copy into a tensor of the same pitch (4-byte word
// stores, the halves at a segment's ends as 2-byte stores).
// Built and run on the GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/odd_k_probe bench/odd_k_probe.cu && /tmp/odd_k_probe
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>
#include <vector>

template <int V>
struct Vec;
template <>
struct Vec<4> {
  using T = uint32_t;
  __device__ static uint32_t fold(T v) { return v; }
};
template <>
struct Vec<16> {
  using T = uint4;
  __device__ static uint32_t fold(T v) { return v.x ^ v.y ^ v.z ^ v.w; }
};

// J loads of V bytes per lane per row: S = 32·V·J bytes of the row.
template <int V, int J>
__global__ void __launch_bounds__(256) strip_read(const uint8_t *__restrict__ x, int64_t rows, int64_t pitch, int64_t row_bytes,
                                                  int64_t seg_rows, uint32_t *out) {
  using T = typename Vec<V>::T;
  constexpr int64_t S = 32LL * V * J;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t c0 = (int64_t)blockIdx.x * S, r0 = (int64_t)blockIdx.y * seg_rows;
  const int64_t r1 = rows < r0 + seg_rows ? rows : r0 + seg_rows;
  const int64_t end = rows * pitch;  // the tensor's last byte + 1
  uint32_t acc = 0;
  for (int64_t r = r0 + warp; r < r1; r += 8) {
    const int64_t b = r * pitch + c0, e = r * pitch + (c0 + S < row_bytes ? c0 + S : row_bytes);
    const int64_t a = b & ~(int64_t)(V - 1);  // the cover starts at the aligned address below
    T v[J + 1];
#pragma unroll
    for (int j = 0; j <= J; j++) {
      const int64_t off = a + (int64_t)V * (lane + 32 * j);
      const bool need = j < J ? off < e : (lane == 0 && a != b && off < e && off + V <= end);
      if (need) v[j] = __ldg(reinterpret_cast<const T *>(x + off));
      else v[j] = T{};
    }
#pragma unroll
    for (int j = 0; j <= J; j++) acc ^= Vec<V>::fold(v[j]);
  }
  if (acc == 0x12345678u) out[0] = acc;  // keeps the loads
}

// The same walk as a copy into y (same pitch), 4-byte words: a row
// segment's interior words whole, the halves at its ends (an odd K) as
// 2-byte stores, so that each byte is written once; WHOLE: the end words
// whole as well (the neighbouring strip's half copied from the input too, so
// both strips write the same bytes there). LINES: each warp instruction's
// 128 bytes on one line (the words from the line below the segment on,
// those outside it skipped), the end words as 2-byte stores.
template <int J, bool WHOLE, bool LINES = false>
__global__ void __launch_bounds__(256) strip_copy(const uint8_t *__restrict__ x, uint8_t *__restrict__ y, int64_t rows, int64_t pitch,
                                                  int64_t row_bytes, int64_t seg_rows) {
  constexpr int64_t S = 32LL * 4 * J;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t c0 = (int64_t)blockIdx.x * S, r0 = (int64_t)blockIdx.y * seg_rows;
  const int64_t r1 = rows < r0 + seg_rows ? rows : r0 + seg_rows;
  for (int64_t r = r0 + warp; r < r1; r += 8) {
    const int64_t b = r * pitch + c0, e = r * pitch + (c0 + S < row_bytes ? c0 + S : row_bytes);
    const int64_t a = b & ~(int64_t)(LINES ? 127 : 3);
#pragma unroll
    for (int j = 0; j <= J; j++) {
      const int64_t off = a + 4 * (lane + 32 * j);
      if (off >= e || (!LINES && j == J && lane != 0) || off + 4 <= b) continue;
      const uint32_t w = __ldg(reinterpret_cast<const uint32_t *>(x + off));
      if (WHOLE || (off >= b && off + 4 <= e)) *reinterpret_cast<uint32_t *>(y + off) = w;
      else if (off < b) *reinterpret_cast<uint16_t *>(y + off + 2) = (uint16_t)(w >> 16);
      else *reinterpret_cast<uint16_t *>(y + off) = (uint16_t)w;
    }
  }
}

template <int V, int J, int COPY>
float time_pass(const uint8_t *x, uint8_t *y, int64_t rows, int64_t k, uint32_t *out) {
  constexpr int64_t S = 32LL * V * J;
  const int64_t row_bytes = 2 * k, strips = (row_bytes + S - 1) / S, seg_rows = 256;
  const dim3 grid((unsigned)strips, (unsigned)((rows + seg_rows - 1) / seg_rows));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> t;
  for (int i = 0; i < 23; i++) {
    cudaEventRecord(e0);
    if (COPY == 1) strip_copy<J, false><<<grid, 256>>>(x, y, rows, row_bytes, row_bytes, seg_rows);
    else if (COPY == 2) strip_copy<J, true><<<grid, 256>>>(x, y, rows, row_bytes, row_bytes, seg_rows);
    else if (COPY == 3) strip_copy<J, false, true><<<grid, 256>>>(x, y, rows, row_bytes, row_bytes, seg_rows);
    else strip_read<V, J><<<grid, 256>>>(x, rows, row_bytes, row_bytes, seg_rows, out);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    if (i >= 3) t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return t[t.size() / 2];
}

template <int V, int J, int COPY = 0>
void row(const uint8_t *x, uint8_t *y, uint32_t *out) {
  const int64_t rows = 8192;
  const float even = time_pass<V, J, COPY>(x, y, rows, 8192, out), odd = time_pass<V, J, COPY>(x, y, rows, 8191, out);
  const double be = rows * 8192.0 * 2 * (COPY ? 2 : 1), bo = rows * 8191.0 * 2 * (COPY ? 2 : 1);
  printf("| %s | %d | %d | %.1f | %.0f | %.1f | %.0f | %.2f |\n", COPY == 3 ? "copy, line-aligned stores" : COPY == 2 ? "copy, end words whole" : COPY ? "copy" : "read", V, 32 * V * J, even * 1e3, be / even / 1e6, odd * 1e3,
         bo / odd / 1e6, (bo / odd) / (be / even));
}

int main() {
  uint8_t *x, *y;
  uint32_t *out;
  const size_t bytes = 8192ull * 8192 * 2 + 256;
  if (cudaMalloc(&x, bytes) != cudaSuccess || cudaMalloc(&y, bytes) != cudaSuccess || cudaMalloc(&out, 4) != cudaSuccess) {
    printf("cudaMalloc failed\n");
    return 1;
  }
  cudaMemset(x, 1, bytes);
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, 0);
  printf("%s: column strips of 8192 BF16 rows read (or copied), S bytes of a row per warp and row, 256 rows per CTA; GB/s of bytes read + written\n\n", p.name);
  printf("| pass | V (bytes per load) | S (bytes per row) | K=8192 us | GB/s | K=8191 us | GB/s | 8191/8192 |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  row<4, 1>(x, y, out);
  row<4, 2>(x, y, out);
  row<4, 4>(x, y, out);
  row<4, 8>(x, y, out);
  row<16, 1>(x, y, out);
  row<16, 2>(x, y, out);
  row<16, 4>(x, y, out);
  row<4, 1, 1>(x, y, out);
  row<4, 2, 1>(x, y, out);
  row<4, 4, 1>(x, y, out);
  row<4, 1, 2>(x, y, out);
  row<4, 2, 2>(x, y, out);
  row<4, 4, 2>(x, y, out);
  row<4, 1, 3>(x, y, out);
  row<4, 2, 3>(x, y, out);
  row<4, 4, 3>(x, y, out);
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) printf("CUDA error: %s\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
