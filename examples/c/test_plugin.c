/* Plugin loading through the C ABI, with the toy plugins the Makefile builds
 * from plugin_toy.c: a bad path, a library that is not a plugin, a plugin of
 * the wrong ABI version and one that refuses to load all fail with a clear
 * QUANT_ERROR_PLUGIN and leave the CPU path working; the good one is listed
 * with its kernels and its format quantizes. Run from the repository root.
 *
 * With LIBQUANT_PLUGIN_PATH set (make test-c runs it a second time so), it also
 * checks that those loads happened at start and that failures are listed. */
#include <math.h>
#include <stdlib.h>

#include "check.h"

#define TOY "build/libquant_toy.so"

static size_t plugin_count(void) {
  size_t n = 0;
  EXPECT_OK(quant_plugin_count(&n));
  return n;
}

/* Whether a loaded plugin provides CUDA kernels (the device machine has
 * libquant_cuda.so next to libquant.so). */
/* The CPU path works: an fp8 quantize of a small tensor. */
static void check_cpu_path(void) {
  float x[64];
  int64_t shape[2] = {8, 8};
  DLTensor in = check_tensor(x, kDLFloat, 32, 2, shape);
  quant_quantizer_config cfg = check_config("fp8");
  quant_quantizer *q = NULL;
  quant_qtensor *t = NULL;
  int i;
  for (i = 0; i < 64; i++) x[i] = (float)(i - 30) * 0.37f;
  EXPECT_OK(quant_quantizer_create(&cfg, &q));
  EXPECT_OK(quant_quantize(q, &in, NULL, &t));
  CHECK(t != NULL);
  quant_qtensor_free(t);
  quant_quantizer_free(q);
}

static void check_env_loads(const char *env) {
  size_t n = plugin_count(), i;
  int saw_failure = 0, saw_toy = 0;
  printf("LIBQUANT_PLUGIN_PATH=%s: %zu plugin list entries\n", env, n);
  for (i = 0; i < n; i++) {
    quant_plugin_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    EXPECT_OK(quant_plugin_get_info(i, &info));
    printf("  [%zu] %s origin=%d status=%s %s\n", i, info.path, info.origin,
           quant_status_string((quant_status)info.status), info.message);
    if (info.origin != QUANT_PLUGIN_ORIGIN_ENV) continue;
    if (info.status == QUANT_ERROR_PLUGIN && strstr(info.message, "plugin ABI version 99") != NULL) saw_failure = 1;
    if (info.status == QUANT_OK && strcmp(info.name, "toy") == 0) saw_toy = 1;
  }
  CHECK(saw_failure);
  CHECK(saw_toy);
}

