package host

/*
#include <stdlib.h>
#include "quant_plugin.h"
*/
import "C"

import (
	"unsafe"
)

func setStream(dst *unsafe.Pointer, stream uintptr) {
	*(*uintptr)(unsafe.Pointer(dst)) = stream
}

// withParams allocates an argument block of size followed by a parameter block
// filled from p, which the args' params field must point at.
func withParams(size C.size_t, p Params) (callArgs, *C.quant_plugin_params, error) {
	ca, err := newCallArgs(size + C.sizeof_quant_plugin_params)
	if err != nil {
		return ca, nil, err
	}
	cp := (*C.quant_plugin_params)(unsafe.Add(ca.args, uintptr(size)))
	if err := paramsToC(p, cp); err != nil {
		ca.free()
		return ca, nil, err
	}
	return ca, cp, nil
}

// nativeFormat is a format a plugin defines.
type nativeFormat struct {
	plugin *nativePlugin
	f      *C.quant_plugin_format
	name   string
}

func (f *nativeFormat) Name() string { return f.name }

func (f *nativeFormat) NewSpec(p Params) (Spec, error) {
	if f.f.check != nil {
		ca, cp, err := withParams(C.sizeof_quant_plugin_check_args, p)
		if err != nil {
			return nil, err
		}
		defer ca.free()
		a := (*C.quant_plugin_check_args)(ca.args)
		a.struct_size = C.uint32_t(C.sizeof_quant_plugin_check_args)
		a.params = cp
		if err := ca.invoke(f.plugin.info.Name, unsafe.Pointer(f.f.check), "check of format "+f.name); err != nil {
			return nil, err
		}
		if p, err = paramsFromC(cp); err != nil {
			return nil, err
		}
		p.Format = f.name
	}
	return &nativeSpec{f: f, p: p}, nil
}

type nativeSpec struct {
	f *nativeFormat
	p Params
}

func (s *nativeSpec) Params() Params { return s.p }

func (s *nativeSpec) Layout(m, k int64, dir Direction) ([]BufferSpec, error) {
	ca, cp, err := withParams(C.sizeof_quant_plugin_layout_args, s.p)
	if err != nil {
		return nil, err
	}
	defer ca.free()
	a := (*C.quant_plugin_layout_args)(ca.args)
	a.struct_size = C.uint32_t(C.sizeof_quant_plugin_layout_args)
	a.direction = C.uint32_t(dir.Usage())
	a.params = cp
	a.m, a.k = C.int64_t(m), C.int64_t(k)
	name := s.f.plugin.info.Name
	if err := ca.invoke(name, unsafe.Pointer(s.f.f.layout), "layout of format "+s.f.name); err != nil {
		return nil, err
	}
	n := int(a.num_buffers)
	if n < 1 || n > C.QUANT_PLUGIN_MAX_BUFFERS {
		return nil, Errorf(ErrPlugin, "plugin %s: layout of format %s: num_buffers %d not in 1..%d", name, s.f.name, n, C.QUANT_PLUGIN_MAX_BUFFERS)
	}
	out := make([]BufferSpec, n)
	for i := range out {
		b := &a.buffers[i]
		dt, ok := dtypeFromDLPlugin(b.dtype)
		if !ok || dt.Size() == 0 {
			return nil, Errorf(ErrPlugin, "plugin %s: layout of format %s: buffers[%d] has DLPack dtype (code %d, bits %d), which libquant does not know", name, s.f.name, i, b.dtype.code, b.dtype.bits)
		}
		nd := int(b.ndim)
		if nd < 1 || nd > C.QUANT_PLUGIN_MAX_DIMS {
			return nil, Errorf(ErrPlugin, "plugin %s: layout of format %s: buffers[%d] has rank %d", name, s.f.name, i, nd)
		}
		shape := make([]int64, nd)
		for j := range shape {
			shape[j] = int64(b.shape[j])
		}
		if err := CheckShape("plugin layout", shape, dt.Size()); err != nil {
			return nil, Errorf(ErrPlugin, "plugin %s: layout of format %s: buffers[%d]: %v", name, s.f.name, i, err)
		}
		kind := BufferKind(b.kind)
		if kind != BufData && kind != BufScaleInv && kind != BufAmax {
			return nil, Errorf(ErrPlugin, "plugin %s: layout of format %s: buffers[%d] has kind %d", name, s.f.name, i, b.kind)
		}
		out[i] = BufferSpec{Kind: kind, DType: dt, Shape: shape}
	}
	return out, nil
}

