// Package testutil builds host tensors for tests: CPU tensors in C memory (as
// the ABI would hand them over) filled from float32 values in any input dtype.
package testutil

import (
	"math"
	"math/rand/v2"
	"testing"

	"libquant/host"
	"libquant/internal/numeric"
)

var cpu = host.Device{Type: host.CPU}

// Tensor allocates a CPU tensor freed when the test ends.
func Tensor(t testing.TB, dt host.DType, shape ...int64) host.Tensor {
	t.Helper()
	x, err := host.AllocTensor(cpu, dt, shape, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.FreeTensor(x, 0) })
	return x
}

// Input makes an FP32/BF16/FP16 tensor holding vals rounded to dt, and returns
// it with the exact float32 values it holds.
func Input(t testing.TB, dt host.DType, vals []float32, shape ...int64) (host.Tensor, []float32) {
	t.Helper()
	x := Tensor(t, dt, shape...)
	if int64(len(vals)) != x.NumElements() {
		t.Fatalf("Input: %d values for shape %v", len(vals), shape)
	}
	exact := make([]float32, len(vals))
	switch dt {
	case host.Float32:
		copy(x.Float32s(), vals)
		copy(exact, vals)
	case host.BFloat16:
		h := x.Uint16s()
		for i, v := range vals {
			h[i] = numeric.Float32ToBF16(v)
			exact[i] = numeric.BF16ToFloat32(h[i])
		}
	case host.Float16:
		h := x.Uint16s()
		for i, v := range vals {
			h[i] = numeric.Float32ToFP16(v)
			exact[i] = numeric.FP16ToFloat32(h[i])
		}
	default:
		t.Fatalf("Input: dtype %s", dt)
	}
	return x, exact
}

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

// BenchQuantize re-quantizes in into one tensor b.N times (buffers reused, as a
// training step does) and reports GB/s on the minimum bytes: the input read
// once plus every output buffer of every produced direction written once.
func BenchQuantize(b *testing.B, in host.Tensor, p host.Params, usage host.Usage) {
	b.Helper()
	q, err := host.NewQuantizer(p, usage)
	if err != nil {
		b.Fatal(err)
	}
	defer q.Release()
	layout, err := q.Layout(in.Shape)
	if err != nil {
		b.Fatal(err)
	}
	bytes := in.Bytes()
	for _, l := range layout {
		bytes += l.Bytes()
	}
	t, err := q.Quantize(in, host.QuantizeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer t.Free()
	b.SetBytes(bytes)
	b.ResetTimer()
	for b.Loop() {
		if err := q.QuantizeInto(in, host.QuantizeOptions{}, t); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(bytes)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}
