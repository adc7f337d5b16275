// E2M1 round-to-nearest-even (numeric.EncodeE2M1, spec §1.5) in a form that
// compiles for the host too, so that cuda/hosttest checks it against the
// threshold definition on every float32 bit pattern.
#pragma once

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define LQ_HD __host__ __device__ __forceinline__
#else
#define LQ_HD inline
#endif

LQ_HD uint32_t lq_f32_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
#endif
}

LQ_HD float lq_bits_f32(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
#endif
}

// The definition: the number of spec §1.5 thresholds |x| passes (ties to even);
// NaN gives +6 (code 7), a negative value keeps its sign even at 0 (code 8).
LQ_HD uint32_t lq_e2m1_reference(float x) {
  uint32_t b = lq_f32_bits(x), a = b & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 7;
  uint32_t c = (a > 0x3E800000u) + (a >= 0x3F400000u) + (a > 0x3FA00000u) + (a >= 0x3FE00000u) + (a > 0x40200000u) +
               (a >= 0x40600000u) + (a > 0x40A00000u);
  return ((b >> 28) & 8u) | c;
}

// The same function with fewer instructions: below 1 the grid step is 0.5, so
// the code is rint(2|x|) (0, 1 or 2; rint ties to even as the thresholds do);
// from 1 up, E2M1 is a float with one mantissa bit, so the float32 bits are
// rounded to one mantissa bit (RNE, as Float32ToBF16 rounds to 7) and the
// exponent and that bit give the code, saturating at 6 (code 7).
LQ_HD uint32_t lq_e2m1(float x) {
  uint32_t b = lq_f32_bits(x), a = b & 0x7FFFFFFFu;
  uint32_t small = (uint32_t)rintf(lq_bits_f32(a) * 2.0f);
  uint32_t r = (a + 0x1FFFFFu + ((a >> 22) & 1u)) >> 22;  // (biased exponent << 1) | mantissa bit
  uint32_t em = r - 254u;                                 // 0: 1.0, 1: 1.5, 2: 2, 3: 3, 4: 4, 5: 6
  uint32_t big = em >= 5u ? 7u : em + 2u;
  uint32_t c = a < 0x3F800000u ? small : big;
  c = a > 0x7F800000u ? 7u : c;
  return ((b >> 28) & 8u & (a > 0x7F800000u ? 0u : 8u)) | c;
}
