package fp8

// An independent, exact reference for fp8_block (spec §6.2, §3.2), sharing no
// code with the kernels: the E4M3 grid is enumerated from its bit layout
// (spec §1.2) as big.Rat values, quotients are exact rationals rounded once
// to float32, and power-of-two rounding uses exact comparisons.

import (
	"math"
	"math/big"
	"sort"
)

// e4m3Grid lists the non-negative finite E4M3 values (exact in float64) with
// their codes, ascending, and the exact midpoints between neighbours.
var e4m3Grid = func() (g struct {
	vals  []float64
	codes []uint8
	mids  []float64
}) {
	type vc struct {
		v *big.Rat
		c uint8
	}
	var all []vc
	for e := 0; e < 16; e++ {
		for m := 0; m < 8; m++ {
			if e == 15 && m == 7 {
				continue // NaN
			}
			var v *big.Rat
			if e == 0 {
				v = new(big.Rat).Mul(big.NewRat(int64(m), 1), pow2(-9))
			} else {
				v = new(big.Rat).Mul(big.NewRat(int64(8+m), 1), pow2(e-7-3))
			}
			all = append(all, vc{v, uint8(e<<3 | m)})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v.Cmp(all[j].v) < 0 })
	for i, x := range all {
		f, exact := x.v.Float64()
		if !exact {
			panic("E4M3 value not exact in float64")
		}
		g.vals = append(g.vals, f)
		g.codes = append(g.codes, x.c)
		if i > 0 {
			mid := new(big.Rat).Add(all[i-1].v, x.v)
			md, exact := mid.Quo(mid, big.NewRat(2, 1)).Float64()
			if !exact {
				panic("E4M3 midpoint not exact in float64")
			}
			g.mids = append(g.mids, md)
		}
	}
	return g
}()

func pow2(e int) *big.Rat {
	if e >= 0 {
		return new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), uint(e)))
	}
	return new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Lsh(big.NewInt(1), uint(-e)))
}

// refE4M3 is RNE_sat_e4m3 of a float32 value (spec §1.2): NaN gives 0x7F, the
// sign (of zero too) is kept, anything above the max — including the tie at
// 464 — gives ±448.
func refE4M3(x float32) uint8 {
	if x != x {
		return 0x7F
	}
	var sign uint8
	if math.Signbit(float64(x)) {
		sign = 0x80
	}
	a := math.Abs(float64(x))
	g := &e4m3Grid
	n := len(g.vals)
	i := sort.SearchFloat64s(g.vals, a)
	switch {
	case i == n:
		return sign | g.codes[n-1]
	case g.vals[i] == a || i == 0:
		return sign | g.codes[i]
	case a < g.mids[i-1]:
		return sign | g.codes[i-1]
	case a > g.mids[i-1]:
		return sign | g.codes[i]
	case g.codes[i-1]%2 == 0:
		return sign | g.codes[i-1]
	}
	return sign | g.codes[i]
}

// refE4M3Value is the exact value of a finite code.
func refE4M3Value(c uint8) float64 {
	for i, code := range e4m3Grid.codes {
		if code == c&0x7F {
			if c&0x80 != 0 {
				return -e4m3Grid.vals[i]
			}
			return e4m3Grid.vals[i]
		}
	}
	return math.NaN()
}

func ratFl32(x *big.Rat) float32 { f, _ := x.Float32(); return f }

// refBlockAmax is max |x| ignoring NaN (TE's block kernels reduce with fmaxf).
func refBlockAmax(xs []float32) float32 {
	var a float32
	for _, x := range xs {
		if v := float32(math.Abs(float64(x))); v > a {
			a = v
		}
	}
	return a
}

// refBlockScale is compute_scale_from_amax (spec §3.2, §6.2) with fp8_max 448.
func refBlockScale(amax float32, pow2Scales bool, eps, valueForInf float32) float32 {
	if amax < eps {
		amax = eps
	}
	if math.IsInf(float64(amax), 0) || amax == 0 {
		return 1
	}
	q := new(big.Rat).Quo(big.NewRat(448, 1), new(big.Rat).SetFloat64(float64(amax)))
	scale := ratFl32(q)
	if math.IsInf(float64(scale), 0) {
		scale = valueForInf
	}
	if pow2Scales { // the largest power of two ≤ scale
		r := new(big.Rat).SetFloat64(float64(scale))
		k := int(math.Floor(math.Log2(float64(scale))))
		for r.Cmp(pow2(k)) < 0 {
			k--
		}
		for r.Cmp(pow2(k+1)) >= 0 {
			k++
		}
		scale = ratFl32(pow2(k))
	}
	return scale
}

// refScaleInv is fl32(1/scale).
func refScaleInv(scale float32) float32 {
	return ratFl32(new(big.Rat).Inv(new(big.Rat).SetFloat64(float64(scale))))
}

// refQuantizeElem is RNE_sat_e4m3(fl32(x·scale)): the float64 product of two
// float32s is exact, and Go's conversion to float32 rounds to nearest even.
func refQuantizeElem(x, scale float32) uint8 {
	return refE4M3(float32(float64(x) * float64(scale)))
}

// refBlockMX is the reference of one direction of an [m, k] tensor: the
// scale_inv of each block [bi][bj] (bi indexes rows of the direction's data,
// or 128-row groups in 2D; bj its 128-blocks) and codes in the direction's data
// order ([m][k] rowwise, [k][m] columnwise).
type refBlockOut struct {
	scaleInv [][]float32
	codes    []uint8
}

func refBlockQuantize(x []float32, m, k int, columnwise bool, dims int, pow2Scales bool, eps, vfi float32) refBlockOut {
	rows, cols := m, k
	at := func(r, c int) float32 { return x[r*k+c] }
	if columnwise {
		rows, cols = k, m
		at = func(r, c int) float32 { return x[c*k+r] }
	}
	nb := (cols + 127) / 128
	out := refBlockOut{codes: make([]uint8, rows*cols)}
	var blocks [][2][2]int // [r0, r1), [c0, c1)
	if dims == 2 {
		nr := (rows + 127) / 128
		out.scaleInv = make([][]float32, nr)
		for bi := 0; bi < nr; bi++ {
			out.scaleInv[bi] = make([]float32, nb)
			for bj := 0; bj < nb; bj++ {
				blocks = append(blocks, [2][2]int{{bi * 128, min(bi*128+128, rows)}, {bj * 128, min(bj*128+128, cols)}})
			}
		}
	} else {
		out.scaleInv = make([][]float32, rows)
		for r := 0; r < rows; r++ {
			out.scaleInv[r] = make([]float32, nb)
			for bj := 0; bj < nb; bj++ {
				blocks = append(blocks, [2][2]int{{r, r + 1}, {bj * 128, min(bj*128+128, cols)}})
			}
		}
	}
	for _, b := range blocks {
		var vals []float32
		for r := b[0][0]; r < b[0][1]; r++ {
			for c := b[1][0]; c < b[1][1]; c++ {
				vals = append(vals, at(r, c))
			}
		}
		scale := refBlockScale(refBlockAmax(vals), pow2Scales, eps, vfi)
		bi := b[0][0]
		if dims == 2 {
			bi /= 128
		}
		out.scaleInv[bi][b[1][0]/128] = refScaleInv(scale)
		for r := b[0][0]; r < b[0][1]; r++ {
			for c := b[1][0]; c < b[1][1]; c++ {
				out.codes[r*cols+c] = refQuantizeElem(at(r, c), scale)
			}
		}
	}
	return out
}
