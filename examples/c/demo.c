/* libquant demo: quantizes one activation-like matrix with every format option
 * libquant has, dequantizes each direction, and prints the error against the
 * original (a transformed copy, nvfp4's RHT columnwise one, is transformed back
 * first). Run with `make demo`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "demo_data.h"

#define ROWS 256
#define COLS 1024

static int fail(const char *what, quant_status s) {
  fprintf(stderr, "demo: %s failed: %s: %s\n", what, quant_status_string(s), quant_last_error());
  return 1;
}

typedef struct {
  const char *label;
  quant_quantizer_config cfg;
  int warmup_steps; /* delayed scaling: quantize+update this many times first */
} demo_case;

static int run_case(const demo_case *c, const DLTensor *in, const float *ref, float *out) {
  quant_quantizer *q = NULL;
  quant_qtensor *t = NULL;
  quant_status s;
  int64_t shape[2];
  size_t rows = (size_t)in->shape[0], cols = (size_t)in->shape[1];
  DLTensor o;
  uint32_t dirs[2] = {QUANT_DIRECTION_ROWWISE, QUANT_DIRECTION_COLUMNWISE};
  int d, step;
  quant_qtensor_info info;
  quant_dequantize_options dopt;

  memset(&dopt, 0, sizeof dopt);
  dopt.struct_size = sizeof dopt;
  dopt.undo_transform = 1;
  s = quant_quantizer_create(&c->cfg, &q);
  if (s != QUANT_OK) return fail(c->label, s);
  for (step = 0; step < c->warmup_steps; step++) {
    if ((s = quant_quantize(q, in, NULL, &t)) != QUANT_OK) return fail("warm-up quantize", s);
    quant_qtensor_free(t);
    if ((s = quant_delayed_scaling_update(q, QUANT_DIRECTION_ANY, NULL)) != QUANT_OK) return fail("update", s);
  }
  if ((s = quant_quantize(q, in, NULL, &t)) != QUANT_OK) return fail(c->label, s);
  info.struct_size = sizeof info;
  if ((s = quant_qtensor_get_info(t, &info)) != QUANT_OK) return fail("info", s);

  memset(&o, 0, sizeof o);
  o.data = out;
  o.device.device_type = kDLCPU;
  o.ndim = 2;
  o.dtype.code = kDLFloat;
  o.dtype.bits = 32;
  o.dtype.lanes = 1;
  shape[0] = in->shape[0];
  shape[1] = in->shape[1];
  o.shape = shape;
  for (d = 0; d < 2; d++) {
    demo_error e;
    if (!(info.usage & dirs[d])) continue;
    /* undo_transform: nvfp4's RHT columnwise copy is compared in the data's domain. */
    dopt.direction = dirs[d];
    if ((s = quant_dequantize_ex(t, &dopt, &o)) != QUANT_OK) return fail("dequantize", s);
    e = demo_compare(ref, out, rows * cols);
    printf("%-38s %-10s %-10s %11.4g %10.3e %8.2f %10.3e\n", c->label,
           d == 0 ? info.rowwise_format : info.columnwise_format, d == 0 ? "rowwise" : "columnwise",
           e.max_abs, e.rel_rms, e.sqnr_db, demo_worst_row(ref, out, rows, cols));
  }
  quant_qtensor_free(t);
  quant_quantizer_free(q);
  return 0;
}

/* Prints which format pairs quant_gemm multiplies on a device, as a matrix
 * (rows: A's format, columns: B's), then each distinct reason once. */
