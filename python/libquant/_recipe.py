"""Recipes: built-in presets, a Python qfactory(role) callback, rule tables."""

from __future__ import annotations

import ctypes as C
import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from . import _lib as L
from ._handle import Owned
from ._core import Quantizer
from ._errors import InvalidArgumentError, InvalidHandleError, LibquantError

_KINDS = {"fp8_delayed": 1, "fp8_current": 2, "fp8_block": 3, "mxfp8": 4, "nvfp4": 5}
_FP8_FORMATS = {"default": 0, "e4m3": 1, "hybrid": 2}
_ALGOS = {"max": 0, "most_recent": 1}


@dataclass(frozen=True)
class Role:
    """A quantizer slot (quant_role): module type ("linear", "grouped_linear", "dpa"),
    tensor type ("input", "weight", "output", "grad_output", "grad_input"; dpa:
    "qkv", "s", "do", "dp") and a free-form name. In a rule's pattern an empty
    field matches anything."""

    module_type: str = ""
    tensor_type: str = ""
    name: str = ""

    def _c(self) -> tuple[L.quant_role, Any]:
        enc = (self.module_type.encode(), self.tensor_type.encode(), self.name.encode())
        return L.quant_role(*enc), enc


def _role_from_c(r: Any) -> Role:
    def s(b: bytes | None) -> str:
        return (b or b"").decode("utf-8", "replace")

    return Role(s(r.module_type), s(r.tensor_type), s(r.name))


# The exception a Python factory raised, per thread, so that the failing
# quant_recipe_quantizer call can raise it (chained) instead of a bare status.
_callback_error = threading.local()


class Recipe(Owned):
    """A recipe hands out a quantizer per role (quant_recipe).

    - ``Recipe.preset("mxfp8")`` (or "fp8_delayed", "fp8_current", "fp8_block",
      "nvfp4") with quant_recipe_config's fields as keyword options;
    - ``Recipe.from_callback(qfactory)``: ``qfactory(role) -> Quantizer`` is called
      through the C callback; libquant takes the returned quantizer over, so return
      a new one per call (the Python object is closed afterwards);
    - ``Recipe.from_rules([(Role(...), quantizer), ...])``: first match wins; each
      role gets a clone of the rule's quantizer.
    """

    _free_fn = "quant_recipe_free"

    _h: int | None

    def __init__(self, handle: int, keep: Any = None) -> None:
        self._h = handle
        self._keep = keep

    @classmethod
    def preset(cls, kind: str | int, *, fp8_format: str | int = 0, margin: float = 0.0,
               amax_history_len: int = 0, amax_compute_algo: str | int = 0, force_pow2_scales: bool = False,
               amax_epsilon: float = 0.0, fp32_scales: bool = False, disable_rht: bool = False,
               disable_stochastic_rounding: bool = False, disable_2d_quantization: bool = False,
               seed: int = 0, offset: int = 0) -> "Recipe":
        """A built-in recipe (quant_recipe_create) with TransformerEngine's per-role defaults."""
        c = L.quant_recipe_config()
        c.struct_size = C.sizeof(c)

        def pick(table: dict[str, int], what: str, v: str | int) -> int:
            if isinstance(v, str):
                if v.lower() not in table:
                    raise InvalidArgumentError("%s %r: want one of %s or an integer" % (what, v, sorted(table)))
                return table[v.lower()]
            return int(v)

        c.kind = pick(_KINDS, "kind", kind)
        c.fp8_format = pick(_FP8_FORMATS, "fp8_format", fp8_format)
        c.margin = margin
        c.amax_history_len = amax_history_len
        c.amax_compute_algo = pick(_ALGOS, "amax_compute_algo", amax_compute_algo)
        c.force_pow2_scales = int(force_pow2_scales)
        c.amax_epsilon = amax_epsilon
        c.fp32_scales = int(fp32_scales)
        c.disable_rht = int(disable_rht)
        c.disable_stochastic_rounding = int(disable_stochastic_rounding)
        c.disable_2d_quantization = int(disable_2d_quantization)
        c.seed = seed
        c.offset = offset
        h = C.c_void_p()
        L.check(L.lib().quant_recipe_create(C.byref(c), C.byref(h)))
        assert h.value is not None
        return cls(h.value)

    @classmethod
    def from_callback(cls, qfactory: Callable[[Role], Quantizer]) -> "Recipe":
        """A custom recipe whose factory is a Python function of the role."""

        def trampoline(_user: Any, role: Any, out: Any) -> int:
            try:
                if not role or not out:
                    raise InvalidArgumentError("recipe callback got a NULL role or out")
                q = qfactory(_role_from_c(role.contents))
                if not isinstance(q, Quantizer):
                    raise InvalidArgumentError("qfactory returned %s, not a Quantizer" % type(q).__name__)
                h = q._h
                if h is None:
                    raise InvalidHandleError("qfactory returned a closed Quantizer")
                q._h = None  # libquant consumes the handle
                out[0] = h
                return 0
            except BaseException as e:  # never let an exception cross the C frame
                _callback_error.exc = e
                status = e.status if isinstance(e, LibquantError) and e.status > 0 else 1
                return int(status)

        cb = L.RECIPE_CALLBACK(trampoline)
        h = C.c_void_p()
        L.check(L.lib().quant_recipe_create_callback(cb, None, C.byref(h)))
        assert h.value is not None
        return cls(h.value, (cb, qfactory))

    @classmethod
    def from_rules(cls, rules: Sequence[tuple[Role, Quantizer]]) -> "Recipe":
        """A custom recipe from a rule table (quant_recipe_create_rules)."""
        n = len(rules)
        arr = (L.quant_recipe_rule * max(n, 1))()
        keep = []
        for i, (pattern, q) in enumerate(rules):
            if not isinstance(pattern, Role):
                pattern = Role(*pattern)
            r, enc = pattern._c()
            keep.append(enc)
            arr[i].pattern = r
            arr[i].quantizer = q.handle
        h = C.c_void_p()
        L.check(L.lib().quant_recipe_create_rules(arr, n, C.byref(h)))
        assert h.value is not None
        return cls(h.value)

    @property
    def handle(self) -> int:
        h = self._h
        if h is None:
            raise InvalidHandleError("recipe: this Recipe is closed")
        return h

    def quantizer(self, module_type: str | Role = "", tensor_type: str = "", name: str = "") -> Quantizer:
        """A new quantizer for a role (quant_recipe_quantizer)."""
        role = module_type if isinstance(module_type, Role) else Role(module_type, tensor_type, name)
        r, _enc = role._c()
        h = C.c_void_p()
        _callback_error.exc = None
        st = L.lib().quant_recipe_quantizer(self.handle, C.byref(r), C.byref(h))
        if st:
            err = L.lib().error(st)
            cause = getattr(_callback_error, "exc", None)
            _callback_error.exc = None
            if cause is not None:
                raise err from cause
            raise err
        assert h.value is not None
        return Quantizer._adopt(h.value, "recipe:%s/%s/%s" % (role.module_type, role.tensor_type, role.name))

