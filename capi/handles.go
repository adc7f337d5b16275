package main

/*
#include "capi.h"
*/
import "C"

import (
	"runtime/cgo"
	"sync"
	"unsafe"

	"libquant/host"
	"libquant/internal/cmem"
)

// Handles are runtime/cgo.Handle values: no Go pointer reaches C. cgo.Handle's
// Value panics on a stale handle, so a set of live handles is checked first,
// which turns a double free, a use after free or a foreign pointer into an
// error instead of a crash.
var handles = struct {
	sync.RWMutex
	live map[uintptr]struct{}
}{live: map[uintptr]struct{}{}}

func newHandle(v any) uintptr {
	h := cgo.NewHandle(v)
	handles.Lock()
	handles.live[uintptr(h)] = struct{}{}
	handles.Unlock()
	return uintptr(h)
}

func lookupHandle(p unsafe.Pointer) (any, bool) {
	h := uintptr(p)
	handles.RLock()
	_, ok := handles.live[h]
	handles.RUnlock()
	if !ok {
		return nil, false
	}
	return cgo.Handle(h).Value(), true
}

// quantizerEntry is what a quant_quantizer handle holds.
type quantizerEntry struct {
	q      *host.Quantizer
	shapes cShapes // shape arrays of state views
}

// qtensorEntry is what a quant_qtensor handle holds.
type qtensorEntry struct {
	t      *host.QTensor
	shapes cShapes // shape arrays of buffer views
}

// cShapes keeps the C arrays that DLTensor views point their shape at; they live
// as long as the object the views describe.
type cShapes struct {
	mu   sync.Mutex
	ptrs []unsafe.Pointer
}

func (c *cShapes) make(shape []int64) (*C.int64_t, error) {
	p, err := cmem.Alloc(int64(len(shape)) * 8)
	if err != nil {
		return nil, host.Errorf(host.ErrOutOfMemory, "view shape: %v", err)
	}
	copy(unsafe.Slice((*int64)(p), len(shape)), shape)
	c.mu.Lock()
	c.ptrs = append(c.ptrs, p)
	c.mu.Unlock()
	return (*C.int64_t)(p), nil
}

func (c *cShapes) free() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.ptrs {
		cmem.Free(p)
	}
	c.ptrs = nil
}

func kindMismatch(arg, want string, got any) error {
	have := "an unknown object"
	switch got.(type) {
	case *quantizerEntry:
		have = "a quantizer"
	case *qtensorEntry:
		have = "a quantized tensor"
	case *recipeEntry:
		have = "a recipe"
	case *linearEntry:
		have = "a linear layer"
	case *linearCtxEntry:
		have = "a linear context"
	}
	return host.Errorf(errInvalidHandle, "%s: handle is %s, not %s", arg, have, want)
}

func getQuantizer(p *C.quant_quantizer, arg string) (*quantizerEntry, error) {
	return getQuantizerPtr(unsafe.Pointer(p), arg)
}

func getQuantizerPtr(p unsafe.Pointer, arg string) (*quantizerEntry, error) {
	return getEntry[quantizerEntry](p, arg, "quantizer")
}

func getQTensorPtr(p unsafe.Pointer, arg string) (*qtensorEntry, error) {
	return getEntry[qtensorEntry](p, arg, "quantized tensor")
}

// getEntry resolves a handle argument to the entry of type T it must hold;
// what names the kind for the messages.
func getEntry[T any](p unsafe.Pointer, arg, what string) (*T, error) {
	if p == nil {
		return nil, invalid("%s: is NULL", arg)
	}
	v, ok := lookupHandle(p)
	if !ok {
		return nil, host.Errorf(errInvalidHandle, "%s: %p is not a live %s (freed, or not from libquant)", arg, p, what)
	}
	e, ok := v.(*T)
	if !ok {
		return nil, kindMismatch(arg, "a "+what, v)
	}
	return e, nil
}

// takeEntry is getEntry that also retires the handle, atomically: used by the
// *_free functions and wherever libquant takes ownership of a caller's handle.
// A second take of the same handle (double free, or a free racing another)
// fails as a handle that is not live.
func takeEntry[T any](p unsafe.Pointer, arg, what string) (*T, error) {
	if p == nil {
		return nil, invalid("%s: is NULL", arg)
	}
	h := uintptr(p)
	handles.Lock()
	defer handles.Unlock()
	if _, ok := handles.live[h]; !ok {
		return nil, host.Errorf(errInvalidHandle, "%s: %p is not a live %s (freed, or not from libquant)", arg, p, what)
	}
	v := cgo.Handle(h).Value()
	e, ok := v.(*T)
	if !ok {
		return nil, kindMismatch(arg, "a "+what, v)
	}
	delete(handles.live, h)
	cgo.Handle(h).Delete()
	return e, nil
}

func quantizerHandle(e *quantizerEntry) *C.quant_quantizer {
	return C.capi_quantizer_handle(C.uintptr_t(newHandle(e)))
}

func qtensorHandle(e *qtensorEntry) *C.quant_qtensor {
	return C.capi_qtensor_handle(C.uintptr_t(newHandle(e)))
}
