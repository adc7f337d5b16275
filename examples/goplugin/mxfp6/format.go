// Package mxfp6 is OCP Microscaling (MX) v1.0 FP6 as a libquant format for
// pluginsdk: elements E2M3 or E3M2 (§5.3.2) sharing one E8M0 scale per 32
// (§5.2, §6.3). cmd/mxfp6 serves it as an out-of-process plugin.
package mxfp6

import (
	"fmt"

	"libquant/internal/numeric"
	"libquant/pluginsdk"
)

// Name is the format's registry name.
const Name = "mxfp6"

// BlockLen is the number of elements that share one E8M0 scale (OCP MX v1.0
// §5.2: k = 32 for every concrete MX format).
const BlockLen = 32

// Format is the mxfp6 format, for pluginsdk.Serve.
type Format struct{}

func (Format) Name() string { return Name }

// NewSpec takes config.element (QUANT_ELEMENT_E2M3, the default, or
// QUANT_ELEMENT_E3M2) and config.scale_rounding (RCEIL, the default, or FLOOR);
// every other field must stay zero.
func (Format) NewSpec(p pluginsdk.Params) (pluginsdk.Spec, error) {
	rest := p
	rest.Format, rest.Element, rest.ScaleRounding = "", 0, 0
	if rest != (pluginsdk.Params{}) {
		return nil, fmt.Errorf("config: mxfp6 reads only element and scale_rounding (got %+v): %w", rest, pluginsdk.ErrInvalidArgument)
	}
	s := &spec{p: p}
	switch p.Element {
	case pluginsdk.ElementDefault, pluginsdk.ElementE2M3:
		s.p.Element, s.el, s.dtype = pluginsdk.ElementE2M3, numeric.E2M3, pluginsdk.Float6E2M3
	case pluginsdk.ElementE3M2:
		s.el, s.dtype = numeric.E3M2, pluginsdk.Float6E3M2
	default:
		return nil, fmt.Errorf("config.element: %d not supported by mxfp6 (want QUANT_ELEMENT_E2M3 or QUANT_ELEMENT_E3M2): %w", p.Element, pluginsdk.ErrInvalidArgument)
	}
	if p.ScaleRounding != pluginsdk.ScaleRCEIL && p.ScaleRounding != pluginsdk.ScaleFLOOR {
		return nil, fmt.Errorf("config.scale_rounding: %d is not QUANT_SCALE_RCEIL (0) or QUANT_SCALE_FLOOR (1): %w", p.ScaleRounding, pluginsdk.ErrInvalidArgument)
	}
	// TE's RCEIL multiplies the amax by a pre-rounded reciprocal of the max
	// (spec §4.3): fl32(1/7.5) and fl32(1/28) are inexact, as fl32(1/448) is.
	s.rcp = float32(1.0 / float64(s.el.Max))
	s.bf16 = bf16Tables[s.el]
	return s, nil
}

type spec struct {
	p    pluginsdk.Params
	el   *numeric.FP6
	rcp  float32
	bf16 *bf16Table // the codes of scaled BF16 values (blockBF16)
	// dtype is the data buffers' DLPack type (float6_e2m3fn or float6_e3m2fn).
	dtype pluginsdk.DType
}

var bf16Tables = map[*numeric.FP6]*bf16Table{numeric.E2M3: newBF16Table(numeric.E2M3), numeric.E3M2: newBF16Table(numeric.E3M2)}

func (s *spec) Params() pluginsdk.Params { return s.p }

// Layout (any [M, K] with M, K ≥ 0, spec §14):
//
//	rowwise:    data FP6 [M, 4·⌈K/4⌉]   scale_inv E8M0 [M, ⌈K/32⌉]
//	columnwise: data FP6 [K, 4·⌈M/4⌉]   scale_inv E8M0 [K, ⌈M/32⌉]
//
// The data buffers are DLPack float6_e2m3fn / float6_e3m2fn (codes 15, 16,
// 6 bits), packed: 4 codes in 3 bytes, code i of a row in bits 6i..6i+5
// (numeric.PackFP6), so a row is 3·⌈K/4⌉ bytes; the up to 3 codes past K (or
// M) are zero. Columnwise is stored transposed, as MXFP4's (spec §4.5's NVFP4
// rule), so that each 32×1 block is 24 contiguous bytes. Scales are compact:
// this format has no GEMM swizzle.
func (s *spec) Layout(m, k int64, dir pluginsdk.Direction) ([]pluginsdk.BufferSpec, error) {
	if m < 0 || k < 0 {
		return nil, fmt.Errorf("shape: [%d, %d] has a negative dim: %w", m, k, pluginsdk.ErrInvalidArgument)
	}
	rows, cols := m, k
	if dir == pluginsdk.Columnwise {
		rows, cols = k, m
	}
	return []pluginsdk.BufferSpec{
		{Kind: pluginsdk.BufData, DType: s.dtype, Shape: []int64{rows, (cols + 3) / 4 * 4}},
		{Kind: pluginsdk.BufScaleInv, DType: pluginsdk.E8M0, Shape: []int64{rows, (cols + BlockLen - 1) / BlockLen}},
	}, nil
}

// Derivable: neither direction can be built from the other, whose blocks run
// the other way (as MXFP8, spec §7.4).
func (s *spec) Derivable(from, to pluginsdk.Direction) bool { return false }

func (s *spec) Derive(*pluginsdk.DeriveRequest) error {
	return fmt.Errorf("mxfp6: a direction cannot be derived from the other (their blocks run along different dims): %w", pluginsdk.ErrUnsupported)
}

// exponent is a block's E8M0 scale byte for its amax (NaN elements skipped).
//
// RCEIL (TE's MXFP8 rule, spec §4.3): float_to_e8m0(fl32(amax · fl32(1/max))),
// rounding the power of two up, so no element clips; NaN → 0xFF, Inf → 0xFE.
//
// FLOOR (OCP MX v1.0 §6.3, spec §4.4): X = 2^(floor(log2 amax) − emax_elem)
// with emax_elem = 2 (E2M3) or 4 (E3M2), the exponent clamped to E8M0's
// [−127, 127]; elements past the max after scaling saturate. An Inf amax
// gives the NaN scale 0xFF (§5.4: a NaN scale makes the whole block NaN).
func (s *spec) exponent(amax float32) uint8 {
	if s.p.ScaleRounding == pluginsdk.ScaleFLOOR {
		b := numeric.Float32ToE8M0Floor(amax)
		switch {
		case b == numeric.E8M0NaN:
			return b
		case b < s.el.Emax:
			return 0
		}
		return b - s.el.Emax
	}
	return numeric.Float32ToE8M0RoundUp(amax * s.rcp)
}
