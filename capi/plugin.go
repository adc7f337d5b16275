package main

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "capi_plugin.h"
*/
import "C"

import (
	"path/filepath"
	"sync"
	"unsafe"

	"libquant/native"
)

var defaultPlugins sync.Once

// loadDefaultPlugins runs once, on the first call into libquant: the plugins of
// LIBQUANT_PLUGIN_PATH, then libquant_cuda.so next to libquant.so. It is not
// done at load time so that loading libquant never runs plugin code.
func loadDefaultPlugins() {
	defaultPlugins.Do(func() {
		dir := ""
		if p := C.capi_library_path(); p != nil {
			dir = filepath.Dir(C.GoString(p))
		}
		native.LoadDefault(dir)
	})
}

// pluginStrings keeps the C strings quant_plugin_info hands out; they live for
// the process, like the plugins themselves.
var pluginStrings = struct {
	sync.Mutex
	m map[int]*cPluginStrings
}{m: map[int]*cPluginStrings{}}

type cPluginStrings struct {
	path, name, version, message *C.char
	formats                      []*C.char // kernel format names, then defined format names
	defined                      []*C.char
}

func pluginEntry(index C.size_t) (native.Info, *cPluginStrings, error) {
	list := native.Plugins()
	if int(index) >= len(list) {
		return native.Info{}, nil, invalid("index: %d is past the %d entries of the plugin list", index, len(list))
	}
	i := int(index)
	p := list[i]
	pluginStrings.Lock()
	defer pluginStrings.Unlock()
	s, ok := pluginStrings.m[i]
	if !ok {
		msg := ""
		if p.Err != nil {
			msg = p.Err.Error()
		}
		s = &cPluginStrings{path: C.CString(p.Path), name: C.CString(p.Name), version: C.CString(p.Version), message: C.CString(msg)}
		for _, k := range p.Kernels {
			s.formats = append(s.formats, C.CString(k.Format))
		}
		for _, f := range p.Formats {
			s.defined = append(s.defined, C.CString(f))
		}
		pluginStrings.m[i] = s
	}
	return p, s, nil
}

//export quant_plugin_load
func quant_plugin_load(path *C.capi_const_char, index *C.size_t) C.quant_status {
	return call("quant_plugin_load", func() error {
		if path == nil {
			return invalid("path: is NULL")
		}
		p := C.GoString((*C.char)(unsafe.Pointer(path)))
		if p == "" {
			return invalid("path: is empty")
		}
		info, err := native.Load(p, native.Explicit)
		if err != nil {
			return err
		}
		if index != nil {
			for i, q := range native.Plugins() {
				if q.Err == nil && q.Path == info.Path && q.Name == info.Name {
					*index = C.size_t(i)
					break
				}
			}
		}
		return nil
	})
}

//export quant_plugin_count
func quant_plugin_count(count *C.size_t) C.quant_status {
	return call("quant_plugin_count", func() error {
		if count == nil {
			return invalid("count: is NULL")
		}
		*count = C.size_t(len(native.Plugins()))
		return nil
	})
}

//export quant_plugin_get_info
func quant_plugin_get_info(index C.size_t, info *C.quant_plugin_info) C.quant_status {
	return call("quant_plugin_get_info", func() error {
		if info == nil {
			return invalid("info: is NULL")
		}
		size := uintptr(info.struct_size)
		if size < unsafe.Sizeof(info.struct_size) || size > 1<<16 {
			return invalid("info: struct_size %d is invalid (set it to sizeof(quant_plugin_info))", size)
		}
		p, s, err := pluginEntry(index)
		if err != nil {
			return err
		}
		var v C.quant_plugin_info
		v.struct_size = info.struct_size
		v.path, v.name, v.version, v.message = s.path, s.name, s.version, s.message
		v.abi_version = C.uint32_t(p.ABIVersion)
		v.origin = C.int32_t(p.Origin)
		if p.Err != nil {
			v.status = C.int32_t(statusOf(p.Err))
		}
		v.num_formats = C.uint32_t(len(p.Formats))
		v.num_kernels = C.uint32_t(len(p.Kernels))
		n := min(size, unsafe.Sizeof(v))
		copy(unsafe.Slice((*byte)(unsafe.Pointer(info)), n), unsafe.Slice((*byte)(unsafe.Pointer(&v)), n))
		return nil
	})
}

//export quant_plugin_get_kernel
func quant_plugin_get_kernel(index C.size_t, kernel C.size_t, info *C.quant_plugin_kernel_info) C.quant_status {
	return call("quant_plugin_get_kernel", func() error {
		if info == nil {
			return invalid("info: is NULL")
		}
		size := uintptr(info.struct_size)
		if size < unsafe.Sizeof(info.struct_size) || size > 1<<16 {
			return invalid("info: struct_size %d is invalid (set it to sizeof(quant_plugin_kernel_info))", size)
		}
		p, s, err := pluginEntry(index)
		if err != nil {
			return err
		}
		if int(kernel) >= len(p.Kernels) {
			return invalid("kernel: %d is past the %d kernel sets of plugin %d", kernel, len(p.Kernels), index)
		}
		k := p.Kernels[kernel]
		var v C.quant_plugin_kernel_info
		v.struct_size = info.struct_size
		v.format = s.formats[kernel]
		v.device_type = C.int32_t(k.Device)
		v.ops = C.uint32_t(k.Ops)
		if k.DefinesFormat {
			v.defines_format = 1
		}
		n := min(size, unsafe.Sizeof(v))
		copy(unsafe.Slice((*byte)(unsafe.Pointer(info)), n), unsafe.Slice((*byte)(unsafe.Pointer(&v)), n))
		return nil
	})
}

//export quant_plugin_get_format
func quant_plugin_get_format(index C.size_t, format C.size_t, name **C.capi_const_char) C.quant_status {
	return call("quant_plugin_get_format", func() error {
		if name == nil {
			return invalid("name: is NULL")
		}
		p, s, err := pluginEntry(index)
		if err != nil {
			return err
		}
		if int(format) >= len(p.Formats) {
			return invalid("format: %d is past the %d formats plugin %d defines", format, len(p.Formats), index)
		}
		*name = (*C.capi_const_char)(unsafe.Pointer(s.defined[format]))
		return nil
	})
}
