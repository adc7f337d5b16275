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
	"time"
	"unsafe"

	"libquant/host"
	"libquant/native"
	"libquant/rpc"
)

var defaultPlugins sync.Once

// manifestVar is rpc.ManifestEnv for C's getenv.
var manifestVar = C.CString(rpc.ManifestEnv)

// loadDefaultPlugins runs once, on the first call into libquant: the plugins of
// LIBQUANT_PLUGIN_PATH, then libquant_cuda.so next to libquant.so. It is not
// done at load time so that loading libquant never runs plugin code.
func loadDefaultPlugins() {
	defaultPlugins.Do(func() {
		dir := ""
		if p := C.capi_library_path(); p != nil {
			dir = filepath.Dir(C.GoString(p))
		}
		// Executable entries (rpc.IsExecutable) go to the out-of-process
		// loader; the native one takes the rest.
		native.LoadDefault(dir, func(entry string) bool {
			if !rpc.IsExecutable(entry) {
				return false
			}
			o := rpc.Options{Origin: rpc.Env}
			if m := C.getenv(manifestVar); m != nil {
				o.Manifest = C.GoString(m)
			}
			_, _ = rpc.Load(entry, o)
			return true
		})
	})
}

// pluginList is the list quant_plugin_get_info indexes: the loads of both
// loaders (native .so plugins, executable plugins) in the order libquant
// first listed them, so that an index never moves.
var pluginList struct {
	sync.Mutex
	order      []pluginRef
	seenNative int
	seenRPC    int
}

type pluginRef struct {
	rpc bool
	i   int
}

// allPlugins returns the unified plugin list.
func allPlugins() []native.Info {
	n, r := native.Plugins(), rpc.Plugins()
	pluginList.Lock()
	defer pluginList.Unlock()
	for ; pluginList.seenNative < len(n); pluginList.seenNative++ {
		pluginList.order = append(pluginList.order, pluginRef{false, pluginList.seenNative})
	}
	for ; pluginList.seenRPC < len(r); pluginList.seenRPC++ {
		pluginList.order = append(pluginList.order, pluginRef{true, pluginList.seenRPC})
	}
	out := make([]native.Info, len(pluginList.order))
	for j, ref := range pluginList.order {
		if ref.rpc {
			out[j] = rpcEntry(r[ref.i])
		} else {
			out[j] = n[ref.i]
		}
	}
	return out
}

// rpcEntry describes an executable plugin as a plugin list entry: its
// abi_version is its go-plugin protocol version, and it provides CPU kernels
// for the formats it defines. Err is set once it stopped.
func rpcEntry(i rpc.Info) native.Info {
	e := native.Info{Path: i.Path, Name: i.Name, Version: i.Version, ABIVersion: uint32(i.Protocol),
		Origin: native.Origin(i.Origin), Err: i.Err, Formats: i.Formats}
	for _, f := range i.Formats {
		e.Kernels = append(e.Kernels, native.KernelInfo{Format: f, Device: host.CPU, DefinesFormat: true,
			Ops: native.OpAmax | native.OpQuantize | native.OpDequantize | native.OpDerive})
	}
	return e
}

// pluginStrings keeps the C strings quant_plugin_info hands out; they live for
// the process, like the plugins themselves.
var pluginStrings = struct {
	sync.Mutex
	m map[int]*cPluginStrings
}{m: map[int]*cPluginStrings{}}

type cPluginStrings struct {
	path, name, version, message *C.char
	msg                          string    // what message holds
	formats                      []*C.char // kernel format names, then defined format names
	defined                      []*C.char
}

func pluginEntry(index C.size_t) (native.Info, *cPluginStrings, error) {
	list := allPlugins()
	if uint64(index) >= uint64(len(list)) { // unsigned: (size_t)-1 must not wrap to -1
		return native.Info{}, nil, invalid("index: %d is past the %d entries of the plugin list", index, len(list))
	}
	i := int(index)
	p := list[i]
	pluginStrings.Lock()
	defer pluginStrings.Unlock()
	msg := ""
	if p.Err != nil {
		msg = p.Err.Error()
	}
	s, ok := pluginStrings.m[i]
	if ok && s.msg != msg {
		// An executable plugin stopped since: a new message; the old string
		// stays valid (strings handed out live for the process).
		s.message, s.msg = C.CString(msg), msg
	}
	if !ok {
		s = &cPluginStrings{path: C.CString(p.Path), name: C.CString(p.Name), version: C.CString(p.Version), message: C.CString(msg), msg: msg}
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
		return loadPlugin(path, nil, index)
	})
}

