// C side of the error model: the thread-local last-error buffer, static status
// names and version strings. Nothing here can fail or call back into Go.
#include <string.h>

#include "quant.h"
#include "capi.h"

static _Thread_local char capi_error[1024];

void capi_set_error(const char *msg) {
  size_t n = strlen(msg);
  if (n >= sizeof capi_error) n = sizeof capi_error - 1;
  memcpy(capi_error, msg, n);
  capi_error[n] = '\0';
}

const char *quant_last_error(void) { return capi_error; }

const char *quant_status_string(quant_status status) {
  switch (status) {
    case QUANT_OK: return "QUANT_OK";
    case QUANT_ERROR_INVALID_ARGUMENT: return "QUANT_ERROR_INVALID_ARGUMENT";
    case QUANT_ERROR_INVALID_HANDLE: return "QUANT_ERROR_INVALID_HANDLE";
    case QUANT_ERROR_UNSUPPORTED: return "QUANT_ERROR_UNSUPPORTED";
    case QUANT_ERROR_DEVICE_UNAVAILABLE: return "QUANT_ERROR_DEVICE_UNAVAILABLE";
    case QUANT_ERROR_OUT_OF_MEMORY: return "QUANT_ERROR_OUT_OF_MEMORY";
    case QUANT_ERROR_BUFFER_TOO_SMALL: return "QUANT_ERROR_BUFFER_TOO_SMALL";
    case QUANT_ERROR_STATE: return "QUANT_ERROR_STATE";
    case QUANT_ERROR_PLUGIN: return "QUANT_ERROR_PLUGIN";
    case QUANT_ERROR_INTERNAL: return "QUANT_ERROR_INTERNAL";
    case QUANT_ERROR_POISONED: return "QUANT_ERROR_POISONED";
  }
  return "QUANT_ERROR_UNKNOWN_STATUS";
}

#define CAPI_STR2(x) #x
#define CAPI_STR(x) CAPI_STR2(x)

uint32_t quant_abi_version(void) { return QUANT_ABI_VERSION; }

const char *quant_version(void) {
  return CAPI_STR(QUANT_VERSION_MAJOR) "." CAPI_STR(QUANT_VERSION_MINOR) "." CAPI_STR(QUANT_VERSION_PATCH);
}

quant_quantizer *capi_quantizer_handle(uintptr_t h) { return (quant_quantizer *)h; }
quant_qtensor *capi_qtensor_handle(uintptr_t h) { return (quant_qtensor *)h; }
