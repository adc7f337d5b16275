package nvfp4

import (
	"math"

	"libquant/internal/numeric"
)

// The random Hadamard transform (RHT) of spec §5.5, exactly as this library
// defines its bits. For a chunk v of 16 consecutive elements of a columnwise
// row (16 logical rows m0..m0+15 of one column k, the chunk a 1×16 block
// covers) and a sign mask with s_i = -1 where bit i is set:
//
//	y_j = RNE_bf16( 1/4 · Σ_{i=0..15} s_i · H16[i][j] · v_i ),  H16[i][j] = (-1)^popcount(i&j)
//
// The sum is the float64 sum in ascending i, rounded once, directly from
// float64, to BF16 (numeric.Float64ToBF16); a zero sum is +0, a NaN is the
// canonical 0x7FC0. The inputs are BF16 values (8 significant bits), so when
// the ulp exponents max(biased exponent, 1) of the chunk's non-zero finite
// inputs span at most 41 every partial sum is exact and any summation order
// gives the same float64 (the fast Walsh-Hadamard butterfly below does); only
// chunks with a wider span take the ascending-order loop. A chunk holding an
// Inf or NaN gives the same ±Inf or NaN in any order.
//
// TE computes the transform on tensor cores with FP32 accumulation and BF16
// outputs; its bits agree with this definition whenever its accumulation is
// exact (ulp span ≤ 12), and TE's quantize reads the same BF16-rounded values
// (spec §5.5; §13 item 4).

// maxExactSpan is the largest ulp-exponent span of 16 BF16 inputs for which
// every partial sum of the transform is exact in float64: sums stay below
// 16·2^(maxUlp+8) on a grid of 2^minUlp, which needs (maxUlp+12) - minUlp ≤ 53.
const maxExactSpan = 41

// rhtSigns expands a sign mask into ±1 factors.
func rhtSigns(mask uint16) (s [16]float64) {
	for i := range s {
		s[i] = 1
		if mask>>i&1 != 0 {
			s[i] = -1
		}
	}
	return
}

// fwht16 is the in-place unnormalised Walsh-Hadamard transform of 16 values,
// x ← H16·x (H16 is symmetric): four butterfly stages, unrolled.
func fwht16(x *[16]float64) {
	x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13, x14, x15 := x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9], x[10], x[11], x[12], x[13], x[14], x[15]
	x0, x1 = x0+x1, x0-x1
	x2, x3 = x2+x3, x2-x3
	x4, x5 = x4+x5, x4-x5
	x6, x7 = x6+x7, x6-x7
	x8, x9 = x8+x9, x8-x9
	x10, x11 = x10+x11, x10-x11
	x12, x13 = x12+x13, x12-x13
	x14, x15 = x14+x15, x14-x15
	x0, x2 = x0+x2, x0-x2
	x1, x3 = x1+x3, x1-x3
	x4, x6 = x4+x6, x4-x6
	x5, x7 = x5+x7, x5-x7
	x8, x10 = x8+x10, x8-x10
	x9, x11 = x9+x11, x9-x11
	x12, x14 = x12+x14, x12-x14
	x13, x15 = x13+x15, x13-x15
	x0, x4 = x0+x4, x0-x4
	x1, x5 = x1+x5, x1-x5
	x2, x6 = x2+x6, x2-x6
	x3, x7 = x3+x7, x3-x7
	x8, x12 = x8+x12, x8-x12
	x9, x13 = x9+x13, x9-x13
	x10, x14 = x10+x14, x10-x14
	x11, x15 = x11+x15, x11-x15
	x0, x8 = x0+x8, x0-x8
	x1, x9 = x1+x9, x1-x9
	x2, x10 = x2+x10, x2-x10
	x3, x11 = x3+x11, x3-x11
	x4, x12 = x4+x12, x4-x12
	x5, x13 = x5+x13, x5-x13
	x6, x14 = x6+x14, x6-x14
	x7, x15 = x7+x15, x7-x15
	x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9], x[10], x[11], x[12], x[13], x[14], x[15] = x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13, x14, x15
}