static int print_gemm_support(DLDevice dev, const char *label) {
  static const char *level_names[] = {"-", "emulated", "native"};
  static const char *legend[] = {"- (unsupported)", "emulated", "native"};
  quant_gemm_support_entry *t;
  size_t count = 0, n = 0, i, j, r;
  quant_status s = quant_gemm_support_table(dev, NULL, 0, &count);
  if (s != QUANT_OK) return fail("gemm support table", s);
  t = calloc(count, sizeof *t);
  if (!t) return 1;
  if ((s = quant_gemm_support_table(dev, t, count, &count)) != QUANT_OK) {
    free(t);
    return fail("gemm support table", s);
  }
  while (n * n < count) n++;
  printf("\nGEMM support on %s (rows: format of A, columns: format of B)\n%-10s", label, "");
  for (j = 0; j < n; j++) printf(" %-10s", t[j].format_b);
  printf("\n");
  for (i = 0; i < n; i++) {
    printf("%-10s", t[i * n].format_a);
    for (j = 0; j < n; j++) {
      int lv = t[i * n + j].level;
      printf(" %-10s", lv >= 0 && lv <= 2 ? level_names[lv] : "?");
    }
    printf("\n");
  }
  for (i = 0; i < count; i++) {
    for (r = 0; r < i && strcmp(t[r].reason, t[i].reason) != 0; r++) {
    }
    if (r == i) printf("  %s: %s\n", legend[t[i].level >= 0 && t[i].level <= 2 ? t[i].level : 0], t[i].reason);
  }
  free(t);
  return 0;
}

static quant_quantizer_config config(const char *format) {
  quant_quantizer_config c;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  c.format = format;
  return c;
}

/* Whether a format is registered: plugins add formats (the mxfp6 plugin of
 * examples/goplugin when LIBQUANT_PLUGIN_PATH names it). */
static int have_format(const char *format) {
  quant_quantizer_config c = config(format);
  quant_quantizer *q = NULL;
  if (quant_quantizer_create(&c, &q) != QUANT_OK) return 0;
  quant_quantizer_free(q);
  return 1;
}

/* Lists the plugin loads (LIBQUANT_PLUGIN_PATH, libquant_cuda.so). */
static void print_plugins(void) {
  size_t n = 0, i;
  if (quant_plugin_count(&n) != QUANT_OK || n == 0) return;
  printf("\nplugins\n");
  for (i = 0; i < n; i++) {
    quant_plugin_info info;
    const char *f = "";
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (quant_plugin_get_info(i, &info) != QUANT_OK) continue;
    if (info.num_formats > 0) quant_plugin_get_format(i, 0, &f);
    printf("  %-10s %-8s %s%s%s%s\n", info.name[0] ? info.name : "?", info.version, info.path,
           info.num_formats ? " (format " : "", f, info.num_formats ? ")" : "");
    if (info.status != QUANT_OK) printf("    not loaded: %s\n", info.message);
  }
}

