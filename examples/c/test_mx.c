/* ABI tests for the block-scaled formats "mxfp8", "mxfp4" and "fp8_block":
 * quantize and dequantize every option within an error bound derived from the
 * element format, layout queries and buffer views, the GEMM-swizzled scale
 * layout round trip, update_usage, caller-owned buffers, and bad input. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "demo_data.h"

#define ROWS 128
#define COLS 256

static DLTensor bf16_input(uint16_t *bits, float *exact, int64_t *shape) {
  int64_t n = shape[0] * shape[1], i;
  float *x = malloc((size_t)n * sizeof *x);
  demo_fill(x, (size_t)n, 1.0);
  for (i = 0; i < n; i++) {
    bits[i] = demo_to_bf16(x[i]);
    exact[i] = demo_from_bf16(bits[i]);
  }
  free(x);
  return check_tensor(bits, kDLBfloat, 16, 2, shape);
}

/* Per-element error bound of one format option: |x - y| <= max(|x|*rel,
 * abs_per_amax*amax_b) (MX) or |x|*rel + abs_per_amax*amax_b (fp8_block),
 * amax_b being the amax of x's block (bh x bw). */
typedef struct {
  const char *name;
  quant_quantizer_config cfg;
  int bh[2], bw[2]; /* block shape per direction: rowwise, columnwise */
  double rel;       /* relative rounding (or clamping) error */
  double abs_per_amax;
  int additive;
} fmt_case;

/* MX (spec §4.3, §4.4): the scale S < 2*amax_b/max under both rules. Without
 * clamping an element is off by at most half an ulp: |x|*2^-(mbits+1) in the
 * normal range, S*half_subnormal below it. FLOOR clamps scaled values in
 * (max, 2^(emax+1)) to max, an error of at most |x|*(1 - max/2^(emax+1)). */
static fmt_case mx_case(const char *name, const char *format, int element, int floor_rule,
                        int mbits, double max, int emax, double half_sub) {
  fmt_case c;
  double clamp = 1.0 - max / ldexp(1.0, emax + 1);
  memset(&c, 0, sizeof c);
  c.name = name;
  c.cfg = check_config(format);
  c.cfg.element = element;
  c.cfg.scale_rounding = floor_rule ? QUANT_SCALE_FLOOR : QUANT_SCALE_RCEIL;
  c.bh[0] = 1, c.bw[0] = 32, c.bh[1] = 32, c.bw[1] = 1;
  c.rel = ldexp(1.0, -(mbits + 1));
  if (floor_rule && clamp > c.rel) c.rel = clamp;
  c.abs_per_amax = 2.0 / max * half_sub;
  return c;
}

/* fp8_block (spec §6.2): 1/scale <= 2*amax_b/448 (pow2 rounds the scale down
 * by less than 2), no clamping; FP32 scales add the rounding of scale_inv and
 * of the product (2^-23 relative, covered by 2^-20). */
static fmt_case block_case(const char *name, int dims, int fp32) {
  fmt_case c;
  memset(&c, 0, sizeof c);
  c.name = name;
  c.cfg = check_config("fp8_block");
  c.cfg.block_dims = dims;
  c.cfg.fp32_scales = fp32;
  c.bh[0] = dims == 2 ? 128 : 1, c.bw[0] = 128;
  c.bh[1] = 128, c.bw[1] = dims == 2 ? 128 : 1;
  c.rel = ldexp(1.0, -4) + ldexp(1.0, -20);
  c.abs_per_amax = 2.0 / 448 * ldexp(1.0, -10);
  c.additive = 1;
  return c;
}

static double block_amax(const float *x, int64_t m, int64_t k, int64_t r, int64_t c, int bh, int bw) {
  int64_t r0 = r / bh * bh, c0 = c / bw * bw, i, j;
  double a = 0;
  for (i = r0; i < r0 + bh && i < m; i++)
    for (j = c0; j < c0 + bw && j < k; j++)
      if (fabs(x[i * k + j]) > a) a = fabs(x[i * k + j]);
  return a;
}

