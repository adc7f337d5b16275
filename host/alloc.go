package host

import (
	"sync"
	"sync/atomic"
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

// The caller's allocators (SetCallerAllocator): per device type, the
// allocator that buffers come from instead of the registered one, and which
// allocator each live buffer came from, so that a buffer allocated before the
// caller's allocator was set (or after it was removed) goes back where it
// came from.
var callerAlloc = struct {
	sync.RWMutex
	m     map[DeviceType]Allocator
	owner map[unsafe.Pointer]Allocator
	live  atomic.Int64 // len(owner), read without the lock on every free
}{m: map[DeviceType]Allocator{}, owner: map[unsafe.Pointer]Allocator{}}

// SetCallerAllocator makes buffers of device type dev come from a (nil: from
// the registered allocator again): a framework's own allocator (PyTorch's
// caching allocator, whose CUDA-graph pools then hold libquant's buffers
// too). Copies, memsets and synchronisation stay the registered allocator's.
// Buffers allocated before keep their allocator.
func SetCallerAllocator(dev DeviceType, a Allocator) error {
	if dev == CPU {
		return Errorf(ErrUnsupported, "device_type: CPU buffers come from the C heap; a caller allocator is for device memory")
	}
	if _, err := allocatorFor(Device{Type: dev}); err != nil {
		return err
	}
	callerAlloc.Lock()
	defer callerAlloc.Unlock()
	if a == nil {
		delete(callerAlloc.m, dev)
	} else {
		callerAlloc.m[dev] = a
	}
	return nil
}

// HasCallerAllocator reports whether buffers of device type dev come from a
// caller's allocator now (SetCallerAllocator).
func HasCallerAllocator(dev DeviceType) bool {
	callerAlloc.RLock()
	defer callerAlloc.RUnlock()
	return callerAlloc.m[dev] != nil
}

// AllocTensor allocates a zeroed (CPU) or uninitialised (device) tensor.
func AllocTensor(dev Device, dt DType, shape []int64, stream uintptr) (Tensor, error) {
	t := Tensor{DType: dt, Shape: append([]int64(nil), shape...), Device: dev}
	if dev.Type != CPU {
		callerAlloc.RLock()
		ca := callerAlloc.m[dev.Type]
		callerAlloc.RUnlock()
		if ca != nil {
			p, err := ca.Alloc(dev, t.Bytes(), stream)
			if err != nil {
				return Tensor{}, err
			}
			if p != nil {
				callerAlloc.Lock()
				callerAlloc.owner[p] = ca
				callerAlloc.live.Add(1)
				callerAlloc.Unlock()
			}
			t.Ptr = p
			return t, nil
		}
	}
	return AllocOwnTensor(dev, dt, shape, stream)
}

// AllocOwnTensor is AllocTensor from the registered allocator, even while a
// caller allocator is set: for buffers libquant keeps for its own lifetime
// (a framework's pool, a CUDA graph's, may be released before them).
func AllocOwnTensor(dev Device, dt DType, shape []int64, stream uintptr) (Tensor, error) {
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

// FreeTensor releases a tensor from AllocTensor, to the allocator it came from.
func FreeTensor(t Tensor, stream uintptr) {
	if t.Ptr == nil {
		return
	}
	if t.Device.Type != CPU && callerAlloc.live.Load() > 0 {
		callerAlloc.Lock()
		ca, ok := callerAlloc.owner[t.Ptr]
		if ok {
			delete(callerAlloc.owner, t.Ptr)
			callerAlloc.live.Add(-1)
		}
		callerAlloc.Unlock()
		if ok {
			ca.Free(t.Device, t.Ptr, stream)
			return
		}
	}
	if a, err := allocatorFor(t.Device); err == nil {
		a.Free(t.Device, t.Ptr, stream)
	}
}
