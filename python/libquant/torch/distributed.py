"""torch.distributed helpers for libquant.torch.

- Delayed scaling: ``autocast(..., amax_reduction_group=group)`` MAX-reduces every
  layer's staged amaxes across the group before each scale update
  (quant_linear_scaling_amaxes -> all_reduce(MAX) -> quant_linear_update_scaling),
  so every rank holds the same scales and quantizes to the same bytes.
- Sharded weights (FSDP style): ``quantize_sharded`` quantizes this rank's row
  shard with the global amax (all-reduced MAX before quantizing), and
  ``all_gather_quantized`` gathers every buffer's bytes; the result equals the
  quantization of the unsharded weight, buffer for buffer.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from .. import InvalidArgumentError, QTensor, Quantizer

__all__ = ["allreduce_amax", "quantize_sharded", "all_gather_quantized"]


def allreduce_amax(amax: torch.Tensor, group: Any = None) -> torch.Tensor:
    """MAX-reduces an amax tensor in place across group; returns it."""
    dist.all_reduce(amax, op=dist.ReduceOp.MAX, group=group)
    return amax


def quantize_sharded(shard: torch.Tensor, quantizer: Quantizer, group: Any = None, *,
                     usage: str = "both") -> QTensor:
    """Quantizes this rank's shard (rows of a weight) with the amax of the whole
    weight: the shard's amaxes (quant_compute_amax) are all-reduced (MAX) first, so
    per-tensor and two-level formats (fp8 current, nvfp4) scale every shard alike."""
    amax = quantizer.compute_amax(shard)
    assert isinstance(amax, torch.Tensor)
    if amax.device.type == "cpu" and dist.get_backend(group) == "nccl":
        amax = amax.cuda()
    allreduce_amax(amax, group)
    return quantizer.quantize(shard, usage=usage, amax=amax.to(shard.device))


def _bytes(b: Any) -> torch.Tensor:
    t: torch.Tensor = b.torch()
    return t.view(torch.uint8) if t.dtype != torch.uint8 and t.element_size() == 1 else t


def all_gather_quantized(qt: QTensor, quantizer: Quantizer, full_shape: tuple[int, ...],
                         group: Any = None) -> dict[tuple[str, str], torch.Tensor]:
    """Gathers the buffers of every rank's row shard into the buffers of the whole
    tensor ({(direction, kind): tensor}, raw bytes for 1-byte types). Each buffer
    is gathered along the one dimension in which its layout for the full shape
    differs from the shard's; a buffer that does not differ (a per-tensor scale or
    amax) must be equal on every rank and is taken as is."""
    world = dist.get_world_size(group)
    shard_layout = {(d.direction, d.kind): d for d in quantizer.layout(qt.shape)}
    full_layout = {(d.direction, d.kind): d for d in quantizer.layout(full_shape)}
    out: dict[tuple[str, str], torch.Tensor] = {}
    for direction, kind, buf in qt.buffers():
        key = (direction, kind)
        local = _bytes(buf).contiguous()
        s, f = shard_layout[key].shape, full_layout[key].shape
        dims = [i for i, (a, b) in enumerate(zip(s, f)) if a != b]
        parts = [torch.empty_like(local) for _ in range(world)]
        dist.all_gather(parts, local, group=group)
        if not dims:
            if any(not torch.equal(p, parts[0]) for p in parts):
                raise InvalidArgumentError("%s %s: differs between ranks (quantize with quantize_sharded, which "
                                           "reduces the amax first)" % (direction, kind))
            out[key] = parts[0]
        elif len(dims) == 1 and f[dims[0]] == world * s[dims[0]]:
            out[key] = torch.cat(parts, dim=dims[0])
        else:
            raise InvalidArgumentError("%s %s: layout %s of a shard is not 1/%d of %s along one dimension (shard "
                                       "rows must be a multiple of the format's block)" % (direction, kind, s,
                                                                                           world, f))
    return out
