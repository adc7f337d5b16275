package main

/*
#include "capi.h"
*/
import "C"

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"libquant/host"
	"libquant/internal/cmem"
)

// A handle is an index into a table of live objects and that slot's
// generation (index | generation<<32), never a Go pointer. A slot freed by a
// *_free call gets a new generation when it is reused, so a double free, a use
// after free or a foreign pointer finds no live slot of its generation and is
// an error instead of a crash.
//
// Lookups, on every call, take no lock: they read the table and the slot
// atomically (issue #15: host time per call; a map under a lock and
// runtime/cgo.Handle's sync.Map cost ~8% of a quantize_into). Creating and
// retiring handles is serialized by mu.
type handleSlot struct {
	gen uint32
	v   any
}

var handles struct {
	mu    sync.Mutex
	table atomic.Pointer[[]atomic.Pointer[handleSlot]] // grows by copying; slots are never moved back
	gens  []uint32                                     // each slot's last generation, under mu
	free  []uint32                                     // indexes of retired slots, under mu
}

func newHandle(v any) uintptr {
	handles.mu.Lock()
	defer handles.mu.Unlock()
	var idx uint32
	if n := len(handles.free); n > 0 {
		idx = handles.free[n-1]
		handles.free = handles.free[:n-1]
	} else {
		idx = uint32(len(handles.gens))
		handles.gens = append(handles.gens, 0)
		var tbl []atomic.Pointer[handleSlot]
		if p := handles.table.Load(); p != nil {
			tbl = *p
		}
		if int(idx) >= len(tbl) {
			grown := make([]atomic.Pointer[handleSlot], max(64, 2*len(tbl)))
			for i := range tbl {
				grown[i].Store(tbl[i].Load())
			}
			handles.table.Store(&grown)
		}
	}
	gen := handles.gens[idx] + 1
	if gen == 0 {
		gen = 1 // a handle is never 0 (NULL)
	}
	handles.gens[idx] = gen
	(*handles.table.Load())[idx].Store(&handleSlot{gen: gen, v: v})
	return uintptr(idx) | uintptr(gen)<<32
}

// slotOf returns the slot a handle names while it is live.
func slotOf(p unsafe.Pointer) (*atomic.Pointer[handleSlot], *handleSlot) {
	h := uint64(uintptr(p))
	idx, gen := h&(1<<32-1), uint32(h>>32)
	tbl := handles.table.Load()
	if tbl == nil || idx >= uint64(len(*tbl)) {
		return nil, nil
	}
	slot := &(*tbl)[idx]
	if e := slot.Load(); e != nil && e.gen == gen {
		return slot, e
	}
	return nil, nil
}

func lookupHandle(p unsafe.Pointer) (any, bool) {
	if _, e := slotOf(p); e != nil {
		return e.v, true
	}
	return nil, false
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
	handles.mu.Lock()
	defer handles.mu.Unlock()
	slot, e := slotOf(p)
	if e == nil {
		return nil, host.Errorf(errInvalidHandle, "%s: %p is not a live %s (freed, or not from libquant)", arg, p, what)
	}
	v, ok := e.v.(*T)
	if !ok {
		return nil, kindMismatch(arg, "a "+what, e.v)
	}
	// Under mu the table is the one slotOf read (it only grows under mu).
	slot.Store(nil)
	handles.free = append(handles.free, uint32(uintptr(p)))
	return v, nil
}

func quantizerHandle(e *quantizerEntry) *C.quant_quantizer {
	return C.capi_quantizer_handle(C.uintptr_t(newHandle(e)))
}

func qtensorHandle(e *qtensorEntry) *C.quant_qtensor {
	return C.capi_qtensor_handle(C.uintptr_t(newHandle(e)))
}
