"""libquant.torch.Linear (a drop-in torch.nn.Linear), GroupedLinear and convert()."""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from .. import InvalidArgumentError, LibquantError
from . import _ops, _state
from ._recipes import Recipe

_EXTRA = "_extra_state"
_ROLES = ("input", "weight", "grad_output")


def _resolve(m: Any) -> tuple[Recipe | None, int]:
    """The recipe and backward override a module runs under now: the innermost
    autocast's, else the module's own recipe (quantized backward), else none."""
    frame = _state.current()
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

    def _lq_init(self, recipe: Recipe | None, name: str, save_original_input: bool) -> None:
        if recipe is not None and not isinstance(recipe, Recipe):
            raise InvalidArgumentError("recipe: want a libquant.torch recipe (a preset or CustomRecipe), got %s"
                                       % type(recipe).__name__)
        self.recipe = recipe
        self.lq_name = name
        self.save_original_input = bool(save_original_input)
        self._lq_slots = {}
        self._lq_last = None
        self._lq_last_override = 0
        self._lq_loaded = None
        self._lq_mid = _state.register_module(self)

    # copy.deepcopy and pickling (torch.save of a whole model): the library layers
    # are not copied; a copy re-quantizes on its first forward and takes the
    # delayed-scaling state over, as load_state_dict does.
    def __getstate__(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        for k in ("_lq_slots", "_lq_last", "_lq_mid"):
            d.pop(k, None)
        if self._lq_last is not None:  # the delayed-scaling state travels as a checkpoint's does
            d["_lq_loaded"] = self._lq_extra_state(self._lq_last)
        return d

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)  # type: ignore[misc]
        self._lq_slots = {}
        self._lq_last = None
        self._lq_mid = _state.register_module(self)

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
        return {"version": 1, "recipe": s.recipe.describe(), "pending_forward": bool(s.pending_forward),
                "delayed_scaling": states}

    def _lq_apply_extra_state(self, s: "_ops.Slot", st: dict[str, Any]) -> None:
        if st.get("recipe") != s.recipe.describe():
            warnings.warn("libquant.torch: %s: the checkpoint was quantized under %s, this module runs %s: "
                          "its weights are re-quantized from their high-precision values and the checkpoint's "
                          "delayed-scaling state is not loaded" % (self.lq_name or type(self).__name__,
                                                                    st.get("recipe"), s.recipe.describe()),
                          stacklevel=3)
            return
        states: dict[str, torch.Tensor] = st.get("delayed_scaling", {})
        for key in {k.rsplit("/", 1)[0] for k in states}:
            role, g, d = key.split("/")
            q = s.layer.quantizer(role, int(g))
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

    def _lq_save(self, destination: Any, prefix: str) -> None:
        s = self._lq_last
        if s is not None:
            destination[prefix + _EXTRA] = self._lq_extra_state(s)
        elif self._lq_loaded is not None:
            destination[prefix + _EXTRA] = self._lq_loaded

    def _lq_load(self, state_dict: Any, prefix: str, unexpected_keys: list[str]) -> None:
        key = prefix + _EXTRA
        if key not in state_dict:
            return
        if key in unexpected_keys:
            unexpected_keys.remove(key)
        st = state_dict[key]
        s = self._lq_last
        if s is None and self.recipe is not None:
            s = _ops.slot(self._lq_mid, self.recipe.rid, self._lq_num_gemms())
        if s is None:
            self._lq_loaded = st  # applied when the module first runs under a recipe
        else:
            self._lq_apply_extra_state(s, st)


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
                 save_original_input: bool = False) -> None:
        torch.nn.Linear.__init__(self, in_features, out_features, bias=bias, device=device, dtype=dtype)
        self._lq_init(recipe, name, save_original_input)

    @classmethod
    def from_linear(cls, m: torch.nn.Linear, *, recipe: Recipe | None = None, name: str = "",
                    save_original_input: bool = False) -> "Linear":
        """A Linear sharing m's parameters (the same Parameter objects)."""
        new = cls(m.in_features, m.out_features, bias=m.bias is not None, device="meta",
                  dtype=m.weight.dtype, recipe=recipe, name=name, save_original_input=save_original_input)
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
        y: torch.Tensor
        y, _ = _ops.linear_fwd(input.contiguous(), self.weight, self.bias, self._lq_mid, recipe.rid, override,
                               self.save_original_input, x_rg, w_rg)
        return y

    def extra_repr(self) -> str:
        s = torch.nn.Linear.extra_repr(self)
        if self.recipe is not None:
            s += ", recipe=%s" % self.recipe.describe()
        if self.save_original_input:
            s += ", save_original_input=True"
        return s

    def _save_to_state_dict(self, destination: Any, prefix: str, keep_vars: bool) -> None:
        torch.nn.Linear._save_to_state_dict(self, destination, prefix, keep_vars)
        self._lq_save(destination, prefix)

    def _load_from_state_dict(self, state_dict: Any, prefix: str, local_metadata: Any, strict: bool,
                              missing_keys: list[str], unexpected_keys: list[str], error_msgs: list[str]) -> None:
        torch.nn.Linear._load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                                              unexpected_keys, error_msgs)
        self._lq_load(state_dict, prefix, unexpected_keys)


class GroupedLinear(_QuantizedModule, torch.nn.Module):
    """TransformerEngine's GroupedLinear (mixture of experts): ``num_gemms`` weights
    ``weight0 .. weight{n-1}`` [out_features, in_features] (and ``bias0 ..``); the
    rows of the input are split by ``m_splits`` and group g multiplied by weight g,
    through quant_grouped_linear_forward / _backward."""

    def __init__(self, num_gemms: int, in_features: int, out_features: int, bias: bool = True, device: Any = None,
                 dtype: Any = None, *, recipe: Recipe | None = None, name: str = "",
                 save_original_input: bool = False) -> None:
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
        self._lq_init(recipe, name, save_original_input)

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
        y: torch.Tensor
        y, _ = _ops.grouped_linear_fwd(input.contiguous(), ws, bs, splits, self._lq_mid, recipe.rid, override,
                                       self.save_original_input, x_rg, w_rg)
        return y

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
        self._lq_save(destination, prefix)

    def _load_from_state_dict(self, state_dict: Any, prefix: str, local_metadata: Any, strict: bool,
                              missing_keys: list[str], unexpected_keys: list[str], error_msgs: list[str]) -> None:
        torch.nn.Module._load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                                              unexpected_keys, error_msgs)
        self._lq_load(state_dict, prefix, unexpected_keys)


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
