"""Quantizers, quantized tensors, dequantize, GEMM, capability table, plugins."""

from __future__ import annotations

import ctypes as C
import os
import sys
import threading
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Sequence, Union

import numpy as np

from . import _lib as L
from ._handle import Owned
from ._dlpack import FP6_DTYPES, Buffer, Tensor, as_dltensor, as_output, dl_dtype
from ._errors import InvalidArgumentError, InvalidHandleError, LibquantError, StateError

if TYPE_CHECKING:
    import torch

    ArrayLike = Union[np.ndarray[Any, Any], "torch.Tensor", Any]
else:
    ArrayLike = Any

# ---------------------------------------------------------------------------
# Small value types and argument parsing
# ---------------------------------------------------------------------------

ROWWISE = 1
COLUMNWISE = 2
BOTH = 3

_USAGES = {"rowwise": 1, "columnwise": 2, "both": 3, "all": 3}
_DIRECTIONS = {"any": 0, "rowwise": 1, "columnwise": 2}
_KINDS = {"data": 0, "scale_inv": 1, "amax": 2}
_ENUMS: dict[str, dict[str, int]] = {
    "element": {"default": 0, "e4m3": 1, "e5m2": 2, "e2m1": 3, "e2m3": 4, "e3m2": 5},
    "scaling": {"current": 0, "delayed": 1},
    "amax_compute_algo": {"max": 0, "most_recent": 1},
    "scale_rounding": {"rceil": 0, "floor": 1},
    "rht": {"off": 0, "default": 1, "custom_mask": 2, "custom": 2},
}
_BACKWARD_OVERRIDES = {"none": 0, "high_precision": 1, "dequantized": 2}


def _usage(u: int | str) -> int:
    if isinstance(u, str):
        try:
            return _USAGES[u.lower()]
        except KeyError:
            raise InvalidArgumentError("usage %r: want 'rowwise', 'columnwise', 'both' or QUANT_USAGE_* bits"
                                       % u) from None
    return int(u)


def _direction(d: int | str | None) -> int:
    if d is None:
        return 0
    if isinstance(d, str):
        try:
            return _DIRECTIONS[d.lower()]
        except KeyError:
            raise InvalidArgumentError("direction %r: want 'any', 'rowwise' or 'columnwise'" % d) from None
    return int(d)


def _enum(name: str, v: int | str | bool) -> int:
    if isinstance(v, str):
        table = _ENUMS.get(name, {})
        try:
            return table[v.lower()]
        except KeyError:
            raise InvalidArgumentError("%s %r: want one of %s or an integer" % (name, v, sorted(table))) from None
    return int(v)


class Device:
    """A device: ``Device("cpu")``, ``Device("cuda:1")`` or ``Device(kDLCUDA, 1)``."""

    __slots__ = ("device_type", "index")
    device_type: int
    index: int

    def __init__(self, device: int | str | "Device" = "cpu", index: int = 0) -> None:
        if isinstance(device, Device):
            self.device_type, self.index = device.device_type, device.index
            return
        if isinstance(device, str):
            name, _, idx = device.partition(":")
            types = {"cpu": L.kDLCPU, "cuda": L.kDLCUDA}
            if name not in types:
                raise InvalidArgumentError("device %r: want 'cpu' or 'cuda[:N]'" % device)
            self.device_type = types[name]
            self.index = int(idx) if idx else index
            return
        if type(device).__name__ == "device":  # torch.device
            d = Device(str(device))
            self.device_type, self.index = d.device_type, d.index
            return
        self.device_type = int(device)
        self.index = index

    @property
    def type(self) -> str:
        return {L.kDLCPU: "cpu", L.kDLCUDA: "cuda"}.get(self.device_type, "dlpack%d" % self.device_type)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            other = Device(other)
        return isinstance(other, Device) and (self.device_type, self.index) == (other.device_type, other.index)

    def __hash__(self) -> int:
        return hash((self.device_type, self.index))

    def __repr__(self) -> str:
        return "cpu" if self.device_type == L.kDLCPU else "%s:%d" % (self.type, self.index)

    def _dl(self) -> L.DLDevice:
        return L.DLDevice(self.device_type, self.index)


def version() -> str:
    """The library version, "MAJOR.MINOR.PATCH" (quant_version)."""
    return bytes(L.lib().quant_version()).decode()


def abi_version() -> int:
    """The ABI version of the loaded library (quant_abi_version)."""
    return int(L.lib().quant_abi_version())


def library_path() -> str:
    """The path of the loaded libquant.so."""
    return str(L.lib().path)


def status_string(status: int) -> str:
    """The name of a quant_status ("QUANT_ERROR_STATE")."""
    return bytes(L.lib().quant_status_string(status)).decode()


def _is_torch(x: Any) -> bool:
    return "torch" in sys.modules and isinstance(x, sys.modules["torch"].Tensor)


def _alloc(shape: tuple[int, ...], dtype: Any, device: Device, like_torch: bool) -> Any:
    """A new output array: NumPy on the CPU unless torch is wanted; torch on CUDA."""
    if like_torch or device.device_type != L.kDLCPU:
        from . import _torch

        return _torch.empty(shape, dtype, device)
    code_bits = dl_dtype(dtype)
    from ._dlpack import numpy_dtype

    return np.empty(shape, dtype=numpy_dtype(*code_bits))


def _device_of(t: Tensor) -> Device:
    return Device(t.dl.device.device_type, t.dl.device.device_id)


def _device_stream(explicit: int | None, device: Device) -> int | None:
    """explicit, else torch's current stream for a CUDA device when torch is loaded."""
    if explicit is not None:
        return int(explicit)
    if device.device_type == L.kDLCUDA and "torch" in sys.modules:
        from . import _torch

        return _torch.current_stream(device.index)
    return None


def _stream(explicit: int | None, *tensors: Tensor | None) -> int | None:
    if explicit is not None:
        return int(explicit)
    for t in tensors:
        if t is not None and t.stream is not None:
            return t.stream
    return None


@dataclass(frozen=True)
class BufferDesc:
    """One buffer of a layout (quant_buffer_desc)."""

    direction: str  # "rowwise" or "columnwise"
    kind: str  # "data", "scale_inv" or "amax"
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    dl_dtype: tuple[int, int] = field(repr=False, default=(0, 0))


def _dtype_name(code: int, bits: int) -> str:
    from ._dlpack import DTYPE_NAMES

    return DTYPE_NAMES.get((code, bits), "dlpack(%d,%d)" % (code, bits))


_KIND_NAMES = {0: "data", 1: "scale_inv", 2: "amax"}
_DIR_NAMES = {1: "rowwise", 2: "columnwise"}

