package numeric

import "math"

// BF16ToFloat32 widens a bfloat16 bit pattern exactly.
func BF16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// Float32ToBF16 rounds x to bfloat16 with round-to-nearest-even; NaN stays a
// (quiet) NaN with its sign, infinities stay infinite.
func Float32ToBF16(x float32) uint16 {
	b := math.Float32bits(x)
	if b&0x7FFFFFFF > 0x7F800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7FFF + (b>>16)&1
	return uint16(b >> 16)
}

// FP16ToFloat32 widens an IEEE binary16 bit pattern exactly.
func FP16ToFloat32(h uint16) float32 { return fp16Table[h] }

var fp16Table = func() (t [65536]float32) {
	for i := range t {
		h := uint16(i)
		s := 1.0
		if h&0x8000 != 0 {
			s = -1
		}
		e, m := int(h>>10)&0x1F, int(h&0x3FF)
		switch {
		case e == 31 && m == 0:
			t[i] = float32(s * math.Inf(1))
		case e == 31:
			t[i] = math.Float32frombits(uint32(h&0x8000)<<16 | 0x7FC00000 | uint32(m)<<13)
		case e == 0:
			t[i] = float32(s * math.Ldexp(float64(m), -24))
		default:
			t[i] = float32(s * math.Ldexp(float64(1024+m), e-15-10))
		}
	}
	return
}()

// Float32ToFP16 rounds x to IEEE binary16 with round-to-nearest-even; overflow
// gives ±Inf (IEEE semantics, as a CUDA __float2half_rn does), NaN stays NaN.
func Float32ToFP16(x float32) uint16 {
	b := math.Float32bits(x)
	sign := uint16(b>>16) & 0x8000
	a := b & 0x7FFFFFFF
	switch {
	case a > 0x7F800000:
		return sign | 0x7E00 | uint16((a>>13)&0x3FF)
	case a >= 0x477FF000: // ≥ 65520 = max + half ulp: rounds to Inf
		return sign | 0x7C00
	case a < 0x38800000: // < 2^-14: subnormal half, step 2^-24 (exact scaling, then RNE)
		return sign | uint16(math.RoundToEven(float64(math.Float32frombits(a))*(1<<24)))
	}
	const shift = 13
	e := (a>>23 - 127 + 15) << 10
	m := a & 0x7FFFFF
	m += 1<<(shift-1) - 1 + (m>>shift)&1
	return sign | uint16(e+m>>shift)
}

// Float64ToBF16 rounds x to bfloat16 directly (one rounding, to nearest even),
// with IEEE overflow to ±Inf and bfloat16 subnormals. Every NaN gives the
// canonical quiet NaN 0x7FC0. For a float32 x it equals Float32ToBF16.
func Float64ToBF16(x float64) uint16 {
	b := math.Float64bits(x)
	a := b &^ (1 << 63)
	if a-0x3810000000000000 < 0x47F0000000000000-0x3810000000000000 {
		// 2^-126 ≤ |x| < 2^128: keep 7 of 52 mantissa bits with RNE; a carry
		// rolls into the exponent, up to 255 (Inf) exactly when RNE overflows.
		// The bf16 exponent is the float64 one minus 1023-127 = 896.
		a += 1<<44 - 1 + (a>>45)&1
		return uint16(b>>48)&0x8000 | uint16(a>>45-896<<7)
	}
	return float64ToBF16Edge(x)
}

// Float64ToBF16Normal is Float64ToBF16's common case, small enough to inline
// in a hot loop: ok is false, and h meaningless, when |x| is outside
// [2^-126, 2^128) (zero, subnormal, overflow, Inf, NaN), where the caller
// falls back to Float64ToBF16.
func Float64ToBF16Normal(x float64) (h uint16, ok bool) {
	b := math.Float64bits(x)
	a := b &^ (1 << 63)
	a += 1<<44 - 1 + (a>>45)&1
	return uint16(b>>48)&0x8000 | uint16(a>>45-896<<7), b&^(1<<63)-0x3810000000000000 < 0x47F0000000000000-0x3810000000000000
}

// float64ToBF16Edge is Float64ToBF16 outside the normal range: subnormals and
// zero, Inf and overflow, NaN.
func float64ToBF16Edge(x float64) uint16 {
	if x != x {
		return 0x7FC0
	}
	b := math.Float64bits(x)
	sign := uint16(b>>48) & 0x8000
	a := b &^ (1 << 63)
	if a < 0x3810000000000000 { // < 2^-126: subnormal bf16, step 2^-133; the scaling is exact
		return sign | uint16(math.RoundToEven(math.Float64frombits(a)*0x1p133))
	}
	return sign | 0x7F80 // ≥ 2^128, Inf included
}

// RoundToBF16 rounds each src[i] once to bfloat16 (Float64ToBF16) and stores
// its exact float32 value in dst[i], for kernels that keep BF16 values in
// float32 registers.
func RoundToBF16(dst []float32, src []float64) {
	dst = dst[:len(src)]
	for i, x := range src {
		b := math.Float64bits(x)
		a := b &^ (1 << 63)
		var h uint16
		if a-0x3810000000000000 < 0x47F0000000000000-0x3810000000000000 {
			a += 1<<44 - 1 + (a>>45)&1
			h = uint16(b>>48)&0x8000 | uint16(a>>45-896<<7)
		} else {
			h = float64ToBF16Edge(x)
		}
		dst[i] = math.Float32frombits(uint32(h) << 16)
	}
}
