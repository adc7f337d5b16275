package mxfp8

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/host"
)

// formatCase is one format with one element type.
type formatCase struct {
	format  string
	element host.Element
}

var formatCases = []formatCase{
	{NameMXFP8, host.ElementE4M3},
	{NameMXFP8, host.ElementE5M2},
	{NameMXFP4, host.ElementE2M1},
}

func (f formatCase) String() string { return fmt.Sprintf("%s_%s", f.format, f.element) }

func mustSpec(t testing.TB, p host.Params) *Spec {
	t.Helper()
	s, err := host.NewSpec(p)
	require.NoError(t, err)
	return s.(*Spec)
}

// quantizeBoth runs the kernel on x for both directions into guarded buffers.
func quantizeBoth(t *testing.T, spec *Spec, in host.Tensor, m, k int) (row, col *guarded) {
	t.Helper()
	row = newGuarded(t, spec, host.DirRowwise, m, k)
	col = newGuarded(t, spec, host.DirColumnwise, m, k)
	err := kernels{}.Quantize(&host.QuantizeRequest{Spec: spec, Input: in, M: int64(m), K: int64(k),
		Out: [2]*host.Storage{row.St, col.St}})
	require.NoError(t, err)
	return row, col
}

// checkQuantize quantizes x ([m, k] float32 values rounded to dt) in both
// directions, with both scale roundings and both scale layouts, and compares
// every byte with the exact reference.
func checkQuantize(t *testing.T, fc formatCase, dt host.DType, m, k int, x []float32, layouts []bool) {
	in, held := newInput(t, dt, m, k, x)
	el := refElemOf(fc.element)
	for _, rounding := range []host.ScaleRounding{host.ScaleRCEIL, host.ScaleFLOOR} {
		want := [2]refMX{
			refQuantize(held, m, k, host.DirRowwise, el, rounding),
			refQuantize(held, m, k, host.DirColumnwise, el, rounding),
		}
		for _, swizzled := range layouts {
			name := fmt.Sprintf("rounding=%d/swizzled=%v", rounding, swizzled)
			spec := mustSpec(t, host.Params{Format: fc.format, Element: fc.element, ScaleRounding: rounding, GEMMSwizzledScales: swizzled})
			row, col := quantizeBoth(t, spec, in, m, k)
			t.Run(name+"/rowwise", func(t *testing.T) {
				checkAgainstRef(t, row, want[0], fc.format, host.DirRowwise, m, k, swizzled, held)
			})
			t.Run(name+"/columnwise", func(t *testing.T) {
				checkAgainstRef(t, col, want[1], fc.format, host.DirColumnwise, m, k, swizzled, held)
			})
		}
	}
}

func TestQuantizeRandomMatchesReference(t *testing.T) {
	shapes := [][2]int{{64, 160}, {32, 32}, {160, 96}, {32, 8192 + 96}}
	for _, fc := range formatCases {
		for _, dt := range []host.DType{host.BFloat16, host.Float16, host.Float32} {
			for si, sh := range shapes {
				m, k := sh[0], sh[1]
				if k > bandCols && dt != host.BFloat16 {
					continue // wider than one BF16 work item: only the BF16 path chunks by bandCols
				}
				rng := rand.New(rand.NewPCG(uint64(m*k), uint64(dt)))
				x := randomBlocks(rng, m, k)
				layouts := []bool{false}
				if si == 0 {
					layouts = append(layouts, true) // the swizzled layout on the first shape
				}
				t.Run(fmt.Sprintf("%s/%s/%dx%d", fc, dt, m, k), func(t *testing.T) {
					checkQuantize(t, fc, dt, m, k, x, layouts)
				})
			}
		}
	}
}

