// Package testutil holds test helpers that take and return plain Go values
// (seeded inputs, error bounds). It imports only the standard library, so that
// the tests of every layer can use it; the helpers that build host tensors are
// in host/hosttest.
package testutil

import (
	"math"
	"math/rand/v2"
)

// Normal returns n normal values with standard deviation sigma.
func Normal(n int, sigma float64, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 99))
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.NormFloat64() * sigma)
	}
	return out
}

// Adversarial returns n values mixing zeros of both signs, NaN, ±Inf, float32
// subnormals, huge and tiny magnitudes and ordinary ones, in a seeded order.
func Adversarial(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 7))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
		math.Float32frombits(1), -math.Float32frombits(0x7FFFF), math.MaxFloat32, -math.MaxFloat32, 1e-30, -3e-39, 448, -464, 57344, 65504}
	out := make([]float32, n)
	for i := range out {
		switch r.IntN(4) {
		case 0:
			out[i] = special[r.IntN(len(special))]
		case 1:
			out[i] = math.Float32frombits(r.Uint32()) // any bit pattern
		default:
			out[i] = float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(40)-20)))
		}
	}
	return out
}

// GammaN is γ_n = n·u/(1 − n·u) for FP32's u = 2^-24: the bound on the relative
// error of a sum of n products accumulated in FP32 (Higham, Accuracy and
// Stability of Numerical Algorithms, §3.1).
func GammaN(n int) float64 {
	u := math.Ldexp(1, -24)
	return float64(n) * u / (1 - float64(n)*u)
}
