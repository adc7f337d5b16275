/* NVFP4 through the C ABI: every option quantizes and dequantizes, buffer
 * views and the layout query agree, scale padding is zero, the GEMM swizzle
 * round-trips, update_usage derives 16x16 columnwise data and refuses 1x16,
 * stochastic rounding is reproducible, and bad shapes, dtypes and fields fail
 * with messages that name them. Built and run by `make test`. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "demo_data.h"

#define M 64
#define K 96
#define N ((size_t)M * K)

static uint16_t in_bf16[N];
static float in_f32[N];
static int64_t shape[2] = {M, K};

static DLTensor bf16_input(void) { return check_tensor(in_bf16, kDLBfloat, 16, 2, shape); }
static DLTensor f32_input(void) { return check_tensor(in_f32, kDLFloat, 32, 2, shape); }

static quant_quantizer *make(quant_quantizer_config cfg, uint32_t usage) {
  quant_quantizer *q = NULL;
  cfg.usage = usage;
  EXPECT_OK(quant_quantizer_create(&cfg, &q));
  return q;
}

/* The bytes of one buffer of one direction. */
static const uint8_t *buffer_bytes(const quant_qtensor *t, uint32_t dir, quant_buffer_kind kind, size_t *n) {
  DLTensor v;
  int32_t i;
  size_t elems = 1;
  if (quant_qtensor_buffer(t, dir, kind, &v) != QUANT_OK) {
    *n = 0;
    return NULL;
  }
  for (i = 0; i < v.ndim; i++) elems *= (size_t)v.shape[i];
  *n = elems * (v.dtype.bits / 8);
  return (const uint8_t *)v.data + v.byte_offset;
}

static int same_buffer(const quant_qtensor *a, const quant_qtensor *b, uint32_t dir, quant_buffer_kind kind) {
  size_t na, nb;
  const uint8_t *pa = buffer_bytes(a, dir, kind, &na), *pb = buffer_bytes(b, dir, kind, &nb);
  return pa && pb && na == nb && memcmp(pa, pb, na) == 0;
}

static demo_error dequant_error(const quant_qtensor *t, uint32_t dir, int undo) {
  static float out[N];
  DLTensor o = check_tensor(out, kDLFloat, 32, 2, shape);
  quant_dequantize_options opt;
  demo_error e;
  memset(&opt, 0, sizeof opt);
  opt.struct_size = sizeof opt;
  opt.direction = dir;
  opt.undo_transform = undo;
  EXPECT_OK(quant_dequantize_ex(t, &opt, &o));
  e = demo_compare(in_f32, out, N);
  return e;
}

/* Layout query, buffer views and zero scale padding for one quantizer. */
static void check_layout_and_views(quant_quantizer *q, const quant_qtensor *t) {
  quant_buffer_desc d[8];
  size_t count = 0, i;
  EXPECT_OK(quant_quantizer_layout(q, shape, 2, NULL, 0, &count));
  CHECK(count == 6);
  EXPECT_ERR(quant_quantizer_layout(q, shape, 2, d, 2, &count), QUANT_ERROR_BUFFER_TOO_SMALL, "capacity");
  EXPECT_OK(quant_quantizer_layout(q, shape, 2, d, 8, &count));
  for (i = 0; i < count; i++) {
    DLTensor v;
    int col = d[i].direction == QUANT_DIRECTION_COLUMNWISE;
    int64_t rows = col ? K : M, cols = col ? M : K;
    EXPECT_OK(quant_qtensor_buffer(t, d[i].direction, (quant_buffer_kind)d[i].kind, &v));
    CHECK(v.ndim == d[i].ndim && v.dtype.code == d[i].dtype.code && v.dtype.bits == d[i].dtype.bits);
    switch (d[i].kind) {
      case QUANT_BUFFER_DATA:
        CHECK(d[i].dtype.code == kDLUInt && d[i].dtype.bits == 8);
        CHECK(v.shape[0] == rows && v.shape[1] == cols / 2);
        break;
      case QUANT_BUFFER_SCALE_INV: {
        int64_t pr = (rows + 127) / 128 * 128, pc = (cols / 16 + 3) / 4 * 4, r, c;
        const uint8_t *s = (const uint8_t *)v.data;
        int padding_zero = 1;
        CHECK(d[i].dtype.code == kDLFloat8_e4m3fn && d[i].dtype.bits == 8);
        CHECK(v.shape[0] == pr && v.shape[1] == pc && d[i].nbytes == (uint64_t)(pr * pc));
        for (r = 0; r < pr; r++)
          for (c = 0; c < pc; c++)
            if ((r >= rows || c >= cols / 16) && s[r * pc + c] != 0) padding_zero = 0;
        CHECK(padding_zero); /* compact layout */
        break;
      }
      case QUANT_BUFFER_AMAX:
        CHECK(d[i].dtype.code == kDLFloat && d[i].dtype.bits == 32 && v.shape[0] == 1);
        CHECK(*(const float *)v.data > 0);
        break;
      default:
        CHECK(0);
    }
  }
}

