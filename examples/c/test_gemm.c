/* C ABI tests of issue 5: quant_gemm, the support table, hybrid quantizers,
 * persistent tensors and in-place re-quantization, recipes (built-in, callback,
 * rule table), and bad input for every new entry point. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "demo_data.h"

static DLTensor f32(float *data, int64_t *shape) { return check_tensor(data, kDLFloat, 32, 2, shape); }

static quant_quantizer *make_quantizer(const char *format, int element, uint32_t usage) {
  quant_quantizer_config cfg = check_config(format);
  quant_quantizer *q = NULL;
  cfg.element = element;
  cfg.usage = usage;
  EXPECT_OK(quant_quantizer_create(&cfg, &q));
  return q;
}

static quant_qtensor *quantize_new(quant_quantizer *q, float *x, int64_t rows, int64_t cols) {
  int64_t *shape = malloc(2 * sizeof *shape);
  DLTensor in;
  quant_qtensor *t = NULL;
  shape[0] = rows;
  shape[1] = cols;
  in = f32(x, shape);
  EXPECT_OK(quant_quantize(q, &in, NULL, &t));
  free(shape);
  return t;
}

/* Dequantizes one direction of t ([rows, cols]) into a new FP32 array. */
static float *dequantize_dir(const quant_qtensor *t, uint32_t dir, int64_t rows, int64_t cols) {
  float *out = malloc((size_t)(rows * cols) * sizeof *out);
  int64_t shape[2];
  DLTensor o;
  shape[0] = rows;
  shape[1] = cols;
  o = f32(out, shape);
  EXPECT_OK(quant_dequantize(t, dir, &o, NULL));
  return out;
}

static double gamma_n(int n) {
  double u = ldexp(1.0, -24);
  return n * u / (1 - n * u);
}

/* Checks d (FP32 [m, n]) against alpha*op(A)*op(B) (+ bias) in double, where
 * a and b are the dequantized operands as stored ([m,k] or [k,m]; [k,n] or
 * [n,k]). The bound is host/gemm_test.go's: FP32 accumulation of K products
 * and ≤ 8 more roundings, gamma_{K+8} * (|alpha| sum|a b| + |bias|), plus the
 * output rounding u_out * (|r| + e). Returns the number of elements out of it. */
static int check_product(const float *d, const float *a, const float *b, const float *bias, int m, int n, int k,
                         int transa, int transb, float alpha, double u_out) {
  int i, j, p, bad = 0;
  for (i = 0; i < m; i++) {
    for (j = 0; j < n; j++) {
      double s = 0, sa = 0, r, e, bound;
      for (p = 0; p < k; p++) {
        double x = (double)(transa ? a[p * m + i] : a[i * k + p]) * (double)(transb ? b[j * k + p] : b[p * n + j]);
        s += x;
        sa += fabs(x);
      }
      r = alpha * s;
      sa = fabs(alpha) * sa;
      if (bias) {
        r += bias[j];
        sa += fabs(bias[j]);
      }
      e = gamma_n(k + 8) * sa + (k + 8) * ldexp(1.0, -149);
      bound = e + u_out * (fabs(r) + e);
      if (!(fabs(d[i * n + j] - r) <= bound)) {
        if (bad < 3) fprintf(stderr, "D[%d,%d] = %.9g, want %.9g (bound %.3g)\n", i, j, d[i * n + j], r, bound);
        bad++;
      }
    }
  }
  return bad;
}

static quant_gemm_args gemm_args(void) {
  quant_gemm_args g;
  memset(&g, 0, sizeof g);
  g.struct_size = sizeof g;
  return g;
}

/* fp8 x fp8 in the four op combinations, BF16 output with a bias, a dense
 * operand, C and accumulation. */
