package native

/*
#include <stdlib.h>
#include "quant_plugin.h"
*/
import "C"

import (
	"unsafe"

	"libquant/host"
)

func setStream(dst *unsafe.Pointer, stream uintptr) {
	*(*uintptr)(unsafe.Pointer(dst)) = stream
}

// withParams allocates an argument block of size followed by a parameter block
// filled from p, which the args' params field must point at.
func withParams(size C.size_t, p *host.Params) (callArgs, *C.quant_plugin_params, error) {
	ca, err := newCallArgs(size + C.sizeof_quant_plugin_params)
	if err != nil {
		return ca, nil, err
	}
	cp, err := paramsAfter(ca, size, p)
	if err != nil {
		ca.free()
		return ca, nil, err
	}
	return ca, cp, nil
}

// paramsAfter fills the parameter block that follows size bytes of ca's args.
func paramsAfter(ca callArgs, size C.size_t, p *host.Params) (*C.quant_plugin_params, error) {
	cp := (*C.quant_plugin_params)(unsafe.Add(ca.args, uintptr(size)))
	return cp, paramsToC(p, cp)
}

// format is a format a plugin defines.
type format struct {
	plugin *plugin
	f      *C.quant_plugin_format
	name   string
}

func (f *format) Name() string { return f.name }

func (f *format) NewSpec(p host.Params) (host.Spec, error) {
	if f.f.check != nil {
		ca, cp, err := withParams(C.sizeof_quant_plugin_check_args, &p)
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
	return &spec{f: f, p: p}, nil
}

type spec struct {
	f *format
	p host.Params
}

func (s *spec) Params() host.Params { return s.p }

func (s *spec) Layout(m, k int64, dir host.Direction) ([]host.BufferSpec, error) {
	ca, cp, err := withParams(C.sizeof_quant_plugin_layout_args, &s.p)
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
		return nil, host.Errorf(host.ErrPlugin, "plugin %s: layout of format %s: num_buffers %d not in 1..%d", name, s.f.name, n, C.QUANT_PLUGIN_MAX_BUFFERS)
	}
	out := make([]host.BufferSpec, n)
	for i := range out {
		b := &a.buffers[i]
		dt, ok := dtypeFromDLPlugin(b.dtype)
		if !ok || dt.Size() == 0 {
			return nil, host.Errorf(host.ErrPlugin, "plugin %s: layout of format %s: buffers[%d] has DLPack dtype (code %d, bits %d), which libquant does not know", name, s.f.name, i, b.dtype.code, b.dtype.bits)
		}
		nd := int(b.ndim)
		if nd < 1 || nd > C.QUANT_PLUGIN_MAX_DIMS {
			return nil, host.Errorf(host.ErrPlugin, "plugin %s: layout of format %s: buffers[%d] has rank %d", name, s.f.name, i, nd)
		}
		shape := make([]int64, nd)
		for j := range shape {
			shape[j] = int64(b.shape[j])
		}
		if err := host.CheckShape("plugin layout", shape, dt.Size()); err != nil {
			return nil, host.Errorf(host.ErrPlugin, "plugin %s: layout of format %s: buffers[%d]: %v", name, s.f.name, i, err)
		}
		kind := host.BufferKind(b.kind)
		if kind != host.BufData && kind != host.BufScaleInv && kind != host.BufAmax {
			return nil, host.Errorf(host.ErrPlugin, "plugin %s: layout of format %s: buffers[%d] has kind %d", name, s.f.name, i, b.kind)
		}
		out[i] = host.BufferSpec{Kind: kind, DType: dt, Shape: shape}
	}
	return out, nil
}

func (s *spec) Derivable(from, to host.Direction) bool {
	bits := uint32(s.f.f.derivable)
	if from == host.DirRowwise && to == host.DirColumnwise {
		return bits&C.QUANT_PLUGIN_DERIVE_COLUMNWISE_FROM_ROWWISE != 0
	}
	if from == host.DirColumnwise && to == host.DirRowwise {
		return bits&C.QUANT_PLUGIN_DERIVE_ROWWISE_FROM_COLUMNWISE != 0
	}
	return false
}

func (s *spec) NewState() (host.State, error) { return nil, nil }

