// How fast a BF16 -> FP8 cast-transpose can write on this GPU (issue #15: fp8's
// columnwise and "both" cells sit at 84-85 % of copy where the rowwise cast
// reaches 91 %). Standalone kernels that do fp8's aligned work on 128x128
// tiles (scale, E4M3 codes, rowwise [M, K] and transposed [K, M] bytes),
// differing only in how the codes reach global memory:
//   direct   cuda/fp8_tensor.cu's aligned path: each lane holds 4 rows x 16
//            columns, stores its rowwise 16-byte pieces and its transposed
//            4-byte pieces straight to global memory (a transposed row's 128
//            bytes as two 64-byte runs from two warps);
//   staged   the same registers, the codes staged in shared memory (XOR
//            swizzled), then every output row's 128 bytes stored by 8 lanes
//            of one instruction (4 whole lines a warp instruction);
//   hints    direct with the loads' L2::evict_first and streaming stores
//            (st.global.cs);
//   64x256, 256x64  direct on tiles of other shapes;
// each for columnwise alone and both directions, against the rowwise cast
// alone (a flat pass) and a BF16 copy. Run on the GPU machine:
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/transpose_probe bench/transpose_probe.cu
//   /tmp/transpose_probe [M K ...]        (default 8192 8192 2048 7168)
//
// Each variant's bytes are checked against the direct variant's.
#include "probe_common.cuh"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <vector>

constexpr int kT = 256, kRT = 128;

__device__ __forceinline__ uint32_t cast4(const uint32_t *w, float s) {  // 4 BF16 (two words) -> 4 E4M3 bytes
  float f[4];
#pragma unroll
  for (int e = 0; e < 4; e++) f[e] = __uint_as_float((w[e >> 1] >> (16 * (e & 1))) << 16) * s;
  const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(f[0], f[1]), __NV_SATFINITE, __NV_E4M3);
  const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(f[2], f[3]), __NV_SATFINITE, __NV_E4M3);
  return lo | (hi << 16);
}

// Bytes (a0 a1 a2 a3) of four words -> their transpose (cuda/common.cuh's
// transpose4x4_bytes).
__device__ __forceinline__ void t4x4(uint32_t a, uint32_t b, uint32_t c, uint32_t d, uint32_t (&o)[4]) {
  const uint32_t ab_lo = __byte_perm(a, b, 0x5140), ab_hi = __byte_perm(a, b, 0x7362);
  const uint32_t cd_lo = __byte_perm(c, d, 0x5140), cd_hi = __byte_perm(c, d, 0x7362);
  o[0] = __byte_perm(ab_lo, cd_lo, 0x5410);
  o[1] = __byte_perm(ab_lo, cd_lo, 0x7632);
  o[2] = __byte_perm(ab_hi, cd_hi, 0x5410);
  o[3] = __byte_perm(ab_hi, cd_hi, 0x7632);
}

// The lane's 4 rows x 16 columns of tile (tr, tc), cast: rw[i][j] = codes of
// row gr + i, columns gc + 4j .. gc + 4j + 3.
template <int HINT>
__device__ __forceinline__ uint4 ld16(const uint16_t *p) {
  if constexpr (HINT) {
    uint4 u;
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                 : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w)
                 : "l"(p), "l"(pol));
    return u;
  }
  return __ldg(reinterpret_cast<const uint4 *>(p));
}

template <int HINT = 0>
__device__ __forceinline__ void load_cast(const uint16_t *x, int64_t K, int64_t gr, int64_t gc, float s, uint32_t (&rw)[4][4]) {
  uint4 u[4][2];
#pragma unroll
  for (int i = 0; i < 4; i++) {
    u[i][0] = ld16<HINT>(x + (gr + i) * K + gc);
    u[i][1] = ld16<HINT>(x + (gr + i) * K + gc + 8);
  }
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const uint32_t w[8] = {u[i][0].x, u[i][0].y, u[i][0].z, u[i][0].w, u[i][1].x, u[i][1].y, u[i][1].z, u[i][1].w};
#pragma unroll
    for (int j = 0; j < 4; j++) rw[i][j] = cast4(&w[2 * j], s);
  }
}

