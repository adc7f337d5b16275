package mxfp8

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/host"
	"libquant/internal/numeric"
)

func TestLayout(t *testing.T) {
	for _, tc := range []struct {
		p        host.Params
		shape    []int64
		row, col [2][]int64 // data, scale_inv
		dtype    host.DType
	}{
		{host.Params{Format: NameMXFP8}, []int64{64, 96},
			[2][]int64{{64, 96}, {128, 4}}, [2][]int64{{64, 96}, {4, 128}}, host.E4M3},
		{host.Params{Format: NameMXFP8, Element: host.ElementE5M2, GEMMSwizzledScales: true}, []int64{2, 96, 320},
			[2][]int64{{192, 320}, {256, 12}}, [2][]int64{{192, 320}, {8, 384}}, host.E5M2},
		{host.Params{Format: NameMXFP4}, []int64{64, 96},
			[2][]int64{{64, 48}, {128, 4}}, [2][]int64{{96, 32}, {128, 4}}, host.Uint8},
		{host.Params{Format: NameMXFP4, ScaleRounding: host.ScaleFLOOR}, []int64{160, 4096},
			[2][]int64{{160, 2048}, {256, 128}}, [2][]int64{{4096, 80}, {4096, 8}}, host.Uint8},
		// Any shape (spec §14 item 4): partial blocks count, packed rows are
		// ⌈n/2⌉ bytes.
		{host.Params{Format: NameMXFP8}, []int64{45, 97},
			[2][]int64{{45, 97}, {128, 4}}, [2][]int64{{45, 97}, {4, 128}}, host.E4M3},
		{host.Params{Format: NameMXFP8}, []int64{1, 129},
			[2][]int64{{1, 129}, {128, 8}}, [2][]int64{{1, 129}, {4, 256}}, host.E4M3},
		{host.Params{Format: NameMXFP4}, []int64{45, 97},
			[2][]int64{{45, 49}, {128, 4}}, [2][]int64{{97, 23}, {128, 4}}, host.Uint8},
		{host.Params{Format: NameMXFP4}, []int64{1, 1},
			[2][]int64{{1, 1}, {128, 4}}, [2][]int64{{1, 1}, {128, 4}}, host.Uint8},
		{host.Params{Format: NameMXFP4}, []int64{129, 4097},
			[2][]int64{{129, 2049}, {256, 132}}, [2][]int64{{4097, 65}, {4224, 8}}, host.Uint8},
	} {
		t.Run(fmt.Sprintf("%s/%v", tc.p.Format, tc.shape), func(t *testing.T) {
			q, err := host.NewQuantizer(tc.p, 0)
			require.NoError(t, err)
			defer q.Release()
			layout, err := q.Layout(tc.shape)
			require.NoError(t, err)
			require.Len(t, layout, 4)
			want := [][]int64{tc.row[0], tc.row[1], tc.col[0], tc.col[1]}
			for i, l := range layout {
				require.Equal(t, host.Direction(i/2), l.Dir)
				require.Equal(t, want[i], l.Shape, "buffer %d", i)
				if i%2 == 0 {
					require.Equal(t, host.BufData, l.Kind)
					require.Equal(t, tc.dtype, l.DType)
				} else {
					require.Equal(t, host.BufScaleInv, l.Kind)
					require.Equal(t, host.E8M0, l.DType)
				}
			}
		})
	}
}

