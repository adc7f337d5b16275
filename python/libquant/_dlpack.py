"""DLPack both ways, never copying.

Import: a NumPy array, a torch tensor or any object with ``__dlpack__`` becomes a
``DLTensor`` over the same memory (``as_dltensor``). Export: a ``Buffer`` is a
view of one buffer of a quantized tensor (or of a quantizer's delayed-scaling
state) and speaks ``__dlpack__`` / ``__dlpack_device__``; its ``numpy()`` and
``torch()`` give typed zero-copy views. Torch-specific code lives in _torch.py.
"""

from __future__ import annotations

import ctypes as C
import sys
import threading
from typing import TYPE_CHECKING, Any, Callable

import ml_dtypes
import numpy as np

from . import _lib as L
from ._errors import InvalidArgumentError, UnsupportedError

if TYPE_CHECKING:
    import torch

    from ._core import Device

# ---------------------------------------------------------------------------
# dtypes
# ---------------------------------------------------------------------------

# (DLPack code, bits) <-> NumPy dtype (ml_dtypes for the low-precision ones).
_NP_BY_DL: dict[tuple[int, int], np.dtype[Any]] = {
    (L.kDLFloat, 32): np.dtype(np.float32),
    (L.kDLFloat, 16): np.dtype(np.float16),
    (L.kDLFloat, 64): np.dtype(np.float64),
    (L.kDLBfloat, 16): np.dtype(ml_dtypes.bfloat16),
    (L.kDLUInt, 8): np.dtype(np.uint8),
    (L.kDLUInt, 16): np.dtype(np.uint16),
    (L.kDLUInt, 32): np.dtype(np.uint32),
    (L.kDLUInt, 64): np.dtype(np.uint64),
    (L.kDLInt, 8): np.dtype(np.int8),
    (L.kDLInt, 16): np.dtype(np.int16),
    (L.kDLInt, 32): np.dtype(np.int32),
    (L.kDLInt, 64): np.dtype(np.int64),
    (L.kDLBool, 8): np.dtype(np.bool_),
    (L.kDLFloat8_e4m3fn, 8): np.dtype(ml_dtypes.float8_e4m3fn),
    (L.kDLFloat8_e5m2, 8): np.dtype(ml_dtypes.float8_e5m2),
    (L.kDLFloat8_e8m0fnu, 8): np.dtype(ml_dtypes.float8_e8m0fnu),
    (L.kDLFloat8_e4m3fnuz, 8): np.dtype(ml_dtypes.float8_e4m3fnuz),
    (L.kDLFloat8_e5m2fnuz, 8): np.dtype(ml_dtypes.float8_e5m2fnuz),
    (L.kDLFloat8_e4m3b11fnuz, 8): np.dtype(ml_dtypes.float8_e4m3b11fnuz),
    (L.kDLFloat8_e3m4, 8): np.dtype(ml_dtypes.float8_e3m4),
    (L.kDLFloat8_e4m3, 8): np.dtype(ml_dtypes.float8_e4m3),
}
_DL_BY_NP: dict[np.dtype[Any], tuple[int, int]] = {v: k for k, v in _NP_BY_DL.items()}

DTYPE_NAMES: dict[tuple[int, int], str] = {
    (L.kDLFloat, 32): "float32",
    (L.kDLFloat, 16): "float16",
    (L.kDLFloat, 64): "float64",
    (L.kDLBfloat, 16): "bfloat16",
    (L.kDLUInt, 8): "uint8",
    (L.kDLFloat8_e4m3fn, 8): "float8_e4m3fn",
    (L.kDLFloat8_e5m2, 8): "float8_e5m2",
    (L.kDLFloat8_e8m0fnu, 8): "float8_e8m0fnu",
    (L.kDLFloat4_e2m1fn, 4): "float4_e2m1fn",
    (L.kDLFloat6_e2m3fn, 6): "float6_e2m3fn",
    (L.kDLFloat6_e3m2fn, 6): "float6_e3m2fn",
}

#: (DLPack code, bits) of the FP6 element types -> their ml_dtypes type. libquant's
#: FP6 buffers (the mxfp6 plugin, QUANT_ELEMENT_E2M3 / E3M2) pack 4 codes in 3
#: bytes: code i of a row in bits 6i..6i+5, little bit-endian (unpack_fp6).
FP6_DTYPES: dict[tuple[int, int], Any] = {
    (L.kDLFloat6_e2m3fn, 6): ml_dtypes.float6_e2m3fn,
    (L.kDLFloat6_e3m2fn, 6): ml_dtypes.float6_e3m2fn,
}
_DL_BY_NAME = {v: k for k, v in DTYPE_NAMES.items()}


