// Package linear holds the ops built on host's engine: linear and grouped
// linear layers (Layer) with their quantizers per role and GEMM, the cached
// quantized weight, forward contexts and backward with its overrides (spec §9),
// and the delayed-scaling steps of a layer (spec §2).
//
// It imports host and libquant/internal packages only, never native, capi or a
// plugin, and has no cgo (host/layer_test.go checks).
package linear