func (s *nativeSpec) Derivable(from, to Direction) bool {
	bits := uint32(s.f.f.derivable)
	if from == DirRowwise && to == DirColumnwise {
		return bits&C.QUANT_PLUGIN_DERIVE_COLUMNWISE_FROM_ROWWISE != 0
	}
	if from == DirColumnwise && to == DirRowwise {
		return bits&C.QUANT_PLUGIN_DERIVE_ROWWISE_FROM_COLUMNWISE != 0
	}
	return false
}

func (s *nativeSpec) NewState() (State, error) { return nil, nil }

// nativeKernels adapts a plugin's kernel set to Kernels.
type nativeKernels struct {
	plugin *nativePlugin
	k      *C.quant_plugin_kernels
}

func (n *nativeKernels) what(op string, p Params) string {
	return op + " of " + p.Format + " on " + DeviceType(n.k.device_type).String()
}

func (n *nativeKernels) Amax(r *AmaxRequest) error {
	ca, cp, err := withParams(C.sizeof_quant_plugin_amax_args, r.Spec.Params())
	if err != nil {
		return err
	}
	defer ca.free()
	a := (*C.quant_plugin_amax_args)(ca.args)
	a.struct_size = C.uint32_t(C.sizeof_quant_plugin_amax_args)
	a.want = C.uint32_t(r.Want)
	a.params = cp
	if err := tensorToC(r.Input, []int64{r.M, r.K}, &a.input); err != nil {
		return err
	}
	if err := tensorToC(r.Out, nil, &a.out); err != nil {
		return err
	}
	setStream(&a.stream, r.Stream)
	return ca.invoke(n.plugin.info.Name, unsafe.Pointer(n.k.amax), n.what("amax", r.Spec.Params()))
}

func (n *nativeKernels) Quantize(r *QuantizeRequest) error {
	ca, cp, err := withParams(C.sizeof_quant_plugin_quantize_args, r.Spec.Params())
	if err != nil {
		return err
	}
	defer ca.free()
	a := (*C.quant_plugin_quantize_args)(ca.args)
	a.struct_size = C.uint32_t(C.sizeof_quant_plugin_quantize_args)
	a.params = cp
	if err := tensorToC(r.Input, []int64{r.M, r.K}, &a.input); err != nil {
		return err
	}
	for d, st := range r.Out {
		if err := storageToC(st, &a.out[d]); err != nil {
			return err
		}
	}
	if r.AmaxIn != nil {
		if err := tensorToC(*r.AmaxIn, nil, &a.amax_in); err != nil {
			return err
		}
	}
	delayed, isDelayed := r.State.(DelayedCast)
	if isDelayed {
		a.has_delayed_scale = 1
		a.delayed_scale = C.float(delayed.CastScale())
	}
	setStream(&a.stream, r.Stream)
	if err := ca.invoke(n.plugin.info.Name, unsafe.Pointer(n.k.quantize), n.what("quantize", r.Spec.Params())); err != nil {
		return err
	}
	if isDelayed {
		return stageAmax(r, delayed)
	}
	return nil
}

