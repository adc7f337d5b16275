/* C ABI tests of the core entry points: every function with valid input and
 * with each kind of bad input (NULL, wrong rank, dtype, device, strides,
 * overflowing sizes, freed/foreign/wrong-type handles, bad struct sizes). Every
 * failure must return a status and a message naming the argument. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"

#define M 48
#define K 40

static float x[M * K];
static int64_t shape2[2] = {M, K};

static DLTensor input_f32(void) { return check_tensor(x, kDLFloat, 32, 2, shape2); }

static void test_version_and_strings(void) {
  CHECK(quant_abi_version() == QUANT_ABI_VERSION);
  CHECK(strcmp(quant_version(), "0.4.0") == 0);
  CHECK(strcmp(quant_status_string(QUANT_OK), "QUANT_OK") == 0);
  CHECK(strcmp(quant_status_string(QUANT_ERROR_POISONED), "QUANT_ERROR_POISONED") == 0);
  CHECK(strcmp(quant_status_string((quant_status)999), "QUANT_ERROR_UNKNOWN_STATUS") == 0);
  CHECK(quant_last_error() != NULL);
}

static void test_quantizer_create(void) {
  quant_quantizer *q = NULL;
  quant_quantizer_config c = check_config("fp8");
  uint32_t usage = 0;
  size_t small;

  EXPECT_ERR(quant_quantizer_create(NULL, &q), QUANT_ERROR_INVALID_ARGUMENT, "config: is NULL");
  EXPECT_ERR(quant_quantizer_create(&c, NULL), QUANT_ERROR_INVALID_ARGUMENT, "out: is NULL");
  c.format = NULL;
  EXPECT_ERR(quant_quantizer_create(&c, &q), QUANT_ERROR_INVALID_ARGUMENT, "config.format");
  c.format = "fp9";
  EXPECT_ERR(quant_quantizer_create(&c, &q), QUANT_ERROR_UNSUPPORTED, "\"fp9\" is not registered");
  c = check_config("fp8");
  c.struct_size = 4;
  EXPECT_ERR(quant_quantizer_create(&c, &q), QUANT_ERROR_INVALID_ARGUMENT, "struct_size 4");
  c = check_config("fp8");
  c.element = QUANT_ELEMENT_E2M1;
  EXPECT_ERR(quant_quantizer_create(&c, &q), QUANT_ERROR_INVALID_ARGUMENT, "config.element");
  c = check_config("fp8");
  c.scaling = 3;
  EXPECT_ERR(quant_quantizer_create(&c, &q), QUANT_ERROR_INVALID_ARGUMENT, "config.scaling");
  c = check_config("fp8");
  c.rht = QUANT_RHT_DEFAULT;
  EXPECT_ERR(quant_quantizer_create(&c, &q), QUANT_ERROR_INVALID_ARGUMENT, "config.rht");
  c = check_config("fp8");
  c.usage = 4;
  EXPECT_ERR(quant_quantizer_create(&c, &q), QUANT_ERROR_INVALID_ARGUMENT, "usage");
  c = check_config("fp8");
  c.dtype.code = 99;
  c.dtype.bits = 8;
  c.dtype.lanes = 1;
  EXPECT_ERR(quant_quantizer_create(&c, &q), QUANT_ERROR_UNSUPPORTED, "config.dtype");
  CHECK(q == NULL);

  /* An older caller's shorter struct (only struct_size and format) works. */
  c = check_config("fp8");
  small = offsetof(quant_quantizer_config, format) + sizeof(const char *);
  c.struct_size = small;
  c.element = QUANT_ELEMENT_E2M1; /* past struct_size: must be ignored */
  EXPECT_OK(quant_quantizer_create(&c, &q));
  EXPECT_OK(quant_quantizer_free(q));

  /* A newer caller's longer struct is accepted when its unknown tail is zero. */
  {
    unsigned char big[sizeof(quant_quantizer_config) + 16];
    quant_quantizer_config *bc = (quant_quantizer_config *)(void *)big;
    memset(big, 0, sizeof big);
    *bc = check_config("fp8");
    bc->struct_size = sizeof big;
    EXPECT_OK(quant_quantizer_create(bc, &q));
    EXPECT_OK(quant_quantizer_free(q));
    big[sizeof(quant_quantizer_config) + 3] = 1;
    EXPECT_ERR(quant_quantizer_create(bc, &q), QUANT_ERROR_UNSUPPORTED, "newer field");
  }

  c = check_config("fp8");
  EXPECT_OK(quant_quantizer_create(&c, &q));
  EXPECT_OK(quant_quantizer_get_usage(q, &usage));
  CHECK(usage == (QUANT_USAGE_ROWWISE | QUANT_USAGE_COLUMNWISE));
  EXPECT_OK(quant_quantizer_set_usage(q, QUANT_USAGE_COLUMNWISE));
  EXPECT_OK(quant_quantizer_get_usage(q, &usage));
  CHECK(usage == QUANT_USAGE_COLUMNWISE);
  EXPECT_ERR(quant_quantizer_set_usage(q, 0), QUANT_ERROR_INVALID_ARGUMENT, "usage");
  EXPECT_ERR(quant_quantizer_set_usage(q, 8), QUANT_ERROR_INVALID_ARGUMENT, "usage");
  EXPECT_ERR(quant_quantizer_set_usage(NULL, 1), QUANT_ERROR_INVALID_ARGUMENT, "quantizer: is NULL");
  EXPECT_ERR(quant_quantizer_get_usage(q, NULL), QUANT_ERROR_INVALID_ARGUMENT, "usage: is NULL");
  EXPECT_ERR(quant_quantizer_get_usage(NULL, &usage), QUANT_ERROR_INVALID_ARGUMENT, "quantizer: is NULL");
  EXPECT_OK(quant_quantizer_free(q));
  /* Use after free, double free, a foreign pointer: errors, not crashes. */
  EXPECT_ERR(quant_quantizer_set_usage(q, 1), QUANT_ERROR_INVALID_HANDLE, "not a live quantizer");
  EXPECT_ERR(quant_quantizer_free(q), QUANT_ERROR_INVALID_HANDLE, "not a live quantizer");
  EXPECT_ERR(quant_quantizer_free((quant_quantizer *)(void *)&usage), QUANT_ERROR_INVALID_HANDLE, "quantizer");
  EXPECT_OK(quant_quantizer_free(NULL));
  /* A new object may take the freed one's slot: the old handle stays dead. */
  {
    quant_quantizer *q2 = NULL;
    EXPECT_OK(quant_quantizer_create(&c, &q2));
    CHECK(q2 != q);
    EXPECT_ERR(quant_quantizer_set_usage(q, 1), QUANT_ERROR_INVALID_HANDLE, "not a live quantizer");
    EXPECT_ERR(quant_quantizer_free(q), QUANT_ERROR_INVALID_HANDLE, "not a live quantizer");
    EXPECT_OK(quant_quantizer_set_usage(q2, QUANT_USAGE_ROWWISE));
    EXPECT_OK(quant_quantizer_free(q2));
  }
}

