// The prototype of cuda/gemm_fused.cu's decode_wg_kernel (issue #12;
// bench/RESULTS.md, "Issue 12: decode by wgmma", calls 1-8, and "the decode-by-wgmma promotion", calls 1-3): MXFP8 (E4M3) decode
// GEMMs with the weight as the wgmma m64 side, TMA into a ring, the scales by
// cp.async completing on the stage's mbarrier, timed as CUDA graphs against
// cuBLAS BF16 in the same run, every output checked against an FP64 reference
// within the fused bound (README "Numerics"). Standalone (copies of the
// plugin's PTX wrappers), so that it builds in seconds:
//
//   nvcc -O3 -std=c++17 -lineinfo -gencode=arch=compute_90a,code=sm_90a -o build/wgd bench/decode_wg_probe.cu -lcublas
//   build/wgd          # the checks, then the table of RESULTS "the decode-by-wgmma promotion", call 9
//   build/wgd ncu      # three launches of the shipped configuration (for ncu)
//   build/wgd ncu4     # E2M1 weights: wgd3 W4, then wgd4 CL (for ncu, call 10)
//   build/wgd w5       # wgd5's checks and times (RESULTS "E2M1 weights widened in registers", call 3)
//   build/wgd ncu5     # three launches of wgd5 at M16 N8192 K8192 (for ncu)
//   build/wgd w6       # wgd5 AL 2's checks and times (RESULTS "MXFP4 rows of A through W4", call 4)
//
// wgd3_kernel<BN, S, NC, KB, KS, PV, MODE, W4>: S stages of KB k-tiles of
// 128, NC consumer warpgroups taking the stages in turn, each tile's K split
// over the KS CTAs of a cluster; PV the promotion (0: the [53, 190] test and
// fma(T, sa·sb, acc), as first merged; 1: the decode kernel's [64, 191] test
// and fma(T·sa, sb, acc), as shipped), MODE 1 the ring alone, 2 no
// promotion; W4 E2M1 weights widened to E4M3 in shared memory by the
// consumers (checked, not shipped: slower than the decode kernel's MXFP4).
// wgd4_kernel<BN, S, W, KS, CL>: the same E2M1 weights widened by a
// converter warpgroup ahead of the consumers (checked; no faster: RESULTS
// "the decode-by-wgmma promotion", calls 6-10).
// wgd5_kernel<BN, S, KS, X4, AL, PF>: E2M1 weights widened in registers, the
// wgmma's A operand from registers (the plugin's decode_wg_kernel W4 path);
// X4 E2M1 rows of A too, widened by the producer; AL the register fragment's
// layout (0 is right: RESULTS, call 1), or 2: A by TMA in its own K order and
// each thread's weight codes read to match (W6); PF A's loads one stage ahead.
// The plugin ships NC 1 with KB 1, S 6 at KS 2 and KB 2, S 4 at KS 1. Calls
// 1-7 of "decode by wgmma" ran two earlier generations from this file as of
// commit 101f766: wgd_kernel (a stage per k-tile, its waits in branches, so
// that ptxas serialized its wgmmas: info C7518) and wgd2_kernel (the waits in
// straight-line code; DRY modes timing the ring alone, wgmma alone, the
// promotion alone).
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <type_traits>
#include <vector>

