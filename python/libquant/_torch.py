"""Torch-specific zero-copy helpers (imported only when torch is in use).

Torch tensors go to C as DLTensors built from ``data_ptr()``, ``shape`` and
``stride()``; CUDA work is enqueued on torch's current stream of the tensor's
device. Buffers come back as typed torch views: ``torch.float8_e4m3fn``,
``float8_e5m2``, ``float8_e8m0fnu`` and ``float4_e2m1fn_x2`` (packed FP4) where
the installed torch has them, ``uint8`` otherwise (and for packed FP6, which torch
has no dtype for). libquant.torch (the modules)
builds on these.
"""

from __future__ import annotations

import ctypes as C
from typing import TYPE_CHECKING, Any

import torch
from torch.utils.dlpack import from_dlpack

from . import _lib as L
from ._dlpack import Tensor  # (a module-level import: one inside from_torch cost ~0.9 µs a call)
from ._errors import UnsupportedError

if TYPE_CHECKING:
    from ._dlpack import Buffer

_DL_BY_TORCH: dict[torch.dtype, tuple[int, int]] = {
    torch.float32: (L.kDLFloat, 32),
    torch.float16: (L.kDLFloat, 16),
    torch.float64: (L.kDLFloat, 64),
    torch.bfloat16: (L.kDLBfloat, 16),
    torch.uint8: (L.kDLUInt, 8),
    torch.int8: (L.kDLInt, 8),
    torch.int16: (L.kDLInt, 16),
    torch.int32: (L.kDLInt, 32),
    torch.int64: (L.kDLInt, 64),
    torch.bool: (L.kDLBool, 8),
}
_TORCH_BY_DL: dict[tuple[int, int], torch.dtype] = {v: k for k, v in _DL_BY_TORCH.items()}
for _name, _code in (("float8_e4m3fn", L.kDLFloat8_e4m3fn), ("float8_e5m2", L.kDLFloat8_e5m2),
                     ("float8_e8m0fnu", L.kDLFloat8_e8m0fnu), ("float8_e4m3fnuz", L.kDLFloat8_e4m3fnuz),
                     ("float8_e5m2fnuz", L.kDLFloat8_e5m2fnuz)):
    if hasattr(torch, _name):
        _DL_BY_TORCH[getattr(torch, _name)] = (_code, 8)
        _TORCH_BY_DL[(_code, 8)] = getattr(torch, _name)

#: torch's packed FP4 dtype (two E2M1 per byte), or None in a torch without it.
FLOAT4_X2: torch.dtype | None = getattr(torch, "float4_e2m1fn_x2", None)


def dl_dtype(dtype: torch.dtype) -> tuple[int, int]:
    """(DLPack code, bits) of a torch dtype."""
    try:
        return _DL_BY_TORCH[dtype]
    except KeyError:
        raise UnsupportedError("torch dtype %s has no DLPack code libquant knows" % dtype) from None


def torch_dtype(code: int, bits: int) -> torch.dtype:
    """The torch dtype of a DLPack (code, bits); uint8 for a float8 this torch lacks."""
    t = _TORCH_BY_DL.get((code, bits))
    if t is None:
        if bits == 8:
            return torch.uint8
        raise UnsupportedError("DLPack dtype code %d bits %d has no torch dtype" % (code, bits))
    return t


_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def current_stream(index: int) -> int:
    """The cudaStream_t of torch's current stream on CUDA device `index` (the raw
    pointer torch's own generated code reads: torch.cuda.current_stream builds
    a Stream object per call, which cost tens of µs per tensor on the GPU VM)."""
    if _RAW_STREAM is not None:
        return int(_RAW_STREAM(index))
    return int(torch.cuda.current_stream(index).cuda_stream)


def _stream(device: torch.device, ptr: int) -> Any:
    """A torch stream object over a DLPack stream value: 1 is the legacy default
    stream (torch's default stream, as torch's own __dlpack__ maps it), anything
    else a cudaStream_t (2: cudaStreamPerThread)."""
    if ptr == 1:
        return torch.cuda.default_stream(device)
    return torch.cuda.ExternalStream(ptr, device=device)  # type: ignore[no-untyped-call]


def stream_wait(index: int, producer: int, consumer: int) -> None:
    """Makes stream consumer wait on an event recorded on stream producer (CUDA device index)."""
    dev = torch.device("cuda", index)
    with torch.cuda.device(dev):
        ev = torch.cuda.Event()  # type: ignore[no-untyped-call]
        ev.record(_stream(dev, producer))
        _stream(dev, consumer).wait_event(ev)


# (dtype, shape, device, strides) -> a DLTensor template (data NULL), the
# shape/stride arrays it points at and the shape as a tuple, reused by every
# call with that layout.
_templates: dict[tuple[Any, ...], tuple[L.DLTensor, Any, tuple[int, ...]]] = {}
_copy_dl = L.DLTensor.from_buffer_copy