# ---------------------------------------------------------------------------
# Quantizer
# ---------------------------------------------------------------------------


def _layout(h: int, shape: Sequence[int], usage: int = 0) -> list[BufferDesc]:
    """quant_quantizer_layout_usage: the buffers of a quantize of shape with
    usage (0: the quantizer's)."""
    shape = tuple(int(s) for s in shape)
    sh = (C.c_int64 * max(len(shape), 1))(*shape)
    n = C.c_size_t()
    lib = L.lib()
    L.check(lib.quant_quantizer_layout_usage(h, usage, sh, len(shape), None, 0, C.byref(n)))
    descs = (L.quant_buffer_desc * max(n.value, 1))()
    L.check(lib.quant_quantizer_layout_usage(h, usage, sh, len(shape), descs, n.value, C.byref(n)))
    return [BufferDesc(_DIR_NAMES.get(d.direction, str(d.direction)), _KIND_NAMES.get(d.kind, str(d.kind)),
                       _dtype_name(d.dtype.code, d.dtype.bits), tuple(d.shape[i] for i in range(d.ndim)),
                       int(d.nbytes), (d.dtype.code, d.dtype.bits))
            for d in descs[: n.value]]


def _get_usage(h: int) -> int:
    u = C.c_uint32()
    L.check(L.lib().quant_quantizer_get_usage(h, C.byref(u)))
    return int(u.value)