// Tiles of TR rows x (8 / (TR / 64)) * 32 columns (TR 128: 128x128, the
// plugin's; 64: 64x256; 256: 256x64), each warp 64 rows x 32 columns.
// HINT 1: the loads with L2::evict_first and the stores as st.global.cs
// (streaming); 0: plain.
template <int HINT>
__device__ __forceinline__ void st16(uint8_t *p, uint4 v) {
  if constexpr (HINT) asm volatile("st.global.cs.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
  else *reinterpret_cast<uint4 *>(p) = v;
}
template <int HINT>
__device__ __forceinline__ void st4(uint8_t *p, uint32_t v) {
  if constexpr (HINT) asm volatile("st.global.cs.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
  else *reinterpret_cast<uint32_t *>(p) = v;
}

template <bool ROW, int TR = 128, int HINT = 0>
__global__ void __launch_bounds__(kT) direct_kernel(const uint16_t *x, int64_t M, int64_t K, float s, uint8_t *row, uint8_t *col) {
  constexpr int WR = TR / 64, TC = 8 / WR * 32;
  const int64_t tiles_c = K / TC, tr = blockIdx.x / tiles_c, tc = blockIdx.x - tr * tiles_c;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t gr = tr * TR + 64 * (warp % WR) + 4 * (lane >> 1), gc = tc * TC + 32 * (warp / WR) + 16 * (lane & 1);
  uint32_t rw[4][4];
  load_cast<HINT>(x, K, gr, gc, s, rw);
  if (ROW) {
#pragma unroll
    for (int i = 0; i < 4; i++) st16<HINT>(row + (gr + i) * K + gc, make_uint4(rw[i][0], rw[i][1], rw[i][2], rw[i][3]));
  }
#pragma unroll
  for (int j = 0; j < 4; j++) {
    uint32_t cw[4];
    t4x4(rw[0][j], rw[1][j], rw[2][j], rw[3][j], cw);
#pragma unroll
    for (int e = 0; e < 4; e++) st4<HINT>(col + (gc + 4 * j + e) * M + gr, cw[e]);
  }
}

// Staged: shared rows of 128 bytes, 16-byte chunk q of row r at q ^ sw(r).
__device__ __forceinline__ int swr(int r) { return 2 * ((r >> 2) & 3); }  // rowwise rows: lanes 4 rows apart
__device__ __forceinline__ int swc(int c) { return (c >> 4) & 1 ? 4 : 0; }  // transposed rows: lanes 16 apart

template <bool ROW>
__global__ void __launch_bounds__(kT) staged_kernel(const uint16_t *x, int64_t M, int64_t K, float s, uint8_t *row, uint8_t *col) {
  __shared__ __align__(16) uint4 cst[kRT][8];
  __shared__ __align__(16) uint4 rst[ROW ? kRT : 1][8];
  const int64_t tiles_c = K / kRT, tr = blockIdx.x / tiles_c, tc = blockIdx.x - tr * tiles_c;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int rl = 64 * (warp & 1) + 4 * (lane >> 1), cl = 32 * (warp >> 1) + 16 * (lane & 1);
  uint32_t rw[4][4];
  load_cast(x, K, tr * kRT + rl, tc * kRT + cl, s, rw);
  if (ROW) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const int r = rl + i, q = cl >> 4;
      rst[r][q ^ swr(r)] = make_uint4(rw[i][0], rw[i][1], rw[i][2], rw[i][3]);
    }
  }
  uint32_t *cw32 = reinterpret_cast<uint32_t *>(cst);
#pragma unroll
  for (int j = 0; j < 4; j++) {
    uint32_t cw[4];
    t4x4(rw[0][j], rw[1][j], rw[2][j], rw[3][j], cw);
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int c = cl + 4 * j + e, q = (rl >> 4) ^ swc(c);  // 16-byte chunk of transposed row c holding rows rl .. rl + 3
      cw32[c * 32 + q * 4 + ((rl >> 2) & 3)] = cw[e];
    }
  }
  __syncthreads();
  const int t = threadIdx.x, q = t & 7;
#pragma unroll
  for (int k = 0; k < 4; k++) {
    const int c = (t >> 3) + 32 * k;
    *reinterpret_cast<uint4 *>(col + (tc * kRT + c) * M + tr * kRT + 16 * q) = cst[c][q ^ swc(c)];
  }
  if (ROW) {
#pragma unroll
    for (int k = 0; k < 4; k++) {
      const int r = (t >> 3) + 32 * k;
      *reinterpret_cast<uint4 *>(row + (tr * kRT + r) * K + tc * kRT + 16 * q) = rst[r][q ^ swr(r)];
    }
  }
}

// Rowwise alone: a flat pass, 8 elements a thread and step.
__global__ void __launch_bounds__(kT) flat_kernel(const uint16_t *x, int64_t n, float s, uint8_t *row) {
  for (int64_t g = (int64_t)blockIdx.x * kT + threadIdx.x; g < n / 8; g += (int64_t)gridDim.x * kT) {
    const uint4 u = __ldg(reinterpret_cast<const uint4 *>(x) + g);
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
    *reinterpret_cast<uint2 *>(row + 8 * g) = make_uint2(cast4(&w[0], s), cast4(&w[2], s));
  }
}

