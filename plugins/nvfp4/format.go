package nvfp4

import (
	"libquant/host"
	"libquant/host/ragged"
)

// Name is the format's registry name.
const Name = "nvfp4"

// BlockSize is the number of elements sharing one E4M3 scale along a row (and,
// for 2-D scaling, the edge of the square tile) (spec §5.2).
const BlockSize = 16

// DefaultRHTSignMask is the fixed sign vector of TE's RHT,
// s = [1,1,1,-1,1,-1,-1,-1,-1,-1,-1,1,-1,1,-1,-1]: bit i set flips sign i (spec §5.5).
const DefaultRHTSignMask uint16 = 0xD7E8

func init() { host.MustRegister(format{}, kernels{}) }

type format struct{}

func (format) Name() string { return Name }

// NewSpec validates the fields NVFP4 reads (spec §5.1) and rejects every other
// one: element (E2M1), block_dims (1 or 2), gemm_swizzled_scales, rht and
// rht_sign_mask, stochastic_rounding with seed and offset.
func (format) NewSpec(p host.Params) (host.Spec, error) {
	used := []string{"Element", "BlockDims", "GEMMSwizzledScales", "RHT", "RHTSignMask", "StochasticRounding"}
	if p.StochasticRounding {
		used = append(used, "Seed", "Offset")
	}
	if err := p.CheckUnused(used...); err != nil {
		return nil, err
	}
	switch p.Element {
	case host.ElementDefault:
		p.Element = host.ElementE2M1
	case host.ElementE2M1:
	default:
		return nil, host.Errorf(host.ErrInvalidArgument, "config.element: %s not supported by nvfp4 (want e2m1)", p.Element)
	}
	switch p.BlockDims {
	case 0:
		p.BlockDims = 1
	case 1, 2:
	default:
		return nil, host.Errorf(host.ErrInvalidArgument, "config.block_dims: %d not supported by nvfp4 (want 1 for 1×16 blocks or 2 for 16×16 tiles)", p.BlockDims)
	}
	var mask uint16
	switch p.RHT {
	case host.RHTOff, host.RHTDefault:
		if p.RHTSignMask != 0 {
			return nil, host.Errorf(host.ErrInvalidArgument, "config.rht_sign_mask: %#x is only read with rht = QUANT_RHT_CUSTOM_MASK (2); rht is %d", p.RHTSignMask, p.RHT)
		}
		mask = DefaultRHTSignMask
	case host.RHTCustomMask:
		if p.RHTSignMask > 0xFFFF {
			return nil, host.Errorf(host.ErrInvalidArgument, "config.rht_sign_mask: %#x has bits above the 16 signs of the 16-point transform", p.RHTSignMask)
		}
		mask = uint16(p.RHTSignMask)
	default:
		return nil, host.Errorf(host.ErrInvalidArgument, "config.rht: %d is not off (0), default (1) or custom mask (2)", p.RHT)
	}
	if p.RHT != host.RHTOff && p.BlockDims == 2 {
		// TE applies the RHT to the columnwise copies of inputs and gradients
		// only, never to 16×16-scaled weights (spec §5.1, §5.5); a transformed
		// columnwise copy could not be derived from the rowwise data either.
		return nil, host.Errorf(host.ErrInvalidArgument, "config.rht: the random Hadamard transform applies to 1×16 (block_dims 1) quantization only, not to 16×16 weight tiles")
	}
	return &Spec{p: p, rht: p.RHT != host.RHTOff, mask: mask}, nil
}

// Spec is one direction's NVFP4 spec.
type Spec struct {
	p    host.Params
	rht  bool   // the columnwise copy is transformed
	mask uint16 // the RHT sign mask
}

func (s *Spec) Params() host.Params { return s.p }

// TwoD reports 16×16 tile scaling.
func (s *Spec) TwoD() bool { return s.p.BlockDims == 2 }

// RHT reports whether the columnwise copy is stored in the random Hadamard
// domain, and with which sign mask.
func (s *Spec) RHT() (on bool, signMask uint16) { return s.rht, s.mask }

func pad(x, to int64) int64 { return (x + to - 1) / to * to }

// scaleShape is the compact E4M3 scale_inv shape of a direction whose stored
// data is [rows, cols] elements: [pad128(rows), pad4(⌈cols/16⌉)] (spec §5.3,
// §14 item 4: a partial block counts).
func scaleShape(rows, cols int64) (int64, int64) {
	return pad(rows, 128), pad(ragged.Div(cols, BlockSize), 4)
}

