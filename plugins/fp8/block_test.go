package fp8

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/host"
	"libquant/host/hosttest"
)

var cpu = host.Device{Type: host.CPU}

// newInput makes a CPU [m, k] tensor of dtype dt holding vals rounded to dt,
// and returns it with the exact values it holds.
func newInput(t testing.TB, dt host.DType, m, k int, vals []float32) (host.Tensor, []float32) {
	t.Helper()
	return hosttest.Input(t, dt, vals, int64(m), int64(k))
}

// guardedStorage is a storage over buffers pre-filled with garbage and followed
// by guard bytes, to catch unzeroed padding and writes past the end.
type guardedStorage = hosttest.Guarded

func newGuardedStorage(t testing.TB, spec host.Spec, dir host.Direction, m, k int) *guardedStorage {
	t.Helper()
	return hosttest.NewGuarded(t, spec, dir, m, k)
}

func pad4i(n int) int { return (n + 3) / 4 * 4 }

// specBlockScaleIndex is where spec §6.3 puts the scale_inv of block (bi, bj)
// of a direction whose data is [rows, cols]: 1D [⌈cols/128⌉, pad4(rows)]
// indexed [bj][row]; 2D [⌈rows/128⌉, pad4(⌈cols/128⌉)] indexed [bi][bj].
func specBlockScaleIndex(dims, rows, cols, bi, bj int) int {
	if dims == 2 {
		return bi*pad4i((cols+127)/128) + bj
	}
	return bj*pad4i(rows) + bi
}

func checkBlockAgainstRef(t *testing.T, g *guardedStorage, want refBlockOut, dims, rows, cols int, x []float32) {
	t.Helper()
	scales := g.St.MustBuffer(host.BufScaleInv).Float32s()
	valid := make([]bool, len(scales))
	var bad []string
	for bi, r := range want.scaleInv {
		for bj, v := range r {
			idx := specBlockScaleIndex(dims, rows, cols, bi, bj)
			valid[idx] = true
			if math.Float32bits(scales[idx]) != math.Float32bits(v) && len(bad) < 10 {
				bad = append(bad, fmt.Sprintf("scale_inv (%d,%d): got %g want %g", bi, bj, scales[idx], v))
			}
		}
	}
	for i, ok := range valid {
		if !ok && math.Float32bits(scales[i]) != 0 && len(bad) < 10 {
			bad = append(bad, fmt.Sprintf("padded scale_inv %d is %#08x, want 0", i, math.Float32bits(scales[i])))
		}
	}
	data := g.St.MustBuffer(host.BufData).Bytes8()
	for i, c := range want.codes {
		if data[i] != c && len(bad) < 10 {
			bad = append(bad, fmt.Sprintf("code %d (data row %d, col %d): got %#02x want %#02x", i, i/cols, i%cols, data[i], c))
		}
	}
	require.Empty(t, bad)
	g.CheckGuards(t, "")
}

type blockCase struct {
	dims       int
	fp32Scales bool
	eps        float32
}

func (c blockCase) String() string {
	return fmt.Sprintf("%dD/fp32_scales=%v/eps=%g", c.dims, c.fp32Scales, c.eps)
}

var blockCases = []blockCase{{1, false, 0}, {1, true, 0}, {2, false, 0}, {2, true, 0}, {1, false, 1e-3}, {2, true, 1e-30}}

func blockSpec(t testing.TB, c blockCase) *BlockSpec {
	t.Helper()
	s, err := host.NewSpec(host.Params{Format: NameBlock, BlockDims: int32(c.dims), FP32Scales: c.fp32Scales, AmaxEpsilon: c.eps})
	require.NoError(t, err)
	return s.(*BlockSpec)
}

func checkBlockQuantize(t *testing.T, c blockCase, dt host.DType, m, k int, x []float32) {
	in, held := newInput(t, dt, m, k, x)
	spec := blockSpec(t, c)
	row := newGuardedStorage(t, spec, host.DirRowwise, m, k)
	col := newGuardedStorage(t, spec, host.DirColumnwise, m, k)
	require.NoError(t, blockKernels{}.Quantize(&host.QuantizeRequest{Spec: spec, Input: in, M: int64(m), K: int64(k),
		Out: [2]*host.Storage{row.St, col.St}}))
	vfi := map[host.DType]float32{host.BFloat16: math.Float32frombits(0x7F7F0000), host.Float16: 65504, host.Float32: math.MaxFloat32}[dt]
	t.Run("rowwise", func(t *testing.T) {
		want := refBlockQuantize(held, m, k, false, c.dims, !c.fp32Scales, c.eps, vfi)
		checkBlockAgainstRef(t, row, want, c.dims, m, k, held)
	})
	t.Run("columnwise", func(t *testing.T) {
		want := refBlockQuantize(held, m, k, true, c.dims, !c.fp32Scales, c.eps, vfi)
		checkBlockAgainstRef(t, col, want, c.dims, k, m, held)
	})
}