class Quantizer(Owned):
    """A quantizer (quant_quantizer): one format and its parameters.

    ``Quantizer(format, **options)`` takes the fields of quant_quantizer_config
    by name, keyword-only, with its defaults (zero: the format's default).
    Enumerations accept their names too: ``element="e5m2"``,
    ``scaling="delayed"``, ``amax_compute_algo="most_recent"``,
    ``scale_rounding="floor"``, ``rht="default"``, ``usage="rowwise"``.
    ``dtype`` (identity only) is a NumPy/torch dtype or a name. A value the
    format does not take raises the library's error (InvalidArgumentError, ...).

    Threads may share a quantizer. ``quantize(usage=...)`` passes the usage in
    the call's options (quant_quantize_options.usage) and leaves the quantizer's
    own usage alone, so no other thread ever sees it; no Python-side lock is
    taken per call.
    """

    _free_fn = "quant_quantizer_free"

    _h: int | None
    _deferred: int | None = None

    def __init__(
        self,
        format: str,
        *,
        usage: int | str = 0,
        element: int | str = 0,
        scaling: int | str = 0,
        force_pow2_scales: bool = False,
        amax_epsilon: float = 0.0,
        amax_history_len: int = 0,
        amax_compute_algo: int | str = 0,
        margin: float = 0.0,
        block_dims: int = 0,
        fp32_scales: bool = False,
        scale_rounding: int | str = 0,
        gemm_swizzled_scales: bool = False,
        rht: int | str | bool = 0,
        rht_sign_mask: int = 0,
        stochastic_rounding: bool = False,
        seed: int = 0,
        offset: int = 0,
        dtype: Any = None,
    ) -> None:
        self._h = None
        if not isinstance(format, str):
            raise InvalidArgumentError("format: want a str, got %s" % type(format).__name__)
        c = L.quant_quantizer_config()
        c.struct_size = C.sizeof(c)
        c.format = format.encode()
        c.usage = _usage(usage)
        c.element = _enum("element", element)
        c.scaling = _enum("scaling", scaling)
        c.force_pow2_scales = int(force_pow2_scales)
        c.amax_epsilon = float(amax_epsilon)
        c.amax_history_len = int(amax_history_len)
        c.amax_compute_algo = _enum("amax_compute_algo", amax_compute_algo)
        c.margin = float(margin)
        c.block_dims = int(block_dims)
        c.fp32_scales = int(fp32_scales)
        c.scale_rounding = _enum("scale_rounding", scale_rounding)
        c.gemm_swizzled_scales = int(gemm_swizzled_scales)
        c.rht = _enum("rht", rht)
        c.rht_sign_mask = int(rht_sign_mask)
        c.stochastic_rounding = int(stochastic_rounding)
        c.seed = int(seed)
        c.offset = int(offset)
        if dtype is not None:
            if isinstance(dtype, tuple):
                code, bits = dtype
            else:
                code, bits = dl_dtype(dtype)
            c.dtype.code, c.dtype.bits, c.dtype.lanes = code, bits, 1
        h = C.c_void_p()
        L.check(L.lib().quant_quantizer_create(C.byref(c), C.byref(h)))
        self._h = h.value
        self._views: weakref.WeakSet[Any] = weakref.WeakSet()
        self.format = format
        self.options = {k: v for k, v in locals().items() if k not in ("self", "format", "c", "h")}

    @classmethod
    def _adopt(cls, handle: int, format: str) -> "Quantizer":
        q = cls.__new__(cls)
        q._h = handle
        q._views = weakref.WeakSet()
        q.format = format
        q.options = {}
        return q

    @classmethod
    def hybrid(cls, rowwise: "Quantizer", columnwise: "Quantizer", *,
               columnwise_source: int | str = "original") -> "Quantizer":
        """A hybrid quantizer: rowwise's format for the rowwise direction, columnwise's
        for the columnwise one (quant_quantizer_create_hybrid). columnwise_source:
        "original" or "rowwise_dequantized"."""
        src = {"original": 0, "rowwise_dequantized": 1}
        s = src.get(columnwise_source, None) if isinstance(columnwise_source, str) else int(columnwise_source)
        if s is None:
            raise InvalidArgumentError("columnwise_source %r: want 'original' or 'rowwise_dequantized'"
                                       % columnwise_source)
        h = C.c_void_p()
        L.check(L.lib().quant_quantizer_create_hybrid(rowwise.handle, columnwise.handle, s, C.byref(h)))
        assert h.value is not None
        q = cls._adopt(h.value, "hybrid(%s, %s)" % (rowwise.format, columnwise.format))
        return q

    # -- lifetime -------------------------------------------------------------
    @property
    def handle(self) -> int:
        """The quant_quantizer* (raises InvalidHandleError once closed)."""
        h = self._h
        if h is None:
            raise InvalidHandleError("quantizer: this Quantizer is closed")
        return h

    def _views_alive(self) -> bool:
        # views of its delayed-scaling state keep the handle until the last goes
        return bool(getattr(self, "_views", None))

    def __repr__(self) -> str:
        return "Quantizer(%r%s)" % (self.format, "".join(", %s=%r" % kv for kv in self.options.items()
                                                            if kv[1] not in (0, 0.0, False, None)))

    # -- usage ----------------------------------------------------------------
    @property
    def usage(self) -> int:
        """Which directions the next quantize produces (QUANT_USAGE_* bits)."""
        return _get_usage(self.handle)

    @usage.setter
    def usage(self, usage: int | str) -> None:
        u = _usage(usage)
        L.check(L.lib().quant_quantizer_set_usage(self.handle, u))

    def set_usage(self, usage: int | str) -> None:
        """quant_quantizer_set_usage: "rowwise", "columnwise", "both" or bits."""
        self.usage = usage

    # -- layout ---------------------------------------------------------------
    def layout(self, shape: Sequence[int], *, usage: int | str | None = None) -> list[BufferDesc]:
        """The buffers quantizing a tensor of this shape produces (rowwise first),
        with the quantizer's usage or the given one (quant_quantizer_layout_usage)."""
        return _layout(self.handle, shape, 0 if usage is None else _usage(usage))

    # -- quantize -------------------------------------------------------------
    def _options(self, t: Tensor, amax: Any, persistent: bool, stream: int | None,
                 keep: list[Any], usage: int = 0) -> Any:
        s = _stream(stream, t)
        if amax is None and not persistent and s is None and not usage:
            return None
        o = L.quant_quantize_options()
        o.struct_size = C.sizeof(o)
        o.persistent = int(persistent)
        o.usage = usage
        if s is not None:
            o.stream = s
        if amax is not None:
            at = as_dltensor(amax)
            keep.append(at)
            o.amax = C.pointer(at.dl)
        return C.byref(o)

    def quantize(self, x: ArrayLike, *, usage: int | str | None = None, amax: ArrayLike | None = None,
                 persistent: bool = False, stream: int | None = None) -> "QTensor":
        """Quantizes x (FP32, BF16 or FP16; NumPy, torch, or any DLPack object, not
        copied) into a new QTensor. usage overrides the quantizer's usage for this
        call, atomically (see the class: other threads never see it); amax is an
        FP32 [2] (rowwise, columnwise) to use instead of computing it; persistent
        marks a weight that never loses a direction. CUDA work runs on ``stream``
        or torch's current stream."""
        h = self._h
        if h is None:
            raise InvalidHandleError("quantizer: this Quantizer is closed")
        u = 0 if usage is None else _usage(usage)
        t = as_dltensor(x)
        keep: list[Any] = []
        s = _stream(stream, t)
        if amax is None and not persistent and s is None and not u:
            opts = None
        else:
            opts = self._options(t, amax, persistent, stream, keep, u)
        out = C.c_void_p()
        lib = L.lib()
        st = lib.quant_quantize(h, t.dl, opts, C.byref(out))
        if st:
            raise lib.error(st)
        assert out.value is not None
        return QTensor(out.value, t.framework == "torch", s)

    def _into_plan(self, h: int, t: Tensor, dst: "QTensor", persistent: bool) -> dict[int, str]:
        """The directions of dst that quant_quantize_into would free (dropped, or
        re-allocated for a new layout), as {direction: what happens}; host/quantize.go's
        rule. A quantizer usage changed by another thread meanwhile makes the plan stale,
        as it would the call itself."""
        info = dst.info
        if _rows_cols(t.shape) != _rows_cols(info.shape) or _device_of(t) != info.device:
            return {}  # the library refuses it, changing nothing
        qu = _get_usage(h)
        usage = qu | (info.usage if info.persistent or persistent else 0)
        want: list[BufferDesc] | None
        try:
            want = _layout(h, info.shape, usage)
        except LibquantError:
            # identity without config.dtype has no layout before it quantizes: it
            # stores the input, [M, K] of the input's dtype (quant.h)
            want = None
        shared = dst._shares_storage()
        out: dict[int, str] = {}
        for d in (1, 2):
            if not info.usage & d:
                continue
            if not usage & d:
                out[d] = "dropped (the quantizer's usage lacks it)"
                continue
            wd: list[tuple[int, tuple[int, int], tuple[int, ...]]]
            if want is None:
                wd = [(0, (int(t.dl.dtype.code), int(t.dl.dtype.bits)), _rows_cols(t.shape))]
            else:
                wd = sorted((_KINDS[b.kind], b.dl_dtype, b.shape) for b in want if _DIRECTIONS[b.direction] == d)
            if wd != dst._buffer_layout(d):
                out[d] = "re-allocated (a new layout: %s)" % (dst.formats[d - 1] + " -> " + self.format)
        if shared and 1 not in out:
            out.pop(2, None)  # one storage serves both directions and survives
        return out

    def _into_args(self, x: ArrayLike, amax: ArrayLike | None, persistent: bool,
                   stream: int | None) -> tuple[int, Tensor, int | None, Any, list[Any]]:
        """quantize_into's and plan_into's arguments: the handle, x's DLTensor, the
        stream, the options (None for the defaults) and what keeps their memory."""
        h = self.handle
        t = as_dltensor(x)
        keep: list[Any] = []
        s = _stream(stream, t)
        opts = None if amax is None and not persistent and s is None else self._options(t, amax, persistent, stream, keep)
        return h, t, s, opts, keep

    def quantize_into(self, x: ArrayLike, dst: "QTensor", *, amax: ArrayLike | None = None,
                      persistent: bool = False, stream: int | None = None) -> "QTensor":
        """Re-quantizes x into dst, reusing its buffers (quant_quantize_into). Returns dst.

        Views of dst's buffers (Buffers and the NumPy arrays, torch tensors and
        DLPack capsules made from them) see the new codes where the buffers are
        reused in place. Where the call would free a direction's buffers that views
        still point at (a temporary dst loses a direction the quantizer's usage
        lacks; a new layout re-allocates one), it raises StateError and changes
        nothing: delete or copy those views first."""
        h, t, s, opts, _ = self._into_args(x, amax, persistent, stream)
        lib = L.lib()
        with dst._lock:
            dh = dst.handle
            if dst._views:
                dst._check_views("quantize_into", self._into_plan(h, t, dst, persistent))
            st = lib.quant_quantize_into(h, t.dl, opts, dh)
            if st:
                raise lib.error(st)
            dst._stream = s
        return dst

    def plan_into(self, x: ArrayLike, dst: "QTensor", *, amax: ArrayLike | None = None,
                  persistent: bool = False, stream: int | None = None) -> "QuantizePlan":
        """quant_quantize_plan_create: quantize_into(x, dst, ...) now, and a
        QuantizePlan that repeats it on other inputs of x's dtype, shape, strides
        and device at a fraction of the host time (QuantizePlan.run). The plan
        pins dst (close() and re-layouts raise StateError until the plan is
        closed) and keeps this quantizer's settings as they are now."""
        h, t, s, opts, keep = self._into_args(x, amax, persistent, stream)
        lib = L.lib()
        out = C.c_void_p()
        with dst._lock:
            dh = dst.handle
            if dst._views:
                dst._check_views("plan_into", self._into_plan(h, t, dst, persistent))
            st = lib.quant_quantize_plan_create(h, t.dl, opts, dh, C.byref(out))
            if st:
                raise lib.error(st)
            dst._stream = s
        assert out.value is not None
        return QuantizePlan(out.value, self, dst, t, keep)

    def quantize_grouped(self, xs: Sequence[ArrayLike], dsts: Sequence["QTensor"], *,
                         stream: int | None = None) -> list["QTensor"]:
        """Re-quantizes each xs[i] into dsts[i] in one call (quant_quantize_grouped):
        the bytes of quantize_into, tensor by tensor; on the GPU the CUDA
        plugin's kernels take the group in one launch for every format (fp8 and
        nvfp4 after their amax launches) (MoE experts).
        xs share one dtype and device; dsts are distinct. The same view rules as
        quantize_into hold for every dst. Returns dsts."""
        h = self.handle
        if len(xs) != len(dsts):
            raise InvalidArgumentError("quantize_grouped: xs has %d tensors but dsts has %d" % (len(xs), len(dsts)))
        ts = [as_dltensor(x) for x in xs]
        n = len(ts)
        a = L.quant_quantize_grouped_args()
        a.struct_size = C.sizeof(a)
        a.count = n
        inputs = (L.DLTensor * max(n, 1))(*[t.dl for t in ts])
        outs = (C.c_void_p * max(n, 1))()
        a.inputs = C.cast(inputs, C.POINTER(L.DLTensor))
        s = _stream(stream, *ts)
        if s is not None:
            a.stream = s
        lib = L.lib()
        # Every dst's lock, in one global order, so two grouped calls never
        # deadlock; each once (a set of ids: the list scan this replaced was
        # quadratic in the group).
        locked: list[Any] = []
        held: set[int] = set()
        try:
            for d in sorted(dsts, key=id):
                if id(d._lock) not in held:
                    d._lock.acquire()
                    held.add(id(d._lock))
                    locked.append(d._lock)
            for i, d in enumerate(dsts):
                outs[i] = d.handle
            a.outputs = C.cast(outs, C.POINTER(C.c_void_p))
            for i, d in enumerate(dsts):
                if d._views:
                    d._check_views("quantize_grouped", self._into_plan(h, ts[i], d, False))
            st = lib.quant_quantize_grouped(h, C.byref(a))
            if st:
                raise lib.error(st)
            for d in dsts:
                d._stream = s
        finally:
            for lock in reversed(locked):
                lock.release()
        return list(dsts)

    def empty(self, shape: Sequence[int], *, device: Any = "cpu", torch: bool | None = None) -> "QTensor":
        """A QTensor over newly allocated caller-side buffers for this shape (NumPy
        arrays on the CPU, torch tensors on CUDA or when torch=True), to fill with
        quantize_into: torch's caching allocator then owns the GPU memory."""
        dev = Device(device)
        use_torch = bool(torch) or dev.device_type != L.kDLCPU
        bufs: list[tuple[BufferDesc, Any]] = []
        for d in self.layout(shape):
            b: Any
            if use_torch:
                from . import _torch

                b = _torch.empty((d.nbytes,), "uint8", dev)
            else:
                b = np.zeros((d.nbytes,), np.uint8)
            bufs.append((d, b))
        return self.from_buffers(shape, [(d, b) for d, b in bufs])

    def from_buffers(self, shape: Sequence[int], buffers: Sequence[Any]) -> "QTensor":
        """A QTensor over caller-owned buffers, in layout() order (quant_qtensor_from_buffers).

        Each entry is an array (its dtype and shape must be what layout() lists), or a
        (BufferDesc, bytes-array) pair whose bytes are reinterpreted as the desc says.
        The QTensor keeps the arrays alive."""
        shape = tuple(int(s) for s in shape)
        sh = (C.c_int64 * max(len(shape), 1))(*shape)
        n = len(buffers)
        dls = (L.DLTensor * max(n, 1))()
        keep: list[Any] = []
        for i, b in enumerate(buffers):
            if isinstance(b, tuple):
                d, raw = b
                t = as_output(raw, "buffers[%d]" % i)
                dl = t.dl
                bsh = (C.c_int64 * max(len(d.shape), 1))(*d.shape)
                keep.append(bsh)
                dl.ndim = len(d.shape)
                dl.shape = bsh
                dl.strides = None
                dl.dtype.code, dl.dtype.bits = d.dl_dtype
            else:
                t = as_output(b, "buffers[%d]" % i)
            keep.append(t)
            dls[i] = t.dl
        out = C.c_void_p()
        L.check(L.lib().quant_qtensor_from_buffers(self.handle, sh, len(shape), dls, n, C.byref(out)))
        assert out.value is not None
        qt = QTensor(out.value, any(t.framework == "torch" for t in keep if isinstance(t, Tensor)))
        qt._borrowed = keep
        return qt

    def compute_amax(self, x: ArrayLike, *, out: ArrayLike | None = None, stream: int | None = None) -> Any:
        """The global amax(es) quantize would use: FP32 [rowwise, columnwise], on x's device."""
        t = as_dltensor(x)
        if out is None:
            out = _alloc((2,), "float32", _device_of(t), t.framework == "torch")
        o = as_output(out, "out")
        s = _stream(stream, t)
        L.check(L.lib().quant_compute_amax(self.handle, t.dl, o.dl, s))
        return out

    # -- delayed scaling ------------------------------------------------------
    def delayed_scaling_state(self, direction: int | str | None = None) -> tuple[Buffer, Buffer]:
        """Zero-copy views (CPU) of the FP32 scale [1] and amax history [L]
        (quant_delayed_scaling_state). history[0] stages this step's amax."""
        s, hist = L.DLTensor(), L.DLTensor()
        L.check(L.lib().quant_delayed_scaling_state(self.handle, _direction(direction), C.byref(s), C.byref(hist)))
        return Buffer(s, self), Buffer(hist, self)

    def update_delayed_scaling(self, reduced_amax: float | None = None,
                               direction: int | str | None = None) -> None:
        """Runs the amax-history and scale update; reduced_amax is this step's amax
        after a cross-process MAX reduction (None: the staged history[0])."""
        r = C.byref(C.c_float(reduced_amax)) if reduced_amax is not None else None
        L.check(L.lib().quant_delayed_scaling_update(self.handle, _direction(direction), r))


