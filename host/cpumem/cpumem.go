// Package cpumem gives host its CPU memory: tensor buffers on the C heap
// (internal/cmem), so that memory libquant hands to C callers is never Go
// memory and never moves. host itself stays free of cgo; every program that
// allocates CPU tensors imports this package (capi does, and so does hosttest
// for the tests). It imports host and internal/cmem only.
package cpumem

import (
	"unsafe"

	"libquant/host"
	"libquant/internal/cmem"
)

func init() { host.RegisterAllocator(host.CPU, allocator{}) }

type allocator struct{}

func (allocator) Alloc(_ host.Device, n int64, _ uintptr) (unsafe.Pointer, error) {
	p, err := cmem.Alloc(n)
	if err != nil {
		return nil, host.Errorf(host.ErrOutOfMemory, "allocating %d bytes on the cpu: %v", n, err)
	}
	return p, nil
}

func (allocator) Free(_ host.Device, p unsafe.Pointer, _ uintptr) { cmem.Free(p) }
