package main

/*
#include "capi.h"
*/
import "C"

import (
	"unsafe"

	"libquant/host"
)

// DLPack type codes (dlpack.h v1.1).
const (
	dlInt           = 0
	dlUInt          = 1
	dlFloat         = 2
	dlBfloat        = 4
	dlFloat8E4M3FN  = 10
	dlFloat8E5M2    = 12
	dlFloat8E8M0FNU = 14
	dlFloat6E2M3FN  = 15
	dlFloat6E3M2FN  = 16
)

// dtypeOf pairs DLPack (code, bits) with libquant's dtypes. A slice scanned
// in order, not a map: dtypeFromDL runs on every call, where hashing the key
// cost more than scanning a dozen entries (issue #15: host time per call).
var dtypeOf = []struct {
	code, bits uint8
	dt         host.DType
}{
	{dlBfloat, 16, host.BFloat16},
	{dlFloat, 32, host.Float32},
	{dlFloat, 16, host.Float16},
	{dlFloat, 64, host.Float64},
	{dlUInt, 8, host.Uint8},
	{dlInt, 32, host.Int32},
	{dlInt, 64, host.Int64},
	{dlFloat8E4M3FN, 8, host.E4M3},
	{dlFloat8E5M2, 8, host.E5M2},
	{dlFloat8E8M0FNU, 8, host.E8M0},
	{dlFloat6E2M3FN, 6, host.Float6E2M3},
	{dlFloat6E3M2FN, 6, host.Float6E3M2},
}

func dlDTypeOf(d host.DType) C.DLDataType {
	for _, e := range dtypeOf {
		if e.dt == d {
			return C.DLDataType{code: C.uint8_t(e.code), bits: C.uint8_t(e.bits), lanes: 1}
		}
	}
	return C.DLDataType{}
}

func dtypeFromDL(arg string, t C.DLDataType) (host.DType, error) {
	if t.lanes != 1 {
		return 0, invalid("%s: dtype lanes %d not supported (want 1)", arg, t.lanes)
	}
	code, bits := uint8(t.code), uint8(t.bits)
	for _, e := range dtypeOf {
		if e.code == code && e.bits == bits {
			return e.dt, nil
		}
	}
	return 0, host.Errorf(host.ErrUnsupported, "%s: DLPack dtype (code %d, bits %d) not supported", arg, t.code, t.bits)
}

func deviceFromDL(arg string, d C.DLDevice) (host.Device, error) {
	switch d.device_type {
	case C.kDLCPU, C.kDLCUDAHost:
		return host.Device{Type: host.CPU}, nil
	case C.kDLCUDA:
		if d.device_id < 0 {
			return host.Device{}, invalid("%s: CUDA device id %d is negative", arg, d.device_id)
		}
		return host.Device{Type: host.CUDA, ID: int32(d.device_id)}, nil
	}
	return host.Device{}, host.Errorf(host.ErrUnsupported, "%s: DLPack device type %d not supported (want kDLCPU or kDLCUDA)", arg, d.device_type)
}

func dlDeviceOf(d host.Device) C.DLDevice {
	return C.DLDevice{device_type: C.DLDeviceType(d.Type), device_id: C.int32_t(d.ID)}
}

// tensorFromDL validates a caller's DLTensor and returns its host view: rank
// 1..8, non-negative dims whose byte size fits in int64, a supported dtype and
// device, data non-NULL unless empty, and row-major contiguous strides.
func tensorFromDL(arg string, p unsafe.Pointer) (host.Tensor, error) {
	return tensorFromDLShape(arg, p, true)
}

// tensorFromDLView is tensorFromDL whose Shape is the caller's own array, not
// a copy: for arguments the host only reads during the call (a quantize's
// input), so that the call allocates nothing (issue #15).
func tensorFromDLView(arg string, p unsafe.Pointer) (host.Tensor, error) {
	return tensorFromDLShape(arg, p, false)
}