# ---------------------------------------------------------------------------
# QTensor
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class QTensorInfo:
    """quant_qtensor_info."""

    shape: tuple[int, ...]
    usage: int
    device: Device
    persistent: bool
    rowwise_format: str
    columnwise_format: str


class QuantizePlan(Owned):
    """A quantize_into prepared once (Quantizer.plan_into), run again on inputs of
    the same dtype, shape, strides and device (quant_quantize_plan_run): each run
    gives quantize_into's bytes into the plan's dst. A plain quantizer on the CUDA
    plugin runs without entering the library's Go code (issue #15: host time per
    call). The plan keeps its Quantizer and pins its dst until close()."""

    _free_fn = "quant_quantize_plan_free"

    def __init__(self, handle: int, quantizer: Quantizer, dst: "QTensor", t: Tensor, keep: list[Any]) -> None:
        self._h = handle
        self._quantizer = quantizer  # closed after the plan: the plan frees first
        self._dst = dst
        self._keep = keep  # the amax option's memory
        self._tmpl = t.keep[0] if t.framework in ("numpy", "torch") else None
        # A run on an array of the creation input's type and layout reads its
        # pointer (and stream) without building a DLTensor: the template, one
        # object per dtype, shape, strides and device, names the layout.
        self._xtype = type(t.source)
        self._fast: Any = None
        if t.framework == "numpy":
            from ._dlpack import numpy_run_args

            self._fast = numpy_run_args
        elif t.framework == "torch":
            from . import _torch

            self._fast = _torch.run_args
        dl = t.dl
        self._layout = _plan_layout(t)
        self._offset = int(dl.byte_offset)

    @property
    def dst(self) -> "QTensor":
        """The tensor every run writes."""
        return self._dst

    def run(self, x: ArrayLike, *, stream: int | None = None) -> "QTensor":
        """quantize_into(x, dst) with the plan's arguments: x must have the plan's
        input dtype, shape, strides and device (else InvalidArgumentError). CUDA work
        runs on ``stream`` or torch's current stream. Returns dst."""
        h = self._h
        if h is None:
            raise InvalidHandleError("plan: this QuantizePlan is closed")
        tmpl = None
        if type(x) is self._xtype and self._fast is not None:
            tmpl, ptr, s0 = self._fast(x)
        if tmpl is None or tmpl is not self._tmpl:
            t = as_dltensor(x)
            dl = t.dl
            if _plan_layout(t) != self._layout or int(dl.byte_offset) != self._offset:
                raise InvalidArgumentError("x: dtype, shape %s, strides or device differ from the plan's input (%s)"
                                           % (list(t.shape), self._layout))
            ptr, s0 = dl.data, t.stream
        s = stream if stream is not None else s0
        lib = L.lib()
        st = lib.quant_quantize_plan_run(h, ptr, s)
        if st:
            raise lib.error(st)
        self._dst._stream = s
        return self._dst


