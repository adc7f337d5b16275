// C side of custom recipes: Go cannot call a C function pointer itself.
#include "quant.h"
#include "capi.h"

quant_recipe *capi_recipe_handle(uintptr_t h) { return (quant_recipe *)h; }

quant_status capi_call_recipe_callback(quant_recipe_callback cb, void *user_data, const quant_role *role,
                                       quant_quantizer **out) {
  return cb(user_data, role, out);
}