static void test_gemm(void) {
  enum { M = 24, N = 20, K = 72 };
  float *xa = malloc(M * K * sizeof(float)), *xb = malloc(K * N * sizeof(float));
  float d[M * N], bias[N];
  int64_t dshape[2] = {M, N}, bshape[1] = {N};
  int ta, tb, i;
  quant_quantizer *q = make_quantizer("fp8", QUANT_ELEMENT_E4M3, 0);
  demo_fill(xa, M * K, 1.0);
  demo_fill(xb, K * N, 0.5);
  demo_fill(bias, N, 1.0);
  for (ta = 0; ta < 2; ta++) {
    for (tb = 0; tb < 2; tb++) {
      /* A is stored [M,K] or, transposed, [K,M]; B [K,N] or [N,K]. */
      quant_qtensor *a = quantize_new(q, xa, ta ? K : M, ta ? M : K);
      quant_qtensor *b = quantize_new(q, xb, tb ? N : K, tb ? K : N);
      /* The rule: A contracts over its last dim unless transposed. */
      float *av = dequantize_dir(a, ta ? QUANT_DIRECTION_COLUMNWISE : QUANT_DIRECTION_ROWWISE, ta ? K : M, ta ? M : K);
      float *bv = dequantize_dir(b, tb ? QUANT_DIRECTION_ROWWISE : QUANT_DIRECTION_COLUMNWISE, tb ? N : K, tb ? K : N);
      quant_gemm_args g = gemm_args();
      DLTensor dt = f32(d, dshape);
      float alpha = 0.5f;
      g.a.qtensor = a;
      g.a.trans = ta;
      g.b.qtensor = b;
      g.b.trans = tb;
      g.alpha = &alpha;
      g.d = &dt;
      EXPECT_OK(quant_gemm(&g));
      CHECK(check_product(d, av, bv, NULL, M, N, K, ta, tb, alpha, ldexp(1.0, -24)) == 0);
      quant_qtensor_free(a);
      quant_qtensor_free(b);
      free(av);
      free(bv);
    }
  }

  /* BF16 output, bias, and a dense B. */
  {
    quant_qtensor *a = quantize_new(q, xa, M, K);
    float *av = dequantize_dir(a, QUANT_DIRECTION_ROWWISE, M, K);
    uint16_t d16[M * N];
    float d32[M * N];
    int64_t kn[2] = {K, N};
    DLTensor bt = f32(xb, kn), dt = check_tensor(d16, kDLBfloat, 16, 2, dshape), bi = check_tensor(bias, kDLFloat, 32, 1, bshape);
    quant_gemm_args g = gemm_args();
    g.a.qtensor = a;
    g.b.tensor = &bt;
    g.bias = &bi;
    g.d = &dt;
    EXPECT_OK(quant_gemm(&g));
    for (i = 0; i < M * N; i++) d32[i] = demo_from_bf16(d16[i]);
    CHECK(check_product(d32, av, xb, bias, M, N, K, 0, 0, 1.0f, ldexp(1.0, -8)) == 0);

    /* C = D (beta 1 by default) and accumulate: D = 2*old + 2*A*B. */
    {
      float first[M * N], twice[M * N];
      DLTensor df = f32(d, dshape);
      quant_gemm_args h = gemm_args();
      h.a.qtensor = a;
      h.b.tensor = &bt;
      h.d = &df;
      EXPECT_OK(quant_gemm(&h));
      memcpy(first, d, sizeof first);
      h.c = &df;
      h.accumulate = 1;
      EXPECT_OK(quant_gemm(&h)); /* d = A*B + d + d */
      for (i = 0; i < M * N; i++) twice[i] = first[i] * 3.0f;
      /* Three copies of the same sum: at most two more roundings each. */
      for (i = 0; i < M * N; i++) CHECK(fabs(d[i] - twice[i]) <= 4 * ldexp(1.0, -24) * fabs(twice[i]) + 1e-30);
    }
    quant_qtensor_free(a);
    free(av);
  }
  quant_quantizer_free(q);
  free(xa);
  free(xb);
}

