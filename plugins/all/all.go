// Package all imports every built-in format plugin, so that a program (or a
// test) that imports it has all of them registered.
package all

import (
	_ "libquant/plugins/fp8"
	_ "libquant/plugins/identity"
	_ "libquant/plugins/mxfp8"
	_ "libquant/plugins/nvfp4"
)
