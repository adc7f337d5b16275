package nvfp4

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/host"
)

// Adversarial inputs (spec §5.2 edge cases). Each is a [m][k] matrix.

// ties puts a 16×16 circulant of every E2M1 tie (and its neighbours) next to a
// block holding 42: the global amax 42 makes S_enc = 2688/42 = 64 exactly and
// a block amax of 6 gives S_dec_b_fp8 = 64, so enc_b = 1 and the elements reach
// the E2M1 encoder unchanged, on the ties, in rows, columns and tiles alike.
func ties(m, k int) [][]float32 {
	pattern := []float32{6, 0.25, -0.75, 1.25, -1.75, 2.5, -3.5, 5, -6, -0.25, 0.75, -1.25, 1.75, -2.5, 3.5, -5}
	return matrix(m, k, func(r, c int) float32 {
		switch {
		case r < 16 && c < 16:
			return pattern[(r+c)%16]
		case r == 16 && c == 16:
			return 42
		case r >= 16 && c < 16:
			return math.Nextafter32(pattern[(r+c)%16], 0) // just below the ties
		}
		return 0
	})
}

// tinyBlocks has one large value and blocks whose amax is so small relative to
// it that S_dec_b is an E4M3 subnormal or rounds to a zero scale.
func tinyBlocks(m, k int) [][]float32 {
	return matrix(m, k, func(r, c int) float32 {
		switch b := (r/16*(k/16) + c/16) % 5; {
		case r == 0 && c == 0:
			return 1000
		case b == 1:
			return 1000 * 1e-5 * float32(c%16-7) / 8 // subnormal scales
		case b == 2:
			return 1000 * 4e-7 * float32(r%16-8) / 8 // zero scales: nonzero x saturates, scale 0
		case b == 3:
			return 1000 * 2.2e-6 * float32((r+c)%16) / 16 // near the zero/subnormal edge
		}
		return float32((r*31+c*17)%23 - 11)
	})
}

func withSpecials(vals [][]float32, specials map[[2]int]float32) [][]float32 {
	for pos, v := range specials {
		vals[pos[0]][pos[1]] = v
	}
	return vals
}

var (
	inf  = float32(math.Inf(1))
	nan  = float32(math.NaN())
	negZ = float32(math.Copysign(0, -1))
)

type inputCase struct {
	name string
	make func(m, k int) [][]float32
	wide bool // needs float32's exponent range: float32 and bfloat16 only
}

var inputCases = []inputCase{
	{"gaussian", func(m, k int) [][]float32 { return gaussian(m, k, uint64(m*k)) }, false},
	{"zeros", func(m, k int) [][]float32 { return matrix(m, k, func(int, int) float32 { return 0 }) }, false},
	{"negative zeros", func(m, k int) [][]float32 { return matrix(m, k, func(int, int) float32 { return negZ }) }, false},
	{"ties", ties, false},
	{"tiny blocks", tinyBlocks, false},
	{"inf", func(m, k int) [][]float32 {
		return withSpecials(gaussian(m, k, 5), map[[2]int]float32{{0, 3}: inf, {m - 1, k - 2}: -inf})
	}, false},
	{"nan", func(m, k int) [][]float32 {
		return withSpecials(gaussian(m, k, 6), map[[2]int]float32{{1, 1}: nan, {m - 2, 5}: nan, {5, k - 1}: -nan})
	}, false},
	{"all nan", func(m, k int) [][]float32 { return matrix(m, k, func(int, int) float32 { return nan }) }, false},
	{"tiny global amax", func(m, k int) [][]float32 {
		return matrix(m, k, func(r, c int) float32 { return float32(r-c) * 1e-41 })
	}, true},
	{"huge values", func(m, k int) [][]float32 {
		return matrix(m, k, func(r, c int) float32 { return float32(r%5-2) * 1.3e38 })
	}, true},
}