static void test_layout(void) {
  quant_quantizer *q = NULL;
  quant_quantizer_config c = check_config("fp8");
  quant_buffer_desc d[8];
  size_t n = 0;
  int64_t big[2] = {INT64_MAX / 2, 8};
  int64_t neg[2] = {-1, 8};

  c.element = QUANT_ELEMENT_E5M2;
  EXPECT_OK(quant_quantizer_create(&c, &q));
  EXPECT_OK(quant_quantizer_layout(q, shape2, 2, NULL, 0, &n));
  CHECK(n == 6);
  EXPECT_ERR(quant_quantizer_layout(q, shape2, 2, d, 2, &n), QUANT_ERROR_BUFFER_TOO_SMALL, "capacity");
  CHECK(n == 6);
  EXPECT_OK(quant_quantizer_layout(q, shape2, 2, d, 8, &n));
  CHECK(d[0].direction == QUANT_DIRECTION_ROWWISE && d[0].kind == QUANT_BUFFER_DATA);
  CHECK(d[0].dtype.code == kDLFloat8_e5m2 && d[0].dtype.bits == 8 && d[0].ndim == 2);
  CHECK(d[0].shape[0] == M && d[0].shape[1] == K && d[0].nbytes == M * K);
  CHECK(d[1].kind == QUANT_BUFFER_SCALE_INV && d[1].dtype.code == kDLFloat && d[1].nbytes == 4);
  CHECK(d[2].kind == QUANT_BUFFER_AMAX);
  CHECK(d[3].direction == QUANT_DIRECTION_COLUMNWISE && d[3].shape[0] == K && d[3].shape[1] == M);
  EXPECT_ERR(quant_quantizer_layout(q, NULL, 2, d, 8, &n), QUANT_ERROR_INVALID_ARGUMENT, "shape: is NULL");
  EXPECT_ERR(quant_quantizer_layout(q, shape2, 0, d, 8, &n), QUANT_ERROR_INVALID_ARGUMENT, "ndim");
  EXPECT_ERR(quant_quantizer_layout(q, shape2, 9, d, 8, &n), QUANT_ERROR_INVALID_ARGUMENT, "ndim");
  EXPECT_ERR(quant_quantizer_layout(q, shape2, 2, d, 8, NULL), QUANT_ERROR_INVALID_ARGUMENT, "count: is NULL");
  EXPECT_ERR(quant_quantizer_layout(q, neg, 2, d, 8, &n), QUANT_ERROR_INVALID_ARGUMENT, "negative");
  EXPECT_ERR(quant_quantizer_layout(q, big, 2, d, 8, &n), QUANT_ERROR_INVALID_ARGUMENT, "overflows");
  EXPECT_ERR(quant_quantizer_layout(NULL, shape2, 2, d, 8, &n), QUANT_ERROR_INVALID_ARGUMENT, "quantizer");
  /* The layout for another usage, the quantizer's left alone. */
  EXPECT_OK(quant_quantizer_layout_usage(q, QUANT_USAGE_COLUMNWISE, shape2, 2, d, 8, &n));
  CHECK(n == 3 && d[0].direction == QUANT_DIRECTION_COLUMNWISE && d[0].shape[0] == K && d[0].shape[1] == M);
  EXPECT_OK(quant_quantizer_layout_usage(q, 0, shape2, 2, NULL, 0, &n));
  CHECK(n == 6);
  {
    uint32_t usage = 0;
    EXPECT_OK(quant_quantizer_get_usage(q, &usage));
    CHECK(usage == (QUANT_USAGE_ROWWISE | QUANT_USAGE_COLUMNWISE));
  }
  EXPECT_ERR(quant_quantizer_layout_usage(q, 4, shape2, 2, d, 8, &n), QUANT_ERROR_INVALID_ARGUMENT, "usage: 0x4");
  EXPECT_ERR(quant_quantizer_layout_usage(NULL, 1, shape2, 2, d, 8, &n), QUANT_ERROR_INVALID_ARGUMENT, "quantizer");
  EXPECT_OK(quant_quantizer_free(q));
}

