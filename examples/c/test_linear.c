/* C ABI tests of issue 6: linear and grouped linear layers, their contexts,
 * backward overrides, the cached quantized weight and delayed scaling, with
 * good and bad input for every entry point. The numerics are checked in depth
 * by linear/linear_test.go; here an identity layer checks every gradient's
 * plumbing against the float64 formulas, and a quantized one checks that the
 * results are close. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "check.h"
#include "demo_data.h"

enum { M = 64, K = 64, N = 32 };

static int64_t x_shape[2] = {M, K}, w_shape[2] = {N, K}, b_shape[1] = {N}, y_shape[2] = {M, N};

static DLTensor f32(float *data, int32_t ndim, int64_t *shape) { return check_tensor(data, kDLFloat, 32, ndim, shape); }

static quant_recipe *preset(int kind) {
  quant_recipe_config cfg;
  quant_recipe *r = NULL;
  memset(&cfg, 0, sizeof cfg);
  cfg.struct_size = sizeof cfg;
  cfg.kind = kind;
  EXPECT_OK(quant_recipe_create(&cfg, &r));
  return r;
}

static quant_recipe *identity_recipe(void) {
  quant_quantizer_config cfg = check_config("identity");
  quant_quantizer *q = NULL;
  quant_recipe *r = NULL;
  quant_recipe_rule rule;
  EXPECT_OK(quant_quantizer_create(&cfg, &q));
  memset(&rule, 0, sizeof rule);
  rule.quantizer = q;
  EXPECT_OK(quant_recipe_create_rules(&rule, 1, &r));
  quant_quantizer_free(q);
  return r;
}

static quant_linear *layer_from(quant_recipe *r, int32_t num_gemms) {
  quant_linear_config cfg;
  quant_linear *l = NULL;
  memset(&cfg, 0, sizeof cfg);
  cfg.struct_size = sizeof cfg;
  cfg.recipe = r;
  cfg.name = "fc1";
  cfg.num_gemms = num_gemms;
  EXPECT_OK(quant_linear_create(&cfg, &l));
  return l;
}

static quant_linear_forward_args fwd_args(DLTensor *x, DLTensor *w, DLTensor *b, DLTensor *y) {
  quant_linear_forward_args a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.input = x;
  a.weight = w;
  a.bias = b;
  a.output = y;
  a.input_requires_grad = 1;
  a.weight_requires_grad = 1;
  return a;
}

static quant_linear_backward_args bwd_args(DLTensor *dy, DLTensor *dx, DLTensor *dw, DLTensor *db) {
  quant_linear_backward_args a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.grad_output = dy;
  a.grad_input = dx;
  a.grad_weight = dw;
  a.grad_bias = db;
  return a;
}

static double gamma_n(int n) {
  double u = ldexp(1.0, -24);
  return n * u / (1 - n * u);
}

/* d (FP32 [m, n]) against sum_p A(i,p) B(p,j) (+ bias[j]) in double, A and B
 * given by strides (so that transposes are views): host/gemm_test.go's bound,
 * gamma_{K+8} (sum |a b| + |bias|). Returns the number of elements out of it. */
static int check_product(const float *d, const float *a, int as_i, int as_p, const float *b, int bs_p, int bs_j,
                         const float *bias, int m, int n, int k) {
  int i, j, p, bad = 0;
  for (i = 0; i < m; i++) {
    for (j = 0; j < n; j++) {
      double s = 0, sa = 0, e;
      for (p = 0; p < k; p++) {
        double x = (double)a[i * as_i + p * as_p] * (double)b[p * bs_p + j * bs_j];
        s += x;
        sa += fabs(x);
      }
      if (bias) {
        s += bias[j];
        sa += fabs(bias[j]);
      }
      e = gamma_n(k + 8) * sa + (k + 8) * ldexp(1.0, -149);
      if (!(fabs(d[i * n + j] - s) <= e)) {
        if (bad < 3) fprintf(stderr, "[%d,%d] = %.9g, want %.9g (bound %.3g)\n", i, j, d[i * n + j], s, e);
        bad++;
      }
    }
  }
  return bad;
}

typedef struct {
  float x[M * K], w[N * K], b[N], y[M * N], dy[M * N], dx[M * K], dw[N * K], db[N];
  DLTensor tx, tw, tb, ty, tdy, tdx, tdw, tdb;
} bufs;

static void init_bufs(bufs *s) {
  demo_fill(s->x, M * K, 1.0);
  demo_fill(s->w, N * K, 0.1);
  demo_fill(s->b, N, 0.5);
  demo_fill(s->dy, M * N, 0.01);
  s->tx = f32(s->x, 2, x_shape);
  s->tw = f32(s->w, 2, w_shape);
  s->tb = f32(s->b, 1, b_shape);
  s->ty = f32(s->y, 2, y_shape);
  s->tdy = f32(s->dy, 2, y_shape);
  s->tdx = f32(s->dx, 2, x_shape);
  s->tdw = f32(s->dw, 2, w_shape);
  s->tdb = f32(s->db, 1, b_shape);
}

/* An identity layer in each mode: Y, dX, dW and db equal the FP32 products
 * of the original values (every mode multiplies the same values then). */
static void test_identity_math(void) {
  static bufs s;
  quant_recipe *r = identity_recipe();
  quant_linear *l = layer_from(r, 0);
  int mode, j, i;
  init_bufs(&s);
  for (mode = 0; mode < 3; mode++) {
    quant_linear_forward_args fa = fwd_args(&s.tx, &s.tw, &s.tb, &s.ty);
    quant_linear_backward_args ba = bwd_args(&s.tdy, &s.tdx, &s.tdw, &s.tdb);
    quant_linear_ctx *ctx = NULL;
    fa.backward_override = mode;
    EXPECT_OK(quant_linear_forward(l, &fa, &ctx));
    EXPECT_OK(quant_linear_backward(ctx, &ba));
    EXPECT_OK(quant_linear_ctx_free(ctx));
    /* Y = X W^T + b; dX = dY W; dW = dY^T X. */
    CHECK(check_product(s.y, s.x, K, 1, s.w, 1, K, s.b, M, N, K) == 0);
    CHECK(check_product(s.dx, s.dy, N, 1, s.w, K, 1, NULL, M, K, N) == 0);
    CHECK(check_product(s.dw, s.dy, 1, N, s.x, K, 1, NULL, N, K, M) == 0);
    for (j = 0; j < N; j++) {
      double sum = 0;
      for (i = 0; i < M; i++) sum += s.dy[i * N + j];
      CHECK(fabs(s.db[j] - sum) <= ldexp(1.0, -23) * fabs(sum) + M * ldexp(1.0, -52));
    }
  }
  quant_linear_free(l);
  quant_recipe_free(r);
}

/* MXFP8 in every mode: results close to the identity layer's (MXFP8's E4M3
 * elements carry 3 mantissa bits: about 2^-4 relative error each, averaged
 * down in the products), contexts report what they keep. */