static void test_gemm_errors(void) {
  float x[8 * 16], y[16 * 4], d[8 * 4];
  int64_t s816[2] = {8, 16}, s164[2] = {16, 4}, s84[2] = {8, 4}, s48[2] = {4, 8};
  quant_quantizer *row_only = make_quantizer("fp8", 0, QUANT_USAGE_ROWWISE);
  quant_qtensor *xq, *freed;
  DLTensor yt = f32(y, s164), dt = f32(d, s84), bad_d = f32(d, s48), yt_gpu = f32(y, s164), dt_gpu = f32(d, s84),
           xt_gpu = f32(x, s816);
  quant_gemm_args g;
  float beta = 2;
  demo_fill(x, 8 * 16, 1.0);
  demo_fill(y, 16 * 4, 1.0);
  xq = quantize_new(row_only, x, 8, 16);
  freed = quantize_new(row_only, x, 8, 16);
  quant_qtensor_free(freed);

  EXPECT_ERR(quant_gemm(NULL), QUANT_ERROR_INVALID_ARGUMENT, "args");
  g = gemm_args();
  g.struct_size = 8;
  EXPECT_ERR(quant_gemm(&g), QUANT_ERROR_INVALID_ARGUMENT, "struct_size");
  g = gemm_args();
  g.b.tensor = &yt;
  g.d = &dt;
  EXPECT_ERR(quant_gemm(&g), QUANT_ERROR_INVALID_ARGUMENT, "a: neither");
  g.a.qtensor = xq;
  g.a.tensor = &yt;
  EXPECT_ERR(quant_gemm(&g), QUANT_ERROR_INVALID_ARGUMENT, "a: both");
  g.a.tensor = NULL;
  g.a.qtensor = freed;
  EXPECT_ERR(quant_gemm(&g), QUANT_ERROR_INVALID_HANDLE, "a.qtensor");
  g.a.qtensor = (const quant_qtensor *)row_only;
  EXPECT_ERR(quant_gemm(&g), QUANT_ERROR_INVALID_HANDLE, "not a quantized tensor");
  g.a.qtensor = xq;
  g.a.trans = 1; /* contracts xq over its first dim: needs columnwise data */
  EXPECT_ERR(quant_gemm(&g), QUANT_ERROR_STATE, "a: ");
  EXPECT_ERR(quant_gemm(&g), QUANT_ERROR_STATE, "columnwise");
  g.a.trans = 0;
  g.b.trans = 1;
  EXPECT_ERR(quant_gemm(&g), QUANT_ERROR_INVALID_ARGUMENT, "contraction dims differ");
  g.b.trans = 0;
  g.d = &bad_d;
  EXPECT_ERR(quant_gemm(&g), QUANT_ERROR_INVALID_ARGUMENT, "d: shape");
  g.d = NULL;
  EXPECT_ERR(quant_gemm(&g), QUANT_ERROR_INVALID_ARGUMENT, "d: is NULL");
  g.d = &dt;
  g.beta = &beta;
  EXPECT_ERR(quant_gemm(&g), QUANT_ERROR_INVALID_ARGUMENT, "beta");
  g.beta = NULL;
  EXPECT_OK(quant_gemm(&g));
  yt_gpu.device.device_type = kDLCUDA;
  g.b.tensor = &yt_gpu;
  EXPECT_ERR(quant_gemm(&g), QUANT_ERROR_INVALID_ARGUMENT, "b: on cuda:0 but a is on cpu");
  /* All on a GPU, and no GPU plugin with a GEMM kernel (none exists yet). */
  xt_gpu.device.device_type = kDLCUDA;
  dt_gpu.device.device_type = kDLCUDA;
  g.a.qtensor = NULL;
  g.a.tensor = &xt_gpu;
  g.d = &dt_gpu;
  EXPECT_ERR(quant_gemm(&g), QUANT_ERROR_DEVICE_UNAVAILABLE, "cuda:0");
  quant_qtensor_free(xq);
  quant_quantizer_free(row_only);
}

/* The capability table: CPU emulates every pair, CUDA has nothing without a
 * plugin. Returns the number of registered formats (the table is n x n). */
static size_t test_support(void) {
  DLDevice cpu = {kDLCPU, 0}, cuda = {kDLCUDA, 0}, vulkan = {kDLVulkan, 0};
  quant_gemm_support_entry e, *table;
  size_t count = 0, n = 0, i;
  EXPECT_OK(quant_gemm_support(cpu, "fp8", "identity", &e));
  CHECK(e.level == QUANT_GEMM_EMULATED);
  CHECK(strcmp(e.format_a, "fp8") == 0 && strcmp(e.format_b, "identity") == 0);
  EXPECT_OK(quant_gemm_support(cuda, "fp8", "fp8", &e));
  CHECK(e.level == QUANT_GEMM_UNSUPPORTED);
  CHECK(strstr(e.reason, "no loaded GPU plugin provides one") != NULL);
  EXPECT_ERR(quant_gemm_support(cpu, "fp9", "fp8", &e), QUANT_ERROR_INVALID_ARGUMENT, "format_a");
  EXPECT_ERR(quant_gemm_support(cpu, "fp8", NULL, &e), QUANT_ERROR_INVALID_ARGUMENT, "format_b");
  EXPECT_ERR(quant_gemm_support(cpu, "fp8", "fp8", NULL), QUANT_ERROR_INVALID_ARGUMENT, "entry");
  EXPECT_ERR(quant_gemm_support(vulkan, "fp8", "fp8", &e), QUANT_ERROR_UNSUPPORTED, "device");

  EXPECT_OK(quant_gemm_support_table(cpu, NULL, 0, &count));
  while (n * n < count) n++;
  CHECK(n * n == count && n >= 2);
  table = calloc(count, sizeof *table);
  EXPECT_ERR(quant_gemm_support_table(cpu, table, count - 1, &count), QUANT_ERROR_BUFFER_TOO_SMALL, "capacity");
  EXPECT_OK(quant_gemm_support_table(cpu, table, count, &count));
  for (i = 0; i < count; i++) CHECK(table[i].level == QUANT_GEMM_EMULATED);
  EXPECT_OK(quant_gemm_support_table(cuda, table, count, &count));
  for (i = 0; i < count; i++) CHECK(table[i].level == QUANT_GEMM_UNSUPPORTED);
  EXPECT_ERR(quant_gemm_support_table(cpu, table, count, NULL), QUANT_ERROR_INVALID_ARGUMENT, "count");
  free(table);
  return n;
}