/* quant_quantize_options.usage: the directions of one call, the quantizer's
 * usage unchanged; bits other than the two directions are refused. */
static void test_usage_option(void) {
  quant_quantizer *q = NULL;
  quant_quantizer_config c = check_config("fp8");
  quant_quantize_options opts;
  quant_qtensor *t = NULL;
  quant_qtensor_info info;
  DLTensor in = input_f32();
  uint32_t usage = 0;

  EXPECT_OK(quant_quantizer_create(&c, &q));
  memset(&opts, 0, sizeof opts);
  opts.struct_size = sizeof opts;
  opts.usage = QUANT_USAGE_COLUMNWISE;
  EXPECT_OK(quant_quantize(q, &in, &opts, &t));
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_OK(quant_qtensor_get_info(t, &info));
  CHECK(info.usage == QUANT_USAGE_COLUMNWISE && info.rowwise_format[0] == 0);
  EXPECT_OK(quant_quantizer_get_usage(q, &usage));
  CHECK(usage == (QUANT_USAGE_ROWWISE | QUANT_USAGE_COLUMNWISE));
  /* quantize_into a temporary tensor: it ends with the call's usage */
  opts.usage = QUANT_USAGE_ROWWISE;
  EXPECT_OK(quant_quantize_into(q, &in, &opts, t));
  EXPECT_OK(quant_qtensor_get_info(t, &info));
  CHECK(info.usage == QUANT_USAGE_ROWWISE && info.columnwise_format[0] == 0);
  opts.usage = 0x10;
  EXPECT_ERR(quant_quantize_into(q, &in, &opts, t), QUANT_ERROR_INVALID_ARGUMENT, "options.usage: 0x10");
  EXPECT_OK(quant_qtensor_free(t));
  t = NULL;
  EXPECT_ERR(quant_quantize(q, &in, &opts, &t), QUANT_ERROR_INVALID_ARGUMENT, "options.usage");
  CHECK(t == NULL);
  EXPECT_OK(quant_quantizer_free(q));
}

static void test_bad_tensors(void) {
  quant_quantizer *q = NULL;
  quant_qtensor *t = NULL;
  quant_quantizer_config c = check_config("fp8");
  DLTensor in;
  int64_t strides[2] = {1, M}; /* column-major: rejected */
  int64_t ok_strides[2] = {K, 1};
  int64_t shape3[3] = {2, 3, 4};
  int64_t huge[2] = {INT64_MAX / 4, 4};
  double d64[4];
  int64_t s4[1] = {4};

  EXPECT_OK(quant_quantizer_create(&c, &q));
  EXPECT_ERR(quant_quantize(q, NULL, NULL, &t), QUANT_ERROR_INVALID_ARGUMENT, "input: is NULL");
  in = input_f32();
  EXPECT_ERR(quant_quantize(q, &in, NULL, NULL), QUANT_ERROR_INVALID_ARGUMENT, "out: is NULL");
  EXPECT_ERR(quant_quantize(NULL, &in, NULL, &t), QUANT_ERROR_INVALID_ARGUMENT, "quantizer: is NULL");
  in.ndim = 0;
  EXPECT_ERR(quant_quantize(q, &in, NULL, &t), QUANT_ERROR_INVALID_ARGUMENT, "input: ndim 0");
  in = input_f32();
  in.shape = NULL;
  EXPECT_ERR(quant_quantize(q, &in, NULL, &t), QUANT_ERROR_INVALID_ARGUMENT, "input: shape is NULL");
  in = input_f32();
  in.data = NULL;
  EXPECT_ERR(quant_quantize(q, &in, NULL, &t), QUANT_ERROR_INVALID_ARGUMENT, "input: data is NULL");
  in = input_f32();
  in.strides = strides;
  EXPECT_ERR(quant_quantize(q, &in, NULL, &t), QUANT_ERROR_UNSUPPORTED, "not row-major contiguous");
  in.strides = ok_strides;
  EXPECT_OK(quant_quantize(q, &in, NULL, &t));
  EXPECT_OK(quant_qtensor_free(t));
  in = check_tensor(d64, kDLFloat, 64, 1, s4);
  EXPECT_ERR(quant_quantize(q, &in, NULL, &t), QUANT_ERROR_INVALID_ARGUMENT, "input: dtype float64");
  in = input_f32();
  in.dtype.code = kDLInt;
  in.dtype.bits = 16;
  EXPECT_ERR(quant_quantize(q, &in, NULL, &t), QUANT_ERROR_UNSUPPORTED, "input: DLPack dtype");
  in = input_f32();
  in.dtype.lanes = 4;
  EXPECT_ERR(quant_quantize(q, &in, NULL, &t), QUANT_ERROR_INVALID_ARGUMENT, "lanes");
  in = input_f32();
  in.device.device_type = kDLVulkan;
  EXPECT_ERR(quant_quantize(q, &in, NULL, &t), QUANT_ERROR_UNSUPPORTED, "input: DLPack device type 7");
  if (!check_have_cuda_plugin()) { /* with one, cuda/gputest covers CUDA tensors */
    in = input_f32();
    in.device.device_type = kDLCUDA;
    EXPECT_ERR(quant_quantize(q, &in, NULL, &t), QUANT_ERROR_DEVICE_UNAVAILABLE, "cuda:0");
  }
  in = input_f32();
  in.shape = huge;
  EXPECT_ERR(quant_quantize(q, &in, NULL, &t), QUANT_ERROR_INVALID_ARGUMENT, "overflows");
  in = check_tensor(x, kDLFloat, 32, 3, shape3); /* rank 3 is fine: [6, 4] */
  EXPECT_OK(quant_quantize(q, &in, NULL, &t));
  EXPECT_OK(quant_qtensor_free(t));
  CHECK(t != NULL);
  /* The wrong kind of handle is named as such. */
  in = input_f32();
  EXPECT_OK(quant_quantize(q, &in, NULL, &t));
  EXPECT_ERR(quant_quantize((quant_quantizer *)(void *)t, &in, NULL, &t), QUANT_ERROR_INVALID_HANDLE,
             "handle is a quantized tensor, not a quantizer");
  EXPECT_OK(quant_qtensor_free(t));
  EXPECT_OK(quant_quantizer_free(q));
}