def dl_dtype(dtype: Any) -> tuple[int, int]:
    """(DLPack code, bits) of a NumPy dtype, a torch dtype or a name ("bfloat16")."""
    if isinstance(dtype, str):
        if dtype in _DL_BY_NAME:
            return _DL_BY_NAME[dtype]
        dtype = np.dtype(getattr(ml_dtypes, dtype, dtype))
    if "torch" in sys.modules and isinstance(dtype, sys.modules["torch"].dtype):
        from . import _torch

        return _torch.dl_dtype(dtype)
    d = np.dtype(dtype)
    if d not in _DL_BY_NP:
        raise UnsupportedError("dtype %s has no DLPack code libquant knows" % d)
    return _DL_BY_NP[d]


def numpy_dtype(code: int, bits: int) -> np.dtype[Any]:
    """The NumPy dtype of a DLPack (code, bits)."""
    try:
        return _NP_BY_DL[(code, bits)]
    except KeyError:
        raise UnsupportedError("DLPack dtype code %d bits %d has no NumPy dtype" % (code, bits)) from None


# ---------------------------------------------------------------------------
# Import: anything -> DLTensor
# ---------------------------------------------------------------------------


class DLManagedTensor(C.Structure):
    pass


DLManagedTensor._fields_ = [
    ("dl_tensor", L.DLTensor),
    ("manager_ctx", C.c_void_p),
    ("deleter", C.CFUNCTYPE(None, C.POINTER(DLManagedTensor))),
]


class DLPackVersion(C.Structure):
    _fields_ = [("major", C.c_uint32), ("minor", C.c_uint32)]


class DLManagedTensorVersioned(C.Structure):
    pass


DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", C.c_void_p),
    ("deleter", C.CFUNCTYPE(None, C.POINTER(DLManagedTensorVersioned))),
    ("flags", C.c_uint64),
    ("dl_tensor", L.DLTensor),
]

DLPACK_FLAG_BITMASK_READ_ONLY = 1

_capi = C.pythonapi
_capi.PyCapsule_GetPointer.restype = C.c_void_p
_capi.PyCapsule_GetPointer.argtypes = [C.py_object, C.c_char_p]
_capi.PyCapsule_IsValid.restype = C.c_int
_capi.PyCapsule_IsValid.argtypes = [C.py_object, C.c_char_p]
_capi.PyCapsule_New.restype = C.py_object
_capi.PyCapsule_New.argtypes = [C.c_void_p, C.c_char_p, C.c_void_p]


class Tensor:
    """A DLTensor over a caller's array, with what keeps its memory alive.

    ``dl`` is passed to C by reference: to a function whose argtypes declare
    ``POINTER(DLTensor)`` as ``dl`` itself (ctypes passes a pointer to it, a
    documented conversion that costs ~0.4 µs less per call than a ``byref``
    object, bench/RESULTS.md), elsewhere as ``ref``; ``keep`` holds the shape and stride
    arrays and the source object; ``stream`` is the CUDA stream to enqueue on
    (torch's current stream for torch CUDA tensors, else None)."""

    __slots__ = ("dl", "keep", "stream", "shape", "framework", "source")

    def __init__(self, dl: L.DLTensor, keep: Any, stream: int | None, shape: tuple[int, ...], framework: str,
                 source: Any) -> None:
        self.dl = dl
        self.keep = keep
        self.stream = stream
        self.shape = shape
        self.framework = framework  # "numpy", "torch" or "dlpack"
        self.source = source

    @property
    def ref(self) -> Any:
        return C.byref(self.dl)


# (dtype, shape, strides) -> a DLTensor template (data NULL) and its shape/stride
# arrays. The arrays are never written by libquant, so every call with the same
# layout copies the template and sets data: the cheap path of a binding that is
# called in a loop (bench/python_overhead.py).
_np_templates: dict[tuple[Any, ...], tuple[L.DLTensor, Any]] = {}