/* Quantizes, checks the info, dequantizes each direction and checks every
 * element against the bound; prints the SQNR. */
static void check_roundtrip(const fmt_case *c, int64_t m, int64_t k) {
  int64_t shape[2];
  uint16_t *bits = malloc((size_t)(m * k) * sizeof *bits);
  float *exact = malloc((size_t)(m * k) * sizeof *exact), *out = malloc((size_t)(m * k) * sizeof *out);
  double *amax = malloc((size_t)(m * k) * sizeof *amax);
  quant_quantizer *q = NULL;
  quant_qtensor *t = NULL;
  quant_qtensor_info info;
  DLTensor in, o;
  int d;
  shape[0] = m, shape[1] = k;
  in = bf16_input(bits, exact, shape);
  o = check_tensor(out, kDLFloat, 32, 2, shape);
  EXPECT_OK(quant_quantizer_create(&c->cfg, &q));
  EXPECT_OK(quant_quantize(q, &in, NULL, &t));
  info.struct_size = sizeof info;
  EXPECT_OK(quant_qtensor_get_info(t, &info));
  CHECK(info.usage == (QUANT_USAGE_ROWWISE | QUANT_USAGE_COLUMNWISE));
  CHECK(strcmp(info.rowwise_format, c->cfg.format) == 0);
  CHECK(strcmp(info.columnwise_format, c->cfg.format) == 0);
  for (d = 0; d < 2; d++) {
    int64_t i, j, bad = 0;
    demo_error e;
    EXPECT_OK(quant_dequantize(t, d == 0 ? QUANT_DIRECTION_ROWWISE : QUANT_DIRECTION_COLUMNWISE, &o, NULL));
    /* Block amaxes, computed once per block. */
    for (i = 0; i < m; i++)
      for (j = 0; j < k; j++)
        if (i % c->bh[d] == 0 && j % c->bw[d] == 0) amax[i * k + j] = block_amax(exact, m, k, i, j, c->bh[d], c->bw[d]);
    for (i = 0; i < m; i++) {
      for (j = 0; j < k; j++) {
        double x = exact[i * k + j], y = out[i * k + j];
        double ab = amax[(i / c->bh[d] * c->bh[d]) * k + j / c->bw[d] * c->bw[d]];
        double relb = fabs(x) * c->rel, absb = ab * c->abs_per_amax;
        double bound = c->additive ? relb + absb : (relb > absb ? relb : absb);
        if (!(fabs(x - y) <= bound)) {
          if (bad++ < 3)
            fprintf(stderr, "%s %s (%ld,%ld): x=%.9g y=%.9g bound %.3g\n", c->name, d ? "columnwise" : "rowwise",
                    (long)i, (long)j, x, y, bound);
        }
      }
    }
    CHECK(bad == 0);
    e = demo_compare(exact, out, (size_t)(m * k));
    printf("  %-34s %-10s SQNR %6.2f dB\n", c->name, d ? "columnwise" : "rowwise", e.sqnr_db);
  }
  quant_qtensor_free(t);
  quant_quantizer_free(q);
  free(bits), free(exact), free(out), free(amax);
}