static void test_quantize_dequantize_views(void) {
  quant_quantizer *q = NULL;
  quant_qtensor *t = NULL;
  quant_quantizer_config c = check_config("fp8");
  DLTensor in = input_f32(), v, o;
  float y[M * K];
  uint16_t yb[M * K];
  quant_qtensor_info info;
  int i, j;
  float amax = 0;

  for (i = 0; i < M * K; i++) {
    if (fabsf(x[i]) > amax) amax = fabsf(x[i]);
  }
  EXPECT_OK(quant_quantizer_create(&c, &q));
  EXPECT_OK(quant_quantize(q, &in, NULL, &t));

  info.struct_size = sizeof info;
  EXPECT_OK(quant_qtensor_get_info(t, &info));
  CHECK(info.ndim == 2 && info.shape[0] == M && info.shape[1] == K);
  CHECK(info.usage == 3 && info.device.device_type == kDLCPU && info.persistent == 0);
  CHECK(strcmp(info.rowwise_format, "fp8") == 0 && strcmp(info.columnwise_format, "fp8") == 0);
  info.struct_size = 1;
  EXPECT_ERR(quant_qtensor_get_info(t, &info), QUANT_ERROR_INVALID_ARGUMENT, "struct_size");
  EXPECT_ERR(quant_qtensor_get_info(t, NULL), QUANT_ERROR_INVALID_ARGUMENT, "info: is NULL");
  /* An older, shorter info struct is filled only up to its size. */
  {
    quant_qtensor_info small;
    memset(&small, 0x5A, sizeof small);
    small.struct_size = offsetof(quant_qtensor_info, usage);
    EXPECT_OK(quant_qtensor_get_info(t, &small));
    CHECK(small.ndim == 2 && small.shape[1] == K);
    CHECK(small.usage == 0x5A5A5A5Au);
  }

  /* Views: the columnwise data is the transpose of the rowwise data. */
  EXPECT_OK(quant_qtensor_buffer(t, QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_DATA, &v));
  CHECK(v.ndim == 2 && v.shape[0] == M && v.shape[1] == K && v.dtype.code == kDLFloat8_e4m3fn);
  CHECK(v.strides == NULL && v.byte_offset == 0 && v.device.device_type == kDLCPU);
  {
    const unsigned char *row = (const unsigned char *)v.data;
    DLTensor cv;
    const unsigned char *col;
    int mismatches = 0;
    EXPECT_OK(quant_qtensor_buffer(t, QUANT_DIRECTION_COLUMNWISE, QUANT_BUFFER_DATA, &cv));
    CHECK(cv.shape[0] == K && cv.shape[1] == M);
    col = (const unsigned char *)cv.data;
    for (i = 0; i < M; i++)
      for (j = 0; j < K; j++) mismatches += row[i * K + j] != col[j * M + i];
    CHECK(mismatches == 0);
  }
  EXPECT_OK(quant_qtensor_buffer(t, QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_AMAX, &v));
  CHECK(v.dtype.code == kDLFloat && v.ndim == 1 && v.shape[0] == 1 && *(float *)v.data == amax);
  EXPECT_OK(quant_qtensor_buffer(t, QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_SCALE_INV, &v));
  CHECK(*(float *)v.data == 1.0f / (448.0f / amax));
  EXPECT_ERR(quant_qtensor_buffer(t, 0, QUANT_BUFFER_DATA, &v), QUANT_ERROR_INVALID_ARGUMENT, "direction");
  EXPECT_ERR(quant_qtensor_buffer(t, 3, QUANT_BUFFER_DATA, &v), QUANT_ERROR_INVALID_ARGUMENT, "direction");
  EXPECT_ERR(quant_qtensor_buffer(t, 1, (quant_buffer_kind)7, &v), QUANT_ERROR_INVALID_ARGUMENT, "kind");
  EXPECT_ERR(quant_qtensor_buffer(t, 1, QUANT_BUFFER_DATA, NULL), QUANT_ERROR_INVALID_ARGUMENT, "view");
  EXPECT_ERR(quant_qtensor_buffer(NULL, 1, QUANT_BUFFER_DATA, &v), QUANT_ERROR_INVALID_ARGUMENT, "tensor");

  /* Dequantize: the FP8 error bound is half an E4M3 ulp of the scaled value
   * (relative 2^-4) plus the subnormal step; check against it. */
  o = check_tensor(y, kDLFloat, 32, 2, shape2);
  EXPECT_OK(quant_dequantize(t, QUANT_DIRECTION_ANY, &o, NULL));
  {
    int bad = 0;
    float scale = 448.0f / amax;
    for (i = 0; i < M * K; i++) {
      double tol = fabs(x[i]) / 16.0 + ldexp(1.0, -10) / scale;
      bad += fabs((double)y[i] - x[i]) > tol;
    }
    CHECK(bad == 0);
  }
  o = check_tensor(yb, kDLBfloat, 16, 2, shape2);
  EXPECT_OK(quant_dequantize(t, QUANT_DIRECTION_COLUMNWISE, &o, NULL));
  o = check_tensor(y, kDLFloat, 32, 1, shape2);
  EXPECT_ERR(quant_dequantize(t, 0, &o, NULL), QUANT_ERROR_INVALID_ARGUMENT, "out: shape");
  o = check_tensor(x, kDLUInt, 8, 2, shape2);
  EXPECT_ERR(quant_dequantize(t, 0, &o, NULL), QUANT_ERROR_INVALID_ARGUMENT, "out: dtype uint8");
  EXPECT_ERR(quant_dequantize(t, 0, NULL, NULL), QUANT_ERROR_INVALID_ARGUMENT, "out: is NULL");
  EXPECT_ERR(quant_dequantize(t, 9, &o, NULL), QUANT_ERROR_INVALID_ARGUMENT, "direction");

  /* update_usage: drop columnwise, derive it back from rowwise. */
  EXPECT_OK(quant_qtensor_update_usage(t, QUANT_USAGE_ROWWISE, NULL));
  o = check_tensor(y, kDLFloat, 32, 2, shape2);
  EXPECT_ERR(quant_dequantize(t, QUANT_DIRECTION_COLUMNWISE, &o, NULL), QUANT_ERROR_STATE, "no columnwise data");
  EXPECT_OK(quant_qtensor_update_usage(t, QUANT_USAGE_ROWWISE | QUANT_USAGE_COLUMNWISE, NULL));
  EXPECT_OK(quant_dequantize(t, QUANT_DIRECTION_COLUMNWISE, &o, NULL));
  EXPECT_OK(quant_qtensor_update_usage(t, QUANT_USAGE_COLUMNWISE, NULL));
  EXPECT_ERR(quant_qtensor_update_usage(t, QUANT_USAGE_ROWWISE, NULL), QUANT_ERROR_STATE, "cannot derive rowwise");
  EXPECT_ERR(quant_qtensor_update_usage(t, 0, NULL), QUANT_ERROR_INVALID_ARGUMENT, "usage");
  EXPECT_ERR(quant_qtensor_update_usage(NULL, 1, NULL), QUANT_ERROR_INVALID_ARGUMENT, "tensor");
  EXPECT_ERR(quant_qtensor_set_gemm_swizzled_scales(t, 1, NULL), QUANT_ERROR_UNSUPPORTED, "no GEMM-swizzled");
  EXPECT_OK(quant_qtensor_set_gemm_swizzled_scales(t, 0, NULL)); /* already compact: nothing to do */
  EXPECT_ERR(quant_qtensor_set_gemm_swizzled_scales(NULL, 1, NULL), QUANT_ERROR_INVALID_ARGUMENT, "tensor");

  EXPECT_OK(quant_qtensor_free(t));
  EXPECT_ERR(quant_qtensor_get_info(t, &info), QUANT_ERROR_INVALID_HANDLE, "not a live quantized tensor");
  EXPECT_ERR(quant_qtensor_free(t), QUANT_ERROR_INVALID_HANDLE, "not a live quantized tensor");
  EXPECT_OK(quant_qtensor_free(NULL));
  EXPECT_OK(quant_quantizer_free(q));
}

