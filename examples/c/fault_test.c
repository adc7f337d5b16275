#define _POSIX_C_SOURCE 200112L /* setenv */
/* Runs against build/fault/libquant.so (built with -tags faultinject): an
 * export that panics returns QUANT_ERROR_INTERNAL instead of killing the
 * process, and every later call is refused with QUANT_ERROR_POISONED: quantize
 * plan runs too, the toy native plugin's (a prepared call run from C) among
 * them. Run from the repository root (it loads build/libquant_toy.so). */
#include <stdlib.h>

#include "check.h"

int main(void) {
  quant_quantizer *q = NULL;
  quant_qtensor *t = NULL;
  quant_quantizer_config c = check_config("fp8");
  float x[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  DLTensor in = check_tensor(x, kDLFloat, 32, 1, shape);

  quant_quantizer *toy = NULL;
  quant_qtensor *tt = NULL, *pt = NULL;
  quant_quantize_plan *plan = NULL, *toy_plan = NULL;
  quant_quantizer_config tc = check_config("toy_u8");
  int64_t shape2[2] = {2, 2};
  DLTensor in2 = check_tensor(x, kDLFloat, 32, 2, shape2);

  EXPECT_OK(quant_quantizer_create(&c, &q));
  EXPECT_OK(quant_quantize(q, &in, NULL, &t));
  EXPECT_OK(quant_qtensor_free(t));
  EXPECT_OK(quant_quantize(q, &in, NULL, &pt));
  EXPECT_OK(quant_quantize_plan_create(q, &in, NULL, pt, &plan));
  EXPECT_OK(quant_plugin_load("build/libquant_toy.so", NULL));
  EXPECT_OK(quant_quantizer_create(&tc, &toy));
  EXPECT_OK(quant_quantize(toy, &in2, NULL, &tt));
  EXPECT_OK(quant_quantize_plan_create(toy, &in2, NULL, tt, &toy_plan));
  EXPECT_OK(quant_quantize_plan_run(toy_plan, x, NULL));

  setenv("LIBQUANT_FAULT_PANIC", "quant_quantize", 1);
  EXPECT_ERR(quant_quantize(q, &in, NULL, &t), QUANT_ERROR_INTERNAL, "quant_quantize: internal error: injected fault");
  unsetenv("LIBQUANT_FAULT_PANIC");

  /* The library no longer runs anything, and says why. */
  EXPECT_ERR(quant_quantize(q, &in, NULL, &t), QUANT_ERROR_POISONED, "refused");
  EXPECT_ERR(quant_quantizer_create(&c, &q), QUANT_ERROR_POISONED, "injected fault in quant_quantize");
  EXPECT_ERR(quant_quantizer_free(q), QUANT_ERROR_POISONED, "refused");
  EXPECT_ERR(quant_quantize_plan_run(plan, x, NULL), QUANT_ERROR_POISONED, "refused");
  EXPECT_ERR(quant_quantize_plan_run(toy_plan, x, NULL), QUANT_ERROR_POISONED, "refused");
  /* The C-side helpers still answer. */
  CHECK(strcmp(quant_status_string(QUANT_ERROR_POISONED), "QUANT_ERROR_POISONED") == 0);
  CHECK(quant_abi_version() == QUANT_ABI_VERSION);
  return check_summary("fault_test");
}