// TestAnyShapeIsAccepted: the shapes TE refuses (spec §4.2) are accepted
// (spec §14); a negative dim, which only a direct caller can pass (the host
// checks shapes first), is refused naming the dim.
func TestAnyShapeIsAccepted(t *testing.T) {
	for _, format := range []string{NameMXFP8, NameMXFP4} {
		q, err := host.NewQuantizer(host.Params{Format: format}, host.BothUsages)
		require.NoError(t, err)
		for _, shape := range [][]int64{{48, 64}, {2, 3, 64}, {64, 40}, {33}, {1, 1}} {
			_, err := q.Layout(shape)
			require.NoError(t, err, "%s %v", format, shape)
			in, err := host.AllocTensor(cpu, host.BFloat16, shape, 0)
			require.NoError(t, err)
			qt, err := q.Quantize(in, host.QuantizeOptions{})
			host.FreeTensor(in, 0)
			require.NoError(t, err, "%s %v", format, shape)
			qt.Free()
		}
		q.Release()
		s := mustSpec(t, host.Params{Format: format})
		_, err = s.Layout(-1, 64, host.DirRowwise)
		require.ErrorIs(t, err, host.ErrInvalidArgument)
		require.ErrorContains(t, err, "M = -1")
		_, err = s.Layout(32, -3, host.DirRowwise)
		require.ErrorIs(t, err, host.ErrInvalidArgument)
		require.ErrorContains(t, err, "K = -3")
	}
}

func TestBadParams(t *testing.T) {
	for _, tc := range []struct {
		p   host.Params
		msg string
	}{
		{host.Params{Format: NameMXFP8, Element: host.ElementE2M1}, "config.element: e2m1 not supported by mxfp8"},
		{host.Params{Format: NameMXFP8, Element: 9}, "config.element"},
		{host.Params{Format: NameMXFP4, Element: host.ElementE4M3}, "config.element: e4m3 not supported by mxfp4"},
		{host.Params{Format: NameMXFP4, ScaleRounding: 2}, "config.scale_rounding: 2"},
		{host.Params{Format: NameMXFP8, BlockDims: 2}, "config.block_dims: not used by format \"mxfp8\""},
		{host.Params{Format: NameMXFP8, FP32Scales: true}, "config.fp32_scales"},
		{host.Params{Format: NameMXFP4, AmaxEpsilon: 1}, "config.amax_epsilon"},
		{host.Params{Format: NameMXFP4, ForcePow2Scales: true}, "config.force_pow2_scales"},
		{host.Params{Format: NameMXFP8, Scaling: host.ScalingDelayed}, "config.scaling"},
		{host.Params{Format: NameMXFP8, StochasticRounding: true}, "config.stochastic_rounding"},
	} {
		_, err := host.NewSpec(tc.p)
		require.ErrorIs(t, err, host.ErrInvalidArgument, "%+v", tc.p)
		require.ErrorContains(t, err, tc.msg)
	}
	s := mustSpec(t, host.Params{Format: NameMXFP8})
	require.Equal(t, host.ElementE4M3, s.Params().Element, "e4m3 is mxfp8's default")
	s = mustSpec(t, host.Params{Format: NameMXFP4})
	require.Equal(t, host.ElementE2M1, s.Params().Element)
}

// quantizeAPI quantizes x through the host with p and both usages.
func quantizeAPI(t *testing.T, p host.Params, dt host.DType, m, k int, x []float32) (*host.QTensor, []float32) {
	t.Helper()
	q, err := host.NewQuantizer(p, host.BothUsages)
	require.NoError(t, err)
	t.Cleanup(q.Release)
	in, held := newInput(t, dt, m, k, x)
	qt, err := q.Quantize(in, host.QuantizeOptions{})
	require.NoError(t, err)
	t.Cleanup(qt.Free)
	return qt, held
}

// sameFloats compares bit patterns, treating every NaN as equal (NaN payloads
// are not specified) except the test's sentinel NaN, which must match exactly.
func sameFloats(t *testing.T, want, got []float32, msg string) {
	t.Helper()
	const sentinel = 0x7FA5A5A5
	bad := 0
	for i := range want {
		w, g := want[i], got[i]
		wb, gb := math.Float32bits(w), math.Float32bits(g)
		nanPair := w != w && g != g && (wb == sentinel) == (gb == sentinel)
		if wb != gb && !nanPair {
			if bad < 5 {
				t.Errorf("%s: element %d: got %g (%#08x), want %g (%#08x)", msg, i, g, math.Float32bits(g), w, math.Float32bits(w))
			}
			bad++
		}
	}
	require.Zero(t, bad, "%s: %d elements differ", msg, bad)
}

