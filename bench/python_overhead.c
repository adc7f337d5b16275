/* The C-level cost of the calls bench/python_overhead.py times from Python:
 * quant_quantize (+ quant_qtensor_free) of a 128x256 FP32 tensor, a
 * quant_quantize_into of a 1x32 one (the per-call cost of a re-quantize,
 * the kernel's work negligible) and a small quant_gemm, with the same inputs.
 * Prints "name ns_per_call" lines.
 * Built and run by bench/python_overhead.py. */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "quant.h"

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

#define CHECK(x)                                                          \
  do {                                                                    \
    if ((x) != QUANT_OK) {                                                \
      fprintf(stderr, "%s failed: %s\n", #x, quant_last_error());         \
      exit(1);                                                            \
    }                                                                     \
  } while (0)

static DLTensor f32(float *p, int ndim, int64_t *shape) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = p;
  t.device.device_type = kDLCPU;
  t.ndim = ndim;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  return t;
}

/* The fastest of `reps` runs of `iters` calls each, in ns per call. */
static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  const char *fmt = argc > 1 ? argv[1] : "fp8";
  int iters = argc > 2 ? atoi(argv[2]) : 2000, reps = 15, r, i;
  int64_t xs[2] = {128, 256}, ss[2] = {1, 32}, as[2] = {32, 64}, bs[2] = {32, 64}, ds[2] = {32, 32};
  float *x = malloc(sizeof(float) * 128 * 256), a[32 * 64], b[32 * 64], d[32 * 32];
  double t[15];
  quant_quantizer_config c;
  quant_quantizer *q;
  quant_qtensor *qt, *qa, *qb;
  DLTensor xt, at, bt, dt;
  quant_gemm_args g;

  for (i = 0; i < 128 * 256; i++) x[i] = (float)((i * 37 % 101) - 50) * 0.173f;
  for (i = 0; i < 32 * 64; i++) a[i] = b[i] = (float)((i * 13 % 29) - 14) * 0.11f;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  c.format = fmt;
  CHECK(quant_quantizer_create(&c, &q));
  xt = f32(x, 2, xs);
  for (r = 0; r < reps; r++) {
    double t0 = now_ns();
    for (i = 0; i < iters; i++) {
      CHECK(quant_quantize(q, &xt, NULL, &qt));
      CHECK(quant_qtensor_free(qt));
    }
    t[r] = (now_ns() - t0) / iters;
  }
  qsort(t, reps, sizeof t[0], cmp);
  printf("quantize %.1f\n", t[0]);

  xt = f32(x, 2, ss);
  CHECK(quant_quantize(q, &xt, NULL, &qt));
  for (r = 0; r < reps; r++) {
    double t0 = now_ns();
    for (i = 0; i < iters; i++) CHECK(quant_quantize_into(q, &xt, NULL, qt));
    t[r] = (now_ns() - t0) / iters;
  }
  qsort(t, reps, sizeof t[0], cmp);
  printf("quantize_into %.1f\n", t[0]);
  {
    quant_quantize_plan *plan = NULL;
    CHECK(quant_quantize_plan_create(q, &xt, NULL, qt, &plan));
    for (r = 0; r < reps; r++) {
      double t0 = now_ns();
      for (i = 0; i < iters; i++) CHECK(quant_quantize_plan_run(plan, xt.data, NULL));
      t[r] = (now_ns() - t0) / iters;
    }
    qsort(t, reps, sizeof t[0], cmp);
    printf("plan_run %.1f\n", t[0]);
    CHECK(quant_quantize_plan_free(plan));
  }
  CHECK(quant_qtensor_free(qt));

  at = f32(a, 2, as);
  bt = f32(b, 2, bs);
  dt = f32(d, 2, ds);
  CHECK(quant_quantize(q, &at, NULL, &qa));
  CHECK(quant_quantize(q, &bt, NULL, &qb));
  memset(&g, 0, sizeof g);
  g.struct_size = sizeof g;
  g.a.qtensor = qa;
  g.b.qtensor = qb;
  g.b.trans = 1;
  g.d = &dt;
  for (r = 0; r < reps; r++) {
    double t0 = now_ns();
    for (i = 0; i < iters; i++) CHECK(quant_gemm(&g));
    t[r] = (now_ns() - t0) / iters;
  }
  qsort(t, reps, sizeof t[0], cmp);
  printf("gemm %.1f\n", t[0]);
  for (r = 0; r < reps; r++) {
    double t0 = now_ns();
    for (i = 0; i < iters * 10; i++) (void)quant_abi_version();
    t[r] = (now_ns() - t0) / (iters * 10);
  }
  qsort(t, reps, sizeof t[0], cmp);
  printf("empty %.1f\n", t[0]);
  quant_qtensor_free(qa);
  quant_qtensor_free(qb);
  quant_quantizer_free(q);
  free(x);
  return 0;
}
