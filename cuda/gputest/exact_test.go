// Package gputest checks that the CUDA plugin (build/libquant_cuda.so) writes
// the same bytes as the CPU kernels for every registered format, direction and
// option, on random, adversarial and all-bit-pattern inputs and odd shapes.
// It runs on a GPU machine (go test -c here, the binary there) and skips,
// saying why, where there is no plugin or no CUDA device (CI).
package gputest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"libquant/host"
	"libquant/host/hosttest"
	"libquant/internal/numeric"
	"libquant/internal/testutil"
	"libquant/native"
	_ "libquant/plugins/fp8"
	_ "libquant/plugins/mxfp8"
	_ "libquant/plugins/nvfp4"
)

var cpu = host.Device{Type: host.CPU}
var gpu = host.Device{Type: host.CUDA, ID: 0}

var setup = struct {
	once sync.Once
	skip string
	err  error
}{}

// pluginPath is LIBQUANT_CUDA_PLUGIN, or build/libquant_cuda.so found from the
// working directory upwards.
func pluginPath() string {
	if p := os.Getenv("LIBQUANT_CUDA_PLUGIN"); p != "" {
		return p
	}
	dir, _ := os.Getwd()
	for i := 0; i < 4 && dir != ""; i++ {
		p := filepath.Join(dir, "build", "libquant_cuda.so")
		if _, err := os.Stat(p); err == nil {
			return p
		}
		dir = filepath.Dir(dir)
	}
	return ""
}

// needGPU loads the plugin once and skips the test, saying why, when there is
// no plugin file or no CUDA device. A plugin file that exists but fails to load
// is a failure.
func needGPU(t *testing.T) {
	t.Helper()
	setup.once.Do(func() {
		p := pluginPath()
		if p == "" {
			setup.skip = "SKIP: no libquant_cuda.so (build it with `make cuda` where nvcc is, or set LIBQUANT_CUDA_PLUGIN)"
			return
		}
		if _, err := native.Load(p, native.Explicit); err != nil {
			setup.err = err
			return
		}
		n, err := host.DeviceCount(host.CUDA)
		if err != nil {
			setup.err = err
			return
		}
		if n == 0 {
			setup.skip = "SKIP: libquant_cuda.so loaded, but there is no CUDA device"
		}
	})
	if setup.err != nil {
		t.Fatalf("loading the CUDA plugin: %v", setup.err)
	}
	if setup.skip != "" {
		t.Skip(setup.skip)
	}
	runtime.LockOSThread() // CUDA's current device is per thread
	t.Cleanup(runtime.UnlockOSThread)
}

func gpuTensor(t *testing.T, dt host.DType, shape []int64) host.Tensor {
	t.Helper()
	x, err := host.AllocTensor(gpu, dt, shape, 0)
	require.NoError(t, err)
	t.Cleanup(func() { host.FreeTensor(x, 0) })
	return x
}

func toGPU(t *testing.T, c host.Tensor) host.Tensor {
	t.Helper()
	g := gpuTensor(t, c.DType, c.Shape)
	require.NoError(t, host.CopyTensor(g, c, 0))
	return g
}

func toCPU(t *testing.T, g host.Tensor) host.Tensor {
	t.Helper()
	c := hosttest.Tensor(t, g.DType, g.Shape...)
	require.NoError(t, host.CopyTensor(c, g, 0))
	require.NoError(t, host.Synchronize(gpu, 0))
	return c
}

// poisoned allocates a GPU tensor filled with the byte p, so that bytes a
// kernel fails to write show up as differences.
func poisoned(t *testing.T, dt host.DType, shape []int64, p byte) host.Tensor {
	t.Helper()
	g := gpuTensor(t, dt, shape)
	require.NoError(t, host.MemsetTensor(g, p, 0))
	return g
}

// requireSameBytes compares the CPU's bytes (want) with the GPU's (got)
// byte for byte, naming the first differences.
func requireSameBytes(t *testing.T, what string, want, got []byte) {
	t.Helper()
	requireSameBytesAs(t, what, "cpu", "gpu", want, got)
}

// requireSameBytesAs is requireSameBytes for two sides named wantName and
// gotName.
func requireSameBytesAs(t *testing.T, what, wantName, gotName string, want, got []byte) {
	t.Helper()
	require.Equal(t, len(want), len(got), "%s: sizes", what)
	var diffs []string
	n := 0
	for i := range want {
		if want[i] != got[i] {
			n++
			if len(diffs) < 8 {
				diffs = append(diffs, fmt.Sprintf("[%d] %s %#02x %s %#02x", i, wantName, want[i], gotName, got[i]))
			}
		}
	}
	if n > 0 {
		t.Fatalf("%s: %d of %d bytes differ: %s", what, n, len(want), strings.Join(diffs, ", "))
	}
}

// requireSameValues compares dequantized outputs: equal bits, or both NaN (a
// NaN's payload is the hardware's: GPUs produce the canonical NaN).
func requireSameValues(t *testing.T, what string, want, got host.Tensor) {
	t.Helper()
	n := int(want.NumElements())
	bad := 0
	var diffs []string
	for i := 0; i < n; i++ {
		var a, b float64
		var same bool
		switch want.DType {
		case host.Float32:
			x, y := want.Float32s()[i], got.Float32s()[i]
			a, b = float64(x), float64(y)
			same = math.Float32bits(x) == math.Float32bits(y) || (x != x && y != y)
		default:
			x, y := want.Uint16s()[i], got.Uint16s()[i]
			fx, fy := numeric.BF16ToFloat32(x), numeric.BF16ToFloat32(y)
			if want.DType == host.Float16 {
				fx, fy = numeric.FP16ToFloat32(x), numeric.FP16ToFloat32(y)
			}
			a, b = float64(fx), float64(fy)
			same = x == y || (fx != fx && fy != fy)
		}
		if !same {
			bad++
			if len(diffs) < 8 {
				diffs = append(diffs, fmt.Sprintf("[%d] cpu %g gpu %g", i, a, b))
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d values differ: %s", what, bad, n, strings.Join(diffs, ", "))
	}
}

// input makes a CPU input of one of the value kinds.
func input(t *testing.T, dt host.DType, kind string, m, k int64, seed uint64) host.Tensor {
	t.Helper()
	n := int(m * k)
	switch kind {
	case "normal":
		x, _ := hosttest.Input(t, dt, testutil.Normal(n, 1.5, seed), m, k)
		return x
	case "wide":
		// Magnitudes over 2^-30..2^30 with blocks of very different scale.
		r := rand.New(rand.NewPCG(seed, 3))
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(60)-30)))
		}
		x, _ := hosttest.Input(t, dt, v, m, k)
		return x
	case "adversarial":
		x, _ := hosttest.Input(t, dt, testutil.Adversarial(n, seed), m, k)
		return x
	case "finite-adversarial":
		v := testutil.Adversarial(n, seed)
		for i, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				v[i] = 0
			}
		}
		x, _ := hosttest.Input(t, dt, v, m, k)
		return x
	case "bits":
		// Every 16-bit pattern in turn (bf16/fp16), or random float32 bits.
		x := hosttest.Tensor(t, dt, m, k)
		r := rand.New(rand.NewPCG(seed, 5))
		if dt == host.Float32 {
			for i := range x.Float32s() {
				x.Float32s()[i] = math.Float32frombits(r.Uint32())
			}
		} else {
			off := r.IntN(65536)
			for i := range x.Uint16s() {
				x.Uint16s()[i] = uint16(i + off)
			}
		}
		return x
	case "last-max":
		// The largest magnitude of every row and of every column sits at the
		// last valid position (column K-1, row M-1), so that a partial
		// block's scale comes from the element next to the padding.
		v := testutil.Normal(n, 1, seed)
		for i := range v {
			r, c := int64(i)/k, int64(i)%k
			if c == k-1 || r == m-1 {
				v[i] = v[i]*64 + float32(math.Copysign(100, float64(v[i])))
			}
		}
		x, _ := hosttest.Input(t, dt, v, m, k)
		return x
	case "zeros-and-ones":
		v := make([]float32, n)
		for i := range v {
			if (i/64)%3 == 1 {
				v[i] = float32(i%7) - 3
			}
		}
		x, _ := hosttest.Input(t, dt, v, m, k)
		return x
	}
	t.Fatalf("input kind %q", kind)
	return host.Tensor{}
}

// storageBytes copies every buffer of a direction back to the CPU.
func storageBytes(t *testing.T, qt *host.QTensor, d host.Direction) map[host.BufferKind][]byte {
	t.Helper()
	st, ok := qt.Storage(d)
	if !ok {
		return nil
	}
	out := map[host.BufferKind][]byte{}
	for _, b := range st.Buffers {
		if b.Tensor.Device.Type == host.CPU {
			out[b.Kind] = append([]byte(nil), b.Tensor.Bytes8()...)
		} else {
			out[b.Kind] = append([]byte(nil), toCPU(t, b.Tensor).Bytes8()...)
		}
	}
	return out
}