static void test_amax_and_into(void) {
  quant_quantizer *q = NULL;
  quant_qtensor *t = NULL, *t2 = NULL;
  quant_quantizer_config c = check_config("fp8");
  DLTensor in = input_f32(), a, v1, v2;
  float amax[2] = {0, 0};
  int64_t two = 2, three = 3;
  quant_quantize_options opts;

  EXPECT_OK(quant_quantizer_create(&c, &q));
  a = check_tensor(amax, kDLFloat, 32, 1, &two);
  EXPECT_OK(quant_compute_amax(q, &in, &a, NULL));
  CHECK(amax[0] > 0 && amax[0] == amax[1]);
  a = check_tensor(amax, kDLFloat, 32, 1, &three);
  EXPECT_ERR(quant_compute_amax(q, &in, &a, NULL), QUANT_ERROR_INVALID_ARGUMENT, "amax: want float32 with 2");
  EXPECT_ERR(quant_compute_amax(q, &in, NULL, NULL), QUANT_ERROR_INVALID_ARGUMENT, "amax: is NULL");
  EXPECT_ERR(quant_compute_amax(q, NULL, &a, NULL), QUANT_ERROR_INVALID_ARGUMENT, "input: is NULL");
  EXPECT_ERR(quant_compute_amax(NULL, &in, &a, NULL), QUANT_ERROR_INVALID_ARGUMENT, "quantizer");

  /* A caller-reduced amax (here: doubled) is honoured. */
  amax[0] *= 2;
  amax[1] *= 2;
  a = check_tensor(amax, kDLFloat, 32, 1, &two);
  memset(&opts, 0, sizeof opts);
  opts.struct_size = sizeof opts;
  opts.amax = &a;
  EXPECT_OK(quant_quantize(q, &in, &opts, &t));
  EXPECT_OK(quant_qtensor_buffer(t, QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_AMAX, &v1));
  CHECK(*(float *)v1.data == amax[0]);
  opts.struct_size = 2;
  EXPECT_ERR(quant_quantize(q, &in, &opts, &t2), QUANT_ERROR_INVALID_ARGUMENT, "options: struct_size 2");

  /* quantize_into keeps the buffers in place (CUDA-graph friendly). */
  EXPECT_OK(quant_qtensor_buffer(t, QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_DATA, &v1));
  x[0] = 1000.0f;
  EXPECT_OK(quant_quantize_into(q, &in, NULL, t));
  EXPECT_OK(quant_qtensor_buffer(t, QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_DATA, &v2));
  CHECK(v1.data == v2.data);
  EXPECT_OK(quant_qtensor_buffer(t, QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_AMAX, &v2));
  CHECK(*(float *)v2.data == 1000.0f);
  EXPECT_ERR(quant_quantize_into(q, &in, NULL, NULL), QUANT_ERROR_INVALID_ARGUMENT, "dst: is NULL");
  {
    int64_t other[2] = {K, M};
    DLTensor in2 = check_tensor(x, kDLFloat, 32, 2, other);
    EXPECT_ERR(quant_quantize_into(q, &in2, NULL, t), QUANT_ERROR_INVALID_ARGUMENT, "does not match");
  }
  EXPECT_ERR(quant_quantize_into(q, &in, NULL, (quant_qtensor *)(void *)q), QUANT_ERROR_INVALID_HANDLE, "dst");
  EXPECT_OK(quant_qtensor_free(t));
  EXPECT_OK(quant_quantizer_free(q));
}