// TestQuantizeMatchesReference compares every buffer of every direction with
// the independent reference, for every input dtype, shape class and option.
func TestQuantizeMatchesReference(t *testing.T) {
	shapes := [][2]int{{32, 32}, {48, 160}, {144, 48}}
	options := []struct {
		name string
		p    host.Params
		o    refOptions
	}{
		{"1x16", host.Params{}, refOptions{}},
		{"1x16 swizzled", host.Params{GEMMSwizzledScales: true}, refOptions{swizzled: true}},
		{"16x16", host.Params{BlockDims: 2}, refOptions{twoD: true}},
		{"16x16 swizzled", host.Params{BlockDims: 2, GEMMSwizzledScales: true}, refOptions{twoD: true, swizzled: true}},
		{"sr", host.Params{StochasticRounding: true, Seed: 0x0123456789ABCDEF, Offset: 77}, refOptions{sr: true, seed: 0x0123456789ABCDEF, offset: 77}},
		{"16x16 sr", host.Params{BlockDims: 2, StochasticRounding: true, Seed: 9}, refOptions{twoD: true, sr: true, seed: 9}},
	}
	for _, dtype := range []host.DType{host.Float32, host.BFloat16, host.Float16} {
		for _, ic := range inputCases {
			if ic.wide && dtype == host.Float16 {
				continue
			}
			for si, sh := range shapes {
				if dtype != host.BFloat16 && si != 1 {
					continue // the dtype only changes the load: one shape (partial tiles, padding) covers it
				}
				for _, oc := range options {
					name := fmt.Sprintf("%s/%s/%dx%d/%s", dtype, ic.name, sh[0], sh[1], oc.name)
					t.Run(name, func(t *testing.T) {
						in := newInput(t, dtype, ic.make(sh[0], sh[1]))
						p := oc.p
						p.Format = Name
						wantRow, wantCol := refQuantize(in.vals, oc.o)
						qt := quantize(t, p, host.BothUsages, in.t, nil)
						requireSameDirection(t, wantRow, stored(t, qt, host.DirRowwise), "rowwise")
						requireSameDirection(t, wantCol, stored(t, qt, host.DirColumnwise), "columnwise")
						// One direction alone gives the same bytes.
						requireSameDirection(t, wantRow, stored(t, quantize(t, p, host.Rowwise, in.t, nil), host.DirRowwise), "rowwise only")
						requireSameDirection(t, wantCol, stored(t, quantize(t, p, host.Columnwise, in.t, nil), host.DirColumnwise), "columnwise only")
					})
				}
			}
		}
	}
}

// TestQuantizeRHTMatchesReference covers the random Hadamard transform of the
// columnwise copy (BF16 input only), with and without stochastic rounding.
func TestQuantizeRHTMatchesReference(t *testing.T) {
	wide := func(m, k int) [][]float32 { // chunks whose magnitudes span far more than float64 holds exactly
		return matrix(m, k, func(r, c int) float32 {
			switch r % 16 {
			case 0:
				return 1e30
			case 1:
				return float32(c%7-3) * 1e-30
			case 2:
				return -1e30
			}
			return float32(r-c) * 1e-20
		})
	}
	cases := append(append([]inputCase{}, inputCases...), inputCase{"wide-span chunks", wide, false})
	options := []struct {
		name string
		p    host.Params
		o    refOptions
	}{
		{"default mask", host.Params{RHT: host.RHTDefault}, refOptions{rht: true, mask: DefaultRHTSignMask}},
		{"custom mask", host.Params{RHT: host.RHTCustomMask, RHTSignMask: 0x1234}, refOptions{rht: true, mask: 0x1234}},
		{"zero mask", host.Params{RHT: host.RHTCustomMask}, refOptions{rht: true}},
		{"sr", host.Params{RHT: host.RHTDefault, StochasticRounding: true, Seed: 1, Offset: 1 << 40},
			refOptions{rht: true, mask: DefaultRHTSignMask, sr: true, seed: 1, offset: 1 << 40}},
		{"swizzled", host.Params{RHT: host.RHTDefault, GEMMSwizzledScales: true}, refOptions{rht: true, mask: DefaultRHTSignMask, swizzled: true}},
	}
	for _, ic := range cases {
		for _, sh := range [][2]int{{32, 32}, {48, 144}} {
			for _, oc := range options {
				t.Run(fmt.Sprintf("%s/%dx%d/%s", ic.name, sh[0], sh[1], oc.name), func(t *testing.T) {
					in := newInput(t, host.BFloat16, ic.make(sh[0], sh[1]))
					p := oc.p
					p.Format = Name
					wantRow, wantCol := refQuantize(in.vals, oc.o)
					qt := quantize(t, p, host.BothUsages, in.t, nil)
					requireSameDirection(t, wantRow, stored(t, qt, host.DirRowwise), "rowwise (never transformed)")
					requireSameDirection(t, wantCol, stored(t, qt, host.DirColumnwise), "columnwise")
				})
			}
		}
	}
}

