/* A stand-in for libquant_cuda.so on machines without a GPU, for measuring
 * the host's dispatch cost (BenchmarkQuantizeDispatch, examples/c/bench_dispatch.c):
 * it serves the built-in formats "fp8" and "mxfp8" on kDLCUDA with a quantize
 * that checks its arguments the way the CUDA plugin's entry does and launches
 * nothing, a GEMM that does the same (BenchmarkGemmDispatch), and "CUDA"
 * memory that is host memory. Never a numeric reference. */
#include <float.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "quant_plugin.h"

static int32_t fake_quantize(const quant_plugin_quantize_args *a, quant_plugin_error *err) {
  if (a == NULL || a->params == NULL || a->input.ndim != 2 || a->input.device_type != kDLCUDA) {
    if (err != NULL) strcpy(err->message, "fake_cuda: bad arguments");
    return QUANT_ERROR_INVALID_ARGUMENT;
  }
  if (a->has_delayed_scale) {
    int d;
    uint32_t i;
    for (d = 0; d < 2; d++)
      for (i = 0; i < a->out[d].num_buffers; i++)
        if (a->out[d].kinds[i] == QUANT_BUFFER_AMAX) *(float *)a->out[d].buffers[i].data = 1.0f;
    if (a->struct_size >= sizeof *a && a->delayed_amax_dev != NULL) {
      /* The amax of a BF16 input, max-reduced into h[0] (what the CUDA kernel
       * does on the device), so that a test can follow the state's sequence. */
      const uint16_t *x = (const uint16_t *)a->input.data;
      int64_t n = a->input.shape[0] * a->input.shape[1], j;
      float m = *a->delayed_amax_dev;
      if (a->input.dtype.code == kDLBfloat && a->input.dtype.bits == 16)
        for (j = 0; j < n; j++) {
          uint32_t b = (uint32_t)(x[j] & 0x7FFF) << 16;
          float v;
          memcpy(&v, &b, 4);
          if (v > m) m = v; /* NaN compares false */
        }
      *a->delayed_amax_dev = m;
    }
  }
  return QUANT_OK;
}

/* The spec §2.4 update on the "device" state (host memory here). */
static int32_t fake_delayed_update(const quant_plugin_delayed_update_args *a, quant_plugin_error *err) {
  float *h = (float *)a->history.data, *s = (float *)a->scale.data, a0 = h[0], amax = 0;
  int64_t n = a->history.shape[0], i;
  (void)err;
  if (a->has_reduced && a->reduced_amax != 0) a0 = a->reduced_amax;
  if (a0 != 0) {
    for (i = 0; i < n; i++) {
      float v = i < n - 1 ? h[i + 1] : a0;
      h[i] = i > 0 ? v : 0;
      if (v > amax) amax = v;
    }
    if (a->params->amax_compute_algo == QUANT_AMAX_MOST_RECENT) amax = a0;
  }
  if (amax > 0 && amax <= FLT_MAX) *s = a->scaled_max / amax;
  if (*s > FLT_MAX) *s = FLT_MAX;
  return QUANT_OK;
}

/* The group as its items one after the other; fake_grouped_updates counts
 * the calls (dispatch_test.go reads it). */
static int32_t grouped_updates;
QUANT_PLUGIN_EXPORT int32_t fake_grouped_updates(void);
QUANT_PLUGIN_EXPORT int32_t fake_grouped_updates(void) { return grouped_updates; }
static int32_t fake_delayed_update_grouped(const quant_plugin_delayed_update_grouped_args *a, quant_plugin_error *err) {
  uint32_t i;
  grouped_updates++;
  for (i = 0; i < a->count; i++) {
    int32_t st = fake_delayed_update(&a->items[i], err);
    if (st != QUANT_OK) return st;
  }
  return QUANT_OK;
}

