package host

import (
	"fmt"
	"reflect"
)

// Usage says which directions a quantizer produces or a tensor holds.
type Usage uint32

const (
	Rowwise    Usage = 1 // scaling blocks along the last dim; used when a GEMM contracts over it
	Columnwise Usage = 2 // scaling blocks along the first (flattened) dim
	BothUsages       = Rowwise | Columnwise
)

// Has reports whether u includes every direction of v.
func (u Usage) Has(v Usage) bool { return u&v == v }

func (u Usage) String() string {
	switch u {
	case 0:
		return "none"
	case Rowwise:
		return "rowwise"
	case Columnwise:
		return "columnwise"
	case BothUsages:
		return "rowwise+columnwise"
	}
	return fmt.Sprintf("usage(%#x)", uint32(u))
}

// Direction is one of the two directions; it indexes QTensor storages.
type Direction int

const (
	DirRowwise    Direction = 0
	DirColumnwise Direction = 1
)

// Usage returns the usage bit of the direction.
func (d Direction) Usage() Usage { return Usage(1 << d) }

func (d Direction) String() string {
	if d == DirRowwise {
		return "rowwise"
	}
	return "columnwise"
}

// Element selects a format's element type. Zero is the format's default.
type Element int32

const (
	ElementDefault Element = 0
	ElementE4M3    Element = 1
	ElementE5M2    Element = 2
	ElementE2M1    Element = 3
	ElementE2M3    Element = 4 // FP6 E2M3 (OCP MX v1.0; the mxfp6 plugin)
	ElementE3M2    Element = 5 // FP6 E3M2 (OCP MX v1.0; the mxfp6 plugin)
)

func (e Element) String() string {
	switch e {
	case ElementDefault:
		return "default"
	case ElementE4M3:
		return "e4m3"
	case ElementE5M2:
		return "e5m2"
	case ElementE2M1:
		return "e2m1"
	case ElementE2M3:
		return "e2m3"
	case ElementE3M2:
		return "e3m2"
	}
	return fmt.Sprintf("element(%d)", int32(e))
}

// Scaling selects how per-tensor FP8 obtains its scale (spec §2, §3).
type Scaling int32

const (
	ScalingCurrent Scaling = 0 // scale from this tensor's amax
	ScalingDelayed Scaling = 1 // scale from an amax history updated after each step
)

// AmaxAlgo selects the amax that the delayed-scaling update uses (spec §2.4).
type AmaxAlgo int32

const (
	AmaxMax        AmaxAlgo = 0 // max over the history
	AmaxMostRecent AmaxAlgo = 1 // this step's amax
)

// ScaleRounding selects how MX formats turn a block amax into an E8M0 exponent.
type ScaleRounding int32

const (
	ScaleRCEIL ScaleRounding = 0 // TE's rule: round the exponent up (spec §4.3)
	ScaleFLOOR ScaleRounding = 1 // OCP MX v1.0: floor(log2 amax) - emax, clamping (spec §4.4)
)

// RHTMode selects the random Hadamard transform of NVFP4's columnwise copy (spec §5.5).
type RHTMode int32

const (
	RHTOff        RHTMode = 0
	RHTDefault    RHTMode = 1 // sign mask 0xD7E8
	RHTCustomMask RHTMode = 2 // sign mask from Params.RHTSignMask
)

// Params is the flat parameter set of one direction's format, the Go mirror of
// quant_quantizer_config. Zero values mean the format's default; each format's
// NewSpec checks the fields it reads and rejects ones that make no sense for it.
type Params struct {
	Format  string  `c:"format"`
	Element Element `c:"element"`

	// Per-tensor FP8 (spec §2, §3).
	Scaling         Scaling  `c:"scaling"`
	ForcePow2Scales bool     `c:"force_pow2_scales"`
	AmaxEpsilon     float32  `c:"amax_epsilon"`
	AmaxHistoryLen  int32    `c:"amax_history_len"`
	AmaxAlgo        AmaxAlgo `c:"amax_compute_algo"`
	Margin          float32  `c:"margin"`

	// Block formats.
	BlockDims          int32         `c:"block_dims"`  // fp8_block: 1 (1x128) or 2 (128x128); nvfp4: 1 (1x16) or 2 (16x16)
	FP32Scales         bool          `c:"fp32_scales"` // fp8_block: FP32 scales instead of power-of-two
	ScaleRounding      ScaleRounding `c:"scale_rounding"`
	GEMMSwizzledScales bool          `c:"gemm_swizzled_scales"`

	// NVFP4 (spec §5).
	RHT                RHTMode `c:"rht"`
	RHTSignMask        uint32  `c:"rht_sign_mask"`
	StochasticRounding bool    `c:"stochastic_rounding"`
	Seed               uint64  `c:"seed"`
	Offset             uint64  `c:"offset"`

	// Identity: the dtype held (DTypeInvalid keeps the input's).
	HoldDType DType `c:"dtype"`
}

// CheckUnused fails when a field other than Format and the named ones (Go field
// names) is set, naming the C field, so that a setting the format would ignore
// is an error instead of a silent no-op.
func (p Params) CheckUnused(used ...string) error {
	v := reflect.ValueOf(p)
	t := v.Type()
outer:
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Name == "Format" || v.Field(i).IsZero() {
			continue
		}
		for _, u := range used {
			if u == f.Name {
				continue outer
			}
		}
		return Errorf(ErrInvalidArgument, "config.%s: not used by format %q (leave it zero)", f.Tag.Get("c"), p.Format)
	}
	return nil
}
