package numeric

import "math"

// E2M1Max is the largest FP4 E2M1 magnitude (spec §1.5).
const E2M1Max float32 = 6

// e2m1Values are the magnitudes of codes 0..7; codes 8..15 are their negatives.
var e2m1Values = [8]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6}

// DecodeE2M1 returns the value of a 4-bit code (only the low nibble is read).
func DecodeE2M1(c uint8) float32 {
	v := e2m1Values[c&7]
	if c&8 != 0 {
		return -v
	}
	return v
}

// E2M1Table is the decode table of all 16 codes, for kernels that index it.
func E2M1Table() *[16]float32 { return &e2m1Table }

var e2m1Table = func() (t [16]float32) {
	for c := range t {
		t[c] = DecodeE2M1(uint8(c))
	}
	return
}()

// Magnitude bits of the round-to-nearest thresholds of spec §1.5. A value on an
// inclusive bound ("≤ 0.25 → 0") stays below it, one on an exclusive bound
// ("< 0.75 → 0.5") goes above: ties go to the even code.
const (
	e2m1Le025 = 0x3E800000     // 0.25: ≤ gives code 0
	e2m1Lt075 = 0x3F400000 - 1 // 0.75: ≥ gives code 2
	e2m1Le125 = 0x3FA00000     // 1.25: ≤ gives code 2
	e2m1Lt175 = 0x3FE00000 - 1 // 1.75: ≥ gives code 4
	e2m1Le250 = 0x40200000     // 2.5:  ≤ gives code 4
	e2m1Lt350 = 0x40600000 - 1 // 3.5:  ≥ gives code 6
	e2m1Le500 = 0x40A00000     // 5:    ≤ gives code 6
)

// EncodeE2M1 converts x to E2M1 with round-to-nearest-even and saturation to ±6
// (spec §1.5 thresholds). NaN gives +6 (the satfinite edge of spec §1.5).
// A negative x that rounds to zero keeps its sign (code 8), as the hardware
// conversion does (spec §13 item 3).
//
// The code is the number of thresholds the magnitude's bit pattern exceeds,
// counted without branches: for t, a < 2^31, (t - a) >> 31 is 1 exactly when
// a > t. Infinities exceed every threshold and saturate.
func EncodeE2M1(x float32) uint8 {
	b := math.Float32bits(x)
	a := b & 0x7FFFFFFF
	if a > 0x7F800000 {
		return 7
	}
	c := (e2m1Le025-a)>>31 + (e2m1Lt075-a)>>31 + (e2m1Le125-a)>>31 + (e2m1Lt175-a)>>31 +
		(e2m1Le250-a)>>31 + (e2m1Lt350-a)>>31 + (e2m1Le500-a)>>31
	return uint8(b>>28)&8 | uint8(c)
}

// StochasticRoundE2M1 converts x to E2M1 with stochastic rounding, following
// TE's software emulation of cvt.rs.satfinite.e2m1x4.f32
// (ptx::stochastic_round_fp4_e2m1, spec §5.6), with rbits the element's 8
// random bits:
//
//	u    = rbits / 256
//	step = 0.5 if |x| < 2, 1 if |x| < 4, else 2
//	t    = fmaf(u, step, |x|)
//	q    = floor of t onto the E2M1 grid of t's own region ([0,2) step 0.5,
//	       [2,4) step 1, [4,∞) step 2), then min(q, 6)
//	result = q with the sign of x (a negative x that ends at 0 gives code 8);
//	NaN gives +6 (code 7).
//
// u·step is exact in float32 (8 significant bits times a power of two), so
// fmaf(u, step, |x|) is the float32 sum fl32(u·step + |x|), computed here as a
// plain float32 addition.
func StochasticRoundE2M1(x float32, rbits uint8) uint8 {
	b := math.Float32bits(x)
	a := b & 0x7FFFFFFF
	if a > 0x7F800000 {
		return 7
	}
	ax := math.Float32frombits(a)
	step := float32(2)
	if ax < 2 {
		step = 0.5
	} else if ax < 4 {
		step = 1
	}
	t := float32(float32(rbits)*(1.0/256)*step) + ax
	var c uint8
	switch {
	case t < 2:
		c = uint8(t * 2) // floor(t / 0.5) is the code of 0, 0.5, 1, 1.5
	case t < 4:
		c = 2 + uint8(t) // floor(t) of 2 or 3: codes 4, 5
	case t < 6:
		c = 6 // floor(t/2)·2 = 4
	default:
		c = 7 // 6, and everything above clamps to it
	}
	return uint8(b>>28)&8 | c
}

// PackE2M1 packs two codes into one byte: the even-index element in the low nibble
// (spec §1.5).
func PackE2M1(even, odd uint8) uint8 { return even&0xF | odd<<4 }
