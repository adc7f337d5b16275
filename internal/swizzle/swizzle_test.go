package swizzle

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// reference builds the layout the way spec §4.7's torchao/TE reference does:
// reshape (R/128, 4, 32, C/4, 4) then permute to (R/128, C/4, 32, 4, 4).
func reference(src []byte, rows, cols int) []byte {
	out := make([]byte, 0, rows*cols)
	for rb := 0; rb < rows/128; rb++ {
		for cb := 0; cb < cols/4; cb++ {
			for r32 := 0; r32 < 32; r32++ {
				for r4 := 0; r4 < 4; r4++ {
					for c := 0; c < 4; c++ {
						i := rb*128 + r4*32 + r32
						j := cb*4 + c
						out = append(out, src[i*cols+j])
					}
				}
			}
		}
	}
	return out
}

func TestSwizzleMatchesReferenceAndRoundTrips(t *testing.T) {
	for _, sh := range [][2]int{{128, 4}, {256, 8}, {384, 12}, {128, 20}} {
		rows, cols := sh[0], sh[1]
		src := make([]byte, rows*cols)
		for i := range src {
			src[i] = byte(i*7 + i/13)
		}
		dst := make([]byte, len(src))
		Swizzle(dst, src, rows, cols)
		require.Equal(t, reference(src, rows, cols), dst, "shape %v", sh)
		back := make([]byte, len(src))
		Unswizzle(back, dst, rows, cols)
		require.Equal(t, src, back, "shape %v", sh)
	}
}