// TestQuantizeAmaxIn: caller-given amaxes (e.g. all-reduced) replace the
// computed ones, per direction (spec §5.4).
func TestQuantizeAmaxIn(t *testing.T) {
	in := newInput(t, host.BFloat16, gaussian(32, 64, 8))
	cases := []struct {
		name string
		p    host.Params
		o    refOptions
		amax [2]float32
	}{
		{"1x16 larger amaxes", host.Params{}, refOptions{}, [2]float32{40, 50}},
		{"1x16 smaller amax clips", host.Params{}, refOptions{}, [2]float32{0.5, 0.25}},
		{"1x16 zero and inf", host.Params{}, refOptions{}, [2]float32{0, inf}},
		{"1x16 nan amax", host.Params{}, refOptions{}, [2]float32{nan, 3}},
		{"rht", host.Params{RHT: host.RHTDefault}, refOptions{rht: true, mask: DefaultRHTSignMask}, [2]float32{7, 9}},
		{"16x16 shared amax", host.Params{BlockDims: 2}, refOptions{twoD: true}, [2]float32{33, 33}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := c.p
			p.Format = Name
			o := c.o
			o.amaxIn = &c.amax
			wantRow, wantCol := refQuantize(in.vals, o)
			qt := quantize(t, p, host.BothUsages, in.t, &c.amax)
			requireSameDirection(t, wantRow, stored(t, qt, host.DirRowwise), "rowwise")
			requireSameDirection(t, wantCol, stored(t, qt, host.DirColumnwise), "columnwise")
		})
	}
}

// TestComputeAmax: quant_compute_amax's values are what quantize uses (§5.4).
func TestComputeAmax(t *testing.T) {
	vals := gaussian(32, 48, 12)
	vals[3][4] = nan
	in := newInput(t, host.BFloat16, vals)
	for _, c := range []struct {
		name string
		p    host.Params
	}{{"plain", host.Params{Format: Name}}, {"rht", host.Params{Format: Name, RHT: host.RHTDefault}}, {"16x16", host.Params{Format: Name, BlockDims: 2}}} {
		t.Run(c.name, func(t *testing.T) {
			q, err := host.NewQuantizer(c.p, host.BothUsages)
			require.NoError(t, err)
			defer q.Release()
			out, err := host.AllocTensor(cpu, host.Float32, []int64{2}, 0)
			require.NoError(t, err)
			defer host.FreeTensor(out, 0)
			require.NoError(t, q.ComputeAmax(in.t, out, 0))
			qt := quantize(t, c.p, host.BothUsages, in.t, nil)
			require.Equal(t, stored(t, qt, host.DirRowwise).amax, out.Float32s()[0])
			require.Equal(t, stored(t, qt, host.DirColumnwise).amax, out.Float32s()[1])
			if c.p.RHT == host.RHTOff {
				require.Equal(t, out.Float32s()[0], out.Float32s()[1], "without RHT both directions share the amax")
			}
		})
	}
}

