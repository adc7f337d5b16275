// Package native loads native plugins (shared libraries that speak
// include/quant_plugin.h, such as the CUDA plugin libquant_cuda.so) with purego
// and cgo, checks their tables and registers their formats, kernels and device
// memory into host through host's Go interfaces (host never sees a C struct);
// LoadDefault loads LIBQUANT_PLUGIN_PATH and libquant_cuda.so next to
// libquant.so. It imports host and libquant/internal; capi imports it. An
// out-of-process loader goes beside it, registering the same way.
package native
