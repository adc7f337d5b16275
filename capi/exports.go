package main

/*
#include "capi.h"
*/
import "C"

import (
	"fmt"
	"math"
	"unsafe"

	"libquant/host"
)

func paramsFromConfig(p unsafe.Pointer) (host.Params, host.Usage, error) {
	var cfg C.quant_quantizer_config
	minSize := unsafe.Offsetof(cfg.format) + unsafe.Sizeof(cfg.format)
	if err := readStruct("config", p, unsafe.Pointer(&cfg), unsafe.Sizeof(cfg), minSize); err != nil {
		return host.Params{}, 0, err
	}
	if cfg.format == nil {
		return host.Params{}, 0, invalid("config.format: is NULL")
	}
	params := host.Params{
		Format:             C.GoString(cfg.format),
		Element:            host.Element(cfg.element),
		Scaling:            host.Scaling(cfg.scaling),
		ForcePow2Scales:    cfg.force_pow2_scales != 0,
		AmaxEpsilon:        float32(cfg.amax_epsilon),
		AmaxHistoryLen:     int32(cfg.amax_history_len),
		AmaxAlgo:           host.AmaxAlgo(cfg.amax_compute_algo),
		Margin:             float32(cfg.margin),
		BlockDims:          int32(cfg.block_dims),
		FP32Scales:         cfg.fp32_scales != 0,
		ScaleRounding:      host.ScaleRounding(cfg.scale_rounding),
		GEMMSwizzledScales: cfg.gemm_swizzled_scales != 0,
		RHT:                host.RHTMode(cfg.rht),
		RHTSignMask:        uint32(cfg.rht_sign_mask),
		StochasticRounding: cfg.stochastic_rounding != 0,
		Seed:               uint64(cfg.seed),
		Offset:             uint64(cfg.offset),
	}
	if cfg.dtype != (C.DLDataType{}) {
		dt, err := dtypeFromDL("config.dtype", cfg.dtype)
		if err != nil {
			return host.Params{}, 0, err
		}
		params.HoldDType = dt
	}
	return params, host.Usage(cfg.usage), nil
}

//export quant_quantizer_create
func quant_quantizer_create(config *C.capi_const_config, out **C.quant_quantizer) C.quant_status {
	return call("quant_quantizer_create", func() error {
		if out == nil {
			return invalid("out: is NULL")
		}
		p, usage, err := paramsFromConfig(unsafe.Pointer(config))
		if err != nil {
			return err
		}
		q, err := host.NewQuantizer(p, usage)
		if err != nil {
			return err
		}
		*out = quantizerHandle(&quantizerEntry{q: q})
		return nil
	})
}

//export quant_quantizer_free
func quant_quantizer_free(q *C.quant_quantizer) C.quant_status {
	return call("quant_quantizer_free", func() error {
		if q == nil {
			return nil
		}
		e, err := takeEntry[quantizerEntry](unsafe.Pointer(q), "quantizer", "quantizer")
		if err != nil {
			return err
		}
		e.q.Release()
		e.shapes.free()
		return nil
	})
}

//export quant_quantizer_set_usage
func quant_quantizer_set_usage(q *C.quant_quantizer, usage C.uint32_t) C.quant_status {
	return call("quant_quantizer_set_usage", func() error {
		e, err := getQuantizer(q, "quantizer")
		if err != nil {
			return err
		}
		return e.q.SetUsage(host.Usage(usage))
	})
}

//export quant_quantizer_get_usage
func quant_quantizer_get_usage(q *C.capi_const_quantizer, usage *C.uint32_t) C.quant_status {
	return call("quant_quantizer_get_usage", func() error {
		e, err := getQuantizerPtr(unsafe.Pointer(q), "quantizer")
		if err != nil {
			return err
		}
		if usage == nil {
			return invalid("usage: is NULL")
		}
		*usage = C.uint32_t(e.q.Usage())
		return nil
	})
}