func compareTensors(t *testing.T, what string, cq, gq *host.QTensor) {
	t.Helper()
	require.Equal(t, cq.Usage(), gq.Usage(), "%s: usage", what)
	for _, d := range []host.Direction{host.DirRowwise, host.DirColumnwise} {
		want, got := storageBytes(t, cq, d), storageBytes(t, gq, d)
		require.Equal(t, len(want), len(got), "%s %s: buffers", what, d)
		for kind, w := range want {
			requireSameBytes(t, fmt.Sprintf("%s %s %s", what, d, kind), w, got[kind])
		}
	}
}

// quantizeBoth quantizes x on the CPU with qc and on the GPU with qg into
// caller-owned buffers poisoned with p, and returns both tensors.
func quantizeBoth(t *testing.T, qc, qg *host.Quantizer, x host.Tensor, p byte, amax []float32) (*host.QTensor, *host.QTensor) {
	t.Helper()
	var copt, gopt host.QuantizeOptions
	if amax != nil {
		a := hosttest.Tensor(t, host.Float32, 2)
		copy(a.Float32s(), amax)
		ga := toGPU(t, a)
		copt.AmaxIn, gopt.AmaxIn = &a, &ga
	}
	cq, err := qc.Quantize(x, copt)
	require.NoError(t, err)
	t.Cleanup(cq.Free)
	gq := poisonedQTensor(t, qg, x.Shape, p)
	require.NoError(t, qg.QuantizeInto(toGPU(t, x), gopt, gq))
	require.NoError(t, host.Synchronize(gpu, 0))
	return cq, gq
}

// quantizerPair makes two quantizers of p for usage, one for each side of a
// CPU = GPU comparison (released when the test ends).
func quantizerPair(t *testing.T, p host.Params, usage host.Usage) (qc, qg *host.Quantizer) {
	t.Helper()
	qc, err := host.NewQuantizer(p, usage)
	require.NoError(t, err)
	t.Cleanup(qc.Release)
	qg, err = host.NewQuantizer(p, usage)
	require.NoError(t, err)
	t.Cleanup(qg.Release)
	return qc, qg
}

// cpuReferences: for each shape an input of kind kinds[i % len(kinds)] (seed
// i), its copy on the GPU and the CPU quantizer's QTensor of it (freed at the
// test's end): the inputs and expected bytes of the grouped tests.
func cpuReferences(t *testing.T, qc *host.Quantizer, dt host.DType, kinds []string, shapes [][2]int64) ([]host.Tensor, []*host.QTensor) {
	t.Helper()
	ins := make([]host.Tensor, len(shapes))
	cqs := make([]*host.QTensor, len(shapes))
	for i, sh := range shapes {
		x := input(t, dt, kinds[i%len(kinds)], sh[0], sh[1], uint64(i))
		cq, err := qc.Quantize(x, host.QuantizeOptions{})
		require.NoError(t, err)
		t.Cleanup(cq.Free)
		cqs[i] = cq
		ins[i] = toGPU(t, x)
	}
	return ins, cqs
}

// poisonedQTensor is a GPU tensor of q's layout for shape in caller-owned
// buffers filled with p (freed when the test ends), to quantize into.
func poisonedQTensor(t *testing.T, q *host.Quantizer, shape []int64, p byte) *host.QTensor {
	t.Helper()
	layout, err := q.Layout(shape)
	require.NoError(t, err)
	bufs := make([]host.Tensor, len(layout))
	for i, l := range layout {
		bufs[i] = poisoned(t, l.DType, l.Shape, p)
	}
	qt, err := q.NewQTensorFromBuffers(shape, bufs)
	require.NoError(t, err)
	t.Cleanup(qt.Free)
	return qt
}

// dequantizeBoth compares every direction's dequantized values in FP32 and BF16.
func dequantizeBoth(t *testing.T, what string, cq, gq *host.QTensor) {
	t.Helper()
	m, k := cq.Dims2D()
	for _, d := range []host.Direction{host.DirRowwise, host.DirColumnwise} {
		if !cq.Usage().Has(d.Usage()) {
			continue
		}
		for _, dt := range []host.DType{host.Float32, host.BFloat16} {
			want := hosttest.Tensor(t, dt, m, k)
			require.NoError(t, cq.Dequantize(d, want, 0))
			g := poisoned(t, dt, []int64{m, k}, 0xC3)
			require.NoError(t, gq.Dequantize(d, g, 0))
			requireSameValues(t, fmt.Sprintf("%s dequantize %s to %s", what, d, dt), want, toCPU(t, g))
		}
	}
}

type config struct {
	name string
	p    host.Params
}

// shapes per format: aligned ones, and (every format takes any shape, spec
// §14) ragged ones: for MX and NVFP4 the dims of issue #18 as M and as K.
// [259, 389] gives fp8 and fp8_block interior 128×128 tiles of a ragged
// tensor (their unchecked path) at every row offset mod 8 and every 16-bit
// input offset mod 16. fp8's M ≥ 256 that are not multiples of 16, with
// 16-byte aligned input rows, take the strip kernel (cast_strip_kernel):
// [257, 1000] and [2049, 1000] (several segments per strip, a partial last
// strip and chunk), [1031, 2052] in fp32 (rowwise codes at K ≡ 4 mod 8).
// fp8_block with a columnwise direction takes its strip kernel
// (fp8_block_strip_kernel: 1x128 and 128x128, columnwise and both) at
// [257, 1000] (a partial last strip), [1031, 2048], [2049, 1024] (several
// segments per strip), and in fp32 at [1031, 2052] (a last column group of
// 4, rowwise codes at K ≡ 4 mod 8). Both strip kernels take 16-bit rows at
// an odd K staged through shared memory (common.cuh: StripStager) at M ≥
// 256: [257, 1001] (a partial last strip, rows at every offset mod 16, the
// tensor's last granule past its end), [2049, 1001] (several segments per
// strip), [1024, 777] (M a multiple of 32: aligned transposed rows), [1040,
// 777] (M ≡ 16 mod 32: transposed rows at offsets 0 and 16 of their 32-byte
// sectors), [1031, 33] (one strip, narrower than kSW); fp32 rows there keep
// the tile kernel. fp8_block 1x128 rowwise alone takes the flat rows kernel
// (fp8_block_rows_kernel) at an odd K and below 128 rows: [1, 1], [3, 5],
// [17, 130] (aligned or not, a decode step's shapes), [257, 1001].
// mxfp8 of aligned 16-bit rows takes mx8_tile_kernel for one direction
// (tiles of 32 × 512) from 32 rows: [1024, 1024] whole tiles, [32, 32] ...
// [160, 544] tiles with chunks past K; [64, 40] and [96, 1000] (K % 8 == 0,
// K % 32 != 0) its columnwise direction with a last column chunk inside K
// and the rowwise direction on mx_quantize_kernel; [1000, 1536] (and
// raggedShapes' [45, 4096]) a last tile row with rows past M (8 of its 32
// inside [1000, 1536]), which load as zeros and store nothing (its RAGM
// instance). Below 32 rows ([1, 256], [16, 1024], [8, 4096]: decode steps)
// mx_fast_kernel's ragged instance.
// mxfp8 rowwise alone at an odd K takes the flat rows kernel
// (mx8_rows_kernel): [3, 8191] cuts each row into segments of one step (512
// elements), [300, 1001] walks rows of two steps at every offset mod 16.
// mxfp4 rowwise alone at an odd K takes mx4_rows_kernel: [3, 8191] (rows of
// 4096 bytes, each code word whole; segments of one step), [300, 1001] (rows
// of 501 bytes at every offset mod 8 into a code word, and every input
// offset mod 16), [5, 4097] (words shared by two segments of a row).
// nvfp4 rowwise alone at an odd K takes nv4_rows_kernel (1×16) and
// nv4_band16_kernel (16×16), above the 65536 elements a quantize reduces
// its amax in one launch (nv_self_amax): [40, 8191] (code words whole,
// segments of one step, a last 16-row group of 8 rows), [33, 4097] (words
// shared by two segments, a last group of one row), [300, 1001] (rows at
// every offset); [8200, 9] has more 16-row groups than the 16×16 kernel's
// resident CTAs on any GPU of up to 256 SMs, and keeps the fast kernel's
// EDGE instance.
var shapes = map[string][][2]int64{
	"fp8": {{1, 1}, {3, 5}, {17, 33}, {128, 64}, {130, 70}, {257, 1000}, {1024, 768}, {259, 389}, {1031, 2052}, {2049, 1000},
		{257, 1001}, {2049, 1001}, {1024, 777}, {1040, 777}, {1031, 33}},
	"mxfp8": append([][2]int64{{32, 32}, {64, 96}, {96, 288}, {160, 544}, {1024, 1024}, {3, 8191}, {300, 1001}, {64, 40}, {96, 1000}, {1000, 1536}, {16, 1024}, {8, 4096}}, raggedShapes...),
	"mxfp4": append([][2]int64{{32, 32}, {64, 96}, {96, 288}, {160, 544}, {1024, 1024}, {3, 8191}, {300, 1001}, {5, 4097}}, raggedShapes...),
	"nvfp4": append([][2]int64{{16, 16}, {48, 80}, {80, 144}, {144, 272}, {1040, 1024}, {40, 8191}, {33, 4097}, {300, 1001}, {8200, 9}}, raggedShapes...),
	"fp8_block": {{1, 1}, {3, 5}, {17, 130}, {128, 128}, {130, 270}, {257, 1000}, {1024, 768}, {259, 389}, {1031, 2048}, {2049, 1024}, {1031, 2052},
		{257, 1001}, {2049, 1001}, {1024, 777}, {1040, 777}, {1031, 33}},
	"identity": {{1, 1}, {3, 5}, {17, 130}, {257, 1000}},
}