// kernels adapts a plugin's kernel set to Kernels.
type kernels struct {
	plugin *plugin
	k      *C.quant_plugin_kernels
}

func (n *kernels) what(name string, p *host.Params) op {
	return op{what: name, format: p.Format, device: host.DeviceType(n.k.device_type)}
}

func (n *kernels) Amax(r *host.AmaxRequest) error {
	p := r.Spec.Params()
	ca, cp, err := withParams(C.sizeof_quant_plugin_amax_args, &p)
	if err != nil {
		return err
	}
	defer ca.free()
	a := (*C.quant_plugin_amax_args)(ca.args)
	a.struct_size = C.uint32_t(C.sizeof_quant_plugin_amax_args)
	a.want = C.uint32_t(r.Want)
	a.params = cp
	if err := tensor2DToC(r.Input, r.M, r.K, &a.input); err != nil {
		return err
	}
	if err := tensorToC(r.Out, &a.out); err != nil {
		return err
	}
	setStream(&a.stream, r.Stream)
	return ca.invokeOp(n.plugin.info.Name, unsafe.Pointer(n.k.amax), n.what("amax", &p))
}

func (n *kernels) Quantize(r *host.QuantizeRequest) error {
	if rhtLoan(r) > 0 && n.k.quantize_grouped != nil && r.AmaxIn == nil {
		// The scratch a capture's allocator must lend goes through the grouped
		// call (quant_plugin_quantize_grouped_args.workspace): a group of one
		// (which takes no caller's amax: with one, the plugin allocates).
		if handled, err := n.QuantizeGrouped([]host.QuantizeRequest{*r}); handled {
			return err
		}
	}
	p := r.Spec.Params()
	ca, cp, err := withParams(C.sizeof_quant_plugin_quantize_args, &p)
	if err != nil {
		return err
	}
	defer ca.free()
	a := (*C.quant_plugin_quantize_args)(ca.args)
	staged, err := n.fillQuantize(a, cp, r)
	if err != nil {
		return err
	}
	if err := ca.invokeOp(n.plugin.info.Name, unsafe.Pointer(n.k.quantize), n.what("quantize", &p)); err != nil {
		return err
	}
	if staged != nil {
		return stageAmax(r, staged)
	}
	return nil
}

// fillQuantize writes r into a quantize argument block; staged is the
// delayed-scaling state whose amax the host must stage after the call (one
// that stays in C memory), else nil.
func (n *kernels) fillQuantize(a *C.quant_plugin_quantize_args, cp *C.quant_plugin_params, r *host.QuantizeRequest) (staged host.DelayedCast, err error) {
	a.struct_size = C.uint32_t(C.sizeof_quant_plugin_quantize_args)
	a.params = cp
	if err := tensor2DToC(r.Input, r.M, r.K, &a.input); err != nil {
		return nil, err
	}
	for d, st := range r.Out {
		if err := storageToC(st, &a.out[d]); err != nil {
			return nil, err
		}
	}
	if r.AmaxIn != nil {
		if err := tensorToC(*r.AmaxIn, &a.amax_in); err != nil {
			return nil, err
		}
	}
	if delayed, ok := r.State.(host.DelayedCast); ok {
		a.has_delayed_scale = 1
		// A state the device can update stays in device memory: the kernel reads
		// the scale and reduces the amax there, and nothing waits for the stream.
		if ds, ok := r.State.(host.DeviceDelayedState); ok && n.k.delayed_update != nil && r.Input.Device.Type != host.CPU {
			scale, hist, err := ds.DeviceBuffers(r.Input.Device, r.Stream)
			if err != nil {
				return nil, err
			}
			a.delayed_scale_dev = (*C.float)(scale.Ptr)
			a.delayed_amax_dev = (*C.float)(hist.Ptr)
		} else {
			a.delayed_scale = C.float(delayed.CastScale())
			staged = delayed
		}
	}
	setStream(&a.stream, r.Stream)
	return staged, nil
}

// rhtLoan is the scratch the host lends a quantize of r
// (quant_plugin_rht_workspace): the room for the RHT's transformed input of a
// columnwise copy on a device while the caller's allocator holds every device
// buffer (a CUDA graph capture's pool), so that the plugin allocates nothing
// itself; else 0.
func rhtLoan(r *host.QuantizeRequest) int64 {
	if r.Input.Device.Type == host.CPU || r.Out[host.DirColumnwise] == nil || r.Spec.Params().RHT == host.RHTOff ||
		!host.HasCallerAllocator(r.Input.Device.Type) {
		return 0
	}
	return int64(C.quant_plugin_rht_workspace(C.int64_t(r.M), C.int64_t(r.K)))
}