// stageAmax reads the amax the kernel wrote and stages it into the delayed
// state's history. The history lives in CPU memory, so a device quantize waits
// here for its stream (spec §2.3 does this with an atomic on the device).
func stageAmax(r *QuantizeRequest, d DelayedCast) error {
	for _, st := range r.Out {
		if st == nil {
			continue
		}
		b, ok := st.Buffer(BufAmax)
		if !ok {
			continue
		}
		var v [1]float32
		if b.Tensor.Device.Type == CPU {
			v[0] = b.Tensor.Float32s()[0]
		} else {
			tmp, err := AllocTensor(Device{Type: CPU}, Float32, []int64{1}, 0)
			if err != nil {
				return err
			}
			defer FreeTensor(tmp, 0)
			if err := CopyTensor(tmp, Tensor{Ptr: b.Tensor.Ptr, DType: Float32, Shape: []int64{1}, Device: b.Tensor.Device}, r.Stream); err != nil {
				return err
			}
			if err := Synchronize(b.Tensor.Device, r.Stream); err != nil {
				return err
			}
			v[0] = tmp.Float32s()[0]
		}
		d.RecordAmax(v[0])
		return nil
	}
	return Errorf(ErrPlugin, "delayed scaling: the quantized storage has no amax buffer to stage")
}

func (n *nativeKernels) Dequantize(r *DequantizeRequest) error {
	ca, cp, err := withParams(C.sizeof_quant_plugin_dequantize_args, r.Spec.Params())
	if err != nil {
		return err
	}
	defer ca.free()
	a := (*C.quant_plugin_dequantize_args)(ca.args)
	a.struct_size = C.uint32_t(C.sizeof_quant_plugin_dequantize_args)
	a.direction = C.uint32_t(r.Dir.Usage())
	a.params = cp
	if err := storageToC(r.Storage, &a.storage); err != nil {
		return err
	}
	a.m, a.k = C.int64_t(r.M), C.int64_t(r.K)
	if err := tensorToC(r.Out, []int64{r.M, r.K}, &a.out); err != nil {
		return err
	}
	setStream(&a.stream, r.Stream)
	return ca.invoke(n.plugin.info.Name, unsafe.Pointer(n.k.dequantize), n.what("dequantize", r.Spec.Params()))
}

func (n *nativeKernels) Derive(r *DeriveRequest) error {
	ca, cp, err := withParams(C.sizeof_quant_plugin_derive_args, r.Spec.Params())
	if err != nil {
		return err
	}
	defer ca.free()
	a := (*C.quant_plugin_derive_args)(ca.args)
	a.struct_size = C.uint32_t(C.sizeof_quant_plugin_derive_args)
	a.from_direction = C.uint32_t(r.FromDir.Usage())
	a.to_direction = C.uint32_t(r.ToDir.Usage())
	a.params = cp
	if err := storageToC(r.From, &a.from); err != nil {
		return err
	}
	if err := storageToC(r.To, &a.to); err != nil {
		return err
	}
	a.m, a.k = C.int64_t(r.M), C.int64_t(r.K)
	setStream(&a.stream, r.Stream)
	return ca.invoke(n.plugin.info.Name, unsafe.Pointer(n.k.derive), n.what("derive", r.Spec.Params()))
}

// nativeSwizzlingKernels are the kernel sets that also convert scale layouts.
type nativeSwizzlingKernels struct{ nativeKernels }

// SwizzleScales runs on the default stream: ScaleSwizzler takes none.
func (n *nativeSwizzlingKernels) SwizzleScales(st *Storage, dir Direction, m, k int64, swizzled bool) error {
	ca, cp, err := withParams(C.sizeof_quant_plugin_swizzle_args, st.Spec.Params())
	if err != nil {
		return err
	}
	defer ca.free()
	a := (*C.quant_plugin_swizzle_args)(ca.args)
	a.struct_size = C.uint32_t(C.sizeof_quant_plugin_swizzle_args)
	a.direction = C.uint32_t(dir.Usage())
	a.swizzled = cBool(swizzled)
	a.params = cp
	if err := storageToC(st, &a.storage); err != nil {
		return err
	}
	a.m, a.k = C.int64_t(m), C.int64_t(k)
	return ca.invoke(n.plugin.info.Name, unsafe.Pointer(n.k.swizzle_scales), n.what("scale swizzle", st.Spec.Params()))
}