// exactSpan reports whether the butterfly's partial sums are exact for v (see
// maxExactSpan), or v holds an Inf or NaN, which every order propagates alike.
// Zeros do not count; a subnormal's ulp exponent is that of the smallest
// normal. Branch-free: zeros are masked to exponent 255 for the minimum.
func exactSpan(v *[16]float32) bool {
	lo, hi := uint32(255), uint32(0)
	for _, x := range v {
		a := math.Float32bits(x) & 0x7FFFFFFF
		e := a >> 23
		zero := uint32(int32(a-1)>>31) & 0xFF // 0xFF for a zero, else 0
		lo = min(lo, max(e, 1)|zero)
		hi = max(hi, e)
	}
	return hi == 255 || hi <= lo+maxExactSpan
}

// rhtSums computes z_j = Σ_i s_i·H16[i][j]·v_i in float64, the transform
// before its factor 1/4: by the butterfly when every order is exact, else in
// ascending i.
func rhtSums(v *[16]float32, signs *[16]float64, z *[16]float64) {
	for i := range z {
		z[i] = float64(v[i]) * signs[i] // exact: a sign
	}
	if exactSpan(v) {
		fwht16(z)
		return
	}
	t := *z
	for j := range z {
		acc := 0.0
		for i, ti := range t {
			if hadamardSign(i, j) {
				ti = -ti
			}
			acc += ti
		}
		z[j] = acc
	}
}

// hadamardSign reports whether H16[i][j] = -1.
func hadamardSign(i, j int) bool {
	b := i & j
	b ^= b >> 2
	b ^= b >> 1
	return b&1 != 0
}

// rhtChunk transforms one chunk of 16 BF16 values, given and returned as
// bits, exactly as defined above. Exact spans take the unrolled butterfly on
// locals; the rest the ascending-order sums.
func rhtChunk(h *[16]uint16, signs *[16]float64, out *[16]uint16) {
	// The span test of exactSpan on BF16 bits: the smallest non-zero and the
	// largest magnitude (zeros wrap to 0xFFFF in a-1 and drop out of the min).
	lo, hi := uint16(0xFFFF), uint16(0)
	for _, v := range h {
		a := v & 0x7FFF
		lo = min(lo, a-1)
		hi = max(hi, a)
	}
	loE, hiE := (uint32(lo)+1)>>7, uint32(hi)>>7
	if hiE < 255 && hiE > max(loE, 1)+maxExactSpan {
		rhtChunkOrdered(h, signs, out)
		return
	}
	var z [16]float64
	for i, b := range h {
		z[i] = float64(math.Float32frombits(uint32(b)<<16)) * signs[i]
	}
	fwht16(&z)
	for i, y := range z {
		out[i] = bf16Out(y * 0.25) // the factor is exact
	}
}

// rhtChunkOrdered is rhtChunk by the ascending-order sums (rhtSums).
func rhtChunkOrdered(h *[16]uint16, signs *[16]float64, out *[16]uint16) {
	var v [16]float32
	var z [16]float64
	for i, b := range h {
		v[i] = math.Float32frombits(uint32(b) << 16)
	}
	rhtSums(&v, signs, &z)
	for i, y := range z {
		out[i] = bf16Out(y * 0.25)
	}
}

// bf16Out rounds one transformed value to BF16 bits; an exact zero is +0.
func bf16Out(y float64) uint16 {
	if h, ok := numeric.Float64ToBF16Normal(y); ok {
		return h
	}
	if y == 0 {
		return 0
	}
	return numeric.Float64ToBF16(y)
}

// RHTBF16 replaces the 16 BF16 values in v (widened to float32: their low 16
// bits are zero) by their transform rounded to BF16 (widened back): the
// values the columnwise copy quantizes.
func RHTBF16(v *[16]float32, signMask uint16) {
	signs := rhtSigns(signMask)
	var h, out [16]uint16
	for i, x := range v {
		h[i] = uint16(math.Float32bits(x) >> 16)
	}
	rhtChunk(&h, &signs, &out)
	for i, b := range out {
		v[i] = numeric.BF16ToFloat32(b)
	}
}

// rhtInverse maps 16 transformed values back (dequantize with the transform
// undone): H = (1/4)·diag(s)·H16 is orthogonal, so x_i = s_i/4 · Σ_j H16[i][j]·y_j,
// computed in float64 in butterfly order and rounded once to float32. TE has no
// such step, so these bits are this library's own.
func rhtInverse(v *[16]float32, signs *[16]float64) {
	var y [16]float64
	for j := range y {
		y[j] = float64(v[j])
	}
	fwht16(&y)
	for i := range v {
		v[i] = float32(y[i] * 0.25 * signs[i])
	}
}