// randomMatrix has a random magnitude per 128×128 tile, varied within tiles.
func randomMatrix(rng *rand.Rand, m, k int) []float32 {
	x := make([]float32, m*k)
	exps := map[[2]int]int{}
	for r := 0; r < m; r++ {
		for c := 0; c < k; c++ {
			key := [2]int{r / 128, c / 128}
			e, ok := exps[key]
			if !ok {
				e = rng.IntN(200) - 100
				exps[key] = e
			}
			v := float32(math.Ldexp(1+rng.Float64(), e-rng.IntN(20)))
			if rng.IntN(2) == 0 {
				v = -v
			}
			if rng.IntN(50) == 0 {
				v = 0
			}
			x[r*k+c] = v
		}
	}
	return x
}

func TestBlockQuantizeRandomMatchesReference(t *testing.T) {
	shapes := [][2]int{{256, 384}, {200, 300}, {130, 129}, {1, 5}, {7, 260}, {129, 1}, {130, 4096 + 300}}
	for ci, c := range blockCases {
		for _, dt := range []host.DType{host.BFloat16, host.Float16, host.Float32} {
			for si, sh := range shapes {
				m, k := sh[0], sh[1]
				if si == len(shapes)-1 && (ci > 2 || dt == host.Float16) {
					continue // wider than one BF16 work item: a few cases suffice
				}
				rng := rand.New(rand.NewPCG(uint64(m), uint64(k)))
				x := randomMatrix(rng, m, k)
				t.Run(fmt.Sprintf("%s/%s/%dx%d", c, dt, m, k), func(t *testing.T) {
					checkBlockQuantize(t, c, dt, m, k, x)
				})
			}
		}
	}
}

// adversarialRows returns 128-element rows at the rules' edges: all-equal rows,
// amax at 448·2^s and its float neighbours (pow2 boundaries), amax whose
// 448/amax overflows (value_for_inf), amax below epsilon, NaN and Inf in a
// block, zero rows and values on E4M3 rounding ties at scale 1.
func adversarialRows(rng *rand.Rand) [][]float32 {
	var out [][]float32
	filled := func(v float32) []float32 {
		b := make([]float32, BlockLen)
		for i := range b {
			b[i] = v
		}
		return b
	}
	below := func(v float32) []float32 {
		b := make([]float32, BlockLen)
		for i := range b {
			b[i] = float32(rng.Float64()) * v
			if i%2 == 1 {
				b[i] = -b[i]
			}
		}
		b[rng.IntN(BlockLen)] = v
		return b
	}
	for _, v := range []float32{1, -3, 448, 1e-3, 65504, math.Float32frombits(0x7F7F0000), math.MaxFloat32, -math.MaxFloat32, math.Float32frombits(1), 1e-37} {
		out = append(out, filled(v))
	}
	for s := -150; s <= 119; s += 3 {
		a := float32(math.Ldexp(448, s))
		if a == 0 {
			continue
		}
		for _, v := range []float32{a, math.Nextafter32(a, 0), math.Nextafter32(a, float32(math.Inf(1)))} {
			out = append(out, below(v))
		}
	}
	for _, a := range []float32{1e-38, 1e-40, math.Float32frombits(0x00000100), 5e-4, 1e-3, 2e-3} {
		out = append(out, below(a)) // tiny: 448/amax overflows; around 1e-3: the epsilon of one case
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, sp := range [][]float32{{nan}, {-inf}, {inf}, {nan, inf}} {
		b := below(2)
		for i, v := range sp {
			b[3+11*i] = v
		}
		out = append(out, b)
	}
	out = append(out, filled(nan), filled(0), filled(float32(math.Copysign(0, -1))))
	// amax 448 gives scale 1 in both modes: the E4M3 midpoints are exact ties.
	g := &e4m3Grid
	b := []float32{448}
	for i, md := range g.mids {
		v := float32(md)
		if i%2 == 1 {
			v = -v
		}
		b = append(b, v)
		if len(b) == BlockLen {
			out = append(out, b)
			b = []float32{448}
		}
	}
	for len(b) < BlockLen {
		b = append(b, 1.0625) // between 1 and 1.125
	}
	return append(out, b)
}

func TestBlockQuantizeAdversarialMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	rows := adversarialRows(rng)
	const k = 2 * BlockLen
	m := (len(rows) + 1) / 2
	x := randomMatrix(rng, m, k)
	for i, r := range rows {
		copy(x[i*BlockLen:], r)
	}
	xt := make([]float32, len(x))
	for r := 0; r < m; r++ {
		for c := 0; c < k; c++ {
			xt[c*m+r] = x[r*k+c]
		}
	}
	for _, c := range blockCases {
		for _, dt := range []host.DType{host.Float32, host.BFloat16, host.Float16} {
			// Rows of x are 1D rowwise blocks; columns of its transpose are 1D columnwise ones.
			t.Run(fmt.Sprintf("%s/%s/rows", c, dt), func(t *testing.T) { checkBlockQuantize(t, c, dt, m, k, x) })
			t.Run(fmt.Sprintf("%s/%s/columns", c, dt), func(t *testing.T) { checkBlockQuantize(t, c, dt, k, m, xt) })
		}
	}
}