// shapeArg reads a (shape, ndim) pair.
func shapeArg(shape *C.capi_const_int64, ndim C.int32_t) ([]int64, error) {
	if shape == nil {
		return nil, invalid("shape: is NULL")
	}
	if ndim < 1 || ndim > host.MaxDims {
		return nil, invalid("ndim: %d not supported (want 1..%d)", ndim, host.MaxDims)
	}
	s := append([]int64(nil), unsafe.Slice((*int64)(unsafe.Pointer(shape)), int(ndim))...)
	return s, host.CheckShape("shape", s, 0)
}

// countArg checks the count pointer of an export that fills an output array
// (quant_quantizer_layout's contract). Exports call it before the work, so a
// NULL count is the error reported whatever else is wrong.
func countArg(count *C.size_t) error {
	if count == nil {
		return invalid("count: is NULL")
	}
	return nil
}

// outputArray writes n to *count and returns the n entries of out to fill:
// none when out is NULL (a count query), and ErrBufferTooSmall when capacity
// is short, with *count already written so the caller can size its array.
// holder and unit name what has n entries: "the layout has 3 buffers".
func outputArray[T any](out *T, capacity C.size_t, count *C.size_t, n int, holder, unit string) ([]T, error) {
	*count = C.size_t(n)
	if out == nil {
		return nil, nil
	}
	if int(capacity) < n {
		return nil, host.Errorf(host.ErrBufferTooSmall, "capacity: %d, the %s has %d %s", capacity, holder, n, unit)
	}
	return unsafe.Slice(out, n), nil
}

//export quant_quantizer_layout
func quant_quantizer_layout(q *C.capi_const_quantizer, shape *C.capi_const_int64, ndim C.int32_t,
	descs *C.quant_buffer_desc, capacity C.size_t, count *C.size_t) C.quant_status {
	return call("quant_quantizer_layout", func() error {
		return layoutInto(unsafe.Pointer(q), 0, shape, ndim, descs, capacity, count)
	})
}

//export quant_quantizer_layout_usage
func quant_quantizer_layout_usage(q *C.capi_const_quantizer, usage C.uint32_t, shape *C.capi_const_int64, ndim C.int32_t,
	descs *C.quant_buffer_desc, capacity C.size_t, count *C.size_t) C.quant_status {
	return call("quant_quantizer_layout_usage", func() error {
		return layoutInto(unsafe.Pointer(q), uint32(usage), shape, ndim, descs, capacity, count)
	})
}

// layoutInto writes the layout of a quantize of shape with usage (0: the
// quantizer's) into descs (quant_quantizer_layout's contract).
func layoutInto(q unsafe.Pointer, usage uint32, shape *C.capi_const_int64, ndim C.int32_t,
	descs *C.quant_buffer_desc, capacity C.size_t, count *C.size_t) error {
	e, err := getQuantizerPtr(q, "quantizer")
	if err != nil {
		return err
	}
	u, err := usageArg("usage", usage, e.q)
	if err != nil {
		return err
	}
	if err := countArg(count); err != nil {
		return err
	}
	s, err := shapeArg(shape, ndim)
	if err != nil {
		return err
	}
	layout, err := e.q.LayoutUsage(s, u)
	if err != nil {
		return err
	}
	out, err := outputArray(descs, capacity, count, len(layout), "layout", "buffers")
	if err != nil {
		return err
	}
	for i := range out {
		l := layout[i]
		d := C.quant_buffer_desc{
			direction: C.uint32_t(l.Dir.Usage()),
			kind:      C.int32_t(l.Kind),
			dtype:     dlDTypeOf(l.DType),
			ndim:      C.int32_t(len(l.Shape)),
			nbytes:    C.uint64_t(l.Bytes()),
		}
		for j, v := range l.Shape {
			d.shape[j] = C.int64_t(v)
		}
		out[i] = d
	}
	return nil
}

// quantizeOptions reads an optional quant_quantize_options, and the usage
// to quantize for: options.usage, or the quantizer's where that is 0.
func quantizeOptions(p unsafe.Pointer, q *host.Quantizer) (host.QuantizeOptions, host.Usage, error) {
	var o host.QuantizeOptions
	if p == nil {
		return o, q.Usage(), nil
	}
	var c C.quant_quantize_options
	if err := readStruct("options", p, unsafe.Pointer(&c), unsafe.Sizeof(c), unsafe.Sizeof(c.struct_size)); err != nil {
		return o, 0, err
	}
	o.Stream = uintptr(c.stream)
	o.Persistent = c.persistent != 0
	if c.amax != nil {
		a, err := tensorFromDL("options.amax", unsafe.Pointer(c.amax))
		if err != nil {
			return o, 0, err
		}
		o.AmaxIn = &a
	}
	u, err := usageArg("options.usage", uint32(c.usage), q)
	return o, u, err
}