// raggedShapes: every M and every K of issue #18's set {1, 2, 15, 16, 17, 31,
// 33, 47, 100, 129} against a ragged other dim, pairs of them, a decode
// token [1, 256], an MoE expert's [45, 4096] and a large odd [1031, 2057]
// (several GPU tiles with partial edges). The GPU must write the CPU's bytes:
// the layouts of plugins/mxfp8/ragged.go and plugins/nvfp4/ragged.go.
var raggedShapes = func() [][2]int64 {
	var out [][2]int64
	for _, d := range []int64{1, 2, 15, 16, 17, 31, 33, 47, 100, 129} {
		out = append(out, [2]int64{d, 33}, [2]int64{17, d})
	}
	return append(out, [2]int64{47, 100}, [2]int64{129, 129}, [2]int64{1, 256}, [2]int64{45, 4096}, [2]int64{1031, 2057})
}()

func configs() map[string][]config {
	return map[string][]config{
		"fp8": {
			{"e4m3", host.Params{}},
			{"e5m2", host.Params{Element: host.ElementE5M2}},
			{"e4m3 pow2 eps", host.Params{ForcePow2Scales: true, AmaxEpsilon: 1e-3}},
		},
		"mxfp8": {
			{"e4m3", host.Params{}},
			{"e5m2", host.Params{Element: host.ElementE5M2}},
			{"e4m3 floor", host.Params{ScaleRounding: host.ScaleFLOOR}},
			{"e4m3 swizzled", host.Params{GEMMSwizzledScales: true}},
		},
		"mxfp4": {
			{"rceil", host.Params{}},
			{"floor swizzled", host.Params{ScaleRounding: host.ScaleFLOOR, GEMMSwizzledScales: true}},
		},
		"nvfp4": {
			{"1d", host.Params{}},
			{"1d swizzled", host.Params{GEMMSwizzledScales: true}},
			{"1d rht", host.Params{RHT: host.RHTDefault}},
			{"1d rht mask", host.Params{RHT: host.RHTCustomMask, RHTSignMask: 0x1234}},
			{"1d sr", host.Params{StochasticRounding: true, Seed: 0x1234567890ABCDEF, Offset: 77}},
			{"1d rht sr", host.Params{RHT: host.RHTDefault, StochasticRounding: true, Seed: 5, Offset: 1 << 40}},
			{"2d", host.Params{BlockDims: 2}},
			{"2d sr", host.Params{BlockDims: 2, StochasticRounding: true, Seed: 9}},
		},
		"identity": { // held dtype named: a caller buffer needs the layout (linear_test runs the input's dtype)
			{"held bf16", host.Params{HoldDType: host.BFloat16}},
			{"held fp16", host.Params{HoldDType: host.Float16}},
			{"held fp32", host.Params{HoldDType: host.Float32}},
		},
		"fp8_block": {
			{"1x128", host.Params{}},
			{"128x128", host.Params{BlockDims: 2}},
			{"1x128 fp32 scales", host.Params{FP32Scales: true}},
			{"128x128 fp32 scales eps", host.Params{BlockDims: 2, FP32Scales: true, AmaxEpsilon: 1e-2}},
		},
	}
}

var kinds = []string{"normal", "wide", "adversarial", "bits", "zeros-and-ones"}

// servedConfigs: configs() of the formats that are registered and that the
// CUDA plugin serves; the others are logged as skipped.
func servedConfigs(t *testing.T) map[string][]config {
	registered, served := map[string]bool{}, map[string]bool{}
	for _, n := range host.FormatNames() {
		registered[n] = true
	}
	for _, p := range native.Plugins() {
		for _, k := range p.Kernels {
			if k.Device == host.CUDA {
				served[k.Format] = true
			}
		}
	}
	out := map[string][]config{}
	for format, cfgs := range configs() {
		if !registered[format] || !served[format] {
			t.Logf("SKIP %s: registered=%v, served by the CUDA plugin=%v", format, registered[format], served[format])
			continue
		}
		out[format] = cfgs
	}
	return out
}

// TestQuantizeMatchesCPU: every registered format the plugin serves, every
// config, usage, input dtype, value kind and shape.
func TestQuantizeMatchesCPU(t *testing.T) {
	needGPU(t)
	for format, cfgs := range servedConfigs(t) {
		for _, c := range cfgs {
			for _, usage := range []host.Usage{host.BothUsages, host.Rowwise, host.Columnwise} {
				for _, dt := range []host.DType{host.BFloat16, host.Float16, host.Float32} {
					if c.p.RHT != host.RHTOff && dt != host.BFloat16 {
						continue // the RHT takes BF16 only (spec §5.5)
					}
					name := fmt.Sprintf("%s/%s/%s/%s", format, c.name, usage, dt)
					t.Run(name, func(t *testing.T) {
						p := c.p
						p.Format = format
						qc, qg := quantizerPair(t, p, usage)
						for si, sh := range shapes[format] {
							for ki, kind := range kinds {
								seed := uint64(si*100 + ki)
								x := input(t, dt, kind, sh[0], sh[1], seed)
								what := fmt.Sprintf("%v %s", sh, kind)
								cq, gq := quantizeBoth(t, qc, qg, x, byte(0xA5+si), nil)
								compareTensors(t, what, cq, gq)
								if si < 3 || kind == "normal" {
									dequantizeBoth(t, what, cq, gq)
								}
							}
						}
					})
				}
			}
		}
	}
}

// TestOffsetInputMatchesCPU: every format's first config from an input that
// starts 1, 4 or 8 elements into its allocation (a contiguous view at an
// offset, as torch's x.view(-1)[o:].view(m, k) gives), so that its rows are
// not 16-byte aligned whatever K is: the kernels' paths for inputs that
// vector loads cannot reach (row_load_mode's kRowsScalar): 16-bit input 2
// or 8 bytes past a 16-byte boundary, fp32 4 bytes past one; and 16 bytes
// past (aligned again, but not to 32 bytes, which the mxfp4 fast kernel's
// staged rows start on). Shapes above fp8's one-CTA size (65536 elements),
// with an even and an odd K.
func TestOffsetInputMatchesCPU(t *testing.T) {
	needGPU(t)
	for format, cfgs := range servedConfigs(t) {
		c := cfgs[0]
		for _, usage := range []host.Usage{host.BothUsages, host.Rowwise, host.Columnwise} {
			for _, dt := range []host.DType{host.BFloat16, host.Float16, host.Float32} {
				for _, off := range []int64{1, 4, 8} {
					t.Run(fmt.Sprintf("%s/%s/%s/%s/+%d", format, c.name, usage, dt, off), func(t *testing.T) {
						p := c.p
						p.Format = format
						qc, qg := quantizerPair(t, p, usage)
						for si, sh := range [][2]int64{{259, 389}, {300, 1024}, {2049, 1001}} {
							x := input(t, dt, "normal", sh[0], sh[1], uint64(si))
							whole := gpuTensor(t, dt, []int64{sh[0]*sh[1] + off})
							view := host.Tensor{Ptr: unsafe.Add(whole.Ptr, off*dt.Size()), DType: dt, Shape: []int64{sh[0], sh[1]}, Device: gpu}
							require.NoError(t, host.CopyTensor(view, x, 0))
							cq, err := qc.Quantize(x, host.QuantizeOptions{})
							require.NoError(t, err)
							t.Cleanup(cq.Free)
							gq := poisonedQTensor(t, qg, x.Shape, byte(0x5A+si))
							require.NoError(t, qg.QuantizeInto(view, host.QuantizeOptions{}, gq))
							require.NoError(t, host.Synchronize(gpu, 0))
							compareTensors(t, fmt.Sprint(sh), cq, gq)
						}
					})
				}
			}
		}
	}
}

