/* A toy native plugin for the plugin-loading tests: it defines one CPU format,
 * "toy_u8" (per-tensor symmetric 8-bit integers stored with a +128 offset), with
 * its layout, amax, quantize, dequantize and derive functions.
 *
 * Compile-time switches make the broken variants the tests need:
 *   TOY_ABI_VERSION=n  report plugin ABI version n (a wrong version)
 *   TOY_NO_ENTRY       export no quant_plugin_get (not a plugin)
 *   TOY_FAIL           quant_plugin_get refuses with a message
 *
 * toy_u8, for an FP32 [m, k] input x:
 *   amax      = max |x| (NaN ignored), or the caller's amax
 *   scale     = amax > 0 ? 127 / amax : 1
 *   q         = clamp(round_half_even(x * scale), -127, 127) + 128
 *   scale_inv = 1 / scale
 * rowwise data is [m, k], columnwise data its transpose [k, m]; each direction
 * has scale_inv [1] and amax [1] (FP32). Columnwise data can be derived from
 * rowwise data. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "quant_plugin.h"

/* Built for plugin ABI 1 (no GEMM), which hosts of ABI 2 still load: the
 * tests check that. -DTOY_ABI_VERSION=2 builds it as an ABI 2 plugin. */
#ifndef TOY_ABI_VERSION
#define TOY_ABI_VERSION 1u
#endif

#ifndef TOY_FORMAT
#define TOY_FORMAT "toy_u8" /* another name lets two builds load side by side */
#endif

static int32_t fail(quant_plugin_error *err, int32_t status, const char *msg) {
  snprintf(err->message, sizeof err->message, "%s", msg);
  return status;
}

static int is_f32(DLDataType t) { return t.code == kDLFloat && t.bits == 32 && t.lanes == 1; }

static const DLDataType f32 = {kDLFloat, 32, 1};
static const DLDataType u8 = {kDLUInt, 8, 1};

static int32_t toy_check(const quant_plugin_check_args *a, quant_plugin_error *err) {
  if (a == NULL || a->params == NULL) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "args: NULL");
  if (a->params->element != 0 || a->params->block_dims != 0 || a->params->stochastic_rounding != 0)
    return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "config: toy_u8 takes no element, block_dims or stochastic_rounding");
  return QUANT_OK;
}

static int32_t toy_layout(quant_plugin_layout_args *a, quant_plugin_error *err) {
  if (a == NULL) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "args: NULL");
  if (a->direction != QUANT_DIRECTION_ROWWISE && a->direction != QUANT_DIRECTION_COLUMNWISE)
    return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "direction: not rowwise or columnwise");
  memset(a->buffers, 0, sizeof a->buffers);
  a->num_buffers = 3;
  a->buffers[0].kind = QUANT_BUFFER_DATA;
  a->buffers[0].dtype = u8;
  a->buffers[0].ndim = 2;
  a->buffers[0].shape[0] = a->direction == QUANT_DIRECTION_ROWWISE ? a->m : a->k;
  a->buffers[0].shape[1] = a->direction == QUANT_DIRECTION_ROWWISE ? a->k : a->m;
  a->buffers[1].kind = QUANT_BUFFER_SCALE_INV;
  a->buffers[1].dtype = f32;
  a->buffers[1].ndim = 1;
  a->buffers[1].shape[0] = 1;
  a->buffers[2].kind = QUANT_BUFFER_AMAX;
  a->buffers[2].dtype = f32;
  a->buffers[2].ndim = 1;
  a->buffers[2].shape[0] = 1;
  return QUANT_OK;
}

static float amax_of(const float *x, int64_t n) {
  float m = 0;
  int64_t i;
  for (i = 0; i < n; i++) {
    float v = fabsf(x[i]);
    if (v > m) m = v; /* NaN compares false */
  }
  return m;
}

static int32_t check_input(const quant_plugin_tensor *in, quant_plugin_error *err) {
  if (in->device_type != kDLCPU) return fail(err, QUANT_ERROR_DEVICE_UNAVAILABLE, "input: toy_u8 runs on the cpu only");
  if (!is_f32(in->dtype)) return fail(err, QUANT_ERROR_UNSUPPORTED, "input: toy_u8 takes float32 only");
  if (in->ndim != 2) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "input: not 2-D");
  return QUANT_OK;
}

static int32_t toy_amax(const quant_plugin_amax_args *a, quant_plugin_error *err) {
  int32_t s = check_input(&a->input, err);
  float m;
  if (s != QUANT_OK) return s;
  m = amax_of((const float *)a->input.data, a->input.shape[0] * a->input.shape[1]);
  if (a->want & QUANT_USAGE_ROWWISE) ((float *)a->out.data)[0] = m;
  if (a->want & QUANT_USAGE_COLUMNWISE) ((float *)a->out.data)[1] = m;
  return QUANT_OK;
}

static void *buffer(const quant_plugin_storage *st, int32_t kind) {
  uint32_t i;
  for (i = 0; i < st->num_buffers; i++)
    if (st->kinds[i] == kind) return st->buffers[i].data;
  return NULL;
}

