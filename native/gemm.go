package native

/*
#include <stdlib.h>
#include "quant_plugin.h"
*/
import "C"

import (
	"slices"
	"unsafe"

	"libquant/host"
)

// gemmKernel is a plugin's GEMM for one device type (plugin ABI 2,
// quant_plugin_gemm): host.Gemm hands it the validated request, this fills
// quant_plugin_gemm_args and calls the plugin on the caller's stream.
type gemmKernel struct {
	plugin *plugin
	g      *C.quant_plugin_gemm
}

func (k *gemmKernel) what(r *host.GemmRequest) string {
	return "gemm of " + r.A.Format() + " × " + r.B.Format() + " on " + host.DeviceType(k.g.device_type).String()
}

func (k *gemmKernel) Gemm(r *host.GemmRequest) error {
	// The argument block, then the two operands' parameter blocks.
	size := C.size_t(C.sizeof_quant_plugin_gemm_args)
	ca, err := newCallArgs(size + 2*C.sizeof_quant_plugin_params)
	if err != nil {
		return err
	}
	defer ca.free()
	a := (*C.quant_plugin_gemm_args)(ca.args)
	a.struct_size = C.uint32_t(C.sizeof_quant_plugin_gemm_args)
	for i, in := range []*host.GemmInput{&r.A, &r.B} {
		o := &a.a
		if i == 1 {
			o = &a.b
		}
		cp := (*C.quant_plugin_params)(unsafe.Add(ca.args, uintptr(size)+uintptr(i)*C.sizeof_quant_plugin_params))
		if err := gemmOperandToC(in, o, cp); err != nil {
			return err
		}
	}
	a.m, a.n, a.k = C.int64_t(r.M), C.int64_t(r.N), C.int64_t(r.K)
	a.alpha, a.beta = C.float(r.Alpha), C.float(r.Beta)
	if r.C != nil {
		if err := tensorToC(*r.C, &a.c); err != nil {
			return err
		}
	}
	if r.Bias != nil {
		if err := tensorToC(*r.Bias, &a.bias); err != nil {
			return err
		}
	}
	if err := tensorToC(r.D, &a.d); err != nil {
		return err
	}
	a.accumulate = cBool(r.Accumulate)
	if r.Exact {
		a.flags |= C.QUANT_PLUGIN_GEMM_EXACT
	}
	setStream(&a.stream, r.Stream)
	if host.HasCallerAllocator(r.Device.Type) {
		// The caller's allocator holds every device buffer of the call (a CUDA
		// graph capture's pool): lend the plugin its scratch, so that it
		// allocates nothing itself.
		ws, err := host.AllocTensor(r.Device, host.Uint8, []int64{gemmWorkspaceBytes(r.M, r.N, r.K)}, r.Stream)
		if err != nil {
			return err
		}
		defer host.FreeTensor(ws, r.Stream)
		if err := tensorToC(ws, &a.workspace); err != nil {
			return err
		}
	}
	return ca.invoke(k.plugin.info.Name, unsafe.Pointer(k.g.gemm), k.what(r))
}

// gemmWorkspaceBytes bounds the scratch a plugin GEMM of [M, K] × [K, N] may
// need: the library's largest (cuda/gemm.cu: a 32 MiB cuBLASLt workspace,
// both operands expanded to 4-byte values with rows and columns padded to
// 128, and FP32 sums of D), with room for the slices' alignment.
func gemmWorkspaceBytes(m, n, k int64) int64 {
	pad := func(x int64) int64 { return (x + 127) / 128 * 128 }
	mp, np, kp := pad(m), pad(n), pad(k)
	return 32<<20 + 4*(mp*kp+kp*np) + 4*mp*np + 64<<10
}

