// Package host is libquant's engine: the tensor model (logical shapes, the two
// directions, usages), the format registry that plugins fill, quantizers and
// quantized tensors, and the dispatch of every operation to the kernels of the
// tensor's device. The C ABI in capi is a thin layer over this package; format
// math lives in the plugins.
package host
