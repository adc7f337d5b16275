/* Quantize plans (quant_quantize_plan_*): a run gives the bytes
 * quant_quantize_into gives for the same input, through the Go host (the
 * built-in formats, a hybrid quantizer) and through a native plugin's prepared
 * kernel call (the toy plugin's CPU format: no Go code on the run); the plan
 * pins its dst; every bad argument returns a status naming it. Run from the
 * repository root (it loads build/libquant_toy.so). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"

#define M 7
#define K 96

static float x1[M * K + 8], x2[M * K + 8];
static int64_t shape2[2] = {M, K};

/* Bytes of a buffer view. */
static size_t view_bytes(const DLTensor *v) {
  size_t n = 1;
  int32_t i;
  for (i = 0; i < v->ndim; i++) n *= (size_t)v->shape[i];
  return (n * v->dtype.bits + 7) / 8;
}

/* Whether a and b hold the same directions with equal bytes in every buffer. */
static int same_bytes(quant_qtensor *a, quant_qtensor *b) {
  static const quant_buffer_kind kinds[3] = {QUANT_BUFFER_DATA, QUANT_BUFFER_SCALE_INV, QUANT_BUFFER_AMAX};
  quant_qtensor_info ia, ib;
  uint32_t ua;
  int d, k, compared = 0;
  memset(&ia, 0, sizeof ia);
  memset(&ib, 0, sizeof ib);
  ia.struct_size = ib.struct_size = sizeof ia;
  if (quant_qtensor_get_info(a, &ia) != QUANT_OK || quant_qtensor_get_info(b, &ib) != QUANT_OK || ia.usage != ib.usage) return 0;
  ua = ia.usage;
  for (d = 0; d < 2; d++) {
    const uint32_t dir = d == 0 ? QUANT_DIRECTION_ROWWISE : QUANT_DIRECTION_COLUMNWISE;
    if (!(ua & (d == 0 ? QUANT_USAGE_ROWWISE : QUANT_USAGE_COLUMNWISE))) continue;
    for (k = 0; k < 3; k++) {
      DLTensor va, vb;
      quant_status sa = quant_qtensor_buffer(a, dir, kinds[k], &va), sb = quant_qtensor_buffer(b, dir, kinds[k], &vb);
      if (sa != sb) return 0;
      if (sa != QUANT_OK) continue; /* a format without this buffer */
      if (view_bytes(&va) != view_bytes(&vb) || memcmp(va.data, vb.data, view_bytes(&va)) != 0) return 0;
      compared++;
    }
  }
  return compared > 0;
}

static void fill(float *x, int seed) {
  int i;
  for (i = 0; i < M * K + 8; i++) x[i] = (float)(((i + 13) * (37 + seed)) % 201 - 100) * (0.013f + 0.002f * (float)seed);
}

/* For a quantizer of config c: a plan made on x1 and run on x2 (and back on
 * x1) gives quantize_into's bytes for each; offset elements of byte_offset. */
static void check_runs(const char *what, quant_quantizer_config c, int offset) {
  quant_quantizer *q = NULL;
  quant_qtensor *t = NULL, *ref = NULL;
  quant_quantize_plan *plan = NULL;
  DLTensor in = check_tensor(x1, kDLFloat, 32, 2, shape2), in2;
  int ok1, ok2;
  in.byte_offset = (uint64_t)offset * sizeof(float);
  in2 = in;
  in2.data = x2;
  EXPECT_OK(quant_quantizer_create(&c, &q));
  EXPECT_OK(quant_quantize(q, &in, NULL, &t));
  EXPECT_OK(quant_quantize(q, &in, NULL, &ref));
  EXPECT_OK(quant_quantize_plan_create(q, &in, NULL, t, &plan));
  EXPECT_OK(quant_quantize_plan_run(plan, x2, NULL));
  EXPECT_OK(quant_quantize_into(q, &in2, NULL, ref));
  ok1 = same_bytes(t, ref);
  EXPECT_OK(quant_quantize_plan_run(plan, x1, NULL));
  EXPECT_OK(quant_quantize_into(q, &in, NULL, ref));
  ok2 = same_bytes(t, ref);
  if (!ok1 || !ok2) fprintf(stderr, "%s (byte_offset %d elements): plan run bytes differ from quantize_into's\n", what, offset);
  CHECK(ok1 && ok2);
  EXPECT_OK(quant_quantize_plan_free(plan));
  EXPECT_OK(quant_qtensor_free(t));
  EXPECT_OK(quant_qtensor_free(ref));
  EXPECT_OK(quant_quantizer_free(q));
}

