package mxfp8

// An independent, exact reference for MX quantization. It shares no code with
// the kernels: element grids are enumerated from the bit layouts of spec §1.2,
// §1.3 and §1.5 as big.Rat values, and block exponents come from exact
// power-of-two comparisons.

import (
	"math"
	"math/big"
	"sort"

	"libquant/host"
)

// refElem is an element format as an exact grid.
type refElem struct {
	vals    []*big.Rat // non-negative finite values, ascending
	codes   []uint8
	v64     []float64 // vals as float64 (exact: small dyadic rationals)
	mid     []float64 // mid[i] = (v64[i] + v64[i+1]) / 2, exact
	signBit uint8
	nanCode uint8 // what a NaN encodes to: 0x7F for FP8 (spec §1.2, §1.3), +6 = 7 for E2M1 (satfinite, spec §1.5)
	max     float64
	emax    int // floor(log2(max)): the OCP emax_elem (spec §4.4)
}

func pow2Rat(e int) *big.Rat {
	if e >= 0 {
		return new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), uint(e)))
	}
	return new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Lsh(big.NewInt(1), uint(-e)))
}

func newRefElem(expBits, manBits, bias int, finite func(e, m int) bool, nanCode uint8) *refElem {
	r := &refElem{signBit: 1 << (expBits + manBits), nanCode: nanCode}
	for e := 0; e < 1<<expBits; e++ {
		for m := 0; m < 1<<manBits; m++ {
			if !finite(e, m) {
				continue
			}
			var v *big.Rat
			if e == 0 {
				v = new(big.Rat).Mul(big.NewRat(int64(m), 1), pow2Rat(1-bias-manBits))
			} else {
				v = new(big.Rat).Mul(big.NewRat(int64(1<<manBits+m), 1), pow2Rat(e-bias-manBits))
			}
			r.vals = append(r.vals, v)
			r.codes = append(r.codes, uint8(e<<manBits|m))
		}
	}
	sort.Sort(byRat{r})
	for i, v := range r.vals {
		f, exact := v.Float64()
		if !exact {
			panic("grid value not exact in float64")
		}
		r.v64 = append(r.v64, f)
		if i > 0 {
			mid := new(big.Rat).Add(r.vals[i-1], v)
			m, exact := mid.Quo(mid, big.NewRat(2, 1)).Float64()
			if !exact {
				panic("grid midpoint not exact in float64")
			}
			r.mid = append(r.mid, m)
		}
	}
	r.max = r.v64[len(r.v64)-1]
	r.emax = int(math.Floor(math.Log2(r.max)))
	return r
}

type byRat struct{ r *refElem }

func (b byRat) Len() int           { return len(b.r.vals) }
func (b byRat) Less(i, j int) bool { return b.r.vals[i].Cmp(b.r.vals[j]) < 0 }
func (b byRat) Swap(i, j int) {
	b.r.vals[i], b.r.vals[j] = b.r.vals[j], b.r.vals[i]
	b.r.codes[i], b.r.codes[j] = b.r.codes[j], b.r.codes[i]
}

var (
	refE4M3 = newRefElem(4, 3, 7, func(e, m int) bool { return !(e == 15 && m == 7) }, 0x7F)
	refE5M2 = newRefElem(5, 2, 15, func(e, m int) bool { return e != 31 }, 0x7F)
	refE2M1 = newRefElem(2, 1, 1, func(e, m int) bool { return true }, 0x7)
)

func refElemOf(e host.Element) *refElem {
	switch e {
	case host.ElementE5M2:
		return refE5M2
	case host.ElementE2M1:
		return refE2M1
	}
	return refE4M3
}

// round is RNE onto the grid with saturation, for a ≥ 0: above the max
// (including the tie at max + half a step, which RNE would send to the missing
// next code) gives the max. It compares a with exact midpoints, so it needs no
// arithmetic on a.
func (r *refElem) round(a float64) uint8 {
	n := len(r.v64)
	i := sort.SearchFloat64s(r.v64, a) // first value ≥ a
	switch {
	case i == n:
		return r.codes[n-1]
	case r.v64[i] == a || i == 0:
		return r.codes[i]
	}
	switch mid := r.mid[i-1]; {
	case a < mid:
		return r.codes[i-1]
	case a > mid:
		return r.codes[i]
	case r.codes[i-1]%2 == 0:
		return r.codes[i-1]
	}
	return r.codes[i]
}

// value is the exact value of a code, ok=false for a NaN code.
func (r *refElem) value(c uint8) (float64, bool) {
	for i, code := range r.codes {
		if code == c&^r.signBit {
			if c&r.signBit != 0 {
				return -r.v64[i], true
			}
			return r.v64[i], true
		}
	}
	return 0, false
}

// ratOf is the exact value of a finite float.
func ratOf(x float64) *big.Rat { return new(big.Rat).SetFloat64(x) }

// fl32 rounds an exact value to float32 with round-to-nearest-even (subnormals
// included), as math/big documents for Rat.Float32.
func fl32(x *big.Rat) float32 { f, _ := x.Float32(); return f }

// ceilLog2 is the smallest k with 2^k ≥ a, for a > 0.
func ceilLog2(a *big.Rat) int {
	f, _ := a.Float64()
	k := int(math.Ceil(math.Log2(f)))
	for a.Cmp(pow2Rat(k-1)) <= 0 {
		k--
	}
	for a.Cmp(pow2Rat(k)) > 0 {
		k++
	}
	return k
}

