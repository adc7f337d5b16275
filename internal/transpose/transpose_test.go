package transpose

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTranspose8x8(t *testing.T) {
	var a [8]uint64
	for i := range a {
		for k := 0; k < 8; k++ {
			a[i] |= uint64(i*8+k) << (8 * k)
		}
	}
	Block8x8(&a)
	for i := range a {
		for k := 0; k < 8; k++ {
			require.Equal(t, uint64(k*8+i), a[i]>>(8*k)&0xFF, "element (%d,%d)", i, k)
		}
	}
}

// TestTransposeCodes checks the 8×8-square transpose, ragged edges included,
// against the definition dst[j*ds+i] = src[i*ss+j].
func TestTransposeCodes(t *testing.T) {
	for _, sh := range [][2]int{{8, 8}, {128, 64}, {13, 21}, {1, 7}, {127, 64}, {16, 3}} {
		h, n := sh[0], sh[1]
		const ss, ds = 70, 150
		src := make([]byte, h*ss)
		for i := range src {
			src[i] = byte(i*31 + i/7)
		}
		dst := make([]byte, n*ds)
		for i := range dst {
			dst[i] = 0xEE
		}
		Bytes(dst, ds, src, ss, h, n)
		for j := 0; j < n; j++ {
			for i := 0; i < ds; i++ {
				want := byte(0xEE) // untouched past the h rows
				if i < h {
					want = src[i*ss+j]
				}
				require.Equal(t, want, dst[j*ds+i], "%dx%d: dst column %d row %d", h, n, j, i)
			}
		}
	}
}