def _numpy_template(x: np.ndarray[Any, Any], strides: tuple[int, ...] | None) -> tuple[L.DLTensor, Any]:
    code_bits = _DL_BY_NP.get(x.dtype)
    if code_bits is None:
        raise UnsupportedError("array of dtype %s: libquant takes float32, bfloat16 or float16 "
                               "(and its own buffer dtypes)" % x.dtype)
    shape = x.shape
    nd = len(shape)
    sh = (C.c_int64 * max(nd, 1))(*shape)
    st = None
    if strides is not None:
        item = x.itemsize
        if any(s % item for s in strides):
            raise UnsupportedError("array strides %s (bytes) are not a multiple of its item size %d"
                                   % (strides, item))
        st = (C.c_int64 * max(nd, 1))(*[s // item for s in strides])
    dl = L.DLTensor()
    dl.device.device_type = L.kDLCPU
    dl.ndim = nd
    dl.dtype.code, dl.dtype.bits = code_bits
    dl.dtype.lanes = 1
    dl.shape = sh
    if st is not None:
        dl.strides = st
    t = (dl, (sh, st))
    if len(_np_templates) > 512:
        _np_templates.clear()
    _np_templates[(x.dtype, shape, strides)] = t
    return t


_copy_dl = L.DLTensor.from_buffer_copy


class _ArrayInterface(C.Structure):
    """NumPy's PyArrayInterface, the struct behind ``__array_struct__``'s capsule."""

    _fields_ = [("two", C.c_int), ("nd", C.c_int), ("typekind", C.c_char), ("itemsize", C.c_int),
                ("flags", C.c_int), ("shape", C.c_void_p), ("strides", C.c_void_p), ("data", C.c_void_p),
                ("descr", C.c_void_p)]


_C_CONTIGUOUS = 0x0001  # NPY_ARRAY_C_CONTIGUOUS
_interface_at = _ArrayInterface.from_address


def _pointer_and_flags_capsule(x: np.ndarray[Any, Any]) -> tuple[int, int]:
    # The data pointer and flags from __array_struct__: its capsule costs a
    # tenth of __array_interface__'s dict. The capsule owns the struct (its
    # destructor frees it), so it stays referenced until the fields are read.
    cap = x.__array_struct__
    ai = _interface_at(_capi.PyCapsule_GetPointer(cap, None))
    r = (ai.data or 0, ai.flags)
    del cap
    return r


# NumPy's PyArrayObject (numpy/ndarraytypes.h, PyArrayObject_fields, the layout
# of NumPy's C ABI): after the object header, char *data, int nd, npy_intp
# *dimensions, *strides, PyObject *base, PyArray_Descr *descr, int flags. Read
# in place, the pointer and flags cost one ctypes view of the array's first
# words instead of the capsule's foreign call (bench/python_overhead.py: 0.43 µs
# of the 2 µs as_dltensor took for a NumPy array). The layout is checked at
# import against __array_interface__ on probe arrays (views, offsets, strides,
# read-only, a subclass); where any probe disagrees (another Python build's
# object header, a NumPy that moved the fields) the capsule serves instead.
_NP_WORDS = C.c_uint64 * 7  # data, nd, dimensions, strides, base, descr, flags (low 32 bits)
_np_words_at = _NP_WORDS.from_address
_NP_HEAD = object.__basicsize__


def _pointer_and_flags_struct(x: np.ndarray[Any, Any]) -> tuple[int, int]:
    w = _np_words_at(id(x) + _NP_HEAD)
    return w[0], w[6] & 0xFFFFFFFF


def _struct_layout_ok() -> bool:
    base = np.arange(4 * 6 * 8, dtype=np.float32).reshape(4, 6, 8)
    ro = np.ones((3, 5), np.float16)
    ro.flags.writeable = False
    probes: list[np.ndarray[Any, Any]] = [
        base, base[1:], base[:, 2:], base[..., ::2], base.T, np.zeros((0, 3), np.float32), np.array(3.0, np.float32), ro,
        np.ones((7, 1), np.float64)[::2], base.view(np.recarray)]
    try:
        for a in probes:
            data, flags = _pointer_and_flags_struct(a)
            if data != a.__array_interface__["data"][0] or bool(flags & _C_CONTIGUOUS) != a.flags.c_contiguous:
                return False
            cdata, cflags = _pointer_and_flags_capsule(a)
            if cdata != data or (cflags ^ flags) & _C_CONTIGUOUS:
                return False
    except Exception:
        return False
    return True


_pointer_and_flags = _pointer_and_flags_struct if _struct_layout_ok() else _pointer_and_flags_capsule


def _from_numpy(x: np.ndarray[Any, Any]) -> Tensor:
    data, flags = _pointer_and_flags(x)
    strides = None if flags & _C_CONTIGUOUS else x.strides  # __array_interface__'s rule
    tmpl = _np_templates.get((x.dtype, x.shape, strides))
    if tmpl is None:
        tmpl = _numpy_template(x, strides)
    dl = _copy_dl(tmpl[0])
    dl.data = data
    return Tensor(dl, (tmpl, x), None, x.shape, "numpy", x)


def numpy_run_args(x: np.ndarray[Any, Any]) -> tuple[Any, int, int | None]:
    """(template, data pointer, stream) of x without building its DLTensor: what a
    QuantizePlan's run needs (the template object names x's layout; None where
    as_dltensor has not seen it yet)."""
    data, flags = _pointer_and_flags(x)
    return _np_templates.get((x.dtype, x.shape, None if flags & _C_CONTIGUOUS else x.strides)), data, None


def _from_capsule(obj: Any) -> Tensor:
    dev = None
    try:
        dev = obj.__dlpack_device__()
    except (AttributeError, TypeError):
        pass
    try:
        cap = obj.__dlpack__(stream=None) if dev is not None and int(dev[0]) == L.kDLCUDA else obj.__dlpack__()
    except TypeError:
        cap = obj.__dlpack__()
    if _capi.PyCapsule_IsValid(cap, b"dltensor"):
        p = _capi.PyCapsule_GetPointer(cap, b"dltensor")
        src = C.cast(p, C.POINTER(DLManagedTensor)).contents.dl_tensor
    elif _capi.PyCapsule_IsValid(cap, b"dltensor_versioned"):
        p = _capi.PyCapsule_GetPointer(cap, b"dltensor_versioned")
        src = C.cast(p, C.POINTER(DLManagedTensorVersioned)).contents.dl_tensor
    else:
        raise InvalidArgumentError("__dlpack__ returned %r, not a DLPack capsule" % (cap,))
    # The capsule is never consumed: it stays alive (and owns the memory) while
    # this Tensor does, and its own destructor calls the producer's deleter.
    dl = L.DLTensor()
    C.memmove(C.byref(dl), C.byref(src), C.sizeof(L.DLTensor))
    nd = dl.ndim
    shape: tuple[int, ...] = ()
    if 0 < nd <= 64 and dl.shape:
        shape = tuple(dl.shape[i] for i in range(nd))
    return Tensor(dl, (cap, obj), None, shape, "dlpack", obj)


_from_torch: Callable[[Any], Tensor] | None = None


def _torch_import() -> Callable[[Any], Tensor]:
    """_torch.from_torch, imported once (an import statement per call cost ~0.9 µs)."""
    global _from_torch
    if _from_torch is None:
        from . import _torch

        _from_torch = _torch.from_torch
    return _from_torch


# Exact types -> their importer: NumPy arrays from the start, and each NumPy or
# torch class once as_dltensor has seen it (the isinstance chain below cost a
# torch tensor ~0.45 µs per call, bench/RESULTS.md).
_importers: dict[type, Callable[[Any], Tensor]] = {np.ndarray: _from_numpy}


def as_dltensor(x: Any) -> Tensor:
    """A DLTensor over x (NumPy array, torch tensor, or any ``__dlpack__`` object), not copied."""
    imp = _importers.get(type(x))
    if imp is not None:
        return imp(x)
    if isinstance(x, Tensor):
        return x
    if isinstance(x, np.ndarray):
        _importers[type(x)] = _from_numpy
        return _from_numpy(x)
    if "torch" in sys.modules and isinstance(x, sys.modules["torch"].Tensor):
        imp = _torch_import()
        _importers[type(x)] = imp
        return imp(x)
    if isinstance(x, Buffer):
        return x._as_tensor()
    if hasattr(x, "__dlpack__"):
        return _from_capsule(x)
    raise TypeError("expected a NumPy array, a torch tensor or an object with __dlpack__, got %s"
                    % type(x).__name__)


def as_output(x: Any, what: str) -> Tensor:
    """as_dltensor for an array libquant writes: a read-only NumPy array is refused
    (writing into it could fault), naming the argument."""
    if isinstance(x, np.ndarray) and not x.flags.writeable:
        raise InvalidArgumentError("%s: the NumPy array is read-only" % what)
    return as_dltensor(x)


# ---------------------------------------------------------------------------
# Export: Buffer
# ---------------------------------------------------------------------------

_DELETER = C.CFUNCTYPE(None, C.POINTER(DLManagedTensor))
_DELETER_V = C.CFUNCTYPE(None, C.POINTER(DLManagedTensorVersioned))
_CAPSULE_DESTRUCTOR = C.CFUNCTYPE(None, C.c_void_p)

# address of a live DLManagedTensor(Versioned) -> (struct, shape, strides, owner)
_exported: dict[int, Any] = {}
_exported_lock = threading.Lock()


def _release(addr: int) -> None:
    with _exported_lock:
        _exported.pop(addr, None)


def _deleter_impl(mt: Any) -> None:
    _release(C.cast(mt, C.c_void_p).value or 0)


def _capsule_destructor_impl(cap: int | None) -> None:
    # Called when a capsule dies. If no consumer renamed it ("used_dltensor"),
    # the tensor was never taken over: release it here.
    if not cap:
        return
    obj = C.cast(cap, C.py_object)
    for name in (b"dltensor", b"dltensor_versioned"):
        if _capi.PyCapsule_IsValid(obj, name):
            _release(_capi.PyCapsule_GetPointer(obj, name) or 0)


_deleter = _DELETER(_deleter_impl)
_deleter_v = _DELETER_V(_deleter_impl)
_capsule_destructor = _CAPSULE_DESTRUCTOR(_capsule_destructor_impl)


class Buffer:
    """A zero-copy view of one buffer libquant owns (a direction's data, scales or
    amax, or a quantizer's delayed-scaling state).

    ``numpy()`` and ``torch()`` return typed views (``float8_e4m3fn``,
    ``float8_e5m2``, ``float8_e8m0fnu``, ``float32``; packed FP4 as ``uint8``,
    see ``unpack_fp4``); ``__dlpack__`` exports it with its DLPack dtype, and
    ``np.asarray(buf)`` works on the CPU. The view keeps its owner (the
    QTensor or Quantizer) alive, and its memory too: ``close()`` frees the
    owner's memory only when the last view is gone, and ``update_usage`` /
    ``quantize_into`` refuse (``StateError``) to drop or re-allocate a direction
    while views of it are alive. Views are this Buffer and everything made from
    it (``numpy()``, ``torch()``, ``np.asarray``, DLPack capsules and the arrays
    consumers build from them)."""

    __slots__ = ("_data", "_device_type", "_device_id", "_code", "_bits", "shape", "strides", "_owner",
                 "packed_fp4", "fp4_width", "fp6_width", "nbytes", "_direction", "__weakref__")

    def __init__(self, view: L.DLTensor, owner: Any, packed_fp4: bool = False, fp4_width: int | None = None,
                 direction: int = 0, fp6_width: int | None = None) -> None:
        nd = view.ndim
        if not 0 <= nd <= 16:
            raise InvalidArgumentError("buffer view has rank %d" % nd)
        if view.dtype.bits < 8 and view.strides:
            raise UnsupportedError("buffer of %d-bit elements with strides: libquant's packed buffers are "
                                   "contiguous" % view.dtype.bits)
        self._data = (view.data or 0) + view.byte_offset
        self._device_type = view.device.device_type
        self._device_id = view.device.device_id
        self._code = view.dtype.code
        self._bits = view.dtype.bits
        self.shape: tuple[int, ...] = tuple(view.shape[i] for i in range(nd))
        self.strides: tuple[int, ...] | None = (
            tuple(view.strides[i] for i in range(nd)) if view.strides else None)
        self._owner = owner
        #: The QTensor direction (1 rowwise, 2 columnwise) the buffer belongs to; 0 for a quantizer's state.
        self._direction = direction
        views = getattr(owner, "_views", None)
        if views is not None:  # the owner defers its free while views are alive
            views.add(self)
        #: True for E2M1 codes packed two per byte (even element in the low nibble).
        self.packed_fp4 = packed_fp4
        #: The logical row length of packed FP4 data (odd widths leave a zero high nibble, spec §14).
        self.fp4_width = fp4_width
        #: The logical row length of FP6 data (K rowwise, M columnwise; the shape's last dim rounds it up to 4).
        self.fp6_width = fp6_width
        itemsize = max(self._bits // 8, 1)
        if self._bits < 8:
            # Sub-byte elements (FP6) are packed, rows included: ceil(count * bits / 8) bytes.
            n = 1
            for s in self.shape:
                n *= s
            self.nbytes = (n * self._bits + 7) // 8
        elif self.strides is None:
            n = 1
            for s in self.shape:
                n *= s
            self.nbytes = n * itemsize
        else:
            self.nbytes = (1 + sum((s - 1) * st for s, st in zip(self.shape, self.strides) if s > 0)) * itemsize \
                if all(s > 0 for s in self.shape) else 0

    # -- description --------------------------------------------------------
    @property
    def ptr(self) -> int:
        """Address of element 0."""
        return int(self._data)

    @property
    def dtype(self) -> str:
        """The buffer's element type, as a name ("float8_e4m3fn", "uint8", ...)."""
        return DTYPE_NAMES.get((self._code, self._bits), "dlpack(%d,%d)" % (self._code, self._bits))

    @property
    def device(self) -> "Device":
        from ._core import Device

        return Device(self._device_type, self._device_id)

    def __repr__(self) -> str:
        return "Buffer(shape=%s, dtype=%s%s, device=%s)" % (
            self.shape, self.dtype, ", packed fp4" if self.packed_fp4 else "", self.device)

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 1

    # -- views ----------------------------------------------------------------
    @property
    def packed_fp6(self) -> bool:
        """True for FP6 data (float6_e2m3fn / float6_e3m2fn), 4 codes packed in 3 bytes."""
        return (self._code, self._bits) in FP6_DTYPES

    def packed_shape(self) -> tuple[int, ...]:
        """The shape of the bytes of packed FP6 data: the last dim times 3/4."""
        if not self.shape or (self.shape[-1] * self._bits) % 8:
            raise UnsupportedError("buffer of shape %s and %d-bit elements: rows are not whole bytes"
                                   % (self.shape, self._bits))
        return self.shape[:-1] + (self.shape[-1] * self._bits // 8,)

    def numpy(self) -> np.ndarray[Any, Any]:
        """A typed NumPy view (CPU buffers only): ml_dtypes float8 types, float32, uint8.
        Packed FP6 data comes as its uint8 bytes [..., 3n/4] (see ``unpack_fp6``)."""
        if self._device_type != L.kDLCPU:
            raise UnsupportedError("buffer on %s: NumPy views need CPU memory (use .torch())" % self.device)
        if self.packed_fp6:
            return np.asarray(_RawCPU(self._data, self.nbytes, self)).reshape(self.packed_shape())
        dt = numpy_dtype(self._code, self._bits)
        raw = np.asarray(_RawCPU(self._data, self.nbytes, self))
        if self.nbytes == 0:
            return raw.view(dt).reshape(self.shape)
        if self.strides is None:
            return raw.view(dt).reshape(self.shape)
        flat = raw.view(dt)
        return np.lib.stride_tricks.as_strided(
            flat, shape=self.shape, strides=tuple(s * dt.itemsize for s in self.strides))

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray[Any, Any]:
        a = self.numpy()
        if dtype is not None:
            a = a.astype(dtype)
        elif copy:
            a = a.copy()
        return a

    def torch(self) -> "torch.Tensor":
        """A typed torch view (CPU or CUDA): torch.float8_e4m3fn / float8_e5m2 /
        float8_e8m0fnu / float4_e2m1fn_x2 (packed FP4) where this torch has them,
        uint8 otherwise; packed FP6 data as its uint8 bytes [..., 3n/4] (torch has no FP6)."""
        from . import _torch

        return _torch.buffer_view(self)

    def unpack_fp4(self) -> np.ndarray[Any, Any]:
        """Packed E2M1 bytes [.., n] as ml_dtypes.float4_e2m1fn codes [.., width] (a copy;
        width is the logical row length, 2n or 2n - 1)."""
        if not self.packed_fp4:
            raise UnsupportedError("buffer holds %s, not packed FP4" % self.dtype)
        return unpack_fp4(self.numpy(), self.fp4_width)

    def unpack_fp6(self) -> np.ndarray[Any, Any]:
        """Packed FP6 data [..., 3n/4 bytes] as ml_dtypes.float6_e2m3fn / float6_e3m2fn
        values [..., width] (a copy; width is the logical row length: K rowwise, M for
        the transposed columnwise data; the up to 3 padding codes are dropped)."""
        if not self.packed_fp6:
            raise UnsupportedError("buffer holds %s, not packed FP6" % self.dtype)
        return unpack_fp6(self.numpy(), self.fp6_width, FP6_DTYPES[(self._code, self._bits)])

    # -- DLPack ---------------------------------------------------------------
    def __dlpack_device__(self) -> tuple[int, int]:
        return (self._device_type, self._device_id)

    def _dl(self, code: int | None = None, bits: int | None = None) -> tuple[L.DLTensor, Any, Any]:
        nd = len(self.shape)
        sh = (C.c_int64 * max(nd, 1))(*self.shape)
        st = (C.c_int64 * max(nd, 1))(*self.strides) if self.strides is not None else None
        dl = L.DLTensor()
        dl.data = self._data
        dl.device.device_type = self._device_type
        dl.device.device_id = self._device_id
        dl.ndim = nd
        dl.dtype.code = self._code if code is None else code
        dl.dtype.bits = self._bits if bits is None else bits
        dl.dtype.lanes = 1
        dl.shape = sh
        if st is not None:
            dl.strides = st
        return dl, sh, st

    def _as_tensor(self) -> Tensor:
        dl, sh, st = self._dl()
        return Tensor(dl, (sh, st, self), None, self.shape, "dlpack", self)

    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: Any = None, copy: bool | None = None) -> Any:
        """Exports the buffer (its DLPack dtype: float8 codes, uint8, float32) without a copy.

        ``stream`` follows the DLPack protocol. CPU buffers take only ``None`` (or
        -1, "no synchronisation"), anything else raises BufferError. For CUDA
        buffers it is the consumer's stream: ``None`` or 1 the legacy default
        stream, 2 the per-thread default stream, a larger int a cudaStream_t, -1 no
        synchronisation, 0 refused as ambiguous. When it differs from the stream of
        the last libquant call on the owning QTensor (``QTensor.last_stream``; the
        NULL stream counts as the legacy default one), the consumer's stream is made
        to wait on an event recorded on that stream, through torch
        (torch.cuda.Event, ExternalStream): without torch such an export raises
        BufferError (the same stream, or -1, needs no torch). The wait covers
        libquant's work through this QTensor object only: work enqueued from other
        code (a C caller, another stream used without telling libquant) is the
        caller's to order."""
        if copy:
            raise BufferError("libquant buffers export without copying only")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError("buffer is on %s, cannot export to %s" % (self.device, dl_device))
        self._sync_consumer(stream)
        return self._export(max_version)

    def _producer_stream(self) -> int | None:
        o = self._owner
        while isinstance(o, Buffer):
            o = o._owner
        s = getattr(o, "_stream", None)
        return None if s is None else int(s)

    def _sync_consumer(self, stream: Any) -> None:
        """DLPack's stream contract: orders the consumer's stream after libquant's."""
        if stream is not None and type(stream) is not int:
            raise TypeError("stream: want an int or None (DLPack), got %s" % type(stream).__name__)
        if self._device_type != L.kDLCUDA:
            if stream is not None and stream != -1:
                raise BufferError("stream=%d: the buffer is on %s, which has no streams; DLPack consumers pass "
                                  "stream=None there" % (stream, self.device))
            return
        if stream == -1:
            return
        if stream == 0:
            raise BufferError("stream=0 is ambiguous for CUDA (DLPack): pass None or 1 for the legacy default "
                              "stream, 2 for the per-thread default stream, or the cudaStream_t")
        consumer = 1 if stream is None else stream
        producer = self._producer_stream() or 1  # the NULL stream is the legacy default stream
        if producer != consumer:
            _cuda_stream_wait(self._device_id, producer, consumer)

    def _export(self, max_version: tuple[int, int] | None, code: int | None = None,
                bits: int | None = None) -> Any:
        dl, sh, st = self._dl(code, bits)
        if max_version is not None and int(max_version[0]) >= 1:
            mtv = DLManagedTensorVersioned()
            mtv.version.major = 1
            mtv.version.minor = 1 if tuple(max_version) >= (1, 1) else 0
            mtv.deleter = _deleter_v
            mtv.dl_tensor = dl
            addr = C.addressof(mtv)
            with _exported_lock:
                _exported[addr] = (mtv, sh, st, self)
            return _capi.PyCapsule_New(addr, b"dltensor_versioned", C.cast(_capsule_destructor, C.c_void_p))
        mt = DLManagedTensor()
        mt.deleter = _deleter
        mt.dl_tensor = dl
        addr = C.addressof(mt)
        with _exported_lock:
            _exported[addr] = (mt, sh, st, self)
        return _capi.PyCapsule_New(addr, b"dltensor", C.cast(_capsule_destructor, C.c_void_p))

    def bytes_view(self) -> "_BytesExport":
        """The same memory as raw bytes (DLPack uint8 [nbytes]) for consumers that do
        not know the float8 DLPack codes (``np.from_dlpack(buf.bytes_view())``)."""
        return _BytesExport(self)


def _cuda_stream_wait(device: int, producer: int, consumer: int) -> None:
    """Makes stream consumer wait for the work enqueued so far on stream producer
    (CUDA device device; 1 and 2 are the legacy and per-thread default streams)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise BufferError(
            "exporting a CUDA buffer to stream %#x while libquant last used stream %#x needs torch (to record an "
            "event and make the consumer's stream wait on it), which is not installed: synchronise the streams "
            "yourself and pass stream=-1, or pass stream=%#x" % (consumer, producer, producer)) from None
    from . import _torch

    _torch.stream_wait(device, producer, consumer)


class _BytesExport:
    """A DLPack exporter of a Buffer's memory as uint8 [nbytes]."""

    def __init__(self, buf: Buffer) -> None:
        self._buf = buf

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._buf.__dlpack_device__()

    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: Any = None, copy: bool | None = None) -> Any:
        b = self._buf
        raw = Buffer.__new__(Buffer)
        raw._data, raw._device_type, raw._device_id = b._data, b._device_type, b._device_id
        raw._code, raw._bits, raw.shape, raw.strides = L.kDLUInt, 8, (b.nbytes,), None
        raw._owner, raw.packed_fp4, raw.nbytes, raw._direction = b, False, b.nbytes, b._direction
        raw.fp4_width = raw.fp6_width = None
        return raw.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)


class _RawCPU:
    """A NumPy array interface over nbytes of CPU memory; holds the owner alive."""

    def __init__(self, ptr: int, nbytes: int, owner: Any) -> None:
        self._owner = owner
        self.__array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (ptr if nbytes else 0, False),
            "version": 3,
        }