static void test_roundtrips(void) {
  fmt_case cases[16];
  int n = 0, i;
  cases[n++] = mx_case("mxfp8 e4m3 RCEIL", "mxfp8", QUANT_ELEMENT_E4M3, 0, 3, 448, 8, ldexp(1.0, -10));
  cases[n++] = mx_case("mxfp8 e4m3 FLOOR", "mxfp8", QUANT_ELEMENT_DEFAULT, 1, 3, 448, 8, ldexp(1.0, -10));
  cases[n++] = mx_case("mxfp8 e5m2 RCEIL", "mxfp8", QUANT_ELEMENT_E5M2, 0, 2, 57344, 15, ldexp(1.0, -17));
  cases[n++] = mx_case("mxfp8 e5m2 FLOOR", "mxfp8", QUANT_ELEMENT_E5M2, 1, 2, 57344, 15, ldexp(1.0, -17));
  cases[n++] = mx_case("mxfp4 RCEIL", "mxfp4", QUANT_ELEMENT_DEFAULT, 0, 1, 6, 2, 0.25);
  cases[n++] = mx_case("mxfp4 FLOOR", "mxfp4", QUANT_ELEMENT_E2M1, 1, 1, 6, 2, 0.25);
  cases[n] = mx_case("mxfp8 e4m3 RCEIL swizzled", "mxfp8", QUANT_ELEMENT_E4M3, 0, 3, 448, 8, ldexp(1.0, -10));
  cases[n++].cfg.gemm_swizzled_scales = 1;
  cases[n] = mx_case("mxfp4 FLOOR swizzled", "mxfp4", QUANT_ELEMENT_E2M1, 1, 1, 6, 2, 0.25);
  cases[n++].cfg.gemm_swizzled_scales = 1;
  cases[n++] = block_case("fp8_block 1x128 pow2", 1, 0);
  cases[n++] = block_case("fp8_block 1x128 fp32", 1, 1);
  cases[n++] = block_case("fp8_block 128x128 pow2", 2, 0);
  cases[n++] = block_case("fp8_block 128x128 fp32", 2, 1);
  cases[n] = block_case("fp8_block 1x128 eps 1e-6", 1, 0);
  cases[n++].cfg.amax_epsilon = 1e-6f;
  printf("round trips, %d x %d BF16:\n", ROWS, COLS);
  for (i = 0; i < n; i++) check_roundtrip(&cases[i], ROWS, COLS);
  printf("ragged fp8_block, 130 x 200 BF16:\n");
  for (i = 8; i < 12; i++) check_roundtrip(&cases[i], 130, 200);
}

/* The layout and the buffer views agree, with the shapes and dtypes of quant.h. */
static void test_layout_and_views(void) {
  struct {
    const char *format;
    int64_t shapes[4][2]; /* row data, row scale_inv, col data, col scale_inv */
    uint8_t data_code, scale_code, scale_bits;
  } cases[3] = {
      {"mxfp8", {{64, 96}, {128, 4}, {64, 96}, {4, 128}}, kDLFloat8_e4m3fn, kDLFloat8_e8m0fnu, 8},
      {"mxfp4", {{64, 48}, {128, 4}, {96, 32}, {128, 4}}, kDLUInt, kDLFloat8_e8m0fnu, 8},
      {"fp8_block", {{64, 96}, {1, 64}, {96, 64}, {1, 96}}, kDLFloat8_e4m3fn, kDLFloat, 32},
  };
  int64_t shape[2] = {64, 96};
  uint16_t bits[64 * 96];
  float exact[64 * 96];
  int c, i;
  for (c = 0; c < 3; c++) {
    quant_quantizer_config cfg = check_config(cases[c].format);
    quant_quantizer *q = NULL;
    quant_qtensor *t = NULL;
    quant_buffer_desc descs[8];
    size_t count = 0;
    DLTensor in = bf16_input(bits, exact, shape), view;
    EXPECT_OK(quant_quantizer_create(&cfg, &q));
    EXPECT_OK(quant_quantizer_layout(q, shape, 2, NULL, 0, &count));
    CHECK(count == 4);
    EXPECT_ERR(quant_quantizer_layout(q, shape, 2, descs, 3, &count), QUANT_ERROR_BUFFER_TOO_SMALL, "capacity");
    EXPECT_OK(quant_quantizer_layout(q, shape, 2, descs, 8, &count));
    EXPECT_OK(quant_quantize(q, &in, NULL, &t));
    for (i = 0; i < 4; i++) {
      uint32_t dir = i < 2 ? QUANT_DIRECTION_ROWWISE : QUANT_DIRECTION_COLUMNWISE;
      quant_buffer_kind kind = i % 2 ? QUANT_BUFFER_SCALE_INV : QUANT_BUFFER_DATA;
      CHECK(descs[i].direction == dir && descs[i].kind == (int32_t)kind && descs[i].ndim == 2);
      CHECK(descs[i].shape[0] == cases[c].shapes[i][0] && descs[i].shape[1] == cases[c].shapes[i][1]);
      CHECK(descs[i].dtype.code == (i % 2 ? cases[c].scale_code : cases[c].data_code));
      CHECK(descs[i].dtype.bits == (i % 2 ? cases[c].scale_bits : 8));
      CHECK(descs[i].nbytes == (uint64_t)(descs[i].shape[0] * descs[i].shape[1] * descs[i].dtype.bits / 8));
      EXPECT_OK(quant_qtensor_buffer(t, dir, kind, &view));
      CHECK(view.ndim == 2 && view.shape[0] == descs[i].shape[0] && view.shape[1] == descs[i].shape[1]);
      CHECK(view.dtype.code == descs[i].dtype.code && view.data != NULL);
    }
    EXPECT_ERR(quant_qtensor_buffer(t, QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_AMAX, &view), QUANT_ERROR_UNSUPPORTED,
               "no amax buffer");
    quant_qtensor_free(t);
    quant_quantizer_free(q);
  }
}

