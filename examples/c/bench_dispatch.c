/* Host time per quant_quantize_into call from C (issue #15: < 3 us), on a
 * 128x256 BF16 tensor, both directions, enqueue only: batches of 100 calls
 * with the GPU idle before each (a longer loop would fill the launch queue and
 * time the GPU), the fastest and the median of 50 batches.
 *
 *   bench_dispatch PLUGIN [LIBCUDART]
 *
 * PLUGIN is loaded with quant_plugin_load: the real libquant_cuda.so on a GPU
 * machine (then LIBCUDART, e.g. libcudart.so.13, provides cudaMalloc and a
 * stream), or native/fakecuda/testdata/fake_cuda.c built as a plugin, whose
 * "device" memory is host memory and whose kernels launch nothing: that
 * measures libquant's own share (the ABI, the host and the plugin dispatch).
 * Each single-call row is followed by the same call through a quantize plan
 * (quant_quantize_plan_run). Then the same for one quant_quantize_grouped call of 64 such tensors (the
 * fake plugin has no grouped entry: there the host goes one tensor at a
 * time). */
#define _POSIX_C_SOURCE 199309L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "quant.h"

typedef int (*malloc_fn)(void **, size_t);
typedef int (*stream_fn)(void **);
typedef int (*sync_fn)(void);

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

