package fp8

import (
	"math"

	"libquant/host"
	"libquant/internal/numeric"
)

// ScaleFromAmax is TE's compute_scale_from_amax (spec §3.2, recipe_common.cuh):
//
//	if amax < eps: amax = eps           (a NaN amax survives)
//	if amax is inf, 0 or NaN: return 1
//	scale = fl32(fp8Max / amax)
//	if scale is inf: scale = valueForInf
//	if pow2: keep sign and exponent bits (round down to 2^k)
func ScaleFromAmax(amax, fp8Max float32, pow2 bool, eps, valueForInf float32) float32 {
	if amax < eps {
		amax = eps
	}
	if math.IsInf(float64(amax), 0) || amax == 0 || amax != amax {
		return 1
	}
	scale := fp8Max / amax
	if math.IsInf(float64(scale), 0) {
		scale = valueForInf
	}
	if pow2 {
		scale = math.Float32frombits(math.Float32bits(scale) & 0xFF800000)
	}
	return scale
}

// Reciprocal is __frcp_rn: the correctly rounded float32 1/x (spec §2.3).
func Reciprocal(x float32) float32 { return 1 / x }

// elementCodec is the encoder, decode table, max and buffer dtype of an element type.
type elementCodec struct {
	encode func(float32) uint8
	table  *[256]float32
	max    float32
	dtype  host.DType
}

func codecFor(e host.Element) elementCodec {
	if e == host.ElementE5M2 {
		return elementCodec{numeric.EncodeE5M2, numeric.E5M2Table(), numeric.E5M2Max, host.E5M2}
	}
	return elementCodec{numeric.EncodeE4M3, numeric.E4M3Table(), numeric.E4M3Max, host.E4M3}
}