// QuantizeGrouped hands the plugin every request in one call
// (host.GroupedKernels); handled is false when the plugin has no grouped
// quantize for this format or the state must be staged on the host.
func (n *kernels) QuantizeGrouped(rs []host.QuantizeRequest) (bool, error) {
	if n.k.quantize_grouped == nil || len(rs) == 0 {
		return false, nil
	}
	if _, ok := rs[0].State.(host.DelayedCast); ok {
		if _, dev := rs[0].State.(host.DeviceDelayedState); !dev || n.k.delayed_update == nil {
			return false, nil
		}
	}
	p := rs[0].Spec.Params()
	itemSize := C.size_t(C.sizeof_quant_plugin_quantize_args)
	head := C.size_t(C.sizeof_quant_plugin_quantize_grouped_args)
	head = (head + 15) &^ 15
	ca, cp, err := withParams(head+itemSize*C.size_t(len(rs)), &p)
	if err != nil {
		return true, err
	}
	defer ca.free()
	g := (*C.quant_plugin_quantize_grouped_args)(ca.args)
	g.struct_size = C.uint32_t(C.sizeof_quant_plugin_quantize_grouped_args)
	g.count = C.uint32_t(len(rs))
	items := unsafe.Slice((*C.quant_plugin_quantize_args)(unsafe.Add(ca.args, uintptr(head))), len(rs))
	g.items = &items[0]
	for i := range rs {
		staged, err := n.fillQuantize(&items[i], cp, &rs[i])
		if err != nil {
			return true, err
		}
		if staged != nil {
			return true, host.Errorf(host.ErrPlugin, "grouped quantize: item %d needs its amax staged on the host", i)
		}
	}
	setStream(&g.stream, rs[0].Stream)
	var loan int64
	for i := range rs {
		loan += rhtLoan(&rs[i])
	}
	if loan > 0 {
		ws, err := host.AllocTensor(rs[0].Input.Device, host.Uint8, []int64{loan}, rs[0].Stream)
		if err != nil {
			return true, err
		}
		defer host.FreeTensor(ws, rs[0].Stream)
		if err := tensorToC(ws, &g.workspace); err != nil {
			return true, err
		}
	}
	return true, ca.invokeOp(n.plugin.info.Name, unsafe.Pointer(n.k.quantize_grouped), n.what("grouped quantize", &p))
}

// DelayedUpdate runs the spec §2.4 update on a state in device memory
// (host.DelayedUpdater).
func (n *kernels) DelayedUpdate(r *host.DelayedUpdateRequest) error {
	p := r.Spec.Params()
	if n.k.delayed_update == nil {
		return host.Errorf(host.ErrUnsupported, "plugin %s: provides no delayed-scaling update of %s on %s", n.plugin.info.Name, p.Format, host.DeviceType(n.k.device_type))
	}
	ca, cp, err := withParams(C.sizeof_quant_plugin_delayed_update_args, &p)
	if err != nil {
		return err
	}
	defer ca.free()
	if err := fillUpdate((*C.quant_plugin_delayed_update_args)(ca.args), cp, r); err != nil {
		return err
	}
	return ca.invokeOp(n.plugin.info.Name, unsafe.Pointer(n.k.delayed_update), n.what("delayed-scaling update", &p))
}

func fillUpdate(a *C.quant_plugin_delayed_update_args, cp *C.quant_plugin_params, r *host.DelayedUpdateRequest) error {
	a.struct_size = C.uint32_t(C.sizeof_quant_plugin_delayed_update_args)
	a.params = cp
	if err := tensorToC(r.Scale, &a.scale); err != nil {
		return err
	}
	if err := tensorToC(r.History, &a.history); err != nil {
		return err
	}
	if r.Reduced != nil {
		a.has_reduced = 1
		a.reduced_amax = C.float(*r.Reduced)
	}
	a.scaled_max = C.float(r.ScaledMax)
	setStream(&a.stream, r.Stream)
	return nil
}