static void test_mxfp8_modes(void) {
  static bufs s, ref;
  quant_recipe *r = preset(QUANT_RECIPE_MXFP8), *idr = identity_recipe();
  quant_linear *l = layer_from(r, 0), *id = layer_from(idr, 0);
  int mode;
  quant_linear_ctx *ctx = NULL;
  init_bufs(&s);
  memcpy(&ref, &s, sizeof s);
  ref.tx.data = ref.x, ref.tw.data = ref.w, ref.tb.data = ref.b, ref.ty.data = ref.y, ref.tdy.data = ref.dy;
  ref.tdx.data = ref.dx, ref.tdw.data = ref.dw, ref.tdb.data = ref.db;
  {
    quant_linear_forward_args fa = fwd_args(&ref.tx, &ref.tw, &ref.tb, &ref.ty);
    quant_linear_backward_args ba = bwd_args(&ref.tdy, &ref.tdx, &ref.tdw, &ref.tdb);
    EXPECT_OK(quant_linear_forward(id, &fa, &ctx));
    EXPECT_OK(quant_linear_backward(ctx, &ba));
    EXPECT_OK(quant_linear_ctx_free(ctx));
  }
  for (mode = 0; mode < 3; mode++) {
    quant_linear_forward_args fa = fwd_args(&s.tx, &s.tw, &s.tb, &s.ty);
    quant_linear_backward_args ba = bwd_args(&s.tdy, &s.tdx, &s.tdw, &s.tdb);
    quant_linear_ctx_info info;
    demo_error e;
    fa.backward_override = mode;
    EXPECT_OK(quant_linear_forward(l, &fa, &ctx));
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    EXPECT_OK(quant_linear_ctx_get_info(ctx, &info));
    CHECK(info.num_gemms == 0 && info.used == 0 && info.backward_override == mode);
    CHECK(info.save_original_input == (mode == QUANT_BACKWARD_OVERRIDE_HIGH_PRECISION));
    switch (mode) {
      case QUANT_BACKWARD_OVERRIDE_NONE:
        /* X columnwise: [M, K] E4M3 data + E8M0 scales [pad4(M/32), pad128(K)]. */
        CHECK(info.input_saved == QUANT_LINEAR_SAVED_QUANTIZED && info.input_usage == QUANT_USAGE_COLUMNWISE);
        CHECK(info.input_bytes == (uint64_t)(M * K + 4 * 128));
        CHECK(info.weight_saved == QUANT_LINEAR_SAVED_LAYER_WEIGHT && info.weight_usage == QUANT_USAGE_COLUMNWISE);
        CHECK(info.weight_bytes == (uint64_t)(N * K + 4 * 128));
        CHECK(info.owned_bytes == info.input_bytes);
        break;
      case QUANT_BACKWARD_OVERRIDE_HIGH_PRECISION:
        CHECK(info.input_saved == QUANT_LINEAR_SAVED_ORIGINAL && info.weight_saved == QUANT_LINEAR_SAVED_ORIGINAL);
        CHECK(info.input_bytes == sizeof s.x && info.weight_bytes == sizeof s.w);
        CHECK(info.owned_bytes == sizeof s.x + sizeof s.w);
        break;
      case QUANT_BACKWARD_OVERRIDE_DEQUANTIZED:
        /* Rowwise: data + E8M0 scales [pad128(rows), pad4(K/32)]. */
        CHECK(info.input_saved == QUANT_LINEAR_SAVED_QUANTIZED && info.input_usage == QUANT_USAGE_ROWWISE);
        CHECK(info.input_bytes == (uint64_t)(M * K + 128 * 4));
        CHECK(info.weight_saved == QUANT_LINEAR_SAVED_LAYER_WEIGHT && info.weight_usage == QUANT_USAGE_ROWWISE);
        CHECK(info.weight_bytes == (uint64_t)(N * K + 128 * 4));
        break;
    }
    EXPECT_OK(quant_linear_backward(ctx, &ba));
    EXPECT_OK(quant_linear_ctx_get_info(ctx, &info));
    CHECK(info.used == 1 && info.input_bytes == 0 && info.weight_bytes == 0 && info.owned_bytes == 0);
    EXPECT_ERR(quant_linear_backward(ctx, &ba), QUANT_ERROR_STATE, "backward already ran");
    EXPECT_OK(quant_linear_ctx_free(ctx));
    e = demo_compare(ref.y, s.y, M * N);
    CHECK(e.sqnr_db > 25);
    e = demo_compare(ref.dx, s.dx, M * K);
    CHECK(e.sqnr_db > (mode == QUANT_BACKWARD_OVERRIDE_HIGH_PRECISION ? 100 : 20));
    e = demo_compare(ref.dw, s.dw, N * K);
    CHECK(e.sqnr_db > (mode == QUANT_BACKWARD_OVERRIDE_HIGH_PRECISION ? 100 : 20));
    CHECK(memcmp(ref.db, s.db, sizeof s.db) == 0);
  }
  quant_linear_free(l);
  quant_linear_free(id);
  quant_recipe_free(r);
  quant_recipe_free(idr);
}

