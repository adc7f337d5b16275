package host

import (
	"math"
	"unsafe"

	"libquant/internal/numeric"
)

// LoadFloat32 converts n elements of a CPU FP32/BF16/FP16 tensor, starting at
// element off, into dst (exact: every such value is a float32).
func LoadFloat32(t Tensor, off int64, dst []float32) {
	n := int64(len(dst))
	switch t.DType {
	case Float32:
		copy(dst, unsafe.Slice((*float32)(unsafe.Add(t.Ptr, off*4)), n))
	case BFloat16:
		src := unsafe.Slice((*uint16)(unsafe.Add(t.Ptr, off*2)), n)
		for i, h := range src {
			dst[i] = math.Float32frombits(uint32(h) << 16)
		}
	case Float16:
		src := unsafe.Slice((*uint16)(unsafe.Add(t.Ptr, off*2)), n)
		for i, h := range src {
			dst[i] = numeric.FP16ToFloat32(h)
		}
	default:
		panic("LoadFloat32: dtype " + t.DType.String())
	}
}

// StoreFloat32 writes src into a CPU FP32/BF16/FP16 tensor at element off,
// rounding to nearest even for the 16-bit types.
func StoreFloat32(t Tensor, off int64, src []float32) {
	n := int64(len(src))
	switch t.DType {
	case Float32:
		copy(unsafe.Slice((*float32)(unsafe.Add(t.Ptr, off*4)), n), src)
	case BFloat16:
		dst := unsafe.Slice((*uint16)(unsafe.Add(t.Ptr, off*2)), n)
		for i, x := range src {
			dst[i] = numeric.Float32ToBF16(x)
		}
	case Float16:
		dst := unsafe.Slice((*uint16)(unsafe.Add(t.Ptr, off*2)), n)
		for i, x := range src {
			dst[i] = numeric.Float32ToFP16(x)
		}
	default:
		panic("StoreFloat32: dtype " + t.DType.String())
	}
}

// At returns the address of element off of a CPU tensor.
func (t Tensor) At(off int64) unsafe.Pointer {
	return unsafe.Add(t.Ptr, off*t.DType.Size())
}
