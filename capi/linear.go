package main

/*
#include "capi.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"libquant/host"
	"libquant/linear"
)

// linearEntry is what a quant_linear handle holds.
type linearEntry struct{ l *linear.Layer }

// linearCtxEntry is what a quant_linear_ctx handle holds.
type linearCtxEntry struct {
	c       *linear.Context
	grouped bool
}

func getLinearPtr(p unsafe.Pointer, arg string) (*linearEntry, error) {
	return getEntry[linearEntry](p, arg, "linear layer")
}

func getLinearCtxPtr(p unsafe.Pointer, arg string) (*linearCtxEntry, error) {
	return getEntry[linearCtxEntry](p, arg, "linear context")
}

// The versioned structs below are read with readStruct; their minimum size
// is the end of their last version-1 field, so that fields appended later do
// not turn away callers built against this header.

// maxGEMMs bounds the arrays read from a caller's pointers, as host does.
const maxGEMMs = 1 << 16

// flagArg reads an int32 boolean, which must be 0 or 1.
func flagArg(name string, v C.int32_t) (bool, error) {
	switch v {
	case 0:
		return false, nil
	case 1:
		return true, nil
	}
	return false, invalid("%s: %d is not 0 or 1", name, v)
}

func linearFlags(override, save, inGrad, wGrad C.int32_t) (linear.Flags, error) {
	f := linear.Flags{BackwardOverride: linear.BackwardOverride(override)}
	var err error
	if f.SaveOriginalInput, err = flagArg("save_original_input", save); err != nil {
		return f, err
	}
	if f.InputRequiresGrad, err = flagArg("input_requires_grad", inGrad); err != nil {
		return f, err
	}
	if f.WeightRequiresGrad, err = flagArg("weight_requires_grad", wGrad); err != nil {
		return f, err
	}
	return f, nil // host checks the override (it names the values)
}

// quantizerArray reads n quantizer handles from a caller's array.
func quantizerArray(name string, p **C.quant_quantizer, n int) ([]*host.Quantizer, error) {
	if p == nil {
		return nil, invalid("%s: is NULL; without a recipe give %d quantizer(s) per role", name, n)
	}
	out := make([]*host.Quantizer, n)
	for i, h := range unsafe.Slice(p, n) {
		e, err := getQuantizer(h, fmt.Sprintf("%s[%d]", name, i))
		if err != nil {
			return nil, err
		}
		out[i] = e.q
	}
	return out, nil
}

//export quant_linear_create
func quant_linear_create(config *C.capi_const_linear_config, out **C.quant_linear) C.quant_status {
	return call("quant_linear_create", func() error {
		var c C.quant_linear_config
		v1 := unsafe.Offsetof(c.grad_output_quantizers) + unsafe.Sizeof(c.grad_output_quantizers)
		if err := readStruct("config", unsafe.Pointer(config), unsafe.Pointer(&c), unsafe.Sizeof(c), v1); err != nil {
			return err
		}
		if out == nil {
			return invalid("out: is NULL")
		}
		if c.num_gemms < 0 || c.num_gemms > maxGEMMs {
			return invalid("config.num_gemms: %d (want 0 for a plain layer, 1..%d for a grouped one)", c.num_gemms, maxGEMMs)
		}
		grouped, n := c.num_gemms > 0, max(1, int(c.num_gemms))
		var l *linear.Layer
		if c.recipe != nil {
			for i, p := range []**C.quant_quantizer{c.input_quantizers, c.weight_quantizers, c.grad_output_quantizers} {
				if p != nil {
					return invalid("config.%s_quantizers: set together with config.recipe; give a recipe or explicit quantizers", linear.Tensor(i))
				}
			}
			r, err := getRecipePtr(unsafe.Pointer(c.recipe), "config.recipe")
			if err != nil {
				return err
			}
			if l, err = linear.New(r.r, goString(c.name), grouped, n); err != nil {
				return err
			}
		} else {
			if c.name != nil {
				return invalid("config.name: set without config.recipe (it names the recipe's roles)")
			}
			var qs [3][]*host.Quantizer
			for i, a := range []struct {
				name string
				p    **C.quant_quantizer
			}{{"config.input_quantizers", c.input_quantizers}, {"config.weight_quantizers", c.weight_quantizers},
				{"config.grad_output_quantizers", c.grad_output_quantizers}} {
				q, err := quantizerArray(a.name, a.p, n)
				if err != nil {
					if i == 0 && a.p == nil {
						return invalid("config.recipe: is NULL and so is config.input_quantizers; give a recipe or explicit quantizers")
					}
					return err
				}
				qs[i] = q
			}
			var err error
			if l, err = linear.NewWithQuantizers(grouped, qs[0], qs[1], qs[2]); err != nil {
				return err
			}
		}
		*out = C.capi_linear_handle(C.uintptr_t(newHandle(&linearEntry{l: l})))
		return nil
	})
}

//export quant_linear_free
func quant_linear_free(layer *C.quant_linear) C.quant_status {
	return call("quant_linear_free", func() error {
		if layer == nil {
			return nil
		}
		e, err := takeEntry[linearEntry](unsafe.Pointer(layer), "layer", "linear layer")
		if err != nil {
			return err
		}
		e.l.Release()
		return nil
	})
}

//export quant_linear_quantizer
func quant_linear_quantizer(layer *C.quant_linear, tensorType *C.capi_const_char, gemm C.int32_t, out **C.quant_quantizer) C.quant_status {
	return call("quant_linear_quantizer", func() error {
		e, err := getLinearPtr(unsafe.Pointer(layer), "layer")
		if err != nil {
			return err
		}
		if tensorType == nil {
			return invalid("tensor_type: is NULL")
		}
		if out == nil {
			return invalid("out: is NULL")
		}
		tt, err := linear.TensorOf(C.GoString(tensorType))
		if err != nil {
			return err
		}
		q, err := e.l.Quantizer(tt, int(gemm))
		if err != nil {
			return err
		}
		*out = quantizerHandle(&quantizerEntry{q: q})
		return nil
	})
}

//export quant_linear_weight_updated
func quant_linear_weight_updated(layer *C.quant_linear, gemm C.int32_t) C.quant_status {
	return call("quant_linear_weight_updated", func() error {
		e, err := getLinearPtr(unsafe.Pointer(layer), "layer")
		if err != nil {
			return err
		}
		if gemm < -1 {
			return invalid("gemm: %d (want -1 for every GEMM, or 0..%d)", gemm, e.l.NumGEMMs()-1)
		}
		return e.l.WeightUpdated(int(gemm))
	})
}

//export quant_linear_weight_get_info
func quant_linear_weight_get_info(layer *C.capi_const_linear, gemm C.int32_t, info *C.quant_qtensor_info) C.quant_status {
	return call("quant_linear_weight_get_info", func() error {
		e, err := getLinearPtr(unsafe.Pointer(layer), "layer")
		if err != nil {
			return err
		}
		if info == nil {
			return invalid("info: is NULL")
		}
		t, ok, err := e.l.Weight(int(gemm))
		if err != nil {
			return err
		}
		if !ok {
			return host.Errorf(host.ErrState, "gemm: %d has no quantized weight yet (no forward has needed it)", gemm)
		}
		return fillQTensorInfo(t, info)
	})
}

// optionalTensor reads a DLTensor that may be NULL.
func optionalTensor(name string, p unsafe.Pointer) (*host.Tensor, error) {
	if p == nil {
		return nil, nil
	}
	t, err := tensorFromDL(name, p)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// tensorArray reads n DLTensors from a caller's array.
func tensorArray(name string, p unsafe.Pointer, n int) ([]host.Tensor, error) {
	out := make([]host.Tensor, n)
	for i := range out {
		var err error
		q := unsafe.Add(p, uintptr(i)*unsafe.Sizeof(C.DLTensor{}))
		if out[i], err = indexed(name, i, func(arg string) (host.Tensor, error) { return tensorFromDL(arg, q) }); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// amaxRows reads an optional FP32 [G, 2] amax tensor (a grouped call's
// per-GEMM amaxes) as G views of 2 elements each.
func amaxRows(name string, p unsafe.Pointer, G int) ([]*host.Tensor, error) {
	t, err := optionalTensor(name, p)
	if err != nil || t == nil {
		return nil, err
	}
	if t.DType != host.Float32 || len(t.Shape) != 2 || t.Shape[0] != int64(G) || t.Shape[1] != 2 {
		return nil, invalid("%s: %s %v, want float32 [num_gemms=%d, 2] (rowwise, columnwise amax per GEMM)", name, t.DType, t.Shape, G)
	}
	if t.Ptr == nil {
		return nil, invalid("%s: data is NULL", name)
	}
	out := make([]*host.Tensor, G)
	for g := range out {
		out[g] = &host.Tensor{Ptr: t.At(int64(2 * g)), DType: host.Float32, Shape: []int64{2}, Device: t.Device}
	}
	return out, nil
}

func linearCtxHandle(c *linear.Context, grouped bool) *C.quant_linear_ctx {
	return C.capi_linear_ctx_handle(C.uintptr_t(newHandle(&linearCtxEntry{c: c, grouped: grouped})))
}

//export quant_linear_forward
func quant_linear_forward(layer *C.quant_linear, args *C.capi_const_linear_forward_args, ctx **C.quant_linear_ctx) C.quant_status {
	return call("quant_linear_forward", func() error {
		e, err := getLinearPtr(unsafe.Pointer(layer), "layer")
		if err != nil {
			return err
		}
		if e.l.Grouped() {
			return invalid("layer: a grouped layer (num_gemms %d); use quant_grouped_linear_forward", e.l.NumGEMMs())
		}
		var a C.quant_linear_forward_args
		if err := readStruct("args", unsafe.Pointer(args), unsafe.Pointer(&a), unsafe.Sizeof(a), unsafe.Offsetof(a.stream)+unsafe.Sizeof(a.stream)); err != nil {
			return err
		}
		fa := linear.ForwardArgs{Stream: uintptr(a.stream)}
		if fa.Input, err = tensorFromDL("input", unsafe.Pointer(a.input)); err != nil {
			return err
		}
		if a.weight_qtensor != nil {
			if a.weight != nil {
				return invalid("weight: set together with weight_qtensor; give the high-precision weight or the quantized one")
			}
			qe, err := getQTensorPtr(unsafe.Pointer(a.weight_qtensor), "weight_qtensor")
			if err != nil {
				return err
			}
			fa.WeightQ = []*host.QTensor{qe.t}
		} else {
			w, err := tensorFromDL("weight", unsafe.Pointer(a.weight))
			if err != nil {
				return err
			}
			fa.Weights = []host.Tensor{w}
		}
		for _, am := range []struct {
			name string
			p    *C.DLTensor
			dst  *[]*host.Tensor
		}{{"input_amax", a.input_amax, &fa.InputAmax}, {"weight_amax", a.weight_amax, &fa.WeightAmax}} {
			t, err := optionalTensor(am.name, unsafe.Pointer(am.p))
			if err != nil {
				return err
			}
			if t != nil {
				*am.dst = []*host.Tensor{t}
			}
		}
		b, err := optionalTensor("bias", unsafe.Pointer(a.bias))
		if err != nil {
			return err
		}
		if b != nil {
			fa.Biases = []host.Tensor{*b}
		}
		if fa.Output, err = tensorFromDL("output", unsafe.Pointer(a.output)); err != nil {
			return err
		}
		if fa.Flags, err = linearFlags(a.backward_override, a.save_original_input, a.input_requires_grad, a.weight_requires_grad); err != nil {
			return err
		}
		c, err := e.l.Forward(&fa, ctx != nil)
		if err != nil {
			return err
		}
		if ctx != nil {
			*ctx = linearCtxHandle(c, false)
		}
		return nil
	})
}

//export quant_grouped_linear_forward
func quant_grouped_linear_forward(layer *C.quant_linear, args *C.capi_const_grouped_linear_forward_args, ctx **C.quant_linear_ctx) C.quant_status {
	return call("quant_grouped_linear_forward", func() error {
		e, err := getLinearPtr(unsafe.Pointer(layer), "layer")
		if err != nil {
			return err
		}
		if !e.l.Grouped() {
			return invalid("layer: a plain linear layer (num_gemms 0); use quant_linear_forward")
		}
		var a C.quant_grouped_linear_forward_args
		if err := readStruct("args", unsafe.Pointer(args), unsafe.Pointer(&a), unsafe.Sizeof(a), unsafe.Offsetof(a.stream)+unsafe.Sizeof(a.stream)); err != nil {
			return err
		}
		G := e.l.NumGEMMs()
		fa := linear.ForwardArgs{Stream: uintptr(a.stream)}
		if fa.Input, err = tensorFromDL("input", unsafe.Pointer(a.input)); err != nil {
			return err
		}
		if a.m_splits == nil {
			return invalid("m_splits: is NULL (want the row count of each of the %d GEMMs)", G)
		}
		fa.MSplits = append([]int64(nil), unsafe.Slice((*int64)(unsafe.Pointer(a.m_splits)), G)...)
		switch {
		case a.weight_qtensors != nil:
			if a.weights != nil {
				return invalid("weights: set together with weight_qtensors; give the high-precision weights or the quantized ones")
			}
			fa.WeightQ = make([]*host.QTensor, G)
			for g, h := range unsafe.Slice(a.weight_qtensors, G) {
				qe, err := getQTensorPtr(unsafe.Pointer(h), fmt.Sprintf("weight_qtensors[%d]", g))
				if err != nil {
					return err
				}
				fa.WeightQ[g] = qe.t
			}
		case a.weights == nil:
			return invalid("weights: is NULL (want %d weights, or weight_qtensors)", G)
		default:
			if fa.Weights, err = tensorArray("weights", unsafe.Pointer(a.weights), G); err != nil {
				return err
			}
		}
		if fa.InputAmax, err = amaxRows("input_amaxes", unsafe.Pointer(a.input_amaxes), G); err != nil {
			return err
		}
		if fa.WeightAmax, err = amaxRows("weight_amaxes", unsafe.Pointer(a.weight_amaxes), G); err != nil {
			return err
		}
		if a.biases != nil {
			if fa.Biases, err = tensorArray("biases", unsafe.Pointer(a.biases), G); err != nil {
				return err
			}
		}
		if fa.Output, err = tensorFromDL("output", unsafe.Pointer(a.output)); err != nil {
			return err
		}
		if fa.Flags, err = linearFlags(a.backward_override, a.save_original_input, a.input_requires_grad, a.weight_requires_grad); err != nil {
			return err
		}
		c, err := e.l.Forward(&fa, ctx != nil)
		if err != nil {
			return err
		}
		if ctx != nil {
			*ctx = linearCtxHandle(c, true)
		}
		return nil
	})
}

//export quant_linear_backward
func quant_linear_backward(ctx *C.quant_linear_ctx, args *C.capi_const_linear_backward_args) C.quant_status {
	return call("quant_linear_backward", func() error {
		e, err := getLinearCtxPtr(unsafe.Pointer(ctx), "ctx")
		if err != nil {
			return err
		}
		if e.grouped {
			return invalid("ctx: from a grouped layer; use quant_grouped_linear_backward")
		}
		var a C.quant_linear_backward_args
		if err := readStruct("args", unsafe.Pointer(args), unsafe.Pointer(&a), unsafe.Sizeof(a), unsafe.Offsetof(a.stream)+unsafe.Sizeof(a.stream)); err != nil {
			return err
		}
		ba := linear.BackwardArgs{Stream: uintptr(a.stream)}
		if ba.GradOutput, err = tensorFromDL("grad_output", unsafe.Pointer(a.grad_output)); err != nil {
			return err
		}
		if ba.GradInput, err = optionalTensor("grad_input", unsafe.Pointer(a.grad_input)); err != nil {
			return err
		}
		dw, err := optionalTensor("grad_weight", unsafe.Pointer(a.grad_weight))
		if err != nil {
			return err
		}
		if dw != nil {
			ba.GradWeights = []host.Tensor{*dw}
		}
		db, err := optionalTensor("grad_bias", unsafe.Pointer(a.grad_bias))
		if err != nil {
			return err
		}
		if db != nil {
			ba.GradBiases = []host.Tensor{*db}
		}
		gam, err := optionalTensor("grad_output_amax", unsafe.Pointer(a.grad_output_amax))
		if err != nil {
			return err
		}
		if gam != nil {
			ba.GradOutputAmax = []*host.Tensor{gam}
		}
		return e.c.Backward(&ba)
	})
}

//export quant_grouped_linear_backward
func quant_grouped_linear_backward(ctx *C.quant_linear_ctx, args *C.capi_const_grouped_linear_backward_args) C.quant_status {
	return call("quant_grouped_linear_backward", func() error {
		e, err := getLinearCtxPtr(unsafe.Pointer(ctx), "ctx")
		if err != nil {
			return err
		}
		if !e.grouped {
			return invalid("ctx: from a plain linear layer; use quant_linear_backward")
		}
		var a C.quant_grouped_linear_backward_args
		if err := readStruct("args", unsafe.Pointer(args), unsafe.Pointer(&a), unsafe.Sizeof(a), unsafe.Offsetof(a.stream)+unsafe.Sizeof(a.stream)); err != nil {
			return err
		}
		G := e.c.Info().NumGEMMs
		ba := linear.BackwardArgs{Stream: uintptr(a.stream)}
		if ba.GradOutput, err = tensorFromDL("grad_output", unsafe.Pointer(a.grad_output)); err != nil {
			return err
		}
		if ba.GradInput, err = optionalTensor("grad_input", unsafe.Pointer(a.grad_input)); err != nil {
			return err
		}
		if a.grad_weights != nil {
			if ba.GradWeights, err = tensorArray("grad_weights", unsafe.Pointer(a.grad_weights), G); err != nil {
				return err
			}
		}
		if a.grad_biases != nil {
			if ba.GradBiases, err = tensorArray("grad_biases", unsafe.Pointer(a.grad_biases), G); err != nil {
				return err
			}
		}
		if ba.GradOutputAmax, err = amaxRows("grad_output_amaxes", unsafe.Pointer(a.grad_output_amaxes), G); err != nil {
			return err
		}
		return e.c.Backward(&ba)
	})
}

func boolInt(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}

//export quant_linear_ctx_get_info
func quant_linear_ctx_get_info(ctx *C.capi_const_linear_ctx, info *C.quant_linear_ctx_info) C.quant_status {
	return call("quant_linear_ctx_get_info", func() error {
		e, err := getLinearCtxPtr(unsafe.Pointer(ctx), "ctx")
		if err != nil {
			return err
		}
		if info == nil {
			return invalid("info: is NULL")
		}
		size := uintptr(info.struct_size)
		if size < unsafe.Sizeof(info.struct_size) || size > 1<<16 {
			return invalid("info: struct_size %d is invalid (set it to sizeof(quant_linear_ctx_info))", size)
		}
		h := e.c.Info()
		v := C.quant_linear_ctx_info{
			struct_size:          info.struct_size,
			used:                 boolInt(h.Used),
			backward_override:    C.int32_t(h.Flags.BackwardOverride),
			save_original_input:  boolInt(h.Flags.SaveOriginalInput),
			input_requires_grad:  boolInt(h.Flags.InputRequiresGrad),
			weight_requires_grad: boolInt(h.Flags.WeightRequiresGrad),
			input_saved:          C.int32_t(h.InputSaved),
			input_usage:          C.uint32_t(h.InputUsage),
			weight_saved:         C.int32_t(h.WeightSaved),
			weight_usage:         C.uint32_t(h.WeightUsage),
			input_bytes:          C.uint64_t(h.InputBytes),
			weight_bytes:         C.uint64_t(h.WeightBytes),
			owned_bytes:          C.uint64_t(h.OwnedBytes),
		}
		if h.Grouped {
			v.num_gemms = C.int32_t(h.NumGEMMs)
		}
		n := min(size, unsafe.Sizeof(v))
		copy(unsafe.Slice((*byte)(unsafe.Pointer(info)), n), unsafe.Slice((*byte)(unsafe.Pointer(&v)), n))
		return nil
	})
}

//export quant_linear_ctx_free
func quant_linear_ctx_free(ctx *C.quant_linear_ctx) C.quant_status {
	return call("quant_linear_ctx_free", func() error {
		if ctx == nil {
			return nil
		}
		e, err := takeEntry[linearCtxEntry](unsafe.Pointer(ctx), "ctx", "linear context")
		if err != nil {
			return err
		}
		e.c.Release()
		return nil
	})
}

//export quant_linear_scaling_amaxes
func quant_linear_scaling_amaxes(layer *C.capi_const_linear, pass C.int32_t, amaxes *C.float, capacity C.size_t, count *C.size_t) C.quant_status {
	return call("quant_linear_scaling_amaxes", func() error {
		e, err := getLinearPtr(unsafe.Pointer(layer), "layer")
		if err != nil {
			return err
		}
		if err := countArg(count); err != nil {
			return err
		}
		a, err := e.l.ScalingAmaxes(linear.Pass(pass))
		if err != nil {
			return err
		}
		out, err := outputArray(amaxes, capacity, count, len(a), "pass", "delayed-scaling states")
		if err != nil {
			return err
		}
		for i := range out {
			out[i] = C.float(a[i])
		}
		return nil
	})
}

//export quant_linear_update_scaling
func quant_linear_update_scaling(layer *C.quant_linear, pass C.int32_t, reduced *C.capi_const_float, count C.size_t) C.quant_status {
	return call("quant_linear_update_scaling", func() error {
		e, err := getLinearPtr(unsafe.Pointer(layer), "layer")
		if err != nil {
			return err
		}
		var r []float32
		switch {
		case reduced == nil && count != 0:
			return invalid("reduced_amaxes: is NULL with count %d", count)
		case count > 3*maxGEMMs*2:
			return invalid("count: %d is more amaxes than any layer has", count)
		case reduced != nil:
			r = append(make([]float32, 0, int(count)), unsafe.Slice((*float32)(unsafe.Pointer(reduced)), int(count))...)
		}
		return e.l.UpdateScaling(linear.Pass(pass), r)
	})
}