# ---------------------------------------------------------------------------
# FP4
# ---------------------------------------------------------------------------


def unpack_fp4(packed: Any, width: int | None = None) -> np.ndarray[Any, Any]:
    """Packed E2M1 bytes [..., n] (element 2i in the low nibble of byte i) as
    ``ml_dtypes.float4_e2m1fn`` values [..., width] (width 2n by default; 2n - 1 for
    an odd logical width, whose last high nibble is padding)."""
    p = np.asarray(packed)
    if p.dtype != np.uint8:
        raise UnsupportedError("unpack_fp4 takes uint8 bytes, got %s" % p.dtype)
    if p.ndim == 0:
        p = p.reshape(1)
    n = p.shape[-1]
    if width is None:
        width = 2 * n
    if not 2 * n - 1 <= width <= 2 * n:
        raise InvalidArgumentError("unpack_fp4: width %d does not fit %d bytes per row" % (width, n))
    out = np.empty(p.shape[:-1] + (2 * n,), dtype=np.uint8)
    out[..., 0::2] = p & 0x0F
    out[..., 1::2] = p >> 4
    return out[..., :width].view(ml_dtypes.float4_e2m1fn)


def pack_fp4(values: Any) -> np.ndarray[Any, Any]:
    """The inverse of unpack_fp4: float4_e2m1fn (or float) values [..., 2n] to bytes [..., n]."""
    v = np.asarray(values)
    if v.dtype != np.dtype(ml_dtypes.float4_e2m1fn):
        v = v.astype(ml_dtypes.float4_e2m1fn)
    codes = v.view(np.uint8)
    if codes.shape[-1] % 2:
        codes = np.concatenate([codes, np.zeros(codes.shape[:-1] + (1,), np.uint8)], axis=-1)
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)


