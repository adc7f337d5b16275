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

// EncodeE2M1 converts x to E2M1 with round-to-nearest-even and saturation to ±6
// (spec §1.5 thresholds). NaN gives +6 (the satfinite edge of spec §1.5).
// A negative x that rounds to zero keeps its sign (code 8), as the hardware
// conversion does (spec §13 item 3).
func EncodeE2M1(x float32) uint8 {
	b := math.Float32bits(x)
	a := b & 0x7FFFFFFF
	if a > 0x7F800000 {
		return 7
	}
	sign := uint8(b>>28) & 8
	v := math.Float32frombits(a)
	var c uint8
	switch {
	case v <= 0.25:
		c = 0
	case v < 0.75:
		c = 1
	case v <= 1.25:
		c = 2
	case v < 1.75:
		c = 3
	case v <= 2.5:
		c = 4
	case v < 3.5:
		c = 5
	case v <= 5:
		c = 6
	default:
		c = 7
	}
	return sign | c
}

// PackE2M1 packs two codes into one byte: the even-index element in the low nibble
// (spec §1.5).
func PackE2M1(even, odd uint8) uint8 { return even&0xF | odd<<4 }
