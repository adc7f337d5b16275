package host_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/host"
	tu "libquant/internal/testutil"
	_ "libquant/plugins/all"
)

var cpu = host.Device{Type: host.CPU}

// randTensor fills a new tensor with N(0, sigma²) values rounded to dt, with
// a few 8σ outliers so that block scales differ.
func randTensor(t testing.TB, rng *rand.Rand, dt host.DType, sigma float64, shape ...int64) host.Tensor {
	t.Helper()
	x := tu.Tensor(t, dt, shape...)
	v := make([]float32, x.NumElements())
	for i := range v {
		v[i] = float32(rng.NormFloat64() * sigma)
		if rng.IntN(64) == 0 {
			v[i] *= 8
		}
	}
	host.StoreFloat32(x, 0, v)
	return x
}

// values reads a CPU FP32/BF16/FP16 tensor as float32.
func values(x host.Tensor) []float32 {
	v := make([]float32, x.NumElements())
	host.LoadFloat32(x, 0, v)
	return v
}

// dequantize reads one direction of a quantized tensor as FP32.
func dequantize(t *testing.T, q *host.QTensor, dir host.Direction) []float32 {
	t.Helper()
	out := tu.Tensor(t, host.Float32, q.Shape()...)
	require.NoError(t, q.Dequantize(dir, out, 0))
	return values(out)
}

func quantize(t *testing.T, q *host.Quantizer, x host.Tensor) *host.QTensor {
	t.Helper()
	qt, err := q.Quantize(x, host.QuantizeOptions{})
	require.NoError(t, err)
	t.Cleanup(qt.Free)
	return qt
}

// unitRoundoff is u of an output dtype: RNE to it is within u·|x| (normal range).
func unitRoundoff(dt host.DType) float64 {
	switch dt {
	case host.BFloat16:
		return math.Ldexp(1, -8)
	case host.Float16:
		return math.Ldexp(1, -11)
	}
	return math.Ldexp(1, -24)
}

func gammaN(n int) float64 {
	u := math.Ldexp(1, -24)
	return float64(n) * u / (1 - float64(n)*u)
}
