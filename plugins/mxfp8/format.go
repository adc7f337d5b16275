package mxfp8

import (
	"libquant/host"
	"libquant/host/ragged"
	"libquant/internal/numeric"
	"libquant/internal/swizzle"
)

// Registry names of the two MX formats.
const (
	NameMXFP8 = "mxfp8"
	NameMXFP4 = "mxfp4"
)

// BlockLen is the number of elements that share one E8M0 scale (spec §4.2).
const BlockLen = 32

func init() {
	host.MustRegister(format{NameMXFP8}, kernels{})
	host.MustRegister(format{NameMXFP4}, kernels{})
}

// element is what the kernels need to know about an element type.
type element struct {
	kind host.Element
	max  float32 // largest finite magnitude
	// rcp is TE's max_norm_rcp, (float)(1.0/max_norm): the RCEIL rule multiplies
	// the block amax by it instead of dividing by max (spec §4.3).
	rcp float32
	// emax is the OCP emax_elem of the FLOOR rule: 8 for E4M3, 15 for E5M2, 2 for
	// E2M1 (spec §4.4).
	emax uint8
	// decode holds the value of every code (the 16 nibbles for E2M1).
	decode *[256]float32
	dtype  host.DType // the data buffer's dtype
	packed bool       // two E2M1 codes per byte, the even index in the low nibble (spec §1.5)
}

var (
	e4m3 = element{kind: host.ElementE4M3, max: numeric.E4M3Max, rcp: float32(1.0 / float64(numeric.E4M3Max)),
		emax: 8, decode: numeric.E4M3Table(), dtype: host.E4M3}
	e5m2 = element{kind: host.ElementE5M2, max: numeric.E5M2Max, rcp: float32(1.0 / float64(numeric.E5M2Max)),
		emax: 15, decode: numeric.E5M2Table(), dtype: host.E5M2}
	e2m1 = element{kind: host.ElementE2M1, max: numeric.E2M1Max, rcp: float32(1.0 / float64(numeric.E2M1Max)),
		emax: 2, decode: e2m1Table(), dtype: host.Uint8, packed: true}
)

// e2m1Table decodes the low nibble of every byte, so that kernels index it with
// b&0xF and b>>4.
func e2m1Table() *[256]float32 {
	var t [256]float32
	for c := range t {
		t[c] = numeric.DecodeE2M1(uint8(c))
	}
	return &t
}

type format struct{ name string }

func (f format) Name() string { return f.name }

func (f format) NewSpec(p host.Params) (host.Spec, error) {
	if err := p.CheckUnused("Element", "ScaleRounding", "GEMMSwizzledScales"); err != nil {
		return nil, err
	}
	var el *element
	switch f.name {
	case NameMXFP8:
		switch p.Element {
		case host.ElementDefault, host.ElementE4M3:
			p.Element, el = host.ElementE4M3, &e4m3
		case host.ElementE5M2:
			el = &e5m2
		default:
			return nil, host.Errorf(host.ErrInvalidArgument, "config.element: %s not supported by mxfp8 (want e4m3 or e5m2; e2m1 elements are format \"mxfp4\")", p.Element)
		}
	case NameMXFP4:
		if p.Element != host.ElementDefault && p.Element != host.ElementE2M1 {
			return nil, host.Errorf(host.ErrInvalidArgument, "config.element: %s not supported by mxfp4 (its elements are e2m1; e4m3 and e5m2 are format \"mxfp8\")", p.Element)
		}
		p.Element, el = host.ElementE2M1, &e2m1
	}
	if p.ScaleRounding != host.ScaleRCEIL && p.ScaleRounding != host.ScaleFLOOR {
		return nil, host.Errorf(host.ErrInvalidArgument, "config.scale_rounding: %d is not QUANT_SCALE_RCEIL (0) or QUANT_SCALE_FLOOR (1)", p.ScaleRounding)
	}
	return &Spec{p: p, el: el}, nil
}

// Spec is one direction's MX spec: element type, scale rounding and scale layout.
type Spec struct {
	p  host.Params
	el *element
}

func (s *Spec) Params() host.Params { return s.p }

// checkDims rejects negative dims (the host's shape checks come first; this
// guards direct callers). Any M, K ≥ 0 is accepted: a dim that is not a
// multiple of 32 ends in a partial block (spec §14).
func (s *Spec) checkDims(m, k int64) error {
	if k < 0 {
		return host.Errorf(host.ErrInvalidArgument, "shape: the last dim K = %d is negative", k)
	}
	if m < 0 {
		return host.Errorf(host.ErrInvalidArgument, "shape: M = %d (the product of the leading dims) is negative", m)
	}
	return nil
}

// aligned reports whether both dims are whole blocks, so that no padding is
// involved (spec §14).
func aligned(m, k int64) bool { return m%BlockLen == 0 && k%BlockLen == 0 }

