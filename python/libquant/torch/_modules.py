"""libquant.torch.Linear (a drop-in torch.nn.Linear), GroupedLinear and convert()."""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from .. import InvalidArgumentError, LibquantError
from .. import Linear as _LQLinear
from .. import Quantizer as _LQQuantizer
from . import _ops, _state
from ._recipes import Preset, Recipe

_EXTRA = "_extra_state"
_ROLES = ("input", "weight", "grad_output")
#: state-dict keys of a quantized weight's buffers: prefix + name + _QSEP + "rowwise.data", ...
_QSEP = ".quantized."
#: torch dtypes of the layout's buffer dtypes (the state dict shows typed views)
_TORCH_DTYPES: dict[str, torch.dtype] = {
    n: getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu", "float32", "uint8")
    if hasattr(torch, n)}


def _desc_meta(d: Any) -> list[Any]:
    """A layout entry (BufferDesc) as plain data: [direction, kind, dtype, shape, nbytes]."""
    return [d.direction, d.kind, d.dtype, [int(x) for x in d.shape], int(d.nbytes)]


def _typed(raw: torch.Tensor, d: Any) -> torch.Tensor:
    """The bytes of one buffer as a tensor of its layout dtype and shape (a view)."""
    dt = _TORCH_DTYPES.get(d.dtype)
    n = 1
    for x in d.shape:
        n *= int(x)
    if dt is None or n * torch.empty((), dtype=dt).element_size() != d.nbytes:
        return raw
    return raw.view(dt).view(tuple(d.shape))


def _raw_bytes(t: torch.Tensor) -> torch.Tensor:
    """A checkpoint buffer's bytes, flat uint8."""
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def _delayed_state_to_host(q: Any, usage: str) -> None:
    """Brings q's delayed-scaling states back into C memory before they are
    written through their views. After a quantize on the GPU a state lives in
    device memory, and writes into the (CPU) views of quant_delayed_scaling_state
    are not seen by later quantizes (host/delayed.go); a CPU quantize with the
    quantizer moves the state back (plugins/fp8: toCPULocked), and the next GPU
    quantize copies the views there again. Zeros stage an amax of 0, which the
    history's max leaves as it was (and the caller overwrites it anyway). usage
    is the direction whose state is written (a hybrid's other side, stochastic
    rounding say, is left alone). The C ABI has no call that writes a state in
    place (quant_delayed_scaling_state's views are read-only for a state on a
    device)."""
    q.quantize(torch.zeros(1, 16), usage=usage)


def _alloc_qtensor(q: Any, shape: tuple[int, ...], device: Any) -> tuple[Any, list[tuple[Any, torch.Tensor]]]:
    """An empty QTensor over uint8 buffers torch allocates (quantizer q's layout
    for shape; quant_qtensor_from_buffers), and those (BufferDesc, buffer) pairs."""
    bufs = [(d, torch.zeros(d.nbytes, dtype=torch.uint8, device=device)) for d in q.layout(shape)]
    return q.from_buffers(shape, bufs), bufs


def _resolve(m: Any) -> tuple[Recipe | None, int]:
    """The recipe and backward override a module runs under now: the innermost
    autocast's, else the module's own recipe (quantized backward), else none.
    A module holding its weights only quantized runs under its own recipe (the
    one they were quantized with); autocast gives it the backward override."""
    frame = _state.current()
    if m._lq_qweights is not None:
        name = m.lq_name or type(m).__name__
        if frame is not None and not frame.enabled:
            raise InvalidArgumentError("%s: holds its weights only quantized (quantized_model_init); it has no "
                                       "high-precision weight to run with autocast(enabled=False)" % name)
        if (frame is not None and frame.recipe is not None and frame.recipe is not m.recipe
                and not (_state._DEFAULT and frame.recipe is _state._DEFAULT[0])):
            raise InvalidArgumentError("%s: holds its weights quantized under %s; autocast asks for %s (a module "
                                       "with quantized weights runs under the recipe it was built with)"
                                       % (name, m.recipe.describe(), frame.recipe.describe()))
        if frame is not None:
            return m.recipe, frame.backward_override
        if not torch.compiler.is_compiling() and _ops._in_backward():
            return m.recipe, m._lq_last_override
        return m.recipe, 0
    if frame is not None:
        if not frame.enabled:
            return None, 0
        return frame.recipe, frame.backward_override
    if m.recipe is not None:
        return m.recipe, 0
    if not torch.compiler.is_compiling() and _ops._in_backward() and m._lq_last is not None:
        # activation recomputation (torch.utils.checkpoint) reruns forward during
        # backward, outside the autocast of the first run: rerun it the same way
        return m._lq_last.recipe, m._lq_last_override
    return None, 0