def _plan_layout(t: Tensor) -> tuple[Any, ...]:
    """What a plan's inputs share: dtype, shape, strides and device."""
    dl = t.dl
    nd = int(dl.ndim)
    strides = tuple(dl.strides[i] for i in range(nd)) if dl.strides else None
    return ((int(dl.dtype.code), int(dl.dtype.bits)), tuple(t.shape), strides,
            (int(dl.device.device_type), int(dl.device.device_id)))


def _info(info: L.quant_qtensor_info) -> QTensorInfo:
    return QTensorInfo(tuple(info.shape[i] for i in range(min(max(info.ndim, 0), L.MAX_DIMS))), int(info.usage),
                       Device(info.device.device_type, info.device.device_id), bool(info.persistent),
                       info.rowwise_format.decode(), info.columnwise_format.decode())


_PACKED_FP4_FORMATS = ("mxfp4", "nvfp4")


class DirectionView:
    """The buffers of one direction of a QTensor: data, scale_inv and amax
    (``None`` where the format has no such buffer)."""

    def __init__(self, qt: "QTensor", direction: int, format: str) -> None:
        self.direction = _DIR_NAMES[direction]
        self.format = format
        self.data = qt.buffer(direction, "data")
        self.scale_inv = qt._maybe_buffer(direction, 1)
        self.amax = qt._maybe_buffer(direction, 2)

    def __repr__(self) -> str:
        return "DirectionView(%s, format=%r, data=%r, scale_inv=%r, amax=%r)" % (
            self.direction, self.format, self.data, self.scale_inv, self.amax)