static void test_every_option(void) {
  struct {
    const char *name;
    int32_t block_dims, rht, stochastic;
    uint32_t mask;
    double max_rel_rms; /* NVFP4 on Gaussian data: ~0.1 */
  } cases[] = {
      {"1x16", 1, QUANT_RHT_OFF, 0, 0, 0.15},
      {"16x16", 2, QUANT_RHT_OFF, 0, 0, 0.2},
      {"rht default", 1, QUANT_RHT_DEFAULT, 0, 0, 0.15},
      {"rht custom", 1, QUANT_RHT_CUSTOM_MASK, 0, 0x00FF, 0.15},
      {"sr", 1, QUANT_RHT_OFF, 1, 0, 0.2},
      {"rht sr", 1, QUANT_RHT_DEFAULT, 1, 0, 0.2},
      {"16x16 sr", 2, QUANT_RHT_OFF, 1, 0, 0.25},
  };
  size_t i;
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    quant_quantizer_config cfg = check_config("nvfp4");
    quant_quantizer *q;
    quant_qtensor *t = NULL;
    quant_qtensor_info info;
    DLTensor in = bf16_input();
    demo_error row, col, col_stored;
    cfg.block_dims = cases[i].block_dims;
    cfg.rht = cases[i].rht;
    cfg.rht_sign_mask = cases[i].mask;
    cfg.stochastic_rounding = cases[i].stochastic;
    cfg.seed = cases[i].stochastic ? 1234 : 0;
    q = make(cfg, 0);
    EXPECT_OK(quant_quantize(q, &in, NULL, &t));
    info.struct_size = sizeof info;
    EXPECT_OK(quant_qtensor_get_info(t, &info));
    CHECK(info.usage == (QUANT_USAGE_ROWWISE | QUANT_USAGE_COLUMNWISE));
    CHECK(strcmp(info.rowwise_format, "nvfp4") == 0 && strcmp(info.columnwise_format, "nvfp4") == 0);
    check_layout_and_views(q, t);
    row = dequant_error(t, QUANT_DIRECTION_ROWWISE, 0);
    col = dequant_error(t, QUANT_DIRECTION_COLUMNWISE, 1);
    col_stored = dequant_error(t, QUANT_DIRECTION_COLUMNWISE, 0);
    if (row.rel_rms > cases[i].max_rel_rms || col.rel_rms > cases[i].max_rel_rms)
      fprintf(stderr, "%s: rel rms rowwise %g columnwise %g\n", cases[i].name, row.rel_rms, col.rel_rms);
    CHECK(row.rel_rms < cases[i].max_rel_rms);
    CHECK(col.rel_rms < cases[i].max_rel_rms);
    if (cases[i].rht) {
      /* The stored columnwise values are the transform, far from the data. */
      CHECK(col_stored.rel_rms > 0.5);
    } else {
      CHECK(col_stored.rel_rms == col.rel_rms);
    }
    quant_qtensor_free(t);
    quant_quantizer_free(q);
  }
}

/* Spec §1.5's ties through the ABI: 42 elsewhere makes the global scale 64 and
 * the block scale 64 (E4M3 0x68), so the elements reach the encoder unchanged. */
