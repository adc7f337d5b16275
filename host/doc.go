// Package host is libquant's engine: the tensor model (dtypes, logical shapes,
// the two directions, usages), the format registry that plugins fill,
// quantizers (plain and hybrid) and quantized tensors with their storages,
// recipes and roles, and the dispatch of every operation, GEMM included, to
// the kernels of the tensor's device (the CPU GEMM glue over internal/gemm).
//
// host is pure Go: it imports only the standard library and libquant/internal
// packages without cgo (host/layer_test.go checks). What sits above it
// registers into it: formats and kernels (RegisterFormat, RegisterKernels),
// device memory (RegisterAllocator; the CPU's comes from host/cpumem), and
// plugin loaders' reports for error messages (RegisterPluginReport).
package host