/* Whether a format is registered, from the support table. */
static int format_registered(const char *name) {
  DLDevice cpu = {kDLCPU, 0};
  quant_gemm_support_entry e;
  return quant_gemm_support(cpu, name, name, &e) == QUANT_OK;
}

static void test_hybrid(void) {
  quant_quantizer *fp8 = make_quantizer("fp8", 0, 0), *id = make_quantizer("identity", 0, 0), *h = NULL, *h2 = NULL,
                  *freed = make_quantizer("fp8", 0, 0);
  float x[32 * 16], *row, *col;
  quant_qtensor *t;
  quant_qtensor_info info;
  quant_quantizer_free(freed);
  demo_fill(x, 32 * 16, 1.0);
  EXPECT_OK(quant_quantizer_create_hybrid(fp8, id, QUANT_COLUMNWISE_SOURCE_ROWWISE_DEQUANTIZED, &h));
  t = quantize_new(h, x, 32, 16);
  info.struct_size = sizeof info;
  EXPECT_OK(quant_qtensor_get_info(t, &info));
  CHECK(strcmp(info.rowwise_format, "fp8") == 0);
  CHECK(strcmp(info.columnwise_format, "identity") == 0);
  /* rowwise_dequantized: the identity side holds the dequantized FP8 values. */
  row = dequantize_dir(t, QUANT_DIRECTION_ROWWISE, 32, 16);
  col = dequantize_dir(t, QUANT_DIRECTION_COLUMNWISE, 32, 16);
  CHECK(memcmp(row, col, sizeof x) == 0);
  EXPECT_OK(quant_qtensor_update_usage(t, QUANT_USAGE_ROWWISE | QUANT_USAGE_COLUMNWISE, NULL)); /* has both */
  EXPECT_OK(quant_qtensor_update_usage(t, QUANT_USAGE_COLUMNWISE, NULL));
  EXPECT_ERR(quant_qtensor_update_usage(t, QUANT_USAGE_ROWWISE | QUANT_USAGE_COLUMNWISE, NULL), QUANT_ERROR_STATE, "hybrid");
  quant_qtensor_free(t);
  /* usage bits decide which sides run */
  EXPECT_OK(quant_quantizer_set_usage(h, QUANT_USAGE_COLUMNWISE));
  t = quantize_new(h, x, 32, 16);
  EXPECT_OK(quant_qtensor_get_info(t, &info));
  CHECK(info.usage == QUANT_USAGE_COLUMNWISE && info.rowwise_format[0] == 0);
  quant_qtensor_free(t);

  EXPECT_ERR(quant_quantizer_create_hybrid(NULL, id, 0, &h2), QUANT_ERROR_INVALID_ARGUMENT, "rowwise");
  EXPECT_ERR(quant_quantizer_create_hybrid(fp8, NULL, 0, &h2), QUANT_ERROR_INVALID_ARGUMENT, "columnwise");
  EXPECT_ERR(quant_quantizer_create_hybrid(fp8, id, 0, NULL), QUANT_ERROR_INVALID_ARGUMENT, "out");
  EXPECT_ERR(quant_quantizer_create_hybrid(fp8, fp8, 0, &h2), QUANT_ERROR_INVALID_ARGUMENT, "different");
  EXPECT_ERR(quant_quantizer_create_hybrid(fp8, id, 2, &h2), QUANT_ERROR_INVALID_ARGUMENT, "columnwise_source");
  EXPECT_ERR(quant_quantizer_create_hybrid(h, id, 0, &h2), QUANT_ERROR_INVALID_ARGUMENT, "hybrid");
  EXPECT_ERR(quant_quantizer_create_hybrid(freed, id, 0, &h2), QUANT_ERROR_INVALID_HANDLE, "rowwise");
  CHECK(h2 == NULL);
  /* The hybrid keeps its parts alive. */
  quant_quantizer_free(fp8);
  quant_quantizer_free(id);
  EXPECT_OK(quant_quantizer_set_usage(h, QUANT_USAGE_ROWWISE | QUANT_USAGE_COLUMNWISE));
  t = quantize_new(h, x, 32, 16);
  quant_qtensor_free(t);
  quant_quantizer_free(h);
  free(row);
  free(col);
}

/* Reads the bytes of one buffer of one direction. */
static size_t buffer_bytes(const quant_qtensor *t, uint32_t dir, quant_buffer_kind kind, void **data) {
  DLTensor v;
  size_t n = 1;
  int i;
  EXPECT_OK(quant_qtensor_buffer(t, dir, kind, &v));
  for (i = 0; i < v.ndim; i++) n *= (size_t)v.shape[i];
  *data = v.data;
  return n * v.dtype.bits / 8;
}

