package numeric

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/internal/ratref"
)

func TestDecodeE4M3AllCodes(t *testing.T) {
	for c := 0; c < 256; c++ {
		got := DecodeE4M3(uint8(c))
		if c&0x7F == 0x7F {
			require.True(t, math.IsNaN(float64(got)), "code %#02x must be NaN", c)
			continue
		}
		want, ok := ratref.E4M3.Value(uint8(c))
		require.True(t, ok, "code %#02x", c)
		requireRatEqual(t, want, got, "E4M3 code %#02x", c)
	}
	// Spot values from spec §1.2.
	require.Equal(t, float32(448), DecodeE4M3(0x7E))
	require.Equal(t, float32(math.Ldexp(1, -9)), DecodeE4M3(0x01))
	require.Equal(t, float32(math.Ldexp(1, -6)), DecodeE4M3(0x08))
	require.True(t, math.Signbit(float64(DecodeE4M3(0x80))), "0x80 is -0")
}

func TestDecodeE5M2AllCodes(t *testing.T) {
	for c := 0; c < 256; c++ {
		got := DecodeE5M2(uint8(c))
		switch c & 0x7F {
		case 0x7C:
			require.True(t, math.IsInf(float64(got), 1-2*(c>>7)), "code %#02x must be Inf", c)
			continue
		case 0x7D, 0x7E, 0x7F:
			require.True(t, math.IsNaN(float64(got)), "code %#02x must be NaN", c)
			continue
		}
		want, ok := ratref.E5M2.Value(uint8(c))
		require.True(t, ok, "code %#02x", c)
		requireRatEqual(t, want, got, "E5M2 code %#02x", c)
	}
	require.Equal(t, float32(57344), DecodeE5M2(0x7B))
	require.Equal(t, float32(math.Ldexp(1, -16)), DecodeE5M2(0x01))
}

func TestDecodeE2M1AllCodes(t *testing.T) {
	want := []float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6}
	for c := 0; c < 16; c++ {
		require.Equal(t, want[c], DecodeE2M1(uint8(c)), "code %d", c)
	}
}

func requireRatEqual(t *testing.T, want *big.Rat, got float32, msg string, args ...any) {
	t.Helper()
	g := new(big.Rat).SetFloat64(float64(got))
	require.Zero(t, want.Cmp(g), append([]any{msg + ": want %s got %g"}, append(args, want.FloatString(12), got)...)...)
}

// every bf16 bit pattern, widened exactly to float32
func allBF16() []float32 {
	out := make([]float32, 0, 65536)
	for h := 0; h < 65536; h++ {
		out = append(out, BF16ToFloat32(uint16(h)))
	}
	return out
}

// boundaryInputs are the grid points of a format, the midpoints between neighbours
// (the ties) and the float32 values just around both, over both signs.
func boundaryInputs(f *ratref.Format) []float32 {
	var out []float32
	pts := append([]*big.Rat{}, f.Values()...)
	pts = append(pts, f.Overflow())
	for i := range pts {
		cands := []*big.Rat{pts[i]}
		if i+1 < len(pts) {
			mid := new(big.Rat).Add(pts[i], pts[i+1])
			cands = append(cands, mid.Quo(mid, big.NewRat(2, 1)))
		}
		for _, r := range cands {
			v, _ := r.Float32()
			for _, x := range []float32{v, math.Nextafter32(v, 0), math.Nextafter32(v, float32(math.Inf(1)))} {
				out = append(out, x, -x)
			}
		}
	}
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	return append(out, inf, -inf, nan, -nan, 0, float32(math.Copysign(0, -1)),
		math.Float32frombits(1), math.Float32frombits(0x807FFFFF), math.MaxFloat32, -math.MaxFloat32)
}

func randomFloat32s(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(r.Uint32())
	}
	return out
}

func TestEncodersAgainstRationalReference(t *testing.T) {
	cases := []struct {
		name string
		enc  func(float32) uint8
		ref  *ratref.Format
	}{
		{"E4M3", EncodeE4M3, ratref.E4M3},
		{"E5M2", EncodeE5M2, ratref.E5M2},
		{"E2M1", EncodeE2M1, ratref.E2M1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sets := map[string][]float32{
				"every bf16 pattern":  allBF16(),
				"boundaries and ties": boundaryInputs(c.ref),
				"random float32":      randomFloat32s(200000, 7),
			}
			for set, xs := range sets {
				for _, x := range xs {
					want := c.ref.Encode(float64(x))
					if c.name == "E2M1" && math.IsNaN(float64(x)) {
						want = 7 // NaN gives +6 (spec §1.5)
					}
					got := c.enc(x)
					if got != want {
						t.Fatalf("%s %s: x=%g (%#08x): got %#02x want %#02x", c.name, set, x, math.Float32bits(x), got, want)
					}
				}
			}
		})
	}
}

