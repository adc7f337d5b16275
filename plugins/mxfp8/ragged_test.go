package mxfp8

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/host"
)

// raggedDims are the dims spec §14's tests run at (issue #18).
var raggedDims = []int{1, 2, 15, 16, 17, 31, 33, 47, 100, 129}

// raggedShapes is every dim of raggedDims as M with a few K, as K with a few M,
// and some pairs (not the full cross product: each shape runs every option).
func raggedShapes() [][2]int {
	var out [][2]int
	for _, d := range raggedDims {
		out = append(out, [2]int{d, 33}, [2]int{d, 64}, [2]int{17, d}, [2]int{96, d})
	}
	return append(out, [2]int{1, 1}, [2]int{2, 2}, [2]int{47, 100}, [2]int{100, 47}, [2]int{129, 129}, [2]int{31, 15})
}

// raggedInput is an [m, k] matrix whose magnitudes vary by 32×32 tile, with
// random signs and some zeros, and whose last valid row and column are larger
// than anything else in their tile: every partial block's amax is its last
// valid element (the case a kernel that reads past the edge, or forgets a
// tail, gets wrong).
func raggedInput(rng *rand.Rand, m, k int) []float32 {
	x := make([]float32, m*k)
	exps := map[[2]int]int{}
	for r := 0; r < m; r++ {
		for c := 0; c < k; c++ {
			key := [2]int{r / 32, c / 32}
			e, ok := exps[key]
			if !ok {
				e = rng.IntN(200) - 100
				exps[key] = e
			}
			v := float32(math.Ldexp(1+rng.Float64(), e-1-rng.IntN(8))) // < 2^e
			if r == m-1 || c == k-1 {
				v = float32(math.Ldexp(1+rng.Float64(), e)) // ≥ 2^e
			}
			switch rng.IntN(16) {
			case 0:
				if r != m-1 && c != k-1 {
					v = 0
				}
			case 1, 2, 3, 4, 5, 6, 7:
				v = -v
			}
			x[r*k+c] = v
		}
	}
	return x
}

// padMatrix is x [m, k] zero-padded to [m0, k0].
func padMatrix(x []float32, m, k, m0, k0 int) []float32 {
	y := make([]float32, m0*k0)
	for r := 0; r < m; r++ {
		copy(y[r*k0:], x[r*k:(r+1)*k])
	}
	return y
}

// TestRaggedShapesFollowThePaddedTensor checks spec §14 item 1 and 4 directly:
// quantizing X [M, K] gives, at every valid element and every block with a
// valid element, the bytes of X₀ (X zero-padded to multiples of 32), and
// every other byte of the ragged buffers is zero (scale padding, the high
// nibble of an odd packed row), with nothing written past the buffers; for
// every element type, scale rounding, scale layout, input dtype and
// direction (one direction alone and both together).
func TestRaggedShapesFollowThePaddedTensor(t *testing.T) {
	for si, sh := range raggedShapes() {
		m, k := sh[0], sh[1]
		m0, k0 := pad(m, BlockLen), pad(k, BlockLen)
		rng := rand.New(rand.NewPCG(uint64(m), uint64(k)))
		x := raggedInput(rng, m, k)
		if si%2 == 1 {
			// An Inf last element: with FLOOR its blocks get the NaN scale, so
			// X₀'s padded codes are not zero and the ragged buffer must drop
			// them (the high nibble of an odd packed row).
			x[k-1] = float32(math.Inf(1))
		}
		x0 := padMatrix(x, m, k, m0, k0)
		for _, fc := range formatCases {
			for _, dt := range []host.DType{host.BFloat16, host.Float32} {
				in, _ := newInput(t, dt, m, k, x)
				in0, _ := newInput(t, dt, m0, k0, x0)
				for _, rounding := range []host.ScaleRounding{host.ScaleRCEIL, host.ScaleFLOOR} {
					swizzled := (si+int(rounding))%2 == 1
					spec := mustSpec(t, host.Params{Format: fc.format, Element: fc.element, ScaleRounding: rounding, GEMMSwizzledScales: swizzled})
					name := fmt.Sprintf("%dx%d/%s/%s/rounding=%d/swizzled=%v", m, k, fc, dt, rounding, swizzled)
					row0, col0 := quantizeBoth(t, spec, in0, m0, k0)
					want := [2]*guarded{row0, col0}
					for _, dirs := range [][]host.Direction{{host.DirRowwise}, {host.DirColumnwise}, {host.DirRowwise, host.DirColumnwise}} {
						var out [2]*host.Storage
						var got [2]*guarded
						for _, d := range dirs {
							got[d] = newGuarded(t, spec, d, m, k)
							out[d] = got[d].St
						}
						require.NoError(t, kernels{}.Quantize(&host.QuantizeRequest{Spec: spec, Input: in, M: int64(m), K: int64(k), Out: out}), name)
						for _, d := range dirs {
							checkRaggedDir(t, name, fc.format, d, m, k, swizzled, got[d], want[d])
						}
					}
				}
			}
		}
	}
}