def _template(x: torch.Tensor, key: tuple[Any, ...]) -> tuple[L.DLTensor, Any, tuple[int, ...]]:
    code_bits = _DL_BY_TORCH.get(x.dtype)
    if code_bits is None:
        raise UnsupportedError("torch tensor of dtype %s: libquant takes float32, bfloat16 or float16" % x.dtype)
    shape = tuple(x.shape)
    nd = len(shape)
    sh = (C.c_int64 * max(nd, 1))(*shape)
    dl = L.DLTensor()
    dl.ndim = nd
    dl.dtype.code, dl.dtype.bits = code_bits
    dl.dtype.lanes = 1
    dl.shape = sh
    st = None
    if not x.is_contiguous():
        st = (C.c_int64 * max(nd, 1))(*x.stride())
        dl.strides = st
    dev = x.device
    if dev.type == "cuda":
        dl.device.device_type = L.kDLCUDA
        dl.device.device_id = dev.index if dev.index is not None else torch.cuda.current_device()
    elif dev.type == "cpu":
        dl.device.device_type = L.kDLCPU
    else:
        raise UnsupportedError("torch tensor on %s: libquant takes CPU and CUDA tensors" % dev)
    t = (dl, (sh, st), shape)
    if len(_templates) > 512:
        _templates.clear()
    _templates[key] = t
    return t


def from_torch(x: torch.Tensor) -> "Tensor":
    """A DLTensor over a torch tensor's memory (not copied); CUDA tensors carry
    torch's current stream of their device."""
    cuda = x.is_cuda
    dev = x.get_device() if cuda else -1
    key = (x.dtype, x.shape, dev, None if x.is_contiguous() else x.stride())
    tmpl = _templates.get(key)
    if tmpl is None:
        tmpl = _template(x, key)
    dl = _copy_dl(tmpl[0])
    dl.data = x.data_ptr()
    stream = current_stream(dev) if cuda else None
    return Tensor(dl, (tmpl, x), stream, tmpl[2], "torch", x)


def run_args(x: torch.Tensor) -> tuple[Any, int, int | None]:
    """_dlpack.numpy_run_args for a torch tensor: from_torch's template, data
    pointer and stream, without the DLTensor."""
    cuda = x.is_cuda
    dev = x.get_device() if cuda else -1
    tmpl = _templates.get((x.dtype, x.shape, dev, None if x.is_contiguous() else x.stride()))
    return tmpl, x.data_ptr(), current_stream(dev) if cuda else None


def buffer_view(buf: "Buffer") -> torch.Tensor:
    """A typed torch tensor over a libquant buffer (zero-copy through DLPack)."""
    raw = from_dlpack(buf.bytes_view())  # uint8 [nbytes]; keeps buf alive
    if buf.packed_fp6:  # torch has no FP6 dtype: the packed bytes (libquant.unpack_fp6)
        return raw.view(buf.packed_shape())
    if buf.packed_fp4 and FLOAT4_X2 is not None:
        dt = FLOAT4_X2
    else:
        dt = torch_dtype(buf._code, buf._bits)
    t = raw.view(dt) if dt != torch.uint8 else raw
    if buf.strides is None:
        return t.view(buf.shape)
    return t.as_strided(buf.shape, buf.strides)


def empty(shape: tuple[int, ...], dtype: Any, device: Any) -> torch.Tensor:
    """torch.empty on a device given as a torch.device or a libquant Device."""
    from ._core import Device

    if isinstance(device, Device):
        device = torch.device("cuda", device.index) if device.type == "cuda" else torch.device("cpu")
    if not isinstance(dtype, torch.dtype):
        dtype = _TORCH_BY_DL[dl_from_any(dtype)]
    return torch.empty(shape, dtype=dtype, device=device)


def dl_from_any(dtype: Any) -> tuple[int, int]:
    from ._dlpack import dl_dtype as _d

    return _d(dtype)


# --- PyTorch's caching allocator for libquant's device buffers --------------
#
# Inside a CUDA graph capture, every allocation must come from the graph's
# memory pool and nothing may synchronise. libquant's own device buffers (the
# quantized input and grad_output, saved contexts, GEMM scratch) come from the
# CUDA plugin's cudaMallocAsync otherwise; while a capture is under way on the
# current stream, torch_allocator_if_capturing() hands them to torch's caching
# allocator instead (quant_set_device_allocator), which puts them in the
# capture's private pool. Outside captures the plugin's allocator stays (a
# Python callback per allocation would cost microseconds per call).


def _torch_alloc(_user: Any, device: int, nbytes: int, stream: Any, out: Any) -> int:
    try:
        out[0] = torch.cuda.caching_allocator_alloc(nbytes, device, int(stream or 0))
        return 0
    except Exception:  # reported to the caller as QUANT_ERROR_OUT_OF_MEMORY
        return 1


def _torch_free(_user: Any, _device: int, ptr: Any, _stream: Any) -> None:
    torch.cuda.caching_allocator_delete(int(ptr))  # type: ignore[no-untyped-call]


_ALLOCATOR = L.quant_device_allocator(C.sizeof(L.quant_device_allocator), L.DEVICE_ALLOC_FN(_torch_alloc),
                                      L.DEVICE_FREE_FN(_torch_free), None)


class torch_allocator_if_capturing:
    """While the current CUDA stream is capturing a graph, libquant's CUDA buffers
    come from torch's caching allocator (the graph's pool); otherwise nothing
    changes. Buffers keep the allocator they came from when they are freed."""

    __slots__ = ("on",)

    def __init__(self, t: torch.Tensor) -> None:
        self.on = bool(t.is_cuda and torch.cuda.is_current_stream_capturing())

    def __enter__(self) -> None:
        if self.on:
            L.check(L.lib().quant_set_device_allocator(L.kDLCUDA, C.byref(_ALLOCATOR)))

    def __exit__(self, *exc: Any) -> None:
        if self.on:
            L.check(L.lib().quant_set_device_allocator(L.kDLCUDA, None))