func dequantize(t *testing.T, qt *host.QTensor, dir host.Direction, dt host.DType, m, k int) host.Tensor {
	t.Helper()
	out, err := host.AllocTensor(cpu, dt, []int64{int64(m), int64(k)}, 0)
	require.NoError(t, err)
	t.Cleanup(func() { host.FreeTensor(out, 0) })
	require.NoError(t, qt.Dequantize(dir, out, 0))
	return out
}

// withNaNBlock puts a NaN and an Inf into the input so that the NaN scale path
// is dequantized too.
func withSpecials(x []float32, k int) []float32 {
	x[3] = float32(math.NaN())
	x[2*k+40] = float32(math.Inf(-1))
	return x
}

func TestDequantizeMatchesReference(t *testing.T) {
	const m, k = 96, 192
	for _, fc := range formatCases {
		for _, swizzled := range []bool{false, true} {
			p := host.Params{Format: fc.format, Element: fc.element, GEMMSwizzledScales: swizzled}
			rng := rand.New(rand.NewPCG(3, uint64(fc.element)))
			qt, _ := quantizeAPI(t, p, host.BFloat16, m, k, withSpecials(randomBlocks(rng, m, k), k))
			el := refElemOf(fc.element)
			for _, dir := range []host.Direction{host.DirRowwise, host.DirColumnwise} {
				t.Run(fmt.Sprintf("%s/swizzled=%v/%s", fc, swizzled, dir), func(t *testing.T) {
					st, _ := qt.Storage(dir)
					data := st.MustBuffer(host.BufData).Bytes8()
					scales := st.MustBuffer(host.BufScaleInv).Bytes8()
					want := make([]float32, m*k)
					for r := 0; r < m; r++ {
						for c := 0; c < k; c++ {
							i, j := r, c/32
							if dir == host.DirColumnwise {
								i, j = c, r/32
							}
							e := scales[specScaleIndex(fc.format, dir, m, k, i, j, swizzled)]
							want[r*k+c] = refDequant(e, codeAt(fc.format, dir, data, m, k, r, c), el)
						}
					}
					got := dequantize(t, qt, dir, host.Float32, m, k).Float32s()
					sameFloats(t, want, got, "fp32 output")
					for _, dt := range []host.DType{host.BFloat16, host.Float16} {
						out := dequantize(t, qt, dir, dt, m, k).Uint16s()
						for i, v := range want {
							w, nan := numeric.Float32ToBF16(v), out[i]&0x7FFF > 0x7F80
							if dt == host.Float16 {
								w, nan = numeric.Float32ToFP16(v), out[i]&0x7FFF > 0x7C00
							}
							if v != v { // NaN payloads are not specified
								require.True(t, nan, "%s output element %d: want NaN, got %#04x", dt, i, out[i])
								continue
							}
							require.Equal(t, w, out[i], "%s output element %d (%g)", dt, i, v)
						}
					}
				})
			}
		}
	}
}

func TestTileDequantizerMatchesDequantize(t *testing.T) {
	for _, sh := range [][2]int{{128, 160}, {45, 97}, {33, 1}} { // aligned and ragged (spec §14)
		testTileDequantizer(t, sh[0], sh[1])
	}
}