// floorLog2 is the largest k with 2^k ≤ a, for a > 0.
func floorLog2(a *big.Rat) int {
	f, _ := a.Float64()
	k := int(math.Floor(math.Log2(f)))
	for a.Cmp(pow2Rat(k)) < 0 {
		k--
	}
	for a.Cmp(pow2Rat(k+1)) >= 0 {
		k++
	}
	return k
}

func clampBiased(k int) uint8 { return uint8(min(max(k+127, 0), 254)) }

// refAmax is max |x| over the block, skipping NaN as TE's fmaxf reduction does
// (spec §4.3).
func refAmax(xs []float32) float64 {
	var a float64
	for _, x := range xs {
		if v := math.Abs(float64(x)); v > a { // NaN never compares greater
			a = v
		}
	}
	return a
}

// refExponent is the E8M0 byte of a block with amax a.
//
// RCEIL (spec §4.3): t = fl32(a · fl32(1/max)); the byte is that of the smallest
// power of two ≥ t, saturated to [2^-127, 2^127]; NaN gives 0xFF, +Inf 0xFE
// (satfinite), 0 gives 0.
//
// FLOOR (spec §4.4): 2^(floor(log2 a) − emax), clamped to [2^-127, 2^127]; Inf
// and NaN give 0xFF, 0 gives the smallest scale.
func refExponent(a float64, el *refElem, rounding host.ScaleRounding) uint8 {
	switch {
	case math.IsNaN(a):
		return 0xFF
	case rounding == host.ScaleFLOOR && math.IsInf(a, 0):
		return 0xFF
	case math.IsInf(a, 0):
		return 0xFE
	case a == 0:
		return 0
	}
	if rounding == host.ScaleFLOOR {
		return clampBiased(floorLog2(ratOf(a)) - el.emax)
	}
	rcp := fl32(new(big.Rat).Inv(ratOf(el.max)))
	t := fl32(new(big.Rat).Mul(ratOf(a), ratOf(float64(rcp))))
	if t == 0 {
		return 0
	}
	return clampBiased(ceilLog2(ratOf(float64(t))))
}

// refEncode is the code of x in a block with scale byte e:
// RNE_sat(x · 2^(127−e)). The product is exact in float64 (a float32 times a
// power of two in 2^±127 stays inside float64's normal range with 24
// significant bits). TE rounds it to float32 first (spec §4.3); that rounding
// is exact except below 2^-126, where both roundings end at a (signed) zero on
// every element grid, so rounding the exact product gives TE's code.
func refEncode(x float32, e uint8, el *refElem) uint8 {
	if e == 0xFF || math.IsNaN(float64(x)) {
		return el.nanCode
	}
	var sign uint8
	if math.Signbit(float64(x)) {
		sign = el.signBit
	}
	if math.IsInf(float64(x), 0) {
		return sign | el.codes[len(el.codes)-1]
	}
	return sign | el.round(math.Ldexp(math.Abs(float64(x)), 127-int(e)))
}

// refDequant is fl32(2^(e−127) · value(q)); NaN for a NaN scale or code. The
// float64 product is exact (at most 4 significant bits, exponent within
// 2^±150), and Go's float64→float32 conversion rounds to nearest even.
func refDequant(e, q uint8, el *refElem) float32 {
	v, ok := el.value(q)
	if e == 0xFF || !ok {
		return float32(math.NaN())
	}
	return float32(math.Ldexp(v, int(e)-127))
}

// refMX is the reference of one direction of an [m, k] tensor: scales[i][j]
// with i the row (rowwise) or column (columnwise) and j the block along the
// other dim, and codes[r][c] in logical positions.
type refMX struct {
	scales [][]uint8
	codes  [][]uint8
}

func refQuantize(x []float32, m, k int, dir host.Direction, el *refElem, rounding host.ScaleRounding) refMX {
	var out refMX
	out.codes = make([][]uint8, m)
	for r := range out.codes {
		out.codes[r] = make([]uint8, k)
	}
	block := make([]float32, BlockLen)
	if dir == host.DirRowwise {
		out.scales = make([][]uint8, m)
		for r := 0; r < m; r++ {
			out.scales[r] = make([]uint8, k/BlockLen)
			for b := 0; b < k/BlockLen; b++ {
				copy(block, x[r*k+b*BlockLen:r*k+(b+1)*BlockLen])
				e := refExponent(refAmax(block), el, rounding)
				out.scales[r][b] = e
				for j, v := range block {
					out.codes[r][b*BlockLen+j] = refEncode(v, e, el)
				}
			}
		}
		return out
	}
	out.scales = make([][]uint8, k)
	for c := 0; c < k; c++ {
		out.scales[c] = make([]uint8, m/BlockLen)
		for b := 0; b < m/BlockLen; b++ {
			for i := range block {
				block[i] = x[(b*BlockLen+i)*k+c]
			}
			e := refExponent(refAmax(block), el, rounding)
			out.scales[c][b] = e
			for i, v := range block {
				out.codes[b*BlockLen+i][c] = refEncode(v, e, el)
			}
		}
	}
	return out
}
