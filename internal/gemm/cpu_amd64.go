//go:build amd64 && !noasm

package gemm

func cpuid(eax, ecx uint32) (a, b, c, d uint32)
func xgetbv() (eax, edx uint32)

// Features are probed once: CPUID for the instruction sets, XGETBV for whether
// the OS saves the vector registers they use (a CPU can have AVX-512 that the
// kernel does not enable).
var hasAVX2FMA, hasAVX512 = probe()

func probe() (avx2fma, avx512 bool) {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false, false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const (
		fmaBit     = 1 << 12
		osxsaveBit = 1 << 27
		avxBit     = 1 << 28
	)
	if ecx1&osxsaveBit == 0 || ecx1&avxBit == 0 {
		return false, false
	}
	xcr0, _ := xgetbv()
	const (
		xmmYmm   = 0x6  // SSE and AVX state
		zmmState = 0xE0 // opmask, ZMM_Hi256, Hi16_ZMM
	)
	if xcr0&xmmYmm != xmmYmm {
		return false, false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	const (
		avx2Bit    = 1 << 5
		avx512FBit = 1 << 16
	)
	avx2fma = ebx7&avx2Bit != 0 && ecx1&fmaBit != 0
	avx512 = avx2fma && ebx7&avx512FBit != 0 && xcr0&zmmState == zmmState
	return avx2fma, avx512
}

// kernel12x32AVX512 is the AVX-512 micro-kernel: see kernelGo for what it computes.
//
//go:noescape
func kernel12x32AVX512(k int, a, b, c *float32, ldc int, acc bool)

// kernel6x16AVX2 is the AVX2+FMA micro-kernel: see kernelGo for what it computes.
//
//go:noescape
func kernel6x16AVX2(k int, a, b, c *float32, ldc int, acc bool)

func asmKernels() []Kernel {
	var ks []Kernel
	if hasAVX512 {
		ks = append(ks, Kernel{Name: "avx512", MR: 12, NR: 32, fn: kernel12x32AVX512})
	}
	if hasAVX2FMA {
		ks = append(ks, Kernel{Name: "avx2", MR: 6, NR: 16, fn: kernel6x16AVX2})
	}
	return ks
}