#define CK(x)                                                                                   \
  do {                                                                                          \
    cudaError_t e_ = (x);                                                                       \
    if (e_ != cudaSuccess) {                                                                    \
      printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                \
      exit(1);                                                                                  \
    }                                                                                           \
  } while (0)

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
  asm volatile("{\n\t.reg .b64 st;\n\tmbarrier.arrive.shared::cta.b64 st, [%0];\n\t}" ::"r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
  asm volatile(
      "{\n\t.reg .pred P1;\n"
      "LAB_WAIT:\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n\t"
      "@P1 bra DONE;\n\t"
      "bra LAB_WAIT;\n"
      "DONE:\n\t}" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t *bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void tma_load_2d(uint8_t *dst, const CUtensorMap *map, int c0, int c1, uint64_t *bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(smem_u32(dst)),
               "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_u32(bar))
               : "memory");
}
__device__ __forceinline__ void cp_async4(void *dst, const void *src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(smem_u32(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_mbar_arrive_noinc(uint64_t *bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr) {
  uint64_t d = 0;
  d |= (uint64_t)((addr & 0x3FFFF) >> 4);
  d |= (uint64_t)1 << 16;
  d |= (uint64_t)(1024 >> 4) << 32;
  d |= (uint64_t)1 << 62;
  return d;
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void reg_fence(float &x) { asm volatile("" : "+f"(x)::"memory"); }

template <int BN>
__device__ __forceinline__ void wgmma_e4m3(float *d, uint64_t da, uint64_t db) {
  if constexpr (BN == 8) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\nwgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, %4, %5, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "l"(da), "l"(db), "r"(0));
  } else if constexpr (BN == 16) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\nwgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, "
        "1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "l"(da), "l"(db), "r"(0));
  } else {
    static_assert(BN == 32, "BN");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\nwgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, "
        "%10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]),
          "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "l"(da), "l"(db), "r"(0));
  }
}

__device__ __forceinline__ float e8m0_to_float(uint32_t e) {
  if (e == 0) return __int_as_float(0x00400000);
  if (e == 255) return __int_as_float(0x7FC00000);
  return __int_as_float(e << 23);
}
// byte u of w as a float, bytes 1..254
__device__ __forceinline__ float e8(uint32_t w, int u) { return __uint_as_float((u < 3 ? w << (23 - 8 * u) : w >> 1) & 0x7F800000u); }
// nonzero if a byte of w lies outside [53, 190] (then sums of two exponents may leave the fast range)
__device__ __forceinline__ uint32_t range_bad(uint32_t w) {
  const uint32_t lo = w & 0x7F7F7F7Fu, hi = w & 0x80808080u;
  const uint32_t t1 = lo + 0x41414141u, t2 = lo + 0x4B4B4B4Bu;
  return (hi & t1) | (~hi & ~t2 & 0x80808080u);
}

__device__ uint32_t kOne = 0x7F7F7F7Fu;

struct Op {
  const uint8_t *data, *scale;
  int64_t rows, ld, scale_stride;
};
struct Args {
  Op x, w;  // x: the activation [M, K] (M <= BN), w: the weight [N, K]
  int64_t M, N, K;
  int w4;  // the weight's codes E2M1, two a byte (the first in the low nibble)
  int x4;  // the activation's codes E2M1 too (wgd5 only)
  float alpha;
  __nv_bfloat16 *d;  // [M, N]
  int64_t ldd;
};
struct Maps {
  CUtensorMap w, x;
};

// Stages of KB consecutive k-tiles (128 K each): the producer issues KB boxes
// of each operand per stage, so each weight row gets KB·128 contiguous bytes
// requested together.
// W4: the weight's codes are E2M1, two a byte (the first in the low nibble),
// 4 KB a k-tile in the stage; the consumers widen each k-tile to E4M3 in one
// of three 8 KB buffers past the ring (WIDE), in the 128-byte swizzle.
template <int BN, int KB, bool W4 = false>
struct WL2 {
  static constexpr int WT = W4 ? 4096 : 8192, XT = BN * 128;
  static constexpr int X_OFF = KB * WT, SW_OFF = X_OFF + KB * XT, SX_OFF = SW_OFF + KB * 256;
  static constexpr int END = SX_OFF + KB * BN * 4;
  static constexpr int STAGE = (END + 1023) / 1024 * 1024;
};
// Eight E2M1 codes (a word, the first in the low nibble) as eight E4M3 codes
// (two words, the first code in the low byte): every E2M1 value is an E4M3
// value. The magnitudes by a byte permute from an eight-entry table (0, 0.5,
// 1, 1.5, 2, 3, 4, 6 in E4M3), the signs by a byte permute in sign-replicate
// mode from x << 4 (an even code's sign in its byte's msb) and x (an odd
// code's).
__device__ __forceinline__ void e2m1x8_to_e4m3x8(uint32_t x, uint32_t &o0, uint32_t &o1) {
  const uint32_t y = x & 0x77777777u, a = x << 4;
  const uint32_t m0 = __byte_perm(0x3C383000u, 0x4C484440u, y), m1 = __byte_perm(0x3C383000u, 0x4C484440u, y >> 16);
  const uint32_t s0 = __byte_perm(a, x, 0xD9C8u), s1 = __byte_perm(a, x, 0xFBEAu);
  o0 = m0 | (s0 & 0x80808080u), o1 = m1 | (s1 & 0x80808080u);
}
// E8M0 byte b as a float (b = 0: 2^-127, a subnormal; 255: NaN), branch-free
__device__ __forceinline__ float e8m0f(uint32_t b) { return __uint_as_float(b == 0 ? 0x00400000u : b == 255 ? 0x7FC00000u : b << 23); }
// OR of p over the n threads meeting at named barrier id (a barrier as bar.sync)
__device__ __forceinline__ bool bar_red_or(int id, int n, bool p) {
  uint32_t r;
  asm volatile("{\n\t.reg .pred p, q;\n\tsetp.ne.u32 p, %1, 0;\n\tbar.red.or.pred q, %2, %3, p;\n\tselp.u32 %0, 1, 0, q;\n\t}"
               : "=r"(r) : "r"((uint32_t)p), "r"(id), "r"(n) : "memory");
  return r != 0;
}


__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_arrive_release() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
__device__ __forceinline__ uint32_t cluster_map(uint32_t addr, uint32_t rank) {
  uint32_t d;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(d) : "r"(addr), "r"(rank));
  return d;
}
__device__ __forceinline__ void st_cluster_f32(uint32_t addr, float v) {
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(addr), "f"(v) : "memory");
}
// PV: the promotion. 0: each thread converts its scale bytes, the FP32 path
// where every byte is in [53, 190] (range_bad), fma(T, sa·sb, acc). 1: the
// same conversions, the FP32 path where every byte is in [64, 191] (bit 7 ≠
// bit 6, one LOP3 a word), fma(T·sa, sb, acc). 2: PV 1's rule, but the
// warpgroup converts each k-tile's 64 + BN scale words once (a word a thread)
// into floats in the stage, the range flag an OR over the warpgroup's
// barrier, and each thread loads its floats (LDS.128). MODE: 0 all; 1 the
// ring alone (consumers wait and release); 2 no promotion (wgmma and the
// scale loads; one tmp summed to keep the results live).
template <int BN, int S, int NC, int KB, int KS, int PV = 0, int MODE = 0, bool W4 = false>
__global__ void __launch_bounds__(NC * 128 + 32, 2) wgd3_kernel(const Args P, const __grid_constant__ Maps T) {
  using L = WL2<BN, KB, W4>;
  static_assert(!W4 || NC == 1, "one consumer warpgroup widens");
  static_assert(PV != 2, "PV 2 (call 1) is in the history");
  static_assert(S >= NC + 1, "a consumer holds its stage while it waits for the next one of its own");
  __shared__ __align__(8) uint64_t full[S], empty[S];
  extern __shared__ uint8_t smem_raw[];
  uint8_t *smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  const int tid = threadIdx.x;
  const int rank = KS > 1 ? (int)cluster_rank() : 0;
  if constexpr (KS > 1) cluster_arrive_relaxed();  // this CTA has started
  const int64_t n0 = (int64_t)(blockIdx.x / KS) * 64;
  const int64_t K = P.K;
  const int KT = (int)((K + 127) / 128);
  const int NQ = (KT + KB - 1) / KB;  // stages
  const int64_t nblocks = (K + 31) / 32;
  if (tid == 0) {
    for (int s = 0; s < S; s++) {
      mbar_init(&full[s], 33);
      mbar_init(&empty[s], 128);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const int c = tid / 128, t = tid % 128, warp = t / 32;
  const int rloc = warp * 16 + (t % 32) / 4, cq = 2 * (t % 4);
  constexpr int NR = BN / 2;
  float acc[NR];
#pragma unroll
  for (int i = 0; i < NR; i++) acc[i] = 0.f;
  if (tid >= NC * 128) {
    const int lane = tid % 32;
    for (int i = 0;; i++) {
      const int q = rank + i * KS;
      if (q >= NQ) break;
      const int s = i % S;
      if (i >= S) mbar_wait(&empty[s], ((i / S) + 1) & 1);
      uint8_t *st = smem + s * L::STAGE;
      if (lane == 0) {
        mbar_arrive_expect_tx(&full[s], KB * (L::WT + BN * 128));
#pragma unroll
        for (int b = 0; b < KB; b++) {
          const int k0 = (q * KB + b) * 128;
          tma_load_2d(st + b * L::WT, &T.w, W4 ? k0 / 2 : k0, (int)n0, &full[s]);
          tma_load_2d(st + L::X_OFF + b * L::XT, &T.x, k0, 0, &full[s]);
        }
      }
#pragma unroll
      for (int b = 0; b < KB; b++) {
        const int kt = q * KB + b;
        const bool kv = kt < KT;
#pragma unroll
        for (int r = lane; r < 64; r += 32) {
          const int64_t gr = n0 + r;
          cp_async4(st + L::SW_OFF + b * 256 + 4 * r, kv && gr < P.N ? (const void *)(P.w.scale + gr * P.w.scale_stride + kt * 4) : (const void *)&kOne);
        }
        for (int r = lane; r < BN; r += 32)
          cp_async4(st + L::SX_OFF + b * BN * 4 + 4 * r, kv && r < P.M ? (const void *)(P.x.scale + r * P.x.scale_stride + kt * 4) : (const void *)&kOne);
      }
      cp_async_mbar_arrive_noinc(&full[s]);
    }
  } else {
  {
    struct Sc {
      uint32_t wa0, wa1, wb[BN / 8][2];
      bool slow;
    };
    float tmp[2][4][NR];
    Sc sc[2];
    // Descriptors: the 14-bit address field of sw128_desc(smem) plus the
    // byte offset / 16 (no carry out of the field: shared addresses < 2^18).
    const uint64_t desc0 = sw128_desc(smem_u32(smem));
    // k-tile kt of this WG: stage q = kt / KB (q % NC == c), sub-tile kt % KB
    // this WG's j-th k-tile: local stage i = c + (j / KB)·NC, sub-tile b = j % KB
    auto ktile = [&](int j) { return (rank + (c + (j / KB) * NC) * KS) * KB + j % KB; };
    auto load_issue = [&](int j, auto SET) {
      constexpr int X = decltype(SET)::value;
      const int kt = ktile(j), i = c + (j / KB) * NC, b = j % KB, s = i % S;
      if (b == 0) mbar_wait(&full[s], (i / S) & 1);
      const uint8_t *st = smem + s * L::STAGE;
      const uint32_t *sw = reinterpret_cast<const uint32_t *>(st + L::SW_OFF + b * 256);
      const uint32_t *sx = reinterpret_cast<const uint32_t *>(st + L::SX_OFF + b * BN * 4);
      // Blocks past K (the last k-tile): scale 1.0 (their data are zeros).
      const int64_t nv = nblocks - 4 * (int64_t)kt;
      const uint32_t keep = nv >= 4 ? 0xFFFFFFFFu : (1u << (8 * nv)) - 1u;
      auto fix = [&](uint32_t w) { return (w & keep) | (0x7F7F7F7Fu & ~keep); };
      if constexpr (PV == 1) {
        sc[X].wa0 = fix(sw[rloc]), sc[X].wa1 = fix(sw[rloc + 8]);
        uint32_t ok = (sc[X].wa0 ^ (sc[X].wa0 << 1)) & (sc[X].wa1 ^ (sc[X].wa1 << 1));
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
          sc[X].wb[j][0] = fix(sx[8 * j + cq]), sc[X].wb[j][1] = fix(sx[8 * j + cq + 1]);
          ok &= (sc[X].wb[j][0] ^ (sc[X].wb[j][0] << 1)) & (sc[X].wb[j][1] ^ (sc[X].wb[j][1] << 1));
        }
        sc[X].slow = __any_sync(0xFFFFFFFFu, (ok & 0x80808080u) != 0x80808080u);
      } else {
        sc[X].wa0 = fix(sw[rloc]), sc[X].wa1 = fix(sw[rloc + 8]);
        uint32_t bad = range_bad(sc[X].wa0) | range_bad(sc[X].wa1);
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
          sc[X].wb[j][0] = fix(sx[8 * j + cq]), sc[X].wb[j][1] = fix(sx[8 * j + cq + 1]);
          bad |= range_bad(sc[X].wb[j][0]) | range_bad(sc[X].wb[j][1]);
        }
        sc[X].slow = __any_sync(0xFFFFFFFFu, bad != 0);
      }
      uint32_t offA = (uint32_t)(s * L::STAGE + b * L::WT) >> 4;
      const uint32_t offB = (uint32_t)(s * L::STAGE + L::X_OFF + b * L::XT) >> 4;
      if constexpr (W4) {
        // Thread t widens row t / 2's half t % 2 (32 bytes in, 64 codes
        // out: chunks 4h .. 4h + 3 of the row, each at chunk ^ (row % 8)).
        const uint32_t wide = (uint32_t)(S * L::STAGE + (j % 3) * 8192);
        const int r = t / 2, h = t % 2;
        const uint4 *src = reinterpret_cast<const uint4 *>(st + b * L::WT + r * 64 + h * 32);
#pragma unroll
        for (int q = 0; q < 2; q++) {
          const uint4 v = src[q];
          uint4 o0, o1;
          e2m1x8_to_e4m3x8(v.x, o0.x, o0.y);
          e2m1x8_to_e4m3x8(v.y, o0.z, o0.w);
          e2m1x8_to_e4m3x8(v.z, o1.x, o1.y);
          e2m1x8_to_e4m3x8(v.w, o1.z, o1.w);
          const int c0 = 4 * h + 2 * q;
          *reinterpret_cast<uint4 *>(smem + wide + r * 128 + ((c0 ^ (r & 7)) * 16)) = o0;
          *reinterpret_cast<uint4 *>(smem + wide + r * 128 + (((c0 + 1) ^ (r & 7)) * 16)) = o1;
        }
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the generic stores, seen by wgmma
        asm volatile("bar.sync 2, 128;" ::: "memory");
        offA = wide >> 4;
      }
      wgmma_fence();
#pragma unroll
      for (int u = 0; u < 4; u++) {
        wgmma_e4m3<BN>(tmp[X][u], desc0 + offA + 2 * u, desc0 + offB + 2 * u);
        wgmma_commit();
      }
    };
    auto release = [&](int j) {
      if (j % KB == KB - 1 || ktile(j) == KT - 1) mbar_arrive(&empty[(c + (j / KB) * NC) % S]);
    };
    auto promote = [&](auto SET) {
      constexpr int X = decltype(SET)::value;
#pragma unroll
      for (int u = 0; u < 4; u++)
#pragma unroll
        for (int i = 0; i < NR; i++) reg_fence(tmp[X][u][i]);
      if constexpr (MODE == 2) {
#pragma unroll
        for (int i = 0; i < NR; i++) acc[i] += tmp[X][0][i];
        return;
      }
      const uint32_t wa0 = sc[X].wa0, wa1 = sc[X].wa1;
      if (PV == 1 && !sc[X].slow) {
#pragma unroll
        for (int u = 0; u < 4; u++) {
          const float *tt = tmp[X][u];
          const float sa0 = e8(wa0, u), sa1 = e8(wa1, u);
#pragma unroll
          for (int j = 0; j < BN / 8; j++) {
            const float sbx = e8(sc[X].wb[j][0], u), sby = e8(sc[X].wb[j][1], u);
            acc[4 * j + 0] = fmaf(tt[4 * j + 0] * sa0, sbx, acc[4 * j + 0]);
            acc[4 * j + 1] = fmaf(tt[4 * j + 1] * sa0, sby, acc[4 * j + 1]);
            acc[4 * j + 2] = fmaf(tt[4 * j + 2] * sa1, sbx, acc[4 * j + 2]);
            acc[4 * j + 3] = fmaf(tt[4 * j + 3] * sa1, sby, acc[4 * j + 3]);
          }
        }
      } else if (!sc[X].slow) {
#pragma unroll
        for (int u = 0; u < 4; u++) {
          const float *tt = tmp[X][u];
          const float sa0 = e8(wa0, u), sa1 = e8(wa1, u);
#pragma unroll
          for (int j = 0; j < BN / 8; j++) {
            const float sbx = e8(sc[X].wb[j][0], u), sby = e8(sc[X].wb[j][1], u);
            acc[4 * j + 0] = fmaf(tt[4 * j + 0], sa0 * sbx, acc[4 * j + 0]);
            acc[4 * j + 1] = fmaf(tt[4 * j + 1], sa0 * sby, acc[4 * j + 1]);
            acc[4 * j + 2] = fmaf(tt[4 * j + 2], sa1 * sbx, acc[4 * j + 2]);
            acc[4 * j + 3] = fmaf(tt[4 * j + 3], sa1 * sby, acc[4 * j + 3]);
          }
        }
      } else {
#pragma unroll
        for (int u = 0; u < 4; u++) {
          const float *tt = tmp[X][u];
          const double sa0 = e8m0_to_float((wa0 >> (8 * u)) & 0xFF), sa1 = e8m0_to_float((wa1 >> (8 * u)) & 0xFF);
#pragma unroll
          for (int j = 0; j < BN / 8; j++) {
            const double sbx = e8m0_to_float((sc[X].wb[j][0] >> (8 * u)) & 0xFF), sby = e8m0_to_float((sc[X].wb[j][1] >> (8 * u)) & 0xFF);
            acc[4 * j + 0] = (float)fma((double)tt[4 * j + 0], sa0 * sbx, (double)acc[4 * j + 0]);
            acc[4 * j + 1] = (float)fma((double)tt[4 * j + 1], sa0 * sby, (double)acc[4 * j + 1]);
            acc[4 * j + 2] = (float)fma((double)tt[4 * j + 2], sa1 * sbx, (double)acc[4 * j + 2]);
            acc[4 * j + 3] = (float)fma((double)tt[4 * j + 3], sa1 * sby, (double)acc[4 * j + 3]);
          }
        }
      }
    };
    using I0 = std::integral_constant<int, 0>;
    using I1 = std::integral_constant<int, 1>;
    int j = 0;
    if constexpr (MODE == 1) {
      for (; ktile(j) < KT; j++) {
        const int i = c + (j / KB) * NC;
        if (j % KB == 0) mbar_wait(&full[i % S], (i / S) & 1);
        release(j);
      }
    } else if (ktile(0) < KT) {
      load_issue(0, I0{});
      for (;;) {
        if (ktile(j + 1) >= KT) {  // the last: set 0 in flight
          wgmma_wait<0>();
          release(j);
          promote(I0{});
          break;
        }
        load_issue(j + 1, I1{});
        wgmma_wait<4>();
        release(j);
        promote(I0{});
        j++;
        if (ktile(j + 1) >= KT) {
          wgmma_wait<0>();
          release(j);
          promote(I1{});
          break;
        }
        load_issue(j + 1, I0{});
        wgmma_wait<4>();
        release(j);
        promote(I1{});
        j++;
      }
    }
  }
  }
  // consumers' partial sums: WG c > 0 into WG 0 (named barrier 1, consumers only),
  // then ranks > 0 into rank 0 through distributed shared memory.
  const bool cons = tid < NC * 128;
  if constexpr (NC > 1) {
    if (cons) {
      float *red = reinterpret_cast<float *>(smem);
      asm volatile("bar.sync 1, %0;" ::"n"(NC * 128) : "memory");
      for (int cc = 1; cc < NC; cc++) {
        if (c == cc)
#pragma unroll
          for (int i = 0; i < NR; i++) red[i * 128 + t] = acc[i];
        asm volatile("bar.sync 1, %0;" ::"n"(NC * 128) : "memory");
        if (c == 0)
#pragma unroll
          for (int i = 0; i < NR; i++) acc[i] += red[i * 128 + t];
        asm volatile("bar.sync 1, %0;" ::"n"(NC * 128) : "memory");
      }
    }
  }
  if constexpr (KS > 1) {
    cluster_wait();             // every CTA of the cluster has started
    cluster_arrive_release();   // this CTA is done with its ring (rank 0's may now be written)
    cluster_wait();
    const uint32_t xred = smem_u32(smem) + 16384;  // past the NC reduction's area
    if (rank > 0 && cons && c == 0) {
      const uint32_t dst = cluster_map(xred, 0) + ((rank - 1) * NR * 128 + t) * 4;
#pragma unroll
      for (int i = 0; i < NR; i++) st_cluster_f32(dst + i * 128 * 4, acc[i]);
    }
    cluster_arrive_release();
    cluster_wait();
    if (rank > 0) return;
    if (cons && c == 0) {
      const float *xr = reinterpret_cast<const float *>(smem + 16384);
      for (int r = 1; r < KS; r++)
#pragma unroll
        for (int i = 0; i < NR; i++) acc[i] += xr[((r - 1) * NR + i) * 128 + t];
    }
  }
  if (!cons || c != 0) return;
#pragma unroll
  for (int j = 0; j < BN / 8; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int64_t n = n0 + rloc + (e >> 1) * 8, m = 8 * j + cq + (e & 1);
      if (n < P.N && m < P.M) P.d[m * P.ldd + n] = __float2bfloat16_rn(P.alpha * acc[4 * j + e]);
    }
}

