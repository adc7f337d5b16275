package main

/*
#include <stdlib.h>
#include "capi.h"
*/
import "C"

import (
	"sync"
	"unsafe"

	"libquant/host"
)

// Quantize plans (quant.h, quant_quantize_plan_*). A plan's handle names a
// slot of capi/plan.c's table, where quant_quantize_plan_run (C) finds the
// prepared kernel call; planEntry is the Go side: what a run without one
// (plan_run_go) and the plan's free need.
type planEntry struct {
	mu     sync.Mutex // serializes plan_run_go with free
	closed bool
	q      *host.Quantizer // retained for the plan's life
	dst    *host.QTensor   // pinned by prep
	in     host.Tensor     // the input as at creation (its shape copied); Ptr replaced per run
	opts   host.QuantizeOptions
	usage  host.Usage
	prep   *host.PreparedQuantize
	cplan  *C.capi_plan
}

var plans struct {
	mu sync.Mutex
	m  map[uint64]*planEntry
}

// preparedCall is the native plugins' prepared quantize (native.preparedQuantize).
type preparedCall interface {
	CCall() (fn, args, err unsafe.Pointer, what string)
}

//export quant_quantize_plan_create
func quant_quantize_plan_create(q *C.quant_quantizer, input *C.capi_const_DLTensor, options *C.capi_const_options, dst *C.quant_qtensor, out **C.quant_quantize_plan) C.quant_status {
	return call("quant_quantize_plan_create", func() error {
		if out == nil {
			return invalid("out: is NULL")
		}
		e, d, in, opts, usage, err := intoArgs(q, input, options, dst, true)
		if err != nil {
			return err
		}
		prep, err := e.q.PrepareInto(in, opts, d.t, usage)
		if err != nil {
			return err
		}
		p := &planEntry{q: e.q, dst: d.t, in: in, opts: opts, usage: usage, prep: prep}
		var h C.uint64_t
		p.cplan = C.capi_plan_new(&h)
		if p.cplan == nil {
			prep.Close()
			return host.Errorf(host.ErrOutOfMemory, "out: no room for another plan")
		}
		var off uintptr
		if input.data != nil {
			off = uintptr(input.byte_offset)
		}
		var fn, args, perr unsafe.Pointer
		var what *C.char
		if pc, ok := prep.Kernel.(preparedCall); ok {
			var w string
			fn, args, perr, w = pc.CCall()
			what = C.CString(w)
		}
		C.capi_plan_set(p.cplan, fn, args, perr, what, C.uint64_t(off), C.uint32_t(in.DType.Size()), cBool(in.NumElements() > 0))
		e.q.Retain()
		plans.mu.Lock()
		if plans.m == nil {
			plans.m = map[uint64]*planEntry{}
		}
		plans.m[uint64(h)] = p
		plans.mu.Unlock()
		*out = C.capi_plan_handle(h)
		return nil
	})
}

func cBool(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}

// takePlan removes a live plan from the table (nil, error for a dead one).
func takePlan(h uint64, remove bool) (*planEntry, error) {
	plans.mu.Lock()
	p := plans.m[h]
	if remove && p != nil {
		delete(plans.m, h)
	}
	plans.mu.Unlock()
	if p == nil {
		return nil, host.Errorf(errInvalidHandle, "plan: %#x is not a live plan (freed, or not from libquant)", h)
	}
	return p, nil
}

//export quant_quantize_plan_free
func quant_quantize_plan_free(plan *C.quant_quantize_plan) C.quant_status {
	return call("quant_quantize_plan_free", func() error {
		if plan == nil {
			return nil
		}
		p, err := takePlan(uint64(uintptr(unsafe.Pointer(plan))), true)
		if err != nil {
			return err
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		p.closed = true
		// After retire no C run is in flight or can start (plan.c): the
		// prepared call's memory can go.
		C.capi_plan_retire(p.cplan)
		p.prep.Close()
		p.q.Release()
		return nil
	})
}

// capi_plan_run_go is a run of a plan without a prepared kernel call (or once
// libquant is poisoned): quant_quantize_into's work with the plan's arguments.
//
//export capi_plan_run_go
func capi_plan_run_go(h C.uint64_t, data unsafe.Pointer, stream unsafe.Pointer) C.quant_status {
	return call("quant_quantize_plan_run", func() error {
		p, err := takePlan(uint64(h), false)
		if err != nil {
			return err
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.closed {
			return host.Errorf(errInvalidHandle, "plan: %#x is not a live plan (freed, or not from libquant)", uint64(h))
		}
		in := p.in
		in.Ptr = nil
		if data != nil {
			in.Ptr = unsafe.Add(data, C.capi_plan_offset(p.cplan))
		}
		opts := p.opts
		opts.Stream = uintptr(stream)
		return p.q.QuantizeIntoUsage(in, opts, p.dst, p.usage)
	})
}