static void test_from_buffers(void) {
  quant_quantizer *q = NULL;
  quant_qtensor *t = NULL;
  quant_quantizer_config c = check_config("fp8");
  quant_buffer_desc d[6];
  size_t n = 0, i;
  DLTensor bufs[6], in = input_f32(), v;
  void *mem[6];
  int64_t shapes[6][QUANT_MAX_BUFFER_DIMS];

  c.usage = QUANT_USAGE_ROWWISE | QUANT_USAGE_COLUMNWISE;
  EXPECT_OK(quant_quantizer_create(&c, &q));
  EXPECT_OK(quant_quantizer_layout(q, shape2, 2, d, 6, &n));
  for (i = 0; i < n; i++) {
    mem[i] = calloc(1, (size_t)d[i].nbytes);
    memcpy(shapes[i], d[i].shape, sizeof shapes[i]);
    bufs[i] = check_tensor(mem[i], (DLDataTypeCode)d[i].dtype.code, d[i].dtype.bits, d[i].ndim, shapes[i]);
  }
  EXPECT_OK(quant_qtensor_from_buffers(q, shape2, 2, bufs, n, &t));
  EXPECT_OK(quant_quantize_into(q, &in, NULL, t));
  EXPECT_OK(quant_qtensor_buffer(t, QUANT_DIRECTION_COLUMNWISE, QUANT_BUFFER_DATA, &v));
  CHECK(v.data == mem[3]); /* the caller's memory holds the result */
  CHECK(*(float *)mem[2] > 0);
  EXPECT_OK(quant_qtensor_free(t));
  CHECK(*(float *)mem[2] > 0); /* borrowed: still the caller's */

  EXPECT_ERR(quant_qtensor_from_buffers(q, shape2, 2, bufs, n - 1, &t), QUANT_ERROR_INVALID_ARGUMENT, "buffers: got 5");
  bufs[1].dtype.bits = 16;
  bufs[1].dtype.code = kDLBfloat;
  EXPECT_ERR(quant_qtensor_from_buffers(q, shape2, 2, bufs, n, &t), QUANT_ERROR_INVALID_ARGUMENT, "buffers[1]");
  bufs[1].dtype.bits = 32;
  bufs[1].dtype.code = kDLFloat;
  shapes[3][0] = M;
  shapes[3][1] = K; /* columnwise data must be [K, M] */
  EXPECT_ERR(quant_qtensor_from_buffers(q, shape2, 2, bufs, n, &t), QUANT_ERROR_INVALID_ARGUMENT, "buffers[3]");
  EXPECT_ERR(quant_qtensor_from_buffers(q, shape2, 2, NULL, n, &t), QUANT_ERROR_INVALID_ARGUMENT, "buffers: is NULL");
  EXPECT_ERR(quant_qtensor_from_buffers(q, shape2, 2, bufs, n, NULL), QUANT_ERROR_INVALID_ARGUMENT, "out: is NULL");
  EXPECT_ERR(quant_qtensor_from_buffers(q, NULL, 2, bufs, n, &t), QUANT_ERROR_INVALID_ARGUMENT, "shape");
  EXPECT_ERR(quant_qtensor_from_buffers(NULL, shape2, 2, bufs, n, &t), QUANT_ERROR_INVALID_ARGUMENT, "quantizer");
  for (i = 0; i < n; i++) free(mem[i]);
  EXPECT_OK(quant_quantizer_free(q));
}

