/* Executable (out-of-process) format plugins through the C ABI, with the
 * mxfp6 plugin the Makefile builds from examples/goplugin/mxfp6 into
 * build/goplugin/mxfp6 (and its sha256sum line, build/goplugin/plugins.sha256):
 * an unlisted or mismatching digest is refused; the good one loads, is listed
 * with its format, quantizes a ragged BF16 tensor within the format's derived
 * error bound from 16 threads at once, multiplies on the CPU GEMM; after
 * quant_shutdown its calls fail with QUANT_ERROR_PLUGIN; loading it again
 * (through the manifest) brings it back. Run from the repository root.
 *
 * With LIBQUANT_PLUGIN_PATH set (make test-c runs it twice so), it checks
 * that the plugin was loaded at start: LIBQUANT_PLUGIN_PATH names the plugin
 * file, or a folder holding it as libquant-plugin-mxfp6 (listed in the
 * manifest) next to an unlisted copy, libquant-plugin-unlisted, which must be
 * refused with its reason in the plugin list (quant.h: folders). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "check.h"

#define PLUGIN "build/goplugin/mxfp6"
#define MANIFEST "build/goplugin/plugins.sha256"
#define M 3
#define K 70 /* not a multiple of 32 or 4: partial blocks (spec §14) */

static float bf16_round(float x) {
  uint32_t b;
  memcpy(&b, &x, 4);
  b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000u;
  memcpy(&x, &b, 4);
  return x;
}

/* Quantizes x [M, K] (BF16) with mxfp6 E2M3 RCEIL and checks the dequantized
 * values: with X = 2^e ≥ amax/7.5 and X < 2·amax/7.5 (RCEIL, spec §4.3),
 * scaled values lie in [-7.5, 7.5], where E2M3's largest quantum is 0.5
 * (binade [4, 8)), so |x − q| ≤ 0.25·X < amax/15 per block. Returns the
 * number of failed checks (no CHECK: it runs on many threads). */
static int quantize_check(quant_quantizer *q, const float *xf) {
  uint16_t xb[M * K];
  float out[M * K];
  int64_t shape[2] = {M, K};
  DLTensor in = check_tensor(xb, kDLBfloat, 16, 2, shape), o = check_tensor(out, kDLFloat, 32, 2, shape);
  quant_qtensor *t = NULL;
  int i, j, bad = 0;
  for (i = 0; i < M * K; i++) {
    uint32_t b;
    memcpy(&b, &xf[i], 4);
    xb[i] = (uint16_t)(b >> 16);
  }
  if (quant_quantize(q, &in, NULL, &t) != QUANT_OK) return 1;
  if (quant_dequantize(t, QUANT_DIRECTION_ROWWISE, &o, NULL) != QUANT_OK) bad++;
  for (i = 0; i < M && !bad; i++) {
    for (j = 0; j < K; j += 32) {
      int l, n = K - j < 32 ? K - j : 32;
      float amax = 0;
      for (l = 0; l < n; l++) amax = fmaxf(amax, fabsf(xf[i * K + j + l]));
      for (l = 0; l < n; l++) bad += fabsf(out[i * K + j + l] - xf[i * K + j + l]) > amax / 15;
    }
  }
  quant_qtensor_free(t);
  return bad;
}

static float x[M * K];
static quant_quantizer *shared_q;

static void *thread_body(void *arg) {
  int i, *bad = arg;
  for (i = 0; i < 20; i++) *bad += quantize_check(shared_q, x);
  return NULL;
}

static size_t plugin_index_at(const char *name, const char *path) {
  size_t n = 0, i, found = (size_t)-1;
  EXPECT_OK(quant_plugin_count(&n));
  for (i = 0; i < n; i++) {
    quant_plugin_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    EXPECT_OK(quant_plugin_get_info(i, &info));
    if (strcmp(info.name, name) == 0 && strcmp(info.path, path) == 0) found = i;
  }
  return found;
}

/* The plugin list entry of path that failed with QUANT_ERROR_PLUGIN and a
 * message containing why, or (size_t)-1. */
