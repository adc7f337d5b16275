package mxfp8

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/internal/numeric"
)

// TestBF16TableMatchesCodec checks the identity the BF16 fast path rests on:
// for every BF16 input and every E8M0 factor (NaN included), looking up the
// top half of fl32(x·f) gives the codec's code of fl32(x·f).
func TestBF16TableMatchesCodec(t *testing.T) {
	step := 1
	if raceEnabled {
		step = 17
	}
	for _, c := range []struct {
		name   string
		tab    *[1 << 16]uint8
		encode func(float32) uint8
	}{
		{"e4m3", e4m3BF16(), numeric.EncodeE4M3},
		{"e5m2", e5m2BF16(), numeric.EncodeE5M2},
		{"e2m1", e2m1BF16(), numeric.EncodeE2M1},
	} {
		for e := 0; e < 256; e++ {
			if e%step != 0 && e > 4 && e < 250 {
				continue
			}
			f := numeric.E8M0Reciprocal(uint8(e))
			for h := 0; h < 1<<16; h++ {
				want := c.encode(float32(math.Float32frombits(uint32(h)<<16) * f))
				if got := c.tab[scaledBF16(uint16(h), f)]; got != want {
					require.Equal(t, want, got, "%s: bf16 %#04x times 2^(127-%d)", c.name, h, e)
				}
			}
		}
	}
}

// TestPackTransposeE2M1 compares the 8-column packing with numeric.PackE2M1
// applied code by code.
func TestPackTransposeE2M1(t *testing.T) {
	var codes [BlockLen][colGroup]byte
	for i := range codes {
		for j := range codes[i] {
			codes[i][j] = uint8(i*7+j*3) & 0xF
		}
	}
	const stride = 40
	for _, j := range []int{0, 8, 56} {
		dst := make([]byte, 7*stride+16)
		packTransposeE2M1(dst, stride, &codes, j)
		for b := 0; b < 8; b++ {
			for p := 0; p < 16; p++ {
				require.Equal(t, numeric.PackE2M1(codes[2*p][j+b], codes[2*p+1][j+b]), dst[b*stride+p], "column %d pair %d", j+b, p)
			}
		}
	}
}
