package fp8_test

import (
	"math"
	"math/big"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/host"
	"libquant/host/hosttest"
	"libquant/internal/numeric"
	"libquant/internal/ratref"
	tu "libquant/internal/testutil"
	_ "libquant/plugins/fp8"
)

// refScale is compute_scale_from_amax (spec §3.2) in exact arithmetic: the
// division is exact then rounded once (= IEEE RN division), pow2 keeps the
// largest power of two not above the scale.
func refScale(amax float32, fp8Max float64, pow2 bool, eps float32) float32 {
	if amax < eps {
		amax = eps
	}
	a := float64(amax)
	if math.IsInf(a, 0) || a == 0 || math.IsNaN(a) {
		return 1
	}
	s := ratref.Float32(new(big.Rat).Quo(new(big.Rat).SetFloat64(fp8Max), ratref.Rat(amax)))
	if math.IsInf(float64(s), 0) {
		s = math.MaxFloat32
	}
	if pow2 {
		_, e := math.Frexp(float64(s)) // s = f·2^e, f in [0.5,1)
		s = float32(math.Ldexp(1, e-1))
	}
	return s
}

func refRecip(s float32) float32 { return ratref.Float32(new(big.Rat).Inv(ratref.Rat(s))) }

// refCast is q = RNE_sat(fl32(x·scale)) with the product rounded exactly once.
func refCast(x, scale float32, f *ratref.Format) uint8 {
	if x != x || math.IsInf(float64(x), 0) {
		return f.Encode(float64(x * scale)) // NaN stays NaN, ±Inf·positive stays ±Inf
	}
	return f.Encode(float64(ratref.Mul32(x, scale)))
}

func refAmax(xs []float32) float32 {
	var m float64
	for _, x := range xs {
		if a := math.Abs(float64(x)); a > m { // NaN never compares greater
			m = a
		}
	}
	return float32(m)
}

func quantizer(t *testing.T, p host.Params, u host.Usage) *host.Quantizer {
	t.Helper()
	q, err := host.NewQuantizer(p, u)
	require.NoError(t, err)
	t.Cleanup(q.Release)
	return q
}

func buf(t *testing.T, qt *host.QTensor, d host.Direction, k host.BufferKind) host.Tensor {
	t.Helper()
	st, ok := qt.Storage(d)
	require.True(t, ok, "no %s storage", d)
	return st.MustBuffer(k)
}

func TestCurrentScalingBytesMatchExactReference(t *testing.T) {
	shapes := [][]int64{{1, 1}, {3, 5}, {64, 64}, {65, 130}, {2, 3, 7}, {200}}
	for _, elem := range []host.Element{host.ElementE4M3, host.ElementE5M2} {
		ref, fp8Max := ratref.E4M3, 448.0
		if elem == host.ElementE5M2 {
			ref, fp8Max = ratref.E5M2, 57344.0
		}
		for _, pow2 := range []bool{false, true} {
			for _, dt := range []host.DType{host.Float32, host.BFloat16, host.Float16} {
				for si, shape := range shapes {
					n := int(host.Tensor{Shape: shape}.NumElements())
					for _, vals := range [][]float32{tu.Normal(n, 3, uint64(si)), tu.Adversarial(n, uint64(si))} {
						in, exact := hosttest.Input(t, dt, vals, shape...)
						q := quantizer(t, host.Params{Format: "fp8", Element: elem, ForcePow2Scales: pow2}, 0)
						qt, err := q.Quantize(in, host.QuantizeOptions{})
						require.NoError(t, err)
						amax := refAmax(exact)
						scale := refScale(amax, fp8Max, pow2, 0)
						m, k := host.Flatten2D(shape)
						row := buf(t, qt, host.DirRowwise, host.BufData).Bytes8()
						col := buf(t, qt, host.DirColumnwise, host.BufData).Bytes8()
						for i := int64(0); i < m; i++ {
							for j := int64(0); j < k; j++ {
								want := refCast(exact[i*k+j], scale, ref)
								if row[i*k+j] != want || col[j*m+i] != want {
									t.Fatalf("%s pow2=%v %s %v [%d,%d] x=%g scale=%g: row %#02x col %#02x want %#02x",
										elem, pow2, dt, shape, i, j, exact[i*k+j], scale, row[i*k+j], col[j*m+i], want)
								}
							}
						}
						for _, d := range []host.Direction{host.DirRowwise, host.DirColumnwise} {
							require.Equal(t, refRecip(scale), buf(t, qt, d, host.BufScaleInv).Float32s()[0], "%s scale_inv", d)
							require.Equal(t, amax, buf(t, qt, d, host.BufAmax).Float32s()[0], "%s amax", d)
						}
						qt.Free()
					}
				}
			}
		}
	}
}

