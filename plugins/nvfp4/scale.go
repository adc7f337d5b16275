package nvfp4

import (
	"math"

	"libquant/internal/numeric"
)

// The float32 constants of spec §5.2, each one rounding of the exact value.
const (
	fp4Max = 6
	fp8Max = 448
	// encNumerator is 448·6, constexpr-folded in TE's kernel.
	encNumerator float32 = fp8Max * fp4Max
	// recip6 is fl32(1/6) = 0x3E2AAAAB.
	recip6 float32 = 1.0 / fp4Max
	// dequantFactor is fl32(1/(6·448)), the per-tensor factor of dequantize.
	dequantFactor float32 = 1.0 / (fp4Max * fp8Max)
	// gemmFactor is fl32(1/(6·6·448·448)) of nvte_nvfp4_compute_per_tensor_scale.
	gemmFactor float32 = 1.0 / (fp4Max * fp4Max * fp8Max * fp8Max)
)

// GlobalEncodeScale is S_enc of spec §5.2 (compute_global_encode_scaling_factor_FP4
// in core_nvfp4.cuh):
//
//	S_enc = fminf(fl32(2688 / amax), FLT_MAX)   (+Inf and a NaN amax give FLT_MAX)
//	if amax == 0 or S_enc == 0 (amax = +Inf): S_enc = 1
func GlobalEncodeScale(amax float32) float32 {
	s := encNumerator / amax
	if !(s <= math.MaxFloat32) { // fminf: NaN loses to FLT_MAX, so does +Inf
		s = math.MaxFloat32
	}
	if amax == 0 || s == 0 {
		return 1
	}
	return s
}

// GlobalDecodeScale is S_dec = fl32(1/S_enc), computed in double and rounded
// once to float32 (spec §5.2).
func GlobalDecodeScale(sEnc float32) float32 { return float32(1 / float64(sEnc)) }

// globalScale is the per-direction part of spec §5.2 that every block shares.
type globalScale struct {
	amax     float32
	sEncDiv6 float32 // fl32(S_enc · fl32(1/6))
	sDec     float32 // S_dec
	// encB[c] is enc_b of E4M3 scale code c: a block scale is one of 256
	// codes, so the per-block reciprocal is a lookup (the same division,
	// done once per code).
	encB [256]float32
}

func newGlobalScale(amax float32) globalScale {
	sEnc := GlobalEncodeScale(amax)
	g := globalScale{amax: amax, sEncDiv6: float32(sEnc * recip6), sDec: GlobalDecodeScale(sEnc)}
	for c := range g.encB {
		g.encB[c] = encodeFactor(uint8(c), g.sDec)
	}
	return g
}

// encodeFactor is enc_b = fminf(fl32(1 / fl32(float(S_dec_b_fp8) · S_dec)), FLT_MAX)
// (spec §5.2). A zero block scale gives FLT_MAX, so its zero elements stay zero.
func encodeFactor(code uint8, sDec float32) float32 {
	e := 1 / float32(numeric.DecodeE4M3(code)*sDec)
	if !(e <= math.MaxFloat32) { // fminf(+Inf, FLT_MAX); NaN (codes 0x7F, 0xFF, never written) alike
		e = math.MaxFloat32
	}
	return e
}

// blockScale turns a block amax into the block's E4M3 scale code and the
// factor its elements are multiplied by (spec §5.2):
//
//	S_dec_b     = fl32(bamax · fl32(S_enc · fl32(1/6)))
//	S_dec_b_fp8 = RNE_sat_e4m3(S_dec_b)          (+Inf saturates to 448)
//	enc_b       = encodeFactor(S_dec_b_fp8)
func (g *globalScale) blockScale(bamax float32) (code uint8, encB float32) {
	code = numeric.EncodeE4M3(float32(bamax * g.sEncDiv6))
	return code, g.encB[code]
}

// DequantScale is the factor every element of a block is multiplied by when
// dequantizing (dequantize_nvfp4.cuh, spec §5.2 "Dequantize"):
// final_scale = fl32(fl32(float(S_dec_b_fp8) · amax) · fl32(1/(6·448))).
func DequantScale(scaleCode uint8, amax float32) float32 {
	return float32(float32(numeric.DecodeE4M3(scaleCode)*amax) * dequantFactor)
}

// TensorScale is the per-tensor factor of a direction with global amax amax,
// fl32(amax · fl32(1/(6·448))): a block's values are e2m1 · float(S_dec_b_fp8)
// (exact in float32) times this factor. It is what the CPU GEMM folds into
// alpha for NVFP4 operands (host.TileDequantizer).
func TensorScale(amax float32) float32 { return float32(amax * dequantFactor) }

// GEMMAlpha is cuBLAS's alpha for an NVFP4 × NVFP4 GEMM whose operands have
// global amaxes amaxA and amaxB (nvte_nvfp4_compute_per_tensor_scale, spec
// §5.2), evaluated left to right in float32:
//
//	alpha = fl32(fl32(fl32(alphaIn · amaxA) · amaxB) · fl32(1/(6·6·448·448)))
//
// With alphaIn = 1 it equals TensorScale(amaxA)·TensorScale(amaxB) up to a few
// float32 roundings (each product rounds once; the two constants differ by
// their own rounding), which is how the tile path relates to it.
func GEMMAlpha(alphaIn, amaxA, amaxB float32) float32 {
	return float32(float32(float32(alphaIn*amaxA)*amaxB) * gemmFactor)
}
