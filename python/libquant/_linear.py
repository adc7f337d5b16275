"""Linear and grouped-linear layers (quant_linear_*): TransformerEngine's Linear /
GroupedLinear training semantics, the quantization state kept in the library."""

from __future__ import annotations

import ctypes as C
from dataclasses import dataclass
from typing import Any, Sequence

from . import _lib as L
from ._handle import Owned
from ._core import (_BACKWARD_OVERRIDES, ArrayLike, Device, QTensor, QTensorInfo, Quantizer, _alloc, _device_of,
                    _info, _stream)
from ._dlpack import DTYPE_NAMES, Tensor, as_dltensor, as_output
from ._errors import InvalidArgumentError, InvalidHandleError
from ._recipe import Recipe

FORWARD = 1
BACKWARD = 2
_PASSES = {"forward": 1, "backward": 2}
_SAVED = {0: "none", 1: "original", 2: "quantized", 3: "layer_weight"}


def _override(v: int | str) -> int:
    if isinstance(v, str):
        if v.lower() not in _BACKWARD_OVERRIDES:
            raise InvalidArgumentError("backward_override %r: want one of %s" % (v, sorted(_BACKWARD_OVERRIDES)))
        return _BACKWARD_OVERRIDES[v.lower()]
    return int(v)


def _pass(p: int | str) -> int:
    if isinstance(p, str):
        if p.lower() not in _PASSES:
            raise InvalidArgumentError("pass %r: want 'forward' or 'backward'" % p)
        return _PASSES[p.lower()]
    return int(p)


def _like(t: Tensor, shape: tuple[int, ...]) -> Any:
    name = DTYPE_NAMES.get((t.dl.dtype.code, t.dl.dtype.bits), "float32")
    return _alloc(shape, name, _device_of(t), t.framework == "torch")


@dataclass(frozen=True)
class LinearContextInfo:
    """quant_linear_ctx_info: what a forward context keeps for backward."""

    num_gemms: int
    used: bool
    backward_override: int
    save_original_input: bool
    input_requires_grad: bool
    weight_requires_grad: bool
    input_saved: str
    input_usage: int
    weight_saved: str
    weight_usage: int
    input_bytes: int
    weight_bytes: int
    owned_bytes: int


