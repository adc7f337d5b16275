package main

/*
#include "capi.h"
*/
import "C"

import (
	"unsafe"

	"libquant/host"
)

// callerAllocator is a quant_device_allocator: device buffers from the
// caller's callbacks (host.SetCallerAllocator).
type callerAllocator struct {
	alloc    C.quant_device_alloc_fn
	free     C.quant_device_free_fn
	userData unsafe.Pointer
}

func (a *callerAllocator) Alloc(dev host.Device, n int64, stream uintptr) (unsafe.Pointer, error) {
	if n == 0 {
		return nil, nil
	}
	var p unsafe.Pointer
	if rc := C.capi_call_device_alloc(a.alloc, a.userData, C.int32_t(dev.ID), C.size_t(n), C.uintptr_t(stream), &p); rc != 0 {
		return nil, host.Errorf(host.ErrOutOfMemory, "the caller's device allocator (quant_set_device_allocator) refused %d bytes on %s (it returned %d)", n, dev, int32(rc))
	}
	if p == nil {
		return nil, host.Errorf(host.ErrOutOfMemory, "the caller's device allocator (quant_set_device_allocator) returned NULL for %d bytes on %s", n, dev)
	}
	return p, nil
}

func (a *callerAllocator) Free(dev host.Device, p unsafe.Pointer, stream uintptr) {
	C.capi_call_device_free(a.free, a.userData, C.int32_t(dev.ID), p, C.uintptr_t(stream))
}

//export quant_set_device_allocator
func quant_set_device_allocator(deviceType C.int32_t, allocator *C.capi_const_device_allocator) C.quant_status {
	return call("quant_set_device_allocator", func() error {
		var dt host.DeviceType
		switch deviceType {
		case C.kDLCUDA:
			dt = host.CUDA
		case C.kDLCPU:
			return host.Errorf(host.ErrUnsupported, "device_type: kDLCPU: CPU buffers come from the C heap; a caller allocator is for device memory")
		default:
			return invalid("device_type: %d is not a DLPack device type libquant serves (kDLCUDA)", int32(deviceType))
		}
		if allocator == nil || allocator.alloc == nil {
			return host.SetCallerAllocator(dt, nil)
		}
		if uintptr(allocator.struct_size) < unsafe.Sizeof(*allocator) {
			return invalid("allocator: struct_size %d is smaller than sizeof(quant_device_allocator) (%d)", allocator.struct_size, unsafe.Sizeof(*allocator))
		}
		if allocator.free == nil {
			return invalid("allocator.free: is NULL (alloc is set; every buffer goes back through free)")
		}
		return host.SetCallerAllocator(dt, &callerAllocator{alloc: allocator.alloc, free: allocator.free, userData: allocator.user_data})
	})
}