// W4 with a converter warpgroup: warpgroup 1 loads (its warp 0: the TMA boxes
// and the scale words, as wgd3's producer) and widens each k-tile's E2M1
// weight into one of W buffers, D = S - 1 stages behind its loads, while
// warpgroup 0 issues the wgmmas and promotes (PV 1). One k-tile a stage.
// Each round widens before it loads: the load of stage i waits for the
// consumers to release stage i - S, which they do only once stage i - S + 1
// = i - D is widened (they issue k-tile j + 1 before they release j).
// setmaxnreg moves registers from the converters (64) to the consumers (192).
//
// CL: the consumers' warp 0 loads instead (a stage S ahead, into the slot of
// the k-tile it has just finished: its wgmma is complete and every warp read
// that stage's scales before it issued the next k-tile's wgmmas, which the
// completed group implies), so that the converters only widen, as far ahead
// as the W buffers allow, never waiting for a release.
template <int BN, int S, int W, int KS, bool CL = false>
__global__ void __launch_bounds__(256, 2) wgd4_kernel(const Args P, const __grid_constant__ Maps T) {
  using L = WL2<BN, 1, true>;
  constexpr int D = S - 1, NR = BN / 2;
  __shared__ __align__(8) uint64_t full[S], empty[S], wfull[W], wempty[W];
  extern __shared__ uint8_t smem_raw[];
  uint8_t *smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  const int tid = threadIdx.x;
  const int rank = KS > 1 ? (int)cluster_rank() : 0;
  if constexpr (KS > 1) cluster_arrive_relaxed();
  const int64_t n0 = (int64_t)(blockIdx.x / KS) * 64;
  const int KT = (int)((P.K + 127) / 128);
  const int64_t nblocks = (P.K + 31) / 32;
  if (tid == 0) {
    for (int i = 0; i < S; i++) mbar_init(&full[i], 33), mbar_init(&empty[i], 128);
    for (int i = 0; i < W; i++) mbar_init(&wfull[i], 128), mbar_init(&wempty[i], 128);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const int t = tid % 128, warp = t / 32;
  const int rloc = warp * 16 + (t % 32) / 4, cq = 2 * (t % 4);
  float acc[NR];
#pragma unroll
  for (int i = 0; i < NR; i++) acc[i] = 0.f;
  const uint32_t wide0 = (uint32_t)(S * L::STAGE);
  const int nk = rank < KT ? (KT - rank + KS - 1) / KS : 0;  // this rank's k-tiles
  const int lane = t % 32;
  // This rank's stage i into slot i % S, by one whole warp.
  auto issue_load = [&](int i) {
    const int s = i % S, qi = rank + i * KS;
    uint8_t *st = smem + s * L::STAGE;
    if (lane == 0) {
      mbar_arrive_expect_tx(&full[s], L::WT + BN * 128);
      tma_load_2d(st, &T.w, qi * 64, (int)n0, &full[s]);
      tma_load_2d(st + L::X_OFF, &T.x, qi * 128, 0, &full[s]);
    }
#pragma unroll
    for (int r = lane; r < 64; r += 32) {
      const int64_t gr = n0 + r;
      cp_async4(st + L::SW_OFF + 4 * r, gr < P.N ? (const void *)(P.w.scale + gr * P.w.scale_stride + qi * 4) : (const void *)&kOne);
    }
    if (lane < BN) cp_async4(st + L::SX_OFF + 4 * lane, lane < P.M ? (const void *)(P.x.scale + lane * P.x.scale_stride + qi * 4) : (const void *)&kOne);
    cp_async_mbar_arrive_noinc(&full[s]);
  };
  if (tid >= 128) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 64;");
    for (int i = CL ? D : 0; i < nk + D; i++) {
      const int ic = i - D;
      const bool load = !CL && i < nk, conv = ic >= 0;
      if (conv) {
        const int s = ic % S, w = ic % W;
        mbar_wait(&full[s], (ic / S) & 1);
        if (ic >= W) mbar_wait(&wempty[w], ((ic / W) + 1) & 1);
        const uint32_t wide = wide0 + w * 8192;
        const int r = t / 2, h = t % 2;
        const uint4 *src = reinterpret_cast<const uint4 *>(smem + s * L::STAGE + r * 64 + h * 32);
#pragma unroll
        for (int q = 0; q < 2; q++) {
          const uint4 v = src[q];
          uint4 o0, o1;
          e2m1x8_to_e4m3x8(v.x, o0.x, o0.y);
          e2m1x8_to_e4m3x8(v.y, o0.z, o0.w);
          e2m1x8_to_e4m3x8(v.z, o1.x, o1.y);
          e2m1x8_to_e4m3x8(v.w, o1.z, o1.w);
          const int c0 = 4 * h + 2 * q;
          *reinterpret_cast<uint4 *>(smem + wide + r * 128 + ((c0 ^ (r & 7)) * 16)) = o0;
          *reinterpret_cast<uint4 *>(smem + wide + r * 128 + (((c0 + 1) ^ (r & 7)) * 16)) = o1;
        }
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        mbar_arrive(&wfull[w]);
      }
      if (load) {
        if (i >= S) mbar_wait(&empty[i % S], ((i / S) + 1) & 1);
        if (warp == 0) issue_load(i);
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 192;");
    if (CL && warp == 0)
      for (int i = 0; i < S && i < nk; i++) issue_load(i);
    struct Sc {
      uint32_t wa0, wa1, wb[BN / 8][2];
      bool slow;
    };
    float tmp[2][4][NR];
    Sc sc[2];
    const uint64_t desc0 = sw128_desc(smem_u32(smem));
    auto ktile = [&](int j) { return rank + j * KS; };
    auto load_issue = [&](int j, auto SET) {
      constexpr int X = decltype(SET)::value;
      const int kt = ktile(j), s = j % S, w = j % W;
      mbar_wait(&wfull[w], (j / W) & 1);
      mbar_wait(&full[s], (j / S) & 1);
      const uint8_t *st = smem + s * L::STAGE;
      const uint32_t *sw = reinterpret_cast<const uint32_t *>(st + L::SW_OFF);
      const uint32_t *sx = reinterpret_cast<const uint32_t *>(st + L::SX_OFF);
      const int64_t nv = nblocks - 4 * (int64_t)kt;
      const uint32_t keep = nv >= 4 ? 0xFFFFFFFFu : (1u << (8 * nv)) - 1u;
      auto fix = [&](uint32_t v) { return (v & keep) | (0x7F7F7F7Fu & ~keep); };
      sc[X].wa0 = fix(sw[rloc]), sc[X].wa1 = fix(sw[rloc + 8]);
      uint32_t ok = (sc[X].wa0 ^ (sc[X].wa0 << 1)) & (sc[X].wa1 ^ (sc[X].wa1 << 1));
#pragma unroll
      for (int jj = 0; jj < BN / 8; jj++) {
        sc[X].wb[jj][0] = fix(sx[8 * jj + cq]), sc[X].wb[jj][1] = fix(sx[8 * jj + cq + 1]);
        ok &= (sc[X].wb[jj][0] ^ (sc[X].wb[jj][0] << 1)) & (sc[X].wb[jj][1] ^ (sc[X].wb[jj][1] << 1));
      }
      sc[X].slow = __any_sync(0xFFFFFFFFu, (ok & 0x80808080u) != 0x80808080u);
      const uint32_t offA = (wide0 + w * 8192) >> 4, offB = (uint32_t)(s * L::STAGE + L::X_OFF) >> 4;
      wgmma_fence();
#pragma unroll
      for (int u = 0; u < 4; u++) {
        wgmma_e4m3<BN>(tmp[X][u], desc0 + offA + 2 * u, desc0 + offB + 2 * u);
        wgmma_commit();
      }
    };
    auto release = [&](int j) {
      if constexpr (CL) {
        if (warp == 0 && j + S < nk) issue_load(j + S);
      } else {
        mbar_arrive(&empty[j % S]);
      }
      mbar_arrive(&wempty[j % W]);
    };
    auto promote = [&](auto SET) {
      constexpr int X = decltype(SET)::value;
#pragma unroll
      for (int u = 0; u < 4; u++)
#pragma unroll
        for (int i = 0; i < NR; i++) reg_fence(tmp[X][u][i]);
      const uint32_t wa0 = sc[X].wa0, wa1 = sc[X].wa1;
      if (!sc[X].slow) {
#pragma unroll
        for (int u = 0; u < 4; u++) {
          const float *tt = tmp[X][u];
          const float sa0 = e8(wa0, u), sa1 = e8(wa1, u);
#pragma unroll
          for (int jj = 0; jj < BN / 8; jj++) {
            const float sbx = e8(sc[X].wb[jj][0], u), sby = e8(sc[X].wb[jj][1], u);
            acc[4 * jj + 0] = fmaf(tt[4 * jj + 0] * sa0, sbx, acc[4 * jj + 0]);
            acc[4 * jj + 1] = fmaf(tt[4 * jj + 1] * sa0, sby, acc[4 * jj + 1]);
            acc[4 * jj + 2] = fmaf(tt[4 * jj + 2] * sa1, sbx, acc[4 * jj + 2]);
            acc[4 * jj + 3] = fmaf(tt[4 * jj + 3] * sa1, sby, acc[4 * jj + 3]);
          }
        }
      } else {
#pragma unroll
        for (int u = 0; u < 4; u++) {
          const float *tt = tmp[X][u];
          const double sa0 = e8m0_to_float((wa0 >> (8 * u)) & 0xFF), sa1 = e8m0_to_float((wa1 >> (8 * u)) & 0xFF);
#pragma unroll
          for (int jj = 0; jj < BN / 8; jj++) {
            const double sbx = e8m0_to_float((sc[X].wb[jj][0] >> (8 * u)) & 0xFF), sby = e8m0_to_float((sc[X].wb[jj][1] >> (8 * u)) & 0xFF);
            acc[4 * jj + 0] = (float)fma((double)tt[4 * jj + 0], sa0 * sbx, (double)acc[4 * jj + 0]);
            acc[4 * jj + 1] = (float)fma((double)tt[4 * jj + 1], sa0 * sby, (double)acc[4 * jj + 1]);
            acc[4 * jj + 2] = (float)fma((double)tt[4 * jj + 2], sa1 * sbx, (double)acc[4 * jj + 2]);
            acc[4 * jj + 3] = (float)fma((double)tt[4 * jj + 3], sa1 * sby, (double)acc[4 * jj + 3]);
          }
        }
      }
    };
    using I0 = std::integral_constant<int, 0>;
    using I1 = std::integral_constant<int, 1>;
    int j = 0;
    if (ktile(0) < KT) {
      load_issue(0, I0{});
      for (;;) {
        if (ktile(j + 1) >= KT) {
          wgmma_wait<0>();
          release(j);
          promote(I0{});
          break;
        }
        load_issue(j + 1, I1{});
        wgmma_wait<4>();
        release(j);
        promote(I0{});
        j++;
        if (ktile(j + 1) >= KT) {
          wgmma_wait<0>();
          release(j);
          promote(I1{});
          break;
        }
        load_issue(j + 1, I0{});
        wgmma_wait<4>();
        release(j);
        promote(I1{});
        j++;
      }
    }
  }
  const bool cons = tid < 128;
  if constexpr (KS > 1) {
    cluster_wait();
    cluster_arrive_release();
    cluster_wait();
    const uint32_t xred = smem_u32(smem) + 16384;
    if (rank > 0 && cons) {
      const uint32_t dst = cluster_map(xred, 0) + ((rank - 1) * NR * 128 + t) * 4;
#pragma unroll
      for (int i = 0; i < NR; i++) st_cluster_f32(dst + i * 128 * 4, acc[i]);
    }
    cluster_arrive_release();
    cluster_wait();
    if (rank > 0) return;
    if (cons) {
      const float *xr = reinterpret_cast<const float *>(smem + 16384);
      for (int r = 1; r < KS; r++)
#pragma unroll
        for (int i = 0; i < NR; i++) acc[i] += xr[((r - 1) * NR + i) * 128 + t];
    }
  }
  if (!cons) return;
#pragma unroll
  for (int jj = 0; jj < BN / 8; jj++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int64_t n = n0 + rloc + (e >> 1) * 8, m = 8 * jj + cq + (e & 1);
      if (n < P.N && m < P.M) P.d[m * P.ldd + n] = __float2bfloat16_rn(P.alpha * acc[4 * jj + e]);
    }
}

// wgd5_kernel<BN, S, KS, X4, AL>: E2M1 weights widened in registers, the wgmma's
// A operand from registers (no shared-memory store, fence or barrier between
// the widening and the wgmma). The weight's k-tile comes by TMA in the 64-byte
// swizzle (64 rows of 64 bytes, conflict-free for ldmatrix); each consumer
// thread takes its rows' words by ldmatrix.x4 (word c of a 16-byte block row
// = codes 8c..8c+7 of that 32-block) and widens them. The register fragment
// holds, in thread c of a row group, the K slots 4c..4c+3 and 16+4c..16+4c+3
// of each k32 step, so the thread's eight codes 8c..8c+7 go to those slots:
// the activation's K is permuted to match within each 32-block (slot word q
// holds the logical word 2q for q < 4, 2(q-4)+1 for q >= 4; a dot product over
// one 32-block does not depend on the order), which the producer warp does as
// it copies the activation into the stage (LDG, STS in the 128-byte swizzle,
// fence.proxy.async, an arrival per lane). X4: the activation E2M1 too,
// widened by the producer. AL: which of two fragment layouts (0: a0 = rows
// g / slots 4c, a1 = rows g+8 / 4c, a2 = g / 16+4c, a3 = g+8 / 16+4c; 1: a0 =
// g / 4c, a1 = g / 16+4c, a2 = g+8 / 4c, a3 = g+8 / 16+4c); the check says.
template <int BN>
struct WL5 {
  static constexpr int WT = 4096, X_OFF = 4096, SW_OFF = X_OFF + BN * 128, SX_OFF = SW_OFF + 256;
  static constexpr int END = SX_OFF + BN * 4;
  static constexpr int STAGE = (END + 1023) / 1024 * 1024;
};
__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];" : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr) : "memory");
}
template <int BN>
__device__ __forceinline__ void wgmma_e4m3_rs(float *d, const uint32_t *a, uint64_t db) {
  if constexpr (BN == 8) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\nwgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(0));
  } else {
    static_assert(BN == 16, "BN");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\nwgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, "
        "%11}, %12, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(0));
  }
}
template <int BN, int S, int KS, bool X4, int AL, bool PF = true>
__global__ void __launch_bounds__(160, 2) wgd5_kernel(const Args P, const __grid_constant__ Maps T) {
  static_assert(AL != 2 || !X4, "AL 2: FP8 rows of A by TMA");
  using L = WL5<BN>;
  constexpr int NR = BN / 2;
  __shared__ __align__(8) uint64_t full[S], empty[S];
  extern __shared__ uint8_t smem_raw[];
  uint8_t *smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  const int tid = threadIdx.x;
  const int rank = KS > 1 ? (int)cluster_rank() : 0;
  if constexpr (KS > 1) cluster_arrive_relaxed();
  const int64_t n0 = (int64_t)(blockIdx.x / KS) * 64;
  const int KT = (int)((P.K + 127) / 128);
  const int64_t nblocks = (P.K + 31) / 32;
  const int nk = rank < KT ? (KT - rank + KS - 1) / KS : 0;
  if (tid == 0) {
    for (int i = 0; i < S; i++) mbar_init(&full[i], AL == 2 ? 33 : 65), mbar_init(&empty[i], 128);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const int t = tid % 128, warp = t / 32;
  const int rloc = warp * 16 + (t % 32) / 4, cq = 2 * (t % 4);
  float acc[NR];
#pragma unroll
  for (int i = 0; i < NR; i++) acc[i] = 0.f;
  if (tid >= 128) {
    const int lane = tid % 32;
    // units (row r, 32-block u): 32 bytes of an FP8 row (16 of E2M1); a
    // stage's units are loaded one stage ahead (PF), so that their L2
    // latency overlaps the stage before.
    constexpr int NP = BN * 4 / 32;
    uint4 v[NP][2], vn[NP][2];
    auto load_x = [&](int i, uint4 (&d)[NP][2]) {
      const int qi = rank + i * KS;
#pragma unroll
      for (int pi = 0; pi < NP; pi++) {
        const int p = lane + 32 * pi, r = p >> 2, u = p & 3;
        const int64_t kk = (int64_t)qi * 128 + 32 * u;
        d[pi][0] = d[pi][1] = make_uint4(0, 0, 0, 0);
        if (r < P.M && kk < P.K) {
          if constexpr (X4) {
            d[pi][0] = *reinterpret_cast<const uint4 *>(P.x.data + r * P.x.ld + kk / 2);
          } else {
            const uint4 *src = reinterpret_cast<const uint4 *>(P.x.data + r * P.x.ld + kk);
            d[pi][0] = src[0], d[pi][1] = src[1];
          }
        }
      }
    };
    if constexpr (AL == 2) {
      // A by TMA in its own K order (the 128-byte swizzle, as the FP8 path):
      // the consumers take the weight's codes in that order instead.
      for (int i = 0; i < nk; i++) {
        const int s = i % S, qi = rank + i * KS;
        if (i >= S) mbar_wait(&empty[s], ((i / S) + 1) & 1);
        uint8_t *st = smem + s * L::STAGE;
        if (lane == 0) {
          mbar_arrive_expect_tx(&full[s], L::WT + BN * 128);
          tma_load_2d(st, &T.w, qi * 64, (int)n0, &full[s]);
          tma_load_2d(st + L::X_OFF, &T.x, qi * 128, 0, &full[s]);
        }
#pragma unroll
        for (int r = lane; r < 64; r += 32) {
          const int64_t gr = n0 + r;
          cp_async4(st + L::SW_OFF + 4 * r, gr < P.N ? (const void *)(P.w.scale + gr * P.w.scale_stride + qi * 4) : (const void *)&kOne);
        }
        if (lane < BN) cp_async4(st + L::SX_OFF + 4 * lane, lane < P.M ? (const void *)(P.x.scale + lane * P.x.scale_stride + qi * 4) : (const void *)&kOne);
        cp_async_mbar_arrive_noinc(&full[s]);
      }
    } else {
    if (PF && nk > 0) load_x(0, vn);
    for (int i = 0; i < nk; i++) {
      const int s = i % S, qi = rank + i * KS;
      if constexpr (PF) {
#pragma unroll
        for (int pi = 0; pi < NP; pi++) v[pi][0] = vn[pi][0], v[pi][1] = vn[pi][1];
        if (i + 1 < nk) load_x(i + 1, vn);
      } else {
        load_x(i, v);
      }
      if (i >= S) mbar_wait(&empty[s], ((i / S) + 1) & 1);
      uint8_t *st = smem + s * L::STAGE;
      if (lane == 0) {
        mbar_arrive_expect_tx(&full[s], L::WT);
        tma_load_2d(st, &T.w, qi * 64, (int)n0, &full[s]);
      }
#pragma unroll
      for (int r = lane; r < 64; r += 32) {
        const int64_t gr = n0 + r;
        cp_async4(st + L::SW_OFF + 4 * r, gr < P.N ? (const void *)(P.w.scale + gr * P.w.scale_stride + qi * 4) : (const void *)&kOne);
      }
      if (lane < BN) cp_async4(st + L::SX_OFF + 4 * lane, lane < P.M ? (const void *)(P.x.scale + lane * P.x.scale_stride + qi * 4) : (const void *)&kOne);
      cp_async_mbar_arrive_noinc(&full[s]);
#pragma unroll
      for (int pi = 0; pi < NP; pi++) {
        const int p = lane + 32 * pi, r = p >> 2, u = p & 3;
        uint4 c0, c1;
        if constexpr (X4) {
          const uint4 w = v[pi][0];
          e2m1x8_to_e4m3x8(w.x, c0.x, c1.x);
          e2m1x8_to_e4m3x8(w.y, c0.y, c1.y);
          e2m1x8_to_e4m3x8(w.z, c0.z, c1.z);
          e2m1x8_to_e4m3x8(w.w, c0.w, c1.w);
        } else {
          const uint4 a = v[pi][0], b = v[pi][1];
          c0 = make_uint4(a.x, a.z, b.x, b.z), c1 = make_uint4(a.y, a.w, b.y, b.w);
        }
        uint8_t *row = st + L::X_OFF + r * 128;
        *reinterpret_cast<uint4 *>(row + (((2 * u) ^ (r & 7)) << 4)) = c0;
        *reinterpret_cast<uint4 *>(row + (((2 * u + 1) ^ (r & 7)) << 4)) = c1;
      }
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      mbar_arrive(&full[s]);
    }
    }
  } else {
    struct Sc {
      uint32_t wa0, wa1, wb[BN / 8][2];
      bool slow;
    };
    float tmp[2][4][NR];
    uint32_t a[2][4][4];
    Sc sc[2];
    const uint64_t desc0 = sw128_desc(smem_u32(smem));
    const uint32_t sbase = smem_u32(smem);
    const int lm = t % 32, mrow = warp * 16 + (lm & 7) + 8 * ((lm >> 3) & 1), mu = lm >> 4;
    const uint32_t rowoff = (uint32_t)mrow * 64, swz = (uint32_t)(mrow >> 1) & 3;
    auto ktile = [&](int j) { return rank + j * KS; };
    auto load_issue = [&](int j, auto SET) {
      constexpr int X = decltype(SET)::value;
      const int kt = ktile(j), s = j % S;
      mbar_wait(&full[s], (j / S) & 1);
      const uint8_t *st = smem + s * L::STAGE;
      const uint32_t *sw = reinterpret_cast<const uint32_t *>(st + L::SW_OFF);
      const uint32_t *sx = reinterpret_cast<const uint32_t *>(st + L::SX_OFF);
      const int64_t nv = nblocks - 4 * (int64_t)kt;
      const uint32_t keep = nv >= 4 ? 0xFFFFFFFFu : (1u << (8 * nv)) - 1u;
      auto fix = [&](uint32_t q) { return (q & keep) | (0x7F7F7F7Fu & ~keep); };
      sc[X].wa0 = fix(sw[rloc]), sc[X].wa1 = fix(sw[rloc + 8]);
      uint32_t ok = (sc[X].wa0 ^ (sc[X].wa0 << 1)) & (sc[X].wa1 ^ (sc[X].wa1 << 1));
#pragma unroll
      for (int jj = 0; jj < BN / 8; jj++) {
        sc[X].wb[jj][0] = fix(sx[8 * jj + cq]), sc[X].wb[jj][1] = fix(sx[8 * jj + cq + 1]);
        ok &= (sc[X].wb[jj][0] ^ (sc[X].wb[jj][0] << 1)) & (sc[X].wb[jj][1] ^ (sc[X].wb[jj][1] << 1));
      }
      sc[X].slow = __any_sync(0xFFFFFFFFu, (ok & 0x80808080u) != 0x80808080u);
      [[maybe_unused]] const uint32_t wbase = sbase + s * L::STAGE + rowoff;
      if constexpr (AL == 2) {
        // K in A's own order: thread c's slots 4c..4c+3 and 16+4c..16+4c+3
        // of block u are bytes 2c, 2c+1 and 8+2c, 9+2c of the weight row's
        // 16-byte block (64-byte swizzle): two 32-bit loads and a byte
        // permute per row and block (conflict-free: rows g of a warp fall in
        // distinct banks, threads 2c', 2c'+1 share a word).
        const int c = t & 3;
        const uint32_t sel = (c & 1) ? 0x7632u : 0x5410u, wo = 4u * (uint32_t)(c >> 1);
#pragma unroll
        for (int u = 0; u < 4; u++) {
          uint32_t *f = a[X][u];
#pragma unroll
          for (int h = 0; h < 2; h++) {  // rows g, g + 8
            const uint32_t r = (uint32_t)(rloc + 8 * h);
            const uint8_t *rb = st + r * 64 + ((((uint32_t)u) ^ ((r >> 1) & 3)) << 4) + wo;
            const uint32_t lo32 = *reinterpret_cast<const uint32_t *>(rb), hi32 = *reinterpret_cast<const uint32_t *>(rb + 8);
            e2m1x8_to_e4m3x8(__byte_perm(lo32, hi32, sel), f[h], f[2 + h]);
          }
        }
      } else {
#pragma unroll
      for (int v = 0; v < 2; v++) {
        uint32_t m[4];
        ldsm_x4(wbase + ((((uint32_t)(2 * v + mu)) ^ swz) << 4), m[0], m[1], m[2], m[3]);
#pragma unroll
        for (int h = 0; h < 2; h++) {
          uint32_t lo0, hi0, lo1, hi1;
          e2m1x8_to_e4m3x8(m[2 * h], lo0, hi0);
          e2m1x8_to_e4m3x8(m[2 * h + 1], lo1, hi1);
          uint32_t *f = a[X][2 * v + h];
          if constexpr (AL == 0) f[0] = lo0, f[1] = lo1, f[2] = hi0, f[3] = hi1;
          else f[0] = lo0, f[1] = hi0, f[2] = lo1, f[3] = hi1;
        }
      }
      }
      const uint32_t offB = (uint32_t)(s * L::STAGE + L::X_OFF) >> 4;
      wgmma_fence();
#pragma unroll
      for (int u = 0; u < 4; u++) {
        wgmma_e4m3_rs<BN>(tmp[X][u], a[X][u], desc0 + offB + 2 * u);
        wgmma_commit();
      }
    };
    auto release = [&](int j) { mbar_arrive(&empty[j % S]); };
    auto promote = [&](auto SET) {
      constexpr int X = decltype(SET)::value;
#pragma unroll
      for (int u = 0; u < 4; u++)
#pragma unroll
        for (int i = 0; i < NR; i++) reg_fence(tmp[X][u][i]);
      const uint32_t wa0 = sc[X].wa0, wa1 = sc[X].wa1;
      if (!sc[X].slow) {
#pragma unroll
        for (int u = 0; u < 4; u++) {
          const float *tt = tmp[X][u];
          const float sa0 = e8(wa0, u), sa1 = e8(wa1, u);
#pragma unroll
          for (int jj = 0; jj < BN / 8; jj++) {
            const float sbx = e8(sc[X].wb[jj][0], u), sby = e8(sc[X].wb[jj][1], u);
            acc[4 * jj + 0] = fmaf(tt[4 * jj + 0] * sa0, sbx, acc[4 * jj + 0]);
            acc[4 * jj + 1] = fmaf(tt[4 * jj + 1] * sa0, sby, acc[4 * jj + 1]);
            acc[4 * jj + 2] = fmaf(tt[4 * jj + 2] * sa1, sbx, acc[4 * jj + 2]);
            acc[4 * jj + 3] = fmaf(tt[4 * jj + 3] * sa1, sby, acc[4 * jj + 3]);
          }
        }
      } else {
#pragma unroll
        for (int u = 0; u < 4; u++) {
          const float *tt = tmp[X][u];
          const double sa0 = e8m0_to_float((wa0 >> (8 * u)) & 0xFF), sa1 = e8m0_to_float((wa1 >> (8 * u)) & 0xFF);
#pragma unroll
          for (int jj = 0; jj < BN / 8; jj++) {
            const double sbx = e8m0_to_float((sc[X].wb[jj][0] >> (8 * u)) & 0xFF), sby = e8m0_to_float((sc[X].wb[jj][1] >> (8 * u)) & 0xFF);
            acc[4 * jj + 0] = (float)fma((double)tt[4 * jj + 0], sa0 * sbx, (double)acc[4 * jj + 0]);
            acc[4 * jj + 1] = (float)fma((double)tt[4 * jj + 1], sa0 * sby, (double)acc[4 * jj + 1]);
            acc[4 * jj + 2] = (float)fma((double)tt[4 * jj + 2], sa1 * sbx, (double)acc[4 * jj + 2]);
            acc[4 * jj + 3] = (float)fma((double)tt[4 * jj + 3], sa1 * sby, (double)acc[4 * jj + 3]);
          }
        }
      }
    };
    using I0 = std::integral_constant<int, 0>;
    using I1 = std::integral_constant<int, 1>;
    int j = 0;
    if (ktile(0) < KT) {
      load_issue(0, I0{});
      for (;;) {
        if (ktile(j + 1) >= KT) {
          wgmma_wait<0>();
          release(j);
          promote(I0{});
          break;
        }
        load_issue(j + 1, I1{});
        wgmma_wait<4>();
        release(j);
        promote(I0{});
        j++;
        if (ktile(j + 1) >= KT) {
          wgmma_wait<0>();
          release(j);
          promote(I1{});
          break;
        }
        load_issue(j + 1, I0{});
        wgmma_wait<4>();
        release(j);
        promote(I1{});
        j++;
      }
    }
  }
  const bool cons = tid < 128;
  if constexpr (KS > 1) {
    cluster_wait();
    cluster_arrive_release();
    cluster_wait();
    const uint32_t xred = smem_u32(smem) + 16384;
    if (rank > 0 && cons) {
      const uint32_t dst = cluster_map(xred, 0) + ((rank - 1) * NR * 128 + t) * 4;
#pragma unroll
      for (int i = 0; i < NR; i++) st_cluster_f32(dst + i * 128 * 4, acc[i]);
    }
    cluster_arrive_release();
    cluster_wait();
    if (rank > 0) return;
    if (cons) {
      const float *xr = reinterpret_cast<const float *>(smem + 16384);
      for (int r = 1; r < KS; r++)
#pragma unroll
        for (int i = 0; i < NR; i++) acc[i] += xr[((r - 1) * NR + i) * 128 + t];
    }
  }
  if (!cons) return;
#pragma unroll
  for (int jj = 0; jj < BN / 8; jj++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int64_t n = n0 + rloc + (e >> 1) * 8, m = 8 * jj + cq + (e & 1);
      if (n < P.N && m < P.M) P.d[m * P.ldd + n] = __float2bfloat16_rn(P.alpha * acc[4 * jj + e]);
    }
}

// reference: one thread per output, FP64, and the bound of README "Numerics"
__global__ void ref_kernel(Args P, double *ref, double *bound) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i >= P.M * P.N) return;
  const int64_t m = i / P.N, n = i % P.N;
  double r = 0, b = 0, mag = 0;
  const int64_t nb = (P.K + 31) / 32;
  for (int64_t blk = 0; blk < nb; blk++) {
    double sum = 0, sabs = 0, mx = 0;
    for (int k = 0; k < 32 && blk * 32 + k < P.K; k++) {
      const int64_t kk = blk * 32 + k;
      __nv_fp8_e4m3 a, w;
      double av;
      if (P.x4) {
        const uint32_t c = (P.x.data[m * P.x.ld + kk / 2] >> (4 * (kk % 2))) & 0xF, e = (c >> 1) & 3;
        av = (e == 0 ? 0.5 * (c & 1) : ldexp(1.0 + 0.5 * (c & 1), (int)e - 1)) * (c & 8 ? -1 : 1);
      } else {
        *reinterpret_cast<uint8_t *>(&a) = P.x.data[m * P.x.ld + kk];
        av = (double)(float)a;
      }
      double wv;
      if (P.w4) {
        const uint32_t c = (P.w.data[n * P.w.ld + kk / 2] >> (4 * (kk % 2))) & 0xF, e = (c >> 1) & 3;
        wv = (e == 0 ? 0.5 * (c & 1) : ldexp(1.0 + 0.5 * (c & 1), (int)e - 1)) * (c & 8 ? -1 : 1);
      } else {
        *reinterpret_cast<uint8_t *>(&w) = P.w.data[n * P.w.ld + kk];
        wv = (double)(float)w;
      }
      const double p = av * wv;
      sum += p, sabs += fabs(p), mx = fmax(mx, fabs(p));
    }
    const double s = (double)e8m0_to_float(P.x.scale[m * P.x.scale_stride + blk]) * (double)e8m0_to_float(P.w.scale[n * P.w.scale_stride + blk]);
    r += s * sum;
    b += s * (32 * ldexp(1.0, -13) * (1 + ldexp(1.0, -13)) * mx + (ldexp(1.0, -13) + ldexp(1.0, -24)) * sabs);
    mag += s * sabs;
  }
  b += (nb + 2) * ldexp(1.0, -24) * mag;
  ref[i] = r;
  bound[i] = b + fabs(r) * ldexp(1.0, -8) + ldexp(1.0, -133);  // + the rounding to BF16 (half an ulp at 8 bits)
}