// TestQuantizeIntoZeroesPadding: buffers full of garbage (caller-owned, or
// reused) end with zero scale padding and the reference bytes.
func TestQuantizeIntoZeroesPadding(t *testing.T) {
	for _, p := range []host.Params{{Format: Name}, {Format: Name, GEMMSwizzledScales: true}, {Format: Name, BlockDims: 2}} {
		in := newInput(t, host.Float32, gaussian(48, 80, 4)) // scale_inv [128, 8] for 5 blocks: padding rows and columns
		q, err := host.NewQuantizer(p, host.BothUsages)
		require.NoError(t, err)
		layout, err := q.Layout([]int64{48, 80})
		require.NoError(t, err)
		var bufs []host.Tensor
		for _, l := range layout {
			b, err := host.AllocTensor(cpu, l.DType, l.Shape, 0)
			require.NoError(t, err)
			defer host.FreeTensor(b, 0)
			for i := range b.Bytes8() {
				b.Bytes8()[i] = 0xA7
			}
			bufs = append(bufs, b)
		}
		qt, err := q.NewQTensorFromBuffers([]int64{48, 80}, bufs)
		require.NoError(t, err)
		require.NoError(t, q.QuantizeInto(in.t, host.QuantizeOptions{}, qt))
		wantRow, wantCol := refQuantize(in.vals, refOptions{twoD: p.BlockDims == 2, swizzled: p.GEMMSwizzledScales})
		requireSameDirection(t, wantRow, stored(t, qt, host.DirRowwise), "rowwise")
		requireSameDirection(t, wantCol, stored(t, qt, host.DirColumnwise), "columnwise")
		// The reference's padding is zero; check it is there to compare against.
		require.Zero(t, wantRow.scale[127*8+7])
		qt.Free()
		q.Release()
	}
}

// TestDequantizeMatchesReference: fl32(e2m1 · final_scale) (spec §5.2) at every
// logical position, for both directions and layouts.
func TestDequantizeMatchesReference(t *testing.T) {
	for _, c := range []struct {
		name string
		p    host.Params
		o    refOptions
	}{
		{"1x16", host.Params{}, refOptions{}},
		{"swizzled", host.Params{GEMMSwizzledScales: true}, refOptions{swizzled: true}},
		{"16x16", host.Params{BlockDims: 2}, refOptions{twoD: true}},
		{"rht stored domain", host.Params{RHT: host.RHTDefault}, refOptions{rht: true, mask: DefaultRHTSignMask}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, k := 48, 160
			in := newInput(t, host.BFloat16, tinyBlocks(m, k))
			p := c.p
			p.Format = Name
			qt := quantize(t, p, host.BothUsages, in.t, nil)
			wantRow, wantCol := refQuantize(in.vals, c.o)
			row := refDequantize(wantRow, m, k, c.o.swizzled)
			col := refDequantize(wantCol, k, m, c.o.swizzled)
			gotRow := dequantized(t, qt, host.DirRowwise, false)
			gotCol := dequantized(t, qt, host.DirColumnwise, false)
			// Undoing a transform that is not there changes nothing.
			if !c.o.rht {
				require.Equal(t, gotCol, dequantized(t, qt, host.DirColumnwise, true))
			}
			require.Equal(t, gotRow, dequantized(t, qt, host.DirRowwise, true), "rowwise is never transformed")
			for r := 0; r < m; r++ {
				for cc := 0; cc < k; cc++ {
					require.Equal(t, math.Float32bits(row[r][cc]), math.Float32bits(gotRow[r*k+cc]), "rowwise (%d,%d)", r, cc)
					require.Equal(t, math.Float32bits(col[cc][r]), math.Float32bits(gotCol[r*k+cc]), "columnwise (%d,%d)", r, cc)
				}
			}
		})
	}
}

// TestDequantizeBF16Output rounds the FP32 values once to BF16.
func TestDequantizeBF16Output(t *testing.T) {
	in := newInput(t, host.BFloat16, gaussian(32, 32, 21))
	qt := quantize(t, host.Params{Format: Name}, host.Rowwise, in.t, nil)
	f32 := dequantized(t, qt, host.DirRowwise, false)
	out, err := host.AllocTensor(cpu, host.BFloat16, []int64{32, 32}, 0)
	require.NoError(t, err)
	defer host.FreeTensor(out, 0)
	require.NoError(t, qt.Dequantize(host.DirRowwise, out, 0))
	for i, h := range out.Uint16s() {
		require.Equal(t, refBF16(float64(f32[i])), h, "element %d", i)
	}
}

