// Package transpose transposes byte matrices (quantized codes) in 8×8
// squares held in registers: eight 8-byte loads and stores instead of 64
// single-byte ones. Several formats store their columnwise data transposed.
package transpose

import "encoding/binary"

// Bytes writes the transpose of an h×n block of bytes, src[i*ss+j], to
// dst[j*ds+i] (ss and ds are the row strides). Whole 8×8 squares go through
// Block8x8; ragged edges go byte by byte.
func Bytes(dst []byte, ds int, src []byte, ss, h, n int) {
	for j := 0; j+8 <= n; j += 8 {
		i := 0
		for ; i+8 <= h; i += 8 {
			var a [8]uint64
			for r := range a {
				a[r] = binary.LittleEndian.Uint64(src[(i+r)*ss+j:])
			}
			Block8x8(&a)
			for b, v := range a {
				binary.LittleEndian.PutUint64(dst[(j+b)*ds+i:], v)
			}
		}
		for ; i < h; i++ {
			for b := 0; b < 8; b++ {
				dst[(j+b)*ds+i] = src[i*ss+j+b]
			}
		}
	}
	for j := n &^ 7; j < n; j++ {
		for i := 0; i < h; i++ {
			dst[j*ds+i] = src[i*ss+j]
		}
	}
}

// Block8x8 transposes the 8×8 byte matrix whose row i is a[i] (byte k of
// a[i], little-endian, is element (i, k)), swapping 1×1, then 2×2, then 4×4
// sub-blocks.
func Block8x8(a *[8]uint64) {
	for i := 0; i < 8; i += 2 {
		t := (a[i]>>8 ^ a[i+1]) & 0x00FF00FF00FF00FF
		a[i+1] ^= t
		a[i] ^= t << 8
	}
	for _, i := range [4]int{0, 1, 4, 5} {
		t := (a[i]>>16 ^ a[i+2]) & 0x0000FFFF0000FFFF
		a[i+2] ^= t
		a[i] ^= t << 16
	}
	for i := 0; i < 4; i++ {
		t := (a[i]>>32 ^ a[i+4]) & 0x00000000FFFFFFFF
		a[i+4] ^= t
		a[i] ^= t << 32
	}
}