// DelayedUpdateGrouped hands the plugin every update in one call
// (host.DelayedGroupUpdater); handled is false when the plugin has no
// grouped update for this format. The items follow the group's header, each
// item's params after the items.
func (n *kernels) DelayedUpdateGrouped(rs []host.DelayedUpdateRequest) (bool, error) {
	if n.k.delayed_update_grouped == nil || len(rs) == 0 {
		return false, nil
	}
	head := (C.size_t(C.sizeof_quant_plugin_delayed_update_grouped_args) + 15) &^ 15
	items := C.size_t(C.sizeof_quant_plugin_delayed_update_args) * C.size_t(len(rs))
	items = (items + 15) &^ 15
	ca, err := newCallArgs(head + items + C.size_t(C.sizeof_quant_plugin_params)*C.size_t(len(rs)))
	if err != nil {
		return true, err
	}
	defer ca.free()
	g := (*C.quant_plugin_delayed_update_grouped_args)(ca.args)
	g.struct_size = C.uint32_t(C.sizeof_quant_plugin_delayed_update_grouped_args)
	g.count = C.uint32_t(len(rs))
	its := unsafe.Slice((*C.quant_plugin_delayed_update_args)(unsafe.Add(ca.args, uintptr(head))), len(rs))
	ps := unsafe.Slice((*C.quant_plugin_params)(unsafe.Add(ca.args, uintptr(head+items))), len(rs))
	g.items = &its[0]
	for i := range rs {
		p := rs[i].Spec.Params()
		if err := paramsToC(&p, &ps[i]); err != nil {
			return true, err
		}
		if err := fillUpdate(&its[i], &ps[i], &rs[i]); err != nil {
			return true, err
		}
	}
	setStream(&g.stream, rs[0].Stream)
	p := rs[0].Spec.Params()
	return true, ca.invokeOp(n.plugin.info.Name, unsafe.Pointer(n.k.delayed_update_grouped), n.what("grouped delayed-scaling update", &p))
}

// stageAmax reads the amax the kernel wrote and stages it into the delayed
// state's history. The history lives in CPU memory, so a device quantize waits
// here for its stream (spec §2.3 does this with an atomic on the device).
func stageAmax(r *host.QuantizeRequest, d host.DelayedCast) error {
	for _, st := range r.Out {
		if st == nil {
			continue
		}
		b, ok := st.Buffer(host.BufAmax)
		if !ok {
			continue
		}
		var v [1]float32
		if b.Tensor.Device.Type == host.CPU {
			v[0] = b.Tensor.Float32s()[0]
		} else {
			tmp, err := host.AllocTensor(host.Device{Type: host.CPU}, host.Float32, []int64{1}, 0)
			if err != nil {
				return err
			}
			defer host.FreeTensor(tmp, 0)
			if err := host.CopyTensor(tmp, host.Tensor{Ptr: b.Tensor.Ptr, DType: host.Float32, Shape: []int64{1}, Device: b.Tensor.Device}, r.Stream); err != nil {
				return err
			}
			if err := host.Synchronize(b.Tensor.Device, r.Stream); err != nil {
				return err
			}
			v[0] = tmp.Float32s()[0]
		}
		d.RecordAmax(v[0])
		return nil
	}
	return host.Errorf(host.ErrPlugin, "delayed scaling: the quantized storage has no amax buffer to stage")
}

func (n *kernels) Dequantize(r *host.DequantizeRequest) error {
	p := r.Spec.Params()
	ca, cp, err := withParams(C.sizeof_quant_plugin_dequantize_args, &p)
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
	if err := tensor2DToC(r.Out, r.M, r.K, &a.out); err != nil {
		return err
	}
	setStream(&a.stream, r.Stream)
	return ca.invokeOp(n.plugin.info.Name, unsafe.Pointer(n.k.dequantize), n.what("dequantize", &p))
}

func (n *kernels) Derive(r *host.DeriveRequest) error {
	p := r.Spec.Params()
	ca, cp, err := withParams(C.sizeof_quant_plugin_derive_args, &p)
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
	return ca.invokeOp(n.plugin.info.Name, unsafe.Pointer(n.k.derive), n.what("derive", &p))
}

// swizzlingKernels are the kernel sets that also convert scale layouts.
type swizzlingKernels struct{ kernels }