static void test_bytes(void) {
  quant_quantizer_config c;
  c = check_config("fp8");
  check_runs("fp8 current", c, 0);
  c.scaling = QUANT_SCALING_DELAYED;
  check_runs("fp8 delayed", c, 0);
  c = check_config("mxfp8");
  check_runs("mxfp8", c, 3);
  c = check_config("nvfp4");
  check_runs("nvfp4", c, 0);
  c = check_config("fp8_block");
  check_runs("fp8_block", c, 1);
  c = check_config("toy_u8");
  check_runs("toy_u8 (native plugin: the prepared call)", c, 0);
  check_runs("toy_u8 (native plugin: the prepared call)", c, 5);
}

/* A hybrid quantizer (two kernel calls per quantize) runs through the host. */
static void test_hybrid(void) {
  quant_quantizer_config rc = check_config("mxfp8"), cc = check_config("nvfp4");
  quant_quantizer *r = NULL, *c = NULL, *h = NULL;
  quant_qtensor *t = NULL, *ref = NULL;
  quant_quantize_plan *plan = NULL;
  DLTensor in = check_tensor(x1, kDLFloat, 32, 2, shape2), in2 = in;
  in2.data = x2;
  EXPECT_OK(quant_quantizer_create(&rc, &r));
  EXPECT_OK(quant_quantizer_create(&cc, &c));
  EXPECT_OK(quant_quantizer_create_hybrid(r, c, 0, &h));
  EXPECT_OK(quant_quantize(h, &in, NULL, &t));
  EXPECT_OK(quant_quantize(h, &in, NULL, &ref));
  EXPECT_OK(quant_quantize_plan_create(h, &in, NULL, t, &plan));
  EXPECT_OK(quant_quantize_plan_run(plan, x2, NULL));
  EXPECT_OK(quant_quantize_into(h, &in2, NULL, ref));
  CHECK(same_bytes(t, ref));
  EXPECT_OK(quant_quantize_plan_free(plan));
  quant_qtensor_free(t);
  quant_qtensor_free(ref);
  quant_quantizer_free(h);
  quant_quantizer_free(r);
  quant_quantizer_free(c);
}