class QTensor(Owned):
    """A quantized tensor (quant_qtensor): up to two directions, each with its own
    format and buffers. ``rowwise`` / ``columnwise`` give zero-copy views of the
    buffers (``None`` for a direction the tensor does not hold).

    Views never outlive the memory they show. A view (a Buffer, a DirectionView,
    and the NumPy arrays, torch tensors and DLPack capsules made from a Buffer)
    keeps the QTensor and its memory alive: ``close()`` and garbage collection free
    the library's buffers only when the last view is gone. ``update_usage`` and
    ``quantize_into``, which free a direction's buffers when they drop it or
    re-allocate it for a new layout, raise StateError and change nothing while
    views of that direction are alive (as NumPy's ``resize`` refuses while other
    arrays reference the memory): delete the views, or copy what you need
    (``np.array(view)``, ``tensor.clone()``), first. Views of directions that stay,
    and re-quantizing in place (same layout), are always allowed."""

    _free_fn = "quant_qtensor_free"

    _h: int | None

    _deferred: int | None = None

    def __init__(self, handle: int, torch_like: bool = False, stream: int | None = None) -> None:
        self._h = handle
        self._torch_like = torch_like
        self._borrowed: list[Any] = []
        self._views: weakref.WeakSet[Any] | None = None
        # Held while the set of buffers may change (update_usage, quantize_into)
        # and while a view is made, so that no view is made of memory being freed.
        self._lock = threading.Lock()
        self._stream = stream

    @property
    def last_stream(self) -> int | None:
        """The CUDA stream (cudaStream_t as an int) of the last libquant call that
        used this tensor through this object; None for the default (NULL) stream.
        ``Buffer.__dlpack__`` orders a consumer's stream after it."""
        return self._stream

    @property
    def handle(self) -> int:
        """The quant_qtensor* (raises InvalidHandleError once closed)."""
        h = self._h
        if h is None:
            raise InvalidHandleError("tensor: this QTensor is closed")
        return h

    def _views_alive(self) -> bool:
        # NumPy arrays, torch tensors and DLPack capsules of its buffers
        return bool(self._views)

    # -- description ----------------------------------------------------------
    @property
    def info(self) -> QTensorInfo:
        """quant_qtensor_get_info."""
        i = L.quant_qtensor_info()
        i.struct_size = C.sizeof(i)
        L.check(L.lib().quant_qtensor_get_info(self.handle, C.byref(i)))
        return _info(i)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.info.shape

    @property
    def usage(self) -> int:
        return self.info.usage

    @property
    def device(self) -> Device:
        return self.info.device

    @property
    def persistent(self) -> bool:
        return self.info.persistent

    @persistent.setter
    def persistent(self, value: bool) -> None:
        L.check(L.lib().quant_qtensor_set_persistent(self.handle, int(value)))

    def set_persistent(self, value: bool = True) -> None:
        """quant_qtensor_set_persistent."""
        self.persistent = value

    @property
    def formats(self) -> tuple[str, str]:
        """(rowwise format, columnwise format); "" for a missing direction."""
        i = self.info
        return i.rowwise_format, i.columnwise_format

    def __repr__(self) -> str:
        if self._h is None:
            return "QTensor(closed)"
        i = self.info
        return "QTensor(shape=%s, rowwise=%r, columnwise=%r, device=%s%s)" % (
            i.shape, i.rowwise_format or None, i.columnwise_format or None, i.device,
            ", persistent" if i.persistent else "")

    # -- buffers --------------------------------------------------------------
    def buffer(self, direction: int | str, kind: int | str) -> Buffer:
        """A zero-copy view of one buffer (quant_qtensor_buffer). It keeps the
        memory alive (see the class)."""
        d = _direction(direction)
        k = _KINDS[kind] if isinstance(kind, str) else int(kind)
        with self._lock:
            i = self.info
            if d == 0:  # QUANT_DIRECTION_ANY: rowwise when present (quant.h)
                d = 1 if i.usage & 1 else 2
            v = L.DLTensor()
            L.check(L.lib().quant_qtensor_buffer(self.handle, d, k, C.byref(v)))
            fmt = ""
            if k == 0 and d in (1, 2):
                fmt = (i.rowwise_format, i.columnwise_format)[d - 1]
            packed = k == 0 and fmt in _PACKED_FP4_FORMATS and v.dtype.code == L.kDLUInt and v.dtype.bits == 8
            fp6 = (int(v.dtype.code), int(v.dtype.bits)) in FP6_DTYPES
            width = None
            if packed or fp6:  # the logical row: K rowwise; M (the flattened leading dims) for the transposed columnwise
                m, kk = _rows_cols(i.shape)
                width = kk if d == 1 else m
            if self._views is None:
                self._views = weakref.WeakSet()
            return Buffer(v, self, packed, width if packed else None, d, fp6_width=width if fp6 else None)

    def _maybe_buffer(self, direction: int, kind: int) -> Buffer | None:
        with self._lock:
            v = L.DLTensor()
            st = L.lib().quant_qtensor_buffer(self.handle, direction, kind, C.byref(v))
            if st:
                return None
            if self._views is None:
                self._views = weakref.WeakSet()
            return Buffer(v, self, direction=direction)

    # -- views vs. freeing --------------------------------------------------------
    def _buffer_layout(self, d: int) -> list[tuple[int, tuple[int, int], tuple[int, ...]]]:
        """(kind, DLPack dtype, shape) of direction d's buffers, by kind."""
        out = []
        lib = L.lib()
        for k in (0, 1, 2):
            v = L.DLTensor()
            if lib.quant_qtensor_buffer(self.handle, d, k, C.byref(v)) == 0:
                out.append((k, (int(v.dtype.code), int(v.dtype.bits)), tuple(v.shape[i] for i in range(v.ndim))))
        return out

    def _shares_storage(self) -> bool:
        """Whether one storage serves both directions (identity): dropping one frees nothing."""
        lib = L.lib()
        r, c = L.DLTensor(), L.DLTensor()
        return bool(lib.quant_qtensor_buffer(self.handle, 1, 0, C.byref(r)) == 0
                    and lib.quant_qtensor_buffer(self.handle, 2, 0, C.byref(c)) == 0 and r.data == c.data)

    def _check_views(self, op: str, freed: dict[int, str]) -> None:
        """Raises StateError if views of a direction in freed are alive (self._lock held)."""
        if not freed or not self._views:
            return
        views = [b for b in list(self._views) if b._direction in freed]
        if not views:
            return
        dirs = sorted({b._direction for b in views})
        what = "; ".join("the %s direction would be %s" % (_DIR_NAMES[d], freed[d]) for d in dirs)
        n = len(views)
        raise StateError(
            "%s: %s; %d live view%s of %s buffers (Buffer objects, held directly, by a DirectionView, or by NumPy "
            "arrays, torch tensors or DLPack capsules made from them) would point at freed memory. Nothing was "
            "changed: delete those views, or copy what you need (np.array(view), tensor.clone()), first"
            % (op, what, n, "s" if n > 1 else "", "its" if len(dirs) == 1 else "their"))

    def _direction_view(self, d: int) -> DirectionView | None:
        fmt = self.formats[d - 1]
        return DirectionView(self, d, fmt) if fmt else None

    @property
    def rowwise(self) -> DirectionView | None:
        """The rowwise direction's buffers, or None."""
        return self._direction_view(1)

    @property
    def columnwise(self) -> DirectionView | None:
        """The columnwise direction's buffers, or None."""
        return self._direction_view(2)

    def buffers(self) -> Iterator[tuple[str, str, Buffer]]:
        """Every buffer as (direction, kind, Buffer)."""
        for d in (1, 2):
            v = self._direction_view(d)
            if v is None:
                continue
            for k in ("data", "scale_inv", "amax"):
                b = getattr(v, k)
                if b is not None:
                    yield v.direction, k, b

    # -- operations -----------------------------------------------------------
    def dequantize(self, *, direction: int | str | None = None, out: ArrayLike | None = None,
                   dtype: Any = "float32", undo_transform: bool = False, stream: int | None = None) -> Any:
        """The values (quant_dequantize_ex) in out, or a new FP32/BF16/FP16 array of
        the tensor's shape (NumPy on the CPU, torch on CUDA or for torch inputs).
        direction: "any" (rowwise when present), "rowwise", "columnwise".
        undo_transform maps values stored in a transformed domain (nvfp4 RHT) back."""
        h = self.handle
        if out is None:
            i = self.info
            out = _alloc(i.shape, dtype, i.device, self._torch_like)
        o = as_output(out, "out")
        opts = L.quant_dequantize_options()
        opts.struct_size = C.sizeof(opts)
        opts.direction = _direction(direction)
        opts.undo_transform = int(undo_transform)
        s = _stream(stream, o)
        if s is not None:
            opts.stream = s
        L.check(L.lib().quant_dequantize_ex(h, C.byref(opts), o.ref))
        self._stream = s
        return out

    def update_usage(self, usage: int | str, *, stream: int | None = None) -> None:
        """Keeps exactly these directions, deriving a missing one where the format can
        (quant_qtensor_update_usage). Raises StateError, changing nothing, when it
        would drop a direction that views are alive of (see the class)."""
        u = _usage(usage)
        with self._lock:
            h = self.handle
            i = self.info
            s = _device_stream(stream, i.device)
            # A persistent tensor refuses any drop itself, and a usage naming no
            # direction (or unknown bits) is the library's InvalidArgumentError.
            if self._views and not i.persistent and u in (1, 2, 3):
                drop = {d: "dropped" for d in (1, 2) if i.usage & d and not u & d}
                if drop and not (len(drop) == 1 and i.usage == 3 and self._shares_storage()):
                    self._check_views("update_usage", drop)
            L.check(L.lib().quant_qtensor_update_usage(h, u, s))
            self._stream = s

    def set_gemm_swizzled_scales(self, swizzled: bool = True, *, stream: int | None = None) -> None:
        """Converts the scales to the GEMM-swizzled layout or back, in place."""
        s = _device_stream(stream, self.device)
        L.check(L.lib().quant_qtensor_set_gemm_swizzled_scales(self.handle, int(swizzled), s))
        self._stream = s