// TestDequantizeUndoesRHT: with UndoTransform the columnwise copy comes back in
// the input's domain: the inverse transform (a float64 matrix product, rounded
// to float32) of the stored values, and close to the input.
func TestDequantizeUndoesRHT(t *testing.T) {
	m, k := 64, 48
	in := newInput(t, host.BFloat16, gaussian(m, k, 31))
	for _, mask := range []uint32{uint32(DefaultRHTSignMask), 0, 0xFFFF, 0x8001} {
		p := host.Params{Format: Name, RHT: host.RHTCustomMask, RHTSignMask: mask}
		qt := quantize(t, p, host.Columnwise, in.t, nil)
		storedDomain := dequantized(t, qt, host.DirColumnwise, false)
		undone := dequantized(t, qt, host.DirColumnwise, true)
		var errSum, sigSum float64
		for c := 0; c < k; c++ {
			for m0 := 0; m0 < m; m0 += 16 {
				for i := 0; i < 16; i++ {
					acc := 0.0
					for j := 0; j < 16; j++ {
						s := 1.0
						if mask>>i&1 == 1 {
							s = -1
						}
						acc += float64(storedDomain[(m0+j)*k+c]) * s * refHadamard[i][j] / 4
					}
					got := undone[(m0+i)*k+c]
					require.Equal(t, float32(acc), got, "mask %#x (%d,%d)", mask, m0+i, c)
					d := float64(got) - float64(in.vals[m0+i][c])
					errSum += d * d
					sigSum += float64(in.vals[m0+i][c]) * float64(in.vals[m0+i][c])
				}
			}
		}
		// NVFP4's relative RMS error on Gaussian data is about 10%; the inverse
		// transform is orthogonal, so it keeps that error instead of making the
		// result look like the transformed domain (relative error ~1.4).
		require.Less(t, math.Sqrt(errSum/sigSum), 0.2, "mask %#x", mask)
	}
}

// TestResultsIndependentOfThreads: identical bytes for GOMAXPROCS 1..8, every
// option on, for a tensor large enough to split into many tiles.
func TestResultsIndependentOfThreads(t *testing.T) {
	in := newInput(t, host.BFloat16, gaussian(256, 384, 77))
	for _, p := range []host.Params{
		{Format: Name, RHT: host.RHTDefault, StochasticRounding: true, Seed: 42, Offset: 3},
		{Format: Name, BlockDims: 2, StochasticRounding: true, Seed: 42},
		{Format: Name, GEMMSwizzledScales: true},
	} {
		var first [2]refDirection
		for i, procs := range []int{1, 2, 3, 4, 8} {
			old := runtimeGOMAXPROCS(procs)
			qt := quantize(t, p, host.BothUsages, in.t, nil)
			got := [2]refDirection{stored(t, qt, host.DirRowwise), stored(t, qt, host.DirColumnwise)}
			runtimeGOMAXPROCS(old)
			if i == 0 {
				first = got
				continue
			}
			if i == 1 { // one multi-worker run against the reference too
				wantRow, wantCol := refQuantize(in.vals, refOptionsOf(p))
				requireSameDirection(t, wantRow, got[0], "rowwise vs reference")
				requireSameDirection(t, wantCol, got[1], "columnwise vs reference")
			}
			requireSameDirection(t, first[0], got[0], fmt.Sprintf("rowwise GOMAXPROCS=%d", procs))
			requireSameDirection(t, first[1], got[1], fmt.Sprintf("columnwise GOMAXPROCS=%d", procs))
		}
	}
}

// TestStochasticRoundingSeeds: equal (seed, offset) give equal bytes; another
// seed or offset gives different bytes; round to nearest draws no bits.
func TestStochasticRoundingSeeds(t *testing.T) {
	in := newInput(t, host.BFloat16, gaussian(64, 64, 5))
	run := func(seed, offset uint64) [2]refDirection {
		p := host.Params{Format: Name, RHT: host.RHTDefault, StochasticRounding: true, Seed: seed, Offset: offset}
		qt := quantize(t, p, host.BothUsages, in.t, nil)
		return [2]refDirection{stored(t, qt, host.DirRowwise), stored(t, qt, host.DirColumnwise)}
	}
	base := run(1, 0)
	require.Equal(t, base, run(1, 0))
	for _, other := range [][2]uint64{{2, 0}, {1, 1}, {1 << 32, 0}, {1, 1 << 32}} {
		o := run(other[0], other[1])
		for d := range o {
			require.NotEqual(t, base[d].data, o[d].data, "seed %d offset %d direction %d", other[0], other[1], d)
			require.Equal(t, base[d].scale, o[d].scale, "scales do not depend on the bits")
		}
	}
}