static void test_tie_golden_vector(void) {
  static uint16_t x[32 * 32];
  const float pattern[16] = {6, 0.25f, -0.75f, 1.25f, -1.75f, 2.5f, -3.5f, 5, -6, -0.25f, 0.75f, -1.25f, 1.75f, -2.5f, 3.5f, -5};
  /* codes 7 0 A 2 C 4 E 6 F 8 2 A 4 C 6 E, even element in the low nibble */
  const uint8_t want[8] = {0x07, 0x2A, 0x4C, 0x6E, 0x8F, 0xA2, 0xC4, 0xE6};
  int64_t sh[2] = {32, 32};
  DLTensor in = check_tensor(x, kDLBfloat, 16, 2, sh), v;
  quant_quantizer *q = make(check_config("nvfp4"), QUANT_USAGE_ROWWISE);
  quant_qtensor *t = NULL;
  int i;
  memset(x, 0, sizeof x);
  for (i = 0; i < 16; i++) x[i] = demo_to_bf16(pattern[i]);
  x[16 * 32 + 16] = demo_to_bf16(42);
  EXPECT_OK(quant_quantize(q, &in, NULL, &t));
  EXPECT_OK(quant_qtensor_buffer(t, QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_DATA, &v));
  CHECK(memcmp(v.data, want, 8) == 0);
  EXPECT_OK(quant_qtensor_buffer(t, QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_SCALE_INV, &v));
  CHECK(((const uint8_t *)v.data)[0] == 0x68);
  EXPECT_OK(quant_qtensor_buffer(t, QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_AMAX, &v));
  CHECK(*(const float *)v.data == 42.0f);
  quant_qtensor_free(t);
  quant_quantizer_free(q);
}

static void test_swizzle_round_trip(void) {
  quant_quantizer_config cfg = check_config("nvfp4");
  quant_quantizer *q = make(cfg, 0), *qs;
  quant_qtensor *t = NULL, *ref = NULL, *sw = NULL;
  DLTensor in = bf16_input();
  cfg.gemm_swizzled_scales = 1;
  qs = make(cfg, 0);
  EXPECT_OK(quant_quantize(q, &in, NULL, &t));
  EXPECT_OK(quant_quantize(q, &in, NULL, &ref));
  EXPECT_OK(quant_quantize(qs, &in, NULL, &sw));
  EXPECT_OK(quant_qtensor_set_gemm_swizzled_scales(t, 1, NULL));
  CHECK(same_buffer(t, sw, QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_SCALE_INV));
  CHECK(same_buffer(t, sw, QUANT_DIRECTION_COLUMNWISE, QUANT_BUFFER_SCALE_INV));
  CHECK(!same_buffer(t, ref, QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_SCALE_INV));
  CHECK(dequant_error(t, QUANT_DIRECTION_ROWWISE, 0).rel_rms == dequant_error(ref, QUANT_DIRECTION_ROWWISE, 0).rel_rms);
  EXPECT_OK(quant_qtensor_set_gemm_swizzled_scales(t, 0, NULL));
  CHECK(same_buffer(t, ref, QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_SCALE_INV));
  CHECK(same_buffer(t, ref, QUANT_DIRECTION_COLUMNWISE, QUANT_BUFFER_SCALE_INV));
  CHECK(same_buffer(t, ref, QUANT_DIRECTION_COLUMNWISE, QUANT_BUFFER_DATA));
  quant_qtensor_free(t);
  quant_qtensor_free(ref);
  quant_qtensor_free(sw);
  quant_quantizer_free(q);
  quant_quantizer_free(qs);
}