// TestQuantizeGroupedRHTOffsetInputsMatchCPU: the grouped NVFP4 quantize with the
// RHT on a columnwise copy takes each tensor's amax pass in the instance that
// tensor needs (nv_group_rht_kernel): column pairs of an even K, of an odd K,
// and single columns where the input is not 4-byte aligned (an input at an
// odd element offset), mixed in one group; the bytes equal the CPU's.
func TestQuantizeGroupedRHTOffsetInputsMatchCPU(t *testing.T) {
	needGPU(t)
	type item struct {
		m, k, off int64
	}
	items := []item{{259, 389, 1}, {300, 1024, 0}, {33, 17, 0}, {64, 512, 1}, {256, 7168, 0}, {1, 6, 1}}
	for _, usage := range []host.Usage{host.BothUsages, host.Columnwise} {
		t.Run(usage.String(), func(t *testing.T) {
			qc, qg := quantizerPair(t, host.Params{Format: "nvfp4", RHT: host.RHTDefault}, usage)
			views := make([]host.Tensor, len(items))
			cqs := make([]*host.QTensor, len(items))
			gqs := make([]*host.QTensor, len(items))
			for i, it := range items {
				x := input(t, host.BFloat16, []string{"normal", "adversarial", "wide"}[i%3], it.m, it.k, uint64(i))
				whole := gpuTensor(t, host.BFloat16, []int64{it.m*it.k + it.off})
				views[i] = host.Tensor{Ptr: unsafe.Add(whole.Ptr, it.off*2), DType: host.BFloat16, Shape: []int64{it.m, it.k}, Device: gpu}
				require.NoError(t, host.CopyTensor(views[i], x, 0))
				cq, err := qc.Quantize(x, host.QuantizeOptions{})
				require.NoError(t, err)
				t.Cleanup(cq.Free)
				cqs[i] = cq
				gqs[i] = poisonedQTensor(t, qg, x.Shape, byte(0x5A+i))
			}
			require.NoError(t, qg.QuantizeGrouped(views, gqs, host.QuantizeOptions{}))
			require.NoError(t, host.Synchronize(gpu, 0))
			for i, it := range items {
				compareTensors(t, fmt.Sprintf("[%d, %d] at +%d", it.m, it.k, it.off), cqs[i], gqs[i])
			}
		})
	}
}

// edgeShapes: partial blocks at sizes that cross the CUDA kernels' 64×128
// sub-tiles and strips, with rows at every 16-byte offset (K odd: the
// kernels' EDGE instances and shifted loads) and an M that leaves a partial
// 16-row and 32-row group in the last strip. The last five: the mxfp8
// kernel's interior tiles of a ragged tensor (whole 32×256 tiles, checked
// only at the last tile row and column) with K ≡ 2, 4, 6 (mod 8) and K odd
// with whole 32-row tiles, where the last tile row's rows end 1 and 7
// elements past a tile (519 = 2·256 + 7, 513: the 33rd chunk of the last
// row lies past the tensor's end there, so those tiles are not interior).
var edgeShapes = [][2]int64{{257, 1001}, {130, 1537}, {65, 2049}, {33, 100}, {40, 778}, {64, 524}, {96, 1030}, {64, 519}, {64, 513}}

// stripShapes: K odd and enough 64×128 sub-tiles that the mxfp4 and nvfp4
// fast kernels run strips of 4 ([600, 11265]) and 2 ([520, 8191]) sub-tiles,
// whose strips copy the next sub-tile into shared memory while they process
// the current one (mxfp4: every strip of a columnwise-only quantize, the
// interior strips of one with both directions; the first shapes all run
// strips of one); the last strip row and column are not interior, and their
// last rows' staged chunks end at the tensor's last element.
var stripShapes = [][2]int64{{600, 11265}, {520, 8191}}

// eachBlockConfig runs f as subtest "format/config/usage/dtype" with a
// quantizer of that config and usage, for every registered format of
// formats, every config of configs(), usage and dtype that keep accepts.
func eachBlockConfig(t *testing.T, formats []string, usages []host.Usage, dts []host.DType,
	keep func(format string, c config, usage host.Usage, dt host.DType) bool,
	f func(t *testing.T, format string, dt host.DType, q *host.Quantizer)) {
	all := configs()
	for _, format := range formats {
		if _, err := host.LookupFormat(format); err != nil {
			t.Logf("SKIP %s: not registered", format)
			continue
		}
		for _, c := range all[format] {
			for _, usage := range usages {
				for _, dt := range dts {
					if !keep(format, c, usage, dt) {
						continue
					}
					t.Run(fmt.Sprintf("%s/%s/%s/%s", format, c.name, usage, dt), func(t *testing.T) {
						p := c.p
						p.Format = format
						q, err := host.NewQuantizer(p, usage)
						require.NoError(t, err)
						defer q.Release()
						f(t, format, dt, q)
					})
				}
			}
		}
	}
}

// TestRaggedShapesMatchCPU: GPU bytes = CPU bytes where the largest magnitude
// of each row and column sits at the last valid element, next to the padding
// (issue #18), for every MX and NVFP4 config, usage and input dtype.
func TestRaggedShapesMatchCPU(t *testing.T) {
	needGPU(t)
	eachBlockConfig(t, []string{"mxfp8", "mxfp4", "nvfp4"}, []host.Usage{host.BothUsages, host.Rowwise, host.Columnwise},
		[]host.DType{host.BFloat16, host.Float16, host.Float32},
		func(_ string, c config, _ host.Usage, dt host.DType) bool {
			return c.p.RHT == host.RHTOff || dt == host.BFloat16
		},
		func(t *testing.T, format string, dt host.DType, q *host.Quantizer) {
			shs := append(append([][2]int64(nil), raggedShapes...), edgeShapes...)
			if format != "mxfp8" && dt != host.Float32 { // the fast kernels' input
				shs = append(shs, stripShapes...)
			}
			for si, sh := range shs {
				for ki, kind := range []string{"last-max"} {
					x := input(t, dt, kind, sh[0], sh[1], uint64(1000+si*10+ki))
					what := fmt.Sprintf("%v %s", sh, kind)
					cq, gq := quantizeBoth(t, q, q, x, byte(0x5A+si), nil)
					compareTensors(t, what, cq, gq)
					if si%4 == 0 {
						dequantizeBoth(t, what, cq, gq)
					}
				}
			}
		})
}

// alignedStripShapes: whole 32-element blocks (the fast kernels' aligned
// instance) over enough 64×128 sub-tiles that the MX and NVFP4 fast
// kernels run strips of 4 ([4128, 2144]) and 2 ([2080, 2304]) sub-tiles,
// whose aligned instances copy the next sub-tile into shared memory
// (cp.async, two buffers) while they process the current one; each last
// strip holds one sub-tile of 32 rows, and [4128, 2144]'s last column of
// sub-tiles 96 columns. Rowwise only, the strips lie across the columns
// (kHoriz) and the compact scales of a row leave as one store: of 3 bytes
// ([4128, 2144]'s last strip), 4-byte words ([2080, 2304], 2 sub-tiles) and
// 16 aligned bytes ([2112, 4096], 4 sub-tiles). (The first shapes all run
// strips of one.)
var alignedStripShapes = [][2]int64{{4128, 2144}, {2080, 2304}, {2112, 4096}}

// TestAlignedStripsMatchCPU: GPU bytes = CPU bytes at alignedStripShapes for
// the MXFP4 and NVFP4 configs the fast kernels serve (16-bit input, no
// stochastic rounding, no RHT; a rowwise-only RHT quantize is the plain one)
// and MXFP8 rowwise (its one fast instance).
func TestAlignedStripsMatchCPU(t *testing.T) {
	needGPU(t)
	eachBlockConfig(t, []string{"mxfp4", "nvfp4", "mxfp8"}, []host.Usage{host.BothUsages, host.Columnwise, host.Rowwise},
		[]host.DType{host.BFloat16, host.Float16},
		func(format string, c config, usage host.Usage, _ host.DType) bool {
			return !c.p.StochasticRounding && c.p.RHT == host.RHTOff && (format != "mxfp8" || usage == host.Rowwise)
		},
		func(t *testing.T, format string, dt host.DType, q *host.Quantizer) {
			shs := alignedStripShapes
			if format == "mxfp8" { // any M: a token count, the last sub-tile 61 rows
				shs = append(append([][2]int64(nil), shs...), [2]int64{4157, 2144})
			}
			for si, sh := range shs {
				kind := []string{"wide", "adversarial"}[si%2]
				x := input(t, dt, kind, sh[0], sh[1], uint64(2000+si))
				what := fmt.Sprintf("%v %s", sh, kind)
				cq, gq := quantizeBoth(t, q, q, x, byte(0x3C+si), nil)
				compareTensors(t, what, cq, gq)
			}
		})
}

