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

// The same function again, for the GPU's quantize kernels, with most of the
// work on the FMA pipe (Hopper issues FP32 FMAs twice as fast as integer and
// logic ops, and E2M1 has no conversion instruction before sm_100):
//
//   code(|y|) = RNE(g(|y|)),  g(u) = min(2u, u + 2, u/2 + 4)
//
// g maps the E2M1 grid 0, .5, 1, 1.5, 2, 3, 4, 6 onto 0..7 linearly between
// grid points, so the §1.5 thresholds land on the half-integers and ties go to
// the even code as RNE sends them. Each line is rounded once, by adding
// M = 2^23 (where float32's ulp is 1): fl(2u + M), fl(u + (M+2)) and
// fl(u/2 + (M+4)) are M plus each line rounded to an integer, and since
// rounding is monotone the min of the rounded lines is the rounded min.
// The float's bits are then 0x4B000000 + code. For |y| < 7 (codes <= 7)
// and no NaN this is lq_e2m1's magnitude; lq_e2m1_capped adds the
// saturation at 6 (code 7) and holds for every non-NaN float. The kernels take
// it only for blocks they have checked to hold no NaN (and for the uncapped
// form, |y| < 7); others use lq_e2m1. cuda/hosttest checks both on every
// float32 pattern.
#define LQ_E2M1_M 8388608.0f  // 2^23
#define LQ_E2M1_M_BITS 0x4B000000u

LQ_HD float lq_fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return fmaf(a, b, c);
#endif
}

LQ_HD float lq_add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

LQ_HD uint32_t lq_umin(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return min(a, b);
#else
  return a < b ? a : b;
#endif
}

// M + code of u = |y| (uncapped). The minimum of the three lines is taken on
// their bits: for u >= 0, not NaN, they are non-negative floats (or +inf),
// whose bits order as the floats do, and sm_90 has a three-input integer
// minimum (VIMNMX3) where the float minimum takes two FMNMX. The host runs
// the same integer form, so cuda/hosttest checks it on every float32.
LQ_HD float lq_e2m1_mag_m(float u) {
  float a = lq_fma(u, 2.0f, LQ_E2M1_M);
  float b = lq_add(u, LQ_E2M1_M + 2.0f);
  float c = lq_fma(u, 0.5f, LQ_E2M1_M + 4.0f);
  return lq_bits_f32(lq_umin(lq_umin(lq_f32_bits(a), lq_f32_bits(b)), lq_f32_bits(c)));
}

// M + code, saturated at code 7.
LQ_HD float lq_e2m1_mag_m_capped(float u) { return lq_bits_f32(lq_umin(lq_f32_bits(lq_e2m1_mag_m(u)), LQ_E2M1_M_BITS + 7u)); }

// lq_e2m1 for |y| < 7, not NaN.
LQ_HD uint32_t lq_e2m1_fast(float y) {
  return ((lq_f32_bits(y) >> 28) & 8u) | (lq_f32_bits(lq_e2m1_mag_m(fabsf(y))) - LQ_E2M1_M_BITS);
}

// lq_e2m1 for any y but NaN.
LQ_HD uint32_t lq_e2m1_capped(float y) {
  return ((lq_f32_bits(y) >> 28) & 8u) | (lq_f32_bits(lq_e2m1_mag_m_capped(fabsf(y))) - LQ_E2M1_M_BITS);
}

// ---- Stochastic rounding (numeric.StochasticRoundE2M1: TE's software
// cvt.rs emulation, spec §5.6) ----

LQ_HD float lq_mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

LQ_HD float lq_sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

// prmt in its default mode for selectors whose nibbles are below 8: byte n of
// the result is byte (s >> 4n) & 7 of {y, x}.
LQ_HD uint32_t lq_byte_perm(uint32_t x, uint32_t y, uint32_t s) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(x, y, s);
#else
  const uint64_t v = ((uint64_t)y << 32) | x;
  uint32_t r = 0;
  for (int n = 0; n < 4; n++) r |= (uint32_t)((v >> (8 * ((s >> (4 * n)) & 7))) & 0xFFu) << (8 * n);
  return r;
#endif
}

// The definition, each rounding spelled out: u = r/256 for the random byte
// r, step 0.5 below 2, 1 below 4, else 2; t = fl(fl(u·step) + |x|), floored
// onto the grid of t's own region and clamped to 6; x's sign; NaN gives +6
// (code 7).
LQ_HD uint32_t lq_e2m1_sr_reference(float x, uint32_t r) {
  const uint32_t b = lq_f32_bits(x), a = b & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 7;
  const float ax = lq_bits_f32(a);
  float step = 2.0f;
  if (ax < 2.0f) step = 0.5f;
  else if (ax < 4.0f) step = 1.0f;
  const float t = lq_add(lq_mul(lq_mul((float)(r & 0xFFu), 1.0f / 256.0f), step), ax);
  uint32_t c;
  if (t < 2.0f) c = (uint32_t)lq_mul(t, 2.0f);
  else if (t < 4.0f) c = 2u + (uint32_t)t;
  else if (t < 6.0f) c = 6u;
  else c = 7u;
  return ((b >> 28) & 8u) | c;
}

// The same codes of x with the random byte j of w, straight-line and without
// the conversion unit (a quarter of the FP32 rate on sm_90), as the kernels
// run it:
//   - u·step = r·2^-9 (the float 64 + r·2^-9, byte r placed in its mantissa
//     by one byte permute, minus 64: exact) times 2^min(max(e, 0), 2), e
//     |x|'s exponent (the exponent bits alone as a float, clamped to [1, 4];
//     zero and subnormals give 1): a power of two, so the product is exact;
//   - t = fma of those factors and |x|: the one rounding of the exact sum, as
//     the definition's fadd of the exact u·step;
//   - t's code from its bits: below 0.5 code 0, on [0.5, 1) 1, from 1 on 2e +
//     2 + m1 (e the exponent, m1 the first fraction bit: [1, 1.5) 2, [1.5, 2)
//     3, [2, 3) 4, [3, 4) 5, [4, 6) 6, [6, 8) 7), at most 7 (the clamp to 6):
//     (bits − bits(0.5)) >> 22 clamped to [1, 7] where t ≥ 0.5;
//   - x's sign; a NaN gives code 7 (+6), by a select.
// (H200, nvfp4_1d_kernel SR rowwise 8192²: 17 of the kernel's 37.4 warp
// instructions per 32 elements, against 23 for a form with a branch per
// element and compares for the step, and more with the definition's
// conversions: 136.6 -> 113.5 µs in all; bench/RESULTS.md, 2026-11-29 22:40
// section.) cuda/hosttest checks it against lq_e2m1_sr_reference.
LQ_HD uint32_t lq_e2m1_sr(float x, uint32_t w, int j) {
  const uint32_t b = lq_f32_bits(x), a = b & 0x7FFFFFFFu;
  const float ax = lq_bits_f32(a);
  const float p2 = fminf(fmaxf(lq_bits_f32(a & 0x7F800000u), 1.0f), 4.0f);
  const float ur = lq_sub(lq_bits_f32(lq_byte_perm(w, 0x42800000u, 0x7604u | ((uint32_t)j << 4))), 64.0f);
  const float t = lq_fma(ur, p2, ax);
  int c = ((int)lq_f32_bits(t) - 0x3F000000) >> 22;
  c = c < 1 ? 1 : c > 7 ? 7 : c;
  const uint32_t m = t < 0.5f ? 0u : (uint32_t)c;
  return a > 0x7F800000u ? 7u : m | ((b >> 28) & 8u);
}
