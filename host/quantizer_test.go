package host_test

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"libquant/host"
	"libquant/host/hosttest"
	"libquant/internal/cmem"
	tu "libquant/internal/testutil"
	_ "libquant/plugins/fp8"
	_ "libquant/plugins/nvfp4"
)

func data(t *testing.T, qt *host.QTensor, d host.Direction) []byte {
	t.Helper()
	st, ok := qt.Storage(d)
	require.True(t, ok, "tensor has no %s storage", d)
	return st.MustBuffer(host.BufData).Bytes8()
}

func fresh(t *testing.T, p host.Params, in host.Tensor, d host.Direction) []byte {
	t.Helper()
	qt, err := hosttest.NewQuantizer(t, p, d.Usage()).Quantize(in, host.QuantizeOptions{})
	require.NoError(t, err)
	defer qt.Free()
	return append([]byte(nil), data(t, qt, d)...)
}

func TestLayoutFollowsUsage(t *testing.T) {
	q := hosttest.NewQuantizer(t, host.Params{Format: "fp8"}, host.Columnwise)
	l, err := q.Layout([]int64{4, 6, 10})
	require.NoError(t, err)
	require.Len(t, l, 3)
	require.Equal(t, host.DirColumnwise, l[0].Dir)
	require.Equal(t, []int64{10, 24}, l[0].Shape)
	_, err = q.Layout([]int64{})
	require.ErrorIs(t, err, host.ErrInvalidArgument)
}

// A persistent weight re-quantized after its quantizer's usage shrank keeps,
// and refreshes, the direction it no longer asks for (spec §10).
func TestPersistentTensorNeverLosesAUsage(t *testing.T) {
	p := host.Params{Format: "fp8"}
	w1, _ := hosttest.Input(t, host.BFloat16, tu.Normal(32*48, 1, 1), 32, 48)
	w2, _ := hosttest.Input(t, host.BFloat16, tu.Normal(32*48, 3, 2), 32, 48)
	train := hosttest.NewQuantizer(t, p, host.BothUsages)
	weight, err := train.Quantize(w1, host.QuantizeOptions{Persistent: true})
	require.NoError(t, err)
	defer weight.Free()
	colAddr := &data(t, weight, host.DirColumnwise)[0]

	infer := hosttest.NewQuantizer(t, p, host.Rowwise)
	require.NoError(t, infer.QuantizeInto(w2, host.QuantizeOptions{}, weight))
	require.Equal(t, host.BothUsages, weight.Usage())
	require.Equal(t, fresh(t, p, w2, host.DirColumnwise), data(t, weight, host.DirColumnwise), "columnwise is fresh, not stale")
	require.Equal(t, fresh(t, p, w2, host.DirRowwise), data(t, weight, host.DirRowwise))
	require.Same(t, colAddr, &data(t, weight, host.DirColumnwise)[0], "buffers stay in place")
	err = weight.UpdateUsage(host.Rowwise, 0)
	require.ErrorIs(t, err, host.ErrState)
	require.ErrorContains(t, err, "persistent")

	// A temporary ends with exactly the quantizer's usage.
	tmp, err := train.Quantize(w1, host.QuantizeOptions{})
	require.NoError(t, err)
	defer tmp.Free()
	require.NoError(t, infer.QuantizeInto(w2, host.QuantizeOptions{}, tmp))
	require.Equal(t, host.Rowwise, tmp.Usage())
}

func TestQuantizeIntoAcrossALayoutChange(t *testing.T) {
	in, _ := hosttest.Input(t, host.Float32, tu.Normal(16*16, 1, 3), 16, 16)
	e4 := hosttest.NewQuantizer(t, host.Params{Format: "fp8"}, host.Rowwise)
	e5 := hosttest.NewQuantizer(t, host.Params{Format: "fp8", Element: host.ElementE5M2}, host.Rowwise)
	// libquant-owned buffers are replaced when the element type changes.
	qt, err := e4.Quantize(in, host.QuantizeOptions{})
	require.NoError(t, err)
	defer qt.Free()
	require.NoError(t, e5.QuantizeInto(in, host.QuantizeOptions{}, qt))
	require.Equal(t, fresh(t, host.Params{Format: "fp8", Element: host.ElementE5M2}, in, host.DirRowwise), data(t, qt, host.DirRowwise))
	// Caller-owned ones cannot be: that is an error, and nothing changes.
	layout, err := e4.Layout([]int64{16, 16})
	require.NoError(t, err)
	var bufs []host.Tensor
	for _, l := range layout {
		bufs = append(bufs, hosttest.Tensor(t, l.DType, l.Shape...))
	}
	borrowed, err := e4.NewQTensorFromBuffers([]int64{16, 16}, bufs)
	require.NoError(t, err)
	defer borrowed.Free()
	require.NoError(t, e4.QuantizeInto(in, host.QuantizeOptions{}, borrowed))
	err = e5.QuantizeInto(in, host.QuantizeOptions{}, borrowed)
	require.ErrorIs(t, err, host.ErrState)
	require.ErrorContains(t, err, "caller's")
	require.Equal(t, fresh(t, host.Params{Format: "fp8"}, in, host.DirRowwise), data(t, borrowed, host.DirRowwise))
}

