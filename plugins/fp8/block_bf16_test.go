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