static int same_direction(const quant_qtensor *a, const quant_qtensor *b, uint32_t dir) {
  int k;
  for (k = QUANT_BUFFER_DATA; k <= QUANT_BUFFER_SCALE_INV; k++) {
    void *pa, *pb;
    size_t na = buffer_bytes(a, dir, (quant_buffer_kind)k, &pa), nb = buffer_bytes(b, dir, (quant_buffer_kind)k, &pb);
    if (na != nb || memcmp(pa, pb, na) != 0) return 0;
  }
  return 1;
}

/* A weight alternates training steps (usage both) and inference steps
 * (rowwise only), updated every step and re-quantized in place: a persistent
 * tensor keeps fresh columnwise bytes, the buffers keep their addresses, and a
 * temporary one loses its columnwise data on inference steps. */
static void test_persistent(void) {
  enum { R = 32, C = 48 };
  const char *stages[] = {"train", "infer", "infer", "train", "infer", "train"};
  float w[R * C];
  int64_t shape[2] = {R, C};
  DLTensor wt = f32(w, shape);
  quant_quantizer *q = make_quantizer("fp8", 0, QUANT_USAGE_ROWWISE), *both = make_quantizer("fp8", 0, 0);
  quant_qtensor *p = NULL, *tmp = NULL;
  quant_qtensor_info info;
  void *addr_row, *addr_col = NULL;
  size_t s;
  demo_fill(w, R * C, 0.1);
  EXPECT_OK(quant_quantize(q, &wt, NULL, &p));
  EXPECT_OK(quant_quantize(q, &wt, NULL, &tmp));
  EXPECT_OK(quant_qtensor_set_persistent(p, 1));
  info.struct_size = sizeof info;
  EXPECT_OK(quant_qtensor_get_info(p, &info));
  CHECK(info.persistent == 1);
  buffer_bytes(p, QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_DATA, &addr_row);
  for (s = 0; s < sizeof stages / sizeof *stages; s++) {
    int train = strcmp(stages[s], "train") == 0;
    quant_qtensor *fresh = NULL;
    void *now;
    EXPECT_OK(quant_quantizer_set_usage(q, train ? QUANT_USAGE_ROWWISE | QUANT_USAGE_COLUMNWISE : QUANT_USAGE_ROWWISE));
    demo_fill(w, R * C, 0.1); /* the optimizer step */
    EXPECT_OK(quant_quantize_into(q, &wt, NULL, p));
    EXPECT_OK(quant_quantize_into(q, &wt, NULL, tmp));
    EXPECT_OK(quant_quantize(both, &wt, NULL, &fresh));
    EXPECT_OK(quant_qtensor_get_info(p, &info));
    CHECK(info.usage == 3u); /* trained at step 0: both, from then on */
    CHECK(same_direction(p, fresh, QUANT_DIRECTION_ROWWISE));
    CHECK(same_direction(p, fresh, QUANT_DIRECTION_COLUMNWISE)); /* never stale */
    buffer_bytes(p, QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_DATA, &now);
    CHECK(now == addr_row); /* re-quantized in place */
    buffer_bytes(p, QUANT_DIRECTION_COLUMNWISE, QUANT_BUFFER_DATA, &now);
    if (addr_col == NULL) addr_col = now;
    CHECK(now == addr_col);
    EXPECT_OK(quant_qtensor_get_info(tmp, &info));
    CHECK(info.usage == (train ? 3u : 1u));
    quant_qtensor_free(fresh);
  }
  EXPECT_ERR(quant_qtensor_update_usage(p, QUANT_USAGE_ROWWISE, NULL), QUANT_ERROR_STATE, "persistent");
  EXPECT_OK(quant_qtensor_set_persistent(p, 0));
  EXPECT_OK(quant_qtensor_update_usage(p, QUANT_USAGE_ROWWISE, NULL));
  EXPECT_ERR(quant_qtensor_set_persistent(NULL, 1), QUANT_ERROR_INVALID_ARGUMENT, "tensor");
  quant_qtensor_free(tmp);
  EXPECT_ERR(quant_qtensor_set_persistent(tmp, 1), QUANT_ERROR_INVALID_HANDLE, "tensor");
  EXPECT_ERR(quant_qtensor_set_persistent((quant_qtensor *)q, 1), QUANT_ERROR_INVALID_HANDLE, "tensor");
  quant_qtensor_free(p);
  quant_quantizer_free(q);
  quant_quantizer_free(both);
}

static quant_role role(const char *module, const char *tensor, const char *name) {
  quant_role r;
  r.module_type = module;
  r.tensor_type = tensor;
  r.name = name;
  return r;
}

