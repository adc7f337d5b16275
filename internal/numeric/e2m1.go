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

// EncodeE2M1 converts x to E2M1 with round-to-nearest-even and saturation to ±6
// (spec §1.5 thresholds). NaN gives +6 (the satfinite edge of spec §1.5).
// A negative x that rounds to zero keeps its sign (code 8), as the hardware
// conversion does (spec §13 item 3).
//
// Every threshold of §1.5 (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5) has a zero in
// the low 21 bits of its float32 pattern, so the sign, exponent and top two
// mantissa bits (b >> 21), together with whether the low 21 bits are zero,
// decide the code: one lookup in a 4 KiB table built from the threshold rule.
func EncodeE2M1(x float32) uint8 {
	b := math.Float32bits(x)
	exact := ((b & 0x1FFFFF) - 1) >> 31 // 1 when the low 21 bits are zero
	return e2m1EncodeTable[b>>21<<1|exact]
}

// e2m1EncodeTable[(b>>21)<<1 | exact] is the code of the float32 pattern b.
var e2m1EncodeTable = func() (t [4096]uint8) {
	for i := range t {
		b := uint32(i>>1) << 21
		if i&1 == 0 {
			b |= 1 // any value strictly inside the 2^21-ulp bucket encodes alike
		}
		t[i] = encodeE2M1Compare(b)
	}
	return
}()

// encodeE2M1Compare is the threshold rule of spec §1.5 on a float32 pattern.
func encodeE2M1Compare(b uint32) uint8 {
	a := b & 0x7FFFFFFF
	if a > 0x7F800000 {
		return 7
	}
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
	return uint8(b>>28)&8 | c
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
// u·step = rbits·2^(e-8) with step = 2^e is exact in float32, so fmaf(u, step,
// |x|) is the float32 sum fl32(u·step + |x|), a plain float32 addition here.
// The floor onto t's region grid is the largest E2M1 magnitude ≤ t; every
// grid point has a zero in the low 21 bits of its float32 pattern, so t >> 21
// indexes a table of it.
func StochasticRoundE2M1(x float32, rbits uint8) uint8 {
	a := math.Float32bits(x) &^ (1 << 31)
	if a > 0x7F800000 {
		return 7 // NaN, whatever its sign
	}
	// u·step as rbits times 2^-9, 2^-8 or 2^-7: the exponent field of the
	// factor is 118 plus one for each of |x| ≥ 2, |x| ≥ 4.
	e := 118 + (0x3FFFFFFF-a)>>31 + (0x407FFFFF-a)>>31
	// The product is exact, so a fused multiply-add, where the compiler emits
	// one, gives the same t as the separate add: both are fmaf's result.
	t := float32(rbits)*math.Float32frombits(e<<23) + math.Float32frombits(a)
	return uint8(math.Float32bits(x)>>28)&8 | e2m1FloorTable[math.Float32bits(t)>>21]
}

// e2m1FloorTable[t >> 21] is the code of the largest E2M1 magnitude ≤ t for a
// non-negative float32 pattern t, 6 (code 7) at and above 6 and for NaN.
var e2m1FloorTable = func() (tab [1024]uint8) {
	for i := range tab {
		v := math.Float32frombits(uint32(i) << 21)
		c := uint8(7)
		if v == v {
			for c > 0 && e2m1Values[c] > v {
				c--
			}
		}
		tab[i] = c
	}
	return
}()

// PackE2M1 packs two codes into one byte: the even-index element in the low nibble
// (spec §1.5).
func PackE2M1(even, odd uint8) uint8 { return even&0xF | odd<<4 }