func TestBlockReferenceSanity(t *testing.T) {
	require.Equal(t, uint8(0x7E), refE4M3(464), "the tie past the max saturates")
	require.Equal(t, uint8(0x7E), refE4M3(float32(math.Inf(1))))
	require.Equal(t, uint8(0x80), refE4M3(float32(math.Copysign(0, -1))))
	require.Equal(t, uint8(0x08), refE4M3(0x1p-6), "smallest normal")
	require.Equal(t, float32(1), refBlockScale(448, true, 0, math.MaxFloat32))
	require.Equal(t, float32(0.5), refBlockScale(math.Nextafter32(448, 500), true, 0, math.MaxFloat32), "pow2 rounds down")
	require.Equal(t, float32(448.0/3), refBlockScale(3, false, 0, math.MaxFloat32))
	require.Equal(t, float32(1), refBlockScale(0, true, 0, 1), "zero amax")
	require.Equal(t, float32(1), refBlockScale(float32(math.Inf(1)), false, 0, 1), "inf amax")
	require.Equal(t, float32(65504), refBlockScale(1e-40, false, 0, 65504), "448/amax overflows: value_for_inf")
	require.Equal(t, float32(0x1p127), refBlockScale(1e-40, true, 0, math.MaxFloat32))
	require.Equal(t, float32(448.0/0.5), refBlockScale(0.25, false, 0.5, 1), "amax raised to epsilon")
}

func quantizeBlockAPI(t *testing.T, p host.Params, usage host.Usage, dt host.DType, m, k int, x []float32) *host.QTensor {
	t.Helper()
	q, err := host.NewQuantizer(p, usage)
	require.NoError(t, err)
	t.Cleanup(q.Release)
	in, _ := newInput(t, dt, m, k, x)
	qt, err := q.Quantize(in, host.QuantizeOptions{})
	require.NoError(t, err)
	t.Cleanup(qt.Free)
	return qt
}

func bufBytes(qt *host.QTensor, dir host.Direction, kind host.BufferKind) []byte {
	st, _ := qt.Storage(dir)
	return append([]byte(nil), st.MustBuffer(kind).Bytes8()...)
}

func dequantizeAll(t *testing.T, qt *host.QTensor, dir host.Direction, dt host.DType, m, k int) host.Tensor {
	t.Helper()
	out, err := host.AllocTensor(cpu, dt, []int64{int64(m), int64(k)}, 0)
	require.NoError(t, err)
	t.Cleanup(func() { host.FreeTensor(out, 0) })
	require.NoError(t, qt.Dequantize(dir, out, 0))
	return out
}

func TestBlockLayout(t *testing.T) {
	for _, tc := range []struct {
		dims     int32
		shape    []int64
		row, col []int64 // scale_inv shapes
	}{
		{1, []int64{200, 300}, []int64{3, 200}, []int64{2, 300}},
		{1, []int64{2, 3, 130}, []int64{2, 8}, []int64{1, 132}},
		{2, []int64{200, 300}, []int64{2, 4}, []int64{3, 4}},
		{2, []int64{1000, 129}, []int64{8, 4}, []int64{2, 8}},
	} {
		q, err := host.NewQuantizer(host.Params{Format: NameBlock, BlockDims: tc.dims}, 0)
		require.NoError(t, err)
		layout, err := q.Layout(tc.shape)
		require.NoError(t, err)
		m, k := host.Flatten2D(tc.shape)
		require.Len(t, layout, 4)
		require.Equal(t, []int64{m, k}, layout[0].Shape)
		require.Equal(t, host.E4M3, layout[0].DType)
		require.Equal(t, tc.row, layout[1].Shape, "%v rowwise scale_inv", tc.shape)
		require.Equal(t, host.Float32, layout[1].DType)
		require.Equal(t, []int64{k, m}, layout[2].Shape, "columnwise data is transposed")
		require.Equal(t, tc.col, layout[3].Shape, "%v columnwise scale_inv", tc.shape)
		q.Release()
	}
}

