package numeric

import "math"

// E8M0NaN is the only non-finite E8M0 code (spec §1.4).
const E8M0NaN uint8 = 0xFF

// DecodeE8M0 returns 2^(b-127); 0xFF is NaN and 0x00 is the FP32 subnormal 2^-127
// (ptx::exp2f, spec §1.4).
func DecodeE8M0(b uint8) float32 {
	switch b {
	case 0xFF:
		return math.Float32frombits(0x7FFFFFFF)
	case 0:
		return math.Float32frombits(0x00400000)
	}
	return math.Float32frombits(uint32(b) << 23)
}

// E8M0Reciprocal returns 1/2^(b-127) = 2^(127-b) exactly (ptx::exp2f_rcp, spec §1.4):
// 255 gives NaN, 254 gives 2^-127.
func E8M0Reciprocal(b uint8) float32 {
	switch b {
	case 0xFF:
		return math.Float32frombits(0x7FFFFFFF)
	case 254:
		return math.Float32frombits(0x00400000)
	}
	return math.Float32frombits(uint32(254-b) << 23)
}

// Float32ToE8M0RoundUp is TE's float_to_e8m0 (spec §4.3): the smallest power of two
// ≥ x, saturating to 2^127. NaN gives 0xFF, +Inf 0xFE, 0 gives 0x00.
// Subnormal x ≤ 2^-127 gives 0x00 (2^-127 itself).
func Float32ToE8M0RoundUp(x float32) uint8 {
	b := math.Float32bits(x)
	if b&0x7FFFFFFF > 0x7F800000 {
		return E8M0NaN
	}
	if b == 0x7F800000 {
		return 0xFE
	}
	e := (b >> 23) & 0xFF
	m := b & 0x7FFFFF
	if m != 0 && e != 0xFE && !(e == 0 && m <= 0x400000) {
		e++
	}
	return uint8(e)
}

// Float32ToE8M0Floor returns the biased exponent of floor(log2 x) for positive finite
// x, clamped to [0, 254] (the OCP MX v1.0 rule's exponent, spec §4.4). NaN and Inf
// give 0xFF, zero gives 0.
func Float32ToE8M0Floor(x float32) uint8 {
	b := math.Float32bits(x) & 0x7FFFFFFF
	switch {
	case b >= 0x7F800000:
		return E8M0NaN
	case b == 0:
		return 0
	case b < 0x00800000: // float32 subnormal: below 2^-126, so the exponent clamps at 2^-127
		return 0
	}
	return uint8(b >> 23)
}
