"""safetensors files of libquant.torch models (issue #20 §5).

A safetensors file holds named tensors and a string-to-string metadata map, no
Python objects. A libquant module's state dict has one Python object per
module, its ``_extra_state`` dict (recipe description, delayed-scaling scales
and histories, quantized weights' metadata). ``save_safetensors`` writes every
tensor of the state dict as a tensor of the file (the extra states' tensors
too, under ``<module>._extra_state/<path>``) and each extra state's other
values as JSON in the metadata; ``load_safetensors`` rebuilds the state dict,
byte for byte, for ``load_state_dict``. Tensors of a dtype safetensors has no
code for (float8_e8m0fnu, MX scales) are stored as their bytes (U8) and get
their dtype back from the metadata.

safetensors is an optional dependency, imported when these are called."""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

import torch

from .._errors import InvalidArgumentError, UnsupportedError

_EXTRA_SUFFIX = "._extra_state"
_META_EXTRA = "libquant.extra_state:"  # + the state dict key: the extra state as JSON
_META_DTYPES = "libquant.dtypes"      # JSON {tensor name: [torch dtype, shape]} for byte-stored tensors
_META_VERSION = "libquant.format"
_VERSION = "1"

# The dtypes safetensors 0.8 reads back (safetensors.torch._TYPES).
_NATIVE = {torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
           torch.int8, torch.uint8, torch.bool, torch.float8_e4m3fn, torch.float8_e5m2}


def _safetensors() -> Any:
    try:
        import safetensors.torch as st
    except ImportError as e:  # pragma: no cover - the test environment pins it
        raise UnsupportedError("safetensors is not installed (pip install safetensors): %s" % e) from None
    return st


def _encode(value: Any, where: str, tensors: dict[str, torch.Tensor]) -> Any:
    """value as JSON, its tensors moved into tensors under where/<path>."""
    if isinstance(value, torch.Tensor):
        tensors[where] = value
        return {"__tensor__": where}
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise InvalidArgumentError("%s: key %r is not a string; safetensors metadata holds JSON" % (where, k))
            out[k] = _encode(v, where + "/" + k, tensors)
        return {"__dict__": out}
    if isinstance(value, (list, tuple)):
        return [_encode(v, "%s/%d" % (where, i), tensors) for i, v in enumerate(value)]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise InvalidArgumentError("%s: a %s cannot be written to a safetensors file" % (where, type(value).__name__))


def _decode(value: Any, tensors: Mapping[str, torch.Tensor]) -> Any:
    if isinstance(value, dict):
        if "__tensor__" in value:
            return tensors[value["__tensor__"]]
        return {k: _decode(v, tensors) for k, v in value["__dict__"].items()}
    if isinstance(value, list):
        return [_decode(v, tensors) for v in value]
    return value


def save_safetensors(obj: torch.nn.Module | Mapping[str, Any], path: str | os.PathLike[str],
                     metadata: Mapping[str, str] | None = None) -> None:
    """Writes a model's state dict (or a state dict) to a safetensors file at path:
    parameters and quantized weights' buffers as tensors (on the CPU), the
    modules' extra state (recipe, delayed-scaling state, quantized weights'
    metadata) in the file's metadata and tensors. ``metadata`` adds string
    entries of the caller's (keys starting with "libquant." are reserved)."""
    sd = obj.state_dict() if isinstance(obj, torch.nn.Module) else obj
    meta = {_META_VERSION: _VERSION}
    for k, v in (metadata or {}).items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise InvalidArgumentError("metadata: %r: %r: keys and values must be strings" % (k, v))
        if k.startswith("libquant."):
            raise InvalidArgumentError("metadata: %r: keys starting with 'libquant.' are reserved" % k)
        meta[k] = v
    tensors: dict[str, torch.Tensor] = {}
    for key, value in sd.items():
        if isinstance(value, torch.Tensor):
            tensors[key] = value
        elif key.endswith(_EXTRA_SUFFIX):
            meta[_META_EXTRA + key] = json.dumps(_encode(value, key, tensors))
        else:
            raise InvalidArgumentError("state dict entry %s: a %s is neither a tensor nor a module's extra state"
                                       % (key, type(value).__name__))
    out: dict[str, torch.Tensor] = {}
    dtypes: dict[str, Any] = {}
    for name, t in tensors.items():
        # own contiguous CPU copies: safetensors refuses tensors sharing memory
        c = t.detach().to("cpu").contiguous().clone()
        if c.dtype not in _NATIVE:
            dtypes[name] = [str(c.dtype).replace("torch.", ""), list(c.shape)]
            c = c.reshape(-1).view(torch.uint8)
        out[name] = c
    meta[_META_DTYPES] = json.dumps(dtypes)
    _safetensors().save_file(out, os.fspath(path), metadata=meta)


def load_safetensors(path: str | os.PathLike[str], device: str | torch.device = "cpu") -> dict[str, Any]:
    """Reads a file written by save_safetensors back into the state dict it came
    from (tensors on ``device``), for ``model.load_state_dict``. A file without
    libquant's metadata loads as its plain tensors."""
    st = _safetensors()
    from safetensors import safe_open

    with safe_open(os.fspath(path), framework="pt") as f:
        meta = f.metadata() or {}
    tensors = st.load_file(os.fspath(path), device=str(device))
    for name, (dt, shape) in json.loads(meta.get(_META_DTYPES, "{}")).items():
        tensors[name] = tensors[name].view(getattr(torch, dt)).reshape(shape)
    sd: dict[str, Any] = {}
    used: set[str] = set()
    for k, v in meta.items():
        if k.startswith(_META_EXTRA):
            key = k[len(_META_EXTRA):]
            enc = json.loads(v)
            sd[key] = _decode(enc, tensors)
            used.update(n for n in tensors if n.startswith(key + "/"))
    for name, t in tensors.items():
        if name not in used:
            sd[name] = t
    return sd
