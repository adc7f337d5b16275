package nvfp4

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/host"
	_ "libquant/host/cpumem" // the tests allocate CPU tensors
	"libquant/internal/numeric"
)

var cpu = host.Device{Type: host.CPU}

// input is a test matrix: its exact float32 values and the host tensor (C
// memory) holding them in dtype.
type input struct {
	vals [][]float32
	t    host.Tensor
}

// newInput rounds vals to dtype (RNE) in place and returns them with a tensor
// holding them; the tensor is freed when the test ends.
func newInput(t testing.TB, dtype host.DType, vals [][]float32) input {
	m, k := len(vals), len(vals[0])
	ten, err := host.AllocTensor(cpu, dtype, []int64{int64(m), int64(k)}, 0)
	require.NoError(t, err)
	t.Cleanup(func() { host.FreeTensor(ten, 0) })
	for r := range vals {
		for c, x := range vals[r] {
			i := r*k + c
			switch dtype {
			case host.Float32:
				ten.Float32s()[i] = x
			case host.BFloat16:
				h := numeric.Float32ToBF16(x)
				ten.Uint16s()[i] = h
				vals[r][c] = numeric.BF16ToFloat32(h)
			case host.Float16:
				h := numeric.Float32ToFP16(x)
				ten.Uint16s()[i] = h
				vals[r][c] = numeric.FP16ToFloat32(h)
			}
		}
	}
	return input{vals: vals, t: ten}
}

func matrix(m, k int, f func(r, c int) float32) [][]float32 {
	out := make([][]float32, m)
	for r := range out {
		out[r] = make([]float32, k)
		for c := range out[r] {
			out[r][c] = f(r, c)
		}
	}
	return out
}

// gaussian values with a per-row magnitude spread and 0.5% 20× outliers.
func gaussian(m, k int, seed uint64) [][]float32 {
	rng := rand.New(rand.NewPCG(seed, 3))
	return matrix(m, k, func(r, c int) float32 {
		g := rng.NormFloat64() * math.Ldexp(1, r%9-4)
		if rng.IntN(200) == 0 {
			g *= 20
		}
		return float32(g)
	})
}

// quantize runs the host path for params p with usage u and returns the
// tensor; it is freed when the test ends.
func quantize(t testing.TB, p host.Params, u host.Usage, in host.Tensor, amaxIn *[2]float32) *host.QTensor {
	t.Helper()
	q, err := host.NewQuantizer(p, u)
	require.NoError(t, err)
	defer q.Release()
	var opts host.QuantizeOptions
	if amaxIn != nil {
		a, err := host.AllocTensor(cpu, host.Float32, []int64{2}, 0)
		require.NoError(t, err)
		defer host.FreeTensor(a, 0)
		copy(a.Float32s(), amaxIn[:])
		opts.AmaxIn = &a
	}
	qt, err := q.Quantize(in, opts)
	require.NoError(t, err)
	t.Cleanup(qt.Free)
	return qt
}

// stored reads one direction's buffers back.
func stored(t testing.TB, qt *host.QTensor, dir host.Direction) refDirection {
	t.Helper()
	st, ok := qt.Storage(dir)
	require.True(t, ok, "tensor has no %s storage", dir)
	return refDirection{
		data:  append([]byte(nil), st.MustBuffer(host.BufData).Bytes8()...),
		scale: append([]byte(nil), st.MustBuffer(host.BufScaleInv).Bytes8()...),
		amax:  st.MustBuffer(host.BufAmax).Float32s()[0],
	}
}

// requireSameDirection compares buffers byte for byte, naming the first
// difference.
func requireSameDirection(t testing.TB, want, got refDirection, what string) {
	t.Helper()
	require.Equal(t, math.Float32bits(want.amax), math.Float32bits(got.amax), "%s: amax want %g got %g", what, want.amax, got.amax)
	require.Equal(t, len(want.scale), len(got.scale), "%s: scale_inv size", what)
	for i := range want.scale {
		if want.scale[i] != got.scale[i] {
			t.Fatalf("%s: scale_inv[%d] want %#02x got %#02x", what, i, want.scale[i], got.scale[i])
		}
	}
	require.Equal(t, len(want.data), len(got.data), "%s: data size", what)
	for i := range want.data {
		if want.data[i] != got.data[i] {
			t.Fatalf("%s: data[%d] want %#02x got %#02x", what, i, want.data[i], got.data[i])
		}
	}
}

// dequantized runs the host dequantize of dir into FP32 [m, k].
func dequantized(t testing.TB, qt *host.QTensor, dir host.Direction, undo bool) []float32 {
	t.Helper()
	m, k := qt.Dims2D()
	out, err := host.AllocTensor(cpu, host.Float32, []int64{m, k}, 0)
	require.NoError(t, err)
	defer host.FreeTensor(out, 0)
	require.NoError(t, qt.DequantizeWith(dir, out, host.DequantizeOptions{UndoTransform: undo}))
	return append([]float32(nil), out.Float32s()...)
}
