package numeric_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/internal/numeric"
	"libquant/internal/ratref"
)

// Every code decodes to ratref's exact value; the maxima are OCP MX v1.0
// §5.3.2's (7.5 and 28).
func TestFP6Decode(t *testing.T) {
	for _, c := range []struct {
		f   *numeric.FP6
		ref *ratref.Format
		max float32
	}{{numeric.E2M3, ratref.E2M3, 7.5}, {numeric.E3M2, ratref.E3M2, 28}} {
		require.Equal(t, c.max, c.f.Max, c.f.Name)
		for code := 0; code < 64; code++ {
			v, ok := c.ref.Value(uint8(code))
			require.True(t, ok)
			require.Equal(t, ratref.Float32(v), c.f.Decode(uint8(code)), "%s code %#x", c.f.Name, code)
		}
	}
}

// Encode equals ratref's RNE-satfinite rounding at every float32 whose top 18
// bits vary (all exponents, signs and the 9 leading mantissa bits) plus the
// neighbours of every midpoint between adjacent codes, where ties decide.
func TestFP6EncodeExact(t *testing.T) {
	for _, c := range []struct {
		f   *numeric.FP6
		ref *ratref.Format
	}{{numeric.E2M3, ratref.E2M3}, {numeric.E3M2, ratref.E3M2}} {
		check := func(x float32) {
			want := c.ref.Encode(float64(x))
			if x != x {
				want = 0x1F
			}
			require.Equal(t, want, c.f.Encode(x), "%s encode %g (%#x)", c.f.Name, x, math.Float32bits(x))
		}
		for hi := uint32(0); hi < 1<<18; hi++ {
			b := hi << 14
			check(math.Float32frombits(b))
			check(math.Float32frombits(b | 0x2001))
		}
		vals := c.ref.Values()
		for i := 1; i < len(vals); i++ {
			mid, _ := vals[i-1].Float64()
			hi, _ := vals[i].Float64()
			m := float32((mid + hi) / 2)
			for _, x := range []float32{m, math.Nextafter32(m, 0), math.Nextafter32(m, 100), -m} {
				check(x)
			}
		}
		check(float32(math.Inf(1)))
		check(float32(math.Inf(-1)))
		check(float32(math.NaN()))
	}
}

func TestPackFP6(t *testing.T) {
	b0, b1, b2 := numeric.PackFP6(0x01, 0x02, 0x03, 0x3F)
	// w = 1 | 2<<6 | 3<<12 | 63<<18 = 0xFC3081
	require.Equal(t, [3]uint8{0x81, 0x30, 0xFC}, [3]uint8{b0, b1, b2})
	c0, c1, c2, c3 := numeric.UnpackFP6(b0, b1, b2)
	require.Equal(t, [4]uint8{1, 2, 3, 0x3F}, [4]uint8{c0, c1, c2, c3})
}
