// What the standalone probes in bench/ share: the CUDA and cuBLASLt status
// checks (LT needs <cublasLt.h> where it is used) and the hash that fills
// their operands.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                            \
  do {                                                                                   \
    cudaError_t e_ = (x);                                                                \
    if (e_ != cudaSuccess) {                                                             \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

#define LT(x)                                                                               \
  do {                                                                                      \
    cublasStatus_t s_ = (x);                                                                \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                      \
      fprintf(stderr, "%s:%d %s: status %d\n", __FILE__, __LINE__, #x, (int)s_);            \
      exit(1);                                                                              \
    }                                                                                       \
  } while (0)

// A well-mixed 32-bit hash of element i (the operands' pseudo-random fill).
__device__ __forceinline__ uint32_t probe_hash(size_t i, uint32_t seed) {
  uint32_t h = (uint32_t)i * 2654435761u ^ seed;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  return h;
}

#include <vector>

// The shapes "M K M K ..." of argv (argv[1..]), or dflt where none is given.
inline std::vector<int64_t> probe_shapes(int argc, char **argv, std::vector<int64_t> dflt) {
  std::vector<int64_t> s;
  for (int i = 1; i + 1 < argc; i += 2) s.push_back(atoll(argv[i])), s.push_back(atoll(argv[i + 1]));
  return s.empty() ? dflt : s;
}

// n 16-bit values (BF16 bits): base + (hash & mask), a hashed sign.
__global__ void probe_fill16(uint16_t *x, size_t n, uint16_t base, uint16_t mask) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    x[i] = (uint16_t)((base + (probe_hash(i, 7) & mask)) ^ (probe_hash(i, 9) & 0x8000u));
}

// µs per call of launch(), the best of reps runs of iters back-to-back calls
// (CUDA events on the default stream).
template <typename F>
double probe_best_us(F launch, int iters, int reps = 5) {
  static cudaEvent_t e0, e1;
  static bool made = false;
  if (!made) {
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    made = true;
  }
  float best = 1e30f;
  for (int rep = 0; rep < reps; rep++) {
    CK(cudaEventRecord(e0));
    for (int it = 0; it < iters; it++) launch();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    best = ms < best ? ms : best;
  }
  CK(cudaGetLastError());
  return best * 1e3 / iters;
}