func TestScaleRuleEdges(t *testing.T) {
	tiny := math.Float32frombits(1)
	cases := []struct {
		name string
		amax float32
		pow2 bool
		eps  float32
		want float32
	}{
		{"zero amax gives 1", 0, false, 0, 1},
		{"inf amax gives 1", float32(math.Inf(1)), false, 0, 1},
		{"subnormal amax overflows to FLT_MAX", tiny, false, 0, math.MaxFloat32},
		{"pow2 of FLT_MAX is 2^127", tiny, true, 0, float32(math.Ldexp(1, 127))},
		{"eps floors the amax", 1e-3, false, 1, 448},
		{"eps above zero amax", 0, false, 2, 224},
		{"pow2 rounds down", 3, true, 0, 128},
		{"exact", 448, false, 0, 1},
	}
	for _, c := range cases {
		// The amax is the only non-zero input, so it is the tensor's amax.
		in, _ := hosttest.Input(t, host.Float32, []float32{c.amax, 0}, 2)
		q := quantizer(t, host.Params{Format: "fp8", ForcePow2Scales: c.pow2, AmaxEpsilon: c.eps}, host.Rowwise)
		qt, err := q.Quantize(in, host.QuantizeOptions{})
		require.NoError(t, err, c.name)
		require.Equal(t, refRecip(c.want), buf(t, qt, host.DirRowwise, host.BufScaleInv).Float32s()[0], c.name)
		require.Equal(t, c.want, refScale(c.amax, 448, c.pow2, c.eps), "reference agrees: %s", c.name)
		qt.Free()
	}
	// NaN inputs do not count towards the amax.
	in, _ := hosttest.Input(t, host.Float32, []float32{float32(math.NaN()), -7}, 2)
	q := quantizer(t, host.Params{Format: "fp8"}, host.Rowwise)
	qt, err := q.Quantize(in, host.QuantizeOptions{})
	require.NoError(t, err)
	require.Equal(t, float32(7), buf(t, qt, host.DirRowwise, host.BufAmax).Float32s()[0])
	require.Equal(t, numeric.E4M3NaN, buf(t, qt, host.DirRowwise, host.BufData).Bytes8()[0])
	qt.Free()
}

func TestCallerAmaxIsUsed(t *testing.T) {
	vals := tu.Normal(64*32, 1, 5)
	in, exact := hosttest.Input(t, host.BFloat16, vals, 64, 32)
	q := quantizer(t, host.Params{Format: "fp8"}, 0)
	amax := hosttest.Tensor(t, host.Float32, 2)
	require.NoError(t, q.ComputeAmax(in, amax, 0))
	require.Equal(t, []float32{refAmax(exact), refAmax(exact)}, amax.Float32s())
	// An all-reduced amax larger than the local one changes the scale.
	amax.Float32s()[0], amax.Float32s()[1] = 10, 10
	qt, err := q.Quantize(in, host.QuantizeOptions{AmaxIn: &amax})
	require.NoError(t, err)
	defer qt.Free()
	require.Equal(t, refRecip(refScale(10, 448, false, 0)), buf(t, qt, host.DirRowwise, host.BufScaleInv).Float32s()[0])
	row := buf(t, qt, host.DirRowwise, host.BufData).Bytes8()
	for i, x := range exact {
		require.Equal(t, refCast(x, refScale(10, 448, false, 0), ratref.E4M3), row[i])
	}
	// Wrong shape or dtype of the amax is rejected, naming it.
	bad := hosttest.Tensor(t, host.Float32, 1)
	_, err = q.Quantize(in, host.QuantizeOptions{AmaxIn: &bad})
	require.ErrorIs(t, err, host.ErrInvalidArgument)
	require.ErrorContains(t, err, "amax")
}

