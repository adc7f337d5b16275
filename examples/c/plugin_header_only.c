/* Compiled with -fsyntax-only as C99 and as C++11 (-Wall -Wextra -Werror
 * -pedantic): quant_plugin.h must stand alone in both languages. */
#include "quant_plugin.h"

int quant_plugin_header_only_check(void);
int quant_plugin_header_only_check(void) {
  quant_plugin_table t;
  t.struct_size = sizeof t;
  t.abi_version = QUANT_PLUGIN_ABI_VERSION;
  return (int)t.struct_size + (int)sizeof(quant_plugin_quantize_args);
}