static void test_pins_and_errors(void) {
  quant_quantizer_config c = check_config("mxfp8");
  quant_quantizer *q = NULL, *q2 = NULL;
  quant_qtensor *t = NULL, *ref = NULL;
  quant_quantize_plan *plan = NULL, *stale = NULL;
  DLTensor in = check_tensor(x1, kDLFloat, 32, 2, shape2), in2 = in;
  quant_quantize_options o;
  in2.data = x2;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;

  EXPECT_OK(quant_quantizer_create(&c, &q));
  EXPECT_OK(quant_quantize(q, &in, NULL, &t));
  EXPECT_ERR(quant_quantize_plan_create(q, &in, NULL, t, NULL), QUANT_ERROR_INVALID_ARGUMENT, "out: is NULL");
  EXPECT_ERR(quant_quantize_plan_create(NULL, &in, NULL, t, &plan), QUANT_ERROR_INVALID_ARGUMENT, "quantizer");
  EXPECT_ERR(quant_quantize_plan_create(q, NULL, NULL, t, &plan), QUANT_ERROR_INVALID_ARGUMENT, "input: is NULL");
  EXPECT_ERR(quant_quantize_plan_create(q, &in, NULL, NULL, &plan), QUANT_ERROR_INVALID_ARGUMENT, "dst: is NULL");
  {
    int64_t other[2] = {K, M};
    DLTensor bad = check_tensor(x1, kDLFloat, 32, 2, other);
    EXPECT_ERR(quant_quantize_plan_create(q, &bad, NULL, t, &plan), QUANT_ERROR_INVALID_ARGUMENT, "does not match");
  }
  CHECK(plan == NULL);

  EXPECT_OK(quant_quantize_plan_create(q, &in, NULL, t, &plan));
  CHECK(plan != NULL);
  /* The plan pins dst's buffers. */
  EXPECT_ERR(quant_qtensor_free(t), QUANT_ERROR_STATE, "quantize plan");
  EXPECT_ERR(quant_qtensor_update_usage(t, QUANT_USAGE_ROWWISE, NULL), QUANT_ERROR_STATE, "quantize plan");
  EXPECT_ERR(quant_qtensor_set_gemm_swizzled_scales(t, 1, NULL), QUANT_ERROR_STATE, "quantize plan");
  EXPECT_OK(quant_qtensor_update_usage(t, QUANT_USAGE_ROWWISE | QUANT_USAGE_COLUMNWISE, NULL)); /* no change */
  o.usage = QUANT_USAGE_ROWWISE;
  EXPECT_ERR(quant_quantize_into(q, &in, &o, t), QUANT_ERROR_STATE, "quantize plan");
  {
    quant_quantizer_config c2 = check_config("mxfp8");
    c2.element = QUANT_ELEMENT_E5M2;
    EXPECT_OK(quant_quantizer_create(&c2, &q2));
    EXPECT_ERR(quant_quantize_into(q2, &in, NULL, t), QUANT_ERROR_STATE, "quantize plan");
    EXPECT_OK(quant_quantizer_free(q2));
  }
  /* The same call is still allowed: it writes the pinned buffers. */
  EXPECT_OK(quant_quantize_into(q, &in, NULL, t));
  /* Bad runs. */
  EXPECT_ERR(quant_quantize_plan_run(NULL, x2, NULL), QUANT_ERROR_INVALID_ARGUMENT, "plan: is NULL");
  EXPECT_ERR(quant_quantize_plan_run(plan, NULL, NULL), QUANT_ERROR_INVALID_ARGUMENT, "data: is NULL");
  EXPECT_ERR(quant_quantize_plan_run(plan, (const char *)x2 + 2, NULL), QUANT_ERROR_INVALID_ARGUMENT, "not aligned");
  EXPECT_ERR(quant_quantize_plan_run((quant_quantize_plan *)(void *)q, x2, NULL), QUANT_ERROR_INVALID_HANDLE, "not a live plan");
  /* The plan keeps its quantizer: freeing the handle is allowed. */
  EXPECT_OK(quant_quantizer_free(q));
  EXPECT_OK(quant_quantize_plan_run(plan, x2, NULL));
  EXPECT_OK(quant_quantizer_create(&c, &q));
  EXPECT_OK(quant_quantize(q, &in2, NULL, &ref));
  CHECK(same_bytes(t, ref));
  /* Freed: the handle is dead, dst is free to go. */
  stale = plan;
  EXPECT_OK(quant_quantize_plan_free(plan));
  EXPECT_ERR(quant_quantize_plan_run(stale, x2, NULL), QUANT_ERROR_INVALID_HANDLE, "not a live plan");
  EXPECT_ERR(quant_quantize_plan_free(stale), QUANT_ERROR_INVALID_HANDLE, "not a live plan");
  EXPECT_OK(quant_quantize_plan_free(NULL));
  /* A new plan reusing the slot does not revive the stale handle. */
  EXPECT_OK(quant_quantize_plan_create(q, &in, NULL, t, &plan));
  CHECK(plan != stale);
  EXPECT_ERR(quant_quantize_plan_run(stale, x2, NULL), QUANT_ERROR_INVALID_HANDLE, "not a live plan");
  EXPECT_OK(quant_quantize_plan_free(plan));
  EXPECT_OK(quant_qtensor_update_usage(t, QUANT_USAGE_ROWWISE, NULL));
  EXPECT_OK(quant_qtensor_free(t));
  EXPECT_OK(quant_qtensor_free(ref));
  EXPECT_OK(quant_quantizer_free(q));
}