typedef CUresult (*EncodeFn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                             const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
static EncodeFn enc() {
  static EncodeFn f = nullptr;
  if (!f) {
    void *p = nullptr;
    cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q));
    f = (EncodeFn)p;
  }
  return f;
}
// A box of 128 bytes by box_rows in the 128-byte swizzle; packed (E2M1
// codes, K / 2 bytes a row): 64 bytes by box_rows, unswizzled.
static void make_map(CUtensorMap *m, const uint8_t *data, int64_t rows, int64_t K, int64_t ld, int box_rows, bool packed = false, bool sw64 = false) {
  const cuuint64_t dims[2] = {(cuuint64_t)(packed ? K / 2 : K), (cuuint64_t)rows};
  const cuuint64_t strides[1] = {(cuuint64_t)ld};
  const cuuint32_t box[2] = {packed ? 64u : 128u, (cuuint32_t)box_rows};
  const cuuint32_t estr[2] = {1, 1};
  CUresult r = enc()(m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)data, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                     sw64 ? CU_TENSOR_MAP_SWIZZLE_64B : packed ? CU_TENSOR_MAP_SWIZZLE_NONE : CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    printf("encode failed %d\n", (int)r);
    exit(1);
  }
}

struct Problem {
  Args a;
  Maps maps;
  int64_t M, N, K;
};

