// Package swizzle converts block-scale matrices between the compact row-major
// layout and the cuBLAS "1D block scaling factors" layout that GEMMs read
// (spec §4.7; NVFP4 uses the same formula, spec §5.3).
package swizzle

// Index is gemm_swizzled_scale_idx: the position of compact scale (i, j) in the
// swizzled buffer, where i is the non-contraction index (rows padded to 128),
// j the contraction-block index, and cols the padded number of j (a multiple
// of 4):
//
//	idx = ((i/128)*(cols/4) + j/4)*512 + (i%32)*16 + ((i%128)/32)*4 + j%4
func Index(i, j, cols int) int {
	return ((i/128)*(cols/4)+j/4)*512 + (i%32)*16 + ((i%128)/32)*4 + j%4
}

// Swizzle writes the row-major compact matrix src [rows, cols] (rows a multiple
// of 128, cols of 4) into dst in the swizzled layout. Both have rows*cols bytes.
func Swizzle(dst, src []byte, rows, cols int) {
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			dst[Index(i, j, cols)] = src[i*cols+j]
		}
	}
}

// Unswizzle is the inverse of Swizzle.
func Unswizzle(dst, src []byte, rows, cols int) {
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			dst[i*cols+j] = src[Index(i, j, cols)]
		}
	}
}
