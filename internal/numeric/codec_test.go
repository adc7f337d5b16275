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

func TestEncodeE2M1EveryFloat32Sample(t *testing.T) {
	// The branch-free encoder against the threshold table of spec §1.5 written
	// as comparisons on values, over a dense sweep of float32 bit patterns.
	bounds := []struct {
		v         float64
		inclusive bool
	}{{0.25, true}, {0.75, false}, {1.25, true}, {1.75, false}, {2.5, true}, {3.5, false}, {5, true}}
	ref := func(x float32) uint8 {
		if x != x {
			return 7
		}
		var s uint8
		if math.Signbit(float64(x)) {
			s = 8
		}
		v := math.Abs(float64(x))
		var c uint8
		for _, b := range bounds {
			if v > b.v || (!b.inclusive && v == b.v) {
				c++
			}
		}
		return s | c
	}
	check := func(b uint32) {
		x := math.Float32frombits(b)
		if got, want := EncodeE2M1(x), ref(x); got != want {
			t.Fatalf("x=%g (%#08x): got %d want %d", x, b, got, want)
		}
	}
	for b := uint64(0); b < 1<<32; b += 4093 {
		check(uint32(b))
	}
	// Every bucket start of the table (b with zero low 21 bits: the thresholds
	// and their exact hits) and its neighbours.
	for i := uint64(0); i < 1<<11; i++ {
		b := uint32(i << 21)
		check(b)
		check(b + 1)
		check(b - 1)
	}
}

func TestStochasticRoundE2M1(t *testing.T) {
	// Spec §5.6 edges and grid steps: u = rbits/256.
	negZero := float32(math.Copysign(0, -1))
	tests := []struct {
		name  string
		x     float32
		rbits uint8
		want  uint8
	}{
		{"grid point stays with u=0", 1.5, 0, 3},
		{"grid point stays with max u", 1.5, 255, 3},
		{"0.25 with u<0.5 floors to 0", 0.25, 127, 0},
		{"0.25 with u=0.5 reaches 0.5", 0.25, 128, 1},
		{"1.75 crosses into step-1 region: t=2", 1.75, 128, 4},
		{"2.5 with u=0.5 reaches 3", 2.5, 128, 5},
		{"2.5 with u just below 0.5 floors to 2", 2.5, 127, 4},
		{"3.5 crosses to 4", 3.5, 128, 6},
		{"5 with u=0.5 reaches 6", 5, 128, 7},
		{"5 with u<0.5 stays at 4", 5, 127, 6},
		{"above 6 clamps", 7, 0, 7},
		{"inf clamps", float32(math.Inf(1)), 0, 7},
		{"-inf clamps with sign", float32(math.Inf(-1)), 0, 15},
		{"nan is +6", float32(math.NaN()), 9, 7},
		{"-nan is +6", -float32(math.NaN()), 9, 7},
		{"-0 keeps sign", negZero, 0, 8},
		{"-0.2 rounds down to -0", -0.2, 0, 8},
		{"-0.2 rounds up to -0.5", -0.2, 255, 9},
		{"-4.5 with u=0.75 is -6", -4.5, 192, 15},
		{"-4.5 with u<0.75 is -4", -4.5, 191, 14},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, StochasticRoundE2M1(tt.x, tt.rbits), tt.name)
	}
	// Every output is one of the two grid neighbours of a finite x in [-6, 6].
	for _, x := range randomFloat32s(20000, 5) {
		if !(math.Abs(float64(x)) <= 6) {
			continue
		}
		lo := EncodeE2M1(x)
		for r := 0; r < 256; r += 17 {
			q := DecodeE2M1(StochasticRoundE2M1(x, uint8(r)))
			below, above := e2m1Neighbours(float64(x))
			require.True(t, float64(q) == below || float64(q) == above, "x=%g r=%d q=%g (rn %g)", x, r, q, DecodeE2M1(lo))
		}
	}
}

// e2m1Neighbours returns the grid values just below-or-at and at-or-above x.
func e2m1Neighbours(x float64) (below, above float64) {
	grid := []float64{-6, -4, -3, -2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, 2, 3, 4, 6}
	below, above = -6, 6
	for _, g := range grid {
		if g <= x {
			below = g
		}
		if g >= x && g < above {
			above = g
		}
	}
	return
}

func TestStochasticRoundE2M1IsUnbiased(t *testing.T) {
	// Over all 256 values of rbits, E[q] - x lies in (-step/256, step/256]:
	// P(up) counts the k with k/256·step ≥ hi - x, which is within 1/256 of the
	// exact fraction, and the float32 rounding of t adds at most one more k.
	// For x on a multiple of step/256 the mean is exact.
	for _, x := range randomFloat32s(5000, 11) {
		ax := math.Abs(float64(x))
		if !(ax <= 6) {
			continue
		}
		step := 2.0
		if ax < 2 {
			step = 0.5
		} else if ax < 4 {
			step = 1
		}
		var sum float64
		for r := 0; r < 256; r++ {
			sum += float64(DecodeE2M1(StochasticRoundE2M1(x, uint8(r))))
		}
		bias := sum/256 - float64(x)
		require.LessOrEqual(t, math.Abs(bias), step/256, "x=%g", x)
	}
	for k := 0; k <= 6*512; k++ { // multiples of 1/512 ≤ 6: exact on the step-0.5 grid of 1/512
		x := float64(k) / 512
		step := 2.0
		if x < 2 {
			step = 0.5
		} else if x < 4 {
			step = 1
		}
		if math.Mod(x*256/step, 1) != 0 {
			continue
		}
		var sum float64
		for r := 0; r < 256; r++ {
			sum += float64(DecodeE2M1(StochasticRoundE2M1(float32(x), uint8(r))))
		}
		require.Equal(t, x, sum/256, "x=%g", x)
	}
}

