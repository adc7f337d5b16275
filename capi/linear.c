// Handles of linear layers and their contexts: cgo.Handle integers cast to
// the opaque C types, as capi_quantizer_handle does for quantizers.
#include "quant.h"
#include "capi.h"

quant_linear *capi_linear_handle(uintptr_t h) { return (quant_linear *)h; }
quant_linear_ctx *capi_linear_ctx_handle(uintptr_t h) { return (quant_linear_ctx *)h; }
