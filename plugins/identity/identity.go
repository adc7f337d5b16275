// Package identity is the identity "format" (spec §8.4): it holds the
// high-precision values themselves, optionally cast to config.dtype, in one
// buffer that serves both directions. It is how a recipe keeps a role in high
// precision, and either side of a hybrid quantizer may use it. GEMMs read it
// as FP32 (exact for FP32, BF16 and FP16).
package identity

import (
	"libquant/host"
	"libquant/internal/parallel"
)

// Name is the identity format's registry name.
const Name = host.IdentityFormat

func init() { host.MustRegister(format{}, kernels{}) }

type format struct{}

func (format) Name() string { return Name }

func (format) NewSpec(p host.Params) (host.Spec, error) {
	if err := p.CheckUnused("HoldDType"); err != nil {
		return nil, err
	}
	if p.HoldDType != host.DTypeInvalid && !p.HoldDType.IsHighPrecision() {
		return nil, host.Errorf(host.ErrInvalidArgument, "config.dtype: %s not supported by identity (want float32, bfloat16 or float16, or zero to keep the input's)", p.HoldDType)
	}
	return &Spec{p: p}, nil
}

// Spec is an identity spec; Params().HoldDType is the held dtype, or
// DTypeInvalid until a quantize resolves it from the input (ForInput).
type Spec struct{ p host.Params }

func (s *Spec) Params() host.Params { return s.p }

// Layout: one buffer [M, K] of the held dtype, the same for both directions.
func (s *Spec) Layout(m, k int64, _ host.Direction) ([]host.BufferSpec, error) {
	if s.p.HoldDType == host.DTypeInvalid {
		return nil, host.Errorf(host.ErrInvalidArgument, "config.dtype: identity keeps the input's dtype, so its layout is known only once it quantizes; set config.dtype to ask for a layout")
	}
	return []host.BufferSpec{{Kind: host.BufData, DType: s.p.HoldDType, Shape: []int64{m, k}}}, nil
}

// Derivable: either direction is the other's buffer.
func (s *Spec) Derivable(from, to host.Direction) bool { return true }

func (s *Spec) NewState() (host.State, error) { return nil, nil }

// SharesStorage: a plain identity quantizer keeps one storage for both directions.
func (s *Spec) SharesStorage() bool { return true }

// ForInput fixes the held dtype to the input's when config.dtype was left zero.
func (s *Spec) ForInput(dt host.DType) host.Spec {
	if s.p.HoldDType != host.DTypeInvalid {
		return s
	}
	p := s.p
	p.HoldDType = dt
	return &Spec{p: p}
}

type kernels struct{}

// Amax is max |x| of the input for each wanted slot (identity uses none; it is
// reported so that a hybrid's ComputeAmax works with it on either side).
func (kernels) Amax(r *host.AmaxRequest) error {
	return host.TensorAmaxCPU(r)
}

// Quantize copies the input into each asked-for storage, rounding to nearest
// even when the held dtype is narrower.
func (kernels) Quantize(r *host.QuantizeRequest) error {
	for d, st := range r.Out {
		if st == nil || (d == 1 && st == r.Out[0]) {
			continue
		}
		convert(r.Input, st.MustBuffer(host.BufData), r.M*r.K)
	}
	return nil
}

// Dequantize casts the held values to the output dtype.
func (kernels) Dequantize(r *host.DequantizeRequest) error {
	convert(r.Storage.MustBuffer(host.BufData), r.Out, r.M*r.K)
	return nil
}

// Derive copies the buffer (a hybrid never derives; a plain tensor shares it).
func (kernels) Derive(r *host.DeriveRequest) error {
	copy(r.To.MustBuffer(host.BufData).Bytes8(), r.From.MustBuffer(host.BufData).Bytes8())
	return nil
}

// TensorScale is 1: identity values carry no per-tensor factor.
func (kernels) TensorScale(*host.Storage, host.Direction) float32 { return 1 }

// DequantizeTile reads the held values (exact in FP32); both directions are
// the logical [m, k] buffer.
func (kernels) DequantizeTile(st *host.Storage, _ host.Direction, m, k, r0, r1, c0, c1 int64, dst []float32, ld int, transposed bool) {
	host.DenseTile(st.MustBuffer(host.BufData), k, r0, r1, c0, c1, dst, ld, transposed)
}

var _ host.TileDequantizer = kernels{}

// convert copies n elements between CPU FP32/BF16/FP16 tensors, through FP32.
func convert(src, dst host.Tensor, n int64) {
	if src.DType == dst.DType {
		copy(dst.Bytes8(), src.Bytes8())
		return
	}
	const chunk = 4096
	parallel.For(int(n), chunk, func(lo, hi int) {
		var buf [chunk]float32
		for i := lo; i < hi; i += chunk {
			w := min(chunk, hi-i)
			host.LoadFloat32(src, int64(i), buf[:w])
			host.StoreFloat32(dst, int64(i), buf[:w])
		}
	})
}
