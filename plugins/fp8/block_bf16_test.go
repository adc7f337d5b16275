package fp8

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/internal/numeric"
)

// TestBF16TableMatchesCodec checks the identity the BF16 fast path rests on:
// for every BF16 input and every power-of-two scale, looking up the top half of
// fl32(x·scale) gives EncodeE4M3(fl32(x·scale)).
func TestBF16TableMatchesCodec(t *testing.T) {
	tab := e4m3BF16()
	step := 1
	if raceEnabled {
		step = 13
	}
	for k := -149; k <= 127; k++ {
		if (k+149)%step != 0 && k != 127 && k != -149 {
			continue
		}
		f := float32(math.Ldexp(1, k))
		for h := 0; h < 1<<16; h++ {
			want := numeric.EncodeE4M3(float32(math.Float32frombits(uint32(h)<<16) * f))
			if got := tab[scaledBF16(uint16(h), f)]; got != want {
				require.Equal(t, want, got, "bf16 %#04x times 2^%d", h, k)
			}
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
		transposeCodes(dst, ds, src, ss, h, n)
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
