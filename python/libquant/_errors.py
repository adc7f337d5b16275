"""Exceptions: one LibquantError subclass per quant_status (include/quant.h)."""

from __future__ import annotations


class LibquantError(Exception):
    """A libquant call failed. ``status`` is the quant_status value, ``status_name``
    its name (``"QUANT_ERROR_INVALID_ARGUMENT"``) and ``message`` the library's
    message, naming the argument and the reason."""

    status: int = -1

    def __init__(self, message: str, status: int | None = None, status_name: str = "") -> None:
        super().__init__(message)
        if status is not None:
            self.status = status
        self.status_name = status_name or STATUS_NAMES.get(self.status, "QUANT_ERROR_UNKNOWN_STATUS")
        self.message = message

    def __str__(self) -> str:
        return "%s: %s" % (self.status_name, self.message)


class InvalidArgumentError(LibquantError, ValueError):
    """QUANT_ERROR_INVALID_ARGUMENT: an argument is NULL, out of range or inconsistent."""

    status = 1


class InvalidHandleError(LibquantError):
    """QUANT_ERROR_INVALID_HANDLE: a handle is freed, foreign or of the wrong type."""

    status = 2


class UnsupportedError(LibquantError):
    """QUANT_ERROR_UNSUPPORTED: the format, dtype or operation is not supported."""

    status = 3


class DeviceUnavailableError(LibquantError):
    """QUANT_ERROR_DEVICE_UNAVAILABLE: no loaded plugin runs this on the tensor's device."""

    status = 4


class OutOfMemoryError(LibquantError, MemoryError):
    """QUANT_ERROR_OUT_OF_MEMORY: an allocation failed."""

    status = 5


class BufferTooSmallError(LibquantError):
    """QUANT_ERROR_BUFFER_TOO_SMALL: an output array is too short."""

    status = 6


class StateError(LibquantError):
    """QUANT_ERROR_STATE: the object cannot do this now (missing direction, underivable usage)."""

    status = 7


class PluginError(LibquantError):
    """QUANT_ERROR_PLUGIN: a plugin failed to load or reported an error."""

    status = 8


class InternalError(LibquantError):
    """QUANT_ERROR_INTERNAL: an internal fault; the library refuses every later call."""

    status = 9


class PoisonedError(LibquantError):
    """QUANT_ERROR_POISONED: refused because an earlier call hit QUANT_ERROR_INTERNAL."""

    status = 10


ERRORS: dict[int, type[LibquantError]] = {
    c.status: c
    for c in (
        InvalidArgumentError,
        InvalidHandleError,
        UnsupportedError,
        DeviceUnavailableError,
        OutOfMemoryError,
        BufferTooSmallError,
        StateError,
        PluginError,
        InternalError,
        PoisonedError,
    )
}

STATUS_NAMES: dict[int, str] = {
    0: "QUANT_OK",
    1: "QUANT_ERROR_INVALID_ARGUMENT",
    2: "QUANT_ERROR_INVALID_HANDLE",
    3: "QUANT_ERROR_UNSUPPORTED",
    4: "QUANT_ERROR_DEVICE_UNAVAILABLE",
    5: "QUANT_ERROR_OUT_OF_MEMORY",
    6: "QUANT_ERROR_BUFFER_TOO_SMALL",
    7: "QUANT_ERROR_STATE",
    8: "QUANT_ERROR_PLUGIN",
    9: "QUANT_ERROR_INTERNAL",
    10: "QUANT_ERROR_POISONED",
}


def error_for(status: int, message: str, status_name: str = "") -> LibquantError:
    """The exception for a non-OK status."""
    cls = ERRORS.get(status)
    if cls is None:
        return LibquantError(message, status, status_name)
    return cls(message, None, status_name)