/* The element dtype code of a quantizer's rowwise data (E4M3 10, E5M2 12). */
static int rowwise_dtype_code(quant_quantizer *q) {
  float x[4 * 32];
  quant_qtensor *t;
  DLTensor v;
  int code;
  demo_fill(x, 4 * 32, 1.0);
  t = quantize_new(q, x, 4, 32);
  EXPECT_OK(quant_qtensor_buffer(t, QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_DATA, &v));
  code = v.dtype.code;
  quant_qtensor_free(t);
  return code;
}

static quant_quantizer *stale_handle;

/* The factory of the callback recipe: E4M3 for forward tensors, E5M2 for
 * grads, identity for "output"; misbehaves on purpose for some names. */
static quant_status factory(void *user_data, const quant_role *r, quant_quantizer **out) {
  quant_quantizer_config cfg = check_config("fp8");
  int *calls = (int *)user_data;
  (*calls)++;
  if (strcmp(r->name, "null") == 0) return QUANT_OK;
  if (strcmp(r->name, "fail") == 0) return quant_quantizer_create(NULL, out); /* a failing nested call */
  if (strcmp(r->name, "stale") == 0) {
    *out = stale_handle;
    return QUANT_OK;
  }
  if (strcmp(r->tensor_type, "output") == 0) cfg.format = "identity";
  if (strcmp(r->tensor_type, "grad_output") == 0) cfg.element = QUANT_ELEMENT_E5M2;
  return quant_quantizer_create(&cfg, out);
}