// TestAmaxAndCallerAmaxMatchCPU: the amax pass, and quantize with a caller's
// amax (options.amax, e.g. after an all-reduce).
func TestAmaxAndCallerAmaxMatchCPU(t *testing.T) {
	needGPU(t)
	for _, c := range []host.Params{
		{Format: "fp8"}, {Format: "fp8_block"}, {Format: "nvfp4"}, {Format: "nvfp4", RHT: host.RHTDefault}, {Format: "nvfp4", BlockDims: 2}, {Format: "mxfp8"},
		{Format: "nvfp4", RHT: host.RHTDefault, StochasticRounding: true, Seed: 3},
	} {
		if _, err := host.LookupFormat(c.Format); err != nil {
			t.Logf("SKIP %s: not registered", c.Format)
			continue
		}
		t.Run(fmt.Sprintf("%s rht=%d dims=%d", c.Format, c.RHT, c.BlockDims), func(t *testing.T) {
			q, err := host.NewQuantizer(c, host.BothUsages)
			require.NoError(t, err)
			defer q.Release()
			// NVFP4 rowwise alone at an odd K (nv4_rows_kernel and
			// nv4_band16_kernel, which also make the amax copy) with the
			// caller's amax.
			var qr *host.Quantizer
			if c.Format == "nvfp4" {
				qr, err = host.NewQuantizer(c, host.Rowwise)
				require.NoError(t, err)
				defer qr.Release()
			}
			for ki, kind := range []string{"normal", "adversarial", "bits", "normal", "last-max"} {
				m, k := int64(256), int64(512)
				if ki == 3 {
					m, k = 45, 77 // ragged: the RHT amax is X₀'s (spec §14 item 2)
				} else if ki == 4 {
					m, k = 47, 129 // a partial RHT group whose largest element is the last valid one
				}
				x := input(t, host.BFloat16, kind, m, k, 42)
				want := hosttest.Tensor(t, host.Float32, 2)
				require.NoError(t, q.ComputeAmax(x, want, 0))
				g := poisoned(t, host.Float32, []int64{2}, 0x7B)
				require.NoError(t, q.ComputeAmax(toGPU(t, x), g, 0))
				requireSameBytes(t, kind+" amax", want.Bytes8(), toCPU(t, g).Bytes8())
				if c.Format == "mxfp8" || c.Format == "fp8_block" {
					continue // block formats take no global amax
				}
				a := want.Float32s()
				amax := []float32{a[0] * 1.5, a[1] * 0.75}
				if c.BlockDims == 2 {
					amax[1] = amax[0]
				}
				cq, gq := quantizeBoth(t, q, q, x, 0x3C, amax)
				compareTensors(t, kind+" with options.amax", cq, gq)
				if qr != nil && k%2 == 1 {
					cq, gq := quantizeBoth(t, qr, qr, x, 0x3D, amax)
					compareTensors(t, kind+" rowwise with options.amax", cq, gq)
				}
			}
		})
	}
}

// TestAmaxPassSizesMatchCPU: the global amax pass (fp8_tensor.cu
// launch_amax) in both its forms: one CTA that stores the amax (at most 65536
// elements), and atomicMax over many CTAs after a zeroing launch (above: a
// decode step's activation, 16×8192), at the sizes on both sides of the bound
// and above it, for BF16, FP16 and FP32 inputs. In each input one element of magnitude 1000
// (elsewhere |x| < 10) sits where one CTA alone reads it: the first element,
// the middle, the last (in the unvectorized tail where n % 8 != 0), so a
// CTA's maximum that does not reach the result shows.
func TestAmaxPassSizesMatchCPU(t *testing.T) {
	needGPU(t)
	for _, f := range []string{"fp8", "nvfp4"} {
		q, err := host.NewQuantizer(host.Params{Format: f}, host.Rowwise)
		require.NoError(t, err)
		defer q.Release()
		for _, dt := range []host.DType{host.BFloat16, host.Float16, host.Float32} {
			for si, sh := range [][2]int64{{1, 65536}, {1, 65537}, {16, 8192}, {7, 16411}, {1, 262145}} {
				m, k := sh[0], sh[1]
				n := m * k
				for pi, pos := range []int64{0, n/2 + 3, n - 1} {
					v := testutil.Normal(int(n), 2, uint64(700+10*si+pi))
					v[pos] = -1000
					x, _ := hosttest.Input(t, dt, v, m, k)
					want := hosttest.Tensor(t, host.Float32, 2)
					require.NoError(t, q.ComputeAmax(x, want, 0))
					require.Equal(t, float32(1000), want.Float32s()[0], "the CPU's amax")
					g := poisoned(t, host.Float32, []int64{2}, 0x7B)
					require.NoError(t, q.ComputeAmax(toGPU(t, x), g, 0))
					requireSameBytes(t, fmt.Sprintf("%s %s %v, 1000 at %d: amax", f, dt, sh, pos), want.Bytes8()[:4], toCPU(t, g).Bytes8()[:4])
				}
			}
		}
	}
}

// TestNvfp4SmallTensorsMatchCPU: an NVFP4 quantize of a small input reduces
// the global amax inside the quantize kernel (nv_self_amax in cuda/nvfp4.cu:
// at most 65536 elements over at most 132 CTAs, each reading the whole
// input), else the amax pass runs first; either way the kernel of a single
// tensor zeroes its scale padding itself (NvOne), a decode step's 112 of 128
// scale rows. The shapes take each path: 16×4096, 1×8192, 7×9000 and 5×700
// the amax inside; 16×8192, 45×4096, 3×24000 and 1×65536 (512 CTAs) the
// amax pass. The largest |x| sits at the first element, an eighth in, in the
// middle and at the last element, one run each, for every usage, 1×16 and
// 16×16 blocks, compact and GEMM-swizzled scales, against the CPU's bytes
// (every scale buffer whole, its padding included, and the global amaxes).
// The scale buffers lie at offsets of 0, 1 and 2 bytes from an aligned
// address: the padding's 4-byte stores and their byte fallback.
func TestNvfp4SmallTensorsMatchCPU(t *testing.T) {
	needGPU(t)
	for _, bd := range []int32{1, 2} {
		for _, sw := range []bool{false, true} {
			for _, usage := range []host.Usage{host.BothUsages, host.Rowwise, host.Columnwise} {
				qc, qg := quantizerPair(t, host.Params{Format: "nvfp4", BlockDims: bd, GEMMSwizzledScales: sw}, usage)
				for si, sh := range [][2]int64{{16, 4096}, {1, 8192}, {7, 9000}, {5, 700}, {16, 8192}, {45, 4096}, {3, 24000}, {1, 65536}} {
					m, k := sh[0], sh[1]
					n := m * k
					for pi, pos := range []int64{0, n / 8, n/2 + 3, n - 1} {
						v := testutil.Normal(int(n), 2, uint64(900+10*si+pi))
						v[pos] = -1000
						x, _ := hosttest.Input(t, host.BFloat16, v, m, k)
						cq, err := qc.Quantize(x, host.QuantizeOptions{})
						require.NoError(t, err)
						t.Cleanup(cq.Free)
						off := int64(pi % 3)
						gq := poisonedQTensorScalesAt(t, qg, x.Shape, byte(0x51+pi), off)
						require.NoError(t, qg.QuantizeInto(toGPU(t, x), host.QuantizeOptions{}, gq))
						require.NoError(t, host.Synchronize(gpu, 0))
						compareTensors(t, fmt.Sprintf("block_dims=%d swizzled=%v %s %v, -1000 at %d, scales at +%d", bd, sw, usage, sh, pos, off), cq, gq)
					}
				}
			}
		}
	}
}

// poisonedQTensorScalesAt is poisonedQTensor with each scale buffer a view
// off bytes past an aligned allocation.
func poisonedQTensorScalesAt(t *testing.T, q *host.Quantizer, shape []int64, p byte, off int64) *host.QTensor {
	t.Helper()
	qt, _ := poisonedQTensorAt(t, q, shape, p, off, 0, func(l host.Layout) bool { return l.Kind == host.BufScaleInv && off != 0 })
	return qt
}

// poisonedQTensorAt is poisonedQTensor with each buffer that pick selects a
// view off bytes past an aligned allocation of off + its bytes + pad, all
// poisoned; it also returns those allocations (in layout order), so that a
// test can check the bytes around each view.
func poisonedQTensorAt(t *testing.T, q *host.Quantizer, shape []int64, p byte, off, pad int64, pick func(host.Layout) bool) (*host.QTensor, []host.Tensor) {
	t.Helper()
	layout, err := q.Layout(shape)
	require.NoError(t, err)
	bufs := make([]host.Tensor, len(layout))
	var wholes []host.Tensor
	for i, l := range layout {
		if !pick(l) {
			bufs[i] = poisoned(t, l.DType, l.Shape, p)
			continue
		}
		n := host.Tensor{DType: l.DType, Shape: l.Shape}.Bytes()
		whole := poisoned(t, host.Uint8, []int64{off + n + pad}, p)
		wholes = append(wholes, whole)
		bufs[i] = host.Tensor{Ptr: unsafe.Add(whole.Ptr, off), DType: l.DType, Shape: l.Shape, Device: gpu}
	}
	qt, err := q.NewQTensorFromBuffers(shape, bufs)
	require.NoError(t, err)
	t.Cleanup(qt.Free)
	return qt, wholes
}