// TestStochasticRoundingIsUnbiased: averaged over n seeds, the dequantized
// value of every element tends to the input. For an element scaled into
// [lo, lo+h) of the E2M1 grid, one draw has variance ≤ h²/4 (scaled back by the
// block's dequant factor f, so ≤ (h·f)²/4) and a mean within h·f/256 of x (the
// 8-bit u, numeric.TestStochasticRoundE2M1IsUnbiased) plus the float32 rounding
// of x·enc_b and of dequantize (a few ulps of x). So the mean of n draws lies
// within h·f/256 + 5·h·f/(2√n) + 4 ulp(x) of x with overwhelming probability
// (5σ per element; 1 - 6e-7 each). Round to nearest, by contrast, is biased.
func TestStochasticRoundingIsUnbiased(t *testing.T) {
	const m, k, n = 16, 64, 600
	rng := rand.New(rand.NewPCG(1, 2))
	vals := matrix(m, k, func(r, c int) float32 { return float32(rng.Float64()*2 - 1) })
	vals[0][0] = 1 // fixes the amax and so every scale
	in := newInput(t, host.Float32, vals)
	sum := make([]float64, m*k)
	var steps []float64
	for seed := uint64(0); seed < n; seed++ {
		qt := quantize(t, host.Params{Format: Name, StochasticRounding: true, Seed: seed, Offset: 5}, host.Rowwise, in.t, nil)
		for i, v := range dequantized(t, qt, host.DirRowwise, false) {
			sum[i] += float64(v)
		}
		if seed == 0 {
			st, _ := qt.Storage(host.DirRowwise)
			v, _, err := viewOf(st, host.DirRowwise, m, k)
			require.NoError(t, err)
			for r := 0; r < m; r++ {
				for c := 0; c < k; c++ {
					f := float64(DequantScale(v.scale(r, c/16), v.amax))
					y := math.Abs(float64(vals[r][c])) / f // the scaled magnitude, up to rounding
					h := 2.0
					if y < 2 {
						h = 0.5
					} else if y < 4 {
						h = 1
					}
					steps = append(steps, h*f)
				}
			}
		}
		qt.Free()
	}
	rnQT := quantize(t, host.Params{Format: Name}, host.Rowwise, in.t, nil)
	rn := dequantized(t, rnQT, host.DirRowwise, false)
	var srBias, rnBias float64
	for i := range sum {
		x := float64(in.vals[i/k][i%k])
		mean := sum[i] / n
		ulp := float64(math.Nextafter32(float32(math.Abs(x)), inf)) - math.Abs(x)
		bound := steps[i]/256 + 5*steps[i]/(2*math.Sqrt(n)) + 4*ulp
		require.LessOrEqual(t, math.Abs(mean-x), bound, "element %d: x=%g mean of %d draws %g", i, x, n, mean)
		srBias += mean - x
		rnBias += math.Abs(float64(rn[i]) - x)
	}
	// Sanity: the test would see round-to-nearest's error (it is no weaker than the noise).
	require.Greater(t, rnBias/float64(m*k), 3*math.Abs(srBias)/float64(m*k))
}

// refOptionsOf mirrors params in the reference's options.
func refOptionsOf(p host.Params) refOptions {
	o := refOptions{twoD: p.BlockDims == 2, sr: p.StochasticRounding, seed: p.Seed, offset: p.Offset, swizzled: p.GEMMSwizzledScales}
	switch p.RHT {
	case host.RHTDefault:
		o.rht, o.mask = true, DefaultRHTSignMask
	case host.RHTCustomMask:
		o.rht, o.mask = true, uint16(p.RHTSignMask)
	}
	return o
}
