// Package nvfp4 is the NVFP4 format plugin ("nvfp4", spec §5): FP4 E2M1
// elements in 1×16 blocks (or 16×16 tiles for weights) with an E4M3 scale per
// block and an FP32 global amax per direction, the 16-point random Hadamard
// transform of the columnwise copy (§5.5) and reproducible stochastic rounding
// (§5.6). It registers its format and CPU kernels with the host at init.
//
// Bytes follow TransformerEngine bit for bit where the spec defines them
// (§1.5, §5.2, §5.3, §5.4). Where TE's bits depend on its GPU kernels (the
// RHT's accumulation order, the stochastic-rounding random stream, §13 items 4
// and 13) this package defines them exactly, so that a CUDA kernel can
// reproduce the CPU bytes: see rht.go and stochastic.go.
package nvfp4
