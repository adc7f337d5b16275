package host

import (
	"sync"
	"unsafe"
)

// Allocator provides buffer memory on one device type. CPU memory comes from the
// C heap through host/cpumem, which registers itself (host has no cgo); a GPU
// plugin registers its own (stream-ordered) allocator.
type Allocator interface {
	Alloc(dev Device, n int64, stream uintptr) (unsafe.Pointer, error)
	Free(dev Device, p unsafe.Pointer, stream uintptr)
}

var allocators = struct {
	sync.RWMutex
	m map[DeviceType]Allocator
}{m: map[DeviceType]Allocator{}}

// RegisterAllocator sets the allocator of a device type.
func RegisterAllocator(dev DeviceType, a Allocator) {
	allocators.Lock()
	allocators.m[dev] = a
	allocators.Unlock()
}

func allocatorFor(dev Device) (Allocator, error) {
	allocators.RLock()
	a, ok := allocators.m[dev.Type]
	allocators.RUnlock()
	if !ok && dev.Type == CPU {
		return nil, Errorf(ErrDeviceUnavailable, "device %s has no allocator: the program must import libquant/host/cpumem, which puts CPU buffers on the C heap", dev)
	}
	if !ok {
		return nil, Errorf(ErrDeviceUnavailable, "device %s is not available: no loaded plugin manages its memory (%s)", dev, pluginSummary())
	}
	return a, nil
}

// AllocTensor allocates a zeroed (CPU) or uninitialised (device) tensor.
func AllocTensor(dev Device, dt DType, shape []int64, stream uintptr) (Tensor, error) {
	a, err := allocatorFor(dev)
	if err != nil {
		return Tensor{}, err
	}
	t := Tensor{DType: dt, Shape: append([]int64(nil), shape...), Device: dev}
	p, err := a.Alloc(dev, t.Bytes(), stream)
	if err != nil {
		return Tensor{}, err
	}
	t.Ptr = p
	return t, nil
}

// FreeTensor releases a tensor from AllocTensor.
func FreeTensor(t Tensor, stream uintptr) {
	if t.Ptr == nil {
		return
	}
	if a, err := allocatorFor(t.Device); err == nil {
		a.Free(t.Device, t.Ptr, stream)
	}
}
