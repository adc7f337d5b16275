"""The hostile cases of examples/c/test_abi.c again, from Python: through the
ctypes declarations (raw pointers: NULLs, bad struct sizes, freed, foreign and
wrongly typed handles, bad DLTensors) and through the Pythonic API (objects that
lie about their DLPack shape, device or dtype). Each must raise the status's
LibquantError subclass with the library's message, never crash."""

from __future__ import annotations

import ctypes as C
from typing import Any, Callable

import numpy as np
import pytest

import libquant as lq
from libquant import _lib as L

M, K = 48, 40
X = ((np.arange(M * K) * 37 % 101) - 50).astype(np.float32).reshape(M, K) * np.float32(0.173)


def lib() -> L.Library:
    return L.lib()


def expect(status: int, cls: type[lq.LibquantError], text: str) -> None:
    assert status != 0, "expected %s, got QUANT_OK" % cls.__name__
    with pytest.raises(cls) as e:
        L.check(status)
    assert text in e.value.message, e.value.message


def cfg(fmt: bytes = b"fp8") -> L.quant_quantizer_config:
    c = L.quant_quantizer_config()
    c.struct_size = C.sizeof(c)
    c.format = fmt
    return c


def quantizer(fmt: bytes = b"fp8", **fields: Any) -> C.c_void_p:
    c = cfg(fmt)
    for k, v in fields.items():
        setattr(c, k, v)
    q = C.c_void_p()
    L.check(lib().quant_quantizer_create(C.byref(c), C.byref(q)))
    return q


class DL:
    """A DLTensor over X (or any array) whose fields a test can corrupt."""

    def __init__(self, a: np.ndarray[Any, Any] = X, code: int = L.kDLFloat, bits: int = 32) -> None:
        self.a = a
        self.shape = (C.c_int64 * a.ndim)(*a.shape)
        self.t = L.DLTensor()
        self.t.data = a.ctypes.data
        self.t.device.device_type = L.kDLCPU
        self.t.ndim = a.ndim
        self.t.dtype.code, self.t.dtype.bits, self.t.dtype.lanes = code, bits, 1
        self.t.shape = self.shape

    @property
    def ref(self) -> Any:
        return C.byref(self.t)


def test_quantizer_create_hostile() -> None:
    q = C.c_void_p()
    f = lib().quant_quantizer_create
    expect(f(None, C.byref(q)), lq.InvalidArgumentError, "config: is NULL")
    c = cfg()
    expect(f(C.byref(c), None), lq.InvalidArgumentError, "out: is NULL")
    c.format = None
    expect(f(C.byref(c), C.byref(q)), lq.InvalidArgumentError, "config.format")
    c.format = b"fp9"
    expect(f(C.byref(c), C.byref(q)), lq.UnsupportedError, '"fp9" is not registered')
    c = cfg()
    c.struct_size = 4
    expect(f(C.byref(c), C.byref(q)), lq.InvalidArgumentError, "struct_size 4")
    c = cfg()
    c.dtype.code, c.dtype.bits, c.dtype.lanes = 99, 8, 1
    expect(f(C.byref(c), C.byref(q)), lq.UnsupportedError, "config.dtype")
    assert q.value is None
    # an older caller's shorter struct works; fields past it are ignored
    c = cfg()
    c.struct_size = L.quant_quantizer_config.format.offset + C.sizeof(C.c_char_p)
    c.element = 3
    L.check(f(C.byref(c), C.byref(q)))
    L.check(lib().quant_quantizer_free(q))
    # a newer caller's longer struct: accepted when its tail is zero
    big = (C.c_uint8 * (C.sizeof(L.quant_quantizer_config) + 16))()
    bc = L.quant_quantizer_config.from_buffer(big)
    bc.struct_size = C.sizeof(big)
    bc.format = b"fp8"
    L.check(f(C.byref(bc), C.byref(q)))
    L.check(lib().quant_quantizer_free(q))
    big[C.sizeof(L.quant_quantizer_config) + 3] = 1
    expect(f(C.byref(bc), C.byref(q)), lq.UnsupportedError, "newer field")


