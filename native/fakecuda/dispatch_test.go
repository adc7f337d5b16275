package fakecuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/require"

	"libquant/host"
	_ "libquant/host/cpumem"
	"libquant/host/hosttest"
	"libquant/internal/testutil"
	"libquant/native"
	_ "libquant/plugins/fp8"
	_ "libquant/plugins/mxfp8"
)

var loaded = struct {
	once sync.Once
	err  error
	so   string // the built plugin
}{}

// load builds fake_cuda.c and loads it, once per test binary; it skips when
// no C compiler is installed.
func load(tb testing.TB) {
	tb.Helper()
	loaded.once.Do(func() {
		cc := os.Getenv("CC")
		if cc == "" {
			cc = "cc"
		}
		if _, err := exec.LookPath(cc); err != nil {
			loaded.err = err
			return
		}
		so := filepath.Join(os.TempDir(), "libquant_fake_cuda_"+filepath.Base(tb.TempDir())+".so")
		out, err := exec.Command(cc, "-std=c99", "-O2", "-fPIC", "-shared", "-I../../include", "testdata/fake_cuda.c", "-o", so).CombinedOutput()
		if err != nil {
			loaded.err = &buildError{string(out)}
			return
		}
		loaded.so = so
		_, loaded.err = native.Load(so, native.Explicit)
	})
	if _, ok := loaded.err.(*buildError); ok || (loaded.err != nil && isNoCompiler(loaded.err)) {
		tb.Skipf("SKIP: cannot build the fake CUDA plugin: %v", loaded.err)
	}
	require.NoError(tb, loaded.err)
}

type buildError struct{ out string }

func (e *buildError) Error() string { return e.out }

func isNoCompiler(err error) bool { _, ok := err.(*exec.Error); return ok }

// setup makes a quantizer for p and a 128x256 BF16 "CUDA" input with a
// quantized tensor to re-quantize into (the shape of issue #15's host-time
// figure).
func setup(tb testing.TB, p host.Params) (*host.Quantizer, host.Tensor, *host.QTensor) {
	load(tb)
	q, err := host.NewQuantizer(p, host.BothUsages)
	require.NoError(tb, err)
	tb.Cleanup(q.Release)
	dev := host.Device{Type: host.CUDA}
	in, err := host.AllocTensor(dev, host.BFloat16, []int64{128, 256}, 0)
	require.NoError(tb, err)
	tb.Cleanup(func() { host.FreeTensor(in, 0) })
	qt, err := q.Quantize(in, host.QuantizeOptions{})
	require.NoError(tb, err)
	tb.Cleanup(qt.Free)
	return q, in, qt
}

var dispatchCases = []struct {
	name string
	p    host.Params
}{
	{"mxfp8", host.Params{Format: "mxfp8"}},
	{"fp8 current", host.Params{Format: "fp8"}},
	{"fp8 delayed", host.Params{Format: "fp8", Scaling: host.ScalingDelayed}},
}