func TestHybridQuantizerDirectionsAndSources(t *testing.T) {
	in, _ := hosttest.Input(t, host.BFloat16, tu.Normal(64*32, 2, 4), 64, 32)
	rowP := host.Params{Format: "fp8"}
	colP := host.Params{Format: "fp8", Element: host.ElementE5M2}
	row := hosttest.NewQuantizer(t, rowP, 0)
	col := hosttest.NewQuantizer(t, colP, 0)
	_, err := host.NewHybridQuantizer(row, row, host.SourceOriginal)
	require.ErrorContains(t, err, "different quantizer")

	orig, err := host.NewHybridQuantizer(row, col, host.SourceOriginal)
	require.NoError(t, err)
	defer orig.Release()
	qt, err := orig.Quantize(in, host.QuantizeOptions{})
	require.NoError(t, err)
	defer qt.Free()
	rs, _ := qt.Storage(host.DirRowwise)
	cs, _ := qt.Storage(host.DirColumnwise)
	require.Equal(t, host.E4M3, rs.MustBuffer(host.BufData).DType)
	require.Equal(t, host.E5M2, cs.MustBuffer(host.BufData).DType)
	require.Equal(t, fresh(t, colP, in, host.DirColumnwise), data(t, qt, host.DirColumnwise))

	// rowwise_dequantized: the columnwise side quantizes what rowwise dequantizes to.
	rd, err := host.NewHybridQuantizer(row, col, host.SourceRowwiseDequantized)
	require.NoError(t, err)
	defer rd.Release()
	require.NoError(t, rd.SetUsage(host.Columnwise)) // rowwise is still computed as the source
	qt2, err := rd.Quantize(in, host.QuantizeOptions{})
	require.NoError(t, err)
	defer qt2.Free()
	require.Equal(t, host.Columnwise, qt2.Usage())
	deq := hosttest.Tensor(t, host.BFloat16, 64, 32)
	require.NoError(t, qt.Dequantize(host.DirRowwise, deq, 0))
	require.Equal(t, fresh(t, colP, deq, host.DirColumnwise), data(t, qt2, host.DirColumnwise))
	require.NotEqual(t, fresh(t, colP, in, host.DirColumnwise), data(t, qt2, host.DirColumnwise), "the source matters for this input")

	// A hybrid tensor can drop but not derive (spec §7.4).
	require.NoError(t, qt.UpdateUsage(host.Rowwise, 0))
	err = qt.UpdateUsage(host.BothUsages, 0)
	require.ErrorIs(t, err, host.ErrState)
	require.ErrorContains(t, err, "hybrid")
}

func TestFromBuffersValidation(t *testing.T) {
	q := hosttest.NewQuantizer(t, host.Params{Format: "fp8"}, host.Rowwise)
	good := []host.Tensor{hosttest.Tensor(t, host.E4M3, 8, 8), hosttest.Tensor(t, host.Float32, 1), hosttest.Tensor(t, host.Float32, 1)}
	_, err := q.NewQTensorFromBuffers([]int64{8, 8}, good[:2])
	require.ErrorContains(t, err, "buffers: got 2")
	bad := append([]host.Tensor{hosttest.Tensor(t, host.E5M2, 8, 8)}, good[1:]...)
	_, err = q.NewQTensorFromBuffers([]int64{8, 8}, bad)
	require.ErrorContains(t, err, "buffers[0]")
	gpu := good[1]
	gpu.Device = host.Device{Type: host.CUDA}
	_, err = q.NewQTensorFromBuffers([]int64{8, 8}, []host.Tensor{good[0], gpu, good[2]})
	require.ErrorContains(t, err, "buffers[1]: on cuda:0")
	qt, err := q.NewQTensorFromBuffers([]int64{2, 4, 8}, good)
	require.NoError(t, err)
	require.Equal(t, []int64{2, 4, 8}, qt.Shape())
	qt.Free()
}

// fakeDevice is a device whose memory is the C heap and whose nvfp4 kernels
// are the CPU ones without DequantizeUntransformed, like a GPU plugin that has
// no undo-RHT kernel.
const fakeDevice host.DeviceType = 42

type cHeap struct{}

func (cHeap) Alloc(_ host.Device, n int64, _ uintptr) (unsafe.Pointer, error) { return cmem.Alloc(n) }
func (cHeap) Free(_ host.Device, p unsafe.Pointer, _ uintptr)                 { cmem.Free(p) }

type plainKernels struct{ host.Kernels }

func TestUndoTransformIsRefusedWhereKernelsCannotDoIt(t *testing.T) {
	cpuK, err := host.KernelsFor("nvfp4", host.Device{Type: host.CPU})
	require.NoError(t, err)
	host.RegisterAllocator(fakeDevice, cHeap{})
	host.RegisterKernels("nvfp4", fakeDevice, plainKernels{cpuK})
	dev := host.Device{Type: fakeDevice}

	in, _ := hosttest.Input(t, host.BFloat16, tu.Normal(32*32, 1, 9), 32, 32)
	in.Device = dev
	q := hosttest.NewQuantizer(t, host.Params{Format: "nvfp4", RHT: host.RHTDefault}, 0)
	qt, err := q.Quantize(in, host.QuantizeOptions{})
	require.NoError(t, err)
	defer qt.Free()
	out := hosttest.Tensor(t, host.Float32, 32, 32)
	out.Device = dev
	err = qt.DequantizeWith(host.DirColumnwise, out, host.DequantizeOptions{UndoTransform: true})
	require.ErrorIs(t, err, host.ErrUnsupported)
	require.ErrorContains(t, err, "undo_transform")
	// Rowwise data is never transformed, and plain dequantize still works.
	require.NoError(t, qt.DequantizeWith(host.DirRowwise, out, host.DequantizeOptions{UndoTransform: true}))
	require.NoError(t, qt.DequantizeWith(host.DirColumnwise, out, host.DequantizeOptions{}))
}