static void test_delayed_scaling(void) {
  quant_quantizer *q = NULL, *cur = NULL;
  quant_qtensor *t = NULL;
  quant_quantizer_config c = check_config("fp8");
  DLTensor in = input_f32(), scale, hist;
  float reduced = 64.0f, bad = -1.0f;

  c.scaling = QUANT_SCALING_DELAYED;
  c.amax_history_len = 4;
  EXPECT_OK(quant_quantizer_create(&c, &q));
  EXPECT_OK(quant_delayed_scaling_state(q, QUANT_DIRECTION_ANY, &scale, &hist));
  CHECK(scale.ndim == 1 && scale.shape[0] == 1 && *(float *)scale.data == 1.0f);
  CHECK(hist.ndim == 1 && hist.shape[0] == 4 && ((float *)hist.data)[0] == 0.0f);
  EXPECT_OK(quant_quantize(q, &in, NULL, &t));
  EXPECT_OK(quant_qtensor_free(t));
  CHECK(((float *)hist.data)[0] == 1000.0f); /* the staged amax of this step (x[0] = 1000) */
  /* The caller reduced the step's amax across processes to 64. */
  EXPECT_OK(quant_delayed_scaling_update(q, QUANT_DIRECTION_ANY, &reduced));
  CHECK(((float *)hist.data)[3] == 64.0f && ((float *)hist.data)[0] == 0.0f);
  CHECK(*(float *)scale.data == 448.0f / 64.0f);
  EXPECT_OK(quant_delayed_scaling_update(q, QUANT_DIRECTION_ANY, NULL));
  EXPECT_ERR(quant_delayed_scaling_update(q, QUANT_DIRECTION_ANY, &bad), QUANT_ERROR_INVALID_ARGUMENT, "reduced_amax");
  EXPECT_ERR(quant_delayed_scaling_update(q, 5, NULL), QUANT_ERROR_INVALID_ARGUMENT, "direction");
  EXPECT_ERR(quant_delayed_scaling_update(NULL, 0, NULL), QUANT_ERROR_INVALID_ARGUMENT, "quantizer");
  EXPECT_OK(quant_delayed_scaling_state(q, QUANT_DIRECTION_ROWWISE, NULL, NULL));

  c = check_config("fp8");
  EXPECT_OK(quant_quantizer_create(&c, &cur));
  EXPECT_ERR(quant_delayed_scaling_state(cur, 0, &scale, &hist), QUANT_ERROR_STATE, "does not use delayed scaling");
  EXPECT_ERR(quant_delayed_scaling_update(cur, 0, NULL), QUANT_ERROR_STATE, "does not use delayed scaling");
  EXPECT_ERR(quant_delayed_scaling_state(NULL, 0, &scale, &hist), QUANT_ERROR_INVALID_ARGUMENT, "quantizer");
  EXPECT_OK(quant_quantizer_free(cur));
  EXPECT_OK(quant_quantizer_free(q));
}

/* quant_quantize_grouped: the same bytes as quant_quantize_into tensor by
 * tensor (tensors of different shapes in one group, as MoE experts with
 * different token counts), and every bad argument named. */