func gemmOperandToC(in *host.GemmInput, o *C.quant_plugin_gemm_operand, cp *C.quant_plugin_params) error {
	name := in.Format()
	if len(name) >= C.QUANT_PLUGIN_FORMAT_LEN {
		return host.Errorf(host.ErrInvalidArgument, "format %q is longer than %d bytes", name, C.QUANT_PLUGIN_FORMAT_LEN-1)
	}
	for i := 0; i < len(name); i++ {
		o.format[i] = C.char(name[i])
	}
	o.trans = cBool(in.Trans)
	o.rows, o.cols = C.int64_t(in.Rows), C.int64_t(in.Cols)
	if in.Storage == nil {
		o.storage.num_buffers = 1
		o.storage.kinds[0] = C.int32_t(host.BufData)
		return tensor2DToC(in.Dense, in.Rows, in.Cols, &o.storage.buffers[0])
	}
	p := in.Storage.Spec.Params()
	if err := paramsToC(&p, cp); err != nil {
		return err
	}
	o.params = cp
	o.direction = C.uint32_t(in.Dir.Usage())
	return storageToC(in.Storage, &o.storage)
}

// support asks the plugin how it multiplies format a × b on its device.
func (k *gemmKernel) support(a, b string) (host.GemmSupportLevel, string, error) {
	ca, err := newCallArgs(C.sizeof_quant_plugin_gemm_support_args + 2*C.QUANT_PLUGIN_FORMAT_LEN)
	if err != nil {
		return 0, "", err
	}
	defer ca.free()
	s := (*C.quant_plugin_gemm_support_args)(ca.args)
	s.struct_size = C.uint32_t(C.sizeof_quant_plugin_gemm_support_args)
	s.device_type = k.g.device_type
	names := unsafe.Add(ca.args, C.sizeof_quant_plugin_gemm_support_args)
	for i, f := range []string{a, b} {
		if len(f) >= C.QUANT_PLUGIN_FORMAT_LEN {
			return 0, "", host.Errorf(host.ErrInvalidArgument, "format %q is longer than %d bytes", f, C.QUANT_PLUGIN_FORMAT_LEN-1)
		}
		p := unsafe.Add(names, i*C.QUANT_PLUGIN_FORMAT_LEN)
		copy(unsafe.Slice((*byte)(p), C.QUANT_PLUGIN_FORMAT_LEN), f)
		if i == 0 {
			s.format_a = (*C.char)(p)
		} else {
			s.format_b = (*C.char)(p)
		}
	}
	if err := ca.invoke(k.plugin.info.Name, unsafe.Pointer(k.g.support), "gemm support of "+a+" × "+b); err != nil {
		return 0, "", err
	}
	s.reason_out[len(s.reason_out)-1] = 0
	lvl := host.GemmSupportLevel(s.level_out)
	if lvl < host.GemmUnsupported || lvl > host.GemmNative {
		return 0, "", host.Errorf(host.ErrPlugin, "plugin %s: gemm support of %s × %s: level %d is not a quant_gemm_support_level", k.plugin.info.Name, a, b, s.level_out)
	}
	return lvl, C.GoString(&s.reason_out[0]), nil
}

// registerGemm installs the plugin's GEMM for its device type and records,
// for every ordered pair of the formats registered now, what the plugin says
// it runs (quant_gemm_support); a pair it cannot answer is unsupported, with
// its message as the reason.
func (p *plugin) registerGemm() {
	for i := range p.gemms() {
		g := &p.gemms()[i]
		k := &gemmKernel{plugin: p, g: g}
		dev := host.DeviceType(g.device_type)
		// Every registered format, and identity: a dense operand's name.
		names := host.FormatNames()
		if !slices.Contains(names, host.IdentityFormat) {
			names = append(names, host.IdentityFormat)
		}
		for _, a := range names {
			for _, b := range names {
				lvl, reason, err := k.support(a, b)
				if err != nil {
					lvl, reason = host.GemmUnsupported, err.Error()
				}
				host.RegisterGemmSupport(dev, a, b, lvl, reason)
			}
		}
		host.RegisterGemmKernel(dev, k)
	}
}

func (p *plugin) gemms() []C.quant_plugin_gemm {
	if p.info.ABIVersion < 2 || p.table.num_gemm == 0 || p.table.gemm == nil {
		return nil
	}
	return unsafe.Slice(p.table.gemm, int(p.table.num_gemm))
}
