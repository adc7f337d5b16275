"""Recipes the way TransformerEngine users write them: the presets (DelayedScaling,
Float8CurrentScaling, Float8BlockScaling, MXFP8BlockScaling, NVFP4BlockScaling),
CustomRecipe(qfactory) with HybridQuantizer and identity roles.

A recipe here is a description; ``build()`` makes the library recipe
(libquant.Recipe) that the layers ask for one quantizer per role and GEMM.
"""

from __future__ import annotations

import inspect
import itertools
import threading
from typing import Any, Callable, Union

from .. import InvalidArgumentError, Quantizer
from .. import Recipe as _LQRecipe
from .. import Role

__all__ = ["Recipe", "Preset", "DelayedScaling", "Float8CurrentScaling", "Float8BlockScaling",
           "MXFP8BlockScaling", "NVFP4BlockScaling", "CustomRecipe", "HybridQuantizer", "IdentityQuantizer",
           "Role", "preset", "PRESETS"]

_ids = itertools.count(1)
_ids_lock = threading.Lock()


class Recipe:
    """Base of every recipe: a process-unique ``rid`` (the layers key their
    library state by it) and ``describe()``, the text a checkpoint records."""

    rid: int

    def __init__(self) -> None:
        with _ids_lock:
            self.rid = next(_ids)
        self._built: _LQRecipe | None = None
        from . import _state

        _state.RECIPES[self.rid] = self

    def describe(self) -> str:
        raise NotImplementedError

    def _make(self) -> _LQRecipe:
        raise NotImplementedError

    def build(self) -> _LQRecipe:
        """The library recipe (made once, shared by the layers that use this recipe)."""
        if self._built is None:
            self._built = self._make()
        return self._built

    def __repr__(self) -> str:
        return self.describe()

    # A recipe is a shared description: copy.deepcopy of a model keeps it (the
    # copy's modules run under the same recipe object); pickling (torch.save of a
    # whole model) stores the description and the unpickled recipe gets a new id
    # and builds its library recipe afresh (a CustomRecipe's qfactory pickles as
    # Python pickles functions: by qualified name).
    def __deepcopy__(self, memo: dict[int, Any]) -> "Recipe":
        return self

    def __getstate__(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d.pop("rid", None)
        d["_built"] = None
        return d

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        with _ids_lock:
            self.rid = next(_ids)
        from . import _state

        _state.RECIPES[self.rid] = self


class Preset(Recipe):
    """A built-in recipe (quant_recipe_create): kind "fp8_delayed", "fp8_current",
    "fp8_block", "mxfp8" or "nvfp4" and quant_recipe_config's fields by name."""

    def __init__(self, kind: str, **options: Any) -> None:
        if kind not in PRESETS:
            raise InvalidArgumentError("recipe kind %r: want one of %s" % (kind, sorted(PRESETS)))
        params = inspect.signature(_LQRecipe.preset).parameters
        for k in options:
            if k not in params or k == "kind":
                raise InvalidArgumentError("recipe option %r: %s takes %s" % (
                    k, kind, sorted(p for p in params if p not in ("cls", "kind"))))
        self.kind = kind
        self.options = dict(options)
        super().__init__()

    def describe(self) -> str:
        opts = ", ".join("%s=%r" % kv for kv in sorted(self.options.items()))
        return "%s(%s)" % (self.kind, opts)

    def _make(self) -> _LQRecipe:
        return _LQRecipe.preset(self.kind, **self.options)


PRESETS = ("fp8_delayed", "fp8_current", "fp8_block", "mxfp8", "nvfp4")


def preset(kind: str, **options: Any) -> Preset:
    """A built-in recipe by its library name (see Preset)."""
    return Preset(kind, **options)


def DelayedScaling(*, margin: float = 0.0, amax_history_len: int = 1024, amax_compute_algo: str = "max",
                   fp8_format: str = "hybrid") -> Preset:
    """TransformerEngine's DelayedScaling: per-tensor FP8, scales from an amax history."""
    return Preset("fp8_delayed", margin=margin, amax_history_len=amax_history_len,
                  amax_compute_algo=amax_compute_algo, fp8_format=fp8_format)


def Float8CurrentScaling(*, fp8_format: str = "hybrid", force_pow2_scales: bool = False,
                         amax_epsilon: float = 0.0) -> Preset:
    """TransformerEngine's Float8CurrentScaling: per-tensor FP8, this tensor's amax."""
    return Preset("fp8_current", fp8_format=fp8_format, force_pow2_scales=force_pow2_scales,
                  amax_epsilon=amax_epsilon)


def Float8BlockScaling(*, fp8_format: str = "e4m3", fp32_scales: bool = False,
                       amax_epsilon: float = 0.0) -> Preset:
    """TransformerEngine's Float8BlockScaling: 1x128 activations, 128x128 weights."""
    return Preset("fp8_block", fp8_format=fp8_format, fp32_scales=fp32_scales, amax_epsilon=amax_epsilon)


def MXFP8BlockScaling(*, fp8_format: str = "e4m3") -> Preset:
    """TransformerEngine's MXFP8BlockScaling: 1x32 blocks, E8M0 scales."""
    return Preset("mxfp8", fp8_format=fp8_format)


def NVFP4BlockScaling(*, disable_rht: bool = False, disable_stochastic_rounding: bool = False,
                      disable_2d_quantization: bool = False, seed: int = 0) -> Preset:
    """TransformerEngine's NVFP4BlockScaling: 1x16 E2M1 blocks, RHT and SR on grads."""
    return Preset("nvfp4", disable_rht=disable_rht, disable_stochastic_rounding=disable_stochastic_rounding,
                  disable_2d_quantization=disable_2d_quantization, seed=seed)


class IdentityQuantizer:
    """A role kept in high precision (format "identity"); ``dtype`` converts."""

    def __init__(self, dtype: Any = None) -> None:
        self.dtype = dtype

    def __repr__(self) -> str:
        return "IdentityQuantizer(%s)" % ("" if self.dtype is None else repr(self.dtype))


class HybridQuantizer:
    """Two formats in one tensor: ``rowwise`` (what the forward GEMM reads) and
    ``columnwise`` (what backward's GEMMs read), e.g. MXFP8 forward / NVFP4 backward.
    columnwise_source: "original" or "rowwise_dequantized"."""

    def __init__(self, rowwise: "QuantizerSpec", columnwise: "QuantizerSpec", *,
                 columnwise_source: str = "original") -> None:
        self.rowwise = rowwise
        self.columnwise = columnwise
        self.columnwise_source = columnwise_source

    def __repr__(self) -> str:
        return "HybridQuantizer(rowwise=%r, columnwise=%r)" % (self.rowwise, self.columnwise)


QuantizerSpec = Union[Quantizer, HybridQuantizer, IdentityQuantizer, str, None]

_QUANTIZER_PARAMS = tuple(p for p in inspect.signature(Quantizer.__init__).parameters if p not in ("self", "format"))


def make_quantizer(spec: QuantizerSpec) -> Quantizer:
    """A NEW library quantizer for what a qfactory returned. A Quantizer the user made
    is rebuilt from its format and options, so the user's object is never consumed
    and a factory may return the same object for many roles."""
    if spec is None:
        return Quantizer("identity")
    if isinstance(spec, IdentityQuantizer):
        return Quantizer("identity", dtype=spec.dtype) if spec.dtype is not None else Quantizer("identity")
    if isinstance(spec, str):
        return Quantizer(spec)
    if isinstance(spec, HybridQuantizer):
        return Quantizer.hybrid(make_quantizer(spec.rowwise), make_quantizer(spec.columnwise),
                                columnwise_source=spec.columnwise_source)
    if isinstance(spec, Quantizer):
        opts = {k: v for k, v in spec.options.items() if k in _QUANTIZER_PARAMS}
        if spec.options or "(" not in spec.format and ":" not in spec.format:
            return Quantizer(spec.format, **opts)
        return spec  # an adopted handle (from a recipe or hybrid): handed over as is
    raise InvalidArgumentError("qfactory returned %s: want a libquant.Quantizer, HybridQuantizer, "
                               "IdentityQuantizer, a format name or None (identity)" % type(spec).__name__)


class CustomRecipe(Recipe):
    """TransformerEngine's CustomRecipe: ``qfactory(role)`` gets a Role (module_type
    "linear" or "grouped_linear"; tensor_type "input", "weight", "grad_output" for
    the linear layers, "output"/"grad_input" for modules that quantize those; name:
    the module's name) and returns a Quantizer, a HybridQuantizer, an
    IdentityQuantizer, a format name, or None for identity."""

    def __init__(self, qfactory: Callable[[Role], QuantizerSpec], *, name: str = "") -> None:
        if not callable(qfactory):
            raise InvalidArgumentError("qfactory: want a callable of a Role, got %s" % type(qfactory).__name__)
        self.qfactory = qfactory
        self.name = name or getattr(qfactory, "__qualname__", type(qfactory).__name__)
        super().__init__()

    def describe(self) -> str:
        return "custom(%s)" % self.name

    def _make(self) -> _LQRecipe:
        f = self.qfactory
        return _LQRecipe.from_callback(lambda role: make_quantizer(f(role)))