// checkRaggedDir compares direction dir of a ragged [m, k] quantize (got) with
// that of its padded tensor (want), byte for byte, per spec §14.
func checkRaggedDir(t *testing.T, name, format string, dir host.Direction, m, k int, swizzled bool, got, want *guarded) {
	t.Helper()
	m0, k0 := pad(m, BlockLen), pad(k, BlockLen)
	ni, nj := m, ceil(k, BlockLen)
	if dir == host.DirColumnwise {
		ni, nj = k, ceil(m, BlockLen)
	}
	scales, scales0 := got.scales(), want.scales()
	require.Len(t, scales, len(scales0), "%s %s: the scale buffers of X and X₀ have one shape", name, dir)
	valid := make([]bool, len(scales))
	for i := 0; i < ni; i++ {
		for j := 0; j < nj; j++ {
			idx := specScaleIndex(format, dir, m, k, i, j, swizzled)
			require.Equal(t, specScaleIndex(format, dir, m0, k0, i, j, swizzled), idx)
			valid[idx] = true
			if scales[idx] != scales0[idx] {
				t.Fatalf("%s %s: scale (%d,%d) = %#02x, X₀ gives %#02x", name, dir, i, j, scales[idx], scales0[idx])
			}
		}
	}
	for idx, ok := range valid {
		if !ok && scales[idx] != 0 {
			t.Fatalf("%s %s: padding scale byte %d = %#02x, want 0", name, dir, idx, scales[idx])
		}
	}
	data, data0 := got.data(), want.data()
	for r := 0; r < m; r++ {
		for c := 0; c < k; c++ {
			if a, b := codeAt(format, dir, data, m, k, r, c), codeAt(format, dir, data0, m0, k0, r, c); a != b {
				t.Fatalf("%s %s: code (%d,%d) = %#02x, X₀ gives %#02x", name, dir, r, c, a, b)
			}
		}
	}
	if format == NameMXFP4 {
		rows, n := m, k
		if dir == host.DirColumnwise {
			rows, n = k, m
		}
		require.Len(t, data, rows*ceil(n, 2), "%s %s: packed data is [rows, ⌈n/2⌉]", name, dir)
		if n%2 == 1 {
			for r := 0; r < rows; r++ {
				if b := data[r*ceil(n, 2)+n/2]; b>>4 != 0 {
					t.Fatalf("%s %s: row %d's last byte %#02x has a non-zero high nibble", name, dir, r, b)
				}
			}
		}
	} else {
		require.Len(t, data, m*k, "%s %s: data is [M, K]", name, dir)
	}
	got.CheckGuards(t, name)
}

// TestRaggedDequantizeFollowsThePaddedTensor: dequantize of a ragged tensor is
// [M, K] and equals the valid part of X₀'s dequantize, bit for bit, in every
// output dtype (spec §14 item 4); NaN and Inf inputs included.
func TestRaggedDequantizeFollowsThePaddedTensor(t *testing.T) {
	for _, sh := range [][2]int{{1, 1}, {45, 97}, {17, 33}, {100, 31}, {129, 2}} {
		m, k := sh[0], sh[1]
		m0, k0 := pad(m, BlockLen), pad(k, BlockLen)
		rng := rand.New(rand.NewPCG(uint64(m), 7))
		x := raggedInput(rng, m, k)
		if m > 2 && k > 40 {
			x = withSpecials(x, k)
		}
		x0 := padMatrix(x, m, k, m0, k0)
		for _, fc := range formatCases {
			for _, rounding := range []host.ScaleRounding{host.ScaleRCEIL, host.ScaleFLOOR} {
				p := host.Params{Format: fc.format, Element: fc.element, ScaleRounding: rounding}
				qt, _ := quantizeAPI(t, p, host.BFloat16, m, k, x)
				qt0, _ := quantizeAPI(t, p, host.BFloat16, m0, k0, x0)
				for _, dir := range []host.Direction{host.DirRowwise, host.DirColumnwise} {
					for _, dt := range []host.DType{host.Float32, host.BFloat16, host.Float16} {
						got := dequantize(t, qt, dir, dt, m, k)
						want := dequantize(t, qt0, dir, dt, m0, k0)
						es := int(dt.Size())
						gb, wb := got.Bytes8(), want.Bytes8()
						for r := 0; r < m; r++ {
							require.Equal(t, wb[r*k0*es:(r*k0+k)*es], gb[r*k*es:(r+1)*k*es], "%dx%d %s %s %s row %d", m, k, fc, dir, dt, r)
						}
					}
				}
			}
		}
	}
}
