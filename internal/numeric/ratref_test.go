package numeric

import (
	"math"
	"math/big"
	"sort"
)

// ratFormat is an independent, exact reference for a small float format: it lists
// every finite non-negative value as a big.Rat together with its code, and rounds
// with ties-to-even on the code's last mantissa bit, then saturates. It shares no
// code with the encoders under test.
type ratFormat struct {
	vals  []*big.Rat // ascending, non-negative finite values
	codes []uint8
	// overflow is the first grid step past the max; boundaryInputs probes the tie
	// between it and the max.
	overflow *big.Rat
	nanCode      uint8
	signBit      uint8
}

func newRatFormat(expBits, manBits, bias int, finite func(e, m int) bool, nanCode, signBit uint8) *ratFormat {
	f := &ratFormat{nanCode: nanCode, signBit: signBit}
	for e := 0; e < 1<<expBits; e++ {
		for m := 0; m < 1<<manBits; m++ {
			if !finite(e, m) {
				continue
			}
			f.vals = append(f.vals, ratValue(e, m, manBits, bias))
			f.codes = append(f.codes, uint8(e<<manBits|m))
		}
	}
	sort.Sort(byVal{f})
	// The next grid step above the max, with the parity of the mantissa it would have.
	last := f.codes[len(f.codes)-1]
	e, m := int(last)>>manBits, int(last)&(1<<manBits-1)
	m++
	if m == 1<<manBits {
		m, e = 0, e+1
	}
	f.overflow = ratValue(e, m, manBits, bias)
	return f
}

type byVal struct{ f *ratFormat }

func (b byVal) Len() int           { return len(b.f.vals) }
func (b byVal) Less(i, j int) bool { return b.f.vals[i].Cmp(b.f.vals[j]) < 0 }
func (b byVal) Swap(i, j int) {
	b.f.vals[i], b.f.vals[j] = b.f.vals[j], b.f.vals[i]
	b.f.codes[i], b.f.codes[j] = b.f.codes[j], b.f.codes[i]
}

func ratValue(e, m, manBits, bias int) *big.Rat {
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

// encode is the reference conversion of x.
func (f *ratFormat) encode(x float64) uint8 {
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

// value returns the exact value of a code as a big.Rat (ok=false for NaN/Inf codes).
func (f *ratFormat) value(c uint8) (*big.Rat, bool) {
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

var (
	refE4M3 = newRatFormat(4, 3, 7, func(e, m int) bool { return !(e == 15 && m == 7) }, 0x7F, 0x80)
	refE5M2 = newRatFormat(5, 2, 15, func(e, m int) bool { return e != 31 }, 0x7F, 0x80)
	refE2M1 = newRatFormat(2, 1, 1, func(e, m int) bool { return true }, 0x7, 0x8)
)