static void test_recipes(void) {
  quant_recipe_config cfg;
  quant_recipe *r = NULL;
  quant_quantizer *q = NULL;
  quant_role in = role("linear", "input", "fc1"), grad = role("linear", "grad_output", "fc1");
  int calls = 0;
  const char *needs[] = {"fp8_block", "mxfp8", "nvfp4"};
  int kinds[] = {QUANT_RECIPE_FP8_BLOCK, QUANT_RECIPE_MXFP8, QUANT_RECIPE_NVFP4};
  size_t i;

  /* Built-in: FP8 delayed (HYBRID: E4M3 forward, E5M2 grads). */
  memset(&cfg, 0, sizeof cfg);
  cfg.struct_size = sizeof cfg;
  cfg.kind = QUANT_RECIPE_FP8_DELAYED;
  cfg.amax_history_len = 16;
  EXPECT_OK(quant_recipe_create(&cfg, &r));
  EXPECT_OK(quant_recipe_quantizer(r, &in, &q));
  CHECK(rowwise_dtype_code(q) == kDLFloat8_e4m3fn);
  EXPECT_OK(quant_delayed_scaling_state(q, QUANT_DIRECTION_ANY, NULL, NULL));
  quant_quantizer_free(q);
  EXPECT_OK(quant_recipe_quantizer(r, &grad, &q));
  CHECK(rowwise_dtype_code(q) == kDLFloat8_e5m2);
  quant_quantizer_free(q);
  {
    quant_role bias = role("linear", "bias", "");
    EXPECT_ERR(quant_recipe_quantizer(r, &bias, &q), QUANT_ERROR_INVALID_ARGUMENT, "tensor_type \"bias\"");
  }
  EXPECT_ERR(quant_recipe_quantizer(r, NULL, &q), QUANT_ERROR_INVALID_ARGUMENT, "role");
  EXPECT_ERR(quant_recipe_quantizer(r, &in, NULL), QUANT_ERROR_INVALID_ARGUMENT, "out");
  EXPECT_OK(quant_recipe_free(r));
  EXPECT_ERR(quant_recipe_quantizer(r, &in, &q), QUANT_ERROR_INVALID_HANDLE, "recipe");
  EXPECT_ERR(quant_recipe_free(r), QUANT_ERROR_INVALID_HANDLE, "recipe");
  EXPECT_OK(quant_recipe_free(NULL));

  /* The other built-ins run where their formats are registered, and say
   * which format is missing where not. */
  for (i = 0; i < sizeof kinds / sizeof *kinds; i++) {
    cfg.kind = kinds[i];
    cfg.amax_history_len = 0;
    if (format_registered(needs[i])) {
      quant_role w = role("linear", "weight", "fc1");
      EXPECT_OK(quant_recipe_create(&cfg, &r));
      EXPECT_OK(quant_recipe_quantizer(r, &w, &q));
      quant_quantizer_free(q);
      quant_recipe_free(r);
    } else {
      EXPECT_ERR(quant_recipe_create(&cfg, &r), QUANT_ERROR_UNSUPPORTED, needs[i]);
    }
  }
  cfg.kind = 42;
  EXPECT_ERR(quant_recipe_create(&cfg, &r), QUANT_ERROR_INVALID_ARGUMENT, "config.kind");
  EXPECT_ERR(quant_recipe_create(NULL, &r), QUANT_ERROR_INVALID_ARGUMENT, "config");
  cfg.kind = QUANT_RECIPE_FP8_CURRENT;
  EXPECT_ERR(quant_recipe_create(&cfg, NULL), QUANT_ERROR_INVALID_ARGUMENT, "out");

  /* Callback recipe. */
  EXPECT_OK(quant_recipe_create_callback(factory, &calls, &r));
  EXPECT_OK(quant_recipe_quantizer(r, &grad, &q));
  CHECK(rowwise_dtype_code(q) == kDLFloat8_e5m2);
  quant_quantizer_free(q);
  {
    quant_role out = role("linear", "output", "fc1"), null_role = role("linear", "input", "null"),
               fail = role("linear", "input", "fail"), stale = role("linear", "input", "stale");
    quant_qtensor_info info;
    float x[4 * 8];
    quant_qtensor *t;
    EXPECT_OK(quant_recipe_quantizer(r, &out, &q));
    demo_fill(x, 32, 1.0);
    t = quantize_new(q, x, 4, 8);
    info.struct_size = sizeof info;
    EXPECT_OK(quant_qtensor_get_info(t, &info));
    CHECK(strcmp(info.rowwise_format, "identity") == 0);
    quant_qtensor_free(t);
    quant_quantizer_free(q);
    q = NULL;
    EXPECT_ERR(quant_recipe_quantizer(r, &null_role, &q), QUANT_ERROR_INVALID_ARGUMENT, "name \"null\"");
    EXPECT_ERR(quant_recipe_quantizer(r, &null_role, &q), QUANT_ERROR_INVALID_ARGUMENT, "identity");
    EXPECT_ERR(quant_recipe_quantizer(r, &fail, &q), QUANT_ERROR_INVALID_ARGUMENT, "callback: returned QUANT_ERROR_INVALID_ARGUMENT");
    stale_handle = make_quantizer("fp8", 0, 0);
    quant_quantizer_free(stale_handle);
    EXPECT_ERR(quant_recipe_quantizer(r, &stale, &q), QUANT_ERROR_INVALID_HANDLE, "not a live quantizer");
    CHECK(q == NULL);
  }
  CHECK(calls == 6);
  quant_recipe_free(r);
  EXPECT_ERR(quant_recipe_create_callback(NULL, NULL, &r), QUANT_ERROR_INVALID_ARGUMENT, "callback");
  EXPECT_ERR(quant_recipe_create_callback(factory, NULL, NULL), QUANT_ERROR_INVALID_ARGUMENT, "out");

  /* Rule table: first match wins, empty fields match anything. */
  {
    quant_quantizer *e5 = make_quantizer("fp8", QUANT_ELEMENT_E5M2, 0), *e4 = make_quantizer("fp8", 0, 0),
                    *id = make_quantizer("identity", 0, 0);
    quant_recipe_rule rules[3];
    quant_role fc2w = role("linear", "weight", "fc2"), fc1w = role("linear", "weight", "fc1"),
               dpa = role("dpa", "qkv", "attn");
    rules[0].pattern = role(NULL, "grad_output", NULL);
    rules[0].quantizer = e5;
    rules[1].pattern = role("", "weight", "fc2");
    rules[1].quantizer = id;
    rules[2].pattern = role("linear", NULL, NULL);
    rules[2].quantizer = e4;
    EXPECT_OK(quant_recipe_create_rules(rules, 3, &r));
    quant_quantizer_free(e5); /* the recipe keeps its own references */
    quant_quantizer_free(e4);
    quant_quantizer_free(id);
    EXPECT_OK(quant_recipe_quantizer(r, &grad, &q));
    CHECK(rowwise_dtype_code(q) == kDLFloat8_e5m2);
    quant_quantizer_free(q);
    EXPECT_OK(quant_recipe_quantizer(r, &fc1w, &q));
    CHECK(rowwise_dtype_code(q) == kDLFloat8_e4m3fn);
    quant_quantizer_free(q);
    EXPECT_OK(quant_recipe_quantizer(r, &fc2w, &q));
    CHECK(rowwise_dtype_code(q) == kDLFloat);
    quant_quantizer_free(q);
    EXPECT_ERR(quant_recipe_quantizer(r, &dpa, &q), QUANT_ERROR_INVALID_ARGUMENT, "module_type \"dpa\", tensor_type \"qkv\"");
    quant_recipe_free(r);
    EXPECT_ERR(quant_recipe_create_rules(NULL, 1, &r), QUANT_ERROR_INVALID_ARGUMENT, "rules");
    EXPECT_ERR(quant_recipe_create_rules(rules, 0, &r), QUANT_ERROR_INVALID_ARGUMENT, "count");
    EXPECT_ERR(quant_recipe_create_rules(rules, 3, NULL), QUANT_ERROR_INVALID_ARGUMENT, "out");
    EXPECT_ERR(quant_recipe_create_rules(rules, 3, &r), QUANT_ERROR_INVALID_HANDLE, "rules[0].quantizer");
    rules[0].quantizer = NULL;
    EXPECT_ERR(quant_recipe_create_rules(rules, 1, &r), QUANT_ERROR_INVALID_ARGUMENT, "rules[0].quantizer");
  }
}