static uint8_t *dev_bytes(const std::vector<uint8_t> &h) {
  uint8_t *d;
  CK(cudaMalloc(&d, h.size()));
  CK(cudaMemcpy(d, h.data(), h.size(), cudaMemcpyHostToDevice));
  return d;
}

static Problem make_problem(int64_t M, int64_t N, int64_t K, int smin_x, int smax_x, int smin_w, int smax_w, uint64_t seed, int BN, bool w4 = false,
                            bool x4 = false, bool sw64 = false) {
  std::mt19937_64 rng(seed);
  auto code = [&] {
    for (;;) {
      uint8_t b = rng() & 0xFF;
      if ((b & 0x7F) != 0x7F) return b;
    }
  };
  const int64_t ss = ((K + 31) / 32 + 3) / 4 * 4;
  const int64_t wld = w4 ? K / 2 : K;
  const int64_t xld = x4 ? K / 2 : K;
  std::vector<uint8_t> xd(M * xld), wd(N * wld), xs(M * ss), ws(N * ss);
  for (auto &b : xd) b = x4 ? (uint8_t)(rng() & 0xFF) : code();
  for (auto &b : wd) b = w4 ? (uint8_t)(rng() & 0xFF) : code();
  for (auto &b : xs) b = smin_x + rng() % (smax_x - smin_x + 1);
  for (auto &b : ws) b = smin_w + rng() % (smax_w - smin_w + 1);
  Problem p{};
  p.M = M, p.N = N, p.K = K;
  p.a.x = Op{dev_bytes(xd), dev_bytes(xs), M, xld, ss};
  p.a.w = Op{dev_bytes(wd), dev_bytes(ws), N, wld, ss};
  p.a.M = M, p.a.N = N, p.a.K = K, p.a.w4 = w4, p.a.x4 = x4, p.a.alpha = 1.f, p.a.ldd = N;
  CK(cudaMalloc(&p.a.d, M * N * 2));
  make_map(&p.maps.w, p.a.w.data, N, K, wld, 64, w4, sw64);
  make_map(&p.maps.x, p.a.x.data, M, K, xld, BN, x4);
  return p;
}