static void test_create(void) {
  quant_recipe *r = preset(QUANT_RECIPE_FP8_CURRENT);
  quant_linear_config cfg;
  quant_linear *l = NULL;
  quant_quantizer_config qc = check_config("fp8");
  quant_quantizer *qs[3] = {NULL, NULL, NULL}, *bad[1] = {NULL};
  quant_recipe_rule rule;
  quant_recipe *partial = NULL;
  int i;
  static bufs s;
  quant_linear_ctx *ctx = NULL;

  memset(&cfg, 0, sizeof cfg);
  cfg.struct_size = sizeof cfg;
  EXPECT_ERR(quant_linear_create(NULL, &l), QUANT_ERROR_INVALID_ARGUMENT, "config");
  EXPECT_ERR(quant_linear_create(&cfg, NULL), QUANT_ERROR_INVALID_ARGUMENT, "out");
  EXPECT_ERR(quant_linear_create(&cfg, &l), QUANT_ERROR_INVALID_ARGUMENT, "config.recipe: is NULL and so is config.input_quantizers");
  cfg.struct_size = 4;
  EXPECT_ERR(quant_linear_create(&cfg, &l), QUANT_ERROR_INVALID_ARGUMENT, "struct_size");
  cfg.struct_size = sizeof cfg;
  cfg.recipe = r;
  cfg.num_gemms = -1;
  EXPECT_ERR(quant_linear_create(&cfg, &l), QUANT_ERROR_INVALID_ARGUMENT, "config.num_gemms: -1");
  cfg.num_gemms = 0;
  for (i = 0; i < 3; i++) EXPECT_OK(quant_quantizer_create(&qc, &qs[i]));
  cfg.weight_quantizers = qs;
  EXPECT_ERR(quant_linear_create(&cfg, &l), QUANT_ERROR_INVALID_ARGUMENT, "config.weight_quantizers: set together with config.recipe");
  cfg.weight_quantizers = NULL;
  cfg.recipe = (quant_recipe *)qs[0];
  EXPECT_ERR(quant_linear_create(&cfg, &l), QUANT_ERROR_INVALID_HANDLE, "config.recipe: handle is a quantizer");

  /* A rule table without a weight rule: the error names the role. */
  memset(&rule, 0, sizeof rule);
  rule.pattern.tensor_type = "input";
  rule.quantizer = qs[0];
  EXPECT_OK(quant_recipe_create_rules(&rule, 1, &partial));
  cfg.recipe = partial;
  cfg.name = "proj";
  EXPECT_ERR(quant_linear_create(&cfg, &l), QUANT_ERROR_INVALID_ARGUMENT, "tensor_type \"weight\", name \"proj\"");
  quant_recipe_free(partial);

  /* Explicit quantizers: the layer keeps its own references. */
  cfg.recipe = NULL;
  EXPECT_ERR(quant_linear_create(&cfg, &l), QUANT_ERROR_INVALID_ARGUMENT, "config.name: set without config.recipe");
  cfg.name = NULL;
  cfg.input_quantizers = qs;
  EXPECT_ERR(quant_linear_create(&cfg, &l), QUANT_ERROR_INVALID_ARGUMENT, "config.weight_quantizers: is NULL");
  cfg.weight_quantizers = qs + 1;
  cfg.grad_output_quantizers = bad;
  EXPECT_ERR(quant_linear_create(&cfg, &l), QUANT_ERROR_INVALID_ARGUMENT, "config.grad_output_quantizers[0]: is NULL");
  cfg.grad_output_quantizers = qs + 2;
  EXPECT_OK(quant_linear_create(&cfg, &l));
  {
    quant_quantizer *got = NULL;
    uint32_t usage = 0;
    EXPECT_OK(quant_linear_quantizer(l, "weight", 0, &got));
    EXPECT_OK(quant_quantizer_get_usage(got, &usage));
    EXPECT_OK(quant_quantizer_free(got));
    EXPECT_ERR(quant_linear_quantizer(l, "output", 0, &got), QUANT_ERROR_INVALID_ARGUMENT, "tensor_type: \"output\"");
    EXPECT_ERR(quant_linear_quantizer(l, NULL, 0, &got), QUANT_ERROR_INVALID_ARGUMENT, "tensor_type: is NULL");
    EXPECT_ERR(quant_linear_quantizer(l, "input", 1, &got), QUANT_ERROR_INVALID_ARGUMENT, "gemm: 1 out of range");
    EXPECT_ERR(quant_linear_quantizer(l, "input", 0, NULL), QUANT_ERROR_INVALID_ARGUMENT, "out: is NULL");
    EXPECT_ERR(quant_linear_quantizer(NULL, "input", 0, &got), QUANT_ERROR_INVALID_ARGUMENT, "layer: is NULL");
  }
  for (i = 0; i < 3; i++) EXPECT_OK(quant_quantizer_free(qs[i]));
  init_bufs(&s);
  {
    quant_linear_forward_args fa = fwd_args(&s.tx, &s.tw, NULL, &s.ty);
    quant_linear_backward_args ba = bwd_args(&s.tdy, &s.tdx, &s.tdw, NULL);
    EXPECT_OK(quant_linear_forward(l, &fa, &ctx));
    /* The context outlives its layer. */
    EXPECT_OK(quant_linear_free(l));
    EXPECT_ERR(quant_linear_free(l), QUANT_ERROR_INVALID_HANDLE, "layer");
    EXPECT_ERR(quant_linear_forward(l, &fa, NULL), QUANT_ERROR_INVALID_HANDLE, "layer");
    EXPECT_OK(quant_linear_backward(ctx, &ba));
    EXPECT_OK(quant_linear_ctx_free(ctx));
    EXPECT_ERR(quant_linear_ctx_free(ctx), QUANT_ERROR_INVALID_HANDLE, "ctx");
    EXPECT_ERR(quant_linear_backward(ctx, &ba), QUANT_ERROR_INVALID_HANDLE, "ctx: ");
  }
  EXPECT_OK(quant_linear_free(NULL));
  EXPECT_OK(quant_linear_ctx_free(NULL));
  quant_recipe_free(r);
}