# ---------------------------------------------------------------------------
# Module-level operations
# ---------------------------------------------------------------------------


def quantize(x: ArrayLike, quantizer: Quantizer | str, *, usage: int | str | None = None,
             amax: ArrayLike | None = None, persistent: bool = False, stream: int | None = None,
             **options: Any) -> QTensor:
    """Quantizes x with a Quantizer, or with a new one made from a format name and options."""
    q = quantizer if isinstance(quantizer, Quantizer) else Quantizer(quantizer, **options)
    return q.quantize(x, usage=usage, amax=amax, persistent=persistent, stream=stream)


def quantize_into(x: ArrayLike, quantizer: Quantizer, dst: QTensor, **kw: Any) -> QTensor:
    """quant_quantize_into: re-quantizes x into dst's buffers."""
    return quantizer.quantize_into(x, dst, **kw)


def quantize_grouped(xs: Sequence[ArrayLike], quantizer: Quantizer, dsts: Sequence[QTensor],
                     **kw: Any) -> list[QTensor]:
    """quant_quantize_grouped: re-quantizes each xs[i] into dsts[i] in one call."""
    return quantizer.quantize_grouped(xs, dsts, **kw)


def dequantize(qt: QTensor, **kw: Any) -> Any:
    """QTensor.dequantize."""
    return qt.dequantize(**kw)


def update_usage(qt: QTensor, usage: int | str) -> None:
    """QTensor.update_usage."""
    qt.update_usage(usage)


def compute_amax(quantizer: Quantizer, x: ArrayLike, **kw: Any) -> Any:
    """Quantizer.compute_amax."""
    return quantizer.compute_amax(x, **kw)


def _rows_cols(shape: tuple[int, ...]) -> tuple[int, int]:
    if not shape:
        return 1, 1
    m = 1
    for s in shape[:-1]:
        m *= s
    return m, shape[-1]


def gemm(a: QTensor | ArrayLike, b: QTensor | ArrayLike, *, trans_a: bool = False, trans_b: bool = False,
         out: ArrayLike | None = None, out_dtype: Any = "float32", alpha: float | None = None,
         beta: float | None = None, c: ArrayLike | None = None, bias: ArrayLike | None = None,
         accumulate: bool = False, stream: int | None = None, exact: bool = False) -> Any:
    """D = alpha * op(A) * op(B) + beta * C + bias (+ D if accumulate), row-major,
    FP32 accumulation (quant_gemm). Operands are QTensors (read in the direction
    their contraction needs) or plain FP32/BF16/FP16 arrays. exact: never the
    fused Hopper kernels (tensor-core block sums, README), always the exact path, bit-stable
    across GPUs (quant_gemm_args.exact). Returns out, or a new [M, N] array of
    out_dtype."""
    args = L.quant_gemm_args()
    args.struct_size = C.sizeof(args)
    keep: list[Any] = []
    shapes = []
    devices = []
    torch_like = False
    for op, x, tr in ((args.a, a, trans_a), (args.b, b, trans_b)):
        op.trans = int(tr)
        if isinstance(x, QTensor):
            op.qtensor = x.handle
            if out is None:
                i = x.info
                shapes.append(i.shape)
                devices.append(i.device)
                torch_like = torch_like or x._torch_like
        else:
            t = as_dltensor(x)
            keep.append(t)
            op.tensor = C.pointer(t.dl)
            shapes.append(t.shape)
            devices.append(_device_of(t))
            torch_like = torch_like or t.framework == "torch"
    if out is None:
        if accumulate:
            raise InvalidArgumentError("accumulate: needs out (the D whose contents are added)")
        ar, ac = _rows_cols(shapes[0])
        br, bc = _rows_cols(shapes[1])
        m = ac if trans_a else ar
        n = br if trans_b else bc
        out = _alloc((m, n), out_dtype, devices[0], torch_like)
    d = as_output(out, "out")
    keep.append(d)
    args.d = C.pointer(d.dl)
    if c is not None:
        ct = as_dltensor(c)
        keep.append(ct)
        args.c = C.pointer(ct.dl)
    if bias is not None:
        bt = as_dltensor(bias)
        keep.append(bt)
        args.bias = C.pointer(bt.dl)
    if alpha is not None:
        fa = C.c_float(alpha)
        keep.append(fa)
        args.alpha = C.pointer(fa)
    if beta is not None:
        fb = C.c_float(beta)
        keep.append(fb)
        args.beta = C.pointer(fb)
    args.accumulate = int(accumulate)
    args.exact = int(exact)
    s = _stream(stream, *[k for k in keep if isinstance(k, Tensor)])
    if s is None and d.dl.device.device_type == L.kDLCUDA:
        s = _device_stream(None, _device_of(d))
    if s is not None:
        args.stream = s
    L.check(L.lib().quant_gemm(C.byref(args)))
    for x in (a, b):
        if isinstance(x, QTensor):
            x._stream = s
    return out


# ---------------------------------------------------------------------------
# Capability table
# ---------------------------------------------------------------------------

_LEVELS = {0: "unsupported", 1: "emulated", 2: "native"}


@dataclass(frozen=True)
class GemmSupport:
    """One row of the GEMM capability table (quant_gemm_support_entry)."""

    format_a: str
    format_b: str
    level: str  # "native", "emulated" or "unsupported"
    reason: str
    level_code: int = 0