static size_t failed_index(const char *path, const char *why) {
  size_t n = 0, i, found = (size_t)-1;
  EXPECT_OK(quant_plugin_count(&n));
  for (i = 0; i < n; i++) {
    quant_plugin_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    EXPECT_OK(quant_plugin_get_info(i, &info));
    if (strcmp(info.path, path) == 0 && info.status == QUANT_ERROR_PLUGIN && strstr(info.message, why) != NULL) found = i;
  }
  return found;
}

int main(void) {
  char digest[65] = {0};
  quant_plugin_load_options opt;
  quant_quantizer_config cfg = check_config("mxfp6");
  quant_quantizer *q = NULL;
  quant_plugin_info info;
  quant_plugin_kernel_info kinfo;
  const char *fname = NULL;
  size_t index = 0;
  int i, bad[16] = {0};
  pthread_t th[16];
  FILE *f = fopen(MANIFEST, "r");
  const char *env = getenv("LIBQUANT_PLUGIN_PATH");

  CHECK(f != NULL);
  if (f == NULL) return check_summary("test_goplugin");
  CHECK(fread(digest, 1, 64, f) == 64);
  fclose(f);
  for (i = 0; i < M * K; i++) x[i] = bf16_round((float)ldexp(sin(i * 0.7) * 3.0, (i / 32) % 5 - 2));

  if (env != NULL) {
    /* Loaded at start from LIBQUANT_PLUGIN_PATH (with the manifest). */
    char path[4096], unlisted[4096];
    int folder = strcmp(env, PLUGIN) != 0;
    snprintf(path, sizeof path, folder ? "%s/libquant-plugin-mxfp6" : "%s", env);
    snprintf(unlisted, sizeof unlisted, "%s/libquant-plugin-unlisted", env);
    index = plugin_index_at("mxfp6", path);
    CHECK(index != (size_t)-1);
    if (folder) CHECK(failed_index(unlisted, "is not listed") != (size_t)-1);
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    EXPECT_OK(quant_plugin_get_info(index, &info));
    CHECK(info.origin == QUANT_PLUGIN_ORIGIN_ENV && info.status == QUANT_OK);
    EXPECT_OK(quant_quantizer_create(&cfg, &q));
    CHECK(quantize_check(q, x) == 0);
    quant_quantizer_free(q);
    EXPECT_OK(quant_shutdown());
    return check_summary("test_goplugin (LIBQUANT_PLUGIN_PATH)");
  }

  /* Unlisted, then a wrong digest: refused, nothing registered. */
  unsetenv("LIBQUANT_PLUGIN_MANIFEST");
  EXPECT_ERR(quant_plugin_load(PLUGIN, NULL), QUANT_ERROR_PLUGIN, "is not listed");
  memset(&opt, 0, sizeof opt);
  opt.struct_size = sizeof opt;
  opt.sha256 = "0000000000000000000000000000000000000000000000000000000000000000";
  EXPECT_ERR(quant_plugin_load_ex(PLUGIN, &opt, NULL), QUANT_ERROR_PLUGIN, "was expected");
  EXPECT_ERR(quant_quantizer_create(&cfg, &q), QUANT_ERROR_UNSUPPORTED, "mxfp6");

  /* The right digest: loaded and listed. */
  opt.sha256 = digest;
  opt.call_timeout_ms = 30000;
  EXPECT_OK(quant_plugin_load_ex(PLUGIN, &opt, &index));
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_OK(quant_plugin_get_info(index, &info));
  CHECK(strcmp(info.name, "mxfp6") == 0 && info.status == QUANT_OK && info.num_formats == 1 && info.num_kernels == 1);
  CHECK(info.abi_version == 1);
  EXPECT_OK(quant_plugin_get_format(index, 0, &fname));
  CHECK(fname != NULL && strcmp(fname, "mxfp6") == 0);
  memset(&kinfo, 0, sizeof kinfo);
  kinfo.struct_size = sizeof kinfo;
  EXPECT_OK(quant_plugin_get_kernel(index, 0, &kinfo));
  CHECK(kinfo.device_type == kDLCPU && (kinfo.ops & QUANT_OP_QUANTIZE) && kinfo.defines_format);

  /* Quantize, from one thread and from 16 at once. */
  cfg.element = QUANT_ELEMENT_E2M3;
  EXPECT_OK(quant_quantizer_create(&cfg, &q));
  CHECK(quantize_check(q, x) == 0);
  {
    /* The data buffers are DLPack FP6 views: 4 codes in 3 bytes, rows of
     * 4*ceil(K/4) elements; columnwise transposed. */
    uint16_t xb[M * K] = {0};
    int64_t shape[2] = {M, K};
    DLTensor in = check_tensor(xb, kDLBfloat, 16, 2, shape), v;
    quant_quantizer *q2 = NULL;
    quant_qtensor *t = NULL;
    quant_quantizer_config c2 = cfg;
    c2.element = QUANT_ELEMENT_E3M2;
    EXPECT_OK(quant_quantizer_create(&c2, &q2));
    EXPECT_OK(quant_quantizer_set_usage(q2, QUANT_USAGE_ROWWISE | QUANT_USAGE_COLUMNWISE));
    EXPECT_OK(quant_quantize(q2, &in, NULL, &t));
    EXPECT_OK(quant_qtensor_buffer(t, QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_DATA, &v));
    CHECK(v.dtype.code == kDLFloat6_e3m2fn && v.dtype.bits == 6 && v.ndim == 2 && v.shape[0] == M && v.shape[1] == 72);
    EXPECT_OK(quant_qtensor_buffer(t, QUANT_DIRECTION_COLUMNWISE, QUANT_BUFFER_DATA, &v));
    CHECK(v.dtype.code == kDLFloat6_e3m2fn && v.dtype.bits == 6 && v.shape[0] == K && v.shape[1] == 4);
    EXPECT_OK(quant_qtensor_buffer(t, QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_SCALE_INV, &v));
    CHECK(v.dtype.code == kDLFloat8_e8m0fnu && v.shape[0] == M && v.shape[1] == 3);
    quant_qtensor_free(t);
    quant_quantizer_free(q2);
  }
  shared_q = q;
  for (i = 0; i < 16; i++) CHECK(pthread_create(&th[i], NULL, thread_body, &bad[i]) == 0);
  for (i = 0; i < 16; i++) {
    pthread_join(th[i], NULL);
    CHECK(bad[i] == 0);
  }

  /* The CPU GEMM takes mxfp6 operands (emulated). */
  {
    quant_gemm_support_entry s;
    DLDevice cpu = {kDLCPU, 0};
    memset(&s, 0, sizeof s);
    EXPECT_OK(quant_gemm_support(cpu, "mxfp6", "mxfp8", &s));
    CHECK(s.level == QUANT_GEMM_EMULATED);
  }

  /* quant_shutdown stops it: calls fail with the reason, the list says so. */
  EXPECT_OK(quant_shutdown());
  {
    uint16_t xb[M * K] = {0};
    int64_t shape[2] = {M, K};
    DLTensor in = check_tensor(xb, kDLBfloat, 16, 2, shape);
    quant_qtensor *t = NULL;
    EXPECT_ERR(quant_quantize(q, &in, NULL, &t), QUANT_ERROR_PLUGIN, "quant_shutdown");
  }
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_OK(quant_plugin_get_info(index, &info));
  CHECK(info.status == QUANT_ERROR_PLUGIN && strstr(info.message, "quant_shutdown") != NULL);

  /* Loading it again, listed in the manifest this time, brings it back. */
  setenv("LIBQUANT_PLUGIN_MANIFEST", MANIFEST, 1);
  EXPECT_OK(quant_plugin_load(PLUGIN, NULL));
  CHECK(quantize_check(q, x) == 0);
  quant_quantizer_free(q);
  EXPECT_OK(quant_shutdown());
  return check_summary("test_goplugin");
}