func tensorFromDLShape(arg string, p unsafe.Pointer, copyShape bool) (host.Tensor, error) {
	if p == nil {
		return host.Tensor{}, invalid("%s: is NULL", arg)
	}
	t := (*C.DLTensor)(p)
	dt, err := dtypeFromDL(arg, t.dtype)
	if err != nil {
		return host.Tensor{}, err
	}
	dev, err := deviceFromDL(arg, t.device)
	if err != nil {
		return host.Tensor{}, err
	}
	nd := int(t.ndim)
	if nd < 1 || nd > host.MaxDims {
		return host.Tensor{}, invalid("%s: ndim %d not supported (want 1..%d)", arg, nd, host.MaxDims)
	}
	if t.shape == nil {
		return host.Tensor{}, invalid("%s: shape is NULL", arg)
	}
	shape := unsafe.Slice((*int64)(unsafe.Pointer(t.shape)), nd)
	if copyShape {
		shape = append([]int64(nil), shape...)
	}
	if err := host.CheckShape(arg, shape, dt.Size()); err != nil {
		return host.Tensor{}, err
	}
	out := host.Tensor{DType: dt, Shape: shape, Device: dev}
	if t.strides != nil {
		strides := unsafe.Slice((*int64)(unsafe.Pointer(t.strides)), nd)
		if out.NumElements() > 0 {
			want := int64(1)
			for i := nd - 1; i >= 0; i-- {
				if shape[i] != 1 && strides[i] != want {
					return host.Tensor{}, host.Errorf(host.ErrUnsupported,
						"%s: strides %v with shape %v are not row-major contiguous (want %v); make the tensor contiguous first",
						arg, append([]int64(nil), strides...), shape, contiguousStrides(shape))
				}
				want *= shape[i]
			}
		}
	}
	if t.data == nil {
		if out.NumElements() > 0 {
			return host.Tensor{}, invalid("%s: data is NULL for a tensor of %d elements", arg, out.NumElements())
		}
		return out, nil
	}
	out.Ptr = unsafe.Add(t.data, uintptr(t.byte_offset))
	return out, nil
}

func contiguousStrides(shape []int64) []int64 {
	s := make([]int64, len(shape))
	acc := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= shape[i]
	}
	return s
}

// fillView writes a DLTensor view of t into v, with its shape in a C array owned
// by shapes.
func fillView(v *C.DLTensor, t host.Tensor, shapes *cShapes) error {
	cs, err := shapes.make(t.Shape)
	if err != nil {
		return err
	}
	*v = C.DLTensor{
		data:   t.Ptr,
		device: dlDeviceOf(t.Device),
		ndim:   C.int32_t(len(t.Shape)),
		dtype:  dlDTypeOf(t.DType),
		shape:  cs,
	}
	return nil
}

// readStruct copies a caller's versioned struct (first field size_t
// struct_size) into dst. An older, shorter struct leaves the newer fields zero
// (their defaults); a newer, longer one is accepted only if the fields this
// library does not know are zero.
func readStruct(arg string, p unsafe.Pointer, dst unsafe.Pointer, dstSize, minSize uintptr) error {
	if p == nil {
		return invalid("%s: is NULL", arg)
	}
	size := uintptr(*(*C.size_t)(p))
	if size < minSize {
		return invalid("%s: struct_size %d is smaller than the minimum %d (set it to sizeof the struct)", arg, size, minSize)
	}
	if size > 1<<16 {
		return invalid("%s: struct_size %d is implausible (set it to sizeof the struct)", arg, size)
	}
	n := min(size, dstSize)
	copy(unsafe.Slice((*byte)(dst), dstSize), unsafe.Slice((*byte)(p), n))
	for i, b := range unsafe.Slice((*byte)(p), size)[n:] {
		if b != 0 {
			return host.Errorf(host.ErrUnsupported, "%s: byte %d past this library's struct (size %d) is set: the caller uses a newer field this version lacks", arg, int(n)+i, dstSize)
		}
	}
	return nil
}