def _support(e: L.quant_gemm_support_entry) -> GemmSupport:
    return GemmSupport(e.format_a.decode(), e.format_b.decode(), _LEVELS.get(e.level, str(e.level)),
                       e.reason.decode("utf-8", "replace"), int(e.level))


def gemm_support(format_a: str, format_b: str, device: Any = "cpu") -> GemmSupport:
    """How format_a x format_b multiply on a device (quant_gemm_support)."""
    e = L.quant_gemm_support_entry()
    L.check(L.lib().quant_gemm_support(Device(device)._dl(), format_a.encode(), format_b.encode(), C.byref(e)))
    return _support(e)


def gemm_support_table(device: Any = "cpu") -> list[GemmSupport]:
    """Every ordered pair of registered formats on a device, as rows (quant_gemm_support_table)."""
    dev = Device(device)._dl()
    lib = L.lib()
    n = C.c_size_t()
    L.check(lib.quant_gemm_support_table(dev, None, 0, C.byref(n)))
    entries = (L.quant_gemm_support_entry * max(n.value, 1))()
    L.check(lib.quant_gemm_support_table(dev, entries, n.value, C.byref(n)))
    return [_support(e) for e in entries[: n.value]]


# ---------------------------------------------------------------------------
# Plugins
# ---------------------------------------------------------------------------

_ORIGINS = {0: "explicit", 1: "env", 2: "auto"}
_OPS = {1: "amax", 2: "quantize", 4: "dequantize", 8: "derive", 16: "swizzle_scales", 32: "gemm"}


@dataclass(frozen=True)
class PluginKernel:
    """A kernel set of a plugin (quant_plugin_kernel_info)."""

    format: str
    device: Device
    ops: int
    op_names: tuple[str, ...]
    defines_format: bool


@dataclass(frozen=True)
class PluginInfo:
    """An entry of the plugin list (quant_plugin_info): a loaded plugin or a failed load."""

    index: int
    path: str
    name: str
    version: str
    abi_version: int
    origin: str
    status: int
    message: str
    formats: tuple[str, ...]
    kernels: tuple[PluginKernel, ...]

    @property
    def loaded(self) -> bool:
        return self.status == 0


def _uint_arg(name: str, v: Any, bits: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise InvalidArgumentError("%s: want an int, got %s" % (name, type(v).__name__))
    if not 0 <= v < 1 << bits:
        raise InvalidArgumentError("%s: %d is out of range (0 .. 2**%d - 1)" % (name, v, bits))
    return v


def load_plugin(path: str | os.PathLike[str], *, sha256: str | None = None, arena_bytes: int | None = None,
                call_timeout_ms: int | None = None) -> int:
    """Loads a plugin file and returns its index in the plugin list.

    The file is a native plugin (a .so exporting quant_plugin_get) or an
    executable format plugin built with pluginsdk (run as a child process; Go
    plugins such as examples/goplugin/mxfp6). Without options this is
    quant_plugin_load; any option makes it quant_plugin_load_ex:

    - ``sha256``: the file's expected SHA-256, 64 hex digits, checked for a
      native .so too. An executable runs only when its digest is known: from
      here or from the LIBQUANT_PLUGIN_MANIFEST file (sha256sum lines). A
      mismatch raises PluginError with the library's message.
    - ``arena_bytes``: executable plugins, the size of the memory shared with
      the child (None or 0: 16 GiB, virtual, used as touched).
    - ``call_timeout_ms``: executable plugins, the deadline of each call (None
      or 0: 60000); a call past it stops the plugin (PluginError).

    Loading a file already loaded is a no-op that returns the same index;
    with ``sha256`` it is first compared with the digest the file had when it
    was loaded (the code that runs), and a mismatch raises PluginError."""
    p = os.fspath(path)
    if not isinstance(p, str):
        raise InvalidArgumentError("path: want a str or os.PathLike[str], got %s" % type(p).__name__)
    idx = C.c_size_t()
    lib = L.lib()
    if sha256 is None and arena_bytes is None and call_timeout_ms is None:
        L.check(lib.quant_plugin_load(p.encode(), C.byref(idx)))
        return int(idx.value)
    o = L.quant_plugin_load_options()
    o.struct_size = C.sizeof(o)
    if sha256 is not None:
        if not isinstance(sha256, str):
            raise InvalidArgumentError("sha256: want a str of 64 hex digits, got %s" % type(sha256).__name__)
        o.sha256 = sha256.encode()
    if arena_bytes is not None:
        o.arena_bytes = _uint_arg("arena_bytes", arena_bytes, 64)
    if call_timeout_ms is not None:
        o.call_timeout_ms = _uint_arg("call_timeout_ms", call_timeout_ms, 32)
    L.check(lib.quant_plugin_load_ex(p.encode(), C.byref(o), C.byref(idx)))
    return int(idx.value)


def shutdown() -> None:
    """Stops every executable (out-of-process) plugin cleanly (quant_shutdown);
    native plugins stay loaded. Later calls on their formats raise PluginError
    naming quant_shutdown until the file is loaded again with load_plugin."""
    L.check(L.lib().quant_shutdown())


def _s(b: bytes | None) -> str:
    return (b or b"").decode("utf-8", "replace")


def plugin_info(index: int) -> PluginInfo:
    """Describes entry index of the plugin list."""
    lib = L.lib()
    info = L.quant_plugin_info()
    info.struct_size = C.sizeof(info)
    L.check(lib.quant_plugin_get_info(index, C.byref(info)))
    formats = []
    for f in range(info.num_formats if info.status == 0 else 0):
        name = C.c_char_p()
        L.check(lib.quant_plugin_get_format(index, f, C.byref(name)))
        formats.append(_s(name.value))
    kernels = []
    for k in range(info.num_kernels if info.status == 0 else 0):
        ki = L.quant_plugin_kernel_info()
        ki.struct_size = C.sizeof(ki)
        L.check(lib.quant_plugin_get_kernel(index, k, C.byref(ki)))
        kernels.append(PluginKernel(_s(ki.format), Device(ki.device_type, 0), int(ki.ops),
                                    tuple(n for bit, n in _OPS.items() if ki.ops & bit), bool(ki.defines_format)))
    return PluginInfo(index, _s(info.path), _s(info.name), _s(info.version), int(info.abi_version),
                      _ORIGINS.get(info.origin, str(info.origin)), int(info.status), _s(info.message),
                      tuple(formats), tuple(kernels))


def plugins() -> list[PluginInfo]:
    """The plugin list: loaded plugins and failed automatic/LIBQUANT_PLUGIN_PATH loads."""
    n = C.c_size_t()
    L.check(L.lib().quant_plugin_count(C.byref(n)))
    return [plugin_info(i) for i in range(n.value)]
