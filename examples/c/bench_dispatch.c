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
 * Then the same for one quant_quantize_grouped call of 64 such tensors (the
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

static int bench(const char *name, quant_quantizer_config cfg, void *x, void *stream, sync_fn sync) {
  quant_quantizer *q = NULL;
  quant_qtensor *t = NULL;
  int64_t shape[2] = {128, 256};
  DLTensor in;
  quant_quantize_options opts;
  quant_status st;
  int i, b, n = 100, nb = 50;
  double t0, t1, per[50];
  memset(&in, 0, sizeof in);
  in.data = x;
  in.device.device_type = kDLCUDA;
  in.ndim = 2;
  in.dtype.code = kDLBfloat;
  in.dtype.bits = 16;
  in.dtype.lanes = 1;
  in.shape = shape;
  memset(&opts, 0, sizeof opts);
  opts.struct_size = sizeof opts;
  opts.stream = stream;
  OK(quant_quantizer_create(&cfg, &q));
  st = quant_quantize(q, &in, &opts, &t);
  if (st == QUANT_ERROR_DEVICE_UNAVAILABLE) { /* the fake plugin has fp8 and mxfp8 only */
    printf("%-16s not served by this plugin\n", name);
    quant_quantizer_free(q);
    return 0;
  }
  OK(st);
  for (i = 0; i < 200; i++) OK(quant_quantize_into(q, &in, &opts, t));
  for (b = 0; b < nb; b++) {
    if (sync) sync();
    t0 = now_us();
    for (i = 0; i < n; i++) OK(quant_quantize_into(q, &in, &opts, t));
    t1 = now_us();
    per[b] = (t1 - t0) / n;
  }
  if (sync) sync();
  qsort(per, nb, sizeof per[0], cmp_double);
  printf("%-16s fastest %.2f us  median %.2f us per quant_quantize_into (128x256 bf16, both directions, enqueue only)\n", name, per[0],
         per[nb / 2]);
  OK(quant_qtensor_free(t));
  OK(quant_quantizer_free(q));
  return 0;
}

/* Host time per quant_quantize_grouped call of G tensors of 128x256 (the
 * MoE batch's call, issue #15), enqueue only as above: batches of 10 calls. */
#define G 64
static int bench_grouped(const char *name, quant_quantizer_config cfg, void *x, void *stream, sync_fn sync) {
  quant_quantizer *q = NULL;
  quant_qtensor *t[G];
  int64_t shape[2] = {128, 256};
  DLTensor in[G];
  quant_quantize_options opts;
  quant_quantize_grouped_args ga;
  quant_status st;
  int i, b, n = 10, nb = 50;
  double t0, t1, per[50];
  memset(in, 0, sizeof in);
  for (i = 0; i < G; i++) {
    in[i].data = x;
    in[i].device.device_type = kDLCUDA;
    in[i].ndim = 2;
    in[i].dtype.code = kDLBfloat;
    in[i].dtype.bits = 16;
    in[i].dtype.lanes = 1;
    in[i].shape = shape;
  }
  memset(&opts, 0, sizeof opts);
  opts.struct_size = sizeof opts;
  opts.stream = stream;
  OK(quant_quantizer_create(&cfg, &q));
  for (i = 0; i < G; i++) {
    st = quant_quantize(q, &in[i], &opts, &t[i]);
    if (st == QUANT_ERROR_DEVICE_UNAVAILABLE) {
      printf("%-16s not served by this plugin\n", name);
      while (i-- > 0) quant_qtensor_free(t[i]);
      quant_quantizer_free(q);
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
  for (i = 0; i < 20; i++) OK(quant_quantize_grouped(q, &ga));
  for (b = 0; b < nb; b++) {
    if (sync) sync();
    t0 = now_us();
    for (i = 0; i < n; i++) OK(quant_quantize_grouped(q, &ga));
    t1 = now_us();
    per[b] = (t1 - t0) / n;
  }
  if (sync) sync();
  qsort(per, nb, sizeof per[0], cmp_double);
  printf("%-16s fastest %.1f us  median %.1f us per quant_quantize_grouped of %d (128x256 bf16, both directions, enqueue only)\n", name,
         per[0], per[nb / 2], G);
  for (i = 0; i < G; i++) OK(quant_qtensor_free(t[i]));
  OK(quant_quantizer_free(q));
  return 0;
}

int main(int argc, char **argv) {
  void *x = NULL, *stream = NULL;
  sync_fn sync = NULL;
  quant_quantizer_config cfg;
  int rc = 0;
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
  memset(&cfg, 0, sizeof cfg);
  cfg.struct_size = sizeof cfg;
  cfg.format = "mxfp8";
  rc |= bench("mxfp8", cfg, x, stream, sync);
  cfg.format = "mxfp4";
  rc |= bench("mxfp4", cfg, x, stream, sync);
  cfg.format = "nvfp4";
  rc |= bench("nvfp4 1x16", cfg, x, stream, sync);
  cfg.format = "fp8_block";
  rc |= bench("fp8_block 1x128", cfg, x, stream, sync);
  cfg.format = "fp8";
  rc |= bench("fp8 current", cfg, x, stream, sync);
  cfg.scaling = QUANT_SCALING_DELAYED;
  rc |= bench("fp8 delayed", cfg, x, stream, sync);
  cfg.scaling = 0;
  cfg.format = "mxfp8";
  rc |= bench_grouped("mxfp8", cfg, x, stream, sync);
  cfg.format = "mxfp4";
  rc |= bench_grouped("mxfp4", cfg, x, stream, sync);
  cfg.format = "nvfp4";
  rc |= bench_grouped("nvfp4 1x16", cfg, x, stream, sync);
  return rc;
}