static void copy_buffer(const quant_qtensor *t, uint32_t dir, quant_buffer_kind kind, uint8_t *dst, size_t n) {
  DLTensor v;
  EXPECT_OK(quant_qtensor_buffer(t, dir, kind, &v));
  memcpy(dst, v.data, n);
}

/* spec §4.7: the swizzled position of compact scale (i, j). */
static size_t swizzled_index(int64_t i, int64_t j, int64_t padj) {
  return (size_t)(((i / 128) * (padj / 4) + j / 4) * 512 + (i % 32) * 16 + ((i % 128) / 32) * 4 + j % 4);
}

static void test_swizzle_roundtrip(void) {
  enum { M = 256, Kd = 160 };
  static uint16_t bits[M * Kd];
  static float exact[M * Kd];
  static uint8_t compact[2][512 * 8], swz[2][512 * 8], direct[2][512 * 8];
  const char *formats[2] = {"mxfp8", "mxfp4"};
  int64_t shape[2] = {M, Kd};
  size_t sizes[2] = {256 * 8, 8 * 256}; /* rowwise [256, pad4(5)=8]; columnwise [pad4(8)=8, 256] or [256, 8] */
  int f, d;
  for (f = 0; f < 2; f++) {
    quant_quantizer_config cfg = check_config(formats[f]), scfg = check_config(formats[f]);
    quant_quantizer *q = NULL, *sq = NULL;
    quant_qtensor *t = NULL, *st = NULL;
    DLTensor in = bf16_input(bits, exact, shape);
    int64_t i, j;
    scfg.gemm_swizzled_scales = 1;
    EXPECT_OK(quant_quantizer_create(&cfg, &q));
    EXPECT_OK(quant_quantizer_create(&scfg, &sq));
    EXPECT_OK(quant_quantize(q, &in, NULL, &t));
    EXPECT_OK(quant_quantize(sq, &in, NULL, &st));
    for (d = 0; d < 2; d++) {
      copy_buffer(t, d ? QUANT_DIRECTION_COLUMNWISE : QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_SCALE_INV, compact[d], sizes[d]);
      copy_buffer(st, d ? QUANT_DIRECTION_COLUMNWISE : QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_SCALE_INV, direct[d], sizes[d]);
    }
    EXPECT_OK(quant_qtensor_set_gemm_swizzled_scales(t, 1, NULL));
    for (d = 0; d < 2; d++) {
      int bad = 0;
      copy_buffer(t, d ? QUANT_DIRECTION_COLUMNWISE : QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_SCALE_INV, swz[d], sizes[d]);
      CHECK(memcmp(swz[d], direct[d], sizes[d]) == 0);
      CHECK(memcmp(swz[d], compact[d], sizes[d]) != 0);
      /* Rowwise: i = row, j = K-block (5 of 8). Columnwise: i = column k, j = M-block (8 of 8). */
      for (i = 0; i < (d ? Kd : M); i++) {
        for (j = 0; j < (d ? M / 32 : Kd / 32); j++) {
          size_t ci = d == 0 ? (size_t)(i * 8 + j) : f == 0 ? (size_t)(j * 256 + i) : (size_t)(i * 8 + j);
          if (swz[d][swizzled_index(i, j, 8)] != compact[d][ci]) bad++;
        }
      }
      CHECK(bad == 0);
    }
    EXPECT_OK(quant_qtensor_set_gemm_swizzled_scales(t, 0, NULL));
    for (d = 0; d < 2; d++) {
      copy_buffer(t, d ? QUANT_DIRECTION_COLUMNWISE : QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_SCALE_INV, swz[d], sizes[d]);
      CHECK(memcmp(swz[d], compact[d], sizes[d]) == 0);
    }
    quant_qtensor_free(t), quant_qtensor_free(st);
    quant_quantizer_free(q), quant_quantizer_free(sq);
  }
}