// usageArg checks a usage argument: QUANT_USAGE_* bits, 0 for q's usage.
func usageArg(arg string, u uint32, q *host.Quantizer) (host.Usage, error) {
	if u&^uint32(host.BothUsages) != 0 {
		return 0, invalid("%s: %#x has bits other than rowwise (1) and columnwise (2)", arg, u)
	}
	if u == 0 {
		return q.Usage(), nil
	}
	return host.Usage(u), nil
}

//export quant_compute_amax
func quant_compute_amax(q *C.capi_const_quantizer, input *C.capi_const_DLTensor, amax *C.DLTensor, stream unsafe.Pointer) C.quant_status {
	return call("quant_compute_amax", func() error {
		e, err := getQuantizerPtr(unsafe.Pointer(q), "quantizer")
		if err != nil {
			return err
		}
		in, err := tensorFromDL("input", unsafe.Pointer(input))
		if err != nil {
			return err
		}
		out, err := tensorFromDL("amax", unsafe.Pointer(amax))
		if err != nil {
			return err
		}
		return e.q.ComputeAmax(in, out, uintptr(stream))
	})
}

//export quant_quantize
func quant_quantize(q *C.quant_quantizer, input *C.capi_const_DLTensor, options *C.capi_const_options, out **C.quant_qtensor) C.quant_status {
	return call("quant_quantize", func() error {
		e, err := getQuantizer(q, "quantizer")
		if err != nil {
			return err
		}
		if out == nil {
			return invalid("out: is NULL")
		}
		in, err := tensorFromDL("input", unsafe.Pointer(input))
		if err != nil {
			return err
		}
		opts, usage, err := quantizeOptions(unsafe.Pointer(options), e.q)
		if err != nil {
			return err
		}
		t, err := e.q.QuantizeUsage(in, opts, usage)
		if err != nil {
			return err
		}
		*out = qtensorHandle(&qtensorEntry{t: t})
		return nil
	})
}

//export quant_quantize_into
func quant_quantize_into(q *C.quant_quantizer, input *C.capi_const_DLTensor, options *C.capi_const_options, dst *C.quant_qtensor) C.quant_status {
	return call("quant_quantize_into", func() error {
		e, d, in, opts, usage, err := intoArgs(q, input, options, dst, false)
		if err != nil {
			return err
		}
		return e.q.QuantizeIntoUsage(in, opts, d.t, usage)
	})
}

// intoArgs reads quant_quantize_into's arguments (and a plan's, which keeps
// them: keep copies the input's shape out of the caller's memory).
func intoArgs(q *C.quant_quantizer, input *C.capi_const_DLTensor, options *C.capi_const_options, dst *C.quant_qtensor, keep bool) (*quantizerEntry, *qtensorEntry, host.Tensor, host.QuantizeOptions, host.Usage, error) {
	e, err := getQuantizer(q, "quantizer")
	if err != nil {
		return nil, nil, host.Tensor{}, host.QuantizeOptions{}, 0, err
	}
	d, err := getQTensorPtr(unsafe.Pointer(dst), "dst")
	if err != nil {
		return nil, nil, host.Tensor{}, host.QuantizeOptions{}, 0, err
	}
	in, err := tensorFromDLShape("input", unsafe.Pointer(input), keep)
	if err != nil {
		return nil, nil, host.Tensor{}, host.QuantizeOptions{}, 0, err
	}
	opts, usage, err := quantizeOptions(unsafe.Pointer(options), e.q)
	if err != nil {
		return nil, nil, host.Tensor{}, host.QuantizeOptions{}, 0, err
	}
	return e, d, in, opts, usage, nil // (options.amax's shape is a copy: tensorFromDL)
}