/* Threads sharing a plan: every run succeeds (runs are serialized), and the
 * bytes are the single-threaded call's. A run racing with the plan's free gets
 * QUANT_OK or, once it is freed, QUANT_ERROR_INVALID_HANDLE, nothing else. */
#define THREADS 8
static quant_quantize_plan *shared_plan;
static pthread_mutex_t runs_mu = PTHREAD_MUTEX_INITIALIZER;
static int runs_ok, runs_bad, runs_dead;

static void *run_worker(void *arg) {
  int i, until_dead = arg != NULL;
  for (i = 0; until_dead || i < 200; i++) {
    quant_status st = quant_quantize_plan_run(shared_plan, x2, NULL);
    pthread_mutex_lock(&runs_mu);
    if (st == QUANT_OK) runs_ok++;
    else if (st == QUANT_ERROR_INVALID_HANDLE && until_dead && strstr(quant_last_error(), "not a live plan") != NULL) runs_dead++;
    else runs_bad++;
    pthread_mutex_unlock(&runs_mu);
    if (st != QUANT_OK) break;
  }
  return NULL;
}

static void check_threads(const char *format) {
  quant_quantizer_config c = check_config(format);
  quant_quantizer *q = NULL;
  quant_qtensor *t = NULL, *ref = NULL;
  DLTensor in = check_tensor(x1, kDLFloat, 32, 2, shape2), in2 = in;
  pthread_t th[THREADS];
  int i, ok_before;
  in2.data = x2;
  EXPECT_OK(quant_quantizer_create(&c, &q));
  EXPECT_OK(quant_quantize(q, &in, NULL, &t));
  EXPECT_OK(quant_quantize(q, &in2, NULL, &ref));
  EXPECT_OK(quant_quantize_plan_create(q, &in, NULL, t, &shared_plan));
  runs_ok = runs_bad = runs_dead = 0;
  for (i = 0; i < THREADS; i++) CHECK(pthread_create(&th[i], NULL, run_worker, NULL) == 0);
  for (i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  CHECK(runs_ok == THREADS * 200 && runs_bad == 0);
  CHECK(same_bytes(t, ref));
  /* A run racing with the free. */
  CHECK(pthread_create(&th[0], NULL, run_worker, (void *)1) == 0);
  do {
    pthread_mutex_lock(&runs_mu);
    ok_before = runs_ok;
    pthread_mutex_unlock(&runs_mu);
  } while (ok_before < THREADS * 200 + 50);
  EXPECT_OK(quant_quantize_plan_free(shared_plan));
  pthread_join(th[0], NULL);
  if (runs_bad != 0 || runs_dead != 1) fprintf(stderr, "%s: %d bad runs, %d dead-handle runs\n", format, runs_bad, runs_dead);
  CHECK(runs_bad == 0 && runs_dead == 1);
  EXPECT_OK(quant_qtensor_free(t));
  EXPECT_OK(quant_qtensor_free(ref));
  EXPECT_OK(quant_quantizer_free(q));
}

int main(void) {
  size_t index = 0;
  fill(x1, 1);
  fill(x2, 2);
  EXPECT_OK(quant_plugin_load("build/libquant_toy.so", &index));
  test_bytes();
  test_hybrid();
  test_pins_and_errors();
  check_threads("toy_u8"); /* the prepared call, run from C */
  check_threads("mxfp8");  /* through the host */
  return check_summary("test_plan");
}
