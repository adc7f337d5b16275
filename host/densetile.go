package host

import "unsafe"

// DenseTile writes the tile rows [r0, r1) × columns [c0, c1) of a CPU
// FP32/BF16/FP16 tensor viewed as row-major with k columns into dst, as
// TileDequantizer.DequantizeTile does (exact: every such value is a float32).
// It is the tile reader of plain GEMM operands and of identity storages.
func DenseTile(t Tensor, k, r0, r1, c0, c1 int64, dst []float32, ld int, transposed bool) {
	w := int(c1 - c0)
	if !transposed {
		for r := r0; r < r1; r++ {
			o := int(r-r0) * ld
			LoadFloat32(t, r*k+c0, dst[o:o+w])
		}
		return
	}
	if t.DType == Float32 {
		for r := r0; r < r1; r++ {
			src := unsafe.Slice((*float32)(t.At(r*k+c0)), w)
			for j, v := range src {
				dst[j*ld+int(r-r0)] = v
			}
		}
		return
	}
	const chunk = 256
	var buf [chunk]float32
	for r := r0; r < r1; r++ {
		for c := 0; c < w; c += chunk {
			n := min(chunk, w-c)
			LoadFloat32(t, r*k+c0+int64(c), buf[:n])
			for j, v := range buf[:n] {
				dst[(c+j)*ld+int(r-r0)] = v
			}
		}
	}
}