// TestRHTAmaxBothRepeated: with the RHT, one amax pass reduces two maxima per
// CTA, the columnwise RHT amax and the rowwise max |x|. Their reductions once
// shared a shared-memory buffer without a barrier between them, so on some
// runs only the columnwise amax took rowwise partials (cta_max_atomic). Here
// every 16-row group of a column has one nonzero element, so each transform
// output is ±x/4 (H has ±1 entries; ×1/4 is exact) and max |x| is four times
// the RHT amax in every CTA: a mixed-up partial always shows. The GPU runs
// each shape 20 times, with pairs of columns (even K) and single ones.
func TestRHTAmaxBothRepeated(t *testing.T) {
	needGPU(t)
	q, err := host.NewQuantizer(host.Params{Format: "nvfp4", RHT: host.RHTDefault}, host.BothUsages)
	require.NoError(t, err)
	defer q.Release()
	for si, sh := range [][2]int64{{1024, 4096}, {520, 8191}} {
		m, k := sh[0], sh[1]
		v := testutil.Normal(int(m*k), 1, uint64(500+si))
		for i := range v {
			if (int64(i)/k)%16 != 0 {
				v[i] = 0
			}
		}
		x, _ := hosttest.Input(t, host.BFloat16, v, m, k)
		want := hosttest.Tensor(t, host.Float32, 2)
		require.NoError(t, q.ComputeAmax(x, want, 0))
		w := want.Float32s()
		require.Equal(t, w[0], 4*w[1], "rowwise amax %g, RHT amax %g: the input should make the first four times the second", w[0], w[1])
		xg := toGPU(t, x)
		for run := 0; run < 20; run++ {
			g := poisoned(t, host.Float32, []int64{2}, 0x7B)
			require.NoError(t, q.ComputeAmax(xg, g, 0))
			requireSameBytes(t, fmt.Sprintf("%v run %d amaxes", sh, run), want.Bytes8(), toCPU(t, g).Bytes8())
		}
	}
}

// TestRHTWideChunksMatchCPU: 16-row chunks whose exponents span more than 12,
// where FP32 sums of the RHT may round (cuda/nvfp4.cu takes float64 sums
// there: rht_f32_ok), at a BF16 tie of the FP32 sum. Each case is a chunk
// x = (4, a, b, 0, ...) in one column (the default sign vector keeps rows
// 0..2), whose largest output is y_0 = (4 + a + b)/4 (the outputs where b
// enters with a minus sign are smaller), so the RHT amax is y_0 rounded once
// to BF16 (plugins/nvfp4/rht.go), 1 + 2^-7 in every case:
//   - a = 2^-6, b = 2^-23 (span 25): y_0 = 1 + 2^-8 + 2^-25, whose FP32 sum
//     1 + 2^-8 is halfway between 1 and 1 + 2^-7: rounded through FP32 it
//     would be 1;
//   - a = 2^-6, b = 2^-24 (span 26): the same tie, 1 + 2^-8 + 2^-26;
//   - a = 2^-6, b = 2^-12 (span 14): no tie, 1 + 2^-8 + 2^-14.
//
// The second chunk of each column is the first negated. The amax
// (quant_compute_amax) and the quantized bytes, columnwise and both, equal
// the CPU's, for column pairs at an even K, at an odd K, and single columns
// (an input at an odd element offset), single and grouped. (The spans 25 and
// 26 sit on both sides of the end of an exact two-butterfly split measured
// on the H200, bench/RESULTS.md 2026-11-30 19:34 section.)
func TestRHTWideChunksMatchCPU(t *testing.T) {
	needGPU(t)
	cases := []struct {
		name string
		a, b float32
		want float32
	}{
		{"span 25 tie", 0x1p-6, 0x1p-23, 1 + 0x1p-7},
		{"span 26 tie", 0x1p-6, 0x1p-24, 1 + 0x1p-7},
		{"span 14", 0x1p-6, 0x1p-12, 1 + 0x1p-7},
	}
	type layout struct {
		name   string
		k, off int64
	}
	layouts := []layout{{"pairs", 6, 0}, {"odd K", 7, 0}, {"single columns", 6, 1}}
	p := host.Params{Format: "nvfp4", RHT: host.RHTDefault}
	qa, err := host.NewQuantizer(p, host.BothUsages)
	require.NoError(t, err)
	defer qa.Release()
	for _, usage := range []host.Usage{host.BothUsages, host.Columnwise} {
		qc, qg := quantizerPair(t, p, usage)
		var views []host.Tensor
		var cqs, gqs []*host.QTensor
		for _, c := range cases {
			for _, l := range layouts {
				m := int64(32)
				v := make([]float32, m*l.k)
				col := l.k - 2 // the last pair at an odd K is (K−2, K−1); the column before it at an even K
				for g := int64(0); g < m/16; g++ {
					sign := float32(1 - 2*(g&1)) // the second chunk negated: the same magnitudes
					v[(16*g+0)*l.k+col] = 4 * sign
					v[(16*g+1)*l.k+col] = c.a * sign
					v[(16*g+2)*l.k+col] = c.b * sign
				}
				x, _ := hosttest.Input(t, host.BFloat16, v, m, l.k)
				what := fmt.Sprintf("%s/%s/%s", usage, c.name, l.name)
				whole := gpuTensor(t, host.BFloat16, []int64{m*l.k + l.off})
				xg := host.Tensor{Ptr: unsafe.Add(whole.Ptr, l.off*2), DType: host.BFloat16, Shape: []int64{m, l.k}, Device: gpu}
				require.NoError(t, host.CopyTensor(xg, x, 0))
				// The amax first: the case's premise on the CPU, then the GPU's bytes.
				want := hosttest.Tensor(t, host.Float32, 2)
				require.NoError(t, qa.ComputeAmax(x, want, 0))
				require.Equal(t, c.want, want.Float32s()[1], "%s: the CPU's RHT amax", what)
				g := poisoned(t, host.Float32, []int64{2}, 0x7B)
				require.NoError(t, qa.ComputeAmax(xg, g, 0))
				requireSameBytes(t, what+" amaxes", want.Bytes8(), toCPU(t, g).Bytes8())
				cq, err := qc.Quantize(x, host.QuantizeOptions{})
				require.NoError(t, err)
				t.Cleanup(cq.Free)
				gq := poisonedQTensor(t, qg, x.Shape, 0x5A)
				require.NoError(t, qg.QuantizeInto(xg, host.QuantizeOptions{}, gq))
				require.NoError(t, host.Synchronize(gpu, 0))
				compareTensors(t, what, cq, gq)
				views = append(views, xg)
				cqs = append(cqs, cq)
				gqs = append(gqs, poisonedQTensor(t, qg, x.Shape, 0x5B))
			}
		}
		require.NoError(t, qg.QuantizeGrouped(views, gqs, host.QuantizeOptions{}))
		require.NoError(t, host.Synchronize(gpu, 0))
		for i := range views {
			compareTensors(t, fmt.Sprintf("%s grouped item %d", usage, i), cqs[i], gqs[i])
		}
	}
}

// TestFp8SmallTensorsMatchCPU: fp8 current scaling at sizes of the one-CTA
// small-tensor kernel (at most 65536 elements), which takes a columnwise copy
// only for at most two 128×128 tiles (it walks them one after the other);
// wider ones go to the amax pass and the tiled kernels: decode and MoE sizes
// on both sides (16×4096 and 7×9000: 32 and 71 tiles; 128×256: two; 1×8192),
// every usage, E4M3 and E5M2, against the CPU's bytes.
func TestFp8SmallTensorsMatchCPU(t *testing.T) {
	needGPU(t)
	for _, el := range []host.Element{host.ElementE4M3, host.ElementE5M2} {
		for _, usage := range []host.Usage{host.BothUsages, host.Rowwise, host.Columnwise} {
			q, err := host.NewQuantizer(host.Params{Format: "fp8", Element: el}, usage)
			require.NoError(t, err)
			defer q.Release()
			for si, sh := range [][2]int64{{16, 4096}, {7, 9000}, {128, 256}, {1, 8192}} {
				x := input(t, host.BFloat16, "last-max", sh[0], sh[1], uint64(3000+si))
				cq, gq := quantizeBoth(t, q, q, x, byte(0x41+si), nil)
				compareTensors(t, fmt.Sprintf("%s %s %v", el, usage, sh), cq, gq)
			}
		}
	}
}

