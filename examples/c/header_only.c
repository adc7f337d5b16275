/* Compiled with -fsyntax-only as C99 and as C++11 (-Wall -Wextra -Werror
 * -pedantic): quant.h must stand alone in both languages. */
#include "quant.h"

int quant_header_only_check(void);
int quant_header_only_check(void) {
  quant_quantizer_config cfg;
  cfg.struct_size = sizeof cfg;
  return (int)cfg.struct_size + QUANT_ABI_VERSION;
}