// SwizzleScales runs on the default stream: ScaleSwizzler takes none.
func (n *swizzlingKernels) SwizzleScales(st *host.Storage, dir host.Direction, m, k int64, swizzled bool) error {
	p := st.Spec.Params()
	ca, cp, err := withParams(C.sizeof_quant_plugin_swizzle_args, &p)
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
	return ca.invokeOp(n.plugin.info.Name, unsafe.Pointer(n.k.swizzle_scales), n.what("scale swizzle", &p))
}

// memory is a plugin's memory table for one device type.
type memory struct {
	plugin *plugin
	m      *C.quant_plugin_memory
}

func (n *memory) call(fn C.quant_plugin_memory_fn, what string, fill func(a *C.quant_plugin_memory_args)) (*C.quant_plugin_memory_args, callArgs, error) {
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

func (n *memory) Alloc(dev host.Device, size int64, stream uintptr) (unsafe.Pointer, error) {
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

func (n *memory) Free(dev host.Device, p unsafe.Pointer, stream uintptr) {
	_, ca, _ := n.call(n.m.free, "free", func(a *C.quant_plugin_memory_args) {
		a.device_id = C.int32_t(dev.ID)
		a.ptr = p
		setStream(&a.stream, stream)
	})
	ca.free()
}

func (n *memory) Copy(dst, src host.Tensor, stream uintptr) error {
	kind := C.QUANT_PLUGIN_COPY_DEVICE_TO_DEVICE
	dev := dst.Device
	switch {
	case src.Device.Type == host.CPU:
		kind = C.QUANT_PLUGIN_COPY_HOST_TO_DEVICE
	case dst.Device.Type == host.CPU:
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

func (n *memory) Memset(t host.Tensor, value byte, stream uintptr) error {
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

func (n *memory) Synchronize(dev host.Device, stream uintptr) error {
	_, ca, err := n.call(n.m.synchronize, "synchronize", func(a *C.quant_plugin_memory_args) {
		a.device_id = C.int32_t(dev.ID)
		setStream(&a.stream, stream)
	})
	ca.free()
	return err
}

func (n *memory) DeviceCount() (int, error) {
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

// preparedQuantize is a quantize call built once (host.KernelPreparer): its
// argument block and error buffer in C memory of its own (not the recycled
// blocks: it lives as long as the plan), which the C ABI's plan run patches
// with the input's address and the stream and hands to fn.
type preparedQuantize struct {
	ca   callArgs
	fn   unsafe.Pointer
	what string // "plugin NAME: quantize of FORMAT on DEVICE", for a failed run's message
}

func (p *preparedQuantize) Close() {
	p.ca.release()
	p.ca = callArgs{}
}

// CCall is what a run needs: the plugin function, its argument block and
// error buffer (C memory), and the prefix of a failure's message.
func (p *preparedQuantize) CCall() (fn, args, err unsafe.Pointer, what string) {
	return p.fn, p.ca.args, unsafe.Pointer(p.ca.err), p.what
}

// PrepareQuantize builds r's quantize call for repeated runs (host.KernelPreparer):
// nil where a run needs the host (scratch a caller's allocator lends, a
// delayed-scaling state staged on the host) or the plugin has no quantize.
func (n *kernels) PrepareQuantize(r *host.QuantizeRequest) (host.PreparedKernel, error) {
	if n.k.quantize == nil || rhtLoan(r) > 0 {
		return nil, nil
	}
	ca, err := allocCallArgs(C.sizeof_quant_plugin_quantize_args + C.sizeof_quant_plugin_params)
	if err != nil {
		return nil, err
	}
	pq := &preparedQuantize{ca: ca, fn: unsafe.Pointer(n.k.quantize)}
	p := r.Spec.Params()
	cp, err := paramsAfter(ca, C.sizeof_quant_plugin_quantize_args, &p)
	if err != nil {
		pq.Close()
		return nil, err
	}
	staged, err := n.fillQuantize((*C.quant_plugin_quantize_args)(ca.args), cp, r)
	if err != nil || staged != nil {
		pq.Close()
		return nil, err
	}
	pq.what = "plugin " + n.plugin.info.Name + ": " + n.what("quantize", &p).String()
	return pq, nil
}