// TestDelayedScalingMatchesCPU: a few steps of quantize + update, the scale and
// history included. On the GPU the state lives in device memory (the quantize
// reads the scale and reduces the amax there, the update is a kernel, issue
// #15); Fetch copies it back. Shapes on both sides of the one-CTA small-tensor
// path, both amax algorithms, a history longer than the update kernel's
// block, a reduced amax, and a CPU quantize in between that brings the GPU
// quantizer's state back to C memory.
func TestDelayedScalingMatchesCPU(t *testing.T) {
	needGPU(t)
	for _, el := range []host.Element{host.ElementE4M3, host.ElementE5M2} {
		for _, usage := range []host.Usage{host.BothUsages, host.Rowwise, host.Columnwise} {
			for _, c := range []struct {
				name  string
				shape [2]int64
				hist  int32
				algo  host.AmaxAlgo
			}{
				{"small max", [2]int64{130, 260}, 4, host.AmaxMax},
				// Small but of many 128×128 tiles: columnwise, the tiled path.
				{"small wide", [2]int64{16, 4096}, 4, host.AmaxMax},
				{"large max", [2]int64{300, 260}, 4, host.AmaxMax},
				{"small most_recent long", [2]int64{64, 96}, 1500, host.AmaxMostRecent},
				{"large max long", [2]int64{520, 300}, 2100, host.AmaxMax},
				{"large odd M", [2]int64{1031, 264}, 4, host.AmaxMax}, // the strip kernel's delayed instances
				{"large odd K", [2]int64{1031, 263}, 4, host.AmaxMax}, // and its staged ones (16-bit rows at odd offsets)
			} {
				t.Run(fmt.Sprintf("%s/%s/%s", el, usage, c.name), func(t *testing.T) {
					p := host.Params{Format: "fp8", Scaling: host.ScalingDelayed, Element: el, AmaxHistoryLen: c.hist, Margin: 1, AmaxAlgo: c.algo}
					qc, qg := quantizerPair(t, p, usage)
					cs, _ := qc.DelayedState(host.DirRowwise)
					gs, _ := qg.DelayedState(host.DirRowwise)
					for step := 0; step < 6; step++ {
						kind := []string{"normal", "wide", "adversarial", "normal", "wide", "normal"}[step]
						x := input(t, host.BFloat16, kind, c.shape[0], c.shape[1], uint64(step))
						if step == 3 {
							// A CPU quantize on the GPU quantizer: its state comes back.
							cq, err := qc.Quantize(x, host.QuantizeOptions{})
							require.NoError(t, err)
							gq, err := qg.Quantize(x, host.QuantizeOptions{})
							require.NoError(t, err)
							compareTensors(t, "cpu step", cq, gq)
							cq.Free()
							gq.Free()
						} else {
							cq, gq := quantizeBoth(t, qc, qg, x, 0x99, nil)
							compareTensors(t, fmt.Sprintf("step %d", step), cq, gq)
						}
						require.NoError(t, gs.Fetch())
						requireSameBytes(t, "history", cs.AmaxHistory().Bytes8(), gs.AmaxHistory().Bytes8())
						var reduced *float32
						if step == 4 {
							r := float32(3e4)
							reduced = &r
						}
						require.NoError(t, cs.Update(reduced))
						require.NoError(t, gs.Update(reduced))
						require.NoError(t, gs.Fetch())
						requireSameBytes(t, "scale", cs.Scale().Bytes8(), gs.Scale().Bytes8())
						requireSameBytes(t, "history after update", cs.AmaxHistory().Bytes8(), gs.AmaxHistory().Bytes8())
					}
				})
			}
		}
	}
}

// TestDelayedScalingGroupedUpdateMatchesCPU: states on the GPU updated in
// one call of the plugin's delayed_update_grouped (host.UpdateDelayed, as a
// linear layer's UpdateScaling does) follow the CPU states updated one by
// one, byte for byte (spec §2.4): 70 states, more than one launch's 64,
// histories of 1, 4, 1500 and 2100 entries (chunks of the 1024-thread
// block), both amax algorithms, margins 0 and 1, and reduced amaxes (zero
// among them) at one step. The plugin refuses two items that share a buffer.
func TestDelayedScalingGroupedUpdateMatchesCPU(t *testing.T) {
	needGPU(t)
	const n = 70
	qcs, qgs := make([]*host.Quantizer, n), make([]*host.Quantizer, n)
	cs, gs := make([]host.DelayedScaling, n), make([]host.DelayedScaling, n)
	for i := range qcs {
		p := host.Params{Format: "fp8", Scaling: host.ScalingDelayed, AmaxHistoryLen: []int32{1, 4, 1500, 2100}[i%4], Margin: float32(i % 2),
			AmaxAlgo: []host.AmaxAlgo{host.AmaxMax, host.AmaxMostRecent}[(i/2)%2]}
		qcs[i], qgs[i] = quantizerPair(t, p, host.Rowwise)
		cs[i], _ = qcs[i].DelayedState(host.DirRowwise)
		gs[i], _ = qgs[i].DelayedState(host.DirRowwise)
	}
	for step := 0; step < 4; step++ {
		for i := range qcs {
			if step == 1 && i%3 == 0 {
				continue // nothing staged: h[0] stays 0 and the update changes nothing
			}
			x := input(t, host.BFloat16, []string{"normal", "wide", "adversarial"}[(i+step)%3], 16, 64, uint64(100*step+i))
			cq, gq := quantizeBoth(t, qcs[i], qgs[i], x, 0x99, nil)
			compareTensors(t, fmt.Sprintf("step %d state %d", step, i), cq, gq)
		}
		var reduced []*float32
		if step == 2 {
			reduced = make([]*float32, n)
			for i := range reduced {
				r := float32(i%5) * 1e3
				reduced[i] = &r
			}
		}
		require.NoError(t, host.UpdateDelayed(gs, reduced))
		for i := range cs {
			var r *float32
			if reduced != nil {
				r = reduced[i]
			}
			require.NoError(t, cs[i].Update(r))
			require.NoError(t, gs[i].Fetch())
			requireSameBytes(t, fmt.Sprintf("step %d state %d scale", step, i), cs[i].Scale().Bytes8(), gs[i].Scale().Bytes8())
			requireSameBytes(t, fmt.Sprintf("step %d state %d history", step, i), cs[i].AmaxHistory().Bytes8(), gs[i].AmaxHistory().Bytes8())
		}
	}
	k, err := host.KernelsFor("fp8", gpu)
	require.NoError(t, err)
	g, ok := k.(host.DelayedGroupUpdater)
	require.True(t, ok, "the CUDA plugin's fp8 kernels have a grouped update")
	scale, hist, err := gs[0].(host.DeviceDelayedState).DeviceBuffers(gpu, 0)
	require.NoError(t, err)
	r := host.DelayedUpdateRequest{Spec: qgs[0].Spec(host.DirRowwise), Scale: scale, History: hist, ScaledMax: 448}
	_, err = g.DelayedUpdateGrouped([]host.DelayedUpdateRequest{r, r})
	require.ErrorContains(t, err, "items[1].scale and items[0].scale overlap")
}

// TestDeriveAndSwizzleMatchCPU: update_usage (columnwise from rowwise) and the
// scale layout conversion, on the GPU against the CPU.
func TestDeriveAndSwizzleMatchCPU(t *testing.T) {
	needGPU(t)
	cases := []struct {
		p       host.Params
		derive  bool
		swizzle bool
		shape   [2]int64
	}{
		{host.Params{Format: "fp8"}, true, false, [2]int64{130, 70}},
		{host.Params{Format: "fp8_block", BlockDims: 2}, true, false, [2]int64{300, 260}},
		{host.Params{Format: "nvfp4", BlockDims: 2}, true, true, [2]int64{144, 272}},
		{host.Params{Format: "nvfp4"}, false, true, [2]int64{144, 272}},
		{host.Params{Format: "mxfp8"}, false, true, [2]int64{96, 288}},
		{host.Params{Format: "mxfp4"}, false, true, [2]int64{96, 288}},
		// Ragged (spec §14): partial blocks and tiles, odd packed rows.
		{host.Params{Format: "nvfp4", BlockDims: 2}, true, true, [2]int64{45, 77}},
		{host.Params{Format: "nvfp4", RHT: host.RHTDefault}, false, true, [2]int64{129, 47}},
		{host.Params{Format: "mxfp8"}, false, true, [2]int64{45, 97}},
		{host.Params{Format: "mxfp4"}, false, true, [2]int64{129, 33}},
		{host.Params{Format: "nvfp4", BlockDims: 2}, true, true, [2]int64{47, 129}},
		{host.Params{Format: "nvfp4"}, false, true, [2]int64{33, 100}},
		{host.Params{Format: "mxfp8"}, false, true, [2]int64{100, 33}},
		{host.Params{Format: "mxfp4"}, false, true, [2]int64{17, 47}},
		{host.Params{Format: "fp8_block", BlockDims: 2}, true, false, [2]int64{129, 47}},
		// The byte transpose's interior tiles (128 rows by 64 columns with a
		// tile row above and below): every offset of the input rows and of
		// the output runs within a 4-byte word (odd M and K), and aligned.
		{host.Params{Format: "fp8"}, true, false, [2]int64{777, 331}},
		{host.Params{Format: "fp8"}, true, false, [2]int64{514, 258}},
		{host.Params{Format: "fp8"}, true, false, [2]int64{512, 256}},
		{host.Params{Format: "fp8_block", BlockDims: 2}, true, false, [2]int64{1031, 517}},
	}
	for _, c := range cases {
		if _, err := host.LookupFormat(c.p.Format); err != nil {
			t.Logf("SKIP %s: not registered", c.p.Format)
			continue
		}
		t.Run(fmt.Sprintf("%s dims=%d %v", c.p.Format, c.p.BlockDims, c.shape), func(t *testing.T) {
			usage := host.BothUsages
			if c.derive {
				usage = host.Rowwise
			}
			qc, err := host.NewQuantizer(c.p, usage)
			require.NoError(t, err)
			defer qc.Release()
			x := input(t, host.BFloat16, "normal", c.shape[0], c.shape[1], 11)
			cq, gq := quantizeBoth(t, qc, qc, x, 0x11, nil)
			if c.derive {
				require.NoError(t, cq.UpdateUsage(host.BothUsages, 0))
				require.NoError(t, gq.UpdateUsage(host.BothUsages, 0))
				require.NoError(t, host.Synchronize(gpu, 0))
				compareTensors(t, "derived", cq, gq)
			}
			if c.swizzle {
				for _, sw := range []bool{true, false} {
					require.NoError(t, cq.SetGEMMSwizzledScales(sw, 0))
					require.NoError(t, gq.SetGEMMSwizzledScales(sw, 0))
					require.NoError(t, host.Synchronize(gpu, 0))
					compareTensors(t, fmt.Sprintf("swizzled=%v", sw), cq, gq)
				}
			}
		})
	}
}