template <typename F>
static float graph_ms(F &&f) {
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  for (int i = 0; i < 3; i++) f(st);
  CK(cudaStreamSynchronize(st));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < 20; i++) f(st);
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> ts;
  for (int r = 0; r < 9; r++) {
    CK(cudaEventRecord(e0, st));
    CK(cudaGraphLaunch(ge, st));
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    ts.push_back(ms / 20);
  }
  std::sort(ts.begin(), ts.end());
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  CK(cudaStreamDestroy(st));
  return ts[ts.size() / 2];
}

template <typename F>
static float each_ms(F &&f) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; i++) f((cudaStream_t)0);
  CK(cudaDeviceSynchronize());
  std::vector<float> ts;
  for (int r = 0; r < 20; r++) {
    CK(cudaEventRecord(e0));
    f((cudaStream_t)0);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    ts.push_back(ms);
  }
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

static bool check(const Problem &p, const char *what) {
  const int64_t n = p.M * p.N;
  double *ref, *bound;
  CK(cudaMalloc(&ref, n * 8));
  CK(cudaMalloc(&bound, n * 8));
  ref_kernel<<<(unsigned)((n + 255) / 256), 256>>>(p.a, ref, bound);
  CK(cudaDeviceSynchronize());
  std::vector<double> hr(n), hb(n);
  std::vector<__nv_bfloat16> hd(n);
  CK(cudaMemcpy(hr.data(), ref, n * 8, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hb.data(), bound, n * 8, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hd.data(), p.a.d, n * 2, cudaMemcpyDeviceToHost));
  double worst = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) {
    const double d = (double)__bfloat162float(hd[i]);
    const double e = hr[i] != hr[i] ? (d != d ? 0.0 : NAN) : fabs(d - hr[i]) / hb[i];  // a NaN scale: NaN out
    if (!(e <= 1.0)) bad++;
    if (e > worst || e != e) worst = e;
  }
  printf("check %-40s M%ld N%ld K%ld: %ld of %ld outside the bound, worst err/bound %.3g -> %s\n", what, (long)p.M, (long)p.N, (long)p.K, (long)bad,
         (long)n, worst, bad ? "FAIL" : "ok");
  CK(cudaFree(ref));
  CK(cudaFree(bound));
  return bad == 0;
}

static float g_each;
template <int BN, int S, int NC, int KB, int KS, int PV = 0, int MODE = 0, bool W4 = false>
static void launch3(const Problem &p, cudaStream_t st) {
  using L = WL2<BN, KB, W4>;
  const int smem = std::max(S * L::STAGE + (W4 ? 3 * 8192 : 0), 16384 + (KS - 1) * BN / 2 * 128 * 4) + 1024;
  auto k = wgd3_kernel<BN, S, NC, KB, KS, PV, MODE, W4>;
  static bool set = false;
  if (!set) {
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    set = true;
  }
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = KS;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)((p.N + 63) / 64 * KS));
  cfg.blockDim = dim3(NC * 128 + 32);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = st;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  CK(cudaLaunchKernelEx(&cfg, k, p.a, p.maps));
}
template <int BN, int S, int NC, int KB, int KS, int PV = 0, bool W4 = false>
static bool run_check3(int64_t M, int64_t N, int64_t K, int sx0, int sx1, int sw0, int sw1, const char *what) {
  Problem p = make_problem(M, N, K, sx0, sx1, sw0, sw1, M * 7 + N * 13 + K, BN, W4);
  CK(cudaMemset(p.a.d, 0xFF, M * N * 2));
  launch3<BN, S, NC, KB, KS, PV, 0, W4>(p, 0);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  char buf[128];
  snprintf(buf, sizeof buf, "%s v3 BN%d S%d NC%d KB%d KS%d PV%d%s", what, BN, S, NC, KB, KS, PV, W4 ? " W4" : "");
  return check(p, buf);
}
template <int BN, int S, int NC, int KB, int KS, int PV = 0, int MODE = 0, bool W4 = false>
static float time3(const Problem &p) {
  g_each = each_ms([&](cudaStream_t st) { launch3<BN, S, NC, KB, KS, PV, MODE, W4>(p, st); });
  return graph_ms([&](cudaStream_t st) { launch3<BN, S, NC, KB, KS, PV, MODE, W4>(p, st); });
}