// maxGroup bounds a grouped quantize's count, so that garbage is caught.
const maxGroup = 1 << 16

//export quant_quantize_grouped
func quant_quantize_grouped(q *C.quant_quantizer, args *C.capi_const_grouped_args) C.quant_status {
	return call("quant_quantize_grouped", func() error {
		e, err := getQuantizer(q, "quantizer")
		if err != nil {
			return err
		}
		var a C.quant_quantize_grouped_args
		if err := readStruct("args", unsafe.Pointer(args), unsafe.Pointer(&a), unsafe.Sizeof(a), unsafe.Sizeof(a)); err != nil {
			return err
		}
		n := int(a.count)
		switch {
		case a.count == 0:
			return invalid("args.count: is 0 (want at least one tensor)")
		case a.count > maxGroup:
			return invalid("args.count: %d is more than %d tensors", a.count, maxGroup)
		case a.inputs == nil:
			return invalid("args.inputs: is NULL with count %d", n)
		case a.outputs == nil:
			return invalid("args.outputs: is NULL with count %d", n)
		}
		ins := make([]host.Tensor, n)
		dsts := make([]*host.QTensor, n)
		outs := unsafe.Slice((**C.quant_qtensor)(unsafe.Pointer(a.outputs)), n)
		for i := 0; i < n; i++ {
			p := unsafe.Add(unsafe.Pointer(a.inputs), uintptr(i)*unsafe.Sizeof(C.DLTensor{}))
			if ins[i], err = indexed("args.inputs", i, func(arg string) (host.Tensor, error) { return tensorFromDLView(arg, p) }); err != nil {
				return err
			}
			o := unsafe.Pointer(outs[i])
			d, err := indexed("args.outputs", i, func(arg string) (*qtensorEntry, error) { return getQTensorPtr(o, arg) })
			if err != nil {
				return err
			}
			dsts[i] = d.t
		}
		return e.q.QuantizeGrouped(ins, dsts, host.QuantizeOptions{Stream: uintptr(a.stream)})
	})
}

func directionArg(dir C.uint32_t, allowAny bool) (host.Direction, error) {
	switch dir {
	case C.QUANT_DIRECTION_ROWWISE:
		return host.DirRowwise, nil
	case C.QUANT_DIRECTION_COLUMNWISE:
		return host.DirColumnwise, nil
	case C.QUANT_DIRECTION_ANY:
		if allowAny {
			return -1, nil
		}
	}
	return 0, invalid("direction: %d is not QUANT_DIRECTION_ROWWISE (1) or QUANT_DIRECTION_COLUMNWISE (2)", dir)
}

//export quant_dequantize
func quant_dequantize(t *C.capi_const_qtensor, direction C.uint32_t, out *C.DLTensor, stream unsafe.Pointer) C.quant_status {
	return call("quant_dequantize", func() error {
		e, err := getQTensorPtr(unsafe.Pointer(t), "tensor")
		if err != nil {
			return err
		}
		dir, err := directionArg(direction, true)
		if err != nil {
			return err
		}
		o, err := tensorFromDL("out", unsafe.Pointer(out))
		if err != nil {
			return err
		}
		return e.t.Dequantize(dir, o, uintptr(stream))
	})
}

//export quant_dequantize_ex
func quant_dequantize_ex(t *C.capi_const_qtensor, options *C.capi_const_dequantize_options, out *C.DLTensor) C.quant_status {
	return call("quant_dequantize_ex", func() error {
		e, err := getQTensorPtr(unsafe.Pointer(t), "tensor")
		if err != nil {
			return err
		}
		var o C.quant_dequantize_options
		if options != nil {
			if err := readStruct("options", unsafe.Pointer(options), unsafe.Pointer(&o), unsafe.Sizeof(o), unsafe.Sizeof(o.struct_size)); err != nil {
				return err
			}
		}
		dir, err := directionArg(o.direction, true)
		if err != nil {
			return invalid("options.%s", err.Error())
		}
		ot, err := tensorFromDL("out", unsafe.Pointer(out))
		if err != nil {
			return err
		}
		return e.t.DequantizeWith(dir, ot, host.DequantizeOptions{Stream: uintptr(o.stream), UndoTransform: o.undo_transform != 0})
	})
}

