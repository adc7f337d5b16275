// C side of custom recipes: Go cannot call a C function pointer itself.
#include "quant.h"
#include "capi.h"

quant_recipe *capi_recipe_handle(uintptr_t h) { return (quant_recipe *)h; }

quant_status capi_call_recipe_callback(quant_recipe_callback cb, void *user_data, const quant_role *role,
                                       quant_quantizer **out) {
  return cb(user_data, role, out);
}

// The caller's device allocator (quant_set_device_allocator).
int32_t capi_call_device_alloc(quant_device_alloc_fn f, void *user_data, int32_t device_id, size_t nbytes, uintptr_t stream,
                               void **out) {
  return f(user_data, device_id, nbytes, (void *)stream, out);
}

void capi_call_device_free(quant_device_free_fn f, void *user_data, int32_t device_id, void *ptr, uintptr_t stream) {
  f(user_data, device_id, ptr, (void *)stream);
}