template <int BN, int S, int W, int KS, bool CL = false>
static void launch4(const Problem &p, cudaStream_t st) {
  using L = WL2<BN, 1, true>;
  const int smem = std::max(S * L::STAGE + W * 8192, 16384 + (KS - 1) * BN / 2 * 128 * 4) + 1024;
  auto k = wgd4_kernel<BN, S, W, KS, CL>;
  static bool set = false;
  if (!set) {
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    set = true;
  }
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = KS;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)((p.N + 63) / 64 * KS));
  cfg.blockDim = dim3(256);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = st;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  CK(cudaLaunchKernelEx(&cfg, k, p.a, p.maps));
}
template <int BN, int S, int W, int KS, bool CL = false>
static bool run_check4(int64_t M, int64_t N, int64_t K, int sx0, int sx1, int sw0, int sw1, const char *what) {
  Problem p = make_problem(M, N, K, sx0, sx1, sw0, sw1, M * 7 + N * 13 + K, BN, true);
  CK(cudaMemset(p.a.d, 0xFF, M * N * 2));
  launch4<BN, S, W, KS, CL>(p, 0);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  char buf[128];
  snprintf(buf, sizeof buf, "%s v4 BN%d S%d W%d KS%d%s", what, BN, S, W, KS, CL ? " CL" : "");
  return check(p, buf);
}
template <int BN, int S, int W, int KS, bool CL = false>
static float time4(const Problem &p) {
  g_each = each_ms([&](cudaStream_t st) { launch4<BN, S, W, KS, CL>(p, st); });
  return graph_ms([&](cudaStream_t st) { launch4<BN, S, W, KS, CL>(p, st); });
}

template <int BN, int S, int KS, bool X4, int AL, bool PW = true>
static void launch5(const Problem &p, cudaStream_t st) {
  using L = WL5<BN>;
  const int smem = std::max(S * L::STAGE, 16384 + (KS - 1) * BN / 2 * 128 * 4) + 1024;
  auto k = wgd5_kernel<BN, S, KS, X4, AL, PW>;
  static bool set = false;
  if (!set) {
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    set = true;
  }
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = KS;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)((p.N + 63) / 64 * KS));
  cfg.blockDim = dim3(160);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = st;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  CK(cudaLaunchKernelEx(&cfg, k, p.a, p.maps));
}
template <int BN, int S, int KS, bool X4, int AL, bool PW = true>
static bool run_check5(int64_t M, int64_t N, int64_t K, int sx0, int sx1, int sw0, int sw1, const char *what) {
  Problem p = make_problem(M, N, K, sx0, sx1, sw0, sw1, M * 7 + N * 13 + K, BN, true, X4, true);
  CK(cudaMemset(p.a.d, 0xFF, M * N * 2));
  launch5<BN, S, KS, X4, AL, PW>(p, 0);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  char buf[128];
  snprintf(buf, sizeof buf, "%s v5 BN%d S%d KS%d%s AL%d PF%d", what, BN, S, KS, X4 ? " X4" : "", AL, (int)PW);
  return check(p, buf);
}
template <int BN, int S, int KS, bool X4, int AL, bool PW = true>
static float time5(const Problem &p) {
  g_each = each_ms([&](cudaStream_t st) { launch5<BN, S, KS, X4, AL, PW>(p, st); });
  return graph_ms([&](cudaStream_t st) { launch5<BN, S, KS, X4, AL, PW>(p, st); });
}

static float time_bf16(cublasHandle_t h, int64_t M, int64_t N, int64_t K) {
  __nv_bfloat16 *x, *w, *d;
  CK(cudaMalloc(&x, M * K * 2));
  CK(cudaMalloc(&w, N * K * 2));
  CK(cudaMalloc(&d, M * N * 2));
  CK(cudaMemset(x, 0x3c, M * K * 2));
  CK(cudaMemset(w, 0x3c, N * K * 2));
  const float one = 1, zero = 0;
  auto f = [&](cudaStream_t st) {
    cublasSetStream(h, st);
    if (cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, w, CUDA_R_16BF, (int)K, x, CUDA_R_16BF, (int)K, &zero, d, CUDA_R_16BF,
                     (int)N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
      printf("cublas failed\n");
      exit(1);
    }
  };
  g_each = each_ms(f);
  float ms = graph_ms(f);
  CK(cudaFree(x));
  CK(cudaFree(w));
  CK(cudaFree(d));
  return ms;
}