// TestMixedDevicesAreRefused: one call never mixes CPU and GPU memory.
func TestMixedDevicesAreRefused(t *testing.T) {
	needGPU(t)
	q, err := host.NewQuantizer(host.Params{Format: "fp8"}, host.BothUsages)
	require.NoError(t, err)
	defer q.Release()
	x := input(t, host.BFloat16, "normal", 64, 64, 1)
	gq, err := q.Quantize(toGPU(t, x), host.QuantizeOptions{})
	require.NoError(t, err)
	defer gq.Free()
	cpuOut := hosttest.Tensor(t, host.Float32, 64, 64)
	err = gq.Dequantize(host.DirRowwise, cpuOut, 0)
	require.ErrorIs(t, err, host.ErrInvalidArgument)
	require.ErrorContains(t, err, "on cpu but the tensor is on cuda:0")
	err = q.QuantizeInto(x, host.QuantizeOptions{}, gq)
	require.ErrorIs(t, err, host.ErrInvalidArgument)
	require.ErrorContains(t, err, "input: on cpu but dst is on cuda:0")
	a := hosttest.Tensor(t, host.Float32, 2)
	_, err = q.Quantize(toGPU(t, x), host.QuantizeOptions{AmaxIn: &a})
	require.ErrorContains(t, err, "amax: on cpu but the input is on cuda:0")
}

// TestDeviceMismatchIsAnError: a tensor said to be on another device than the
// current one is refused by the plugin, not silently used.
func TestDeviceMismatchIsAnError(t *testing.T) {
	needGPU(t)
	q, err := host.NewQuantizer(host.Params{Format: "fp8"}, host.Rowwise)
	require.NoError(t, err)
	defer q.Release()
	g := toGPU(t, input(t, host.BFloat16, "normal", 8, 8, 1))
	g.Device.ID = 7
	_, err = q.Quantize(g, host.QuantizeOptions{})
	require.Error(t, err)
	require.ErrorContains(t, err, "cuda:7")
}

// TestQuantizeGroupedMatchesCPU: a grouped quantize (one launch for the
// group where the plugin has a grouped kernel: fp8_block, mxfp8, mxfp4; three
// for fp8 and nvfp4, whose amaxes come first) writes, for every tensor of a
// group of different shapes, the bytes a CPU quantize of that tensor alone
// writes. A group of 130 small tensors crosses the plugin's per-launch limit
// of 128. For the MX and NVFP4 formats, every option of the single quantize
// (directions, swizzled scales, FLOOR, E5M2; nvfp4 1x16 / 16x16, the RHT,
// stochastic rounding) runs on an aligned group (the kernels' aligned
// instances), a ragged one with an empty tensor (spec §14: the EDGE
// instances, 16-bit rows at odd offsets, partial blocks) and the 130 tensors.
func TestQuantizeGroupedMatchesCPU(t *testing.T) {
	needGPU(t)
	groups := map[string][][2]int64{
		"mixed": {{256, 512}, {130, 270}, {1, 5}, {384, 1024}, {128, 128}},
	}
	many := make([][2]int64, 130)
	for i := range many {
		many[i] = [2]int64{int64(1 + i%7*40), int64(128 + i%3*64)}
	}
	groups["130 tensors"] = many
	// The MX and NVFP4 formats' groups (they take the place of "mixed").
	blockGroups := map[string][][2]int64{
		"aligned":      {{256, 512}, {64, 96}, {384, 1024}},
		"ragged empty": {{256, 512}, {130, 270}, {1, 5}, {0, 64}, {384, 1024}, {64, 96}, {33, 17}, {7, 0}},
	}
	for _, c := range []host.Params{
		{Format: "fp8_block"}, {Format: "fp8_block", BlockDims: 2}, {Format: "fp8_block", FP32Scales: true},
		{Format: "fp8"}, {Format: "fp8", Scaling: host.ScalingDelayed, AmaxHistoryLen: 3},
		{Format: "mxfp8"}, {Format: "mxfp8", Element: host.ElementE5M2}, {Format: "mxfp8", ScaleRounding: host.ScaleFLOOR},
		{Format: "mxfp8", GEMMSwizzledScales: true},
		{Format: "mxfp4"}, {Format: "mxfp4", ScaleRounding: host.ScaleFLOOR, GEMMSwizzledScales: true},
		{Format: "nvfp4"}, {Format: "nvfp4", GEMMSwizzledScales: true}, {Format: "nvfp4", RHT: host.RHTDefault},
		{Format: "nvfp4", RHT: host.RHTCustomMask, RHTSignMask: 0x1234}, {Format: "nvfp4", StochasticRounding: true, Seed: 0x1234567890ABCDEF, Offset: 77},
		{Format: "nvfp4", RHT: host.RHTDefault, StochasticRounding: true, Seed: 5, Offset: 1 << 40},
		{Format: "nvfp4", BlockDims: 2}, {Format: "nvfp4", BlockDims: 2, StochasticRounding: true, Seed: 9},
	} {
		block := c.Format == "mxfp8" || c.Format == "mxfp4" || c.Format == "nvfp4"
		// A block format's option variants run both directions on the
		// aligned and the ragged group (time); its plain config, the RHT
		// (whose columnwise amax pass differs) and 16x16 every direction
		// and group.
		full := !block || c == host.Params{Format: c.Format} || c == host.Params{Format: "nvfp4", RHT: host.RHTDefault} ||
			c == host.Params{Format: "nvfp4", BlockDims: 2}
		usages := []host.Usage{host.BothUsages, host.Rowwise, host.Columnwise}
		if !full {
			usages = usages[:1]
		}
		for _, usage := range usages {
			grps := groups
			if block {
				grps = map[string][][2]int64{}
				if full {
					grps["130 tensors"] = many
				}
				for k, v := range blockGroups {
					grps[k] = v
				}
			}
			for gname, shapes := range grps {
				for _, dt := range []host.DType{host.BFloat16, host.Float32} {
					// The RHT takes BF16 only (spec §5.5); the block formats'
					// FP32 kernels run on the ragged group alone (one kernel
					// for every shape there; time).
					if dt == host.Float32 && block && (c.RHT != host.RHTOff || gname != "ragged empty") {
						continue
					}
					name := fmt.Sprintf("%s el=%d dims=%d fp32=%v scaling=%d floor=%v swz=%v rht=%d sr=%v/%s/%s/%s", c.Format, c.Element, c.BlockDims,
						c.FP32Scales, c.Scaling, c.ScaleRounding == host.ScaleFLOOR, c.GEMMSwizzledScales, c.RHT, c.StochasticRounding, usage, gname, dt)
					t.Run(name, func(t *testing.T) {
						qc, qg := quantizerPair(t, c, usage)
						ins, cqs := cpuReferences(t, qc, dt, []string{"normal", "adversarial", "wide"}, shapes)
						dsts := make([]*host.QTensor, len(shapes))
						for i := range shapes {
							dsts[i] = poisonedQTensor(t, qg, ins[i].Shape, byte(0x5A+i))
						}
						require.NoError(t, qg.QuantizeGrouped(ins, dsts, host.QuantizeOptions{}))
						require.NoError(t, host.Synchronize(gpu, 0))
						for i := range shapes {
							compareTensors(t, fmt.Sprintf("tensor %d %v", i, shapes[i]), cqs[i], dsts[i])
						}
						if c.Scaling == host.ScalingDelayed {
							cs, _ := qc.DelayedState(host.DirRowwise)
							gs, _ := qg.DelayedState(host.DirRowwise)
							require.NoError(t, gs.Fetch())
							requireSameBytes(t, "history", cs.AmaxHistory().Bytes8(), gs.AmaxHistory().Bytes8())
						}
					})
				}
			}
		}
	}
}