# ---------------------------------------------------------------------------
# FP6
# ---------------------------------------------------------------------------

_FP6_NAMES = {"float6_e2m3fn": ml_dtypes.float6_e2m3fn, "float6_e3m2fn": ml_dtypes.float6_e3m2fn,
              "e2m3": ml_dtypes.float6_e2m3fn, "e3m2": ml_dtypes.float6_e3m2fn}


def _fp6_dtype(dtype: Any) -> np.dtype[Any]:
    d = _FP6_NAMES.get(dtype, dtype) if isinstance(dtype, str) else dtype
    for t in (ml_dtypes.float6_e2m3fn, ml_dtypes.float6_e3m2fn):
        nd: np.dtype[Any] = np.dtype(t)
        if d is t or (isinstance(d, np.dtype) and d == nd):
            return nd
    raise InvalidArgumentError("dtype %r: want float6_e2m3fn or float6_e3m2fn" % (dtype,))


def unpack_fp6(packed: Any, width: int | None = None, dtype: Any = "float6_e2m3fn") -> np.ndarray[Any, Any]:
    """Packed FP6 bytes [..., 3g] (code i of a row in bits 6i..6i+5, little
    bit-endian: 4 codes per 3 bytes) as ``ml_dtypes.float6_e2m3fn`` (or
    ``float6_e3m2fn``) values [..., width]; width is 4g by default and may drop up
    to 3 trailing (padding) codes."""
    p = np.asarray(packed)
    if p.dtype != np.uint8:
        raise UnsupportedError("unpack_fp6 takes uint8 bytes, got %s" % p.dtype)
    dt = _fp6_dtype(dtype)
    if p.ndim == 0:
        p = p.reshape(1)
    n = p.shape[-1]
    if n % 3:
        raise InvalidArgumentError("unpack_fp6: rows of %d bytes are not whole groups of 3 (4 codes)" % n)
    g = n // 3
    if width is None:
        width = 4 * g
    if not 4 * g - 3 <= width <= 4 * g:
        raise InvalidArgumentError("unpack_fp6: width %d does not fit %d bytes per row" % (width, n))
    w = p.reshape(p.shape[:-1] + (g, 3)).astype(np.uint32)
    word = w[..., 0] | (w[..., 1] << 8) | (w[..., 2] << 16)
    codes = np.stack([(word >> (6 * j)) & 0x3F for j in range(4)], axis=-1).astype(np.uint8)
    return codes.reshape(p.shape[:-1] + (4 * g,))[..., :width].view(dt)