// rowBytes is the byte length of a stored row of cols packed codes, ⌈cols/2⌉
// (spec §14 item 4).
func rowBytes(cols int64) int64 { return ragged.Div(cols, 2) }

// storedDims is the element shape a direction stores: rowwise [M, K],
// columnwise the transpose [K, M] (spec §5.3).
func storedDims(m, k int64, dir host.Direction) (rows, cols int64) {
	if dir == host.DirColumnwise {
		return k, m
	}
	return m, k
}

// Layout: data uint8 [rows, ⌈cols/2⌉] (two E2M1 codes a byte, the even element
// in the low nibble, spec §1.5), scale_inv E4M3 [pad128(rows), pad4(⌈cols/16⌉)]
// and amax FP32 [1], with [rows, cols] = [M, K] rowwise and [K, M] columnwise
// (spec §5.3).
//
// Any M, K ≥ 0 (spec §14): rows are contiguous (no pitch padding); an odd
// cols leaves the high nibble of each row's last byte zero; a partial block
// counts in the scale shape; every scale byte outside the valid [rows,
// ⌈cols/16⌉] region is zero. The bytes are those of X₀ (X zero-padded to
// multiples of 16) with the padding dropped; see ragged.go for what that
// means for the RHT and stochastic rounding. cuda/nvfp4.cu must write exactly
// these buffers.
func (s *Spec) Layout(m, k int64, dir host.Direction) ([]host.BufferSpec, error) {
	if err := checkDims(m, k); err != nil {
		return nil, err
	}
	rows, cols := storedDims(m, k, dir)
	sr, sc := scaleShape(rows, cols)
	return []host.BufferSpec{
		{Kind: host.BufData, DType: host.Uint8, Shape: []int64{rows, rowBytes(cols)}},
		{Kind: host.BufScaleInv, DType: host.E4M3, Shape: []int64{sr, sc}},
		{Kind: host.BufAmax, DType: host.Float32, Shape: []int64{1}},
	}, nil
}

// checkDims rejects negative dims (the host checks shapes first; this guards
// direct callers). Any other shape is accepted (spec §14).
func checkDims(m, k int64) error {
	if m < 0 {
		return host.Errorf(host.ErrInvalidArgument, "shape: M = %d (the product of the leading dims) is negative", m)
	}
	if k < 0 {
		return host.Errorf(host.ErrInvalidArgument, "shape: K = %d (the last dim) is negative", k)
	}
	return nil
}

// aligned reports whether both dims are whole 16-element blocks (no padding).
func aligned(m, k int64) bool { return m%BlockSize == 0 && k%BlockSize == 0 }

// Derivable: a 16×16-scaled tensor can build its columnwise copy from rowwise
// data by transposing nibbles and tile scales (spec §5.3); 1×16 data can only
// drop a direction (spec §7.4).
func (s *Spec) Derivable(from, to host.Direction) bool {
	return s.TwoD() && from == host.DirRowwise && to == host.DirColumnwise
}

// NewState: NVFP4 is stateless (current scaling from this tensor's amax).
func (s *Spec) NewState() (host.State, error) { return nil, nil }

// Transformed reports whether a direction is stored as its RHT (spec §5.5:
// only the columnwise copy, and only with RHT on).
func (s *Spec) Transformed(dir host.Direction) bool { return s.rht && dir == host.DirColumnwise }

var _ host.TransformedSpec = (*Spec)(nil)

// RoleParams returns the parameters of TE's per-role NVFP4 defaults (spec §5.1)
// for the recipe layer: tensorType is a QuantizerRole tensor type (spec §8.2).
//
//	"input":       1×16 blocks, RHT (default sign mask) on the columnwise copy
//	"weight":      16×16 tiles, no RHT, round to nearest
//	"grad_output": 1×16 blocks, RHT on the columnwise copy, stochastic rounding
//
// Stochastic rounding draws its bits from (Seed, Offset): the caller sets them,
// advancing Offset (or Seed) every step so that steps round independently; left
// zero, every step uses the same bits.
func RoleParams(tensorType string) (host.Params, error) {
	p := host.Params{Format: Name}
	switch tensorType {
	case "input":
		p.RHT = host.RHTDefault
	case "weight":
		p.BlockDims = 2
	case "grad_output":
		p.RHT = host.RHTDefault
		p.StochasticRounding = true
	default:
		return host.Params{}, host.Errorf(host.ErrInvalidArgument, "tensor_type: %q has no nvfp4 default (want input, weight or grad_output)", tensorType)
	}
	return p, nil
}
