package host

import (
	"fmt"
	"math"
	"unsafe"
)

// DeviceType follows DLPack's DLDeviceType numbering.
type DeviceType int32

const (
	CPU  DeviceType = 1
	CUDA DeviceType = 2
)

func (d DeviceType) String() string {
	switch d {
	case CPU:
		return "cpu"
	case CUDA:
		return "cuda"
	}
	return fmt.Sprintf("device_type(%d)", int32(d))
}

// Device is a device type and index, as DLDevice.
type Device struct {
	Type DeviceType
	ID   int32
}

func (d Device) String() string {
	if d.Type == CPU {
		return "cpu"
	}
	return fmt.Sprintf("%s:%d", d.Type, d.ID)
}

// MaxDims is the largest tensor rank the ABI accepts.
const MaxDims = 8

// Tensor is a dense, row-major, contiguous view of memory that libquant does not
// own by itself: capi builds it from a validated DLTensor, and storages build
// it over their buffers. Ptr is C or device memory, never Go memory.
type Tensor struct {
	Ptr    unsafe.Pointer
	DType  DType
	Shape  []int64
	Device Device
}

// NumElements is the product of the shape (1 for rank 0).
func (t Tensor) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Bytes is the size of the buffer (packed sub-byte elements round up to a
// whole byte).
func (t Tensor) Bytes() int64 { return (t.NumElements()*t.DType.Bits() + 7) / 8 }

// Flatten2D returns the [M, K] view that quantization works on: M is the product
// of the leading dims and K the last one (spec §11.3). A rank-1 tensor is [1, K].
func Flatten2D(shape []int64) (m, k int64) {
	if len(shape) == 0 {
		return 1, 1
	}
	m = 1
	for _, d := range shape[:len(shape)-1] {
		m *= d
	}
	return m, shape[len(shape)-1]
}

// CheckShape validates a shape: rank 1..MaxDims, no negative dims, and an element
// count times elemSize that fits in int64. name is the argument for the message.
func CheckShape(name string, shape []int64, elemSize int64) error {
	if len(shape) < 1 || len(shape) > MaxDims {
		return Errorf(ErrInvalidArgument, "%s: rank %d not supported (want 1..%d)", name, len(shape), MaxDims)
	}
	n := int64(1)
	for i, d := range shape {
		if d < 0 {
			return Errorf(ErrInvalidArgument, "%s: dim %d is negative (%d)", name, i, d)
		}
		if d != 0 && n > math.MaxInt64/d {
			return Errorf(ErrInvalidArgument, "%s: shape %v overflows the element count", name, shape)
		}
		n *= d
	}
	if elemSize > 0 && n > math.MaxInt64/elemSize {
		return Errorf(ErrInvalidArgument, "%s: shape %v overflows the byte size", name, shape)
	}
	return nil
}

// Bytes views a CPU tensor's memory as a byte slice.
func (t Tensor) Bytes8() []byte {
	n := t.Bytes()
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(t.Ptr), n)
}

// Float32s views a CPU FP32 tensor as a slice.
func (t Tensor) Float32s() []float32 {
	n := t.NumElements()
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(t.Ptr), n)
}

// Uint16s views a CPU BF16 or FP16 tensor as raw 16-bit patterns.
func (t Tensor) Uint16s() []uint16 {
	n := t.NumElements()
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(t.Ptr), n)
}

// Overlaps reports whether two tensors on one device share bytes.
func Overlaps(x, y Tensor) bool {
	if x.Device != y.Device || x.Ptr == nil || y.Ptr == nil || x.Bytes() == 0 || y.Bytes() == 0 {
		return false
	}
	x0, y0 := uintptr(x.Ptr), uintptr(y.Ptr)
	return x0 < y0+uintptr(y.Bytes()) && y0 < x0+uintptr(x.Bytes())
}