int main(int argc, char **argv) {
  const std::vector<int64_t> shapes = probe_shapes(argc, argv, {8192, 8192, 2048, 7168});
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  for (size_t si = 0; si < shapes.size(); si += 2) {
    const int64_t M = shapes[si], K = shapes[si + 1], n = M * K;
    if (M % kRT || K % kRT) {
      printf("%lld x %lld: not whole 128x128 tiles, skipped\n", (long long)M, (long long)K);
      continue;
    }
    uint16_t *x, *y;
    uint8_t *row, *col, *row2, *col2;
    CK(cudaMalloc(&x, n * 2));
    CK(cudaMalloc(&y, n * 2));
    CK(cudaMalloc(&row, n));
    CK(cudaMalloc(&col, n));
    CK(cudaMalloc(&row2, n));
    CK(cudaMalloc(&col2, n));
    probe_fill16<<<1024, 256>>>(x, n, 0x3C00, 0x3FF);
    CK(cudaGetLastError());
    const unsigned tiles = (unsigned)(n / (kRT * kRT));
    const float s = 3.0f;
    auto time = [&](auto launch) { return probe_best_us(launch, 30); };
    const double copy_us = time([&] { CK(cudaMemcpyAsync(y, x, n * 2, cudaMemcpyDeviceToDevice)); });
    const double copy_bw = 4.0 * n / copy_us / 1e3;  // GB/s, read + write
    printf("%lld x %lld BF16: copy %.2f us (%.0f GB/s). us per call (GB/s, %% of copy), best of 5 runs of 30:\n", (long long)M, (long long)K,
           copy_us, copy_bw);
    auto report = [&](const char *name, double us, double bytes, const char *check) {
      printf("  %-22s %7.2f (%5.0f, %3.0f %%)%s\n", name, us, bytes / us / 1e3, 100.0 * bytes / us / 1e3 / copy_bw, check);
    };
    std::vector<uint8_t> a(n), b(n);
    auto same = [&](uint8_t *p, uint8_t *q) {
      CK(cudaMemcpy(a.data(), p, n, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(b.data(), q, n, cudaMemcpyDeviceToHost));
      return a == b ? "" : "  WRONG";
    };
    double us;
    us = time([&] { flat_kernel<<<prop.multiProcessorCount * 8, kT>>>(x, n, s, row); });
    report("rowwise (flat)", us, 3.0 * n, "");
    us = time([&] { direct_kernel<false><<<tiles, kT>>>(x, M, K, s, nullptr, col); });
    report("columnwise direct", us, 3.0 * n, "");
    us = time([&] { staged_kernel<false><<<tiles, kT>>>(x, M, K, s, nullptr, col2); });
    report("columnwise staged", us, 3.0 * n, same(col, col2));
    us = time([&] { direct_kernel<false, 128, 1><<<tiles, kT>>>(x, M, K, s, nullptr, col2); });
    report("columnwise hints", us, 3.0 * n, same(col, col2));
    us = time([&] { direct_kernel<false, 64><<<tiles, kT>>>(x, M, K, s, nullptr, col2); });
    report("columnwise 64x256", us, 3.0 * n, same(col, col2));
    us = time([&] { direct_kernel<false, 256><<<tiles, kT>>>(x, M, K, s, nullptr, col2); });
    report("columnwise 256x64", us, 3.0 * n, M % 256 == 0 ? same(col, col2) : "  (M % 256 != 0)");
    us = time([&] { direct_kernel<true><<<tiles, kT>>>(x, M, K, s, row, col); });
    report("both direct", us, 4.0 * n, "");
    CK(cudaMemset(row2, 0, n));
    us = time([&] { staged_kernel<true><<<tiles, kT>>>(x, M, K, s, row2, col2); });
    report("both staged", us, 4.0 * n, same(row, row2));
    CK(cudaMemset(row2, 0, n));
    us = time([&] { direct_kernel<true, 128, 1><<<tiles, kT>>>(x, M, K, s, row2, col2); });
    report("both hints", us, 4.0 * n, same(row, row2));
    CK(cudaMemset(row2, 0, n));
    us = time([&] { direct_kernel<true, 64><<<tiles, kT>>>(x, M, K, s, row2, col2); });
    report("both 64x256", us, 4.0 * n, same(row, row2));
    CK(cudaMemset(row2, 0, n));
    us = time([&] { direct_kernel<true, 256><<<tiles, kT>>>(x, M, K, s, row2, col2); });
    report("both 256x64", us, 4.0 * n, M % 256 == 0 ? same(row, row2) : "  (M % 256 != 0)");
    CK(cudaFree(x));
    CK(cudaFree(y));
    CK(cudaFree(row));
    CK(cudaFree(col));
    CK(cudaFree(row2));
    CK(cudaFree(col2));
  }
  return 0;
}