func TestBlockBadParams(t *testing.T) {
	for _, tc := range []struct {
		p   host.Params
		msg string
	}{
		{host.Params{Format: NameBlock, Element: host.ElementE5M2}, "config.element: e5m2 not supported by fp8_block"},
		{host.Params{Format: NameBlock, Element: host.ElementE2M1}, "config.element: e2m1"},
		{host.Params{Format: NameBlock, BlockDims: 3}, "config.block_dims: 3 is not 1"},
		{host.Params{Format: NameBlock, BlockDims: -1}, "config.block_dims: -1"},
		{host.Params{Format: NameBlock, AmaxEpsilon: -1}, "config.amax_epsilon"},
		{host.Params{Format: NameBlock, AmaxEpsilon: float32(math.NaN())}, "config.amax_epsilon"},
		{host.Params{Format: NameBlock, ScaleRounding: host.ScaleFLOOR}, "config.scale_rounding: not used by format \"fp8_block\""},
		{host.Params{Format: NameBlock, GEMMSwizzledScales: true}, "config.gemm_swizzled_scales"},
		{host.Params{Format: NameBlock, ForcePow2Scales: true}, "config.force_pow2_scales"},
		{host.Params{Format: NameBlock, Margin: 1}, "config.margin"},
	} {
		_, err := host.NewSpec(tc.p)
		require.ErrorIs(t, err, host.ErrInvalidArgument, "%+v", tc.p)
		require.ErrorContains(t, err, tc.msg)
	}
	s, err := host.NewSpec(host.Params{Format: NameBlock})
	require.NoError(t, err)
	require.Equal(t, int32(1), s.Params().BlockDims, "1x128 is the default")
	require.Equal(t, host.ElementE4M3, s.Params().Element)
}

func TestBlockDequantizeAndTiles(t *testing.T) {
	const m, k = 200, 300
	rng := rand.New(rand.NewPCG(1, 1))
	x := randomMatrix(rng, m, k)
	x[5] = float32(math.NaN())
	for _, c := range blockCases[:4] {
		qt := quantizeBlockAPI(t, host.Params{Format: NameBlock, BlockDims: int32(c.dims), FP32Scales: c.fp32Scales}, host.BothUsages, host.BFloat16, m, k, x)
		for _, dir := range []host.Direction{host.DirRowwise, host.DirColumnwise} {
			st, _ := qt.Storage(dir)
			data := st.MustBuffer(host.BufData).Bytes8()
			scales := st.MustBuffer(host.BufScaleInv).Float32s()
			rows, cols := m, k
			if dir == host.DirColumnwise {
				rows, cols = k, m
			}
			want := make([]float32, m*k)
			for r := 0; r < rows; r++ {
				for cc := 0; cc < cols; cc++ {
					bi := r
					if c.dims == 2 {
						bi = r / 128
					}
					si := scales[specBlockScaleIndex(c.dims, rows, cols, bi, cc/128)]
					v := float32(refE4M3Value(data[r*cols+cc]) * float64(si)) // exact product, one rounding
					if dir == host.DirRowwise {
						want[r*k+cc] = v
					} else {
						want[cc*k+r] = v
					}
				}
			}
			got := dequantizeAll(t, qt, dir, host.Float32, m, k).Float32s()
			for i := range want {
				if want[i] != want[i] {
					require.True(t, got[i] != got[i], "%s %s element %d: want NaN", c, dir, i)
					continue
				}
				require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "%s %s element %d", c, dir, i)
			}
			var td host.TileDequantizer = blockKernels{}
			require.Equal(t, float32(1), td.TensorScale(st, dir))
			for n := 0; n < 30; n++ {
				r0, c0 := rng.IntN(m), rng.IntN(k)
				r1, c1 := r0+1+rng.IntN(m-r0), c0+1+rng.IntN(k-c0)
				transposed := n%2 == 0
				ld := c1 - c0
				if transposed {
					ld = r1 - r0
				}
				dst := make([]float32, (r1-r0)*(c1-c0))
				td.DequantizeTile(st, dir, m, k, int64(r0), int64(r1), int64(c0), int64(c1), dst, ld, transposed)
				for r := r0; r < r1; r++ {
					for cc := c0; cc < c1; cc++ {
						at := (r-r0)*ld + (cc - c0)
						if transposed {
							at = (cc-c0)*ld + (r - r0)
						}
						v := dst[at]
						w := got[r*k+cc]
						require.True(t, math.Float32bits(v) == math.Float32bits(w) || (v != v && w != w),
							"%s %s tile [%d,%d)x[%d,%d) transposed=%v at (%d,%d): %g vs %g", c, dir, r0, r1, c0, c1, transposed, r, cc, v, w)
					}
				}
			}
		}
	}
}

