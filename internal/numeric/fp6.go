package numeric

import "math"

// FP6 is one of the two OCP MX v1.0 six-bit element formats (OCP MX spec
// §5.3.2): a sign bit, exponent and mantissa fields, no Inf and no NaN codes.
// Code 0x20 is the sign bit; the magnitude codes 0..0x1F ascend in value.
type FP6 struct {
	Name    string
	ManBits uint    // 3 for E2M3, 2 for E3M2
	Bias    int     // 1 for E2M3, 3 for E3M2
	Emax    uint8   // emax_elem of OCP's scale rule (§6.3): 2 for E2M3, 4 for E3M2
	Max     float32 // the largest magnitude: 7.5 for E2M3, 28 for E3M2
	decode  [64]float32
}

// The two FP6 element formats (OCP MX v1.0 §5.3.2, Table 4).
var (
	E2M3 = newFP6("e2m3", 3, 1, 2)
	E3M2 = newFP6("e3m2", 2, 3, 4)
)

// FP6Sign is the sign bit of an FP6 code.
const FP6Sign uint8 = 0x20

// fp6MaxCode is the largest magnitude code (every code is finite).
const fp6MaxCode uint8 = 0x1F

func newFP6(name string, man uint, bias int, emax uint8) *FP6 {
	f := &FP6{Name: name, ManBits: man, Bias: bias, Emax: emax}
	for c := 0; c < 64; c++ {
		e, m := c>>man&(1<<(5-man)-1), c&(1<<man-1)
		var v float64
		if e == 0 { // subnormal: m · 2^(1-bias-man)
			v = math.Ldexp(float64(m), 1-bias-int(man))
		} else {
			v = math.Ldexp(float64(1<<man+m), e-bias-int(man))
		}
		if c&0x20 != 0 {
			v = -v
		}
		f.decode[c] = float32(v)
	}
	f.Max = f.decode[fp6MaxCode]
	return f
}

// Decode returns the value of a code (the low 6 bits are read).
func (f *FP6) Decode(c uint8) float32 { return f.decode[c&0x3F] }

// Table is the decode table of all 64 codes.
func (f *FP6) Table() *[64]float32 { return &f.decode }

// Encode converts x with round-to-nearest, ties to even, saturating to ±Max
// (OCP MX v1.0 §5.3.3 for FP6: no Inf or NaN codes, overflow saturates, and
// the conversion of NaN is implementation-defined: here +Max, as EncodeE2M1
// does). Inf saturates with its sign; a value that rounds to zero keeps its
// sign.
//
// With E the float32 exponent of |x| and emin = 1-Bias, the code is
// ((max(E,emin)-emin) << ManBits) + n, n = RNE(|x| / 2^(max(E,emin)-ManBits)):
// n runs over [2^ManBits, 2^(ManBits+1)] for normals and [0, 2^ManBits] for
// subnormals, and a carry out of the mantissa moves to the next binade by
// itself.
func (f *FP6) Encode(x float32) uint8 {
	b := math.Float32bits(x)
	sign := uint8(b>>31) << 5
	a := b & 0x7FFFFFFF
	switch {
	case a > 0x7F800000:
		return fp6MaxCode
	case a >= math.Float32bits(f.Max):
		return sign | fp6MaxCode
	case a < 0x00800000:
		// A float32 subnormal is below 2^-126, far under half the smallest FP6
		// subnormal (2^-4 for E3M2): it rounds to zero.
		return sign
	}
	e := int(a>>23) - 127
	mant := a&0x7FFFFF | 0x800000 // |x| = mant · 2^(e-23)
	emin := 1 - f.Bias
	eq := max(e, emin)
	sh := uint(eq - int(f.ManBits) - e + 23) // ≥ 23 - ManBits
	var n uint32
	if sh < 32 {
		n = (mant + 1<<(sh-1) - 1 + mant>>sh&1) >> sh
	}
	code := uint32(eq-emin)<<f.ManBits + n
	return sign | uint8(min(code, uint32(fp6MaxCode)))
}

// PackFP6 packs four 6-bit codes into three bytes in DLPack's little
// bit-endian order: code i occupies bits 6i..6i+5 of the 24-bit word.
func PackFP6(c0, c1, c2, c3 uint8) (b0, b1, b2 uint8) {
	w := uint32(c0&0x3F) | uint32(c1&0x3F)<<6 | uint32(c2&0x3F)<<12 | uint32(c3&0x3F)<<18
	return uint8(w), uint8(w >> 8), uint8(w >> 16)
}

// UnpackFP6 is the inverse of PackFP6.
func UnpackFP6(b0, b1, b2 uint8) (c0, c1, c2, c3 uint8) {
	w := uint32(b0) | uint32(b1)<<8 | uint32(b2)<<16
	return uint8(w & 0x3F), uint8(w >> 6 & 0x3F), uint8(w >> 12 & 0x3F), uint8(w >> 18 & 0x3F)
}
