/* Many threads calling the C ABI at once: each thread quantizes, dequantizes
 * and checks its bytes against a single-threaded run, shares one delayed-scaling
 * quantizer with the others, and checks that quant_last_error() is its own.
 * `make test` also runs this against a libquant.so built with Go's race
 * detector. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "demo_data.h"

#define THREADS 16
#define ITERS 20
#define M 64
#define K 96

static uint16_t input[M * K];
static int64_t shape[2] = {M, K};
static unsigned char expect_row[M * K];
static quant_quantizer *shared_delayed;
static int thread_failures[THREADS];

static void *worker(void *arg) {
  int id = (int)(intptr_t)arg, it;
  quant_quantizer_config c = check_config("fp8");
  quant_quantizer *q = NULL;
  DLTensor in = check_tensor(input, kDLBfloat, 16, 2, shape), v;
  float out[M * K];
  DLTensor o = check_tensor(out, kDLFloat, 32, 2, shape);
  char want[64];

  if (quant_quantizer_create(&c, &q) != QUANT_OK) {
    thread_failures[id]++;
    return NULL;
  }
  for (it = 0; it < ITERS; it++) {
    quant_qtensor *t = NULL;
    quant_quantizer *bogus = (quant_quantizer *)(intptr_t)(0x100000 + id);
    if (quant_quantize(q, &in, NULL, &t) != QUANT_OK ||
        quant_qtensor_buffer(t, QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_DATA, &v) != QUANT_OK ||
        memcmp(v.data, expect_row, sizeof expect_row) != 0 ||
        quant_dequantize(t, QUANT_DIRECTION_COLUMNWISE, &o, NULL) != QUANT_OK ||
        quant_qtensor_free(t) != QUANT_OK) {
      thread_failures[id]++;
    }
    if (quant_quantize(shared_delayed, &in, NULL, &t) != QUANT_OK || quant_qtensor_free(t) != QUANT_OK ||
        quant_delayed_scaling_update(shared_delayed, QUANT_DIRECTION_ANY, NULL) != QUANT_OK) {
      thread_failures[id]++;
    }
    /* This thread's failure message names this thread's bogus handle. */
    snprintf(want, sizeof want, "%p", (void *)bogus);
    if (quant_quantizer_set_usage(bogus, 1) != QUANT_ERROR_INVALID_HANDLE || strstr(quant_last_error(), want) == NULL) {
      thread_failures[id]++;
    }
  }
  quant_quantizer_free(q);
  return NULL;
}

int main(void) {
  pthread_t th[THREADS];
  quant_quantizer_config c = check_config("fp8");
  quant_quantizer *q = NULL;
  quant_qtensor *t = NULL;
  DLTensor in = check_tensor(input, kDLBfloat, 16, 2, shape), v;
  float x[M * K];
  int i;

  demo_fill(x, M * K, 2.0);
  for (i = 0; i < M * K; i++) input[i] = demo_to_bf16(x[i]);
  EXPECT_OK(quant_quantizer_create(&c, &q));
  EXPECT_OK(quant_quantize(q, &in, NULL, &t));
  EXPECT_OK(quant_qtensor_buffer(t, QUANT_DIRECTION_ROWWISE, QUANT_BUFFER_DATA, &v));
  memcpy(expect_row, v.data, sizeof expect_row);
  EXPECT_OK(quant_qtensor_free(t));
  EXPECT_OK(quant_quantizer_free(q));

  c.scaling = QUANT_SCALING_DELAYED;
  c.amax_history_len = 8;
  EXPECT_OK(quant_quantizer_create(&c, &shared_delayed));
  for (i = 0; i < THREADS; i++) CHECK(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) == 0);
  for (i = 0; i < THREADS; i++) CHECK(pthread_join(th[i], NULL) == 0);
  for (i = 0; i < THREADS; i++) CHECK(thread_failures[i] == 0);
  {
    /* After THREADS*ITERS updates of the same amax, the scale is 448/amax. */
    DLTensor s;
    float amax = 0;
    for (i = 0; i < M * K; i++)
      if (fabsf(demo_from_bf16(input[i])) > amax) amax = fabsf(demo_from_bf16(input[i]));
    EXPECT_OK(quant_delayed_scaling_state(shared_delayed, 0, &s, NULL));
    CHECK(*(float *)s.data == 448.0f / amax);
  }
  EXPECT_OK(quant_quantizer_free(shared_delayed));
  return check_summary("test_threads");
}