def pack_fp6(values: Any, dtype: Any = None) -> np.ndarray[Any, Any]:
    """The inverse of unpack_fp6: FP6 values [..., n] (ml_dtypes float6, or floats
    converted to ``dtype``, float6_e2m3fn by default) to bytes [..., 3·ceil(n/4)],
    the row zero-padded to whole groups of 4 codes."""
    v = np.asarray(values)
    if v.dtype in (np.dtype(ml_dtypes.float6_e2m3fn), np.dtype(ml_dtypes.float6_e3m2fn)) and dtype is None:
        dt = v.dtype
    else:
        dt = _fp6_dtype("float6_e2m3fn" if dtype is None else dtype)
        v = v.astype(dt)
    codes = v.view(np.uint8) & 0x3F
    if codes.ndim == 0:
        codes = codes.reshape(1)
    pad = (-codes.shape[-1]) % 4
    if pad:
        codes = np.concatenate([codes, np.zeros(codes.shape[:-1] + (pad,), np.uint8)], axis=-1)
    c = codes.reshape(codes.shape[:-1] + (-1, 4)).astype(np.uint32)
    word = c[..., 0] | (c[..., 1] << 6) | (c[..., 2] << 12) | (c[..., 3] << 18)
    out = np.stack([(word >> (8 * j)) & 0xFF for j in range(3)], axis=-1).astype(np.uint8)
    return out.reshape(codes.shape[:-1] + (-1,))