class _QuantizedModule:
    """What Linear and GroupedLinear share: the id the operators find the module
    by, its library layers per recipe (Slots), and their checkpoint state."""

    recipe: Recipe | None
    lq_name: str
    _lq_slots: dict[int, "_ops.Slot"]
    _lq_last: "_ops.Slot | None"
    _lq_last_override: int
    _lq_mid: int
    _lq_loaded: dict[str, Any] | None
    #: quantized_weight: per GEMM, the weight quantizer and the QTensor (over
    #: torch-owned buffers) that is the module's only copy of the weight
    _lq_qweights: list[tuple[Any, Any]] | None
    #: per GEMM, the (BufferDesc, uint8 tensor) pairs the quantized weight lives in
    _lq_qbufs: list[list[tuple[Any, torch.Tensor]]] | None

    def _lq_init(self, recipe: Recipe | None, name: str, save_original_input: bool,
                 quantized_weight: bool | None = None) -> None:
        if recipe is not None and not isinstance(recipe, Recipe):
            raise InvalidArgumentError("recipe: want a libquant.torch recipe (a preset or CustomRecipe), got %s"
                                       % type(recipe).__name__)
        init = _state.current_init()
        if quantized_weight is None:
            quantized_weight = init is not None and init.enabled
        if quantized_weight and recipe is None:
            recipe = init.recipe if init is not None and init.enabled else None
            if recipe is None:
                raise InvalidArgumentError("quantized_weight: needs a recipe to quantize the weight with (give "
                                           "recipe=, or build the module inside quantized_model_init)")
        self.recipe = recipe
        self.lq_name = name
        self.save_original_input = bool(save_original_input)
        self._lq_slots = {}
        self._lq_last = None
        self._lq_last_override = 0
        self._lq_loaded = None
        self._lq_qweights = None
        self._lq_qbufs = None
        self._lq_mid = _state.register_module(self)
        if quantized_weight:
            self._lq_quantize_weights()

    # -- quantized parameters (TransformerEngine's quantized_model_init) -------
    def _lq_weight_names(self) -> list[str]:
        return ["weight"]

    def _lq_quantize_weights(self) -> None:
        """Quantizes the weights (both usages, persistent: spec §10) into buffers
        torch allocates, and replaces each weight Parameter by a placeholder of
        its shape and dtype that holds one element: it only receives the weight
        gradient (MasterWeights moves it to the FP32 master weight)."""
        assert self.recipe is not None
        s = _ops.slot(self._lq_mid, self.recipe.rid, self._lq_num_gemms())
        qws, bufs = [], []
        for g, name in enumerate(self._lq_weight_names()):
            p = getattr(self, name)
            q = s.layer.quantizer("weight", g)
            q.usage = "both"
            qt, b = _alloc_qtensor(q, tuple(p.shape), p.device)
            q.quantize_into(p.detach(), qt, persistent=True)
            qws.append((q, qt))
            bufs.append(b)
            self._lq_placeholder(name, p.shape, p.dtype, p.device, p.requires_grad)
        self._lq_qweights = qws
        self._lq_qbufs = bufs

    def _lq_placeholder(self, name: str, shape: Any, dtype: torch.dtype, device: Any, requires_grad: bool) -> None:
        ph = torch.zeros((), dtype=dtype, device=device).expand(tuple(shape))
        setattr(self, name, torch.nn.Parameter(ph, requires_grad=requires_grad))

    def _lq_qweight_meta(self, g: int) -> dict[str, Any]:
        """Quantized weight g's metadata: shape, usage, persistent, the formats of
        both directions, the quantizer, the high-precision dtype, and the layout
        (direction, kind, dtype, shape, bytes) of every buffer, in layout order."""
        assert self._lq_qweights is not None and self._lq_qbufs is not None
        q, qt = self._lq_qweights[g]
        i = qt.info
        ph = getattr(self, self._lq_weight_names()[g])
        return {"shape": [int(x) for x in i.shape], "usage": int(i.usage), "persistent": bool(i.persistent),
                "formats": [i.rowwise_format, i.columnwise_format], "quantizer": repr(q),
                "dtype": str(ph.dtype).replace("torch.", ""), "buffers": [_desc_meta(d) for d, _ in self._lq_qbufs[g]]}

    @property
    def quantized_weight(self) -> bool:
        """True when the module holds its weights only quantized."""
        return self._lq_qweights is not None

    def quantized_weights(self) -> list[Any]:
        """The quantized weights (libquant.QTensor, one per GEMM) of a module built
        with quantized_weight=True."""
        if self._lq_qweights is None:
            raise InvalidArgumentError("%s: does not hold quantized weights (build it with quantized_weight=True "
                                       "or inside quantized_model_init)" % (self.lq_name or type(self).__name__))
        return [qt for _, qt in self._lq_qweights]

    def weight_quantizer(self, gemm: int = 0) -> Any:
        """The quantizer that writes quantized weight gemm (the layer's weight role)."""
        self.quantized_weights()
        assert self._lq_qweights is not None
        return self._lq_qweights[gemm][0]

    def dequantized_weight(self, gemm: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Quantized weight gemm, dequantized (rowwise) to a new tensor."""
        qt = self.quantized_weights()[gemm]
        assert self._lq_qbufs is not None
        out = torch.empty(tuple(qt.shape), dtype=dtype, device=self._lq_qbufs[gemm][0][1].device)
        qt.dequantize(direction="rowwise", out=out)
        return out

    def write_weight(self, gemm: int, value: torch.Tensor) -> None:
        """Quantizes value (a master weight) into quantized weight gemm in place
        (quant_quantize_into: the same buffers, every direction refreshed)."""
        qt = self.quantized_weights()[gemm]
        assert self._lq_qweights is not None
        self._lq_qweights[gemm][0].quantize_into(value.detach().contiguous(), qt, persistent=True)

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> Any:
        """Module.to / .cuda / .cpu / .half ... of a module holding its weights only
        quantized: every buffer of a quantized weight goes through fn (uint8, so
        only a device change applies: the bytes are copied as they are), and the
        QTensor is assembled again over the moved buffers (quant_qtensor_from_
        buffers: same layout, usage and persistence). A weight's placeholder keeps
        its Parameter object (an optimizer made before still holds it) and stays
        one element, expanded: fn sees that element, so a dtype change applies to
        it (the weight gradient's dtype) and it is never made dense."""
        if self._lq_qweights is None:
            return super()._apply(fn, recurse)  # type: ignore[misc]
        assert self._lq_qbufs is not None
        names = self._lq_weight_names()
        table: dict[str, Any] = self.__dict__["_parameters"]
        params = {n: table[n] for n in names}
        for n in names:
            table[n] = None  # torch's _apply would copy the expanded placeholder densely
        try:
            super()._apply(fn, recurse)  # type: ignore[misc]
        finally:
            table.update(params)
        with torch.no_grad():
            for g, n in enumerate(names):
                ph = params[n]
                assert ph is not None
                one = fn(ph.detach()[(0,) * ph.dim()].clone() if ph.dim() else ph.detach().clone())
                ph.data = one.expand(tuple(ph.shape))
                if ph.grad is not None:
                    ph.grad.data = fn(ph.grad)
                q, qt = self._lq_qweights[g]
                moved = [(d, fn(raw)) for d, raw in self._lq_qbufs[g]]
                if all(new is raw for (_, new), (_, raw) in zip(moved, self._lq_qbufs[g])):
                    continue  # nothing moved (a dtype-only change, or the same device)
                for (d, new), (_, raw) in zip(moved, self._lq_qbufs[g]):
                    if new.dtype != torch.uint8 or new.numel() != d.nbytes:
                        raise InvalidArgumentError("%s: %s: moving a quantized weight's %s.%s buffer gave %s [%d]; "
                                                   "want uint8 [%d]" % (self.lq_name or type(self).__name__, n,
                                                                        d.direction, d.kind, new.dtype,
                                                                        new.numel(), d.nbytes))
                nqt = q.from_buffers(tuple(qt.shape), [(d, new.contiguous()) for d, new in moved])
                nqt.persistent = qt.persistent
                self._lq_qweights[g] = (q, nqt)
                self._lq_qbufs[g] = [(d, new.contiguous()) for d, new in moved]
        return self

    # copy.deepcopy and pickling (torch.save of a whole model): the library layers
    # are not copied; a copy re-quantizes on its first forward and takes the
    # delayed-scaling state over, as load_state_dict does. A quantized weight
    # travels as its buffers (the uint8 tensors, which deepcopy copies and pickle
    # saves) and its metadata; the copy assembles a QTensor over them again.
    def __getstate__(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        for k in ("_lq_slots", "_lq_last", "_lq_mid", "_lq_qweights", "_lq_qbufs"):
            d.pop(k, None)
        if self._lq_last is not None:  # the delayed-scaling state travels as a checkpoint's does
            d["_lq_loaded"] = self._lq_extra_state(self._lq_last)
        if self._lq_qweights is not None:
            assert self._lq_qbufs is not None
            params = dict(d["_parameters"])
            qw = []
            for g, name in enumerate(self._lq_weight_names()):
                ph = params[name]
                params[name] = None  # not the expanded placeholder (deepcopy would make it dense); keeps the order
                qw.append((name, self._lq_qweight_meta(g), [b for _, b in self._lq_qbufs[g]], ph.requires_grad))
            d["_parameters"] = params
            d["_lq_pickled_qweights"] = qw
        return d

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        qw = state.pop("_lq_pickled_qweights", None)
        super().__setstate__(state)  # type: ignore[misc]
        self._lq_slots = {}
        self._lq_last = None
        self._lq_qweights = None
        self._lq_qbufs = None
        self._lq_mid = _state.register_module(self)
        if qw is not None:
            assert self.recipe is not None
            s = _ops.slot(self._lq_mid, self.recipe.rid, self._lq_num_gemms())
            qws, bufs = [], []
            for g, (name, meta, raws, rg) in enumerate(qw):
                q = s.layer.quantizer("weight", g)
                q.usage = "both"
                shape = tuple(meta["shape"])
                descs = q.layout(shape)
                if [_desc_meta(d) for d in descs] != meta["buffers"]:
                    raise InvalidArgumentError("%s: %s: the copied quantized weight's layout %s is not %s's %s"
                                               % (self.lq_name or type(self).__name__, name, meta["buffers"],
                                                  self.recipe.describe(), [_desc_meta(d) for d in descs]))
                qt = q.from_buffers(shape, list(zip(descs, raws)))
                qt.persistent = bool(meta["persistent"])
                qws.append((q, qt))
                bufs.append(list(zip(descs, raws)))
                # on the buffers' device (torch.load's map_location moved them)
                self._lq_placeholder(name, shape, getattr(torch, meta["dtype"]), raws[0].device, rg)
            self._lq_qweights = qws
            self._lq_qbufs = bufs

    def weight_updated(self) -> None:
        """Says the weights changed in a way torch's version counter does not see
        (writes through ``.data``): the next forward re-quantizes them."""
        for s in self._lq_slots.values():
            s.weight_updated()

    def quantization_layer(self, recipe: Recipe | None = None) -> Any:
        """The libquant.Linear (library layer) of a recipe (default: the last used), or None."""
        if recipe is None:
            return self._lq_last.layer if self._lq_last is not None else None
        s = self._lq_slots.get(recipe.rid)
        return s.layer if s is not None else None

    # -- checkpoint state ----------------------------------------------------
    def _lq_num_gemms(self) -> int:
        return 0

    def _lq_extra_state(self, s: "_ops.Slot") -> dict[str, Any]:
        """The recipe's description and every delayed-scaling state (scale and amax
        history, per role, GEMM and direction), as CPU tensors."""
        states: dict[str, torch.Tensor] = {}
        for role in ("input", "weight", "grad_output"):
            for g in range(s.n):
                q = s.layer.quantizer(role, g)
                for d in ("rowwise", "columnwise", None):
                    try:
                        scale, hist = q.delayed_scaling_state(d)
                    except LibquantError:
                        continue
                    key = "%s/%d/%s" % (role, g, d or "any")
                    states[key + "/scale"] = torch.from_numpy(np.array(scale.numpy(), copy=True))
                    states[key + "/amax_history"] = torch.from_numpy(np.array(hist.numpy(), copy=True))
                    if d is None:
                        break
        preset = ({"kind": s.recipe.kind, "options": dict(s.recipe.options)} if isinstance(s.recipe, Preset)
                  else None)
        return {"version": 1, "recipe": s.recipe.describe(), "preset": preset,
                "pending_forward": bool(s.pending_forward), "delayed_scaling": states}

    def _lq_apply_extra_state(self, s: "_ops.Slot", st: dict[str, Any]) -> None:
        if st.get("recipe") != s.recipe.describe():
            warnings.warn("libquant.torch: %s: the checkpoint was quantized under %s, this module runs %s: "
                          "its weights are re-quantized (from their high-precision values, or from the "
                          "checkpoint's quantized ones dequantized) and the checkpoint's delayed-scaling state is "
                          "not loaded" % (self.lq_name or type(self).__name__, st.get("recipe"), s.recipe.describe()),
                          stacklevel=3)
            return
        states: dict[str, torch.Tensor] = st.get("delayed_scaling", {})
        for key in sorted({k.rsplit("/", 1)[0] for k in states}):
            role, g, d = key.split("/")
            q = s.layer.quantizer(role, int(g))
            _delayed_state_to_host(q, "both" if d == "any" else d)
            scale, hist = q.delayed_scaling_state(None if d == "any" else d)
            sv, hv = scale.numpy(), hist.numpy()
            src_s, src_h = states[key + "/scale"].numpy(), states[key + "/amax_history"].numpy()
            if sv.shape != src_s.shape or hv.shape != src_h.shape:
                raise InvalidArgumentError("%s: delayed-scaling state %s has shape %s/%s in the checkpoint, %s/%s "
                                           "here (another amax_history_len?)" % (
                                               self.lq_name, key, src_s.shape, src_h.shape, sv.shape, hv.shape))
            np.copyto(sv, src_s)
            np.copyto(hv, src_h)
        s.pending_forward = bool(st.get("pending_forward", False))
        s.delayed = True if states else None

    def _lq_slot_created(self, s: "_ops.Slot") -> None:
        if self._lq_loaded is not None:
            st, self._lq_loaded = self._lq_loaded, None
            self._lq_apply_extra_state(s, st)

    def _lq_save(self, destination: Any, prefix: str, keep_vars: bool) -> None:
        """After torch's own entries: the extra state and, for a module holding its
        weights only quantized, every buffer of each quantized weight (zero-copy
        views, typed as the layout says, under ``NAME.quantized.DIRECTION.KIND``)
        in place of the weight's gradient placeholder; their metadata goes into the
        extra state's ``quantized_weights``."""
        s = self._lq_last
        st = self._lq_extra_state(s) if s is not None else self._lq_loaded
        if self._lq_qweights is not None:
            assert self._lq_qbufs is not None and st is not None
            st = dict(st)
            metas = {}
            for g, name in enumerate(self._lq_weight_names()):
                destination.pop(prefix + name, None)
                metas[name] = self._lq_qweight_meta(g)
                for d, raw in self._lq_qbufs[g]:
                    destination[prefix + name + _QSEP + d.direction + "." + d.kind] = _typed(
                        raw if keep_vars else raw.detach(), d)
            st["quantized_weights"] = metas
        if st is not None:
            destination[prefix + _EXTRA] = st

    def _lq_load_state(self, state_dict: Any, prefix: str, local_metadata: Any, strict: bool,
                       missing_keys: list[str], unexpected_keys: list[str], error_msgs: list[str]) -> None:
        """load_state_dict for both modules. A weight comes as a high-precision tensor
        (``NAME``) or as a quantized weight's buffers (``NAME.quantized.*``, metadata
        in the extra state). Into a module holding its weights quantized under the
        checkpoint's recipe with the same layout, the buffers are copied byte for
        byte; every other combination changes precision and warns: a high-precision
        weight is quantized into a quantized module, a quantized one from another
        recipe is dequantized and re-quantized, and a quantized one loaded into a
        high-precision module is dequantized."""
        ekey = prefix + _EXTRA
        st = state_dict.get(ekey)
        if st is not None and not isinstance(st, dict):
            error_msgs.append("%s: want a dict (libquant.torch's extra state), got %s" % (ekey, type(st).__name__))
            st = None
        qmeta = (st or {}).get("quantized_weights") or {}
        handled = {ekey}
        incoming: dict[str, tuple[Any, ...]] = {}
        for name in self._lq_weight_names():
            pre = prefix + name + _QSEP
            qks = {k[len(pre):]: v for k, v in state_dict.items() if k.startswith(pre)}
            if qks:
                handled.update(pre + k for k in qks)
                if name not in qmeta:
                    error_msgs.append("%s: quantized buffers %s without their metadata (%s['quantized_weights'])"
                                      % (prefix + name, sorted(qks), ekey))
                    continue
                incoming[name] = ("quantized", qmeta[name], qks)
            elif self._lq_qweights is not None and prefix + name in state_dict:
                handled.add(prefix + name)  # torch would copy it into the placeholder
                incoming[name] = ("high_precision", state_dict[prefix + name])
        sd = {k: v for k, v in state_dict.items() if k not in handled}
        module: Any = self
        torch.nn.Module._load_from_state_dict(module, sd, prefix, local_metadata, strict, missing_keys,
                                              unexpected_keys, error_msgs)
        for name, inc in incoming.items():
            if prefix + name in missing_keys:
                missing_keys.remove(prefix + name)
            try:
                self._lq_load_weight(name, inc, st or {})
            except (LibquantError, RuntimeError) as e:
                error_msgs.append("%s: %s" % (prefix + name, e))
        if st is None:
            return
        st = {k: v for k, v in st.items() if k != "quantized_weights"}
        s = self._lq_last
        if s is None and self.recipe is not None:
            s = _ops.slot(self._lq_mid, self.recipe.rid, self._lq_num_gemms())
        if s is None:
            self._lq_loaded = st  # applied when the module first runs under a recipe
        else:
            self._lq_apply_extra_state(s, st)

    def _lq_load_weight(self, name: str, inc: tuple[Any, ...], st: dict[str, Any]) -> None:
        g = self._lq_weight_names().index(name)
        p = getattr(self, name)
        who = self.lq_name or type(self).__name__
        if inc[0] == "high_precision":
            value = inc[1]
            if tuple(value.shape) != tuple(p.shape):
                raise InvalidArgumentError("shape %s in the checkpoint, %s here" % (tuple(value.shape),
                                                                                   tuple(p.shape)))
            assert self.recipe is not None
            warnings.warn("libquant.torch: %s: the checkpoint holds %s in high precision (%s); this module holds it "
                          "only quantized under %s: it is quantized on loading (the precision changes)"
                          % (who, name, str(value.dtype).replace("torch.", ""), self.recipe.describe()),
                          stacklevel=4)
            self.write_weight(g, value.to(device=p.device, dtype=p.dtype))
            return
        _, meta, bufs = inc
        if tuple(meta["shape"]) != tuple(p.shape):
            raise InvalidArgumentError("shape %s in the checkpoint, %s here" % (tuple(meta["shape"]), tuple(p.shape)))
        if (self._lq_qweights is not None and self.recipe is not None and st.get("recipe") == self.recipe.describe()
                and meta == self._lq_qweight_meta(g)):
            # the same recipe, formats, usage and layout: the bytes, as they are
            assert self._lq_qbufs is not None
            with torch.no_grad():
                for d, raw in self._lq_qbufs[g]:
                    key = d.direction + "." + d.kind
                    if key not in bufs:
                        raise InvalidArgumentError("the checkpoint lacks buffer %s.quantized.%s" % (name, key))
                    src = _raw_bytes(bufs[key])
                    if src.numel() != d.nbytes:
                        raise InvalidArgumentError("buffer %s.quantized.%s: %d bytes in the checkpoint, the layout "
                                                   "says %d" % (name, key, src.numel(), d.nbytes))
                    raw.copy_(src)
            return
        w = self._lq_dequantize_checkpoint(g, meta, bufs, st)
        where = "under %s" % st.get("recipe")
        if self._lq_qweights is not None:
            assert self.recipe is not None
            warnings.warn("libquant.torch: %s: the checkpoint holds %s quantized %s (%s); this module holds it "
                          "quantized under %s: it is dequantized and re-quantized (the precision changes)"
                          % (who, name, where, "/".join(f for f in meta["formats"] if f), self.recipe.describe()),
                          stacklevel=4)
            self.write_weight(g, w.to(device=p.device))
        else:
            warnings.warn("libquant.torch: %s: the checkpoint holds %s quantized %s (%s); this module holds it in "
                          "%s: it is loaded dequantized (the precision changes from %s to %s)"
                          % (who, name, where, "/".join(f for f in meta["formats"] if f),
                             str(p.dtype).replace("torch.", ""), meta["formats"][0] or meta["formats"][1],
                             str(p.dtype).replace("torch.", "")), stacklevel=4)
            with torch.no_grad():
                p.copy_(w)
            self.weight_updated()

    def _lq_dequantize_checkpoint(self, g: int, meta: dict[str, Any], bufs: dict[str, torch.Tensor],
                                  st: dict[str, Any]) -> torch.Tensor:
        """The values of a checkpoint's quantized weight (its rowwise direction, the
        one the forward GEMM reads), FP32. The quantizer to read the buffers with is
        the checkpoint recipe's weight quantizer when that is a preset, else one of
        the rowwise format (a CustomRecipe's factory is code, not in the checkpoint);
        its layout must be the checkpoint's, else this raises."""
        shape = tuple(meta["shape"])
        spec = st.get("preset")
        listed = meta["buffers"]
        if spec is not None:
            layer = _LQLinear(Preset(spec["kind"], **spec["options"]).build(), name=self.lq_name,
                              num_gemms=self._lq_num_gemms())
            q = layer.quantizer("weight", g)
            q.usage = meta["usage"]
        else:
            fmt = meta["formats"][0]
            if not fmt:
                raise InvalidArgumentError("the checkpoint's quantized weight has no rowwise direction to "
                                           "dequantize")
            row = [b for b in listed if b[0] == "rowwise"]
            e5m2 = any(b[1] == "data" and b[2] == "float8_e5m2" for b in row)
            q = _LQQuantizer(fmt, usage="rowwise", element="e5m2" if e5m2 else 0)
            listed = row
        descs = q.layout(shape)
        if [_desc_meta(d) for d in descs] != listed:
            raise InvalidArgumentError("cannot read the checkpoint's quantized weight (recipe %s): its layout %s is "
                                       "not %s's %s; load it into a model built with that recipe"
                                       % (st.get("recipe"), listed, q.format, [_desc_meta(d) for d in descs]))
        raws = []
        for d in descs:
            key = d.direction + "." + d.kind
            if key not in bufs:
                raise InvalidArgumentError("the checkpoint lacks buffer quantized.%s" % key)
            raws.append(_raw_bytes(bufs[key]).clone())
        qt = q.from_buffers(shape, list(zip(descs, raws)))
        out = torch.empty(shape, dtype=torch.float32, device=raws[0].device)
        qt.dequantize(direction="rowwise", out=out)
        qt.close()
        return out

class Linear(_QuantizedModule, torch.nn.Linear):
    """A drop-in for torch.nn.Linear (the same constructor, ``weight`` / ``bias``
    parameters, state-dict keys, ``reset_parameters``) whose forward and backward
    run through libquant's linear ops (quant_linear_forward / _backward).

    It runs quantized under the innermost ``libquant.torch.autocast`` (its recipe
    and backward override), else under its own ``recipe`` (quantized backward),
    else in high precision exactly as torch.nn.Linear. ``name`` is the roles'
    name a CustomRecipe's qfactory sees; ``save_original_input`` keeps the
    original X for the weight gradient instead of its columnwise quantized form.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device: Any = None,
                 dtype: Any = None, *, recipe: Recipe | None = None, name: str = "",
                 save_original_input: bool = False, quantized_weight: bool | None = None) -> None:
        torch.nn.Linear.__init__(self, in_features, out_features, bias=bias, device=device, dtype=dtype)
        self._lq_init(recipe, name, save_original_input, quantized_weight)

    @classmethod
    def from_linear(cls, m: torch.nn.Linear, *, recipe: Recipe | None = None, name: str = "",
                    save_original_input: bool = False) -> "Linear":
        """A Linear sharing m's parameters (the same Parameter objects)."""
        new = cls(m.in_features, m.out_features, bias=m.bias is not None, device="meta",
                  dtype=m.weight.dtype, recipe=recipe, name=name, save_original_input=save_original_input,
                  quantized_weight=False)
        new.weight = m.weight
        new.bias = m.bias
        new.train(m.training)
        return new

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        recipe, override = _resolve(self)
        if recipe is None:
            return F.linear(input, self.weight, self.bias)
        grad = torch.is_grad_enabled()
        x_rg = grad and input.requires_grad
        w_rg = grad and self.weight.requires_grad
        if grad and self.bias is not None and self.bias.requires_grad and not (x_rg or w_rg):
            x_rg = True  # only a context can give the bias gradient
        return _ops.linear(input.contiguous(), self.weight, self.bias, self._lq_mid, recipe.rid, override,
                           self.save_original_input, x_rg, w_rg)

    def extra_repr(self) -> str:
        s = torch.nn.Linear.extra_repr(self)
        if self.recipe is not None:
            s += ", recipe=%s" % self.recipe.describe()
        if self.save_original_input:
            s += ", save_original_input=True"
        if self._lq_qweights is not None:
            s += ", quantized_weight=True"
        return s

    def _save_to_state_dict(self, destination: Any, prefix: str, keep_vars: bool) -> None:
        torch.nn.Linear._save_to_state_dict(self, destination, prefix, keep_vars)
        self._lq_save(destination, prefix, keep_vars)

    def _load_from_state_dict(self, state_dict: Any, prefix: str, local_metadata: Any, strict: bool,
                              missing_keys: list[str], unexpected_keys: list[str], error_msgs: list[str]) -> None:
        self._lq_load_state(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)


class GroupedLinear(_QuantizedModule, torch.nn.Module):
    """TransformerEngine's GroupedLinear (mixture of experts): ``num_gemms`` weights
    ``weight0 .. weight{n-1}`` [out_features, in_features] (and ``bias0 ..``); the
    rows of the input are split by ``m_splits`` and group g multiplied by weight g,
    through quant_grouped_linear_forward / _backward."""

    def __init__(self, num_gemms: int, in_features: int, out_features: int, bias: bool = True, device: Any = None,
                 dtype: Any = None, *, recipe: Recipe | None = None, name: str = "",
                 save_original_input: bool = False, quantized_weight: bool | None = None) -> None:
        torch.nn.Module.__init__(self)
        if num_gemms < 1:
            raise InvalidArgumentError("num_gemms: want >= 1, got %d" % num_gemms)
        self.num_gemms = int(num_gemms)
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        self.use_bias = bool(bias)
        kw = {"device": device, "dtype": dtype}
        for g in range(self.num_gemms):
            self.register_parameter("weight%d" % g, torch.nn.Parameter(torch.empty(out_features, in_features, **kw)))
            if bias:
                self.register_parameter("bias%d" % g, torch.nn.Parameter(torch.empty(out_features, **kw)))
        self.reset_parameters()
        self._lq_init(recipe, name, save_original_input, quantized_weight)

    def _lq_weight_names(self) -> list[str]:
        return ["weight%d" % g for g in range(self.num_gemms)]

    def weights(self) -> list[torch.nn.Parameter]:
        return [getattr(self, "weight%d" % g) for g in range(self.num_gemms)]

    def biases(self) -> list[torch.nn.Parameter]:
        return [getattr(self, "bias%d" % g) for g in range(self.num_gemms)] if self.use_bias else []

    def reset_parameters(self) -> None:
        """torch.nn.Linear's initialization, per GEMM."""
        for w in self.weights():
            torch.nn.init.kaiming_uniform_(w, a=math.sqrt(5))
        bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
        for b in self.biases():
            torch.nn.init.uniform_(b, -bound, bound)

    def _lq_num_gemms(self) -> int:
        return self.num_gemms

    def forward(self, input: torch.Tensor, m_splits: Sequence[int]) -> torch.Tensor:
        splits = [int(m) for m in m_splits]
        ws, bs = self.weights(), self.biases()
        if len(splits) != self.num_gemms:
            raise InvalidArgumentError("m_splits: want %d row counts, got %d" % (self.num_gemms, len(splits)))
        recipe, override = _resolve(self)
        if recipe is None:
            x2 = input.reshape(-1, self.in_features)
            outs = [F.linear(xg, ws[g], bs[g] if bs else None) for g, xg in enumerate(torch.split(x2, splits))]
            return torch.cat(outs).reshape(tuple(input.shape[:-1]) + (self.out_features,))
        grad = torch.is_grad_enabled()
        x_rg = grad and input.requires_grad
        w_rg = grad and any(w.requires_grad for w in ws)
        if grad and any(b.requires_grad for b in bs) and not (x_rg or w_rg):
            x_rg = True
        return _ops.grouped_linear(input.contiguous(), ws, bs, splits, self._lq_mid, recipe.rid, override,
                                   self.save_original_input, x_rg, w_rg)

    def extra_repr(self) -> str:
        s = "num_gemms=%d, in_features=%d, out_features=%d, bias=%s" % (
            self.num_gemms, self.in_features, self.out_features, self.use_bias)
        if self.recipe is not None:
            s += ", recipe=%s" % self.recipe.describe()
        if self.save_original_input:
            s += ", save_original_input=True"
        return s

    def _save_to_state_dict(self, destination: Any, prefix: str, keep_vars: bool) -> None:
        torch.nn.Module._save_to_state_dict(self, destination, prefix, keep_vars)
        self._lq_save(destination, prefix, keep_vars)

    def _load_from_state_dict(self, state_dict: Any, prefix: str, local_metadata: Any, strict: bool,
                              missing_keys: list[str], unexpected_keys: list[str], error_msgs: list[str]) -> None:
        self._lq_load_state(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)


def convert(model: torch.nn.Module, recipe: Recipe | None = None,
            filter: Callable[[torch.nn.Module, str], bool] | None = None, *,
            save_original_input: bool = False) -> torch.nn.Module:
    """Swaps model's torch.nn.Linear modules for libquant.torch.Linear in place,
    keeping their Parameter objects (an optimizer made before still works).
    ``filter(module, fqn)`` (torchao's filter_fn) picks which; the new modules get
    ``recipe`` as their own (None: they run quantized only under autocast) and
    their qualified name as the roles' name. Returns the model (a new module when
    model itself is an nn.Linear)."""

    def want(m: torch.nn.Module, fqn: str) -> bool:
        return (isinstance(m, torch.nn.Linear) and not isinstance(m, Linear)
                and (filter is None or bool(filter(m, fqn))))

    if want(model, ""):
        assert isinstance(model, torch.nn.Linear)
        return Linear.from_linear(model, recipe=recipe, name="", save_original_input=save_original_input)
    for fqn, parent in list(model.named_modules()):
        for cname, child in list(parent.named_children()):
            full = "%s.%s" % (fqn, cname) if fqn else cname
            if want(child, full):
                assert isinstance(child, torch.nn.Linear)
                setattr(parent, cname, Linear.from_linear(child, recipe=recipe, name=full,
                                                          save_original_input=save_original_input))
    return model
