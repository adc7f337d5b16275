//go:build !amd64 || noasm

package gemm

func asmKernels() []Kernel { return nil }
