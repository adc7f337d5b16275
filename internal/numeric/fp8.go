package numeric

import "math"

// E4M3Max and E5M2Max are the largest finite values (spec §1.2, §1.3).
const (
	E4M3Max float32 = 448
	E5M2Max float32 = 57344
)

// E4M3NaN is the canonical NaN code a NaN input encodes to (spec §1.2).
const E4M3NaN uint8 = 0x7F

// E5M2NaN is the code a NaN input encodes to (spec §1.3: NaN gives 0x7F).
const E5M2NaN uint8 = 0x7F

// EncodeE4M3 converts x to FP8 E4M3 ("fn": no infinity) with round-to-nearest-even
// and satfinite, the rule of cvt.rn.satfinite.e4m3x2.f32 (spec §1.2):
// |x| ≤ 2^-10 gives a signed zero, |x| ≥ 464 and ±Inf give ±448, NaN gives 0x7F.
func EncodeE4M3(x float32) uint8 {
	b := math.Float32bits(x)
	sign := uint8(b>>24) & 0x80
	a := b & 0x7FFFFFFF
	switch {
	case a > 0x7F800000: // NaN
		return E4M3NaN
	case a >= 0x43E80000: // ≥ 464 (max + half ulp; the tie also rounds to 448), Inf included
		return sign | 0x7E
	case a < 0x3C800000: // < 2^-6: E4M3 subnormal range, step 2^-9
		// Scaling by 2^9 is exact, so RoundToEven sees the exact quotient.
		m := uint8(math.RoundToEven(float64(math.Float32frombits(a)) * 512))
		return sign | m // m == 8 is code 0x08, the smallest normal: the encoding carries over
	}
	// Normal: keep 3 of 23 mantissa bits with RNE; a carry rolls into the exponent.
	const shift = 20
	e := (a>>23 - 127 + 7) << 3
	m := a & 0x7FFFFF
	m += 1<<(shift-1) - 1 + (m>>shift)&1
	return sign | uint8(e+m>>shift)
}

// EncodeE5M2 converts x to FP8 E5M2 with round-to-nearest-even and satfinite
// (spec §1.3): overflow and ±Inf saturate to ±57344, NaN gives 0x7F.
func EncodeE5M2(x float32) uint8 {
	b := math.Float32bits(x)
	sign := uint8(b>>24) & 0x80
	a := b & 0x7FFFFFFF
	switch {
	case a > 0x7F800000:
		return E5M2NaN
	case a >= 0x47700000: // ≥ 61440 (max + half ulp, a tie to the odd side that satfinite clamps), Inf included
		return sign | 0x7B
	case a < 0x38800000: // < 2^-14: subnormal range, step 2^-16
		m := uint8(math.RoundToEven(float64(math.Float32frombits(a)) * 65536))
		return sign | m
	}
	const shift = 21
	e := (a>>23 - 127 + 15) << 2
	m := a & 0x7FFFFF
	m += 1<<(shift-1) - 1 + (m>>shift)&1
	return sign | uint8(e+m>>shift)
}

// DecodeE4M3 returns the exact value of an E4M3 code (0x7F and 0xFF are NaN).
func DecodeE4M3(c uint8) float32 { return e4m3Table[c] }

// DecodeE5M2 returns the exact value of an E5M2 code.
func DecodeE5M2(c uint8) float32 { return e5m2Table[c] }

// E4M3Table and E5M2Table expose the decode tables for kernels that index them directly.
func E4M3Table() *[256]float32 { return &e4m3Table }

// E5M2Table is the E5M2 decode table.
func E5M2Table() *[256]float32 { return &e5m2Table }

var e4m3Table, e5m2Table = buildFP8Tables()

func buildFP8Tables() (t4, t5 [256]float32) {
	for c := 0; c < 256; c++ {
		s := 1.0
		if c&0x80 != 0 {
			s = -1
		}
		// E4M3: bias 7, 3 mantissa bits; S.1111.111 is NaN, nothing is Inf.
		e, m := (c>>3)&0xF, c&7
		switch {
		case e == 15 && m == 7:
			t4[c] = float32(math.NaN())
		case e == 0:
			t4[c] = float32(s * math.Ldexp(float64(m), -9))
		default:
			t4[c] = float32(s * math.Ldexp(float64(8+m), e-7-3))
		}
		// E5M2: bias 15, 2 mantissa bits, IEEE-like Inf/NaN at e == 31.
		e, m = (c>>2)&0x1F, c&3
		switch {
		case e == 31 && m == 0:
			t5[c] = float32(s * math.Inf(1))
		case e == 31:
			t5[c] = float32(math.NaN())
		case e == 0:
			t5[c] = float32(s * math.Ldexp(float64(m), -16))
		default:
			t5[c] = float32(s * math.Ldexp(float64(4+m), e-15-2))
		}
	}
	return
}