static void test_forward_errors(void) {
  static bufs s;
  quant_recipe *r = preset(QUANT_RECIPE_FP8_CURRENT), *delayed = preset(QUANT_RECIPE_FP8_DELAYED);
  quant_linear *l = layer_from(r, 0), *dl = layer_from(delayed, 0), *grouped = layer_from(r, 2);
  quant_linear_ctx *ctx = NULL;
  quant_linear_forward_args fa;
  DLTensor bad;
  int64_t w_bad[2] = {N, K / 2}, y_bad[2] = {M, N / 2};
  int32_t ints[M * K];
  quant_qtensor_info qi;
  init_bufs(&s);

  fa = fwd_args(&s.tx, &s.tw, &s.tb, &s.ty);
  EXPECT_ERR(quant_linear_forward(NULL, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "layer: is NULL");
  EXPECT_ERR(quant_linear_forward(l, NULL, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "args: is NULL");
  EXPECT_ERR(quant_linear_forward((quant_linear *)r, &fa, &ctx), QUANT_ERROR_INVALID_HANDLE, "layer: handle is a recipe");
  EXPECT_ERR(quant_linear_forward(grouped, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "use quant_grouped_linear_forward");
  fa.struct_size = 8;
  EXPECT_ERR(quant_linear_forward(l, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "args: struct_size 8");
  fa = fwd_args(NULL, &s.tw, &s.tb, &s.ty);
  EXPECT_ERR(quant_linear_forward(l, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "input: is NULL");
  fa = fwd_args(&s.tx, NULL, &s.tb, &s.ty);
  EXPECT_ERR(quant_linear_forward(l, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "weight: is NULL");
  fa = fwd_args(&s.tx, &s.tw, &s.tb, NULL);
  EXPECT_ERR(quant_linear_forward(l, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "output: is NULL");
  bad = check_tensor(ints, kDLInt, 32, 2, x_shape);
  fa = fwd_args(&bad, &s.tw, &s.tb, &s.ty);
  EXPECT_ERR(quant_linear_forward(l, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "input: dtype int32");
  bad = f32(s.w, 2, w_bad);
  fa = fwd_args(&s.tx, &bad, &s.tb, &s.ty);
  EXPECT_ERR(quant_linear_forward(l, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "weight: shape [32 32], want [N, K=64]");
  bad = f32(s.y, 2, y_bad);
  fa = fwd_args(&s.tx, &s.tw, &s.tb, &bad);
  EXPECT_ERR(quant_linear_forward(l, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "output: shape [64 16], want [64 32]");
  fa = fwd_args(&s.tx, &s.tw, &s.tx, &s.ty);
  EXPECT_ERR(quant_linear_forward(l, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "bias: shape [64 64] is not [N=32]");
  bad = s.tx;
  bad.device.device_type = kDLCUDA;
  fa = fwd_args(&bad, &s.tw, &s.tb, &s.ty);
  EXPECT_ERR(quant_linear_forward(l, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "weight: on cpu but input is on cuda:0");
  fa = fwd_args(&s.tx, &s.tw, &s.tb, &s.ty);
  fa.save_original_input = 2;
  EXPECT_ERR(quant_linear_forward(l, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "save_original_input: 2 is not 0 or 1");
  fa.save_original_input = 0;
  fa.weight_requires_grad = -1;
  EXPECT_ERR(quant_linear_forward(l, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "weight_requires_grad: -1");
  fa.weight_requires_grad = 1;
  fa.backward_override = 3;
  EXPECT_ERR(quant_linear_forward(l, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "backward_override: 3");
  fa.backward_override = 0;
  EXPECT_ERR(quant_linear_forward(l, &fa, NULL), QUANT_ERROR_INVALID_ARGUMENT, "ctx: is NULL but input_requires_grad");
  /* Delayed scaling rejects the overrides and save_original_input (spec §9.2, §9.6). */
  fa.backward_override = QUANT_BACKWARD_OVERRIDE_DEQUANTIZED;
  EXPECT_ERR(quant_linear_forward(dl, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "backward_override: dequantized is not allowed with delayed scaling");
  fa.backward_override = QUANT_BACKWARD_OVERRIDE_HIGH_PRECISION;
  EXPECT_ERR(quant_linear_forward(dl, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "backward_override: high_precision is not allowed");
  fa.backward_override = QUANT_BACKWARD_OVERRIDE_NONE;
  fa.save_original_input = 1;
  EXPECT_ERR(quant_linear_forward(dl, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "save_original_input: not allowed with delayed scaling");
  /* None of the failures quantized a weight. */
  qi.struct_size = sizeof qi;
  EXPECT_ERR(quant_linear_weight_get_info(l, 0, &qi), QUANT_ERROR_STATE, "no quantized weight yet");

  /* Inference: no context, rowwise weight only; then training adds columnwise. */
  fa = fwd_args(&s.tx, &s.tw, &s.tb, &s.ty);
  fa.input_requires_grad = fa.weight_requires_grad = 0;
  EXPECT_OK(quant_linear_forward(l, &fa, NULL));
  EXPECT_OK(quant_linear_weight_get_info(l, 0, &qi));
  CHECK(qi.usage == QUANT_USAGE_ROWWISE && qi.persistent == 1 && strcmp(qi.rowwise_format, "fp8") == 0);
  fa.input_requires_grad = 1;
  EXPECT_OK(quant_linear_forward(l, &fa, &ctx));
  EXPECT_OK(quant_linear_ctx_free(ctx));
  EXPECT_OK(quant_linear_weight_get_info(l, 0, &qi));
  CHECK(qi.usage == (QUANT_USAGE_ROWWISE | QUANT_USAGE_COLUMNWISE));
  /* The weight changes; an inference step refreshes both directions. */
  s.w[0] += 1;
  EXPECT_OK(quant_linear_weight_updated(l, -1));
  EXPECT_OK(quant_linear_weight_updated(l, 0));
  fa.input_requires_grad = 0;
  EXPECT_OK(quant_linear_forward(l, &fa, NULL));
  EXPECT_OK(quant_linear_weight_get_info(l, 0, &qi));
  CHECK(qi.usage == (QUANT_USAGE_ROWWISE | QUANT_USAGE_COLUMNWISE));
  EXPECT_ERR(quant_linear_weight_updated(l, 1), QUANT_ERROR_INVALID_ARGUMENT, "gemm: 1 out of range");
  EXPECT_ERR(quant_linear_weight_updated(l, -2), QUANT_ERROR_INVALID_ARGUMENT, "gemm: -2");
  EXPECT_ERR(quant_linear_weight_updated(NULL, 0), QUANT_ERROR_INVALID_ARGUMENT, "layer: is NULL");
  EXPECT_ERR(quant_linear_weight_get_info(l, 0, NULL), QUANT_ERROR_INVALID_ARGUMENT, "info: is NULL");
  EXPECT_ERR(quant_linear_weight_get_info(l, 3, &qi), QUANT_ERROR_INVALID_ARGUMENT, "gemm: 3 out of range");
  qi.struct_size = 0;
  EXPECT_ERR(quant_linear_weight_get_info(l, 0, &qi), QUANT_ERROR_INVALID_ARGUMENT, "info: struct_size 0");

  quant_linear_free(l);
  quant_linear_free(dl);
  quant_linear_free(grouped);
  quant_recipe_free(r);
  quant_recipe_free(delayed);
}

static void test_backward_errors(void) {
  static bufs s;
  quant_recipe *r = preset(QUANT_RECIPE_FP8_CURRENT);
  quant_linear *l = layer_from(r, 0);
  quant_linear_ctx *ctx = NULL, *nobias = NULL, *frozen = NULL;
  quant_linear_forward_args fa;
  quant_linear_backward_args ba;
  quant_linear_ctx_info info;
  DLTensor bad;
  int64_t dw_bad[2] = {K, N};
  init_bufs(&s);

  fa = fwd_args(&s.tx, &s.tw, &s.tb, &s.ty);
  EXPECT_OK(quant_linear_forward(l, &fa, &ctx));
  fa = fwd_args(&s.tx, &s.tw, NULL, &s.ty);
  EXPECT_OK(quant_linear_forward(l, &fa, &nobias));
  fa = fwd_args(&s.tx, &s.tw, &s.tb, &s.ty);
  fa.weight_requires_grad = 0;
  EXPECT_OK(quant_linear_forward(l, &fa, &frozen));
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_OK(quant_linear_ctx_get_info(frozen, &info));
  CHECK(info.input_saved == QUANT_LINEAR_SAVED_NONE && info.input_bytes == 0 && info.weight_requires_grad == 0);

  ba = bwd_args(&s.tdy, &s.tdx, &s.tdw, &s.tdb);
  EXPECT_ERR(quant_linear_backward(NULL, &ba), QUANT_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  EXPECT_ERR(quant_linear_backward(ctx, NULL), QUANT_ERROR_INVALID_ARGUMENT, "args: is NULL");
  EXPECT_ERR(quant_linear_backward((quant_linear_ctx *)l, &ba), QUANT_ERROR_INVALID_HANDLE, "ctx: handle is a linear layer");
  ba = bwd_args(NULL, &s.tdx, &s.tdw, &s.tdb);
  EXPECT_ERR(quant_linear_backward(ctx, &ba), QUANT_ERROR_INVALID_ARGUMENT, "grad_output: is NULL");
  ba = bwd_args(&s.tdy, NULL, NULL, NULL);
  EXPECT_ERR(quant_linear_backward(ctx, &ba), QUANT_ERROR_INVALID_ARGUMENT, "request at least one gradient");
  ba = bwd_args(&s.tx, &s.tdx, NULL, NULL);
  EXPECT_ERR(quant_linear_backward(ctx, &ba), QUANT_ERROR_INVALID_ARGUMENT, "grad_output: shape [64 64], the forward's output was [64 32]");
  bad = f32(s.dw, 2, dw_bad);
  ba = bwd_args(&s.tdy, NULL, &bad, NULL);
  EXPECT_ERR(quant_linear_backward(ctx, &ba), QUANT_ERROR_INVALID_ARGUMENT, "grad_weight: shape [64 32], want the weight's [N=32, K=64]");
  ba = bwd_args(&s.tdy, &s.tdx, &s.tdx, NULL);
  EXPECT_ERR(quant_linear_backward(ctx, &ba), QUANT_ERROR_INVALID_ARGUMENT, "grad_weight: shape [64 64]");
  ba = bwd_args(&s.tdy, NULL, NULL, &s.tdb);
  EXPECT_ERR(quant_linear_backward(nobias, &ba), QUANT_ERROR_STATE, "grad_bias: requested, but the forward pass had no bias");
  ba = bwd_args(&s.tdy, &s.tdx, &s.tdw, NULL);
  EXPECT_ERR(quant_linear_backward(frozen, &ba), QUANT_ERROR_STATE, "grad_weight: requested, but the forward pass ran with weight_requires_grad 0");
  ba.struct_size = 0;
  EXPECT_ERR(quant_linear_backward(frozen, &ba), QUANT_ERROR_INVALID_ARGUMENT, "args: struct_size 0");
  /* Rejected calls leave the contexts usable. */
  ba = bwd_args(&s.tdy, &s.tdx, NULL, NULL);
  EXPECT_OK(quant_linear_backward(frozen, &ba));
  ba = bwd_args(&s.tdy, &s.tdx, &s.tdw, NULL);
  EXPECT_OK(quant_linear_backward(nobias, &ba));
  ba = bwd_args(&s.tdy, NULL, NULL, &s.tdb); /* only dbias: allowed */
  EXPECT_OK(quant_linear_backward(ctx, &ba));
  EXPECT_ERR(quant_linear_backward(ctx, &ba), QUANT_ERROR_STATE, "backward already ran on this context");

  EXPECT_ERR(quant_linear_ctx_get_info(ctx, NULL), QUANT_ERROR_INVALID_ARGUMENT, "info: is NULL");
  EXPECT_ERR(quant_linear_ctx_get_info(NULL, &info), QUANT_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  info.struct_size = 0;
  EXPECT_ERR(quant_linear_ctx_get_info(ctx, &info), QUANT_ERROR_INVALID_ARGUMENT, "info: struct_size 0");
  /* An older caller's shorter info struct gets only its fields. */
  memset(&info, 0xAB, sizeof info);
  info.struct_size = offsetof(quant_linear_ctx_info, used) + sizeof info.used;
  EXPECT_OK(quant_linear_ctx_get_info(ctx, &info));
  CHECK(info.used == 1 && info.backward_override == (int32_t)0xABABABAB);
  EXPECT_ERR(quant_linear_ctx_free((quant_linear_ctx *)r), QUANT_ERROR_INVALID_HANDLE, "ctx: handle is a recipe");
  quant_linear_ctx_free(ctx);
  quant_linear_ctx_free(nobias);
  quant_linear_ctx_free(frozen);
  quant_linear_free(l);
  quant_recipe_free(r);
}

/* A grouped layer of 3 GEMMs with a group of zero rows, each group checked
 * against a plain layer on its rows (identity: against the formulas too). */
static void test_grouped(void) {
  enum { G = 3 };
  static float x[M * K], w[G][N * K], b[G][N], y[M * N], dy[M * N], dx[M * K], dw[G][N * K], db[G][N];
  int64_t splits[G] = {45, 0, 19}; /* MXFP8 groups of any size (spec §14), one empty */
  DLTensor tx = f32(x, 2, x_shape), ty = f32(y, 2, y_shape), tdy = f32(dy, 2, y_shape), tdx = f32(dx, 2, x_shape);
  DLTensor tw[G], tb[G], tdw[G], tdb[G];
  quant_recipe *r = preset(QUANT_RECIPE_MXFP8);
  quant_linear *l = layer_from(r, G), *plain = layer_from(r, 0);
  quant_linear_ctx *ctx = NULL;
  quant_grouped_linear_forward_args fa;
  quant_grouped_linear_backward_args ba;
  quant_linear_ctx_info info;
  int g, i, row;
  demo_fill(x, M * K, 1.0);
  demo_fill(dy, M * N, 0.01);
  for (g = 0; g < G; g++) {
    demo_fill(w[g], N * K, 0.1);
    demo_fill(b[g], N, 0.5);
    for (i = 0; i < N * K; i++) dw[g][i] = NAN; /* guards: a zero-row group must be overwritten */
    tw[g] = f32(w[g], 2, w_shape);
    tb[g] = f32(b[g], 1, b_shape);
    tdw[g] = f32(dw[g], 2, w_shape);
    tdb[g] = f32(db[g], 1, b_shape);
  }
  memset(&fa, 0, sizeof fa);
  fa.struct_size = sizeof fa;
  fa.input = &tx;
  fa.m_splits = splits;
  fa.weights = tw;
  fa.biases = tb;
  fa.output = &ty;
  fa.input_requires_grad = fa.weight_requires_grad = 1;
  EXPECT_OK(quant_grouped_linear_forward(l, &fa, &ctx));
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_OK(quant_linear_ctx_get_info(ctx, &info));
  CHECK(info.num_gemms == G);
  memset(&ba, 0, sizeof ba);
  ba.struct_size = sizeof ba;
  ba.grad_output = &tdy;
  ba.grad_input = &tdx;
  ba.grad_weights = tdw;
  ba.grad_biases = tdb;
  {
    quant_linear_backward_args pb = bwd_args(&tdy, &tdx, NULL, NULL);
    EXPECT_ERR(quant_linear_backward(ctx, &pb), QUANT_ERROR_INVALID_ARGUMENT, "use quant_grouped_linear_backward");
  }
  EXPECT_OK(quant_grouped_linear_backward(ctx, &ba));
  EXPECT_ERR(quant_grouped_linear_backward(ctx, &ba), QUANT_ERROR_STATE, "backward already ran");
  EXPECT_OK(quant_linear_ctx_free(ctx));
  for (i = 0; i < N * K; i++) CHECK(dw[1][i] == 0);
  for (i = 0; i < N; i++) CHECK(db[1][i] == 0);
  /* Each non-empty group equals a plain layer on its rows. */
  for (g = 0, row = 0; g < G; row += (int)splits[g], g++) {
    static float py[M * N], pdx[M * K], pdw[N * K], pdb[N];
    int64_t gx[2], gy[2];
    DLTensor px, ppy, pdy;
    DLTensor tpdx, tpdw = f32(pdw, 2, w_shape), tpdb = f32(pdb, 1, b_shape);
    quant_linear_forward_args pa;
    quant_linear_backward_args pb;
    if (splits[g] == 0) continue;
    gx[0] = gy[0] = splits[g], gx[1] = K, gy[1] = N;
    px = f32(x + row * K, 2, gx), ppy = f32(py, 2, gy), pdy = f32(dy + row * N, 2, gy);
    tpdx = f32(pdx, 2, gx);
    pa = fwd_args(&px, &tw[g], &tb[g], &ppy);
    pb = bwd_args(&pdy, &tpdx, &tpdw, &tpdb);
    EXPECT_OK(quant_linear_weight_updated(plain, 0));
    EXPECT_OK(quant_linear_forward(plain, &pa, &ctx));
    EXPECT_OK(quant_linear_backward(ctx, &pb));
    EXPECT_OK(quant_linear_ctx_free(ctx));
    CHECK(memcmp(py, y + row * N, (size_t)splits[g] * N * sizeof *py) == 0);
    CHECK(memcmp(pdx, dx + row * K, (size_t)splits[g] * K * sizeof *pdx) == 0);
    CHECK(memcmp(pdw, dw[g], sizeof pdw) == 0);
    CHECK(memcmp(pdb, db[g], sizeof pdb) == 0);
  }

  /* Bad input (around splits 32, 0, 32). */
  splits[0] = 32, splits[1] = 0, splits[2] = 32;
  EXPECT_ERR(quant_grouped_linear_forward(plain, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "use quant_linear_forward");
  EXPECT_ERR(quant_grouped_linear_forward(l, NULL, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "args: is NULL");
  fa.m_splits = NULL;
  EXPECT_ERR(quant_grouped_linear_forward(l, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "m_splits: is NULL");
  splits[1] = 8;
  fa.m_splits = splits;
  EXPECT_ERR(quant_grouped_linear_forward(l, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "m_splits: the row counts sum to 72");
  splits[0] = -8;
  splits[1] = 40;
  EXPECT_ERR(quant_grouped_linear_forward(l, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "m_splits[0]: -8 rows");
  splits[0] = 16;
  splits[1] = 16;
  EXPECT_OK(quant_grouped_linear_forward(l, &fa, &ctx)); /* 16-row MXFP8 groups: any size works (spec §14) */
  EXPECT_OK(quant_linear_ctx_free(ctx));
  splits[0] = 32;
  splits[1] = 0;
  fa.weights = NULL;
  EXPECT_ERR(quant_grouped_linear_forward(l, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "weights: is NULL");
  fa.weights = tw;
  tw[2].ndim = 1;
  EXPECT_ERR(quant_grouped_linear_forward(l, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "weight[2]: shape [32] is not 2-D");
  tw[2].ndim = 2;
  fa.input_requires_grad = 0;
  fa.weight_requires_grad = 0;
  EXPECT_OK(quant_grouped_linear_forward(l, &fa, &ctx));
  ba.grad_input = NULL;
  ba.grad_weights = tdw;
  EXPECT_ERR(quant_grouped_linear_backward(ctx, &ba), QUANT_ERROR_STATE, "grad_weights: requested, but the forward pass ran with weight_requires_grad 0");
  ba.grad_weights = NULL;
  EXPECT_ERR(quant_grouped_linear_backward(NULL, &ba), QUANT_ERROR_INVALID_ARGUMENT, "ctx: is NULL");
  EXPECT_ERR(quant_grouped_linear_backward(ctx, NULL), QUANT_ERROR_INVALID_ARGUMENT, "args: is NULL");
  tdb[1].dtype.bits = 16;
  tdb[1].dtype.code = kDLInt;
  EXPECT_ERR(quant_grouped_linear_backward(ctx, &ba), QUANT_ERROR_UNSUPPORTED, "grad_biases[1]");
  tdb[1] = f32(db[1], 1, b_shape);
  EXPECT_OK(quant_grouped_linear_backward(ctx, &ba));
  EXPECT_OK(quant_linear_ctx_free(ctx));
  quant_linear_free(l);
  quant_linear_free(plain);
  quant_recipe_free(r);
}

static float amax_of(const float *v, int n) {
  float a = 0;
  int i;
  for (i = 0; i < n; i++) a = fabsf(v[i]) > a ? fabsf(v[i]) : a;
  return a;
}

/* Delayed scaling: the staged amaxes of each pass, their update (also with
 * caller-reduced amaxes), and the scale the next step uses. */
static void test_delayed(void) {
  static bufs s;
  quant_recipe_config rc;
  quant_recipe *r = NULL;
  quant_linear *l;
  quant_linear_ctx *ctx = NULL;
  quant_linear_forward_args fa;
  quant_linear_backward_args ba;
  quant_quantizer *qin = NULL, *qgrad = NULL;
  float amaxes[4], reduced[2], scale;
  size_t count = 99;
  DLTensor scale_view, hist_view;
  memset(&rc, 0, sizeof rc);
  rc.struct_size = sizeof rc;
  rc.kind = QUANT_RECIPE_FP8_DELAYED;
  rc.amax_history_len = 2;
  EXPECT_OK(quant_recipe_create(&rc, &r));
  l = layer_from(r, 0);
  init_bufs(&s);
  EXPECT_OK(quant_linear_quantizer(l, "input", 0, &qin));
  EXPECT_OK(quant_linear_quantizer(l, "grad_output", 0, &qgrad));

  fa = fwd_args(&s.tx, &s.tw, &s.tb, &s.ty);
  EXPECT_OK(quant_linear_forward(l, &fa, &ctx));
  EXPECT_OK(quant_linear_scaling_amaxes(l, QUANT_LINEAR_PASS_FORWARD, NULL, 0, &count));
  CHECK(count == 2);
  EXPECT_OK(quant_linear_scaling_amaxes(l, QUANT_LINEAR_PASS_FORWARD, amaxes, 4, &count));
  CHECK(amaxes[0] == amax_of(s.x, M * K) && amaxes[1] == amax_of(s.w, N * K));
  EXPECT_ERR(quant_linear_scaling_amaxes(l, QUANT_LINEAR_PASS_FORWARD, amaxes, 1, &count), QUANT_ERROR_BUFFER_TOO_SMALL, "capacity: 1");
  EXPECT_ERR(quant_linear_scaling_amaxes(l, 3, amaxes, 4, &count), QUANT_ERROR_INVALID_ARGUMENT, "pass: 3");
  EXPECT_ERR(quant_linear_scaling_amaxes(l, QUANT_LINEAR_PASS_FORWARD, amaxes, 4, NULL), QUANT_ERROR_INVALID_ARGUMENT, "count: is NULL");
  EXPECT_ERR(quant_linear_scaling_amaxes(NULL, QUANT_LINEAR_PASS_FORWARD, amaxes, 4, &count), QUANT_ERROR_INVALID_ARGUMENT, "layer: is NULL");
  /* Another process saw twice the input's amax: the reduced value wins. */
  reduced[0] = 2 * amaxes[0];
  reduced[1] = amaxes[1];
  EXPECT_ERR(quant_linear_update_scaling(l, QUANT_LINEAR_PASS_FORWARD, reduced, 1), QUANT_ERROR_INVALID_ARGUMENT, "reduced_amaxes: 1 given, the forward pass has 2");
  EXPECT_ERR(quant_linear_update_scaling(l, QUANT_LINEAR_PASS_FORWARD, NULL, 2), QUANT_ERROR_INVALID_ARGUMENT, "reduced_amaxes: is NULL with count 2");
  EXPECT_ERR(quant_linear_update_scaling(l, 0, NULL, 0), QUANT_ERROR_INVALID_ARGUMENT, "pass: 0");
  reduced[1] = -1;
  EXPECT_ERR(quant_linear_update_scaling(l, QUANT_LINEAR_PASS_FORWARD, reduced, 2), QUANT_ERROR_INVALID_ARGUMENT, "reduced_amaxes[1]");
  reduced[1] = amaxes[1];
  EXPECT_OK(quant_linear_update_scaling(l, QUANT_LINEAR_PASS_FORWARD, reduced, 2));
  EXPECT_OK(quant_delayed_scaling_state(qin, QUANT_DIRECTION_ANY, &scale_view, &hist_view));
  scale = *(float *)scale_view.data;
  CHECK(scale == 448.0f / reduced[0]);
  CHECK(((float *)hist_view.data)[0] == 0 && ((float *)hist_view.data)[1] == reduced[0]);

  ba = bwd_args(&s.tdy, &s.tdx, &s.tdw, &s.tdb);
  EXPECT_OK(quant_linear_backward(ctx, &ba));
  EXPECT_OK(quant_linear_ctx_free(ctx));
  EXPECT_OK(quant_linear_scaling_amaxes(l, QUANT_LINEAR_PASS_BACKWARD, amaxes, 4, &count));
  CHECK(count == 1 && amaxes[0] == amax_of(s.dy, M * N));
  EXPECT_OK(quant_linear_update_scaling(l, QUANT_LINEAR_PASS_BACKWARD, NULL, 0));
  EXPECT_OK(quant_delayed_scaling_state(qgrad, QUANT_DIRECTION_ANY, &scale_view, NULL));
  CHECK(*(float *)scale_view.data == 57344.0f / amaxes[0]); /* E5M2 grads (HYBRID) */
  quant_quantizer_free(qin);
  quant_quantizer_free(qgrad);
  quant_linear_free(l);
  quant_recipe_free(r);

  /* Without delayed scaling there is nothing to update. */
  r = preset(QUANT_RECIPE_NVFP4);
  l = layer_from(r, 0);
  EXPECT_OK(quant_linear_scaling_amaxes(l, QUANT_LINEAR_PASS_BACKWARD, amaxes, 4, &count));
  CHECK(count == 0);
  EXPECT_OK(quant_linear_update_scaling(l, QUANT_LINEAR_PASS_FORWARD, NULL, 0));
  quant_linear_free(l);
  quant_recipe_free(r);
}

/* Version 2 of the forward/backward args (issue #20): a caller-quantized
 * weight (weight_qtensor: a parameter held only in quantized form) gives
 * bit-identical results to the layer's own quantize of the same weight, and
 * amax overrides (current-scaling amaxes reduced across processes) are used:
 * the tensor's own amax reproduces the default bits, another amax changes
 * them. Bad input names the field. linear/qparams_test.go checks the numerics
 * against hand-made quantizes and GEMMs. */
static void test_weight_qtensor_and_amax(void) {
  static bufs s, q;
  static float y0[M * N], dx0[M * K], dw0[N * K];
  quant_recipe *r = preset(QUANT_RECIPE_FP8_CURRENT);
  quant_linear *l = layer_from(r, 0), *lq = layer_from(r, 0), *grouped = layer_from(r, 2);
  quant_linear_ctx *ctx = NULL;
  quant_linear_forward_args fa;
  quant_linear_backward_args ba;
  quant_quantizer *wq = NULL;
  quant_qtensor *qw = NULL, *row_only = NULL;
  quant_quantize_options qo;
  quant_qtensor_info qi;
  float xa[2], ga[2], bad3[3];
  int64_t a_shape[1] = {2}, bad_shape[1] = {3};
  DLTensor txa = f32(xa, 1, a_shape), tga = f32(ga, 1, a_shape), tbad = f32(bad3, 1, bad_shape);
  init_bufs(&s);
  init_bufs(&q);
  memcpy(q.x, s.x, sizeof s.x); /* the same data (demo_fill continues one stream) */
  memcpy(q.w, s.w, sizeof s.w);
  memcpy(q.b, s.b, sizeof s.b);
  memcpy(q.dy, s.dy, sizeof s.dy);

  /* the layer's own quantize */
  fa = fwd_args(&s.tx, &s.tw, &s.tb, &s.ty);
  EXPECT_OK(quant_linear_forward(l, &fa, &ctx));
  ba = bwd_args(&s.tdy, &s.tdx, &s.tdw, &s.tdb);
  EXPECT_OK(quant_linear_backward(ctx, &ba));
  EXPECT_OK(quant_linear_ctx_free(ctx));

  /* the caller's: the layer's weight quantizer, both usages, persistent */
  EXPECT_OK(quant_linear_quantizer(lq, "weight", 0, &wq));
  EXPECT_OK(quant_quantizer_set_usage(wq, QUANT_USAGE_ROWWISE | QUANT_USAGE_COLUMNWISE));
  memset(&qo, 0, sizeof qo);
  qo.struct_size = sizeof qo;
  qo.persistent = 1;
  EXPECT_OK(quant_quantize(wq, &q.tw, &qo, &qw));
  EXPECT_OK(quant_quantizer_set_usage(wq, QUANT_USAGE_ROWWISE));
  EXPECT_OK(quant_quantize(wq, &q.tw, NULL, &row_only));
  fa = fwd_args(&q.tx, NULL, &q.tb, &q.ty);
  fa.weight_qtensor = qw;
  EXPECT_OK(quant_linear_forward(lq, &fa, &ctx));
  ba = bwd_args(&q.tdy, &q.tdx, &q.tdw, &q.tdb);
  EXPECT_OK(quant_linear_backward(ctx, &ba));
  EXPECT_OK(quant_linear_ctx_free(ctx));
  CHECK(memcmp(s.y, q.y, sizeof s.y) == 0);
  CHECK(memcmp(s.dx, q.dx, sizeof s.dx) == 0);
  CHECK(memcmp(s.dw, q.dw, sizeof s.dw) == 0);
  CHECK(memcmp(s.db, q.db, sizeof s.db) == 0);
  memset(&qi, 0, sizeof qi);
  qi.struct_size = sizeof qi;
  EXPECT_ERR(quant_linear_weight_get_info(lq, 0, &qi), QUANT_ERROR_STATE, "no quantized weight yet");

  /* bad input */
  fa = fwd_args(&q.tx, &q.tw, &q.tb, &q.ty);
  fa.weight_qtensor = qw;
  EXPECT_ERR(quant_linear_forward(lq, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "weight: set together with weight_qtensor");
  fa.weight = NULL;
  fa.weight_qtensor = (quant_qtensor *)r;
  EXPECT_ERR(quant_linear_forward(lq, &fa, &ctx), QUANT_ERROR_INVALID_HANDLE, "weight_qtensor: handle is a recipe");
  fa.weight_qtensor = row_only;
  EXPECT_ERR(quant_linear_forward(lq, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "weight_qtensor: holds usage rowwise");
  fa.input_requires_grad = fa.weight_requires_grad = 0;
  EXPECT_OK(quant_linear_forward(lq, &fa, NULL)); /* inference reads rowwise only */
  fa = fwd_args(&q.tx, NULL, &q.tb, &q.ty);
  fa.weight_qtensor = qw;
  fa.backward_override = QUANT_BACKWARD_OVERRIDE_HIGH_PRECISION;
  EXPECT_ERR(quant_linear_forward(lq, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "weight_qtensor: set with backward_override high_precision");
  fa.backward_override = QUANT_BACKWARD_OVERRIDE_NONE;
  fa.weight_amax = &txa;
  EXPECT_ERR(quant_linear_forward(lq, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "weight_amax: set with weight_qtensor");
  fa = fwd_args(&q.tx, &q.tw, &q.tb, &q.ty);
  fa.input_amax = &tbad;
  EXPECT_ERR(quant_linear_forward(l, &fa, &ctx), QUANT_ERROR_INVALID_ARGUMENT, "input_amax: float32 [3], want float32 with 2 elements");
  /* a version-1 caller's struct_size stops before the new fields: they are not read */
  fa.struct_size = offsetof(quant_linear_forward_args, input_amax);
  fa.input_requires_grad = fa.weight_requires_grad = 0;
  EXPECT_OK(quant_linear_forward(l, &fa, NULL));
  CHECK(memcmp(s.y, q.y, sizeof s.y) == 0);

  /* amax overrides: the input's own amax gives the default bits, 3x changes them */
  memcpy(y0, s.y, sizeof y0);
  memcpy(dx0, s.dx, sizeof dx0);
  memcpy(dw0, s.dw, sizeof dw0);
  {
    quant_quantizer *iq = NULL, *gq = NULL;
    int round;
    EXPECT_OK(quant_linear_quantizer(l, "input", 0, &iq));
    EXPECT_OK(quant_linear_quantizer(l, "grad_output", 0, &gq));
    EXPECT_OK(quant_compute_amax(iq, &s.tx, &txa, NULL));
    EXPECT_OK(quant_compute_amax(gq, &s.tdy, &tga, NULL));
    for (round = 0; round < 2; round++) {
      if (round == 1) {
        xa[0] *= 3, xa[1] *= 3, ga[0] *= 3, ga[1] *= 3;
      }
      fa = fwd_args(&s.tx, &s.tw, &s.tb, &s.ty);
      fa.input_amax = &txa;
      EXPECT_OK(quant_linear_forward(l, &fa, &ctx));
      ba = bwd_args(&s.tdy, &s.tdx, &s.tdw, NULL);
      ba.grad_output_amax = &tbad;
      EXPECT_ERR(quant_linear_backward(ctx, &ba), QUANT_ERROR_INVALID_ARGUMENT, "grad_output_amax: float32 [3]");
      ba.grad_output_amax = &tga;
      EXPECT_OK(quant_linear_backward(ctx, &ba));
      EXPECT_OK(quant_linear_ctx_free(ctx));
      CHECK((memcmp(y0, s.y, sizeof y0) == 0) == (round == 0));
      CHECK((memcmp(dx0, s.dx, sizeof dx0) == 0) == (round == 0));
      CHECK((memcmp(dw0, s.dw, sizeof dw0) == 0) == (round == 0));
    }
    quant_quantizer_free(iq);
    quant_quantizer_free(gq);
  }

  /* grouped: weight_qtensors and the [num_gemms, 2] amaxes */
  {
    static float gy[M * N], gy2[M * N], am[2][2];
    int64_t splits[2] = {40, 24}, am_shape[2] = {2, 2};
    DLTensor tgy = f32(gy, 2, y_shape), tgy2 = f32(gy2, 2, y_shape), tw2[2] = {s.tw, s.tw};
    DLTensor tam = f32(&am[0][0], 2, am_shape), tam_bad = f32(&am[0][0], 1, a_shape);
    quant_qtensor *qws[2] = {qw, qw};
    quant_grouped_linear_forward_args ga2;
    memset(&ga2, 0, sizeof ga2);
    ga2.struct_size = sizeof ga2;
    ga2.input = &s.tx;
    ga2.m_splits = splits;
    ga2.weights = tw2;
    ga2.output = &tgy;
    EXPECT_OK(quant_grouped_linear_forward(grouped, &ga2, NULL));
    ga2.weight_qtensors = qws;
    ga2.output = &tgy2;
    EXPECT_ERR(quant_grouped_linear_forward(grouped, &ga2, NULL), QUANT_ERROR_INVALID_ARGUMENT, "weights: set together with weight_qtensors");
    ga2.weights = NULL;
    EXPECT_OK(quant_grouped_linear_forward(grouped, &ga2, NULL));
    CHECK(memcmp(gy, gy2, sizeof gy) == 0);
    ga2.input_amaxes = &tam_bad;
    EXPECT_ERR(quant_grouped_linear_forward(grouped, &ga2, NULL), QUANT_ERROR_INVALID_ARGUMENT, "input_amaxes: float32 [2], want float32 [num_gemms=2, 2]");
    am[0][0] = am[0][1] = am[1][0] = am[1][1] = 1e4f; /* far above |x|: coarser scales */
    ga2.input_amaxes = &tam;
    EXPECT_OK(quant_grouped_linear_forward(grouped, &ga2, NULL));
    CHECK(memcmp(gy, gy2, sizeof gy) != 0);
    qws[1] = NULL;
    ga2.input_amaxes = NULL;
    EXPECT_ERR(quant_grouped_linear_forward(grouped, &ga2, NULL), QUANT_ERROR_INVALID_ARGUMENT, "weight_qtensors[1]: is NULL");
  }

  quant_qtensor_free(qw);
  quant_qtensor_free(row_only);
  quant_quantizer_free(wq);
  quant_linear_free(l);
  quant_linear_free(lq);
  quant_linear_free(grouped);
  quant_recipe_free(r);
}

int main(void) {
  test_identity_math();
  test_mxfp8_modes();
  test_create();
  test_forward_errors();
  test_backward_errors();
  test_grouped();
  test_delayed();
  test_weight_qtensor_and_amax();
  return check_summary("test_linear");
}
