// Command mxfp6 is a libquant format plugin that runs out of process: OCP
// Microscaling (MX) v1.0 FP6, elements E2M3 or E3M2 (§5.3.2) sharing one E8M0
// scale per 32 (§5.2, §6). Load it with quant_plugin_load or
// LIBQUANT_PLUGIN_PATH; it registers the format "mxfp6".
package main

import (
	"libquant/examples/goplugin/mxfp6"
	"libquant/pluginsdk"
)

func main() {
	pluginsdk.Serve(pluginsdk.Info{Name: "mxfp6", Version: "1.0.0"}, mxfp6.Format{})
}
