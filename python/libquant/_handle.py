"""Owned: the lifetime of a C handle a Python object owns (one copy for
Quantizer, QTensor, Recipe, Linear and LinearContext)."""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

from . import _lib as L

_T = TypeVar("_T", bound="Owned")


class Owned:
    """Frees its handle with the C function named by ``_free_fn``: at close(),
    or when garbage-collected; ``with`` closes it. A subclass whose views must
    outlive close() returns True from _views_alive(): the free then waits in
    ``_deferred`` for its own release path."""

    _free_fn: ClassVar[str]
    _h: Any = None
    _deferred: Any = None

    def _views_alive(self) -> bool:
        return False

    def close(self) -> None:
        """Frees the handle now (or, while views of it are alive, when the last of
        them goes); the object is unusable at once."""
        h, self._h = self._h, None
        if h is None:
            return
        if self._views_alive():
            self._deferred = h
            return
        st = getattr(L.lib(), self._free_fn)(h)
        if st:  # refused (a QTensor a QuantizePlan pins): the object stays usable
            self._h = h
            L.check(st)

    def __del__(self) -> None:
        h = getattr(self, "_h", None) or getattr(self, "_deferred", None)
        if h is not None:
            self._h = self._deferred = None
            try:
                getattr(L.lib(), self._free_fn)(h)
            except Exception:  # interpreter shutdown
                pass

    def __enter__(self: _T) -> _T:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