func testTileDequantizer(t *testing.T, m, k int) {
	var td host.TileDequantizer = kernels{}
	for _, fc := range formatCases {
		for _, swizzled := range []bool{false, true} {
			p := host.Params{Format: fc.format, Element: fc.element, GEMMSwizzledScales: swizzled}
			rng := rand.New(rand.NewPCG(5, uint64(fc.element)))
			x := randomBlocks(rng, m, k)
			if k > 40 {
				x = withSpecials(x, k)
			}
			qt, _ := quantizeAPI(t, p, host.Float32, m, k, x)
			for _, dir := range []host.Direction{host.DirRowwise, host.DirColumnwise} {
				full := dequantize(t, qt, dir, host.Float32, m, k).Float32s()
				st, _ := qt.Storage(dir)
				require.Equal(t, float32(1), td.TensorScale(st, dir))
				for n := 0; n < 40; n++ {
					r0, c0 := rng.IntN(m), rng.IntN(k)
					r1, c1 := r0+1+rng.IntN(m-r0), c0+1+rng.IntN(k-c0)
					transposed := n%2 == 1
					ld := (c1 - c0) + rng.IntN(3)
					if transposed {
						ld = (r1 - r0) + rng.IntN(3)
					}
					rows := r1 - r0
					if transposed {
						rows = c1 - c0
					}
					const sentinel = 0x7FA5A5A5
					dst := make([]float32, rows*ld)
					for i := range dst {
						dst[i] = math.Float32frombits(sentinel)
					}
					td.DequantizeTile(st, dir, int64(m), int64(k), int64(r0), int64(r1), int64(c0), int64(c1), dst, ld, transposed)
					want := make([]float32, len(dst))
					for i := range want {
						want[i] = math.Float32frombits(sentinel)
					}
					for r := r0; r < r1; r++ {
						for c := c0; c < c1; c++ {
							if transposed {
								want[(c-c0)*ld+(r-r0)] = full[r*k+c]
							} else {
								want[(r-r0)*ld+(c-c0)] = full[r*k+c]
							}
						}
					}
					sameFloats(t, want, dst, fmt.Sprintf("%s swizzled=%v %s tile [%d,%d)x[%d,%d) transposed=%v ld=%d", fc, swizzled, dir, r0, r1, c0, c1, transposed, ld))
				}
			}
		}
	}
}

func scaleBytes(qt *host.QTensor, dir host.Direction) []byte {
	st, _ := qt.Storage(dir)
	return append([]byte(nil), st.MustBuffer(host.BufScaleInv).Bytes8()...)
}

func dataBytes(qt *host.QTensor, dir host.Direction) []byte {
	st, _ := qt.Storage(dir)
	return append([]byte(nil), st.MustBuffer(host.BufData).Bytes8()...)
}

// TestSwizzleRoundTrip: compact → swizzled matches the spec's permutation of
// the compact bytes (padding zero) and a quantize that writes swizzled scales
// directly; swizzled → compact gives the original bytes back.
func TestSwizzleRoundTrip(t *testing.T) {
	for _, sh := range [][2]int{{96, 160}, {160, 4128}, {45, 97}, {129, 33}} {
		m, k := sh[0], sh[1]
		for _, fc := range formatCases {
			t.Run(fmt.Sprintf("%s/%dx%d", fc, m, k), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(11, uint64(m)))
				x := randomBlocks(rng, m, k)
				p := host.Params{Format: fc.format, Element: fc.element}
				qt, _ := quantizeAPI(t, p, host.BFloat16, m, k, x)
				p.GEMMSwizzledScales = true
				direct, _ := quantizeAPI(t, p, host.BFloat16, m, k, x)

				var compact [2][]byte
				var deq [2][]float32
				for d := range compact {
					compact[d] = scaleBytes(qt, host.Direction(d))
					deq[d] = append([]float32(nil), dequantize(t, qt, host.Direction(d), host.Float32, m, k).Float32s()...)
				}
				require.NoError(t, qt.SetGEMMSwizzledScales(true, 0))
				for d, dir := range []host.Direction{host.DirRowwise, host.DirColumnwise} {
					st, _ := qt.Storage(dir)
					require.True(t, st.Spec.Params().GEMMSwizzledScales)
					ni, nj := m, ceil(k, 32)
					if dir == host.DirColumnwise {
						ni, nj = k, ceil(m, 32)
					}
					want := make([]byte, len(compact[d]))
					for i := 0; i < ni; i++ {
						for j := 0; j < nj; j++ {
							want[specScaleIndex(fc.format, dir, m, k, i, j, true)] = compact[d][specScaleIndex(fc.format, dir, m, k, i, j, false)]
						}
					}
					require.Equal(t, want, scaleBytes(qt, dir), "%s: swizzled bytes", dir)
					require.Equal(t, scaleBytes(direct, dir), scaleBytes(qt, dir), "%s: converted vs written swizzled", dir)
					require.Equal(t, dataBytes(direct, dir), dataBytes(qt, dir), "%s: data", dir)
					sameFloats(t, deq[d], dequantize(t, qt, dir, host.Float32, m, k).Float32s(), "dequantize from swizzled scales")
				}
				require.NoError(t, qt.SetGEMMSwizzledScales(true, 0), "already swizzled: no-op")
				require.NoError(t, qt.SetGEMMSwizzledScales(false, 0))
				for d := range compact {
					require.Equal(t, compact[d], scaleBytes(qt, host.Direction(d)), "back to compact")
				}
			})
		}
	}
}