int main(int argc, char **argv) {
  setvbuf(stdout, nullptr, _IONBF, 0);
  cublasHandle_t h;
  cublasCreate(&h);
  // cuBLAS needs its workspace outside the capture
  void *ws;
  CK(cudaMalloc(&ws, 64 << 20));
  cublasSetWorkspace(h, ws, 64 << 20);
  if (argc > 1 && !strcmp(argv[1], "ncu")) {  // three launches of the shipped configuration (for ncu)
    Problem p = make_problem(16, 8192, 8192, 120, 134, 120, 134, 1, 16);
    for (int i = 0; i < 3; i++) launch3<16, 6, 1, 1, 2, 1>(p, 0);
    CK(cudaDeviceSynchronize());
    return 0;
  }
  if (argc > 1 && !strcmp(argv[1], "ncu4")) {  // E2M1 weights: one warpgroup widening, then the converter warpgroup (CL)
    Problem p4 = make_problem(16, 8192, 8192, 120, 134, 120, 134, 1, 16, true);
    launch3<16, 6, 1, 1, 2, 1, 0, true>(p4, 0);
    launch4<16, 8, 4, 2, true>(p4, 0);
    CK(cudaDeviceSynchronize());
    return 0;
  }
  if (argc > 1 && !strcmp(argv[1], "ncu5")) {  // three launches of wgd5 (FP8 rows of A) at M16 N8192 K8192, for ncu
    Problem p5 = make_problem(16, 8192, 8192, 120, 134, 120, 134, 1, 16, true, false, true);
    for (int i = 0; i < 3; i++) launch5<16, 6, 2, false, 0, false>(p5, 0);
    CK(cudaDeviceSynchronize());
    return 0;
  }
  if (argc > 1 && !strcmp(argv[1], "w6")) {  // wgd5 AL 2: FP8 rows of A by TMA in their own order, the weight's codes taken to match
    bool ok = true;
    ok &= run_check5<16, 6, 2, false, 2, false>(16, 8192, 8192, 120, 134, 120, 134, "normal scales");
    ok &= run_check5<16, 6, 1, false, 2, false>(16, 8192, 8192, 120, 134, 120, 134, "normal scales");
    ok &= run_check5<16, 6, 1, false, 2, false>(13, 1000, 352, 120, 134, 120, 134, "ragged small K");
    ok &= run_check5<16, 6, 2, false, 2, false>(13, 1000, 4064, 120, 134, 120, 134, "ragged");
    ok &= run_check5<16, 6, 2, false, 2, false>(13, 1000, 96, 120, 134, 120, 134, "ragged, rank 1 idle");
    ok &= run_check5<8, 6, 2, false, 2, false>(1, 8200, 8192, 120, 134, 120, 134, "M1");
    ok &= run_check5<8, 6, 2, false, 2, false>(7, 8200, 2080, 120, 134, 120, 134, "M7");
    ok &= run_check5<16, 6, 2, false, 2, false>(16, 4096, 4096, 30, 100, 150, 220, "adversarial scales");
    ok &= run_check5<8, 6, 2, false, 2, false>(3, 4096, 4128, 0, 255, 0, 100, "NaN and every byte of A");
    printf("checks %s\n", ok ? "ALL PASS" : "FAILED");
    struct Sh {
      int64_t M, N, K;
    };
    for (int round = 0; round < 2; round++)
      for (Sh s : {Sh{16, 8192, 8192}, Sh{1, 8192, 8192}, Sh{8, 8192, 8192}, Sh{16, 28672, 8192}, Sh{8, 28672, 8192}, Sh{16, 8192, 28672}}) {
        const float bf = time_bf16(h, s.M, s.N, s.K), bfe = g_each;
        printf("\nM%ld N%ld K%ld: BF16 cuBLAS graph %.4f ms, each %.4f ms\n", (long)s.M, (long)s.N, (long)s.K, bf, bfe);
        auto row = [&](const char *name, float ms, double bytes_per) {
          printf("  %-28s graph %.4f ms  %.2fx BF16  %.0f GB/s | each %.4f ms %.2fx\n", name, ms, bf / ms, (s.N * s.K * bytes_per) / ms / 1e6, g_each,
                 bfe / g_each);
        };
        const bool ks1 = s.N > 64 * 132;
        if (s.M <= 8) {
          Problem p8 = make_problem(s.M, s.N, s.K, 120, 134, 120, 134, 1, 8);
          if (ks1) row("MXFP8 wgd3 BN8 S4 KB2 KS1", time3<8, 4, 1, 2, 1, 1>(p8), 1.03125);
          else row("MXFP8 wgd3 BN8 S6 KS2", time3<8, 6, 1, 1, 2, 1>(p8), 1.03125);
          Problem p5 = make_problem(s.M, s.N, s.K, 120, 134, 120, 134, 1, 8, true, false, true);
          row("W5 BN8 KS2 (shipped)", time5<8, 6, 2, false, 0, false>(p5), 0.53125);
          row("W6 BN8 KS2 (A by TMA)", time5<8, 6, 2, false, 2, false>(p5), 0.53125);
          if (ks1) row("W6 BN8 KS1", time5<8, 6, 1, false, 2, false>(p5), 0.53125);
          continue;
        }
        Problem p8 = make_problem(s.M, s.N, s.K, 120, 134, 120, 134, 1, 16);
        if (ks1) row("MXFP8 wgd3 S4 KB2 KS1", time3<16, 4, 1, 2, 1, 1>(p8), 1.03125);
        else row("MXFP8 wgd3 S6 KS2", time3<16, 6, 1, 1, 2, 1>(p8), 1.03125);
        Problem p5 = make_problem(s.M, s.N, s.K, 120, 134, 120, 134, 1, 16, true, false, true);
        row("W5 BN16 KS2", time5<16, 6, 2, false, 0, false>(p5), 0.53125);
        row("W6 BN16 KS2 (A by TMA)", time5<16, 6, 2, false, 2, false>(p5), 0.53125);
        if (ks1) {
          row("W5 BN16 KS1", time5<16, 6, 1, false, 0, false>(p5), 0.53125);
          row("W6 BN16 KS1", time5<16, 6, 1, false, 2, false>(p5), 0.53125);
        }
      }
    return ok ? 0 : 1;
  }
  if (argc > 1 && !strcmp(argv[1], "w5")) {  // wgd5: E2M1 weights widened in registers (A from registers)
    bool ok = true;
#define CHECKS5(X4, PW)                                                                                         \
  ok &= run_check5<16, 6, 2, X4, 0, PW>(16, 8192, 8192, 120, 134, 120, 134, "normal scales");                  \
  ok &= run_check5<16, 6, 1, X4, 0, PW>(16, 8192, 8192, 120, 134, 120, 134, "normal scales");                  \
  ok &= run_check5<16, 6, 1, X4, 0, PW>(13, 1000, 352, 120, 134, 120, 134, "ragged small K");                  \
  ok &= run_check5<16, 6, 2, X4, 0, PW>(13, 1000, 4064, 120, 134, 120, 134, "ragged");                         \
  ok &= run_check5<16, 6, 2, X4, 0, PW>(13, 1000, 96, 120, 134, 120, 134, "ragged, rank 1 idle");             \
  ok &= run_check5<8, 6, 2, X4, 0, PW>(1, 8200, 8192, 120, 134, 120, 134, "M1");                               \
  ok &= run_check5<8, 6, 2, X4, 0, PW>(7, 8200, 2080, 120, 134, 120, 134, "M7");                               \
  ok &= run_check5<16, 6, 2, X4, 0, PW>(16, 4096, 4096, 30, 100, 150, 220, "adversarial scales");              \
  ok &= run_check5<16, 6, 2, X4, 0, PW>(16, 4096, 4096, 0, 254, 0, 100, "any scales");                         \
  ok &= run_check5<8, 6, 2, X4, 0, PW>(3, 4096, 4128, 0, 255, 0, 100, "NaN and every byte of A");
    CHECKS5(false, true)
    CHECKS5(true, true)
    CHECKS5(false, false)
    printf("checks %s\n", ok ? "ALL PASS" : "FAILED");
    struct Sh {
      int64_t M, N, K;
    };
    for (int round = 0; round < 2; round++)
      for (Sh s : {Sh{16, 8192, 8192}, Sh{1, 8192, 8192}, Sh{16, 28672, 8192}, Sh{16, 8192, 28672}, Sh{16, 7168, 8192}}) {
        const float bf = time_bf16(h, s.M, s.N, s.K), bfe = g_each;
        printf("\nM%ld N%ld K%ld: BF16 cuBLAS graph %.4f ms, each %.4f ms\n", (long)s.M, (long)s.N, (long)s.K, bf, bfe);
        auto row = [&](const char *name, float ms, double bytes_per) {
          printf("  %-28s graph %.4f ms  %.2fx BF16  %.0f GB/s | each %.4f ms %.2fx\n", name, ms, bf / ms, (s.N * s.K * bytes_per) / ms / 1e6, g_each,
                 bfe / g_each);
        };
        if (s.M == 1) {
          Problem p8 = make_problem(s.M, s.N, s.K, 120, 134, 120, 134, 1, 8);
          row("MXFP8 wgd3 BN8 S6 KS2", time3<8, 6, 1, 1, 2, 1>(p8), 1.03125);
          Problem p5 = make_problem(s.M, s.N, s.K, 120, 134, 120, 134, 1, 8, true, false, true);
          row("W5 BN8", time5<8, 6, 2, false, 0, false>(p5), 0.53125);
          row("W5 BN8 PF", time5<8, 6, 2, false, 0, true>(p5), 0.53125);
          Problem p6 = make_problem(s.M, s.N, s.K, 120, 134, 120, 134, 1, 8, true, true, true);
          row("W5 X4 BN8", time5<8, 6, 2, true, 0, false>(p6), 0.53125);
          row("W5 X4 BN8 PF", time5<8, 6, 2, true, 0, true>(p6), 0.53125);
          continue;
        }
        Problem p8 = make_problem(s.M, s.N, s.K, 120, 134, 120, 134, 1, 16);
        Problem p5 = make_problem(s.M, s.N, s.K, 120, 134, 120, 134, 1, 16, true, false, true);
        Problem p6 = make_problem(s.M, s.N, s.K, 120, 134, 120, 134, 1, 16, true, true, true);
        if (s.N > 64 * 132) {
          row("MXFP8 wgd3 S4 KB2 KS1", time3<16, 4, 1, 2, 1, 1>(p8), 1.03125);
          row("W5 KS1", time5<16, 6, 1, false, 0, false>(p5), 0.53125);
          row("W5 KS1 PF", time5<16, 6, 1, false, 0, true>(p5), 0.53125);
          row("W5 X4 KS1", time5<16, 6, 1, true, 0, false>(p6), 0.53125);
          row("W5 X4 KS1 PF", time5<16, 6, 1, true, 0, true>(p6), 0.53125);
          row("W5 KS2 PF", time5<16, 6, 2, false, 0, true>(p5), 0.53125);
          row("W5 X4 KS2 PF", time5<16, 6, 2, true, 0, true>(p6), 0.53125);
        } else {
          row("MXFP8 wgd3 S6 KS2", time3<16, 6, 1, 1, 2, 1>(p8), 1.03125);
          row("W5 KS2", time5<16, 6, 2, false, 0, false>(p5), 0.53125);
          row("W5 KS2 PF", time5<16, 6, 2, false, 0, true>(p5), 0.53125);
          row("W5 X4 KS2", time5<16, 6, 2, true, 0, false>(p6), 0.53125);
          row("W5 X4 KS2 PF", time5<16, 6, 2, true, 0, true>(p6), 0.53125);
        }
      }
    return ok ? 0 : 1;
  }
  bool ok = true;
  ok &= run_check3<16, 4, 1, 2, 2>(16, 8192, 8192, 120, 134, 120, 134, "normal scales");
#define CHECKS(PV)                                                                                  \
  ok &= run_check3<16, 4, 1, 2, 1, PV>(16, 8192, 8192, 120, 134, 120, 134, "normal scales");      \
  ok &= run_check3<16, 4, 1, 2, 1, PV>(13, 1000, 352, 120, 134, 120, 134, "ragged small K");      \
  ok &= run_check3<16, 6, 1, 1, 2, PV>(16, 8192, 8192, 120, 134, 120, 134, "normal scales");      \
  ok &= run_check3<16, 6, 1, 1, 2, PV>(13, 1000, 4064, 120, 134, 120, 134, "ragged");             \
  ok &= run_check3<8, 6, 1, 1, 2, PV>(1, 8200, 8192, 120, 134, 120, 134, "M1");                    \
  ok &= run_check3<16, 6, 1, 1, 2, PV>(16, 4096, 4096, 30, 100, 150, 220, "adversarial scales");  \
  ok &= run_check3<16, 6, 1, 1, 2, PV>(16, 4096, 4096, 50, 70, 180, 200, "edges of [64, 191]");  \
  ok &= run_check3<16, 6, 1, 1, 2, PV>(16, 4096, 4096, 0, 254, 0, 100, "any scales");             \
  ok &= run_check3<8, 6, 1, 1, 2, PV>(3, 4096, 4128, 0, 255, 0, 100, "NaN and every byte of A");
  ok &= run_check4<16, 8, 3, 2>(16, 4096, 4096, 30, 100, 150, 220, "adversarial scales");
#define CHECKS_CL(S, W)                                                                                     \
  ok &= run_check4<16, S, W, 2, true>(16, 8192, 8192, 120, 134, 120, 134, "normal scales");               \
  ok &= run_check4<16, S, W, 1, true>(16, 8192, 8192, 120, 134, 120, 134, "normal scales");               \
  ok &= run_check4<16, S, W, 1, true>(13, 1000, 352, 120, 134, 120, 134, "ragged small K");               \
  ok &= run_check4<16, S, W, 2, true>(13, 1000, 4064, 120, 134, 120, 134, "ragged");                      \
  ok &= run_check4<16, S, W, 2, true>(13, 1000, 96, 120, 134, 120, 134, "ragged, rank 1 idle");          \
  ok &= run_check4<8, S, W, 2, true>(1, 8200, 8192, 120, 134, 120, 134, "M1");                             \
  ok &= run_check4<16, S, W, 2, true>(16, 4096, 4096, 30, 100, 150, 220, "adversarial scales");           \
  ok &= run_check4<16, S, W, 2, true>(16, 4096, 4096, 0, 254, 0, 100, "any scales");                      \
  ok &= run_check4<8, S, W, 2, true>(3, 4096, 4128, 0, 255, 0, 100, "NaN and every byte of A");
  CHECKS_CL(6, 4)
  CHECKS_CL(8, 3)
  printf("checks %s\n", ok ? "ALL PASS" : "FAILED");
  struct Sh {
    int64_t M, N, K;
  };
  for (int round = 0; round < 2; round++)
  for (Sh s : {Sh{16, 8192, 8192}, Sh{1, 8192, 8192}, Sh{16, 28672, 8192}, Sh{16, 8192, 28672}}) {
    const float bf = time_bf16(h, s.M, s.N, s.K), bfe = g_each;
    printf("\nM%ld N%ld K%ld: BF16 cuBLAS graph %.4f ms, each %.4f ms\n", (long)s.M, (long)s.N, (long)s.K, bf, bfe);
    auto row = [&](const char *name, float ms, double bytes_per) {
      printf("  %-28s graph %.4f ms  %.2fx BF16  %.0f GB/s | each %.4f ms %.2fx\n", name, ms, bf / ms, (s.N * s.K * bytes_per) / ms / 1e6, g_each, bfe / g_each);
    };
    const int ks = s.N > 64 * 132 ? 1 : 2;
    if (s.M == 1) {
      Problem p4 = make_problem(s.M, s.N, s.K, 120, 134, 120, 134, 1, 8, true);
      row("W4 BN8 S6 KB1", time3<8, 6, 1, 1, 2, 1, 0, true>(p4), 0.53125);
      row("CL BN8 S6 W4", time4<8, 6, 4, 2, true>(p4), 0.53125);
      row("CL BN8 S8 W3", time4<8, 8, 3, 2, true>(p4), 0.53125);
      continue;
    }
    Problem p4 = make_problem(s.M, s.N, s.K, 120, 134, 120, 134, 1, 16, true);
    if (ks == 1) {
      row("W4 KS1 S6 KB1", time3<16, 6, 1, 1, 1, 1, 0, true>(p4), 0.53125);
      row("CL KS1 S6 W4", time4<16, 6, 4, 1, true>(p4), 0.53125);
      row("CL KS1 S8 W3", time4<16, 8, 3, 1, true>(p4), 0.53125);
      continue;
    }
    row("W4 KS2 S6 KB1", time3<16, 6, 1, 1, 2, 1, 0, true>(p4), 0.53125);
    row("v4 KS2 S8 W3", time4<16, 8, 3, 2>(p4), 0.53125);
    row("CL KS2 S6 W4", time4<16, 6, 4, 2, true>(p4), 0.53125);
    row("CL KS2 S8 W3", time4<16, 8, 3, 2, true>(p4), 0.53125);
    row("CL KS2 S8 W4", time4<16, 8, 4, 2, true>(p4), 0.53125);
  }
  return ok ? 0 : 1;
}