static void test_update_usage(void) {
  quant_quantizer_config cfg = check_config("nvfp4");
  quant_quantizer *q1 = make(cfg, QUANT_USAGE_ROWWISE), *q2, *q2both;
  quant_qtensor *t = NULL, *direct = NULL;
  DLTensor in = bf16_input();
  uint32_t usage = 0;
  quant_qtensor_info info;
  /* 1x16: columnwise cannot come from rowwise. */
  EXPECT_OK(quant_quantize(q1, &in, NULL, &t));
  EXPECT_ERR(quant_qtensor_update_usage(t, QUANT_USAGE_ROWWISE | QUANT_USAGE_COLUMNWISE, NULL), QUANT_ERROR_STATE,
             "cannot derive columnwise");
  info.struct_size = sizeof info;
  EXPECT_OK(quant_qtensor_get_info(t, &info));
  CHECK(info.usage == QUANT_USAGE_ROWWISE);
  quant_qtensor_free(t);
  t = NULL;
  /* 16x16: derived columnwise bytes equal a direct quantize's. */
  cfg.block_dims = 2;
  q2 = make(cfg, QUANT_USAGE_ROWWISE);
  q2both = make(cfg, 0);
  EXPECT_OK(quant_quantizer_get_usage(q2both, &usage));
  CHECK(usage == (QUANT_USAGE_ROWWISE | QUANT_USAGE_COLUMNWISE));
  EXPECT_OK(quant_quantize(q2, &in, NULL, &t));
  EXPECT_OK(quant_quantize(q2both, &in, NULL, &direct));
  EXPECT_OK(quant_qtensor_update_usage(t, QUANT_USAGE_ROWWISE | QUANT_USAGE_COLUMNWISE, NULL));
  CHECK(same_buffer(t, direct, QUANT_DIRECTION_COLUMNWISE, QUANT_BUFFER_DATA));
  CHECK(same_buffer(t, direct, QUANT_DIRECTION_COLUMNWISE, QUANT_BUFFER_SCALE_INV));
  CHECK(same_buffer(t, direct, QUANT_DIRECTION_COLUMNWISE, QUANT_BUFFER_AMAX));
  EXPECT_OK(quant_qtensor_update_usage(t, QUANT_USAGE_COLUMNWISE, NULL));
  EXPECT_OK(quant_qtensor_get_info(t, &info));
  CHECK(info.usage == QUANT_USAGE_COLUMNWISE);
  quant_qtensor_free(t);
  quant_qtensor_free(direct);
  quant_quantizer_free(q1);
  quant_quantizer_free(q2);
  quant_quantizer_free(q2both);
}

static void test_stochastic_rounding_reproducible(void) {
  quant_quantizer_config cfg = check_config("nvfp4");
  quant_quantizer *a, *b, *c;
  quant_qtensor *ta = NULL, *tb = NULL, *tc = NULL;
  DLTensor in = bf16_input();
  cfg.stochastic_rounding = 1;
  cfg.rht = QUANT_RHT_DEFAULT;
  cfg.seed = 7;
  cfg.offset = 100;
  a = make(cfg, 0);
  b = make(cfg, 0);
  cfg.offset = 101;
  c = make(cfg, 0);
  EXPECT_OK(quant_quantize(a, &in, NULL, &ta));
  EXPECT_OK(quant_quantize(b, &in, NULL, &tb));
  EXPECT_OK(quant_quantize(c, &in, NULL, &tc));
  CHECK(same_buffer(ta, tb, QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_DATA));
  CHECK(same_buffer(ta, tb, QUANT_DIRECTION_COLUMNWISE, QUANT_BUFFER_DATA));
  CHECK(!same_buffer(ta, tc, QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_DATA));
  CHECK(!same_buffer(ta, tc, QUANT_DIRECTION_COLUMNWISE, QUANT_BUFFER_DATA));
  CHECK(same_buffer(ta, tc, QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_SCALE_INV));
  quant_qtensor_free(ta);
  quant_qtensor_free(tb);
  quant_qtensor_free(tc);
  quant_quantizer_free(a);
  quant_quantizer_free(b);
  quant_quantizer_free(c);
}

/* Caller-owned buffers from the layout query hold the same bytes as
 * libquant's, and the amax the caller computes (e.g. to all-reduce it) is the
 * one quantize uses. */
