package host

import (
	"math"
	"sync"
	"unsafe"

	"libquant/internal/parallel"
)

// AmaxCPU returns max |x| over a CPU FP32/BF16/FP16 tensor, ignoring NaN as
// fmaxf does (spec §3.2); an all-NaN or empty tensor gives 0. It compares the
// magnitude bit patterns, which order like the values for non-NaN inputs.
func AmaxCPU(t Tensor) float32 {
	n := int(t.NumElements())
	var mu sync.Mutex
	var best uint32
	parallel.For(n, 1<<16, func(lo, hi int) {
		var m uint32
		switch t.DType {
		case Float32:
			for _, b := range unsafe.Slice((*uint32)(t.Ptr), n)[lo:hi] {
				if a := b & 0x7FFFFFFF; a <= 0x7F800000 && a > m {
					m = a
				}
			}
		case BFloat16:
			var h16 uint16
			for _, b := range unsafe.Slice((*uint16)(t.Ptr), n)[lo:hi] {
				if a := b & 0x7FFF; a <= 0x7F80 && a > h16 {
					h16 = a
				}
			}
			m = uint32(h16) << 16
		case Float16:
			var h16 uint16
			for _, b := range unsafe.Slice((*uint16)(t.Ptr), n)[lo:hi] {
				if a := b & 0x7FFF; a <= 0x7C00 && a > h16 {
					h16 = a
				}
			}
			m = math.Float32bits(fp16Magnitude(h16))
		default:
			panic("AmaxCPU: dtype " + t.DType.String())
		}
		mu.Lock()
		if m > best {
			best = m
		}
		mu.Unlock()
	})
	return math.Float32frombits(best)
}

// TensorAmaxCPU is the Amax kernel of formats whose global amax is the
// tensor's max |x| for both directions: it writes AmaxCPU(input) into every
// wanted slot of r.Out.
func TensorAmaxCPU(r *AmaxRequest) error {
	a := AmaxCPU(r.Input)
	out := r.Out.Float32s()
	if r.Want.Has(Rowwise) {
		out[0] = a
	}
	if r.Want.Has(Columnwise) {
		out[1] = a
	}
	return nil
}

func fp16Magnitude(h uint16) float32 {
	var f [1]float32
	LoadFloat32(Tensor{Ptr: unsafe.Pointer(&h), DType: Float16, Shape: []int64{1}}, 0, f[:])
	return f[0]
}
