/* A minimal test harness for the C tests: CHECK, status expectations that also
 * check the error message, and a summary. Each test program returns nonzero if
 * any check failed. */
#ifndef LIBQUANT_CHECK_H_
#define LIBQUANT_CHECK_H_

#include <stdio.h>
#include <string.h>

#include "quant.h"

#if defined(__GNUC__)
#define CHECK_UNUSED __attribute__((unused))
#else
#define CHECK_UNUSED
#endif

static int check_failures = 0;
static int check_count = 0;

#define CHECK(cond)                                                        \
  do {                                                                     \
    check_count++;                                                         \
    if (!(cond)) {                                                         \
      check_failures++;                                                    \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
    }                                                                      \
  } while (0)

/* EXPECT_OK(call): the call returns QUANT_OK. */
#define EXPECT_OK(call)                                                                   \
  do {                                                                                    \
    quant_status check_s_ = (call);                                                       \
    check_count++;                                                                        \
    if (check_s_ != QUANT_OK) {                                                           \
      check_failures++;                                                                   \
      fprintf(stderr, "%s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #call,           \
              quant_status_string(check_s_), quant_last_error());                          \
    }                                                                                     \
  } while (0)

/* EXPECT_ERR(call, status, substring): the call fails with status and the
 * thread's error message contains substring (the argument it names). */
#define EXPECT_ERR(call, status, substr)                                                  \
  do {                                                                                    \
    quant_status check_s_ = (call);                                                       \
    check_count++;                                                                        \
    if (check_s_ != (status) || strstr(quant_last_error(), (substr)) == NULL) {           \
      check_failures++;                                                                   \
      fprintf(stderr, "%s:%d: %s: want %s with \"%s\", got %s: \"%s\"\n", __FILE__,      \
              __LINE__, #call, quant_status_string(status), (substr),                     \
              quant_status_string(check_s_), quant_last_error());                         \
    }                                                                                     \
  } while (0)

CHECK_UNUSED static int check_summary(const char *name) {
  printf("%s: %d checks, %d failed\n", name, check_count, check_failures);
  return check_failures != 0;
}

/* A CPU DLTensor over data. */
CHECK_UNUSED static DLTensor check_tensor(void *data, DLDataTypeCode code, int bits, int32_t ndim, int64_t *shape) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = ndim;
  t.dtype.code = (uint8_t)code;
  t.dtype.bits = (uint8_t)bits;
  t.dtype.lanes = 1;
  t.shape = shape;
  return t;
}

CHECK_UNUSED static quant_quantizer_config check_config(const char *format) {
  quant_quantizer_config c;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  c.format = format;
  return c;
}

/* Whether a loaded plugin provides CUDA kernels: tests whose expectation is
 * "no GPU" (QUANT_ERROR_DEVICE_UNAVAILABLE) apply only without one. */
CHECK_UNUSED static int check_have_cuda_plugin(void) {
  size_t n = 0, i, k;
  if (quant_plugin_count(&n) != QUANT_OK) return 0;
  for (i = 0; i < n; i++) {
    quant_plugin_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (quant_plugin_get_info(i, &info) != QUANT_OK || info.status != QUANT_OK) continue;
    for (k = 0; k < info.num_kernels; k++) {
      quant_plugin_kernel_info ki;
      memset(&ki, 0, sizeof ki);
      ki.struct_size = sizeof ki;
      if (quant_plugin_get_kernel(i, k, &ki) == QUANT_OK && ki.device_type == kDLCUDA) return 1;
    }
  }
  return 0;
}

#endif