#define OK(call)                                                                              \
  do {                                                                                        \
    quant_status s_ = (call);                                                                 \
    if (s_ != QUANT_OK) {                                                                     \
      fprintf(stderr, "%s: %s: %s\n", #call, quant_status_string(s_), quant_last_error());   \
      return 1;                                                                               \
    }                                                                                         \
  } while (0)

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* A 128x256 BF16 "device" tensor at x. */
static void bf16_input(DLTensor *in, void *x, int64_t *shape) {
  memset(in, 0, sizeof *in);
  in->data = x;
  in->device.device_type = kDLCUDA;
  in->ndim = 2;
  in->dtype.code = kDLBfloat;
  in->dtype.bits = 16;
  in->dtype.lanes = 1;
  in->shape = shape;
}

/* One timed call and what it needs. */
typedef struct {
  quant_quantizer *q;
  const DLTensor *in;
  const quant_quantize_options *opts;
  quant_qtensor *t;
  const quant_quantize_grouped_args *ga;
  quant_quantize_plan *plan;
  void *stream;
} call_ctx;

static quant_status call_into(const call_ctx *c) { return quant_quantize_into(c->q, c->in, c->opts, c->t); }
static quant_status call_grouped(const call_ctx *c) { return quant_quantize_grouped(c->q, c->ga); }
static quant_status call_plan(const call_ctx *c) { return quant_quantize_plan_run(c->plan, c->in->data, c->stream); }

/* warm calls, then 50 batches of n calls with the GPU idle before each: the
 * fastest and the median batch's time per call, us. */
static int time_calls(const char *what, quant_status (*call)(const call_ctx *), const call_ctx *c, int warm, int n, sync_fn sync,
                      double *fastest, double *median) {
  enum { NB = 50 };
  double t0, per[NB];
  int i, b;
  for (i = 0; i < warm; i++) {
    quant_status s = call(c);
    if (s != QUANT_OK) {
      fprintf(stderr, "%s: %s: %s\n", what, quant_status_string(s), quant_last_error());
      return 1;
    }
  }
  for (b = 0; b < NB; b++) {
    if (sync) sync();
    t0 = now_us();
    for (i = 0; i < n; i++) {
      quant_status s = call(c);
      if (s != QUANT_OK) {
        fprintf(stderr, "%s: %s: %s\n", what, quant_status_string(s), quant_last_error());
        return 1;
      }
    }
    per[b] = (now_us() - t0) / n;
  }
  if (sync) sync();
  qsort(per, NB, sizeof per[0], cmp_double);
  *fastest = per[0];
  *median = per[NB / 2];
  return 0;
}

static int bench(const char *name, quant_quantizer_config cfg, void *x, void *stream, sync_fn sync) {
  int64_t shape[2] = {128, 256};
  DLTensor in;
  quant_quantize_options opts;
  call_ctx c;
  quant_status st;
  double fastest, median;
  bf16_input(&in, x, shape);
  memset(&opts, 0, sizeof opts);
  opts.struct_size = sizeof opts;
  opts.stream = stream;
  memset(&c, 0, sizeof c);
  c.in = &in;
  c.opts = &opts;
  OK(quant_quantizer_create(&cfg, &c.q));
  st = quant_quantize(c.q, &in, &opts, &c.t);
  if (st == QUANT_ERROR_DEVICE_UNAVAILABLE) { /* the fake plugin has fp8 and mxfp8 only */
    printf("%-16s not served by this plugin\n", name);
    quant_quantizer_free(c.q);
    return 0;
  }
  OK(st);
  if (time_calls("quant_quantize_into", call_into, &c, 200, 100, sync, &fastest, &median)) return 1;
  printf("%-16s fastest %.2f us  median %.2f us per quant_quantize_into (128x256 bf16, both directions, enqueue only)\n", name, fastest,
         median);
  /* The same call through a quantize plan: the input's address and the stream. */
  c.stream = stream;
  OK(quant_quantize_plan_create(c.q, &in, &opts, c.t, &c.plan));
  if (time_calls("quant_quantize_plan_run", call_plan, &c, 200, 100, sync, &fastest, &median)) return 1;
  printf("%-16s fastest %.2f us  median %.2f us per quant_quantize_plan_run (the same call, planned)\n", name, fastest, median);
  OK(quant_quantize_plan_free(c.plan));
  OK(quant_qtensor_free(c.t));
  OK(quant_quantizer_free(c.q));
  return 0;
}

/* Host time per quant_quantize_grouped call of G tensors of 128x256 (the
 * MoE batch's call, issue #15), enqueue only as above: batches of 10 calls. */
#define G 64
static int bench_grouped(const char *name, quant_quantizer_config cfg, void *x, void *stream, sync_fn sync) {
  quant_qtensor *t[G];
  int64_t shape[2] = {128, 256};
  DLTensor in[G];
  quant_quantize_options opts;
  quant_quantize_grouped_args ga;
  call_ctx c;
  quant_status st;
  double fastest, median;
  int i;
  for (i = 0; i < G; i++) bf16_input(&in[i], x, shape);
  memset(&opts, 0, sizeof opts);
  opts.struct_size = sizeof opts;
  opts.stream = stream;
  memset(&c, 0, sizeof c);
  OK(quant_quantizer_create(&cfg, &c.q));
  for (i = 0; i < G; i++) {
    st = quant_quantize(c.q, &in[i], &opts, &t[i]);
    if (st == QUANT_ERROR_DEVICE_UNAVAILABLE) {
      printf("%-16s not served by this plugin\n", name);
      while (i-- > 0) quant_qtensor_free(t[i]);
      quant_quantizer_free(c.q);
      return 0;
    }
    OK(st);
  }
  memset(&ga, 0, sizeof ga);
  ga.struct_size = sizeof ga;
  ga.count = G;
  ga.inputs = in;
  ga.outputs = t;
  ga.stream = stream;
  c.ga = &ga;
  if (time_calls("quant_quantize_grouped", call_grouped, &c, 20, 10, sync, &fastest, &median)) return 1;
  printf("%-16s fastest %.1f us  median %.1f us per quant_quantize_grouped of %d (128x256 bf16, both directions, enqueue only)\n", name,
         fastest, median, G);
  for (i = 0; i < G; i++) OK(quant_qtensor_free(t[i]));
  OK(quant_quantizer_free(c.q));
  return 0;
}

/* The rows, in order: single calls, then grouped ones. */
static const struct {
  const char *name, *format;
  quant_scaling scaling;
  int grouped;
} rows[] = {
    {"mxfp8", "mxfp8", QUANT_SCALING_CURRENT, 0},          {"mxfp4", "mxfp4", QUANT_SCALING_CURRENT, 0},
    {"nvfp4 1x16", "nvfp4", QUANT_SCALING_CURRENT, 0},     {"fp8_block 1x128", "fp8_block", QUANT_SCALING_CURRENT, 0},
    {"fp8 current", "fp8", QUANT_SCALING_CURRENT, 0},      {"fp8 delayed", "fp8", QUANT_SCALING_DELAYED, 0},
    {"mxfp8", "mxfp8", QUANT_SCALING_CURRENT, 1},          {"mxfp4", "mxfp4", QUANT_SCALING_CURRENT, 1},
    {"nvfp4 1x16", "nvfp4", QUANT_SCALING_CURRENT, 1},
};

int main(int argc, char **argv) {
  void *x = NULL, *stream = NULL;
  sync_fn sync = NULL;
  quant_quantizer_config cfg;
  int i, rc = 0;
  if (argc < 2) {
    fprintf(stderr, "usage: %s PLUGIN [LIBCUDART]\n", argv[0]);
    return 2;
  }
  OK(quant_plugin_load(argv[1], NULL));
  if (argc > 2) {
    void *rt = dlopen(argv[2], RTLD_NOW);
    malloc_fn cm;
    stream_fn cs;
    if (rt == NULL) {
      fprintf(stderr, "dlopen %s: %s\n", argv[2], dlerror());
      return 1;
    }
    *(void **)&cm = dlsym(rt, "cudaMalloc");
    *(void **)&cs = dlsym(rt, "cudaStreamCreate");
    *(void **)&sync = dlsym(rt, "cudaDeviceSynchronize");
    if (cm == NULL || cs == NULL || sync == NULL || cm(&x, 128 * 256 * 2) != 0 || cs(&stream) != 0) {
      fprintf(stderr, "cudaMalloc / cudaStreamCreate failed\n");
      return 1;
    }
  } else {
    x = calloc(128 * 256, 2);
  }
  for (i = 0; i < (int)(sizeof rows / sizeof rows[0]); i++) {
    memset(&cfg, 0, sizeof cfg);
    cfg.struct_size = sizeof cfg;
    cfg.format = rows[i].format;
    cfg.scaling = rows[i].scaling;
    rc |= rows[i].grouped ? bench_grouped(rows[i].name, cfg, x, stream, sync) : bench(rows[i].name, cfg, x, stream, sync);
  }
  return rc;
}