static int32_t fake_count(int32_t *count, quant_plugin_error *err) {
  (void)err;
  *count = 1;
  return QUANT_OK;
}
static int32_t fake_alloc(quant_plugin_memory_args *a, quant_plugin_error *err) {
  (void)err;
  a->ptr = a->nbytes ? calloc(1, a->nbytes) : NULL;
  return a->nbytes && a->ptr == NULL ? QUANT_ERROR_OUT_OF_MEMORY : QUANT_OK;
}
static int32_t fake_free(quant_plugin_memory_args *a, quant_plugin_error *err) {
  (void)err;
  free(a->ptr);
  return QUANT_OK;
}
static int32_t fake_copy(quant_plugin_memory_args *a, quant_plugin_error *err) {
  (void)err;
  memmove(a->ptr, a->src, a->nbytes);
  return QUANT_OK;
}
static int32_t fake_memset(quant_plugin_memory_args *a, quant_plugin_error *err) {
  (void)err;
  memset(a->ptr, a->value, a->nbytes);
  return QUANT_OK;
}
static int32_t fake_sync(quant_plugin_memory_args *a, quant_plugin_error *err) {
  (void)a;
  (void)err;
  return QUANT_OK;
}

/* The GEMM entry: checks the arguments it reads and launches nothing. */
static int32_t fake_gemm(const quant_plugin_gemm_args *a, quant_plugin_error *err) {
  if (a == NULL || a->m < 0 || a->n < 0 || a->k < 0 || a->d.data == NULL || a->d.device_type != kDLCUDA ||
      a->a.storage.num_buffers == 0 || a->b.storage.num_buffers == 0) {
    if (err != NULL) strcpy(err->message, "fake_cuda: bad gemm arguments");
    return QUANT_ERROR_INVALID_ARGUMENT;
  }
  return QUANT_OK;
}
static int32_t fake_gemm_support(quant_plugin_gemm_support_args *a, quant_plugin_error *err) {
  (void)err;
  a->level_out = QUANT_GEMM_NATIVE;
  strcpy(a->reason_out, "fake_cuda: launches nothing");
  return QUANT_OK;
}
static const quant_plugin_gemm fake_gemm_entry[1] = {{kDLCUDA, 0, fake_gemm, fake_gemm_support, {NULL, NULL, NULL, NULL}}};

static const quant_plugin_kernels fake_kernels[2] = {
    {"fp8", kDLCUDA, 0, NULL, fake_quantize, NULL, NULL, NULL, NULL, fake_delayed_update, NULL, fake_delayed_update_grouped, {NULL}},
    {"mxfp8", kDLCUDA, 0, NULL, fake_quantize, NULL, NULL, NULL, NULL, NULL, NULL, NULL, {NULL}},
};
static const quant_plugin_memory fake_memory[1] = {
    {kDLCUDA, 0, fake_count, fake_alloc, fake_free, fake_copy, fake_memset, fake_sync, {NULL, NULL, NULL, NULL}},
};

QUANT_PLUGIN_EXPORT int32_t quant_plugin_get(uint32_t host_abi_version, quant_plugin_table *table, quant_plugin_error *err);
QUANT_PLUGIN_EXPORT int32_t quant_plugin_get(uint32_t host_abi_version, quant_plugin_table *table, quant_plugin_error *err) {
  if (table == NULL || err == NULL) return QUANT_ERROR_INVALID_ARGUMENT;
  table->abi_version = QUANT_PLUGIN_ABI_VERSION;
  if (host_abi_version != QUANT_PLUGIN_ABI_VERSION) return QUANT_ERROR_PLUGIN;
  table->name = "fake_cuda";
  table->version = "0";
  table->num_kernels = 2;
  table->kernels = fake_kernels;
  table->num_memory = 1;
  table->memory = fake_memory;
  if (table->struct_size >= offsetof(quant_plugin_table, gemm) + sizeof table->gemm) {
    table->num_gemm = 1;
    table->gemm = fake_gemm_entry;
  }
  return QUANT_OK;
}
