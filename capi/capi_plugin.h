// Declarations for capi/plugin.go and plugin.c. Private to capi.
#ifndef LIBQUANT_CAPI_PLUGIN_H_
#define LIBQUANT_CAPI_PLUGIN_H_

#include "quant.h"

// The file libquant.so was loaded from (dladdr), or NULL when unknown.
const char *capi_library_path(void);

// const-qualified alias for the generated prototypes (see capi.h).
typedef const char capi_const_char;
typedef const quant_plugin_load_options capi_const_plugin_load_options;

#endif
