"""Process-wide state: the autocast stack and the registries the custom operators
look modules and recipes up in (an operator's arguments are tensors and
integers, so a module and a recipe travel as their integer ids)."""

from __future__ import annotations

import contextlib
import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

from .. import InvalidArgumentError

if TYPE_CHECKING:
    from ._recipes import Recipe

#: rid -> recipe (weak: whoever runs a module under a recipe holds it, and a
#: module's layer for a recipe holds it from then on)
RECIPES: "weakref.WeakValueDictionary[int, Recipe]" = weakref.WeakValueDictionary()
#: mid -> module (weak: a module that is gone frees its layers)
MODULES: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()
_mid_lock = threading.Lock()
_next_mid = [0]


def register_module(m: Any) -> int:
    with _mid_lock:
        _next_mid[0] += 1
        mid = _next_mid[0]
    MODULES[mid] = m
    return mid


BACKWARD_OVERRIDES = {None: 0, "none": 0, "high_precision": 1, "dequantized": 2}


@dataclass(frozen=True)
class Frame:
    """One autocast level: what modules run under it."""

    enabled: bool
    recipe: "Recipe | None"
    backward_override: int
    group: Any


_STACK: list[Frame] = []  # process-wide, as TransformerEngine's autocast state
_DEFAULT: list["Recipe"] = []


def _default_recipe() -> "Recipe":
    """TransformerEngine's default recipe, DelayedScaling(), made once."""
    if not _DEFAULT:
        from ._recipes import DelayedScaling

        _DEFAULT.append(DelayedScaling())
    return _DEFAULT[0]


def current() -> Frame | None:
    """The innermost autocast frame, or None outside every autocast."""
    return _STACK[-1] if _STACK else None


@contextlib.contextmanager
def autocast(enabled: bool = True, recipe: "Recipe | None" = None, *, backward_override: str | None = None,
             amax_reduction_group: Any = None) -> Iterator[None]:
    """Runs libquant.torch modules quantized under ``recipe`` (TransformerEngine's
    ``te.autocast``). Nesting: the inner context wins; its ``recipe=None`` inherits
    the enclosing one's (DelayedScaling() outermost, as TransformerEngine), and
    ``amax_reduction_group`` likewise. ``enabled=False`` runs them in high precision
    (plain ``torch.nn.functional.linear``). ``backward_override``: None (quantized
    backward), "high_precision" (backward on the original X and W) or
    "dequantized" (backward on the forward-quantized X and W, dequantized).
    ``amax_reduction_group``: a torch.distributed process group whose ranks MAX-reduce
    the delayed-scaling amaxes before every scale update."""
    if backward_override not in BACKWARD_OVERRIDES:
        raise InvalidArgumentError("backward_override %r: want None, 'high_precision' or 'dequantized'"
                                   % (backward_override,))
    outer = current()
    if recipe is None:
        if outer is not None and outer.recipe is not None:
            recipe = outer.recipe
        elif enabled:
            recipe = _default_recipe()
    from ._recipes import Recipe as _R

    if recipe is not None and not isinstance(recipe, _R):
        raise InvalidArgumentError("recipe: want a libquant.torch recipe (a preset or CustomRecipe), got %s"
                                   % type(recipe).__name__)
    group = amax_reduction_group if amax_reduction_group is not None else (outer.group if outer else None)
    _STACK.append(Frame(bool(enabled), recipe, BACKWARD_OVERRIDES[backward_override], group))
    try:
        yield
    finally:
        _STACK.pop()