// adversarialBlocks lists 32-element blocks at the edges of the rules for
// element el: all-equal blocks, amax at exact powers of two times the element
// max and at their float neighbours, subnormal-only blocks, NaN and Inf in a
// block, zero blocks, and values on rounding ties after scaling.
func adversarialBlocks(rng *rand.Rand, el *refElem) [][]float32 {
	var out [][]float32
	filled := func(v float32) []float32 {
		b := make([]float32, BlockLen)
		for i := range b {
			b[i] = v
		}
		return b
	}
	// below returns a block of random values up to |v| with v itself at a random position.
	below := func(v float32) []float32 {
		b := make([]float32, BlockLen)
		for i := range b {
			b[i] = float32(rng.Float64()) * v
			if rng.IntN(2) == 0 {
				b[i] = -b[i]
			}
		}
		b[rng.IntN(BlockLen)] = v
		return b
	}
	for _, v := range []float32{1, -3.5, 448, -448, 57344, 6, -6, 1e-3, 65504, math.Float32frombits(0x7F7F0000),
		math.MaxFloat32, -math.MaxFloat32, math.Float32frombits(1), math.Float32frombits(0x00400000), 0x1p-130} {
		out = append(out, filled(v))
	}
	for _, mx := range []float64{448, 57344, 6} {
		for s := -160; s <= 130; s++ {
			a := float32(math.Ldexp(mx, s))
			if a == 0 || math.IsInf(float64(a), 0) {
				continue
			}
			for _, v := range []float32{a, math.Nextafter32(a, 0), math.Nextafter32(a, float32(math.Inf(1)))} {
				if s%4 == 0 || s < -120 || s > 110 || mx == el.max {
					out = append(out, below(v), below(-v))
				}
			}
		}
	}
	// Subnormal-only blocks (FP32 subnormals; BF16 keeps the large ones).
	for n := 0; n < 6; n++ {
		b := make([]float32, BlockLen)
		for i := range b {
			b[i] = math.Float32frombits(uint32(rng.IntN(0x7FFFFF) + 1))
			if i%3 == 0 {
				b[i] = -b[i]
			}
		}
		out = append(out, b)
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, special := range [][]float32{{nan}, {-nan}, {inf}, {-inf}, {inf, -inf}, {nan, inf}} {
		b := below(3)
		for i, v := range special {
			b[5+7*i] = v
		}
		out = append(out, b)
	}
	out = append(out, filled(nan), filled(inf), filled(-inf))
	out = append(out, filled(0), filled(float32(math.Copysign(0, -1))))
	mixed := filled(0)
	for i := 0; i < BlockLen; i += 2 {
		mixed[i] = float32(math.Copysign(0, -1))
	}
	out = append(out, mixed)
	// Ties: with amax = max·2^s both rules give the scale 2^s (for RCEIL,
	// fl32(max·fl32(1/max)) rounds back to 1), so the midpoints of the element
	// grid times 2^s land exactly on ties after scaling. The last midpoint is the
	// one past the max, which RNE sends to the missing next code: satfinite clamps it.
	var mids []float64
	for i := 1; i < len(el.vals); i++ {
		mids = append(mids, el.mid[i-1])
	}
	step, prev := el.v64[len(el.v64)-1], el.v64[len(el.v64)-2]
	over := step + (step-prev)/2
	for _, s := range []int{0, -20, 17, -126, -133} {
		for i := 0; i < len(mids); i += BlockLen - 1 {
			b := []float32{float32(math.Ldexp(el.max, s))}
			for _, md := range mids[i:min(i+BlockLen-1, len(mids))] {
				v := float32(math.Ldexp(md, s))
				if len(b)%2 == 0 {
					v = -v
				}
				b = append(b, v)
			}
			for len(b) < BlockLen {
				b = append(b, float32(math.Ldexp(over, s))) // FLOOR keeps 2^s and clamps; RCEIL scales up
			}
			out = append(out, b)
		}
	}
	return out
}

// blocksMatrix lays blocks along the rows of a [m, 128] matrix (m a multiple
// of 32, filled up with random values).
func blocksMatrix(rng *rand.Rand, blocks [][]float32) (x []float32, m, k int) {
	k = 128
	per := k / BlockLen
	m = pad((len(blocks)+per-1)/per, 32)
	x = randomBlocks(rng, m, k)
	for i, b := range blocks {
		copy(x[i*BlockLen:], b)
	}
	return x, m, k
}

func TestQuantizeAdversarialMatchesReference(t *testing.T) {
	for _, fc := range formatCases {
		rng := rand.New(rand.NewPCG(7, uint64(fc.element)))
		x, m, k := blocksMatrix(rng, adversarialBlocks(rng, refElemOf(fc.element)))
		for _, dt := range []host.DType{host.Float32, host.BFloat16, host.Float16} {
			// The blocks run along rows of x and along columns of its transpose, so
			// both directions see every one of them.
			t.Run(fmt.Sprintf("%s/%s/rows", fc, dt), func(t *testing.T) {
				checkQuantize(t, fc, dt, m, k, x, []bool{false})
			})
			t.Run(fmt.Sprintf("%s/%s/columns", fc, dt), func(t *testing.T) {
				checkQuantize(t, fc, dt, k, m, transpose(x, m, k), []bool{dt == host.Float32})
			})
		}
	}
}

// TestReferenceSanity pins the reference to facts the spec states outright, so
// that a reference bug cannot make the kernel tests vacuous.
func TestReferenceSanity(t *testing.T) {
	rcp := fl32(ratOf(1.0 / 448))
	require.Equal(t, uint32(0x3B124925), math.Float32bits(rcp), "fl32(1/448) (spec §4.3)")
	require.Equal(t, 8, refE4M3.emax)
	require.Equal(t, 15, refE5M2.emax)
	require.Equal(t, 2, refE2M1.emax)
	require.Equal(t, 448.0, refE4M3.max)
	require.Equal(t, 57344.0, refE5M2.max)
	require.Equal(t, 6.0, refE2M1.max)
	require.Equal(t, uint8(0x7E), refE4M3.round(464), "464 is the tie past the max: satfinite")
	require.Equal(t, uint8(0), refE4M3.round(math.Ldexp(1, -10)), "2^-10 ties to 0")
	require.Equal(t, uint8(4), refE2M1.round(2.5), "2.5 ties to 2 (spec §1.5)")
	require.Equal(t, uint8(6), refE2M1.round(5), "5 ties to 4 (spec §1.5)")
	// RCEIL: amax 448 gives scale 2^0 (byte 127), one ulp more gives 2^1.
	require.Equal(t, uint8(127), refExponent(448, refE4M3, host.ScaleRCEIL))
	require.Equal(t, uint8(128), refExponent(float64(math.Nextafter32(448, 500)), refE4M3, host.ScaleRCEIL))
	// FLOOR: amax in [256, 512) gives 2^(8-8) = 1 for E4M3.
	require.Equal(t, uint8(127), refExponent(511, refE4M3, host.ScaleFLOOR))
	require.Equal(t, uint8(126), refExponent(255.9, refE4M3, host.ScaleFLOOR))
	require.Equal(t, uint8(0xFE), refExponent(math.Inf(1), refE4M3, host.ScaleRCEIL))
	require.Equal(t, uint8(0xFF), refExponent(math.Inf(1), refE4M3, host.ScaleFLOOR))
	require.Equal(t, uint8(0xFF), refExponent(math.NaN(), refE2M1, host.ScaleRCEIL))
	require.Equal(t, uint8(0), refExponent(0, refE5M2, host.ScaleFLOOR))
	require.Equal(t, uint8(126+127), refExponent(math.MaxFloat32, refE2M1, host.ScaleRCEIL), "ceil(log2(FLT_MAX/6)) = 126")
}

// TestEmptyShapes: a tensor with no elements quantizes and dequantizes to
// nothing, with its (all-padding) scales zero.
func TestEmptyShapes(t *testing.T) {
	for _, fc := range formatCases {
		for _, sh := range [][]int64{{0, 64}, {64, 0}, {0, 0}, {2, 0, 32}, {0, 33}, {45, 0}, {2, 0, 7}} { // ragged other dims too (spec §14)
			q, err := host.NewQuantizer(host.Params{Format: fc.format, Element: fc.element}, 0)
			require.NoError(t, err)
			in, err := host.AllocTensor(cpu, host.BFloat16, sh, 0)
			require.NoError(t, err)
			qt, err := q.Quantize(in, host.QuantizeOptions{})
			require.NoError(t, err, "%s %v", fc, sh)
			for _, dir := range []host.Direction{host.DirRowwise, host.DirColumnwise} {
				st, _ := qt.Storage(dir)
				for _, b := range st.MustBuffer(host.BufScaleInv).Bytes8() {
					require.Zero(t, b)
				}
				require.NoError(t, qt.Dequantize(dir, in, 0))
			}
			qt.Free()
			host.FreeTensor(in, 0)
			q.Release()
		}
	}
}

// TE reduces a block's amax with fmaxf/__hmax2, which skip NaN (spec §4.3): a
// NaN element encodes to NaN alone, and its block keeps the finite scale of its
// other elements (torchao/OCP would give the whole block the NaN scale 0xFF).
func TestNaNElementDoesNotPoisonItsBlock(t *testing.T) {
	for _, dt := range []host.DType{host.Float32, host.BFloat16} {
		x := make([]float32, 32*32)
		for i := range x {
			x[i] = 1.5
		}
		x[5] = float32(math.NaN()) // row 0, column 5: rowwise block (0,0), columnwise block (0,5)
		x[7] = 3                   // amax of rowwise block (0,0) and of columnwise block (0,7)
		in, _ := newInput(t, dt, 32, 32, x)
		q, err := host.NewQuantizer(host.Params{Format: NameMXFP8}, 0)
		require.NoError(t, err)
		qt, err := q.Quantize(in, host.QuantizeOptions{})
		require.NoError(t, err)
		// RCEIL: e = ceil(log2(3/448)) = -7, so the row block's scale byte is 120
		// and 1.5·2^7 = 192 is E4M3 0x74 (e=14, m=4); 3·2^7 = 384 is 0x7C.
		row, _ := qt.Storage(host.DirRowwise)
		require.Equal(t, uint8(120), row.MustBuffer(host.BufScaleInv).Bytes8()[0], "%s rowwise scale", dt)
		data := row.MustBuffer(host.BufData).Bytes8()
		require.Equal(t, uint8(0x7F), data[5], "%s NaN element", dt)
		require.Equal(t, uint8(0x74), data[4], "%s neighbour of the NaN", dt)
		require.Equal(t, uint8(0x7C), data[7], "%s block amax element", dt)
		// Columnwise block (0,5) holds the NaN and 31 values of 1.5: ceil(log2(1.5/448)) = -8.
		col, _ := qt.Storage(host.DirColumnwise)
		cs := col.MustBuffer(host.BufScaleInv).Bytes8()
		require.Equal(t, uint8(119), cs[5], "%s columnwise scale of the NaN's column", dt)
		require.Equal(t, uint8(0x7F), col.MustBuffer(host.BufData).Bytes8()[5], "%s columnwise NaN element", dt)
		qt.Free()
		q.Release()
	}
}