//export quant_qtensor_from_buffers
func quant_qtensor_from_buffers(q *C.capi_const_quantizer, shape *C.capi_const_int64, ndim C.int32_t,
	buffers *C.capi_const_DLTensor, count C.size_t, out **C.quant_qtensor) C.quant_status {
	return call("quant_qtensor_from_buffers", func() error {
		e, err := getQuantizerPtr(unsafe.Pointer(q), "quantizer")
		if err != nil {
			return err
		}
		if out == nil {
			return invalid("out: is NULL")
		}
		s, err := shapeArg(shape, ndim)
		if err != nil {
			return err
		}
		if buffers == nil && count > 0 {
			return invalid("buffers: is NULL with count %d", count)
		}
		if count > 64 {
			return invalid("count: %d is more buffers than any layout has", count)
		}
		bufs := make([]host.Tensor, int(count))
		for i := range bufs {
			p := unsafe.Add(unsafe.Pointer(buffers), uintptr(i)*unsafe.Sizeof(C.DLTensor{}))
			if bufs[i], err = tensorFromDL(fmt.Sprintf("buffers[%d]", i), p); err != nil {
				return err
			}
		}
		t, err := e.q.NewQTensorFromBuffers(s, bufs)
		if err != nil {
			return err
		}
		*out = qtensorHandle(&qtensorEntry{t: t})
		return nil
	})
}

//export quant_qtensor_free
func quant_qtensor_free(t *C.quant_qtensor) C.quant_status {
	return call("quant_qtensor_free", func() error {
		if t == nil {
			return nil
		}
		if e, err := getQTensorPtr(unsafe.Pointer(t), "tensor"); err == nil && e.t.Pinned() {
			return host.Errorf(host.ErrState, "tensor: a quantize plan writes into this tensor's buffers; free the plan first")
		}
		e, err := takeEntry[qtensorEntry](unsafe.Pointer(t), "tensor", "quantized tensor")
		if err != nil {
			return err
		}
		e.t.Free()
		e.shapes.free()
		return nil
	})
}

func copyName(dst []C.char, s string) {
	n := min(len(s), len(dst)-1)
	for i := 0; i < n; i++ {
		dst[i] = C.char(s[i])
	}
	dst[n] = 0
}

//export quant_qtensor_get_info
func quant_qtensor_get_info(t *C.capi_const_qtensor, info *C.quant_qtensor_info) C.quant_status {
	return call("quant_qtensor_get_info", func() error {
		e, err := getQTensorPtr(unsafe.Pointer(t), "tensor")
		if err != nil {
			return err
		}
		return fillQTensorInfo(e.t, info)
	})
}

// fillQTensorInfo writes t's description into the caller's info, up to its
// struct_size (shared with quant_linear_weight_get_info).
func fillQTensorInfo(t *host.QTensor, info *C.quant_qtensor_info) error {
	if info == nil {
		return invalid("info: is NULL")
	}
	size := uintptr(info.struct_size)
	minSize := unsafe.Sizeof(info.struct_size)
	if size < minSize || size > 1<<16 {
		return invalid("info: struct_size %d is invalid (set it to sizeof(quant_qtensor_info))", size)
	}
	var v C.quant_qtensor_info
	v.struct_size = info.struct_size
	shape := t.Shape()
	v.ndim = C.int32_t(len(shape))
	for i, d := range shape {
		v.shape[i] = C.int64_t(d)
	}
	v.usage = C.uint32_t(t.Usage())
	v.device = dlDeviceOf(t.Device())
	if t.Persistent() {
		v.persistent = 1
	}
	if st, ok := t.Storage(host.DirRowwise); ok {
		copyName(v.rowwise_format[:], st.FormatName())
	}
	if st, ok := t.Storage(host.DirColumnwise); ok {
		copyName(v.columnwise_format[:], st.FormatName())
	}
	n := min(size, unsafe.Sizeof(v))
	copy(unsafe.Slice((*byte)(unsafe.Pointer(info)), n), unsafe.Slice((*byte)(unsafe.Pointer(&v)), n))
	return nil
}