// nativeMemory is a plugin's memory table for one device type.
type nativeMemory struct {
	plugin *nativePlugin
	m      *C.quant_plugin_memory
}

func (n *nativeMemory) call(fn C.quant_plugin_memory_fn, what string, fill func(a *C.quant_plugin_memory_args)) (*C.quant_plugin_memory_args, callArgs, error) {
	ca, err := newCallArgs(C.sizeof_quant_plugin_memory_args)
	if err != nil {
		return nil, ca, err
	}
	a := (*C.quant_plugin_memory_args)(ca.args)
	a.struct_size = C.uint32_t(C.sizeof_quant_plugin_memory_args)
	fill(a)
	err = ca.invoke(n.plugin.info.Name, unsafe.Pointer(fn), what)
	return a, ca, err
}

func (n *nativeMemory) Alloc(dev Device, size int64, stream uintptr) (unsafe.Pointer, error) {
	a, ca, err := n.call(n.m.alloc, "alloc", func(a *C.quant_plugin_memory_args) {
		a.device_id = C.int32_t(dev.ID)
		a.nbytes = C.uint64_t(size)
		setStream(&a.stream, stream)
	})
	defer ca.free()
	if err != nil {
		return nil, err
	}
	return a.ptr, nil
}

func (n *nativeMemory) Free(dev Device, p unsafe.Pointer, stream uintptr) {
	_, ca, _ := n.call(n.m.free, "free", func(a *C.quant_plugin_memory_args) {
		a.device_id = C.int32_t(dev.ID)
		a.ptr = p
		setStream(&a.stream, stream)
	})
	ca.free()
}

func (n *nativeMemory) Copy(dst, src Tensor, stream uintptr) error {
	kind := C.QUANT_PLUGIN_COPY_DEVICE_TO_DEVICE
	dev := dst.Device
	switch {
	case src.Device.Type == CPU:
		kind = C.QUANT_PLUGIN_COPY_HOST_TO_DEVICE
	case dst.Device.Type == CPU:
		kind = C.QUANT_PLUGIN_COPY_DEVICE_TO_HOST
		dev = src.Device
	}
	_, ca, err := n.call(n.m.copy, "copy", func(a *C.quant_plugin_memory_args) {
		a.device_id = C.int32_t(dev.ID)
		a.ptr = dst.Ptr
		a.src = src.Ptr
		a.nbytes = C.uint64_t(dst.Bytes())
		a.copy_kind = C.int32_t(kind)
		setStream(&a.stream, stream)
	})
	ca.free()
	return err
}

func (n *nativeMemory) Memset(t Tensor, value byte, stream uintptr) error {
	_, ca, err := n.call(n.m.memset, "memset", func(a *C.quant_plugin_memory_args) {
		a.device_id = C.int32_t(t.Device.ID)
		a.ptr = t.Ptr
		a.nbytes = C.uint64_t(t.Bytes())
		a.value = C.int32_t(value)
		setStream(&a.stream, stream)
	})
	ca.free()
	return err
}

func (n *nativeMemory) Synchronize(dev Device, stream uintptr) error {
	_, ca, err := n.call(n.m.synchronize, "synchronize", func(a *C.quant_plugin_memory_args) {
		a.device_id = C.int32_t(dev.ID)
		setStream(&a.stream, stream)
	})
	ca.free()
	return err
}

func (n *nativeMemory) DeviceCount() (int, error) {
	ca, err := newCallArgs(4)
	if err != nil {
		return 0, err
	}
	defer ca.free()
	if err := ca.invoke(n.plugin.info.Name, unsafe.Pointer(n.m.device_count), "device_count"); err != nil {
		return 0, err
	}
	return int(*(*int32)(ca.args)), nil
}