// Layout (spec §4.5, §4.6, §12, §14; the MXFP4 decision follows NVFP4's §5.3):
//
//	mxfp8 rowwise:    data [M, K],       scale_inv E8M0 [pad128(M), pad4(⌈K/32⌉)]
//	mxfp8 columnwise: data [M, K] (not transposed), scale_inv [pad4(⌈M/32⌉), pad128(K)]
//	mxfp4 rowwise:    data uint8 [M, ⌈K/2⌉], scale_inv [pad128(M), pad4(⌈K/32⌉)]
//	mxfp4 columnwise: data uint8 [K, ⌈M/2⌉] (transposed), scale_inv [pad128(K), pad4(⌈M/32⌉)]
//
// Any M and K (spec §14): rows are not padded (pitch = the row length above,
// contiguous), a partial block counts as a block in the scale shapes, an odd
// element count leaves the high nibble of a packed row's last byte zero, and
// every padding byte of a scale buffer is zero. The bytes are those of the
// zero-padded tensor with the padding dropped. A kernel for another device
// (cuda/mx.cu) must write exactly these buffers. The swizzled scale layout
// has the same shape (spec §4.7).
func (s *Spec) Layout(m, k int64, dir host.Direction) ([]host.BufferSpec, error) {
	if err := s.checkDims(m, k); err != nil {
		return nil, err
	}
	return []host.BufferSpec{
		{Kind: host.BufData, DType: s.el.dtype, Shape: s.dataShape(m, k, dir)},
		{Kind: host.BufScaleInv, DType: host.E8M0, Shape: scaleLayoutOf(s, dir, m, k).shape()},
	}, nil
}

// dataShape is the data buffer's shape: [M, K] codes, or packed E2M1 [M, ⌈K/2⌉]
// rowwise and [K, ⌈M/2⌉] columnwise.
func (s *Spec) dataShape(m, k int64, dir host.Direction) []int64 {
	switch {
	case !s.el.packed:
		return []int64{m, k}
	case dir == host.DirColumnwise:
		return []int64{k, ragged.Div(m, 2)}
	}
	return []int64{m, ragged.Div(k, 2)}
}

// Derivable: an MX direction cannot be built from the other one, whose blocks
// run the other way; a tensor can only drop a usage (spec §7.4).
func (s *Spec) Derivable(from, to host.Direction) bool { return false }

func (s *Spec) NewState() (host.State, error) { return nil, nil }

// exponent is the block's E8M0 scale byte for its amax.
//
// RCEIL (TE, spec §4.3): float_to_e8m0(fl32(amax · fl32(1/max))), the exponent
// rounded up and saturated: NaN gives 0xFF, +Inf 0xFE, 0 gives 0x00.
//
// FLOOR (OCP MX v1.0, spec §4.4): 2^(floor(log2 amax) − emax) with the exponent
// clamped to E8M0's range; an Inf or NaN amax gives the NaN scale 0xFF.
func (s *Spec) exponent(amax float32) uint8 {
	if s.p.ScaleRounding == host.ScaleFLOOR {
		b := numeric.Float32ToE8M0Floor(amax)
		switch {
		case b == numeric.E8M0NaN:
			return b
		case b < s.el.emax:
			return 0 // 2^-127, the smallest scale
		}
		return b - s.el.emax
	}
	return numeric.Float32ToE8M0RoundUp(float32(amax * s.el.rcp))
}

// scaleLayout maps a logical scale (i, j) to its byte in a scale_inv buffer: i
// is the non-contraction index (the row for rowwise, the column k for
// columnwise) and j the block index along the contraction dim (spec §4.7).
type scaleLayout struct {
	ni, nj     int  // valid scales (a partial block counts)
	padI, padJ int  // pad128(ni), pad4(nj)
	jMajor     bool // the compact buffer is [padJ, padI]: mxfp8 columnwise (spec §4.6)
	swizzled   bool // GEMM-swizzled (spec §4.7)
}

func scaleLayoutOf(s *Spec, dir host.Direction, m, k int64) scaleLayout {
	l := scaleLayout{ni: int(m), nj: int(ragged.Div(k, BlockLen)), swizzled: s.p.GEMMSwizzledScales}
	if dir == host.DirColumnwise {
		l.ni, l.nj = int(k), int(ragged.Div(m, BlockLen))
		l.jMajor = !s.el.packed
	}
	l.padI = (l.ni + 127) &^ 127
	l.padJ = (l.nj + 3) &^ 3
	return l
}

func (l scaleLayout) shape() []int64 {
	if l.jMajor {
		return []int64{int64(l.padJ), int64(l.padI)}
	}
	return []int64{int64(l.padI), int64(l.padJ)}
}

// index is the byte offset of scale (i, j). Swizzled, both directions use the
// same formula on (i, j): for mxfp8 columnwise i is the column k and j the
// M-block (spec §4.7).
func (l scaleLayout) index(i, j int) int {
	switch {
	case l.swizzled:
		return swizzle.Index(i, j, l.padJ)
	case l.jMajor:
		return j*l.padI + i
	}
	return i*l.padJ + j
}

// zeroPadding writes 0 to every padded position (i ≥ ni or j ≥ nj), so that
// buffers the caller owns never keep stale bytes there (spec §13 item 12).
func (l scaleLayout) zeroPadding(buf []byte) {
	for i := 0; i < l.padI; i++ {
		j0 := 0
		if i < l.ni {
			j0 = l.nj
		}
		for j := j0; j < l.padJ; j++ {
			buf[l.index(i, j)] = 0
		}
	}
}