//export quant_qtensor_buffer
func quant_qtensor_buffer(t *C.capi_const_qtensor, direction C.uint32_t, kind C.quant_buffer_kind, view *C.DLTensor) C.quant_status {
	return call("quant_qtensor_buffer", func() error {
		e, err := getQTensorPtr(unsafe.Pointer(t), "tensor")
		if err != nil {
			return err
		}
		dir, err := directionArg(direction, false)
		if err != nil {
			return err
		}
		if view == nil {
			return invalid("view: is NULL")
		}
		st, ok := e.t.Storage(dir)
		if !ok {
			return host.Errorf(host.ErrState, "tensor: has no %s data (usage %s)", dir, e.t.Usage())
		}
		b, ok := st.Buffer(host.BufferKind(kind))
		if !ok {
			if kind < 0 || kind > C.QUANT_BUFFER_AMAX {
				return invalid("kind: %d is not a quant_buffer_kind", kind)
			}
			return host.Errorf(host.ErrUnsupported, "kind: format %s has no %s buffer", st.FormatName(), host.BufferKind(kind))
		}
		return fillView(view, b.Tensor, &e.shapes)
	})
}

func stateDirection(q *host.Quantizer, direction C.uint32_t) (host.Direction, error) {
	dir, err := directionArg(direction, true)
	if err != nil {
		return 0, err
	}
	if dir < 0 {
		if q.IsHybrid() {
			return 0, invalid("direction: a hybrid quantizer has a state per direction; name one")
		}
		dir = host.DirRowwise
	}
	return dir, nil
}

//export quant_delayed_scaling_state
func quant_delayed_scaling_state(q *C.capi_const_quantizer, direction C.uint32_t, scale *C.DLTensor, history *C.DLTensor) C.quant_status {
	return call("quant_delayed_scaling_state", func() error {
		e, err := getQuantizerPtr(unsafe.Pointer(q), "quantizer")
		if err != nil {
			return err
		}
		dir, err := stateDirection(e.q, direction)
		if err != nil {
			return err
		}
		ds, err := e.q.DelayedState(dir)
		if err != nil {
			return err
		}
		if err := ds.Fetch(); err != nil {
			return err
		}
		if scale != nil {
			if err := fillView(scale, ds.Scale(), &e.shapes); err != nil {
				return err
			}
		}
		if history != nil {
			return fillView(history, ds.AmaxHistory(), &e.shapes)
		}
		return nil
	})
}

//export quant_delayed_scaling_update
func quant_delayed_scaling_update(q *C.quant_quantizer, direction C.uint32_t, reduced *C.capi_const_float) C.quant_status {
	return call("quant_delayed_scaling_update", func() error {
		e, err := getQuantizer(q, "quantizer")
		if err != nil {
			return err
		}
		dir, err := stateDirection(e.q, direction)
		if err != nil {
			return err
		}
		ds, err := e.q.DelayedState(dir)
		if err != nil {
			return err
		}
		if reduced == nil {
			return ds.Update(nil)
		}
		r := float32(*reduced)
		if math.IsNaN(float64(r)) || r < 0 {
			return invalid("reduced_amax: %g must be a non-negative number", r)
		}
		return ds.Update(&r)
	})
}

//export quant_qtensor_update_usage
func quant_qtensor_update_usage(t *C.quant_qtensor, usage C.uint32_t, stream unsafe.Pointer) C.quant_status {
	return call("quant_qtensor_update_usage", func() error {
		e, err := getQTensorPtr(unsafe.Pointer(t), "tensor")
		if err != nil {
			return err
		}
		return e.t.UpdateUsage(host.Usage(usage), uintptr(stream))
	})
}

//export quant_qtensor_set_gemm_swizzled_scales
func quant_qtensor_set_gemm_swizzled_scales(t *C.quant_qtensor, swizzled C.int32_t, stream unsafe.Pointer) C.quant_status {
	return call("quant_qtensor_set_gemm_swizzled_scales", func() error {
		e, err := getQTensorPtr(unsafe.Pointer(t), "tensor")
		if err != nil {
			return err
		}
		return e.t.SetGEMMSwizzledScales(swizzled != 0, uintptr(stream))
	})
}