func TestEncoderEdgesFromSpec(t *testing.T) {
	pow := func(e int) float32 { return float32(math.Ldexp(1, e)) }
	negZero := float32(math.Copysign(0, -1))
	tests := []struct {
		name string
		enc  func(float32) uint8
		x    float32
		want uint8
	}{
		{"e4m3 half of min subnormal ties to 0", EncodeE4M3, pow(-10), 0x00},
		{"e4m3 just above half min subnormal", EncodeE4M3, math.Nextafter32(pow(-10), 1), 0x01},
		{"e4m3 -0 keeps sign", EncodeE4M3, negZero, 0x80},
		{"e4m3 464 ties to 448", EncodeE4M3, 464, 0x7E},
		{"e4m3 just below 464", EncodeE4M3, math.Nextafter32(464, 0), 0x7E},
		{"e4m3 +inf saturates", EncodeE4M3, float32(math.Inf(1)), 0x7E},
		{"e4m3 -inf saturates", EncodeE4M3, float32(math.Inf(-1)), 0xFE},
		{"e4m3 nan is 0x7f", EncodeE4M3, float32(math.NaN()), 0x7F},
		{"e4m3 -nan is 0x7f", EncodeE4M3, -float32(math.NaN()), 0x7F},
		{"e4m3 subnormal rounds up to min normal", EncodeE4M3, pow(-6) - pow(-11), 0x08},
		{"e5m2 61440 saturates", EncodeE5M2, 61440, 0x7B},
		{"e5m2 -inf saturates", EncodeE5M2, float32(math.Inf(-1)), 0xFB},
		{"e5m2 nan", EncodeE5M2, float32(math.NaN()), 0x7F},
		{"e5m2 half min subnormal to zero", EncodeE5M2, pow(-17), 0x00},
		{"e2m1 0.25 ties to 0", EncodeE2M1, 0.25, 0},
		{"e2m1 0.75 ties to 1", EncodeE2M1, 0.75, 2},
		{"e2m1 1.25 ties to 1", EncodeE2M1, 1.25, 2},
		{"e2m1 1.75 ties to 2", EncodeE2M1, 1.75, 4},
		{"e2m1 2.5 ties to 2", EncodeE2M1, 2.5, 4},
		{"e2m1 3.5 ties to 4", EncodeE2M1, 3.5, 6},
		{"e2m1 5 ties to 4", EncodeE2M1, 5, 6},
		{"e2m1 above 5 is 6", EncodeE2M1, math.Nextafter32(5, 6), 7},
		{"e2m1 saturates", EncodeE2M1, 1e30, 7},
		{"e2m1 -inf saturates to -6", EncodeE2M1, float32(math.Inf(-1)), 15},
		{"e2m1 nan is +6", EncodeE2M1, float32(math.NaN()), 7},
		{"e2m1 -0.1 keeps sign", EncodeE2M1, -0.1, 8},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, tt.enc(tt.x), tt.name)
	}
}

func TestBF16RoundTrip(t *testing.T) {
	for h := 0; h < 65536; h++ {
		x := BF16ToFloat32(uint16(h))
		got := Float32ToBF16(x)
		if math.IsNaN(float64(x)) {
			require.True(t, math.IsNaN(float64(BF16ToFloat32(got))), "bf16 %#04x", h)
			continue
		}
		require.Equal(t, uint16(h), got, "bf16 %#04x", h)
	}
	// Ties: halfway between two bf16 values goes to the even one.
	require.Equal(t, uint16(0x3F80), Float32ToBF16(math.Float32frombits(0x3F808000)))
	require.Equal(t, uint16(0x3F82), Float32ToBF16(math.Float32frombits(0x3F818000)))
}