// BenchmarkQuantizeDispatch is the host's share of a GPU quantize_into: the
// time from host.Quantizer.QuantizeInto to the plugin's quantize and back,
// with a plugin that launches nothing.
func BenchmarkQuantizeDispatch(b *testing.B) {
	for _, c := range dispatchCases {
		b.Run(c.name, func(b *testing.B) {
			q, in, qt := setup(b, c.p)
			opts := host.QuantizeOptions{Stream: 0}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := q.QuantizeInto(in, opts, qt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A re-quantize into an existing tensor allocates nothing on the Go side: no
// layout recomputed, no kernel looked up by name, no argument block calloc'd
// (issue #15). Delayed scaling is left out: its state update is the next step.
func TestQuantizeIntoAllocatesNothing(t *testing.T) {
	for _, c := range dispatchCases[:2] {
		t.Run(c.name, func(t *testing.T) {
			q, in, qt := setup(t, c.p)
			allocs := testing.AllocsPerRun(200, func() {
				if err := q.QuantizeInto(in, host.QuantizeOptions{}, qt); err != nil {
					t.Fatal(err)
				}
			})
			require.Zero(t, allocs, "Go allocations per QuantizeInto")
		})
	}
}

// The delayed-scaling state moves to the "device" at the first device
// quantize, is updated there, comes back on Fetch and on a CPU quantize, and
// follows the CPU state's sequence throughout (spec §2.3, §2.4). The fake
// plugin's amax and update are written after the same rules, so a difference
// is in the host's handling: a lost amax, an update on the wrong copy, a stale
// fetch.
func TestDelayedStateOnDeviceFollowsCPU(t *testing.T) {
	load(t)
	for _, algo := range []host.AmaxAlgo{host.AmaxMax, host.AmaxMostRecent} {
		p := host.Params{Format: "fp8", Scaling: host.ScalingDelayed, AmaxHistoryLen: 3, Margin: 1, AmaxAlgo: algo}
		qc, err := host.NewQuantizer(p, host.Rowwise)
		require.NoError(t, err)
		defer qc.Release()
		qg, err := host.NewQuantizer(p, host.Rowwise)
		require.NoError(t, err)
		defer qg.Release()
		cs, _ := qc.DelayedState(host.DirRowwise)
		gs, _ := qg.DelayedState(host.DirRowwise)
		dev := host.Device{Type: host.CUDA}
		for step := 0; step < 6; step++ {
			x := hosttest.Tensor(t, host.BFloat16, 4, 8)
			host.StoreFloat32(x, 0, testutil.Normal(32, float64(step+1), uint64(step)))
			gx, err := host.AllocTensor(dev, host.BFloat16, []int64{4, 8}, 0)
			require.NoError(t, err)
			require.NoError(t, host.CopyTensor(gx, x, 0))
			ct, err := qc.Quantize(x, host.QuantizeOptions{})
			require.NoError(t, err)
			ct.Free()
			src := gx
			if step == 3 {
				src = x // a CPU quantize brings the state back to C memory
			}
			gt, err := qg.Quantize(src, host.QuantizeOptions{})
			require.NoError(t, err)
			gt.Free()
			host.FreeTensor(gx, 0)
			var reduced *float32
			if step == 4 {
				r := float32(100)
				reduced = &r
			}
			require.NoError(t, cs.Update(reduced))
			require.NoError(t, gs.Update(reduced))
			require.NoError(t, gs.Fetch())
			require.Equal(t, cs.AmaxHistory().Float32s(), gs.AmaxHistory().Float32s(), "%v step %d history", algo, step)
			require.Equal(t, cs.Scale().Float32s(), gs.Scale().Float32s(), "%v step %d scale", algo, step)
		}
	}
}

// groupedUpdates returns a function that reads how many times the fake
// plugin's delayed_update_grouped has been called.
func groupedUpdates(t *testing.T) func() int32 {
	h, err := purego.Dlopen(loaded.so, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	require.NoError(t, err)
	var f func() int32
	purego.RegisterLibFunc(&f, h, "fake_grouped_updates")
	return f
}

// Delayed-scaling states on one device and stream update in one call of the
// plugin's delayed_update_grouped (a linear layer's forward: the input's and
// the weight's states), and follow the CPU states updated one by one (spec
// §2.4): histories of several lengths, both amax algorithms, margins 0 and
// 1, reduced amaxes (one of them zero) at one step.
func TestGroupedDelayedUpdateFollowsCPU(t *testing.T) {
	load(t)
	calls := groupedUpdates(t)
	dev := host.Device{Type: host.CUDA}
	type pair struct{ cq, gq *host.Quantizer }
	var ps []pair
	var cs, gs []host.DelayedScaling
	for i, hl := range []int{1, 3, 7, 3, 2} {
		p := host.Params{Format: "fp8", Scaling: host.ScalingDelayed, AmaxHistoryLen: int32(hl), Margin: float32(i % 2),
			AmaxAlgo: []host.AmaxAlgo{host.AmaxMax, host.AmaxMostRecent}[i%2]}
		var pr pair
		for _, q := range []**host.Quantizer{&pr.cq, &pr.gq} {
			var err error
			*q, err = host.NewQuantizer(p, host.Rowwise)
			require.NoError(t, err)
			t.Cleanup((*q).Release)
		}
		c, _ := pr.cq.DelayedState(host.DirRowwise)
		g, _ := pr.gq.DelayedState(host.DirRowwise)
		ps, cs, gs = append(ps, pr), append(cs, c), append(gs, g)
	}
	for step := 0; step < 5; step++ {
		for i, pr := range ps {
			x := hosttest.Tensor(t, host.BFloat16, 4, 8)
			host.StoreFloat32(x, 0, testutil.Normal(32, float64(step+i+1), uint64(10*step+i)))
			gx, err := host.AllocTensor(dev, host.BFloat16, []int64{4, 8}, 0)
			require.NoError(t, err)
			require.NoError(t, host.CopyTensor(gx, x, 0))
			for _, in := range []struct {
				q *host.Quantizer
				x host.Tensor
			}{{pr.cq, x}, {pr.gq, gx}} {
				qt, err := in.q.Quantize(in.x, host.QuantizeOptions{})
				require.NoError(t, err)
				qt.Free()
			}
			host.FreeTensor(gx, 0)
		}
		var reduced []*float32
		if step == 3 {
			for i := range ps {
				r := float32(50 * i) // reduced[0] = 0: the staged h[0] counts
				reduced = append(reduced, &r)
			}
		}
		before := calls()
		require.NoError(t, host.UpdateDelayed(gs, reduced))
		require.Equal(t, before+1, calls(), "step %d: one grouped call for the %d states", step, len(gs))
		for i, c := range cs {
			var r *float32
			if reduced != nil {
				r = reduced[i]
			}
			require.NoError(t, c.Update(r))
			require.NoError(t, gs[i].Fetch())
			require.Equal(t, c.AmaxHistory().Float32s(), gs[i].AmaxHistory().Float32s(), "step %d state %d history", step, i)
			require.Equal(t, c.Scale().Float32s(), gs[i].Scale().Float32s(), "step %d state %d scale", step, i)
		}
	}
	// A state twice is updated twice, in order, not grouped; a bad reduced
	// amax names its index.
	before := calls()
	require.NoError(t, host.UpdateDelayed([]host.DelayedScaling{gs[0], gs[0]}, nil))
	require.Equal(t, before, calls())
	bad := float32(-1)
	err := host.UpdateDelayed(gs[:2], []*float32{nil, &bad})
	require.ErrorContains(t, err, "reduced_amax[1]: -1 must be ≥ 0")
	require.ErrorContains(t, host.UpdateDelayed(gs[:2], []*float32{nil}), "reduced: 1 amaxes for 2 states")
}

// gemmOperands makes a [16, 256] "CUDA" X, a [512, 256] W and a [16, 512] BF16
// D for Y = X·Wᵀ (decode-sized, the shape of issue #11's host-time figure
// but for the sizes, which the host does not look at), dense or quantized
// with p (both directions).
func gemmOperands(tb testing.TB, p *host.Params) (a, b host.GemmOperand, d host.Tensor) {
	load(tb)
	dev := host.Device{Type: host.CUDA}
	alloc := func(shape ...int64) host.Tensor {
		t, err := host.AllocTensor(dev, host.BFloat16, shape, 0)
		require.NoError(tb, err)
		tb.Cleanup(func() { host.FreeTensor(t, 0) })
		return t
	}
	x, w := alloc(16, 256), alloc(512, 256)
	d = alloc(16, 512)
	if p == nil {
		return host.GemmOperand{Dense: &x}, host.GemmOperand{Dense: &w, Trans: true}, d
	}
	q, err := host.NewQuantizer(*p, host.BothUsages)
	require.NoError(tb, err)
	tb.Cleanup(q.Release)
	quant := func(t host.Tensor) *host.QTensor {
		qt, err := q.Quantize(t, host.QuantizeOptions{})
		require.NoError(tb, err)
		tb.Cleanup(qt.Free)
		return qt
	}
	return host.GemmOperand{Q: quant(x)}, host.GemmOperand{Q: quant(w), Trans: true}, d
}

// BenchmarkGemmDispatch is the host's share of a GPU quant_gemm: the time
// from host.Gemm to the plugin's GEMM entry and back, with a plugin that
// launches nothing (the CUDA plugin's own argument handling and cuBLASLt's
// enqueue come on top).
func BenchmarkGemmDispatch(b *testing.B) {
	for _, c := range []struct {
		name string
		p    *host.Params
	}{{"bf16", nil}, {"mxfp8", &host.Params{Format: "mxfp8"}}, {"fp8", &host.Params{Format: "fp8"}}} {
		b.Run(c.name, func(b *testing.B) {
			x, w, d := gemmOperands(b, c.p)
			args := &host.GemmArgs{A: x, B: w, Alpha: 1, D: d}
			require.NoError(b, host.Gemm(args))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := host.Gemm(args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The GEMM dispatch reaches the plugin's entry with the arguments it checks
// (both operands' buffers, a CUDA D) for dense and quantized operands, and the
// support table answers from the plugin.
func TestGemmDispatchReachesPlugin(t *testing.T) {
	for _, p := range []*host.Params{nil, {Format: "mxfp8"}, {Format: "fp8"}} {
		x, w, d := gemmOperands(t, p)
		require.NoError(t, host.Gemm(&host.GemmArgs{A: x, B: w, Alpha: 1, D: d}))
	}
	table, err := host.GemmSupportTable(host.Device{Type: host.CUDA})
	require.NoError(t, err)
	found := false
	for _, e := range table {
		if e.A == "mxfp8" && e.B == "mxfp8" {
			found = true
			require.Equal(t, host.GemmNative, e.Level)
			require.Contains(t, e.Reason, "fake_cuda")
		}
	}
	require.True(t, found, "the cuda table has mxfp8 × mxfp8")
}