func TestDequantizeIsExactProductRounded(t *testing.T) {
	vals := tu.Adversarial(40*24, 3)
	in, _ := hosttest.Input(t, host.Float32, vals, 40, 24)
	for _, elem := range []host.Element{host.ElementE4M3, host.ElementE5M2} {
		ref := ratref.E4M3
		if elem == host.ElementE5M2 {
			ref = ratref.E5M2
		}
		q := quantizer(t, host.Params{Format: "fp8", Element: elem}, 0)
		qt, err := q.Quantize(in, host.QuantizeOptions{})
		require.NoError(t, err)
		for _, d := range []host.Direction{host.DirRowwise, host.DirColumnwise} {
			data := buf(t, qt, d, host.BufData).Bytes8()
			sinv := buf(t, qt, d, host.BufScaleInv).Float32s()[0]
			for _, dt := range []host.DType{host.Float32, host.BFloat16, host.Float16} {
				out := hosttest.Tensor(t, dt, 40, 24)
				require.NoError(t, qt.Dequantize(d, out, 0))
				got := make([]float32, 40*24)
				host.LoadFloat32(out, 0, got)
				for i := int64(0); i < 40; i++ {
					for j := int64(0); j < 24; j++ {
						c := data[i*24+j]
						if d == host.DirColumnwise {
							c = data[j*40+i]
						}
						v, ok := ref.Value(c)
						var want float32
						if !ok {
							want = float32(math.NaN())
						} else {
							want = ratref.Float32(v.Mul(v, ratref.Rat(sinv)))
							if want == 0 && c&0x80 != 0 {
								want = float32(math.Copysign(0, -1))
							}
						}
						switch dt {
						case host.BFloat16:
							want = numeric.BF16ToFloat32(numeric.Float32ToBF16(want))
						case host.Float16:
							want = numeric.FP16ToFloat32(numeric.Float32ToFP16(want))
						}
						g := got[i*24+j]
						if !(g == want || (g != g && want != want)) {
							t.Fatalf("%s %s %s [%d,%d]: got %g want %g", elem, d, dt, i, j, g, want)
						}
					}
				}
			}
		}
		qt.Free()
	}
}

// refDelayed is spec §2.4's fused update, written from the spec text.
type refDelayed struct {
	h      []float32
	scale  float32
	algo   host.AmaxAlgo
	margin float64
	max    float64
}

func (r *refDelayed) update(reduced float32) {
	a0 := r.h[0]
	if reduced != 0 {
		a0 = reduced
	}
	if a0 == 0 {
		return // nothing rolls, the scale is unchanged
	}
	L := len(r.h)
	amax := a0
	for i := 1; i < L; i++ {
		if r.h[i] > amax {
			amax = r.h[i]
		}
	}
	if r.algo == host.AmaxMostRecent {
		amax = a0
	}
	nh := make([]float32, L)
	copy(nh, r.h[1:])
	nh[L-1] = a0
	nh[0] = 0
	r.h = nh
	scaledMax := float32(r.max * math.Pow(2, -r.margin))
	if amax > 0 && !math.IsInf(float64(amax), 0) {
		r.scale = ratref.Float32(new(big.Rat).Quo(ratref.Rat(scaledMax), ratref.Rat(amax)))
	}
	if math.IsInf(float64(r.scale), 0) {
		r.scale = math.MaxFloat32
	}
}