static void test_caller_buffers_and_amax(void) {
  quant_quantizer_config cfg = check_config("nvfp4");
  quant_quantizer *q;
  quant_qtensor *own = NULL, *mine = NULL;
  quant_buffer_desc d[6];
  DLTensor bufs[6], in = bf16_input(), amax_t, v;
  int64_t two = 2;
  float amax[2];
  void *mem[6];
  size_t count = 0, i;
  quant_quantize_options opts;
  cfg.rht = QUANT_RHT_DEFAULT;
  q = make(cfg, 0);
  EXPECT_OK(quant_quantizer_layout(q, shape, 2, d, 6, &count));
  for (i = 0; i < count; i++) {
    mem[i] = malloc(d[i].nbytes);
    memset(mem[i], 0xA5, d[i].nbytes); /* garbage, padding included */
    bufs[i] = check_tensor(mem[i], (DLDataTypeCode)d[i].dtype.code, d[i].dtype.bits, d[i].ndim, d[i].shape);
  }
  EXPECT_OK(quant_qtensor_from_buffers(q, shape, 2, bufs, count, &mine));
  amax_t = check_tensor(amax, kDLFloat, 32, 1, &two);
  EXPECT_OK(quant_compute_amax(q, &in, &amax_t, NULL));
  memset(&opts, 0, sizeof opts);
  opts.struct_size = sizeof opts;
  opts.amax = &amax_t;
  EXPECT_OK(quant_quantize_into(q, &in, &opts, mine));
  EXPECT_OK(quant_quantize(q, &in, NULL, &own));
  for (i = 0; i < 3; i++) {
    CHECK(same_buffer(own, mine, QUANT_DIRECTION_ROWWISE, (quant_buffer_kind)i));
    CHECK(same_buffer(own, mine, QUANT_DIRECTION_COLUMNWISE, (quant_buffer_kind)i));
  }
  EXPECT_OK(quant_qtensor_buffer(own, QUANT_DIRECTION_COLUMNWISE, QUANT_BUFFER_AMAX, &v));
  CHECK(*(const float *)v.data == amax[1]);
  CHECK(amax[0] != amax[1]); /* the columnwise amax is that of the transform */
  quant_qtensor_free(own);
  quant_qtensor_free(mine);
  for (i = 0; i < count; i++) free(mem[i]);
  quant_quantizer_free(q);
}