class LinearContext(Owned):
    """What a forward pass kept for its backward (quant_linear_ctx). Backward runs once."""

    _free_fn = "quant_linear_ctx_free"

    _h: int | None

    def __init__(self, handle: int, meta: dict[str, Any]) -> None:
        self._h = handle
        self._meta = meta

    @property
    def handle(self) -> int:
        h = self._h
        if h is None:
            raise InvalidHandleError("ctx: this LinearContext is closed")
        return h

    @property
    def info(self) -> LinearContextInfo:
        i = L.quant_linear_ctx_info()
        i.struct_size = C.sizeof(i)
        L.check(L.lib().quant_linear_ctx_get_info(self.handle, C.byref(i)))
        return LinearContextInfo(int(i.num_gemms), bool(i.used), int(i.backward_override),
                                 bool(i.save_original_input), bool(i.input_requires_grad),
                                 bool(i.weight_requires_grad), _SAVED.get(i.input_saved, str(i.input_saved)),
                                 int(i.input_usage), _SAVED.get(i.weight_saved, str(i.weight_saved)),
                                 int(i.weight_usage), int(i.input_bytes), int(i.weight_bytes), int(i.owned_bytes))

    def _out(self, v: Any, shape: tuple[int, ...], like: Tensor) -> tuple[Any, Tensor | None]:
        if v is None or v is False:
            return None, None
        if v is True:
            v = _like(like, shape)
        return v, as_output(v, "gradient")

    def backward(self, grad_output: ArrayLike, *, grad_input: Any = None, grad_weight: Any = None,
                 grad_bias: Any = None, grad_output_amax: ArrayLike | None = None,
                 stream: int | None = None) -> tuple[Any, Any, Any]:
        """Runs a plain layer's backward (quant_linear_backward). Each gradient is an
        output array, True to allocate one, or None (not computed). grad_output_amax:
        an FP32 [2] amax for the grad_output quantizer instead of computing it (e.g.
        all-reduced MAX across processes). Returns (grad_input, grad_weight, grad_bias)."""
        m = self._meta
        g = as_dltensor(grad_output)
        gi, gi_t = self._out(grad_input, m["input_shape"], g)
        gw, gw_t = self._out(grad_weight, m["weight_shape"], g)
        gb, gb_t = self._out(grad_bias, (m["weight_shape"][0],), g)
        a = L.quant_linear_backward_args()
        a.struct_size = C.sizeof(a)
        a.grad_output = C.pointer(g.dl)
        if gi_t is not None:
            a.grad_input = C.pointer(gi_t.dl)
        if gw_t is not None:
            a.grad_weight = C.pointer(gw_t.dl)
        if gb_t is not None:
            a.grad_bias = C.pointer(gb_t.dl)
        gam = None
        if grad_output_amax is not None:
            gam = as_dltensor(grad_output_amax)
            a.grad_output_amax = C.pointer(gam.dl)
        s = _stream(stream, g)
        if s is not None:
            a.stream = s
        L.check(L.lib().quant_linear_backward(self.handle, C.byref(a)))
        return gi, gw, gb

    def grouped_backward(self, grad_output: ArrayLike, *, grad_input: Any = None,
                         grad_weights: Any = None, grad_biases: Any = None,
                         grad_output_amaxes: ArrayLike | None = None,
                         stream: int | None = None) -> tuple[Any, Any, Any]:
        """Runs a grouped layer's backward (quant_grouped_linear_backward).
        grad_weights / grad_biases: a list of num_gemms arrays, True to allocate, or None.
        grad_output_amaxes: FP32 [num_gemms, 2] amaxes for the grad_output quantizers."""
        m = self._meta
        n = m["num_gemms"]
        g = as_dltensor(grad_output)
        gi, gi_t = self._out(grad_input, m["input_shape"], g)
        keep: list[Any] = [g, gi_t]
        a = L.quant_grouped_linear_backward_args()
        a.struct_size = C.sizeof(a)
        a.grad_output = C.pointer(g.dl)
        if gi_t is not None:
            a.grad_input = C.pointer(gi_t.dl)
        outs: list[Any] = []
        for field, v, shape in (("grad_weights", grad_weights, m["weight_shape"]),
                                ("grad_biases", grad_biases, (m["weight_shape"][0],))):
            if v is None or v is False:
                outs.append(None)
                continue
            arrs = [_like(g, shape) for _ in range(n)] if v is True else list(v)
            arr = (L.DLTensor * max(len(arrs), 1))()
            for i, x in enumerate(arrs):
                t = as_output(x, "%s[%d]" % (field, i))
                keep.append(t)
                arr[i] = t.dl
            keep.append(arr)
            setattr(a, field, C.cast(arr, C.POINTER(L.DLTensor)))
            outs.append(arrs)
        if grad_output_amaxes is not None:
            gam = as_dltensor(grad_output_amaxes)
            keep.append(gam)
            a.grad_output_amaxes = C.pointer(gam.dl)
        s = _stream(stream, g)
        if s is not None:
            a.stream = s
        L.check(L.lib().quant_grouped_linear_backward(self.handle, C.byref(a)))
        return gi, outs[0], outs[1]



def _quantizer_array(qs: Sequence[Quantizer] | None) -> Any:
    if qs is None:
        return None
    arr = (C.c_void_p * max(len(qs), 1))(*[q.handle for q in qs])
    return arr