func TestDelayedScalingSequences(t *testing.T) {
	type step struct {
		amaxes  []float32 // one quantize per entry, tensor amax = entry
		reduced float32   // 0: no reduction
	}
	seqs := []struct {
		name    string
		histLen int32
		algo    host.AmaxAlgo
		margin  float32
		elem    host.Element
		steps   []step
	}{
		{"max over short history", 3, host.AmaxMax, 0, host.ElementE4M3, []step{
			{[]float32{2}, 0}, {[]float32{8, 1}, 0}, {[]float32{1}, 0}, {[]float32{0.5}, 0}, {[]float32{0.25}, 0}, {[]float32{0.125}, 0}}},
		{"zero step does not roll", 4, host.AmaxMax, 0, host.ElementE4M3, []step{
			{[]float32{3}, 0}, {[]float32{0}, 0}, {[]float32{0}, 0}, {[]float32{5}, 0}}},
		{"most recent with margin", 5, host.AmaxMostRecent, 2, host.ElementE5M2, []step{
			{[]float32{100}, 0}, {[]float32{1}, 0}, {[]float32{7}, 0}}},
		{"reduced amax wins", 3, host.AmaxMax, 0, host.ElementE4M3, []step{
			{[]float32{1}, 4}, {[]float32{2}, 0}, {[]float32{0}, 9}}},
		{"history of one", 1, host.AmaxMax, 1, host.ElementE4M3, []step{
			{[]float32{6}, 0}, {[]float32{3}, 0}, {[]float32{0}, 0}}},
		{"tiny amax saturates scale", 2, host.AmaxMax, 0, host.ElementE4M3, []step{
			{[]float32{math.Float32frombits(1)}, 0}, {[]float32{1}, 0}}},
	}
	for _, s := range seqs {
		t.Run(s.name, func(t *testing.T) {
			fp8Max := 448.0
			ref := ratref.E4M3
			if s.elem == host.ElementE5M2 {
				fp8Max, ref = 57344, ratref.E5M2
			}
			q := quantizer(t, host.Params{Format: "fp8", Element: s.elem, Scaling: host.ScalingDelayed,
				AmaxHistoryLen: s.histLen, AmaxAlgo: s.algo, Margin: s.margin}, 0)
			ds, err := q.DelayedState(host.DirRowwise)
			require.NoError(t, err)
			r := &refDelayed{h: make([]float32, s.histLen), scale: 1, algo: s.algo, margin: float64(s.margin), max: fp8Max}
			for si, st := range s.steps {
				for _, a := range st.amaxes {
					vals := []float32{a, -a / 2, a / 3, 0}
					in, exact := hosttest.Input(t, host.Float32, vals, 2, 2)
					qt, err := q.Quantize(in, host.QuantizeOptions{})
					require.NoError(t, err)
					// The cast uses the scale as it stands, and scale_inv = 1/scale then.
					require.Equal(t, refRecip(r.scale), buf(t, qt, host.DirRowwise, host.BufScaleInv).Float32s()[0], "step %d", si)
					for i, x := range exact {
						require.Equal(t, refCast(x, r.scale, ref), buf(t, qt, host.DirRowwise, host.BufData).Bytes8()[i], "step %d x=%g", si, x)
					}
					qt.Free()
					if a > r.h[0] {
						r.h[0] = a
					}
				}
				require.Equal(t, r.h, ds.AmaxHistory().Float32s(), "staged history before update %d", si)
				var red *float32
				if st.reduced != 0 {
					red = &st.reduced
				}
				require.NoError(t, ds.Update(red))
				r.update(st.reduced)
				require.Equal(t, r.h, ds.AmaxHistory().Float32s(), "history after update %d", si)
				require.Equal(t, r.scale, ds.Scale().Float32s()[0], "scale after update %d", si)
			}
		})
	}
}

func TestRowwiseToColumnwiseDerivationAndTiles(t *testing.T) {
	vals := tu.Normal(70*45, 2, 11)
	in, _ := hosttest.Input(t, host.BFloat16, vals, 70, 45)
	both := quantizer(t, host.Params{Format: "fp8"}, 0)
	full, err := both.Quantize(in, host.QuantizeOptions{})
	require.NoError(t, err)
	defer full.Free()
	rowOnly := quantizer(t, host.Params{Format: "fp8"}, host.Rowwise)
	qt, err := rowOnly.Quantize(in, host.QuantizeOptions{})
	require.NoError(t, err)
	defer qt.Free()
	require.Equal(t, host.Rowwise, qt.Usage())
	require.NoError(t, qt.UpdateUsage(host.BothUsages, 0))
	require.Equal(t, buf(t, full, host.DirColumnwise, host.BufData).Bytes8(), buf(t, qt, host.DirColumnwise, host.BufData).Bytes8())
	// Dropping rowwise, then asking for it back, fails: the transpose cannot make it (spec §7.4).
	require.NoError(t, qt.UpdateUsage(host.Columnwise, 0))
	err = qt.UpdateUsage(host.BothUsages, 0)
	require.ErrorIs(t, err, host.ErrState)
	require.Equal(t, host.Columnwise, qt.Usage(), "a failed update changes nothing")

	// Tiles times the tensor scale equal the dequantized values.
	st, _ := full.Storage(host.DirColumnwise)
	deq := hosttest.Tensor(t, host.Float32, 70, 45)
	require.NoError(t, full.Dequantize(host.DirColumnwise, deq, 0))
	td := tileDequantizer(t)
	tile := make([]float32, 16*16)
	for _, tr := range []bool{false, true} {
		td.DequantizeTile(st, host.DirColumnwise, 70, 45, 60, 70, 40, 45, tile, 16, tr)
		for r := 60; r < 70; r++ {
			for c := 40; c < 45; c++ {
				v := tile[(r-60)*16+(c-40)]
				if tr {
					v = tile[(c-40)*16+(r-60)]
				}
				require.Equal(t, deq.Float32s()[r*45+c], v*td.TensorScale(st, host.DirColumnwise), "[%d,%d] transposed=%v", r, c, tr)
			}
		}
	}
}

