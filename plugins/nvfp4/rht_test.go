package nvfp4

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/internal/numeric"
)

func bf16Chunk(f func(i int) float32) (v [16]float32) {
	for i := range v {
		v[i] = numeric.BF16ToFloat32(numeric.Float32ToBF16(f(i)))
	}
	return
}

// TestRHTMatchesMatrixProduct: the transform equals the direct 16×16 matrix
// product in float64 followed by one BF16 rounding (spec §5.5), for random and
// adversarial chunks and several masks.
func TestRHTMatchesMatrixProduct(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	chunks := map[string][16]float32{
		"zeros": {},
		"one": bf16Chunk(func(i int) float32 {
			if i == 5 {
				return 1
			}
			return 0
		}),
		"neg zeros": bf16Chunk(func(int) float32 { return negZ }),
		"ones":      bf16Chunk(func(int) float32 { return 1 }),
		"wide span": bf16Chunk(func(i int) float32 { return []float32{1e30, 3e-30, -1e30, 1}[i%4] }),
		// ulp exponents 41 apart (the butterfly is exact) and 42 apart (the
		// ascending order decides): both must match the reference.
		"span 41": bf16Chunk(func(i int) float32 { return float32(math.Ldexp(1+float64(i)/8, []int{20, -21}[i%2])) }),
		"span 42": bf16Chunk(func(i int) float32 { return float32(math.Ldexp(1+float64(i)/8, []int{20, -22}[i%2])) }),
		"cancel to tiny": bf16Chunk(func(i int) float32 {
			return []float32{1, -1, 1e-38, 1e-39}[i%4]
		}),
		"subnormals": bf16Chunk(func(i int) float32 { return float32(math.Ldexp(float64(i-8), -133)) }),
		"inf":        bf16Chunk(func(i int) float32 { return []float32{inf, 2, -3, 4}[i%4] }),
		"inf minus inf": bf16Chunk(func(i int) float32 {
			if i < 2 {
				return inf
			}
			return 1
		}),
		"nan":      bf16Chunk(func(i int) float32 { return []float32{nan, 2}[i%2] }),
		"overflow": bf16Chunk(func(int) float32 { return 3e38 }),
	}
	for i := 0; i < 300; i++ {
		scale := math.Ldexp(1, rng.IntN(60)-30)
		chunks["random"+string(rune('a'+i%26))+string(rune('a'+i/26))] = bf16Chunk(func(int) float32 {
			return float32(rng.NormFloat64() * scale * math.Ldexp(1, rng.IntN(20)-10))
		})
	}
	for _, mask := range []uint16{DefaultRHTSignMask, 0, 0xFFFF, 0x00F0} {
		for name, x := range chunks {
			got := x
			RHTBF16(&got, mask)
			want := refRHT(x, mask)
			for j := range want {
				wb, gb := math.Float32bits(want[j]), math.Float32bits(got[j])
				if want[j] != want[j] {
					require.True(t, got[j] != got[j], "%s mask %#x out %d: want NaN, got %g", name, mask, j, got[j])
					require.Equal(t, uint32(0x7FC00000), gb, "%s: canonical NaN", name)
					continue
				}
				require.Equal(t, wb, gb, "%s mask %#x out %d: want %g got %g", name, mask, j, want[j], got[j])
			}
		}
	}
}

// TestRHTWideSpanTakesOrderedSum: a chunk where the butterfly's order would
// round differently from the ascending sum; the normative ascending order wins.
func TestRHTWideSpanTakesOrderedSum(t *testing.T) {
	// 1, then 2^-60 twice, then -1: ascending order for output 0 (all +1 with mask 0
	// and H16 row 0) gives ((1 + 2^-60) + 2^-60) - 1 = 0 in float64, while the
	// exact sum is 2^-59.
	var x [16]float32
	x[0], x[1], x[2], x[3] = 1, float32(math.Ldexp(1, -60)), float32(math.Ldexp(1, -60)), -1
	require.False(t, exactSpan(&x))
	got := x
	RHTBF16(&got, 0)
	require.Equal(t, float32(0), got[0], "ascending float64 order, not the exact 2^-61")
	require.Equal(t, refRHT(x, 0), got)
}

func TestRHTIsOrthogonal(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for n := 0; n < 100; n++ {
		var x [16]float32
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		signs := rhtSigns(uint16(rng.Uint32()))
		var y [16]float64
		rhtSums(&x, &signs, &y)
		v := [16]float32{}
		for i := range v {
			v[i] = float32(y[i] / 4)
		}
		rhtInverse(&v, &signs)
		for i := range x {
			require.InDelta(t, x[i], v[i], 1e-6, "inverse undoes forward")
		}
	}
}

func TestExactSpanBoundary(t *testing.T) {
	for _, c := range []struct {
		a, b float64
		want bool
	}{
		{math.Ldexp(1, 20), math.Ldexp(1, -21), true},
		{math.Ldexp(1, 20), math.Ldexp(1, -22), false},
		{math.Ldexp(1, -126), math.Ldexp(1, -133), true}, // subnormal ulp exponent is that of the smallest normal
		{math.Inf(1), math.Ldexp(1, -100), true},
	} {
		var v [16]float32
		v[3], v[9] = float32(c.a), float32(c.b)
		require.Equal(t, c.want, exactSpan(&v), "%g and %g", c.a, c.b)
	}
}