static void test_update_usage(void) {
  enum { M = 256, Kd = 384 };
  static uint16_t bits[M * Kd];
  static float exact[M * Kd];
  static uint8_t a[M * Kd], b[M * Kd];
  int64_t shape[2] = {M, Kd};
  DLTensor in = bf16_input(bits, exact, shape);
  quant_quantizer_config mx = check_config("mxfp8"), b1 = check_config("fp8_block"), b2 = check_config("fp8_block");
  quant_quantizer *q = NULL, *q2 = NULL;
  quant_qtensor *t = NULL, *both = NULL;
  quant_qtensor_info info;
  info.struct_size = sizeof info;

  EXPECT_OK(quant_quantizer_create(&mx, &q));
  EXPECT_OK(quant_quantize(q, &in, NULL, &t));
  EXPECT_OK(quant_qtensor_update_usage(t, QUANT_USAGE_ROWWISE, NULL));
  EXPECT_ERR(quant_qtensor_update_usage(t, QUANT_USAGE_ROWWISE | QUANT_USAGE_COLUMNWISE, NULL), QUANT_ERROR_STATE,
             "cannot derive columnwise");
  EXPECT_OK(quant_qtensor_get_info(t, &info));
  CHECK(info.usage == QUANT_USAGE_ROWWISE);
  quant_qtensor_free(t), quant_quantizer_free(q);

  b2.block_dims = 2;
  EXPECT_OK(quant_quantizer_create(&b2, &q));
  EXPECT_OK(quant_quantize(q, &in, NULL, &both));
  EXPECT_OK(quant_quantizer_set_usage(q, QUANT_USAGE_ROWWISE));
  EXPECT_OK(quant_quantize(q, &in, NULL, &t));
  EXPECT_OK(quant_qtensor_update_usage(t, QUANT_USAGE_ROWWISE | QUANT_USAGE_COLUMNWISE, NULL));
  copy_buffer(t, QUANT_DIRECTION_COLUMNWISE, QUANT_BUFFER_DATA, a, sizeof a);
  copy_buffer(both, QUANT_DIRECTION_COLUMNWISE, QUANT_BUFFER_DATA, b, sizeof b);
  CHECK(memcmp(a, b, sizeof a) == 0);
  copy_buffer(t, QUANT_DIRECTION_COLUMNWISE, QUANT_BUFFER_SCALE_INV, a, 3 * 4 * 4);
  copy_buffer(both, QUANT_DIRECTION_COLUMNWISE, QUANT_BUFFER_SCALE_INV, b, 3 * 4 * 4);
  CHECK(memcmp(a, b, 3 * 4 * 4) == 0);
  EXPECT_ERR(quant_qtensor_set_gemm_swizzled_scales(t, 1, NULL), QUANT_ERROR_UNSUPPORTED, "no GEMM-swizzled");
  quant_qtensor_free(t), quant_qtensor_free(both), quant_quantizer_free(q);

  EXPECT_OK(quant_quantizer_create(&b1, &q2));
  EXPECT_OK(quant_quantizer_set_usage(q2, QUANT_USAGE_ROWWISE));
  EXPECT_OK(quant_quantize(q2, &in, NULL, &t));
  EXPECT_ERR(quant_qtensor_update_usage(t, QUANT_USAGE_ROWWISE | QUANT_USAGE_COLUMNWISE, NULL), QUANT_ERROR_STATE,
             "cannot derive columnwise");
  quant_qtensor_free(t), quant_quantizer_free(q2);
}

