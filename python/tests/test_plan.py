"""Quantize plans (Quantizer.plan_into, QuantizePlan.run; quant_quantize_plan_*):
every run gives the bytes quantize_into gives for the same input, the plan pins
its dst, and bad input raises the library's errors. (The native plugins' prepared
call, which a run takes on the CUDA plugin, is checked from C on the CPU with
the toy plugin, examples/c/test_plan.c, and on the GPU by cuda/gputest.)"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import libquant as lq

RNG = np.random.default_rng(31)
FORMATS = [("fp8", {}), ("fp8", {"scaling": "delayed"}), ("fp8_block", {}), ("fp8_block", {"block_dims": 2}),
           ("mxfp8", {}), ("mxfp4", {}), ("nvfp4", {}), ("nvfp4", {"rht": "default", "stochastic_rounding": True}), ("identity", {})]


def _bytes(qt: lq.QTensor) -> dict[tuple[str, str], bytes]:
    return {(d, k): b.numpy().tobytes() for d, k, b in qt.buffers()}


def _tbytes(qt: lq.QTensor) -> dict[tuple[str, str], bytes]:
    """_bytes of a tensor on any device, through torch."""
    import torch

    return {(d, k): b.torch().cpu().contiguous().view(torch.uint8).numpy().tobytes() for d, k, b in qt.buffers()}


def _x(shape: tuple[int, ...], dtype: Any = np.float32) -> Any:
    return (RNG.standard_normal(shape) * 10.0 ** RNG.uniform(-2, 2)).astype(dtype)


@pytest.mark.parametrize("fmt,opts", FORMATS)
@pytest.mark.parametrize("shape", [(7, 96), (3, 5, 64), (45, 33)])
def test_runs_equal_quantize_into(fmt: str, opts: dict[str, Any], shape: tuple[int, ...]) -> None:
    # separate quantizers: delayed scaling's state is each quantizer's own
    pq, rq = lq.Quantizer(fmt, **opts), lq.Quantizer(fmt, **opts)
    dtype: Any = np.float32
    if opts.get("rht"):  # the RHT takes BF16 (spec §5.5)
        dtype = pytest.importorskip("ml_dtypes").bfloat16
    x0 = _x(shape, dtype)
    dst, ref = pq.quantize(x0), rq.quantize(x0)
    with pq.plan_into(x0, dst) as plan:
        assert plan.dst is dst
        rq.quantize_into(x0, ref)
        for i in range(3):
            x = _x(shape, dtype)
            assert plan.run(x) is dst
            rq.quantize_into(x, ref)
            assert _bytes(dst) == _bytes(ref), "%s %s %s: run %d differs from quantize_into" % (fmt, opts, shape, i)


TORCH_FORMATS = [("fp8", {}), ("fp8", {"scaling": "delayed"}), ("mxfp8", {}), ("mxfp4", {}), ("nvfp4", {}),
                 ("nvfp4", {"rht": "default"}), ("fp8_block", {}), ("fp8_block", {"block_dims": 2})]


@pytest.mark.parametrize("fmt,opts", TORCH_FORMATS)
def test_torch_runs_equal_quantize_into(device: str, fmt: str, opts: dict[str, Any]) -> None:
    # On cuda a plain quantizer's run is the CUDA plugin's prepared call, with no
    # Go code on the way (capi/plan.c): the bytes must still be quantize_into's.
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(5)
    pq, rq = lq.Quantizer(fmt, **opts), lq.Quantizer(fmt, **opts)
    shape = (45, 256)

    def x() -> Any:
        return (torch.randn(shape, generator=gen) * 3).to(torch.bfloat16).to(device)
    x0 = x()
    dst, ref = pq.quantize(x0), rq.quantize(x0)
    plan = pq.plan_into(x0, dst)
    rq.quantize_into(x0, ref)
    for i in range(3):
        xi = x()
        plan.run(xi)
        rq.quantize_into(xi, ref)
        if device == "cuda":
            torch.cuda.synchronize()
        assert _tbytes(dst) == _tbytes(ref), "%s %s on %s: run %d differs from quantize_into" % (fmt, opts, device, i)
    plan.close()


def test_torch_cpu_runs() -> None:
    torch = pytest.importorskip("torch")
    q, rq = lq.Quantizer("mxfp8"), lq.Quantizer("mxfp8")
    x0 = torch.randn(16, 64, dtype=torch.bfloat16)
    dst, ref = q.quantize(x0), rq.quantize(x0)
    plan = q.plan_into(x0, dst)
    for _ in range(2):
        x = torch.randn(16, 64, dtype=torch.bfloat16)
        plan.run(x)
        rq.quantize_into(x, ref)
        assert _bytes(dst) == _bytes(ref)
    # a view at an offset of the same layout is the same kind of input
    big = torch.randn(32, 64, dtype=torch.bfloat16)
    plan.run(big[16:])
    rq.quantize_into(big[16:].clone(), ref)
    assert _bytes(dst) == _bytes(ref)
    with pytest.raises(lq.InvalidArgumentError, match="x: dtype, shape"):
        plan.run(x.float())
    with pytest.raises(lq.InvalidArgumentError, match="x: dtype, shape"):
        plan.run(big[:, :32])  # another shape and strides
    plan.close()


def test_pins_dst_and_errors() -> None:
    q = lq.Quantizer("mxfp8")
    x = _x((8, 64))
    dst = q.quantize(x)
    plan = q.plan_into(x, dst)
    with pytest.raises(lq.StateError, match="quantize plan"):
        dst.close()
    assert dst.info.shape == (8, 64)  # still usable: the refused close changed nothing
    with pytest.raises(lq.StateError, match="quantize plan"):
        dst.update_usage("rowwise")
    with pytest.raises(lq.StateError, match="quantize plan"):
        lq.Quantizer("mxfp8", usage="rowwise").quantize_into(x, dst)
    with pytest.raises(lq.InvalidArgumentError, match="x: dtype, shape"):
        plan.run(_x((8, 32)))
    with pytest.raises(lq.InvalidArgumentError, match="x: dtype, shape"):
        plan.run(x.astype(np.float16))
    with pytest.raises(lq.InvalidArgumentError, match="x: dtype, shape"):
        plan.run(np.asfortranarray(_x((8, 64))))
    # the plan keeps its quantizer's state and settings
    q.close()
    x2 = _x((8, 64))
    plan.run(x2)
    assert _bytes(dst) == _bytes(lq.Quantizer("mxfp8").quantize(x2))
    plan.close()
    plan.close()  # closing twice is a no-op
    with pytest.raises(lq.InvalidHandleError, match="plan: this QuantizePlan is closed"):
        plan.run(x2)
    dst.update_usage("rowwise")
    dst.close()


def test_plan_into_errors_change_nothing() -> None:
    q = lq.Quantizer("nvfp4")
    dst = q.quantize(_x((16, 64)))
    with pytest.raises(lq.InvalidArgumentError, match="does not match"):
        q.plan_into(_x((64, 16)), dst)
    dst.close()  # not pinned by the failed plan