def test_handles_freed_foreign_and_wrong_type() -> None:
    q = quantizer()
    u = C.c_uint32()
    L.check(lib().quant_quantizer_free(q))
    expect(lib().quant_quantizer_set_usage(q, 1), lq.InvalidHandleError, "not a live quantizer")
    expect(lib().quant_quantizer_free(q), lq.InvalidHandleError, "not a live quantizer")
    expect(lib().quant_quantizer_free(C.addressof(u)), lq.InvalidHandleError, "quantizer")
    L.check(lib().quant_quantizer_free(None))
    expect(lib().quant_quantizer_get_usage(None, C.byref(u)), lq.InvalidArgumentError, "quantizer: is NULL")
    q = quantizer()
    t = C.c_void_p()
    x = DL()
    L.check(lib().quant_quantize(q, x.ref, None, C.byref(t)))
    expect(lib().quant_quantize(t, x.ref, None, C.byref(t)), lq.InvalidHandleError,
           "handle is a quantized tensor, not a quantizer")
    expect(lib().quant_quantize_into(q, x.ref, None, q), lq.InvalidHandleError, "dst")
    L.check(lib().quant_qtensor_free(t))
    info = L.quant_qtensor_info()
    info.struct_size = C.sizeof(info)
    expect(lib().quant_qtensor_get_info(t, C.byref(info)), lq.InvalidHandleError, "not a live quantized tensor")
    expect(lib().quant_qtensor_free(t), lq.InvalidHandleError, "not a live quantized tensor")
    # random integers as handles
    for bogus in (1, 0xDEADBEEF, 2**63 - 8):
        expect(lib().quant_quantizer_free(bogus), lq.InvalidHandleError, "quantizer")
        expect(lib().quant_qtensor_free(bogus), lq.InvalidHandleError, "tensor")
        expect(lib().quant_recipe_free(bogus), lq.InvalidHandleError, "recipe")
        expect(lib().quant_linear_free(bogus), lq.InvalidHandleError, "layer")
        expect(lib().quant_linear_ctx_free(bogus), lq.InvalidHandleError, "ctx")
    L.check(lib().quant_quantizer_free(q))


@pytest.mark.parametrize("corrupt,cls,text", [
    (lambda d: setattr(d.t, "ndim", 0), lq.InvalidArgumentError, "input: ndim 0"),
    (lambda d: setattr(d.t, "ndim", 9), lq.InvalidArgumentError, "ndim 9"),
    (lambda d: setattr(d.t, "shape", None), lq.InvalidArgumentError, "input: shape is NULL"),
    (lambda d: setattr(d.t, "data", None), lq.InvalidArgumentError, "input: data is NULL"),
    (lambda d: setattr(d.t.dtype, "lanes", 4), lq.InvalidArgumentError, "lanes"),
    (lambda d: (setattr(d.t.dtype, "code", L.kDLInt), setattr(d.t.dtype, "bits", 16)), lq.UnsupportedError,
     "input: DLPack dtype"),
    (lambda d: setattr(d.t.device, "device_type", L.kDLVulkan), lq.UnsupportedError, "input: DLPack device type 7"),
    (lambda d: (setattr(d, "huge", (C.c_int64 * 2)(2**61, 4)), setattr(d.t, "shape", d.huge)),
     lq.InvalidArgumentError, "overflows"),
    (lambda d: (setattr(d, "st", (C.c_int64 * 2)(1, M)), setattr(d.t, "strides", d.st)), lq.UnsupportedError,
     "not row-major contiguous"),
    (lambda d: (setattr(d, "neg", (C.c_int64 * 2)(-1, K)), setattr(d.t, "shape", d.neg)),
     lq.InvalidArgumentError, "negative"),
])
def test_bad_dltensors(corrupt: Callable[[DL], Any], cls: type[lq.LibquantError], text: str) -> None:
    q = quantizer()
    t = C.c_void_p()
    d = DL()
    corrupt(d)
    expect(lib().quant_quantize(q, d.ref, None, C.byref(t)), cls, text)
    assert t.value is None
    L.check(lib().quant_quantizer_free(q))