static void check_toy(size_t index) {
  quant_plugin_info info;
  quant_plugin_kernel_info ki;
  const char *fname = NULL;
  float x[6 * 10], back[6 * 10];
  int64_t shape[2] = {6, 10};
  DLTensor in = check_tensor(x, kDLFloat, 32, 2, shape), out = check_tensor(back, kDLFloat, 32, 2, shape);
  quant_quantizer_config cfg = check_config("toy_u8");
  quant_quantizer *q = NULL;
  quant_qtensor *t = NULL;
  quant_buffer_desc descs[8];
  size_t count = 0, again = 99;
  int i;

  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_OK(quant_plugin_get_info(index, &info));
  CHECK(info.status == QUANT_OK);
  CHECK(strcmp(info.name, "toy") == 0);
  CHECK(strcmp(info.version, "1.0") == 0);
  CHECK(strcmp(info.message, "") == 0);
  CHECK(info.abi_version == 1);
  CHECK(info.num_formats == 1);
  CHECK(info.num_kernels == 1);
  EXPECT_OK(quant_plugin_get_format(index, 0, &fname));
  CHECK(fname != NULL && strcmp(fname, "toy_u8") == 0);
  EXPECT_ERR(quant_plugin_get_format(index, 1, &fname), QUANT_ERROR_INVALID_ARGUMENT, "format");
  EXPECT_ERR(quant_plugin_get_format(index, (size_t)-1, &fname), QUANT_ERROR_INVALID_ARGUMENT, "format");
  memset(&ki, 0, sizeof ki);
  ki.struct_size = sizeof ki;
  EXPECT_OK(quant_plugin_get_kernel(index, 0, &ki));
  CHECK(strcmp(ki.format, "toy_u8") == 0);
  CHECK(ki.device_type == kDLCPU);
  CHECK(ki.ops == (QUANT_OP_AMAX | QUANT_OP_QUANTIZE | QUANT_OP_DEQUANTIZE | QUANT_OP_DERIVE));
  CHECK(ki.defines_format != 0);
  EXPECT_ERR(quant_plugin_get_kernel(index, 1, &ki), QUANT_ERROR_INVALID_ARGUMENT, "kernel");
  EXPECT_ERR(quant_plugin_get_kernel(index, (size_t)-1, &ki), QUANT_ERROR_INVALID_ARGUMENT, "kernel");
  EXPECT_ERR(quant_plugin_get_info(100000, &info), QUANT_ERROR_INVALID_ARGUMENT, "index");
  /* (size_t)-1 (a "not found" index) is past the end too, not index -1. */
  EXPECT_ERR(quant_plugin_get_info((size_t)-1, &info), QUANT_ERROR_INVALID_ARGUMENT, "index");

  /* Loading it again is a no-op with the same index. */
  EXPECT_OK(quant_plugin_load(TOY, &again));
  CHECK(again == index);

  /* The format works like a built-in one: layout, quantize, dequantize, update_usage. */
  for (i = 0; i < 60; i++) x[i] = (float)((i * 37) % 61 - 30) * 0.25f;
  EXPECT_OK(quant_quantizer_create(&cfg, &q));
  EXPECT_OK(quant_quantizer_layout(q, shape, 2, descs, 8, &count));
  CHECK(count == 6);
  CHECK(descs[0].kind == QUANT_BUFFER_DATA && descs[0].shape[0] == 6 && descs[0].shape[1] == 10);
  CHECK(descs[3].direction == QUANT_DIRECTION_COLUMNWISE && descs[3].shape[0] == 10 && descs[3].shape[1] == 6);
  EXPECT_OK(quant_quantizer_set_usage(q, QUANT_USAGE_ROWWISE));
  EXPECT_OK(quant_quantize(q, &in, NULL, &t));
  EXPECT_OK(quant_qtensor_update_usage(t, QUANT_USAGE_ROWWISE | QUANT_USAGE_COLUMNWISE, NULL));
  EXPECT_OK(quant_dequantize(t, QUANT_DIRECTION_COLUMNWISE, &out, NULL));
  for (i = 0; i < 60; i++) CHECK(fabsf(back[i] - x[i]) <= 7.5f / 127.0f * 0.5f + 1e-6f);
  /* A plugin's own validation error comes back with its message. */
  cfg.block_dims = 2;
  EXPECT_ERR(quant_quantizer_create(&cfg, &q), QUANT_ERROR_INVALID_ARGUMENT, "toy_u8 takes no element");
  quant_qtensor_free(t);
  quant_quantizer_free(q);
}

int main(void) {
  const char *env = getenv("LIBQUANT_PLUGIN_PATH");
  size_t index = 99;
  int64_t shape[2] = {4, 4};
  DLTensor gpu;
  quant_quantizer_config cfg = check_config("fp8");
  quant_quantizer *q = NULL;
  quant_qtensor *t = NULL;

  if (env != NULL && env[0] != '\0') check_env_loads(env);

  EXPECT_ERR(quant_plugin_load(NULL, &index), QUANT_ERROR_INVALID_ARGUMENT, "path");
  EXPECT_ERR(quant_plugin_load("build/no_such_plugin.so", &index), QUANT_ERROR_PLUGIN, "cannot open");
  EXPECT_ERR(quant_plugin_load("build", &index), QUANT_ERROR_PLUGIN, "folder");
  EXPECT_ERR(quant_plugin_load("build/libquant_toy_noentry.so", &index), QUANT_ERROR_PLUGIN,
             "does not export quant_plugin_get");
  EXPECT_ERR(quant_plugin_load("build/libquant_toy_abi99.so", &index), QUANT_ERROR_PLUGIN,
             "built for plugin ABI version 99, but this libquant speaks versions 1 to 2");
  EXPECT_ERR(quant_plugin_load("build/libquant_toy_fail.so", &index), QUANT_ERROR_PLUGIN,
             "refusing to load (built with TOY_FAIL)");
  CHECK(index == 99);
  check_cpu_path();

  EXPECT_OK(quant_plugin_load(TOY, &index));
  CHECK(index < plugin_count());
  check_toy(index);
  check_cpu_path();

  /* A CUDA tensor without a CUDA plugin: the device is not available. */
  if (!check_have_cuda_plugin()) {
    gpu = check_tensor((void *)(uintptr_t)0x1000, kDLFloat, 32, 2, shape);
    gpu.device.device_type = kDLCUDA;
    EXPECT_OK(quant_quantizer_create(&cfg, &q));
    EXPECT_ERR(quant_quantize(q, &gpu, NULL, &t), QUANT_ERROR_DEVICE_UNAVAILABLE, "device cuda:0 is not available");
    printf("without a CUDA plugin: %s\n", quant_last_error());
    quant_quantizer_free(q);
  } else {
    printf("a CUDA plugin is loaded: the no-device check is covered by the GPU tests\n");
  }
  return check_summary("test_plugin");
}
