// Package gemm is the CPU matrix-multiply engine behind host's GEMM: a
// cache-blocked, goroutine-parallel FP32 product of two operands that are read
// through tile loaders (so quantized operands are dequantized tile by tile into
// packed panels, never as a whole), with a register-blocked micro-kernel in
// AVX-512 or AVX2+FMA assembly where the CPU has it and a pure-Go one
// otherwise (build tag noasm forces the Go one).
package gemm