func tileDequantizer(t *testing.T) host.TileDequantizer {
	t.Helper()
	k, err := host.KernelsFor("fp8", host.Device{Type: host.CPU})
	require.NoError(t, err)
	td, ok := k.(host.TileDequantizer)
	require.True(t, ok)
	return td
}

func TestBadConfigs(t *testing.T) {
	cases := []struct {
		p    host.Params
		want string
	}{
		{host.Params{Format: "fp8", Element: host.ElementE2M1}, "config.element"},
		{host.Params{Format: "fp8", Scaling: 7}, "config.scaling"},
		{host.Params{Format: "fp8", Scaling: host.ScalingDelayed, AmaxHistoryLen: -1}, "config.amax_history_len"},
		{host.Params{Format: "fp8", Scaling: host.ScalingDelayed, AmaxAlgo: 5}, "config.amax_compute_algo"},
		{host.Params{Format: "fp8", Scaling: host.ScalingDelayed, Margin: float32(math.NaN())}, "config.margin"},
		{host.Params{Format: "fp8", AmaxEpsilon: -1}, "config.amax_epsilon"},
		{host.Params{Format: "fp8", BlockDims: 2}, "config.block_dims"},
		{host.Params{Format: "fp8", Scaling: host.ScalingDelayed, ForcePow2Scales: true}, "config.force_pow2_scales"},
		{host.Params{Format: "fp8", AmaxHistoryLen: 4}, "config.amax_history_len"},
		{host.Params{Format: "no_such_format"}, "no_such_format"},
	}
	for _, c := range cases {
		_, err := host.NewQuantizer(c.p, 0)
		require.Error(t, err, c.want)
		require.ErrorContains(t, err, c.want)
	}
}

func TestResultDoesNotDependOnThreads(t *testing.T) {
	vals := tu.Normal(300*257, 1, 2)
	in, _ := hosttest.Input(t, host.BFloat16, vals, 300, 257)
	var outs [][]byte
	for _, procs := range []int{1, 3} {
		old := runtime.GOMAXPROCS(procs)
		q := quantizer(t, host.Params{Format: "fp8"}, 0)
		qt, err := q.Quantize(in, host.QuantizeOptions{})
		require.NoError(t, err)
		outs = append(outs, append(append([]byte{}, buf(t, qt, host.DirRowwise, host.BufData).Bytes8()...), buf(t, qt, host.DirColumnwise, host.BufData).Bytes8()...))
		qt.Free()
		runtime.GOMAXPROCS(old)
	}
	require.Equal(t, outs[0], outs[1])
}

// Every BF16 and FP16 bit pattern, four times over, in a tensor large enough for
// the 16-bit table path, with a caller amax that gives an arbitrary scale.
func TestEvery16BitPatternThroughTheTablePath(t *testing.T) {
	for _, dt := range []host.DType{host.BFloat16, host.Float16} {
		for _, elem := range []host.Element{host.ElementE4M3, host.ElementE5M2} {
			ref, fp8Max := ratref.E4M3, 448.0
			if elem == host.ElementE5M2 {
				ref, fp8Max = ratref.E5M2, 57344.0
			}
			in := hosttest.Tensor(t, dt, 512, 512)
			h := in.Uint16s()
			for i := range h {
				h[i] = uint16(i)
			}
			amax := hosttest.Tensor(t, host.Float32, 2)
			amax.Float32s()[0], amax.Float32s()[1] = 3.7, 3.7
			q := quantizer(t, host.Params{Format: "fp8", Element: elem}, 0)
			qt, err := q.Quantize(in, host.QuantizeOptions{AmaxIn: &amax})
			require.NoError(t, err)
			scale := refScale(3.7, fp8Max, false, 0)
			want := make([]byte, 1<<16)
			x := make([]float32, 1<<16)
			host.LoadFloat32(in, 0, x)
			for i := range want {
				want[i] = refCast(x[i], scale, ref)
			}
			row := buf(t, qt, host.DirRowwise, host.BufData).Bytes8()
			col := buf(t, qt, host.DirColumnwise, host.BufData).Bytes8()
			for i := 0; i < 512*512; i++ {
				r, c := i/512, i%512
				if row[i] != want[i&0xFFFF] || col[c*512+r] != want[i&0xFFFF] {
					t.Fatalf("%s %s pattern %#04x: row %#02x col %#02x want %#02x", dt, elem, i&0xFFFF, row[i], col[c*512+r], want[i&0xFFFF])
				}
			}
			qt.Free()
		}
	}
}
