// Package ratref is an exact reference for small float formats, for tests: it
// lists every finite value of a format as a big.Rat and rounds to nearest with
// ties to even, then saturates (satfinite). It shares no code with the codecs
// in internal/numeric that the tests check against it.
package ratref

import (
	"math"
	"math/big"
	"sort"
)

// Format is one format's exact grid: every finite non-negative value with its
// code. Ties go to the code whose last mantissa bit is 0.
type Format struct {
	vals  []*big.Rat // ascending, non-negative finite values
	codes []uint8
	// overflow is the first grid step past the max (tests probe the tie between
	// it and the max).
	overflow *big.Rat
	nanCode  uint8
	signBit  uint8
}

func newFormat(expBits, manBits, bias int, finite func(e, m int) bool, nanCode, signBit uint8) *Format {
	f := &Format{nanCode: nanCode, signBit: signBit}
	for e := 0; e < 1<<expBits; e++ {
		for m := 0; m < 1<<manBits; m++ {
			if !finite(e, m) {
				continue
			}
			f.vals = append(f.vals, value(e, m, manBits, bias))
			f.codes = append(f.codes, uint8(e<<manBits|m))
		}
	}
	sort.Sort(byVal{f})
	// The next grid step above the max.
	last := f.codes[len(f.codes)-1]
	e, m := int(last)>>manBits, int(last)&(1<<manBits-1)
	m++
	if m == 1<<manBits {
		m, e = 0, e+1
	}
	f.overflow = value(e, m, manBits, bias)
	return f
}

type byVal struct{ f *Format }

// Values are the non-negative finite values, ascending; Codes their codes.
func (f *Format) Values() []*big.Rat { return f.vals }

// Codes are the codes of Values.
func (f *Format) Codes() []uint8 { return f.codes }

// Overflow is the first grid step past the max.
func (f *Format) Overflow() *big.Rat { return f.overflow }

func (b byVal) Len() int           { return len(b.f.vals) }
func (b byVal) Less(i, j int) bool { return b.f.vals[i].Cmp(b.f.vals[j]) < 0 }
func (b byVal) Swap(i, j int) {
	b.f.vals[i], b.f.vals[j] = b.f.vals[j], b.f.vals[i]
	b.f.codes[i], b.f.codes[j] = b.f.codes[j], b.f.codes[i]
}

func value(e, m, manBits, bias int) *big.Rat {
	var num *big.Int
	exp := 0
	if e == 0 { // subnormal: m · 2^(1-bias-manBits)
		num = big.NewInt(int64(m))
		exp = 1 - bias - manBits
	} else {
		num = big.NewInt(int64(1<<manBits + m))
		exp = e - bias - manBits
	}
	r := new(big.Rat).SetInt(num)
	p := new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), uint(abs(exp))))
	if exp >= 0 {
		return r.Mul(r, p)
	}
	return r.Quo(r, p)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// Encode is the reference conversion of x (RNE, satfinite).
func (f *Format) Encode(x float64) uint8 {
	if math.IsNaN(x) {
		return f.nanCode
	}
	var sign uint8
	if math.Signbit(x) {
		sign = f.signBit
	}
	maxCode := f.codes[len(f.codes)-1]
	if math.IsInf(x, 0) {
		return sign | maxCode
	}
	a := new(big.Rat).SetFloat64(math.Abs(x))
	n := len(f.vals)
	i := sort.Search(n, func(i int) bool { return f.vals[i].Cmp(a) >= 0 })
	var code uint8
	switch {
	case i < n && f.vals[i].Cmp(a) == 0:
		code = f.codes[i]
	case i == n:
		// Above the max: RNE gives the max or the overflow step, and satfinite
		// clamps the overflow step back to the max, so both end at the max.
		code = maxCode
	default: // strictly between vals[i-1] and vals[i]
		lo, hi := f.vals[i-1], f.vals[i]
		d1 := new(big.Rat).Sub(a, lo)
		d2 := new(big.Rat).Sub(hi, a)
		switch c := d1.Cmp(d2); {
		case c < 0:
			code = f.codes[i-1]
		case c > 0:
			code = f.codes[i]
		default:
			if f.codes[i-1]%2 == 0 {
				code = f.codes[i-1]
			} else {
				code = f.codes[i]
			}
		}
	}
	return sign | code
}

// Value returns the exact value of a code as a big.Rat (ok=false for NaN/Inf codes).
func (f *Format) Value(c uint8) (*big.Rat, bool) {
	mag := c &^ f.signBit
	for i, code := range f.codes {
		if code == mag {
			v := new(big.Rat).Set(f.vals[i])
			if c&f.signBit != 0 {
				v.Neg(v)
			}
			return v, true
		}
	}
	return nil, false
}

// The reference formats. E2M1's NaN code is the one EncodeE2M1 gives (+6).
var (
	E4M3 = newFormat(4, 3, 7, func(e, m int) bool { return !(e == 15 && m == 7) }, 0x7F, 0x80)
	E5M2 = newFormat(5, 2, 15, func(e, m int) bool { return e != 31 }, 0x7F, 0x80)
	E2M1 = newFormat(2, 1, 1, func(e, m int) bool { return true }, 0x7, 0x8)
	// The OCP MX v1.0 FP6 elements (§5.3.2): every code finite; NaN gives +max
	// as it does for E2M1.
	E2M3 = newFormat(2, 3, 1, func(e, m int) bool { return true }, 0x1F, 0x20)
	E3M2 = newFormat(3, 2, 3, func(e, m int) bool { return true }, 0x1F, 0x20)
)

// Float32 rounds an exact rational to float32 with RNE (big.Rat.Float32 is
// exact-then-round), for references that must model an fl32() step.
func Float32(r *big.Rat) float32 {
	f, _ := r.Float32()
	return f
}

// Rat is the exact value of a finite float32.
func Rat(x float32) *big.Rat { return new(big.Rat).SetFloat64(float64(x)) }

// Mul32 is the IEEE float32 product fl32(a·b) computed exactly and rounded
// once, with IEEE's sign for zero results (big.Rat has no negative zero) and
// IEEE's NaN/Inf rules.
func Mul32(a, b float32) float32 {
	if a != a || b != b || math.IsInf(float64(a), 0) || math.IsInf(float64(b), 0) || a == 0 || b == 0 {
		return float32(float64(a) * float64(b)) // exact in float64, no rounding for these cases
	}
	r := Float32(new(big.Rat).Mul(Rat(a), Rat(b)))
	if r == 0 && (a < 0) != (b < 0) {
		return float32(math.Copysign(0, -1))
	}
	return r
}
