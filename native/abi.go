package native

/*
#include <stdlib.h>
#include <string.h>
#include "quant_plugin.h"

// lq_call calls a plugin function of the (args, err) shape every table entry
// has. A cgo call allocates nothing, where purego.SyscallN's variadic
// arguments do (issue #15: host time per call). The pointers come as
// integers: all three are C memory, and a pointer argument would make cgo
// check on every call whether it points into Go memory.
static int32_t lq_call(uintptr_t fn, uintptr_t args, uintptr_t err) {
  return ((int32_t (*)(void *, quant_plugin_error *))(void *)fn)((void *)args, (quant_plugin_error *)err);
}
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"libquant/host"
)

// DLPack type codes (dlpack.h v1.1) of the dtypes buffers can have.
var dlpackOf = map[host.DType][2]uint8{
	host.Float32:  {C.kDLFloat, 32},
	host.Float16:  {C.kDLFloat, 16},
	host.BFloat16: {C.kDLBfloat, 16},
	host.Float64:  {C.kDLFloat, 64},
	host.Uint8:    {C.kDLUInt, 8},
	host.Int32:    {C.kDLInt, 32},
	host.Int64:    {C.kDLInt, 64},
	host.E4M3:     {C.kDLFloat8_e4m3fn, 8},
	host.E5M2:     {C.kDLFloat8_e5m2, 8},
	host.E8M0:     {C.kDLFloat8_e8m0fnu, 8},
}

// dlDType is on every kernel call's path: a switch, not a map lookup.
func dlDType(d host.DType) (C.DLDataType, error) {
	var code, bits uint8
	switch d {
	case host.Float32:
		code, bits = C.kDLFloat, 32
	case host.Float16:
		code, bits = C.kDLFloat, 16
	case host.BFloat16:
		code, bits = C.kDLBfloat, 16
	case host.Float64:
		code, bits = C.kDLFloat, 64
	case host.Uint8:
		code, bits = C.kDLUInt, 8
	case host.Int32:
		code, bits = C.kDLInt, 32
	case host.Int64:
		code, bits = C.kDLInt, 64
	case host.E4M3:
		code, bits = C.kDLFloat8_e4m3fn, 8
	case host.E5M2:
		code, bits = C.kDLFloat8_e5m2, 8
	case host.E8M0:
		code, bits = C.kDLFloat8_e8m0fnu, 8
	default:
		return C.DLDataType{}, host.Errorf(host.ErrUnsupported, "dtype %s has no DLPack code for plugins", d)
	}
	return C.DLDataType{code: C.uint8_t(code), bits: C.uint8_t(bits), lanes: 1}, nil
}

func dtypeFromDLPlugin(t C.DLDataType) (host.DType, bool) {
	if t.lanes != 1 {
		return 0, false
	}
	for d, c := range dlpackOf {
		if uint8(t.code) == c[0] && uint8(t.bits) == c[1] {
			return d, true
		}
	}
	return 0, false
}

// paramsToC fills a C parameter block from p.
func paramsToC(p *host.Params, c *C.quant_plugin_params) error {
	*c = C.quant_plugin_params{}
	c.struct_size = C.uint32_t(C.sizeof_quant_plugin_params)
	if len(p.Format) >= C.QUANT_PLUGIN_FORMAT_LEN {
		return host.Errorf(host.ErrInvalidArgument, "config.format: %q is longer than %d bytes", p.Format, C.QUANT_PLUGIN_FORMAT_LEN-1)
	}
	for i := 0; i < len(p.Format); i++ {
		c.format[i] = C.char(p.Format[i])
	}
	c.element = C.int32_t(p.Element)
	c.scaling = C.int32_t(p.Scaling)
	c.force_pow2_scales = cBool(p.ForcePow2Scales)
	c.amax_epsilon = C.float(p.AmaxEpsilon)
	c.amax_history_len = C.int32_t(p.AmaxHistoryLen)
	c.amax_compute_algo = C.int32_t(p.AmaxAlgo)
	c.margin = C.float(p.Margin)
	c.block_dims = C.int32_t(p.BlockDims)
	c.fp32_scales = cBool(p.FP32Scales)
	c.scale_rounding = C.int32_t(p.ScaleRounding)
	c.gemm_swizzled_scales = cBool(p.GEMMSwizzledScales)
	c.rht = C.int32_t(p.RHT)
	c.rht_sign_mask = C.uint32_t(p.RHTSignMask)
	c.stochastic_rounding = cBool(p.StochasticRounding)
	c.seed = C.uint64_t(p.Seed)
	c.offset = C.uint64_t(p.Offset)
	if p.HoldDType != host.DTypeInvalid {
		dt, err := dlDType(p.HoldDType)
		if err != nil {
			return err
		}
		c.dtype = dt
	}
	return nil
}

// paramsFromC reads a C parameter block back (after a plugin's check filled
// defaults).
func paramsFromC(c *C.quant_plugin_params) (host.Params, error) {
	c.format[len(c.format)-1] = 0
	p := host.Params{
		Format:             C.GoString(&c.format[0]),
		Element:            host.Element(c.element),
		Scaling:            host.Scaling(c.scaling),
		ForcePow2Scales:    c.force_pow2_scales != 0,
		AmaxEpsilon:        float32(c.amax_epsilon),
		AmaxHistoryLen:     int32(c.amax_history_len),
		AmaxAlgo:           host.AmaxAlgo(c.amax_compute_algo),
		Margin:             float32(c.margin),
		BlockDims:          int32(c.block_dims),
		FP32Scales:         c.fp32_scales != 0,
		ScaleRounding:      host.ScaleRounding(c.scale_rounding),
		GEMMSwizzledScales: c.gemm_swizzled_scales != 0,
		RHT:                host.RHTMode(c.rht),
		RHTSignMask:        uint32(c.rht_sign_mask),
		StochasticRounding: c.stochastic_rounding != 0,
		Seed:               uint64(c.seed),
		Offset:             uint64(c.offset),
	}
	if c.dtype != (C.DLDataType{}) {
		dt, ok := dtypeFromDLPlugin(c.dtype)
		if !ok {
			return host.Params{}, host.Errorf(host.ErrPlugin, "params.dtype: DLPack (code %d, bits %d) is not a libquant dtype", c.dtype.code, c.dtype.bits)
		}
		p.HoldDType = dt
	}
	return p, nil
}

func cBool(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}

// dlDTypes is dlDType as a table indexed by dtype (lanes 0: no DLPack code):
// the per-buffer lookup on every kernel call (issue #15: host time per call).
var dlDTypes = func() (t [256]C.DLDataType) {
	for d := range t {
		if dt, err := dlDType(host.DType(d)); err == nil {
			t[d] = dt
		}
	}
	return t
}()

// tensorToC describes t.
func tensorToC(t host.Tensor, c *C.quant_plugin_tensor) error {
	return tensorRefToC(&t, c)
}

// tensorRefToC is tensorToC of a tensor it does not copy (a storage's buffers).
func tensorRefToC(t *host.Tensor, c *C.quant_plugin_tensor) error {
	if len(t.Shape) > C.QUANT_PLUGIN_MAX_DIMS {
		return host.Errorf(host.ErrUnsupported, "tensor of rank %d: plugins take at most %d dims", len(t.Shape), C.QUANT_PLUGIN_MAX_DIMS)
	}
	if err := tensorHeadToC(t, c); err != nil {
		return err
	}
	c.ndim = C.int32_t(len(t.Shape))
	for i, d := range t.Shape {
		c.shape[i] = C.int64_t(d)
	}
	return nil
}

// tensor2DToC describes t as its 2-D view [m, k] (an input).
func tensor2DToC(t host.Tensor, m, k int64, c *C.quant_plugin_tensor) error {
	if err := tensorHeadToC(&t, c); err != nil {
		return err
	}
	c.ndim = 2
	c.shape[0], c.shape[1] = C.int64_t(m), C.int64_t(k)
	return nil
}

func tensorHeadToC(t *host.Tensor, c *C.quant_plugin_tensor) error {
	dt := dlDTypes[t.DType]
	if dt.lanes == 0 {
		_, err := dlDType(t.DType)
		return err
	}
	c.data = t.Ptr
	c.dtype = dt
	c.device_type = C.int32_t(t.Device.Type)
	c.device_id = C.int32_t(t.Device.ID)
	return nil
}

func storageToC(st *host.Storage, c *C.quant_plugin_storage) error {
	if st == nil {
		return nil
	}
	if len(st.Buffers) > C.QUANT_PLUGIN_MAX_BUFFERS {
		return host.Errorf(host.ErrUnsupported, "storage of %s has %d buffers: plugins take at most %d", st.FormatName(), len(st.Buffers), C.QUANT_PLUGIN_MAX_BUFFERS)
	}
	c.num_buffers = C.uint32_t(len(st.Buffers))
	for i := range st.Buffers {
		b := &st.Buffers[i] // not a copy of each Buffer
		c.kinds[i] = C.int32_t(b.Kind)
		if err := tensorRefToC(&b.Tensor, &c.buffers[i]); err != nil {
			return err
		}
	}
	return nil
}

// statusError maps a plugin's status and message to a host error.
func statusError(plugin string, status int32, msg string) error {
	kind := host.ErrPlugin
	switch status {
	case 1:
		kind = host.ErrInvalidArgument
	case 3:
		kind = host.ErrUnsupported
	case 4:
		kind = host.ErrDeviceUnavailable
	case 5:
		kind = host.ErrOutOfMemory
	case 6:
		kind = host.ErrBufferTooSmall
	case 7:
		kind = host.ErrState
	}
	return host.Errorf(kind, "plugin %s: %s", plugin, msg)
}

// callArgs holds a call's argument block and error buffer in C memory, so that
// no Go memory crosses into the plugin. Blocks are recycled through a free
// list instead of calloc'd per call: a kernel call is on every quantize's
// path (issue #15: host time per call).
type callArgs struct {
	args unsafe.Pointer
	err  *C.quant_plugin_error
	size C.size_t // bytes at args
}

// callBlockSize is the size of every recycled argument block: the largest
// argument struct plus a parameter block, rounded up.
const callBlockSize = 4096

var callBlocks = struct {
	sync.Mutex
	free []callArgs
}{}

// maxFreeBlocks bounds the free list: more blocks than concurrent calls are
// returned to C.
const maxFreeBlocks = 64

func newCallArgs(size C.size_t) (callArgs, error) {
	if size <= callBlockSize {
		callBlocks.Lock()
		if n := len(callBlocks.free); n > 0 {
			c := callBlocks.free[n-1]
			callBlocks.free = callBlocks.free[:n-1]
			callBlocks.Unlock()
			clear(unsafe.Slice((*byte)(c.args), int(size))) // Go code, not a cgo call
			c.err.message[0] = 0
			return c, nil
		}
		callBlocks.Unlock()
		size = callBlockSize
	}
	return allocCallArgs(size)
}

// allocCallArgs allocates a zeroed block of size and an error buffer in C
// memory, outside the recycled ones (release frees them).
func allocCallArgs(size C.size_t) (callArgs, error) {
	a := C.calloc(1, size)
	e := (*C.quant_plugin_error)(C.calloc(1, C.sizeof_quant_plugin_error))
	if a == nil || e == nil {
		C.free(a)
		C.free(unsafe.Pointer(e))
		return callArgs{}, host.Errorf(host.ErrOutOfMemory, "plugin call arguments")
	}
	return callArgs{a, e, size}, nil
}

// release returns the block and its error buffer to C.
func (c callArgs) release() {
	C.free(c.args)
	C.free(unsafe.Pointer(c.err))
}

// free recycles a block of callBlockSize bytes and returns a larger one (a
// grouped call's) to C.
func (c callArgs) free() {
	if c.args == nil {
		return
	}
	if c.size != callBlockSize {
		c.release()
		return
	}
	callBlocks.Lock()
	if len(callBlocks.free) < maxFreeBlocks {
		callBlocks.free = append(callBlocks.free, c)
		callBlocks.Unlock()
		return
	}
	callBlocks.Unlock()
	c.release()
}

// invoke calls fn(args, err) and maps a failure to an error naming what.
func (c callArgs) invoke(plugin string, fn unsafe.Pointer, what string) error {
	return c.invokeOp(plugin, fn, op{what: what})
}

// op names a plugin call for its error message; the message is built only
// when the call fails, so that a successful call allocates nothing.
type op struct {
	what   string // "quantize", or the whole description when format is empty
	format string
	device host.DeviceType
}

func (o op) String() string {
	if o.format == "" {
		return o.what
	}
	return o.what + " of " + o.format + " on " + o.device.String()
}

// invokeOp calls fn(args, err) and maps a failure to an error naming o.
func (c callArgs) invokeOp(plugin string, fn unsafe.Pointer, o op) error {
	if fn == nil {
		return host.Errorf(host.ErrUnsupported, "plugin %s: provides no %s", plugin, o)
	}
	if status := int32(C.lq_call(C.uintptr_t(uintptr(fn)), C.uintptr_t(uintptr(c.args)), C.uintptr_t(uintptr(unsafe.Pointer(c.err))))); status != 0 {
		return statusError(plugin, status, fmt.Sprintf("%s: %s", o, errMessage(c.err)))
	}
	return nil
}

// paramsRoundTrip converts p to the C parameter block and back; the tests use
// it to check that every Params field crosses the plugin ABI.
func paramsRoundTrip(p host.Params) (host.Params, error) {
	c := (*C.quant_plugin_params)(C.calloc(1, C.sizeof_quant_plugin_params))
	defer C.free(unsafe.Pointer(c))
	if err := paramsToC(&p, c); err != nil {
		return host.Params{}, err
	}
	return paramsFromC(c)
}
