// Package ragged implements the "any shape" rule of spec §14 for the CPU
// kernels of the block formats: a tensor whose dims are not multiples of the
// block is quantized as its zero-padded copy X₀, and the padding is dropped
// afterwards. These helpers build X₀ and move packed or byte codes between a
// padded buffer and the logical one (rows of ⌈n/2⌉ bytes for packed FP4, the
// high nibble of an odd row's last byte zero; spec §14 item 4).
package ragged

import (
	"libquant/host"
)

var cpu = host.Device{Type: host.CPU}

// Ceil is x rounded up to a multiple of b.
func Ceil(x, b int64) int64 { return (x + b - 1) / b * b }

// Div is ⌈x/b⌉.
func Div(x, b int64) int64 { return (x + b - 1) / b }

// Pad returns X₀: the CPU tensor in of logical shape [m, k] copied into a new
// zeroed [m0, k0] tensor of the same dtype (m0 ≥ m, k0 ≥ k). The caller frees
// it with host.FreeTensor.
func Pad(in host.Tensor, m, k, m0, k0 int64) (host.Tensor, error) {
	t, err := host.AllocTensor(cpu, in.DType, []int64{m0, k0}, 0)
	if err != nil {
		return host.Tensor{}, err
	}
	es := in.DType.Size()
	src, dst := in.Bytes8(), t.Bytes8() // AllocTensor zeroes
	for r := int64(0); r < m; r++ {
		copy(dst[r*k0*es:(r*k0+k)*es], src[r*k*es:(r+1)*k*es])
	}
	return t, nil
}

// Alloc returns a zeroed CPU byte buffer of n bytes as a host tensor (freed by
// the caller with host.FreeTensor).
func Alloc(n int64) (host.Tensor, error) {
	return host.AllocTensor(cpu, host.Uint8, []int64{n}, 0)
}

// Crop copies the first rows rows of src (row pitch srcPitch bytes) into dst
// (row pitch dstPitch ≤ srcPitch), each row cut to dstPitch bytes. With
// oddNibble, the last byte of each dst row keeps only its low nibble: packed
// FP4 rows of an odd number of elements (spec §14 item 4).
func Crop(dst []byte, dstPitch int, src []byte, srcPitch, rows int, oddNibble bool) {
	for r := 0; r < rows; r++ {
		d := dst[r*dstPitch : (r+1)*dstPitch]
		copy(d, src[r*srcPitch:r*srcPitch+dstPitch])
		if oddNibble && dstPitch > 0 {
			d[dstPitch-1] &= 0x0F
		}
	}
}

// Expand is the inverse of Crop: dst (row pitch dstPitch ≥ srcPitch, zeroed
// by the caller) gets the first rows rows of src, the rest of each row left
// zero. With oddNibble the high nibble of each row's last source byte is
// dropped, so that stale bits there can never reach a padded element.
func Expand(dst []byte, dstPitch int, src []byte, srcPitch, rows int, oddNibble bool) {
	for r := 0; r < rows; r++ {
		d := dst[r*dstPitch : r*dstPitch+srcPitch]
		copy(d, src[r*srcPitch:(r+1)*srcPitch])
		if oddNibble && srcPitch > 0 {
			d[srcPitch-1] &= 0x0F
		}
	}
}

// WithData returns a storage that shares st's buffers except the data buffer,
// which becomes a new zeroed CPU uint8 buffer of the given shape (the padded
// tensor's data): the scale and amax buffers of a ragged tensor have the shape
// of its padded tensor's (spec §14 item 4), so a kernel can write them in
// place. The caller frees the new data buffer with FreeData.
func WithData(st *host.Storage, shape []int64) (*host.Storage, error) {
	t, err := host.AllocTensor(cpu, host.Uint8, shape, 0)
	if err != nil {
		return nil, err
	}
	p := &host.Storage{Spec: st.Spec, Dir: st.Dir, Device: st.Device}
	for _, b := range st.Buffers {
		if b.Kind == host.BufData {
			b = host.Buffer{BufferSpec: host.BufferSpec{Kind: host.BufData, DType: b.DType, Shape: shape}, Tensor: t}
		}
		p.Buffers = append(p.Buffers, b)
	}
	return p, nil
}

// FreeData frees the data buffer WithData made; nil is a no-op.
func FreeData(st *host.Storage) {
	if st != nil {
		host.FreeTensor(st.MustBuffer(host.BufData), 0)
	}
}