func TestFP16AgainstRationalReference(t *testing.T) {
	// Every finite binary16 value survives the round trip; the edges and random
	// float32s match a search-based reference.
	for h := 0; h < 65536; h++ {
		x := FP16ToFloat32(uint16(h))
		e := (h >> 10) & 0x1F
		if e == 31 {
			continue
		}
		got := Float32ToFP16(x)
		require.Equal(t, uint16(h), got, "fp16 %#04x round trip", h)
	}
	maxHalf := float32(65504)
	require.Equal(t, uint16(0x7BFF), Float32ToFP16(maxHalf))
	require.Equal(t, uint16(0x7BFF), Float32ToFP16(math.Nextafter32(65520, 0)))
	require.Equal(t, uint16(0x7C00), Float32ToFP16(65520), "65520 ties to even, which is Inf")
	require.Equal(t, uint16(0x0000), Float32ToFP16(float32(math.Ldexp(1, -25))), "half min subnormal ties to 0")
	require.Equal(t, uint16(0x0001), Float32ToFP16(math.Nextafter32(float32(math.Ldexp(1, -25)), 1)))
	for _, x := range randomFloat32s(200000, 9) {
		got := Float32ToFP16(x)
		if math.IsNaN(float64(x)) {
			require.True(t, math.IsNaN(float64(FP16ToFloat32(got))))
			continue
		}
		want := fp16Reference(x)
		if got != want {
			t.Fatalf("fp16(%g): got %#04x want %#04x", x, got, want)
		}
	}
}

// fp16Reference rounds through float64 by searching the two neighbouring halves,
// independent of Float32ToFP16's bit arithmetic.
func fp16Reference(x float32) uint16 {
	sign := uint16(0)
	if math.Signbit(float64(x)) {
		sign = 0x8000
	}
	a := math.Abs(float64(x))
	if a >= 65520 {
		return sign | 0x7C00
	}
	lo, hi := 0, 0x7BFF
	for lo < hi { // largest code whose value ≤ a
		mid := (lo + hi + 1) / 2
		if float64(FP16ToFloat32(uint16(mid))) <= a {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	v0 := float64(FP16ToFloat32(uint16(lo)))
	if v0 == a || lo == 0x7BFF {
		return sign | uint16(lo)
	}
	v1 := float64(FP16ToFloat32(uint16(lo + 1)))
	switch {
	case a-v0 < v1-a:
		return sign | uint16(lo)
	case a-v0 > v1-a:
		return sign | uint16(lo+1)
	case lo%2 == 0:
		return sign | uint16(lo)
	}
	return sign | uint16(lo+1)
}

func TestE8M0(t *testing.T) {
	require.True(t, math.IsNaN(float64(DecodeE8M0(0xFF))))
	require.Equal(t, uint32(0x00400000), math.Float32bits(DecodeE8M0(0)))
	require.Equal(t, float32(1), DecodeE8M0(127))
	require.Equal(t, float32(math.Ldexp(1, 127)), DecodeE8M0(254))
	require.Equal(t, uint32(0x00400000), math.Float32bits(E8M0Reciprocal(254)))
	for b := 1; b < 254; b++ {
		require.Equal(t, float32(1), DecodeE8M0(uint8(b))*E8M0Reciprocal(uint8(b)), "b=%d", b)
	}
	// Round-up rule (spec §4.3): exact powers stay, anything above goes up one.
	require.Equal(t, uint8(127), Float32ToE8M0RoundUp(1))
	require.Equal(t, uint8(128), Float32ToE8M0RoundUp(math.Nextafter32(1, 2)))
	require.Equal(t, uint8(0xFE), Float32ToE8M0RoundUp(float32(math.Inf(1))))
	require.Equal(t, uint8(0xFE), Float32ToE8M0RoundUp(math.MaxFloat32), "saturates")
	require.Equal(t, uint8(0xFF), Float32ToE8M0RoundUp(float32(math.NaN())))
	require.Equal(t, uint8(0), Float32ToE8M0RoundUp(0))
	require.Equal(t, uint8(0), Float32ToE8M0RoundUp(math.Float32frombits(0x00400000)), "2^-127 exactly")
	require.Equal(t, uint8(1), Float32ToE8M0RoundUp(math.Float32frombits(0x00400001)))
	require.Equal(t, uint8(0), Float32ToE8M0RoundUp(math.Float32frombits(1)))
	// Against the exact ceil(log2 x) for random positive normal floats.
	for _, x := range randomFloat32s(100000, 3) {
		a := float32(math.Abs(float64(x)))
		b := math.Float32bits(a)
		if b < 0x00800000 || b >= 0x7F000000 { // skip subnormal and the saturating top binade
			continue
		}
		fr, exp := math.Frexp(float64(a)) // a = fr·2^exp, fr in [0.5,1)
		ceil := exp - 1
		if fr != 0.5 {
			ceil = exp
		}
		require.Equal(t, uint8(ceil+127), Float32ToE8M0RoundUp(a), "x=%g", a)
		require.Equal(t, uint8(exp-1+127), Float32ToE8M0Floor(a), "floor x=%g", a)
	}
}