/* Issue 18 (spec §14): a [1, 256] (one decode token) and a [45, 4096] (45
 * tokens of an MoE expert) BF16 activation quantize with every format, and
 * multiply through quant_gemm by a [7, K] weight of the same format (Y = X
 * W^T, M and N not multiples of any block), within check_product's bound of
 * the product of the dequantized operands. */
static void test_any_shape(void) {
  static const struct {
    const char *format;
    int block_dims;
  } formats[] = {{"fp8", 0}, {"fp8_block", 1}, {"fp8_block", 2}, {"mxfp8", 0}, {"mxfp4", 0},
                 {"nvfp4", 1}, {"nvfp4", 2}, {"identity", 0}};
  static const int64_t shapes[2][2] = {{1, 256}, {45, 4096}};
  enum { N = 7 };
  size_t f, s;
  int i;
  for (s = 0; s < 2; s++) {
    int m = (int)shapes[s][0], k = (int)shapes[s][1];
    float *x = malloc((size_t)m * k * sizeof *x), *w = malloc((size_t)N * k * sizeof *w);
    uint16_t *xb = malloc((size_t)m * k * sizeof *xb), *wb = malloc((size_t)N * k * sizeof *wb);
    float d[45 * N];
    int64_t xs[2], ws[2], ds[2];
    xs[0] = m, xs[1] = k, ws[0] = N, ws[1] = k, ds[0] = m, ds[1] = N;
    demo_fill(x, (size_t)m * k, 1.0);
    demo_fill(w, (size_t)N * k, 0.05);
    for (i = 0; i < m * k; i++) xb[i] = demo_to_bf16(x[i]);
    for (i = 0; i < N * k; i++) wb[i] = demo_to_bf16(w[i]);
    for (f = 0; f < sizeof formats / sizeof formats[0]; f++) {
      quant_quantizer_config cfg = check_config(formats[f].format);
      quant_quantizer *q = NULL;
      quant_qtensor *a = NULL, *b = NULL;
      DLTensor xin = check_tensor(xb, kDLBfloat, 16, 2, xs), win = check_tensor(wb, kDLBfloat, 16, 2, ws);
      DLTensor dt = f32(d, ds);
      quant_gemm_args g = gemm_args();
      float *av, *bv;
      int bad;
      cfg.block_dims = formats[f].block_dims;
      EXPECT_OK(quant_quantizer_create(&cfg, &q));
      EXPECT_OK(quant_quantize(q, &xin, NULL, &a));
      EXPECT_OK(quant_quantize(q, &win, NULL, &b));
      if (!a || !b) {
        fprintf(stderr, "%s (block_dims %d) [%d, %d]: quantize failed\n", formats[f].format, formats[f].block_dims, m, k);
        quant_qtensor_free(a);
        quant_qtensor_free(b);
        quant_quantizer_free(q);
        continue;
      }
      g.a.qtensor = a;
      g.b.qtensor = b;
      g.b.trans = 1;
      g.d = &dt;
      EXPECT_OK(quant_gemm(&g));
      av = dequantize_dir(a, QUANT_DIRECTION_ROWWISE, m, k);
      bv = dequantize_dir(b, QUANT_DIRECTION_ROWWISE, N, k);
      bad = check_product(d, av, bv, NULL, m, N, k, 0, 1, 1.0f, ldexp(1.0, -24));
      if (bad) fprintf(stderr, "%s (block_dims %d) [%d, %d] x [%d, %d]^T\n", formats[f].format, formats[f].block_dims, m, k, N, k);
      CHECK(bad == 0);
      free(av);
      free(bv);
      quant_qtensor_free(a);
      quant_qtensor_free(b);
      quant_quantizer_free(q);
    }
    free(x);
    free(w);
    free(xb);
    free(wb);
  }
}

int main(void) {
  (void)demo_compare; /* demo_data.h helpers this test does not need */
  test_gemm();
  test_gemm_errors();
  test_any_shape();
  test_support();
  test_hybrid();
  test_persistent();
  test_recipes();
  return check_summary("test_gemm");
}