static int32_t toy_quantize(const quant_plugin_quantize_args *a, quant_plugin_error *err) {
  int32_t s = check_input(&a->input, err);
  const float *x;
  int64_t m, k, i, j;
  float amax, scale;
  int d;
  if (s != QUANT_OK) return s;
  if (a->has_delayed_scale) return fail(err, QUANT_ERROR_UNSUPPORTED, "toy_u8 has no delayed scaling");
  x = (const float *)a->input.data;
  m = a->input.shape[0];
  k = a->input.shape[1];
  if (a->amax_in.data != NULL)
    amax = ((const float *)a->amax_in.data)[a->out[0].num_buffers ? 0 : 1];
  else
    amax = amax_of(x, m * k);
  scale = amax > 0 && isfinite(amax) ? 127.0f / amax : 1.0f;
  for (d = 0; d < 2; d++) {
    const quant_plugin_storage *st = &a->out[d];
    unsigned char *q;
    if (st->num_buffers == 0) continue;
    q = (unsigned char *)buffer(st, QUANT_BUFFER_DATA);
    if (q == NULL) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "out: no data buffer");
    *(float *)buffer(st, QUANT_BUFFER_SCALE_INV) = 1.0f / scale;
    *(float *)buffer(st, QUANT_BUFFER_AMAX) = amax;
    for (i = 0; i < m; i++)
      for (j = 0; j < k; j++) {
        float v = rintf(x[i * k + j] * scale);
        if (v > 127) v = 127;
        if (v < -127) v = -127;
        if (v != v) v = 0;
        q[d == 0 ? i * k + j : j * m + i] = (unsigned char)((int)v + 128);
      }
  }
  return QUANT_OK;
}

static int32_t toy_dequantize(const quant_plugin_dequantize_args *a, quant_plugin_error *err) {
  const unsigned char *q = (const unsigned char *)buffer(&a->storage, QUANT_BUFFER_DATA);
  float si = *(const float *)buffer(&a->storage, QUANT_BUFFER_SCALE_INV);
  float *out = (float *)a->out.data;
  int64_t i, j, m = a->m, k = a->k;
  if (!is_f32(a->out.dtype)) return fail(err, QUANT_ERROR_UNSUPPORTED, "out: toy_u8 dequantizes to float32 only");
  for (i = 0; i < m; i++)
    for (j = 0; j < k; j++) {
      int c = q[a->direction == QUANT_DIRECTION_ROWWISE ? i * k + j : j * m + i];
      out[i * k + j] = (float)(c - 128) * si;
    }
  return QUANT_OK;
}

static int32_t toy_derive(const quant_plugin_derive_args *a, quant_plugin_error *err) {
  const unsigned char *src = (const unsigned char *)buffer(&a->from, QUANT_BUFFER_DATA);
  unsigned char *dst = (unsigned char *)buffer(&a->to, QUANT_BUFFER_DATA);
  int64_t i, j;
  if (a->from_direction != QUANT_DIRECTION_ROWWISE || a->to_direction != QUANT_DIRECTION_COLUMNWISE)
    return fail(err, QUANT_ERROR_STATE, "toy_u8 derives columnwise from rowwise only");
  for (i = 0; i < a->m; i++)
    for (j = 0; j < a->k; j++) dst[j * a->m + i] = src[i * a->k + j];
  *(float *)buffer(&a->to, QUANT_BUFFER_SCALE_INV) = *(const float *)buffer(&a->from, QUANT_BUFFER_SCALE_INV);
  *(float *)buffer(&a->to, QUANT_BUFFER_AMAX) = *(const float *)buffer(&a->from, QUANT_BUFFER_AMAX);
  return QUANT_OK;
}

static const quant_plugin_format toy_formats[1] = {
    {TOY_FORMAT, toy_check, toy_layout, QUANT_PLUGIN_DERIVE_COLUMNWISE_FROM_ROWWISE, 0},
};

static const quant_plugin_kernels toy_kernels[1] = {
    {TOY_FORMAT, kDLCPU, 0, toy_amax, toy_quantize, toy_dequantize, toy_derive, NULL, NULL, NULL, NULL, NULL, {NULL}},
};

#ifndef TOY_NO_ENTRY
QUANT_PLUGIN_EXPORT int32_t quant_plugin_get(uint32_t host_abi_version, quant_plugin_table *table,
                                             quant_plugin_error *err);

QUANT_PLUGIN_EXPORT int32_t quant_plugin_get(uint32_t host_abi_version, quant_plugin_table *table,
                                             quant_plugin_error *err) {
  if (table == NULL || err == NULL) return QUANT_ERROR_INVALID_ARGUMENT;
  table->abi_version = TOY_ABI_VERSION;
  if (host_abi_version != TOY_ABI_VERSION)
    return fail(err, QUANT_ERROR_PLUGIN, "toy: built for another plugin ABI version");
#ifdef TOY_FAIL
  if (toy_formats[0].layout != NULL)
    return fail(err, QUANT_ERROR_PLUGIN, "toy: refusing to load (built with TOY_FAIL)");
#endif
  table->name = "toy";
  table->version = "1.0";
  table->num_formats = 1;
  table->formats = toy_formats;
  table->num_kernels = 1;
  table->kernels = toy_kernels;
  table->num_memory = 0;
  table->memory = NULL;
  return QUANT_OK;
}
#else
int toy_not_a_plugin(void);
int toy_not_a_plugin(void) { return (int)toy_formats[0].derivable + (toy_kernels[0].quantize != NULL); }
#endif