//export quant_plugin_load_ex
func quant_plugin_load_ex(path *C.capi_const_char, opts *C.capi_const_plugin_load_options, index *C.size_t) C.quant_status {
	return call("quant_plugin_load_ex", func() error {
		if opts == nil {
			return invalid("opts: is NULL (quant_plugin_load takes no options)")
		}
		if uintptr(opts.struct_size) < unsafe.Sizeof(opts.struct_size) || opts.struct_size > 1<<16 {
			return invalid("opts: struct_size %d is invalid (set it to sizeof(quant_plugin_load_options))", opts.struct_size)
		}
		var o C.capi_const_plugin_load_options
		n := min(uintptr(opts.struct_size), unsafe.Sizeof(o))
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&o)), n), unsafe.Slice((*byte)(unsafe.Pointer(opts)), n))
		if uintptr(opts.struct_size) > unsafe.Sizeof(o) {
			tail := unsafe.Slice((*byte)(unsafe.Pointer(opts)), uintptr(opts.struct_size))[unsafe.Sizeof(o):]
			for _, b := range tail {
				if b != 0 {
					return invalid("opts: fields past this libquant's quant_plugin_load_options are set (a newer header?)")
				}
			}
		}
		return loadPlugin(path, &o, index)
	})
}

// loadPlugin loads an executable plugin (rpc) or a native one by the file's
// kind (rpc.IsExecutable), with the options of quant_plugin_load_ex.
func loadPlugin(path *C.capi_const_char, opts *C.capi_const_plugin_load_options, index *C.size_t) error {
	if path == nil {
		return invalid("path: is NULL")
	}
	p := C.GoString((*C.char)(unsafe.Pointer(path)))
	if p == "" {
		return invalid("path: is empty")
	}
	var ro rpc.Options
	if m := C.getenv(manifestVar); m != nil {
		ro.Manifest = C.GoString(m)
	}
	if opts != nil {
		if opts.sha256 != nil {
			ro.SHA256 = C.GoString(opts.sha256)
		}
		ro.CallTimeout = time.Duration(opts.call_timeout_ms) * time.Millisecond
		ro.ArenaBytes = int64(opts.arena_bytes)
		if ro.ArenaBytes < 0 {
			return invalid("opts.arena_bytes: %d is too large", uint64(opts.arena_bytes))
		}
	}
	var name string
	if rpc.IsExecutable(p) {
		info, err := rpc.Load(p, ro)
		if err != nil {
			return err
		}
		name = info.Name
	} else {
		info, err := native.LoadDigest(p, native.Explicit, ro.SHA256)
		if err != nil {
			return err
		}
		name = info.Name
	}
	if index != nil {
		for i, q := range allPlugins() {
			if q.Err == nil && q.Path == p && q.Name == name {
				*index = C.size_t(i)
			}
		}
	}
	return nil
}

//export quant_shutdown
func quant_shutdown() C.quant_status {
	return call("quant_shutdown", func() error {
		rpc.Shutdown()
		return nil
	})
}

//export quant_plugin_count
func quant_plugin_count(count *C.size_t) C.quant_status {
	return call("quant_plugin_count", func() error {
		if count == nil {
			return invalid("count: is NULL")
		}
		*count = C.size_t(len(allPlugins()))
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
		if uint64(kernel) >= uint64(len(p.Kernels)) {
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
		if uint64(format) >= uint64(len(p.Formats)) {
			return invalid("format: %d is past the %d formats plugin %d defines", format, len(p.Formats), index)
		}
		*name = (*C.capi_const_char)(unsafe.Pointer(s.defined[format]))
		return nil
	})
}
