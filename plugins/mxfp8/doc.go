// Package mxfp8 is the MX format family plugin (spec §4): "mxfp8" (E4M3 or
// E5M2 elements) and "mxfp4" (E2M1 elements, packed two per byte, spec §1.5),
// each with one E8M0 scale per 32 elements, 1×32 blocks rowwise and 32×1
// blocks columnwise. The shared exponent follows TransformerEngine's rule
// (RCEIL, spec §4.3) by default or the OCP MX v1.0 rule (FLOOR, spec §4.4) on
// request. Scales are stored in the compact padded layout of spec §4.6, or in
// the GEMM-swizzled layout of spec §4.7. It registers both formats and their
// CPU kernels with the host at init.
package mxfp8
