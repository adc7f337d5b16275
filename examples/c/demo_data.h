/* Test data and error metrics shared by the demo and the C tests. */
#ifndef LIBQUANT_DEMO_DATA_H_
#define LIBQUANT_DEMO_DATA_H_

#include <math.h>
#include <stdint.h>
#include <string.h>

/* xorshift64*: deterministic, so every run prints the same table. */
#if defined(__GNUC__)
#define DEMO_UNUSED __attribute__((unused))
#else
#define DEMO_UNUSED
/* The largest per-row relative RMS error: global metrics are dominated by the
 * largest rows, this one shows what happens to the small ones. */
DEMO_UNUSED static double demo_worst_row(const float *x, const float *y, size_t rows, size_t cols) {
  double worst = 0;
  size_t r;
  for (r = 0; r < rows; r++) {
    demo_error e = demo_compare(x + r * cols, y + r * cols, cols);
    if (e.rel_rms > worst) worst = e.rel_rms;
  }
  return worst;
}

#endif

static uint64_t demo_rng_state = 0x9E3779B97F4A7C15ull;
DEMO_UNUSED static double demo_uniform(void) {
  demo_rng_state ^= demo_rng_state >> 12;
  demo_rng_state ^= demo_rng_state << 25;
  demo_rng_state ^= demo_rng_state >> 27;
  return (double)((demo_rng_state * 2685821657736338717ull) >> 11) * (1.0 / 9007199254740992.0);
}

/* Roughly normal values (sum of 4 uniforms) with a sprinkling of 20x outliers,
 * the shape of activations that makes scaling matter. */
DEMO_UNUSED static void demo_fill(float *x, size_t n, double sigma) {
  size_t i;
  for (i = 0; i < n; i++) {
    double g = (demo_uniform() + demo_uniform() + demo_uniform() + demo_uniform() - 2.0) * 1.7320508;
    if (demo_uniform() < 0.001) g *= 20.0;
    x[i] = (float)(g * sigma);
  }
}

/* float32 -> bfloat16 bits, round to nearest even (finite inputs). */
DEMO_UNUSED static uint16_t demo_to_bf16(float f) {
  uint32_t b;
  memcpy(&b, &f, 4);
  b += 0x7FFFu + ((b >> 16) & 1u);
  return (uint16_t)(b >> 16);
}

DEMO_UNUSED static float demo_from_bf16(uint16_t h) {
  uint32_t b = (uint32_t)h << 16;
  float f;
  memcpy(&f, &b, 4);
  return f;
}

typedef struct {
  double max_abs;  /* max |x - y| */
  double rel_rms;  /* ||x - y|| / ||x|| */
  double sqnr_db;  /* 10 log10(||x||^2 / ||x - y||^2) */
} demo_error;

DEMO_UNUSED static demo_error demo_compare(const float *x, const float *y, size_t n) {
  demo_error e;
  double se = 0, sx = 0;
  size_t i;
  e.max_abs = 0;
  for (i = 0; i < n; i++) {
    double d = (double)x[i] - (double)y[i];
    if (fabs(d) > e.max_abs) e.max_abs = fabs(d);
    se += d * d;
    sx += (double)x[i] * (double)x[i];
  }
  e.rel_rms = sx > 0 ? sqrt(se / sx) : 0;
  e.sqnr_db = se > 0 ? 10.0 * log10(sx / se) : INFINITY;
  return e;
}

/* The largest per-row relative RMS error: global metrics are dominated by the
 * largest rows, this one shows what happens to the small ones. */
DEMO_UNUSED static double demo_worst_row(const float *x, const float *y, size_t rows, size_t cols) {
  double worst = 0;
  size_t r;
  for (r = 0; r < rows; r++) {
    demo_error e = demo_compare(x + r * cols, y + r * cols, cols);
    if (e.rel_rms > worst) worst = e.rel_rms;
  }
  return worst;
}

#endif