func TestPhiloxKnownAnswers(t *testing.T) {
	// Random123 tests/kat_vectors, philox4x32 10.
	tests := []struct {
		ctr  [4]uint32
		key  [2]uint32
		want [4]uint32
	}{
		{[4]uint32{0, 0, 0, 0}, [2]uint32{0, 0}, [4]uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
		{[4]uint32{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, [2]uint32{0xffffffff, 0xffffffff},
			[4]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
		{[4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0},
			[4]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, Philox4x32_10(tt.ctr, tt.key), "ctr %x key %x", tt.ctr, tt.key)
	}
}

func TestFloat64ToBF16(t *testing.T) {
	// Equal to the float32 rounding for every float32 (sampled densely) ...
	for b := uint64(0); b < 1<<32; b += 7919 {
		x := math.Float32frombits(uint32(b))
		want := Float32ToBF16(x)
		if x != x {
			want = 0x7FC0
		}
		if got := Float64ToBF16(float64(x)); got != want {
			t.Fatalf("x=%g (%#08x): got %#04x want %#04x", x, uint32(b), got, want)
		}
	}
	// ... and a single rounding where float64 → float32 → bf16 would round twice:
	// 1 + 2^-8 + 2^-40 is above the bf16 tie 1 + 2^-8, but its float32 rounding
	// lands on the tie, which then goes to even (1).
	x := 1 + math.Ldexp(1, -8) + math.Ldexp(1, -40)
	require.Equal(t, uint16(0x3F81), Float64ToBF16(x))
	require.Equal(t, uint16(0x3F80), Float32ToBF16(float32(x)), "the double rounding this avoids")
	// Subnormal ties and overflow.
	require.Equal(t, uint16(0x0000), Float64ToBF16(math.Ldexp(1, -134)), "half the smallest subnormal ties to 0")
	require.Equal(t, uint16(0x0001), Float64ToBF16(math.Ldexp(1, -134)+math.Ldexp(1, -180)))
	require.Equal(t, uint16(0x8001), Float64ToBF16(-math.Ldexp(3, -135)))
	require.Equal(t, uint16(0x0080), Float64ToBF16(math.Ldexp(1, -126)-math.Ldexp(1, -140)), "rounds up to the smallest normal")
	require.Equal(t, uint16(0x7F7F), Float64ToBF16(math.Ldexp(255, 120)+math.Ldexp(1, 118)), "just below the overflow tie")
	require.Equal(t, uint16(0x7F80), Float64ToBF16(math.Ldexp(511, 119)), "the overflow tie goes to Inf")
	require.Equal(t, uint16(0xFF80), Float64ToBF16(math.Inf(-1)))
	require.Equal(t, uint16(0x8000), Float64ToBF16(math.Copysign(0, -1)))
	require.Equal(t, uint16(0x7F80), Float64ToBF16(1e300))
}

func TestRoundToBF16MatchesFloat64ToBF16(t *testing.T) {
	src := []float64{0, math.Copysign(0, -1), 1, -1.00390625, 1 + math.Ldexp(1, -8) + math.Ldexp(1, -40),
		math.Ldexp(3, -135), math.Ldexp(1, -126), math.Ldexp(511, 119), math.Inf(1), math.NaN(), 1e300, -1e-300}
	for _, x := range randomFloat32s(5000, 13) {
		src = append(src, float64(x)*1.0000001)
	}
	dst := make([]float32, len(src))
	RoundToBF16(dst, src)
	for i, x := range src {
		require.Equal(t, Float64ToBF16(x), uint16(math.Float32bits(dst[i])>>16), "x=%g", x)
		require.Zero(t, math.Float32bits(dst[i])&0xFFFF, "x=%g: a bf16 value", x)
	}
}

func TestPhiloxTwoChains(t *testing.T) {
	for i := uint32(0); i < 200; i++ {
		ca := [4]uint32{i, i * 7, ^i, i << 9}
		cb := [4]uint32{i + 1, 3, i * 11, 0xFFFFFFFF - i}
		key := [2]uint32{i * 0x9E37, ^i}
		var a, b [4]uint32
		Philox4x32_10x2(ca, cb, key, &a, &b)
		require.Equal(t, Philox4x32_10(ca, key), a)
		require.Equal(t, Philox4x32_10(cb, key), b)
	}
}

func TestFloat64ToBF16Normal(t *testing.T) {
	xs := []float64{1, -3.75, math.Ldexp(1, -126), math.Nextafter(math.Ldexp(1, 128), 0), math.Ldexp(511, 119),
		0, math.Copysign(0, -1), math.Ldexp(1, -127), math.Ldexp(1, 128), math.Inf(1), math.NaN()}
	for _, x := range randomFloat32s(20000, 17) {
		xs = append(xs, float64(x)*(1+1e-9))
	}
	for _, x := range xs {
		h, ok := Float64ToBF16Normal(x)
		a := math.Abs(x)
		require.Equal(t, a >= math.Ldexp(1, -126) && a < math.Ldexp(1, 128), ok, "x=%g", x)
		if ok {
			require.Equal(t, Float64ToBF16(x), h, "x=%g", x)
		}
	}
}
