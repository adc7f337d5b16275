// Package hosttest builds host tensors, quantizers and quantized tensors for
// the tests of host and of the layers above it (linear, native, plugins, capi):
// CPU tensors in C memory, as the ABI would hand them over (it imports
// host/cpumem, so every test that uses it can allocate them). It imports host,
// host/cpumem and internal packages only, never a layer above host.
package hosttest

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"libquant/host"
	_ "libquant/host/cpumem" // the tests allocate CPU tensors
	"libquant/internal/numeric"
)

// CPU is the CPU device.
var CPU = host.Device{Type: host.CPU}

// Tensor allocates a CPU tensor freed when the test ends.
func Tensor(t testing.TB, dt host.DType, shape ...int64) host.Tensor {
	t.Helper()
	x, err := host.AllocTensor(CPU, dt, shape, 0)
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

// RandTensor fills a new tensor with N(0, sigma²) values rounded to dt, with
// a few 8σ outliers so that block scales differ.
func RandTensor(t testing.TB, rng *rand.Rand, dt host.DType, sigma float64, shape ...int64) host.Tensor {
	t.Helper()
	x := Tensor(t, dt, shape...)
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

// Values reads a CPU FP32/BF16/FP16 tensor as float32.
func Values(x host.Tensor) []float32 {
	v := make([]float32, x.NumElements())
	host.LoadFloat32(x, 0, v)
	return v
}

// Dequantize reads one direction of a quantized tensor as FP32.
func Dequantize(t *testing.T, q *host.QTensor, dir host.Direction) []float32 {
	t.Helper()
	out := Tensor(t, host.Float32, q.Shape()...)
	require.NoError(t, q.Dequantize(dir, out, 0))
	return Values(out)
}

// Quantize quantizes x with q into a tensor freed when the test ends.
func Quantize(t *testing.T, q *host.Quantizer, x host.Tensor) *host.QTensor {
	t.Helper()
	qt, err := q.Quantize(x, host.QuantizeOptions{})
	require.NoError(t, err)
	t.Cleanup(qt.Free)
	return qt
}

// NewQuantizer makes a quantizer released when the test ends.
func NewQuantizer(t *testing.T, p host.Params, u host.Usage) *host.Quantizer {
	t.Helper()
	q, err := host.NewQuantizer(p, u)
	require.NoError(t, err)
	t.Cleanup(q.Release)
	return q
}

// NewHybrid makes a hybrid quantizer (row for rowwise, col for columnwise)
// released when the test ends.
func NewHybrid(t *testing.T, row, col host.Params, src host.ColumnwiseSource) *host.Quantizer {
	t.Helper()
	qr, err := host.NewQuantizer(row, 0)
	require.NoError(t, err)
	defer qr.Release()
	qc, err := host.NewQuantizer(col, 0)
	require.NoError(t, err)
	defer qc.Release()
	h, err := host.NewHybridQuantizer(qr, qc, src)
	require.NoError(t, err)
	t.Cleanup(h.Release)
	return h
}

// BufferAddrs lists the addresses of every buffer of q, rowwise first.
func BufferAddrs(q *host.QTensor) []unsafe.Pointer {
	var out []unsafe.Pointer
	for _, d := range []host.Direction{host.DirRowwise, host.DirColumnwise} {
		if st, ok := q.Storage(d); ok {
			for _, b := range st.Buffers {
				out = append(out, b.Tensor.Ptr)
			}
		}
	}
	return out
}

// UnitRoundoff is u of an output dtype: RNE to it is within u·|x| (normal range).
func UnitRoundoff(dt host.DType) float64 {
	switch dt {
	case host.BFloat16:
		return math.Ldexp(1, -8)
	case host.Float16:
		return math.Ldexp(1, -11)
	}
	return math.Ldexp(1, -24)
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

// GuardLen bytes past each buffer of a Guarded storage must never be written.
const GuardLen = 64

// Garbage is the byte a Guarded storage's buffers hold before a kernel runs.
const Garbage = 0xA5

// Guarded is direction Dir of an [m, k] tensor in caller-style buffers
// pre-filled with Garbage, each followed by GuardLen guard bytes, so a test
// sees padding a kernel failed to zero and writes past the end.
type Guarded struct {
	St   *host.Storage
	raws [][]byte
}

// NewGuarded allocates the buffers of spec's layout for [m, k] in direction dir,
// freed when the test ends.
func NewGuarded(t testing.TB, spec host.Spec, dir host.Direction, m, k int) *Guarded {
	t.Helper()
	layout, err := spec.Layout(int64(m), int64(k), dir)
	require.NoError(t, err)
	g := &Guarded{St: &host.Storage{Spec: spec, Dir: dir, Device: CPU}}
	for _, b := range layout {
		raw, err := host.AllocTensor(CPU, host.Uint8, []int64{b.Bytes() + GuardLen}, 0)
		require.NoError(t, err)
		t.Cleanup(func() { host.FreeTensor(raw, 0) })
		bytes := raw.Bytes8()
		for i := range bytes {
			bytes[i] = Garbage
		}
		g.raws = append(g.raws, bytes)
		g.St.Buffers = append(g.St.Buffers, host.Buffer{BufferSpec: b,
			Tensor: host.Tensor{Ptr: raw.Ptr, DType: b.DType, Shape: b.Shape, Device: CPU}})
	}
	return g
}

// CheckGuards fails the test if a guard byte after any buffer was written.
func (g *Guarded) CheckGuards(t testing.TB, what string) {
	t.Helper()
	for i, raw := range g.raws {
		for j, b := range raw[len(raw)-GuardLen:] {
			require.Equal(t, byte(Garbage), b, "%s: buffer %d (%s): byte %d past the end was written", what, i, g.St.Buffers[i].Kind, j)
		}
	}
}