def test_null_arguments_everywhere() -> None:
    q = quantizer()
    t = C.c_void_p()
    d = DL()
    n = C.c_size_t()
    sh = (C.c_int64 * 2)(M, K)
    expect(lib().quant_quantize(q, None, None, C.byref(t)), lq.InvalidArgumentError, "input: is NULL")
    expect(lib().quant_quantize(q, d.ref, None, None), lq.InvalidArgumentError, "out: is NULL")
    expect(lib().quant_quantize(None, d.ref, None, C.byref(t)), lq.InvalidArgumentError, "quantizer: is NULL")
    expect(lib().quant_quantizer_layout(q, None, 2, None, 0, C.byref(n)), lq.InvalidArgumentError, "shape: is NULL")
    expect(lib().quant_quantizer_layout(q, sh, 2, None, 0, None), lq.InvalidArgumentError, "count: is NULL")
    descs = (L.quant_buffer_desc * 2)()
    expect(lib().quant_quantizer_layout(q, sh, 2, descs, 2, C.byref(n)), lq.BufferTooSmallError, "capacity")
    assert n.value == 6
    L.check(lib().quant_quantize(q, d.ref, None, C.byref(t)))
    v = L.DLTensor()
    expect(lib().quant_qtensor_buffer(t, 0, 0, C.byref(v)), lq.InvalidArgumentError, "direction")
    expect(lib().quant_qtensor_buffer(t, 1, 7, C.byref(v)), lq.InvalidArgumentError, "kind")
    expect(lib().quant_qtensor_buffer(t, 1, 0, None), lq.InvalidArgumentError, "view")
    expect(lib().quant_qtensor_buffer(None, 1, 0, C.byref(v)), lq.InvalidArgumentError, "tensor")
    expect(lib().quant_dequantize(t, 0, None, None), lq.InvalidArgumentError, "out: is NULL")
    expect(lib().quant_qtensor_update_usage(t, 0, None), lq.InvalidArgumentError, "usage")
    expect(lib().quant_qtensor_update_usage(None, 1, None), lq.InvalidArgumentError, "tensor")
    expect(lib().quant_qtensor_set_gemm_swizzled_scales(None, 1, None), lq.InvalidArgumentError, "tensor")
    info = L.quant_qtensor_info()
    info.struct_size = 1
    expect(lib().quant_qtensor_get_info(t, C.byref(info)), lq.InvalidArgumentError, "struct_size")
    expect(lib().quant_qtensor_get_info(t, None), lq.InvalidArgumentError, "info: is NULL")
    a = (C.c_float * 3)()
    at = DL(np.frombuffer(a, np.float32))
    expect(lib().quant_compute_amax(q, d.ref, at.ref, None), lq.InvalidArgumentError, "amax: want float32 with 2")
    expect(lib().quant_compute_amax(q, d.ref, None, None), lq.InvalidArgumentError, "amax: is NULL")
    opts = L.quant_quantize_options()
    opts.struct_size = 2
    expect(lib().quant_quantize(q, d.ref, C.byref(opts), C.byref(t)), lq.InvalidArgumentError,
           "options: struct_size 2")
    expect(lib().quant_qtensor_from_buffers(q, sh, 2, None, 6, C.byref(t)), lq.InvalidArgumentError,
           "buffers: is NULL")
    expect(lib().quant_delayed_scaling_update(None, 0, None), lq.InvalidArgumentError, "quantizer")
    expect(lib().quant_delayed_scaling_state(q, 0, C.byref(v), C.byref(v)), lq.StateError,
           "does not use delayed scaling")
    expect(lib().quant_gemm(None), lq.InvalidArgumentError, "args")
    g = L.quant_gemm_args()
    g.struct_size = C.sizeof(g)
    expect(lib().quant_gemm(C.byref(g)), lq.InvalidArgumentError, "")
    expect(lib().quant_recipe_create(None, C.byref(t)), lq.InvalidArgumentError, "config")
    expect(lib().quant_recipe_create_callback(C.cast(None, L.RECIPE_CALLBACK), None, C.byref(t)),
           lq.InvalidArgumentError, "callback")
    expect(lib().quant_plugin_load(None, None), lq.InvalidArgumentError, "path")
    expect(lib().quant_plugin_count(None), lq.InvalidArgumentError, "count")
    expect(lib().quant_linear_create(None, C.byref(t)), lq.InvalidArgumentError, "config")
    expect(lib().quant_linear_forward(None, None, None), lq.InvalidArgumentError, "layer: is NULL")
    lib().quant_qtensor_free(t)
    L.check(lib().quant_quantizer_free(q))


def test_last_error_kept_until_next_failure() -> None:
    q = C.c_void_p()
    expect(lib().quant_quantizer_create(None, C.byref(q)), lq.InvalidArgumentError, "config: is NULL")
    c = cfg()
    L.check(lib().quant_quantizer_create(C.byref(c), C.byref(q)))
    assert b"config: is NULL" in lib().quant_last_error()
    L.check(lib().quant_quantizer_free(q))


# --- the same through the Pythonic API -------------------------------------


class Liar:
    """A DLPack producer whose DLTensor says what a test wants."""

    def __init__(self, device: tuple[int, int] = (L.kDLCPU, 0), shape: tuple[int, ...] = (M, K),
                 code: int = L.kDLFloat, bits: int = 32, lanes: int = 1, data: int | None = None,
                 strides: tuple[int, ...] | None = None) -> None:
        self.arr = X
        self.device, self.shape, self.code, self.bits, self.lanes = device, shape, code, bits, lanes
        self.data = X.ctypes.data if data is None else data
        self.strides = strides
        self.keep: list[Any] = []

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device

    def __dlpack__(self, **kw: Any) -> Any:
        from libquant._dlpack import DLManagedTensor, _capi

        mt = DLManagedTensor()
        sh = (C.c_int64 * max(len(self.shape), 1))(*self.shape)
        t = mt.dl_tensor
        t.data = self.data
        t.device.device_type, t.device.device_id = self.device
        t.ndim = len(self.shape)
        t.dtype.code, t.dtype.bits, t.dtype.lanes = self.code, self.bits, self.lanes
        t.shape = sh
        if self.strides is not None:
            st = (C.c_int64 * len(self.strides))(*self.strides)
            t.strides = st
            self.keep.append(st)
        self.keep += [mt, sh]
        return _capi.PyCapsule_New(C.addressof(mt), b"dltensor", None)