/* Caller-owned buffers full of garbage: quantize_into leaves the padded scale
 * positions zero. */
static void test_caller_buffers(void) {
  enum { M = 64, Kd = 96 };
  static uint16_t bits[M * Kd];
  static float exact[M * Kd];
  static uint8_t rdata[M * Kd], rscale[128 * 4], cdata[M * Kd], cscale[4 * 128];
  int64_t shape[2] = {M, Kd}, s0[2] = {M, Kd}, s1[2] = {128, 4}, s2[2] = {M, Kd}, s3[2] = {4, 128};
  DLTensor in = bf16_input(bits, exact, shape), bufs[4];
  quant_quantizer_config cfg = check_config("mxfp8");
  quant_quantizer *q = NULL;
  quant_qtensor *t = NULL;
  int i, j, bad = 0;
  memset(rscale, 0xA5, sizeof rscale), memset(cscale, 0xA5, sizeof cscale);
  bufs[0] = check_tensor(rdata, kDLFloat8_e4m3fn, 8, 2, s0);
  bufs[1] = check_tensor(rscale, kDLFloat8_e8m0fnu, 8, 2, s1);
  bufs[2] = check_tensor(cdata, kDLFloat8_e4m3fn, 8, 2, s2);
  bufs[3] = check_tensor(cscale, kDLFloat8_e8m0fnu, 8, 2, s3);
  EXPECT_OK(quant_quantizer_create(&cfg, &q));
  EXPECT_OK(quant_qtensor_from_buffers(q, shape, 2, bufs, 4, &t));
  EXPECT_OK(quant_quantize_into(q, &in, NULL, t));
  for (i = 0; i < 128; i++)
    for (j = 0; j < 4; j++)
      if ((i >= M || j >= Kd / 32) && rscale[i * 4 + j] != 0) bad++;
  for (i = 0; i < 4; i++)
    for (j = 0; j < 128; j++)
      if ((i >= M / 32 || j >= Kd) && cscale[i * 128 + j] != 0) bad++;
  CHECK(bad == 0);
  CHECK(rscale[0] != 0xA5 && cscale[0] != 0xA5);
  quant_qtensor_free(t);
  quant_quantizer_free(q);
}

static void expect_create_error(quant_quantizer_config cfg, const char *substr) {
  quant_quantizer *q = NULL;
  EXPECT_ERR(quant_quantizer_create(&cfg, &q), QUANT_ERROR_INVALID_ARGUMENT, substr);
  CHECK(q == NULL);
}