func TestUpdateUsageCanOnlyDrop(t *testing.T) {
	for _, fc := range formatCases {
		rng := rand.New(rand.NewPCG(1, 2))
		qt, _ := quantizeAPI(t, host.Params{Format: fc.format, Element: fc.element}, host.BFloat16, 64, 64, randomBlocks(rng, 64, 64))
		row := dataBytes(qt, host.DirRowwise)
		require.NoError(t, qt.UpdateUsage(host.Rowwise, 0))
		require.Equal(t, host.Rowwise, qt.Usage())
		require.Equal(t, row, dataBytes(qt, host.DirRowwise))
		err := qt.UpdateUsage(host.BothUsages, 0)
		require.ErrorIs(t, err, host.ErrState, fc.String())
		require.ErrorContains(t, err, "cannot derive columnwise data from rowwise data")
		require.Equal(t, host.Rowwise, qt.Usage(), "unchanged on error")
		require.False(t, mustSpec(t, host.Params{Format: fc.format}).Derivable(host.DirRowwise, host.DirColumnwise))
		require.False(t, mustSpec(t, host.Params{Format: fc.format}).Derivable(host.DirColumnwise, host.DirRowwise))
	}
	err := kernels{}.Derive(&host.DeriveRequest{Spec: mustSpec(t, host.Params{Format: NameMXFP4}), FromDir: host.DirColumnwise, ToDir: host.DirRowwise})
	require.True(t, errors.Is(err, host.ErrState))
}

// TestThreadCountDoesNotChangeBytes: tiles are independent, so GOMAXPROCS only
// changes who computes them.
func TestThreadCountDoesNotChangeBytes(t *testing.T) {
	const m, k = 256, 416
	rng := rand.New(rand.NewPCG(9, 9))
	x := randomBlocks(rng, m, k)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, fc := range formatCases {
		var first [2][]byte
		for _, procs := range []int{1, 2, 5} {
			runtime.GOMAXPROCS(procs)
			qt, _ := quantizeAPI(t, host.Params{Format: fc.format, Element: fc.element, ScaleRounding: host.ScaleFLOOR}, host.Float16, m, k, x)
			for d := range first {
				b := append(dataBytes(qt, host.Direction(d)), scaleBytes(qt, host.Direction(d))...)
				if first[d] == nil {
					first[d] = b
				}
				require.Equal(t, first[d], b, "%s %s with GOMAXPROCS %d", fc, host.Direction(d), procs)
			}
		}
	}
}

func TestAmaxReportsTheTensorAmax(t *testing.T) {
	x := make([]float32, 64*32)
	x[77] = -5.5
	x[78] = float32(math.NaN())
	in, _ := newInput(t, host.Float32, 64, 32, x)
	out, err := host.AllocTensor(cpu, host.Float32, []int64{2}, 0)
	require.NoError(t, err)
	defer host.FreeTensor(out, 0)
	q, err := host.NewQuantizer(host.Params{Format: NameMXFP8}, 0)
	require.NoError(t, err)
	defer q.Release()
	require.NoError(t, q.ComputeAmax(in, out, 0))
	require.Equal(t, []float32{5.5, 5.5}, out.Float32s())
}
