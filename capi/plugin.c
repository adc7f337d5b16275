// Finds the file this library was loaded from, so that libquant_cuda.so can be
// loaded from the same folder.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

#include "capi_plugin.h"

const char *capi_library_path(void) {
  Dl_info info;
  if (dladdr((void *)&capi_library_path, &info) == 0 || info.dli_fname == NULL) return NULL;
  return info.dli_fname;
}