static void test_bad_input(void) {
  static uint16_t bits[48 * 64];
  /* Any shape is accepted (spec §14): the buffers count partial blocks and
   * packed rows hold ceil(n/2) bytes. */
  int64_t s_m[2] = {48, 64}, s_k[2] = {64, 40}, s3[3] = {2, 3, 63};
  const char *mx[2] = {"mxfp8", "mxfp4"};
  quant_quantizer_config c;
  int f;
  memset(bits, 0, sizeof bits);
  for (f = 0; f < 2; f++) {
    quant_quantizer_config cfg = check_config(mx[f]);
    quant_quantizer *q = NULL;
    quant_qtensor *t = NULL;
    quant_buffer_desc d[4];
    size_t count;
    int64_t neg[2] = {-1, 64};
    DLTensor in = check_tensor(bits, kDLBfloat, 16, 2, s_m);
    EXPECT_OK(quant_quantizer_create(&cfg, &q));
    EXPECT_OK(quant_quantizer_set_usage(q, QUANT_USAGE_ROWWISE | QUANT_USAGE_COLUMNWISE));
    EXPECT_OK(quant_quantizer_layout(q, s3, 3, d, 4, &count));
    /* [6, 63]: rowwise data [6, 63] or packed [6, 32]; scale_inv [128, 4];
     * columnwise data [6, 63] or packed transposed [63, 3]. */
    CHECK(count == 4);
    CHECK(d[0].shape[0] == 6 && d[0].shape[1] == (f == 0 ? 63 : 32));
    CHECK(d[1].shape[0] == 128 && d[1].shape[1] == 4);
    CHECK(d[2].shape[0] == (f == 0 ? 6 : 63) && d[2].shape[1] == (f == 0 ? 63 : 3));
    EXPECT_OK(quant_quantizer_layout(q, s_k, 2, d, 4, &count));
    EXPECT_OK(quant_quantize(q, &in, NULL, &t));
    quant_qtensor_free(t);
    t = NULL;
    in = check_tensor(bits, kDLBfloat, 16, 2, s_k);
    EXPECT_OK(quant_quantize(q, &in, NULL, &t));
    quant_qtensor_free(t);
    t = NULL;
    /* What remains refused names the argument and the reason. */
    EXPECT_ERR(quant_quantizer_layout(q, neg, 2, d, 4, &count), QUANT_ERROR_INVALID_ARGUMENT, "negative");
    quant_quantizer_free(q);
  }
  c = check_config("fp8_block"), c.element = QUANT_ELEMENT_E5M2;
  expect_create_error(c, "config.element: e5m2 not supported by fp8_block");
  c = check_config("fp8_block"), c.block_dims = 3;
  expect_create_error(c, "config.block_dims: 3");
  c = check_config("fp8_block"), c.scale_rounding = QUANT_SCALE_FLOOR;
  expect_create_error(c, "config.scale_rounding: not used");
  c = check_config("fp8_block"), c.gemm_swizzled_scales = 1;
  expect_create_error(c, "config.gemm_swizzled_scales");
  c = check_config("fp8_block"), c.amax_epsilon = -1;
  expect_create_error(c, "config.amax_epsilon");
  c = check_config("mxfp8"), c.block_dims = 2;
  expect_create_error(c, "config.block_dims: not used by format \"mxfp8\"");
  c = check_config("mxfp8"), c.fp32_scales = 1;
  expect_create_error(c, "config.fp32_scales");
  c = check_config("mxfp8"), c.element = QUANT_ELEMENT_E2M1;
  expect_create_error(c, "config.element: e2m1 not supported by mxfp8");
  c = check_config("mxfp4"), c.element = QUANT_ELEMENT_E4M3;
  expect_create_error(c, "config.element: e4m3 not supported by mxfp4");
  c = check_config("mxfp4"), c.scale_rounding = 7;
  expect_create_error(c, "config.scale_rounding: 7");
  c = check_config("mxfp4"), c.amax_epsilon = 1;
  expect_create_error(c, "config.amax_epsilon: not used");
}

int main(void) {
  test_roundtrips();
  test_layout_and_views();
  test_swizzle_roundtrip();
  test_update_usage();
  test_caller_buffers();
  test_bad_input();
  return check_summary("test_mx");
}