@pytest.mark.parametrize("liar,cls,text", [
    (Liar(device=(L.kDLVulkan, 0)), lq.UnsupportedError, "device type 7"),
    (Liar(shape=(2**61, 4)), lq.InvalidArgumentError, "overflows"),
    (Liar(shape=(-3, K)), lq.InvalidArgumentError, "negative"),
    (Liar(data=0), lq.InvalidArgumentError, "data is NULL"),
    (Liar(lanes=4), lq.InvalidArgumentError, "lanes"),
    (Liar(code=L.kDLComplex, bits=64), lq.UnsupportedError, "dtype"),
    (Liar(code=L.kDLFloat, bits=64), lq.InvalidArgumentError, "float64"),
    (Liar(strides=(1, M)), lq.UnsupportedError, "not row-major contiguous"),
    (Liar(shape=()), lq.InvalidArgumentError, "ndim 0"),
    (Liar(shape=(1,) * 9), lq.InvalidArgumentError, "ndim"),
])
def test_api_lying_dlpack_objects(liar: Liar, cls: type[lq.LibquantError], text: str) -> None:
    with pytest.raises(cls) as e:
        lq.Quantizer("fp8").quantize(liar)
    assert text in e.value.message


def test_api_cuda_pointer_without_plugin() -> None:
    if any(p.loaded and any(k.device.type == "cuda" for k in p.kernels) for p in lq.plugins()):
        pytest.skip("a CUDA plugin is loaded: cuda/gputest covers CUDA tensors")
    with pytest.raises(lq.DeviceUnavailableError, match="cuda:0"):
        lq.Quantizer("fp8").quantize(Liar(device=(L.kDLCUDA, 0)))


def test_api_wrong_python_types() -> None:
    q = lq.Quantizer("fp8")
    with pytest.raises(TypeError):
        q.quantize([1.0, 2.0])
    with pytest.raises(TypeError):
        q.quantize(None)
    with pytest.raises(lq.InvalidArgumentError, match="dtype int64"):
        q.quantize(np.arange(8))
    with pytest.raises(lq.UnsupportedError, match="not a multiple of its item size"):
        q.quantize(np.lib.stride_tricks.as_strided(np.zeros(16, np.float32), (2, 2), (6, 4)))
    with pytest.raises(lq.InvalidArgumentError, match="format"):
        lq.Quantizer(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        lq.gemm(q, q)  # type: ignore[arg-type]


def test_api_read_only_and_empty_arrays() -> None:
    x = np.ones((32, 32), np.float32)
    qt = lq.Quantizer("fp8").quantize(x)
    ro = np.empty((32, 32), np.float32)
    ro.flags.writeable = False
    with pytest.raises(lq.InvalidArgumentError, match="out: the NumPy array is read-only"):
        qt.dequantize(out=ro)
    with pytest.raises(lq.InvalidArgumentError, match="read-only"):
        lq.gemm(x, x, out=ro)
    with pytest.raises(lq.InvalidArgumentError, match="read-only"):
        lq.Quantizer("fp8").compute_amax(x, out=np.frombuffer(b"\0" * 8, np.float32))
    q = lq.Quantizer("fp8")
    with pytest.raises(lq.InvalidArgumentError, match=r"buffers\[0\]: the NumPy array is read-only"):
        q.from_buffers((32, 32), [np.frombuffer(b"\0" * d.nbytes, np.uint8).view(
            lq._dlpack.numpy_dtype(*d.dl_dtype)).reshape(d.shape) for d in q.layout((32, 32))])
    # reversed and sliced views reach the library, which names the strides
    with pytest.raises(lq.UnsupportedError, match="not row-major contiguous"):
        q.quantize(x[::-1])
    with pytest.raises(lq.UnsupportedError, match="not row-major contiguous"):
        q.quantize(x[:, ::2])
    # an empty tensor is the library's to accept or refuse, never a crash
    try:
        e = q.quantize(np.ones((0, 32), np.float32))
        assert e.shape == (0, 32)
    except lq.LibquantError as err:
        assert "input" in err.message
