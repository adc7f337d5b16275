/* One translation unit with the public header and the header cgo generates
 * from capi's //export functions: a prototype that drifted from quant.h is a
 * conflicting declaration, so this fails to compile. */
#include "quant.h"
#include "libquant.h"

int main(void) { return 0; }