static void test_quantize_grouped(void) {
  quant_quantizer *q = NULL;
  quant_qtensor *g[3] = {NULL, NULL, NULL}, *ref[3] = {NULL, NULL, NULL};
  quant_quantizer_config c = check_config("fp8_block");
  int64_t shapes[3][2] = {{M, K}, {M / 2, K}, {3, 130}};
  static float xs[3][M * K];
  DLTensor ins[3], v1, v2, bad_dtype;
  quant_quantize_grouped_args a;
  size_t i;
  uint32_t dir;
  int same = 1;

  c.usage = QUANT_USAGE_ROWWISE | QUANT_USAGE_COLUMNWISE;
  EXPECT_OK(quant_quantizer_create(&c, &q));
  for (i = 0; i < 3; i++) {
    int j;
    for (j = 0; j < M * K; j++) xs[i][j] = (float)(((j + 7 * (int)i) * 31 % 97) - 48) * (0.25f + (float)i);
    ins[i] = check_tensor(xs[i], kDLFloat, 32, 2, shapes[i]);
    EXPECT_OK(quant_quantize(q, &ins[i], NULL, &g[i]));
    EXPECT_OK(quant_quantize(q, &ins[i], NULL, &ref[i]));
    xs[i][0] = -3.5f * (float)(i + 1); /* change the input: the group must requantize */
    EXPECT_OK(quant_quantize_into(q, &ins[i], NULL, ref[i]));
  }
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.count = 3;
  a.inputs = ins;
  a.outputs = g;
  EXPECT_OK(quant_quantize_grouped(q, &a));
  for (i = 0; i < 3; i++)
    for (dir = QUANT_DIRECTION_ROWWISE; dir <= QUANT_DIRECTION_COLUMNWISE; dir++) {
      quant_buffer_kind kinds[2] = {QUANT_BUFFER_DATA, QUANT_BUFFER_SCALE_INV};
      int kk;
      for (kk = 0; kk < 2; kk++) {
        size_t nbytes;
        EXPECT_OK(quant_qtensor_buffer(g[i], dir, kinds[kk], &v1));
        EXPECT_OK(quant_qtensor_buffer(ref[i], dir, kinds[kk], &v2));
        nbytes = (size_t)(v1.dtype.bits / 8) * (size_t)v1.shape[0] * (size_t)(v1.ndim > 1 ? v1.shape[1] : 1);
        same &= memcmp(v1.data, v2.data, nbytes) == 0;
      }
    }
  CHECK(same);

  EXPECT_ERR(quant_quantize_grouped(NULL, &a), QUANT_ERROR_INVALID_ARGUMENT, "quantizer");
  EXPECT_ERR(quant_quantize_grouped(q, NULL), QUANT_ERROR_INVALID_ARGUMENT, "args: is NULL");
  a.struct_size = 8;
  EXPECT_ERR(quant_quantize_grouped(q, &a), QUANT_ERROR_INVALID_ARGUMENT, "args: struct_size 8");
  a.struct_size = sizeof a;
  a.count = 0;
  EXPECT_ERR(quant_quantize_grouped(q, &a), QUANT_ERROR_INVALID_ARGUMENT, "args.count: is 0");
  a.count = 3;
  a.inputs = NULL;
  EXPECT_ERR(quant_quantize_grouped(q, &a), QUANT_ERROR_INVALID_ARGUMENT, "args.inputs: is NULL");
  a.inputs = ins;
  a.outputs = NULL;
  EXPECT_ERR(quant_quantize_grouped(q, &a), QUANT_ERROR_INVALID_ARGUMENT, "args.outputs: is NULL");
  a.outputs = g;
  g[2] = g[0];
  EXPECT_ERR(quant_quantize_grouped(q, &a), QUANT_ERROR_INVALID_ARGUMENT, "outputs[2]: the same tensor as outputs[0]");
  g[2] = (quant_qtensor *)(void *)q;
  EXPECT_ERR(quant_quantize_grouped(q, &a), QUANT_ERROR_INVALID_HANDLE, "args.outputs[2]");
  g[2] = ref[2];
  ins[1].shape = shapes[0];
  EXPECT_ERR(quant_quantize_grouped(q, &a), QUANT_ERROR_INVALID_ARGUMENT, "inputs[1]");
  ins[1].shape = shapes[1];
  bad_dtype = ins[1];
  bad_dtype.dtype.code = kDLUInt;
  bad_dtype.dtype.bits = 8;
  ins[1] = bad_dtype;
  EXPECT_ERR(quant_quantize_grouped(q, &a), QUANT_ERROR_INVALID_ARGUMENT, "inputs[1]");
  ins[1] = check_tensor(xs[1], kDLFloat, 32, 2, shapes[1]);
  ins[0].data = NULL;
  EXPECT_ERR(quant_quantize_grouped(q, &a), QUANT_ERROR_INVALID_ARGUMENT, "args.inputs[0]: data is NULL");
  for (i = 0; i < 3; i++) {
    EXPECT_OK(quant_qtensor_free(ref[i]));
    if (i < 2) EXPECT_OK(quant_qtensor_free(g[i]));
  }
  EXPECT_OK(quant_quantizer_free(q));
}

static void test_last_error_is_kept_until_next_failure(void) {
  quant_quantizer *q = NULL;
  quant_quantizer_config c = check_config("fp8");
  EXPECT_ERR(quant_quantizer_create(NULL, &q), QUANT_ERROR_INVALID_ARGUMENT, "config");
  EXPECT_OK(quant_quantizer_create(&c, &q));
  CHECK(strstr(quant_last_error(), "config: is NULL") != NULL);
  EXPECT_OK(quant_quantizer_free(q));
}

/* quant_plugin_load_ex and quant_shutdown: every bad argument is named. */
static void test_plugin_load_options(void) {
  quant_plugin_load_options o;
  size_t idx = 0;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  EXPECT_ERR(quant_plugin_load_ex(NULL, &o, &idx), QUANT_ERROR_INVALID_ARGUMENT, "path: is NULL");
  EXPECT_ERR(quant_plugin_load_ex("", &o, &idx), QUANT_ERROR_INVALID_ARGUMENT, "path: is empty");
  EXPECT_ERR(quant_plugin_load_ex("build/libquant_toy.so", NULL, &idx), QUANT_ERROR_INVALID_ARGUMENT, "opts: is NULL");
  o.struct_size = 0;
  EXPECT_ERR(quant_plugin_load_ex("build/libquant_toy.so", &o, &idx), QUANT_ERROR_INVALID_ARGUMENT, "opts: struct_size 0");
  o.struct_size = sizeof o;
  EXPECT_ERR(quant_plugin_load_ex("/nonexistent/plugin", &o, &idx), QUANT_ERROR_PLUGIN, "/nonexistent/plugin");
  o.sha256 = "not hex";
  EXPECT_ERR(quant_plugin_load_ex("examples/c/test_abi.c", &o, &idx), QUANT_ERROR_PLUGIN, "is not 64 hex digits");
  o.sha256 = "0000000000000000000000000000000000000000000000000000000000000000";
  EXPECT_ERR(quant_plugin_load_ex("examples/c/test_abi.c", &o, &idx), QUANT_ERROR_PLUGIN, "refused: its SHA-256 is");
  /* Nothing to stop: a no-op, callable any number of times. */
  EXPECT_OK(quant_shutdown());
  EXPECT_OK(quant_shutdown());
}

int main(void) {
  int i;
  for (i = 0; i < M * K; i++) x[i] = (float)((i * 37 % 101) - 50) * 0.173f;
  test_version_and_strings();
  test_quantizer_create();
  test_layout();
  test_usage_option();
  test_bad_tensors();
  test_quantize_dequantize_views();
  test_amax_and_into();
  test_from_buffers();
  test_delayed_scaling();
  test_quantize_grouped();
  test_last_error_is_kept_until_next_failure();
  test_plugin_load_options();
  return check_summary("test_abi");
}