int main(void) {
  size_t n = (size_t)ROWS * COLS, i;
  float *x = malloc(n * sizeof *x), *ref = malloc(n * sizeof *ref), *out = malloc(n * sizeof *out);
  uint16_t *xb = malloc(n * sizeof *xb);
  int64_t shape[2] = {ROWS, COLS};
  DLTensor in;
  demo_case cases[32];
  int nc = 0, k, rc = 0, first_block = 0;

  if (!x || !ref || !out || !xb) return 1;
  demo_fill(x, n, 1.0);
  /* Rows span 2^-8..2^8 in magnitude, as activations of different tokens do:
   * this is where per-block scales beat one scale per tensor. */
  for (i = 0; i < n; i++) x[i] = (float)ldexp(x[i], (int)((i / COLS) * 37 % 17) - 8);
  /* The input is BF16, as activations are; the reference is its exact value. */
  for (i = 0; i < n; i++) {
    xb[i] = demo_to_bf16(x[i]);
    ref[i] = demo_from_bf16(xb[i]);
  }
  memset(&in, 0, sizeof in);
  in.data = xb;
  in.device.device_type = kDLCPU;
  in.ndim = 2;
  in.dtype.code = kDLBfloat;
  in.dtype.bits = 16;
  in.dtype.lanes = 1;
  in.shape = shape;

  cases[nc].label = "fp8 e4m3 current scaling";
  cases[nc].cfg = config("fp8");
  cases[nc++].warmup_steps = 0;

  cases[nc].label = "fp8 e5m2 current scaling";
  cases[nc].cfg = config("fp8");
  cases[nc].cfg.element = QUANT_ELEMENT_E5M2;
  cases[nc++].warmup_steps = 0;

  cases[nc].label = "fp8 e4m3 current, pow2 scale";
  cases[nc].cfg = config("fp8");
  cases[nc].cfg.force_pow2_scales = 1;
  cases[nc++].warmup_steps = 0;

  cases[nc].label = "fp8 e4m3 delayed (2 steps, hist 16)";
  cases[nc].cfg = config("fp8");
  cases[nc].cfg.scaling = QUANT_SCALING_DELAYED;
  cases[nc].cfg.amax_history_len = 16;
  cases[nc++].warmup_steps = 2;

  cases[nc].label = "fp8 e4m3 delayed, no update yet";
  cases[nc].cfg = config("fp8");
  cases[nc].cfg.scaling = QUANT_SCALING_DELAYED;
  cases[nc++].warmup_steps = 0;

  cases[nc].label = "fp8 e5m2 delayed, margin 1";
  cases[nc].cfg = config("fp8");
  cases[nc].cfg.element = QUANT_ELEMENT_E5M2;
  cases[nc].cfg.scaling = QUANT_SCALING_DELAYED;
  cases[nc].cfg.margin = 1;
  cases[nc++].warmup_steps = 1;

  first_block = nc; /* the block formats, shown again at a ragged shape */
  cases[nc].label = "mxfp8 e4m3, RCEIL (TE)";
  cases[nc].cfg = config("mxfp8");
  cases[nc++].warmup_steps = 0;

  cases[nc].label = "mxfp8 e4m3, FLOOR (OCP)";
  cases[nc].cfg = config("mxfp8");
  cases[nc].cfg.scale_rounding = QUANT_SCALE_FLOOR;
  cases[nc++].warmup_steps = 0;

  cases[nc].label = "mxfp8 e5m2, RCEIL, swizzled scales";
  cases[nc].cfg = config("mxfp8");
  cases[nc].cfg.element = QUANT_ELEMENT_E5M2;
  cases[nc].cfg.gemm_swizzled_scales = 1;
  cases[nc++].warmup_steps = 0;

  cases[nc].label = "mxfp4 e2m1, RCEIL";
  cases[nc].cfg = config("mxfp4");
  cases[nc++].warmup_steps = 0;

  cases[nc].label = "mxfp4 e2m1, FLOOR (OCP)";
  cases[nc].cfg = config("mxfp4");
  cases[nc].cfg.scale_rounding = QUANT_SCALE_FLOOR;
  cases[nc++].warmup_steps = 0;

  cases[nc].label = "fp8 block 1x128, pow2 scales";
  cases[nc].cfg = config("fp8_block");
  cases[nc++].warmup_steps = 0;

  cases[nc].label = "fp8 block 1x128, fp32 scales";
  cases[nc].cfg = config("fp8_block");
  cases[nc].cfg.fp32_scales = 1;
  cases[nc++].warmup_steps = 0;

  cases[nc].label = "fp8 block 128x128, pow2 scales";
  cases[nc].cfg = config("fp8_block");
  cases[nc].cfg.block_dims = 2;
  cases[nc++].warmup_steps = 0;

  cases[nc].label = "fp8 block 128x128, fp32 scales";
  cases[nc].cfg = config("fp8_block");
  cases[nc].cfg.block_dims = 2;
  cases[nc].cfg.fp32_scales = 1;
  cases[nc++].warmup_steps = 0;

  cases[nc].label = "nvfp4 1x16";
  cases[nc].cfg = config("nvfp4");
  cases[nc++].warmup_steps = 0;

  cases[nc].label = "nvfp4 16x16 (weights)";
  cases[nc].cfg = config("nvfp4");
  cases[nc].cfg.block_dims = 2;
  cases[nc++].warmup_steps = 0;

  cases[nc].label = "nvfp4 1x16, RHT (inputs)";
  cases[nc].cfg = config("nvfp4");
  cases[nc].cfg.rht = QUANT_RHT_DEFAULT;
  cases[nc++].warmup_steps = 0;

  cases[nc].label = "nvfp4 1x16, stochastic rounding";
  cases[nc].cfg = config("nvfp4");
  cases[nc].cfg.stochastic_rounding = 1;
  cases[nc].cfg.seed = 1;
  cases[nc++].warmup_steps = 0;

  cases[nc].label = "nvfp4 1x16, RHT + SR (grads)";
  cases[nc].cfg = config("nvfp4");
  cases[nc].cfg.rht = QUANT_RHT_DEFAULT;
  cases[nc].cfg.stochastic_rounding = 1;
  cases[nc].cfg.seed = 1;
  cases[nc++].warmup_steps = 0;

  if (have_format("mxfp6")) {
    static const struct {
      const char *label;
      int32_t element, rounding;
    } mx6[] = {{"mxfp6 e2m3, RCEIL (plugin)", QUANT_ELEMENT_E2M3, QUANT_SCALE_RCEIL},
               {"mxfp6 e2m3, FLOOR (OCP, plugin)", QUANT_ELEMENT_E2M3, QUANT_SCALE_FLOOR},
               {"mxfp6 e3m2, RCEIL (plugin)", QUANT_ELEMENT_E3M2, QUANT_SCALE_RCEIL},
               {"mxfp6 e3m2, FLOOR (OCP, plugin)", QUANT_ELEMENT_E3M2, QUANT_SCALE_FLOOR}};
    for (k = 0; k < 4; k++) {
      cases[nc].label = mx6[k].label;
      cases[nc].cfg = config("mxfp6");
      cases[nc].cfg.element = mx6[k].element;
      cases[nc].cfg.scale_rounding = mx6[k].rounding;
      cases[nc++].warmup_steps = 0;
    }
  }

  printf("libquant %s: %d x %d BF16 activations (rows scaled by 2^-8..2^8, 0.1%% 20x outliers), CPU\n\n", quant_version(), ROWS, COLS);
  printf("%-38s %-10s %-10s %11s %10s %8s %10s\n", "quantizer", "format", "direction", "max |err|", "rel RMS", "SQNR dB",
         "worst row");
  for (k = 0; k < nc; k++) rc |= run_case(&cases[k], &in, ref, out);
  {
    /* Any shape (spec §14): the first RAGGED_ROWS x RAGGED_COLS of the same
     * data, no dim a multiple of any block (45 tokens of an MoE expert). The
     * bytes are those of the zero-padded tensor with the padding dropped. */
    enum { RAGGED_ROWS = 45, RAGGED_COLS = 1000 };
    int64_t rshape[2] = {RAGGED_ROWS, RAGGED_COLS};
    DLTensor rin = in;
    uint16_t *rb = malloc((size_t)RAGGED_ROWS * RAGGED_COLS * sizeof *rb);
    float *rref = malloc((size_t)RAGGED_ROWS * RAGGED_COLS * sizeof *rref);
    size_t r;
    if (!rb || !rref) return 1;
    for (r = 0; r < RAGGED_ROWS; r++) {
      memcpy(rb + r * RAGGED_COLS, xb + r * COLS, RAGGED_COLS * sizeof *rb);
      memcpy(rref + r * RAGGED_COLS, ref + r * COLS, RAGGED_COLS * sizeof *rref);
    }
    rin.data = rb;
    rin.shape = rshape;
    printf("\nAny shape: the block formats on the first %d x %d of the same data (no dim a multiple of 16 or 32)\n\n",
           RAGGED_ROWS, RAGGED_COLS);
    for (k = first_block; k < nc; k++) rc |= run_case(&cases[k], &rin, rref, out);
    free(rb);
    free(rref);
  }
  {
    DLDevice cpu = {kDLCPU, 0}, cuda = {kDLCUDA, 0};
    rc |= print_gemm_support(cpu, "cpu");
    rc |= print_gemm_support(cuda, "cuda:0");
  }
  print_plugins();
  free(x);
  free(ref);
  free(out);
  free(xb);
  return rc;
}