func TestBlockUpdateUsage(t *testing.T) {
	const m, k = 300, 200
	rng := rand.New(rand.NewPCG(2, 2))
	x := randomMatrix(rng, m, k)
	for _, fp32 := range []bool{false, true} {
		p := host.Params{Format: NameBlock, BlockDims: 2, FP32Scales: fp32}
		both := quantizeBlockAPI(t, p, host.BothUsages, host.Float32, m, k, x)
		qt := quantizeBlockAPI(t, p, host.Rowwise, host.Float32, m, k, x)
		require.NoError(t, qt.UpdateUsage(host.BothUsages, 0), "2D derives columnwise")
		require.Equal(t, host.BothUsages, qt.Usage())
		for _, kind := range []host.BufferKind{host.BufData, host.BufScaleInv} {
			require.Equal(t, bufBytes(both, host.DirColumnwise, kind), bufBytes(qt, host.DirColumnwise, kind), "derived columnwise %s equals a direct quantize", kind)
		}
		require.NoError(t, qt.UpdateUsage(host.Columnwise, 0))
		err := qt.UpdateUsage(host.BothUsages, 0)
		require.ErrorIs(t, err, host.ErrState, "rowwise cannot come from columnwise")
	}
	qt := quantizeBlockAPI(t, host.Params{Format: NameBlock}, host.Rowwise, host.Float32, m, k, x)
	err := qt.UpdateUsage(host.BothUsages, 0)
	require.ErrorIs(t, err, host.ErrState, "1D cannot derive")
	require.ErrorContains(t, err, "cannot derive columnwise")
	require.NoError(t, qt.UpdateUsage(host.Rowwise, 0))

	err = qt.SetGEMMSwizzledScales(true, 0)
	require.ErrorIs(t, err, host.ErrUnsupported, "fp8_block has only the GEMM-ready layout")
}

func TestBlockThreadCountDoesNotChangeBytes(t *testing.T) {
	const m, k = 520, 390
	rng := rand.New(rand.NewPCG(4, 4))
	x := randomMatrix(rng, m, k)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, dims := range []int32{1, 2} {
		var first [2][]byte
		for _, procs := range []int{1, 2, 7} {
			runtime.GOMAXPROCS(procs)
			qt := quantizeBlockAPI(t, host.Params{Format: NameBlock, BlockDims: dims}, host.BothUsages, host.BFloat16, m, k, x)
			for d := range first {
				b := append(bufBytes(qt, host.Direction(d), host.BufData), bufBytes(qt, host.Direction(d), host.BufScaleInv)...)
				if first[d] == nil {
					first[d] = b
				}
				require.Equal(t, first[d], b, "%dD %s with GOMAXPROCS %d", dims, host.Direction(d), procs)
			}
		}
	}
}

func TestBlockEmptyShapes(t *testing.T) {
	for _, dims := range []int32{1, 2} {
		for _, sh := range [][]int64{{0, 64}, {64, 0}, {0, 0}, {3, 0, 5}} {
			q, err := host.NewQuantizer(host.Params{Format: NameBlock, BlockDims: dims}, 0)
			require.NoError(t, err)
			in, err := host.AllocTensor(cpu, host.BFloat16, sh, 0)
			require.NoError(t, err)
			qt, err := q.Quantize(in, host.QuantizeOptions{})
			require.NoError(t, err, "%dD %v", dims, sh)
			for _, dir := range []host.Direction{host.DirRowwise, host.DirColumnwise} {
				require.NoError(t, qt.Dequantize(dir, in, 0))
			}
			qt.Free()
			host.FreeTensor(in, 0)
			q.Release()
		}
	}
}
