// Declarations shared by the cgo preamble and errors.c. Private to capi: the
// public contract is include/quant.h.
#ifndef LIBQUANT_CAPI_H_
#define LIBQUANT_CAPI_H_

#include <stdint.h>
#include "quant.h"

void capi_set_error(const char *msg);
quant_quantizer *capi_quantizer_handle(uintptr_t h);
quant_qtensor *capi_qtensor_handle(uintptr_t h);

// const-qualified aliases: cgo cannot spell const, so exports take these and
// the generated prototypes stay identical to quant.h's.
typedef const DLTensor capi_const_DLTensor;
typedef const quant_quantizer capi_const_quantizer;
typedef const quant_qtensor capi_const_qtensor;
typedef const quant_quantizer_config capi_const_config;
typedef const quant_quantize_options capi_const_options;
typedef const quant_quantize_grouped_args capi_const_grouped_args;
typedef const quant_dequantize_options capi_const_dequantize_options;
typedef const int64_t capi_const_int64;
typedef const float capi_const_float;
typedef const char capi_const_char;
typedef const quant_gemm_args capi_const_gemm_args;
typedef const quant_role capi_const_role;
typedef const quant_recipe_config capi_const_recipe_config;
typedef const quant_recipe_rule capi_const_recipe_rule;

typedef const quant_linear capi_const_linear;
typedef const quant_linear_ctx capi_const_linear_ctx;
typedef const quant_linear_config capi_const_linear_config;
typedef const quant_linear_forward_args capi_const_linear_forward_args;
typedef const quant_linear_backward_args capi_const_linear_backward_args;
typedef const quant_grouped_linear_forward_args capi_const_grouped_linear_forward_args;
typedef const quant_grouped_linear_backward_args capi_const_grouped_linear_backward_args;

quant_recipe *capi_recipe_handle(uintptr_t h);
quant_linear *capi_linear_handle(uintptr_t h);
quant_linear_ctx *capi_linear_ctx_handle(uintptr_t h);
quant_status capi_call_recipe_callback(quant_recipe_callback cb, void *user_data, const quant_role *role,
                                       quant_quantizer **out);

typedef const quant_device_allocator capi_const_device_allocator;
int32_t capi_call_device_alloc(quant_device_alloc_fn f, void *user_data, int32_t device_id, size_t nbytes, uintptr_t stream,
                               void **out);
void capi_call_device_free(quant_device_free_fn f, void *user_data, int32_t device_id, void *ptr, uintptr_t stream);

// Quantize plans (plan.c, plan.go).
typedef struct capi_plan capi_plan;
capi_plan *capi_plan_new(uint64_t *handle);
void capi_plan_set(capi_plan *p, void *fn, void *args, void *err, char *what, uint64_t offset, uint32_t elem, int32_t nonempty);
uint64_t capi_plan_offset(capi_plan *p);
quant_quantize_plan *capi_plan_handle(uint64_t h);
void capi_plan_retire(capi_plan *p);
void capi_poison(void);

#endif