static void test_errors(void) {
  quant_quantizer *q = NULL;
  quant_qtensor *t = NULL;
  quant_quantizer_config cfg;
  quant_buffer_desc d[6];
  size_t count;
  int64_t bad_m[2] = {24, 32}, bad_k[2] = {32, 40}, bad3[3] = {3, 8, 32};
  DLTensor in, f32 = f32_input(), out;
  quant_dequantize_options opt;
  static float outbuf[N];

  /* Fields nvfp4 does not use, or uses only with another one. */
  cfg = check_config("nvfp4");
  cfg.amax_history_len = 16;
  EXPECT_ERR(quant_quantizer_create(&cfg, &q), QUANT_ERROR_INVALID_ARGUMENT, "config.amax_history_len");
  cfg = check_config("nvfp4");
  cfg.seed = 3;
  EXPECT_ERR(quant_quantizer_create(&cfg, &q), QUANT_ERROR_INVALID_ARGUMENT, "config.seed");
  cfg = check_config("nvfp4");
  cfg.offset = 3;
  EXPECT_ERR(quant_quantizer_create(&cfg, &q), QUANT_ERROR_INVALID_ARGUMENT, "config.offset");
  cfg = check_config("nvfp4");
  cfg.rht = QUANT_RHT_DEFAULT;
  cfg.rht_sign_mask = 5;
  EXPECT_ERR(quant_quantizer_create(&cfg, &q), QUANT_ERROR_INVALID_ARGUMENT, "config.rht_sign_mask");
  cfg = check_config("nvfp4");
  cfg.rht = QUANT_RHT_CUSTOM_MASK;
  cfg.rht_sign_mask = 0x10000;
  EXPECT_ERR(quant_quantizer_create(&cfg, &q), QUANT_ERROR_INVALID_ARGUMENT, "config.rht_sign_mask");
  cfg = check_config("nvfp4");
  cfg.rht = QUANT_RHT_DEFAULT;
  cfg.block_dims = 2;
  EXPECT_ERR(quant_quantizer_create(&cfg, &q), QUANT_ERROR_INVALID_ARGUMENT, "config.rht");
  cfg = check_config("nvfp4");
  cfg.block_dims = 3;
  EXPECT_ERR(quant_quantizer_create(&cfg, &q), QUANT_ERROR_INVALID_ARGUMENT, "config.block_dims");
  cfg = check_config("nvfp4");
  cfg.element = QUANT_ELEMENT_E4M3;
  EXPECT_ERR(quant_quantizer_create(&cfg, &q), QUANT_ERROR_INVALID_ARGUMENT, "config.element");
  cfg = check_config("nvfp4");
  cfg.force_pow2_scales = 1;
  EXPECT_ERR(quant_quantizer_create(&cfg, &q), QUANT_ERROR_INVALID_ARGUMENT, "config.force_pow2_scales");
  CHECK(q == NULL);

  /* Shapes whose 2-D view is not made of 16x16 blocks are accepted (spec
   * §14): [24, 32] rowwise data [24, 16], columnwise [32, 12]; [32, 40]
   * scale_inv [128, 4] (ceil(40/16) = 3 blocks); a negative dim is refused. */
  cfg = check_config("nvfp4");
  q = make(cfg, 0);
  EXPECT_OK(quant_quantizer_set_usage(q, QUANT_USAGE_ROWWISE | QUANT_USAGE_COLUMNWISE));
  EXPECT_OK(quant_quantizer_layout(q, bad_m, 2, d, 6, &count));
  CHECK(count == 6 && d[0].shape[0] == 24 && d[0].shape[1] == 16 && d[3].shape[0] == 32 && d[3].shape[1] == 12);
  EXPECT_OK(quant_quantizer_layout(q, bad_k, 2, d, 6, &count));
  CHECK(d[1].shape[0] == 128 && d[1].shape[1] == 4);
  in = check_tensor(in_bf16, kDLBfloat, 16, 2, bad_m);
  EXPECT_OK(quant_quantize(q, &in, NULL, &t));
  quant_qtensor_free(t);
  in = check_tensor(in_bf16, kDLBfloat, 16, 2, bad_k);
  EXPECT_OK(quant_quantize(q, &in, NULL, &t));
  quant_qtensor_free(t);
  in = check_tensor(in_bf16, kDLBfloat, 16, 3, bad3);
  EXPECT_OK(quant_quantize(q, &in, NULL, &t));
  quant_qtensor_free(t);
  t = NULL;
  bad_m[0] = -24;
  EXPECT_ERR(quant_quantizer_layout(q, bad_m, 2, d, 6, &count), QUANT_ERROR_INVALID_ARGUMENT, "negative");

  /* Dequantize options. */
  EXPECT_OK(quant_quantize(q, &f32, NULL, &t));
  out = check_tensor(outbuf, kDLFloat, 32, 2, shape);
  EXPECT_OK(quant_dequantize_ex(t, NULL, &out));
  memset(&opt, 0, sizeof opt);
  opt.struct_size = 4;
  EXPECT_ERR(quant_dequantize_ex(t, &opt, &out), QUANT_ERROR_INVALID_ARGUMENT, "options: struct_size");
  opt.struct_size = sizeof opt;
  opt.direction = 7;
  EXPECT_ERR(quant_dequantize_ex(t, &opt, &out), QUANT_ERROR_INVALID_ARGUMENT, "options.direction");
  quant_qtensor_free(t);
  t = NULL;
  quant_quantizer_free(q);

  /* The RHT needs BF16 input whenever the columnwise copy is made. */
  cfg = check_config("nvfp4");
  cfg.rht = QUANT_RHT_DEFAULT;
  q = make(cfg, 0);
  EXPECT_ERR(quant_quantize(q, &f32, NULL, &t), QUANT_ERROR_INVALID_ARGUMENT, "bfloat16");
  EXPECT_OK(quant_quantizer_set_usage(q, QUANT_USAGE_ROWWISE));
  EXPECT_OK(quant_quantize(q, &f32, NULL, &t)); /* no transform: any dtype */
  quant_qtensor_free(t);
  quant_quantizer_free(q);
}

int main(void) {
  size_t i;
  demo_fill(in_f32, N, 1.0);
  for (i = 0; i < N; i++) {
    in_bf16[i] = demo_to_bf16(in_f32[i]);
    in_f32[i] = demo_from_bf16(in_bf16[i]);
  }
  test_every_option();
  test_tie_golden_vector();
  test_swizzle_round_trip();
  test_update_usage();
  test_stochastic_rounding_reproducible();
  test_caller_buffers_and_amax();
  test_errors();
  return check_summary("test_nvfp4");
}