class Linear(Owned):
    """The quantization state of a linear layer (quant_linear): one quantizer per
    role and GEMM, and the cached quantized weight. The high-precision weight, bias
    and activations stay the caller's and are passed to every call.

    ``Linear(recipe=Recipe.preset("mxfp8"), name="fc1")``, or explicit quantizers
    (one per GEMM each). ``num_gemms`` >= 1 makes a grouped layer."""

    _free_fn = "quant_linear_free"

    _h: int | None

    def __init__(self, recipe: Recipe | None = None, *, name: str = "", num_gemms: int = 0,
                 input_quantizers: Sequence[Quantizer] | None = None,
                 weight_quantizers: Sequence[Quantizer] | None = None,
                 grad_output_quantizers: Sequence[Quantizer] | None = None) -> None:
        self._h = None
        c = L.quant_linear_config()
        c.struct_size = C.sizeof(c)
        if recipe is not None:
            c.recipe = recipe.handle
        if name:
            c.name = name.encode()
        c.num_gemms = int(num_gemms)
        arrs = [_quantizer_array(x) for x in (input_quantizers, weight_quantizers, grad_output_quantizers)]
        for f, a in zip(("input_quantizers", "weight_quantizers", "grad_output_quantizers"), arrs):
            if a is not None:
                setattr(c, f, C.cast(a, C.POINTER(C.c_void_p)))
        h = C.c_void_p()
        L.check(L.lib().quant_linear_create(C.byref(c), C.byref(h)))
        self._h = h.value
        self._recipe = recipe  # a callback recipe must outlive the layer's calls into it
        self.num_gemms = int(num_gemms)
        self.name = name

    @property
    def handle(self) -> int:
        h = self._h
        if h is None:
            raise InvalidHandleError("layer: this Linear is closed")
        return h


    def quantizer(self, tensor_type: str, gemm: int = 0) -> Quantizer:
        """A new handle to the layer's quantizer for "input", "weight" or "grad_output"."""
        h = C.c_void_p()
        L.check(L.lib().quant_linear_quantizer(self.handle, tensor_type.encode(), gemm, C.byref(h)))
        assert h.value is not None
        return Quantizer._adopt(h.value, "linear:%s/%d" % (tensor_type, gemm))

    def weight_updated(self, gemm: int = -1) -> None:
        """Says weight gemm (every GEMM for -1) changed in place: the next forward re-quantizes it."""
        L.check(L.lib().quant_linear_weight_updated(self.handle, gemm))

    def weight_info(self, gemm: int = 0) -> QTensorInfo:
        """Describes the quantized weight of a GEMM (StateError before a forward quantized it)."""
        i = L.quant_qtensor_info()
        i.struct_size = C.sizeof(i)
        L.check(L.lib().quant_linear_weight_get_info(self.handle, gemm, C.byref(i)))
        return _info(i)

    def forward(self, input: ArrayLike, weight: ArrayLike | None, bias: ArrayLike | None = None, *,
                out: ArrayLike | None = None, backward_override: int | str = "none",
                save_original_input: bool = False, input_requires_grad: bool = False,
                weight_requires_grad: bool = False, weight_qtensor: QTensor | None = None,
                input_amax: ArrayLike | None = None, weight_amax: ArrayLike | None = None,
                stream: int | None = None) -> tuple[Any, LinearContext | None]:
        """Y = X W^T + b (quant_linear_forward). Returns (Y, ctx); ctx is None when no
        gradient is required (inference), else a LinearContext for backward.

        weight_qtensor: a weight the caller quantized (weight None then), e.g. with
        ``quantizer("weight").quantize_into`` over buffers of its own; the layer
        reads it, also in backward (keep it unchanged until then). input_amax /
        weight_amax: FP32 [2] amaxes the quantizers use instead of computing them
        (current scaling reduced across processes)."""
        x = as_dltensor(input)
        w = as_dltensor(weight) if weight is not None else None
        wshape = w.shape if w is not None else (weight_qtensor.shape if weight_qtensor is not None else (0, 0))
        if out is None:
            n = wshape[0] if wshape else 0
            out = _like(x, tuple(x.shape[:-1]) + (n,))
        y = as_output(out, "out")
        a = L.quant_linear_forward_args()
        a.struct_size = C.sizeof(a)
        a.input = C.pointer(x.dl)
        if w is not None:
            a.weight = C.pointer(w.dl)
        if weight_qtensor is not None:
            a.weight_qtensor = weight_qtensor.handle
        keep = []
        for field, v in (("input_amax", input_amax), ("weight_amax", weight_amax)):
            if v is not None:
                t = as_dltensor(v)
                keep.append(t)
                setattr(a, field, C.pointer(t.dl))
        b = None
        if bias is not None:
            b = as_dltensor(bias)
            a.bias = C.pointer(b.dl)
        a.output = C.pointer(y.dl)
        a.backward_override = _override(backward_override)
        a.save_original_input = int(save_original_input)
        a.input_requires_grad = int(input_requires_grad)
        a.weight_requires_grad = int(weight_requires_grad)
        s = _stream(stream, x)
        if s is not None:
            a.stream = s
        want_ctx = input_requires_grad or weight_requires_grad
        ctx = C.c_void_p()
        L.check(L.lib().quant_linear_forward(self.handle, C.byref(a), C.byref(ctx) if want_ctx else None))
        if not want_ctx or ctx.value is None:
            return out, None
        return out, LinearContext(ctx.value, {"input_shape": x.shape, "weight_shape": tuple(wshape), "num_gemms": 0})

    def grouped_forward(self, input: ArrayLike, m_splits: Sequence[int], weights: Sequence[ArrayLike] | None,
                        biases: Sequence[ArrayLike] | None = None, *, out: ArrayLike | None = None,
                        backward_override: int | str = "none", save_original_input: bool = False,
                        input_requires_grad: bool = False, weight_requires_grad: bool = False,
                        weight_qtensors: Sequence[QTensor] | None = None, input_amaxes: ArrayLike | None = None,
                        weight_amaxes: ArrayLike | None = None,
                        stream: int | None = None) -> tuple[Any, LinearContext | None]:
        """The grouped forward (quant_grouped_linear_forward): rows of X split by
        m_splits, group g multiplied by weights[g] (all [N, K]) plus biases[g].
        weight_qtensors: caller-quantized weights instead (weights None);
        input_amaxes / weight_amaxes: FP32 [num_gemms, 2] amax overrides."""
        x = as_dltensor(input)
        ws = [as_dltensor(w) for w in weights] if weights is not None else []
        warr = (L.DLTensor * max(len(ws), 1))(*[w.dl for w in ws]) if weights is not None else None
        barr = None
        bs: list[Tensor] = []
        if biases is not None:
            bs = [as_dltensor(b) for b in biases]
            barr = (L.DLTensor * max(len(bs), 1))(*[b.dl for b in bs])
        splits = (C.c_int64 * max(len(m_splits), 1))(*[int(m) for m in m_splits])
        if ws:
            wshape = tuple(ws[0].shape)
        elif weight_qtensors:
            wshape = tuple(weight_qtensors[0].shape)
        else:
            wshape = (0, 0)
        if out is None:
            n = wshape[0] if wshape else 0
            out = _like(x, tuple(x.shape[:-1]) + (n,))
        y = as_output(out, "out")
        a = L.quant_grouped_linear_forward_args()
        a.struct_size = C.sizeof(a)
        a.input = C.pointer(x.dl)
        a.m_splits = C.cast(splits, C.POINTER(C.c_int64))
        if warr is not None:
            a.weights = C.cast(warr, C.POINTER(L.DLTensor))
        qarr = None
        if weight_qtensors is not None:
            qarr = (C.c_void_p * max(len(weight_qtensors), 1))(*[q.handle for q in weight_qtensors])
            a.weight_qtensors = C.cast(qarr, C.POINTER(C.c_void_p))
        keep = []
        for field, v in (("input_amaxes", input_amaxes), ("weight_amaxes", weight_amaxes)):
            if v is not None:
                t = as_dltensor(v)
                keep.append(t)
                setattr(a, field, C.pointer(t.dl))
        if barr is not None:
            a.biases = C.cast(barr, C.POINTER(L.DLTensor))
        a.output = C.pointer(y.dl)
        a.backward_override = _override(backward_override)
        a.save_original_input = int(save_original_input)
        a.input_requires_grad = int(input_requires_grad)
        a.weight_requires_grad = int(weight_requires_grad)
        s = _stream(stream, x)
        if s is not None:
            a.stream = s
        want_ctx = input_requires_grad or weight_requires_grad
        ctx = C.c_void_p()
        L.check(L.lib().quant_grouped_linear_forward(self.handle, C.byref(a),
                                                     C.byref(ctx) if want_ctx else None))
        if not want_ctx or ctx.value is None:
            return out, None
        return out, LinearContext(ctx.value, {"input_shape": x.shape, "weight_shape": wshape,
                                              "num_gemms": self.num_gemms})

    def scaling_amaxes(self, pass_: int | str) -> list[float]:
        """This process's staged delayed-scaling amaxes of a pass ("forward"/"backward")."""
        p = _pass(pass_)
        n = C.c_size_t()
        lib = L.lib()
        L.check(lib.quant_linear_scaling_amaxes(self.handle, p, None, 0, C.byref(n)))
        arr = (C.c_float * max(n.value, 1))()
        L.check(lib.quant_linear_scaling_amaxes(self.handle, p, arr, n.value, C.byref(n)))
        return [float(v) for v in arr[: n.value]]

    def update_scaling(self, pass_: int | str, reduced_amaxes: Sequence[float] | None = None) -> None:
        """Runs the delayed-scaling update of a pass, with amaxes reduced across
        processes (scaling_amaxes' order) or the staged ones (None)."""
        p = _pass(pass_)
        if reduced_amaxes is None:
            L.check(L.lib().quant_linear_update_scaling(self.handle, p, None, 0))
            return
        arr = (C.c_float * max(len(reduced_amaxes), 1))(*[float(v) for v in reduced_amaxes])
        L.check(L.lib().quant_linear_update_scaling(self.handle, p, arr, len(reduced_amaxes)))


__all__ = ["Linear", "LinearContext", "LinearContextInfo", "FORWARD", "BACKWARD", "Device"]
