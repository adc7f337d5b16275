"""quantize_grouped (quant_quantize_grouped): one call for a group of tensors,
each with exactly the bytes quantize_into gives it alone (quant.h), and the
library's errors for bad groups as LibquantError subclasses."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import libquant as lq

RNG = np.random.default_rng(77)


def _bytes(qt: lq.QTensor) -> dict[tuple[str, str], bytes]:
    return {(d, k): b.numpy().tobytes() for d, k, b in qt.buffers()}


@pytest.mark.parametrize("fmt,opts", [("fp8", {}), ("fp8", {"scaling": "delayed"}), ("fp8_block", {}),
                                      ("fp8_block", {"block_dims": 2}), ("mxfp8", {}), ("mxfp4", {}),
                                      ("nvfp4", {})])
def test_grouped_equals_one_by_one(fmt: str, opts: dict[str, Any]) -> None:
    # MoE-like experts of different sizes, ragged ones included (spec §14)
    shapes = [(45, 64), (1, 64), (128, 64), (7, 64), (33, 64)]
    xs = [RNG.standard_normal(s).astype(np.float32) * 10.0 ** RNG.uniform(-2, 2) for s in shapes]
    group_q = lq.Quantizer(fmt, **opts)
    alone_q = lq.Quantizer(fmt, **opts)
    group = [group_q.quantize(np.zeros(s, np.float32)) for s in shapes]
    alone = [alone_q.quantize(np.zeros(s, np.float32)) for s in shapes]
    assert group_q.quantize_grouped(xs, group) == group
    for x, dst in zip(xs, alone):
        alone_q.quantize_into(x, dst)
    for i, (g, a) in enumerate(zip(group, alone)):
        gb, ab = _bytes(g), _bytes(a)
        assert gb.keys() == ab.keys()
        for key in gb:
            assert gb[key] == ab[key], "%s %s: tensor %d, %s differs from quantize_into" % (fmt, opts, i, key)
        assert not all(v == 0 for v in g.rowwise.data.numpy().tobytes()), "nothing was written"  # type: ignore[union-attr]


def test_grouped_module_function_and_views() -> None:
    q = lq.Quantizer("mxfp8")
    xs = [RNG.standard_normal((16, 32)).astype(np.float32) for _ in range(3)]
    dsts = [q.quantize(np.zeros((16, 32), np.float32)) for _ in range(3)]
    view = dsts[0].rowwise.data.numpy()  # type: ignore[union-attr]
    lq.quantize_grouped(xs, q, dsts)  # in place: the view sees the new codes
    assert view.tobytes() == q.quantize(xs[0]).rowwise.data.numpy().tobytes()  # type: ignore[union-attr]


def test_grouped_bad_input_raises_the_librarys_message() -> None:
    q = lq.Quantizer("fp8")
    x = RNG.standard_normal((8, 16)).astype(np.float32)
    a, b = q.quantize(x), q.quantize(x)
    with pytest.raises(lq.InvalidArgumentError, match="xs has 2 tensors but dsts has 1"):
        q.quantize_grouped([x, x], [a])
    with pytest.raises(lq.InvalidArgumentError, match="args.count: is 0"):
        q.quantize_grouped([], [])
    with pytest.raises(lq.InvalidArgumentError, match="the same tensor as outputs"):
        q.quantize_grouped([x, x], [a, a])
    with pytest.raises(lq.LibquantError):
        q.quantize_grouped([x, RNG.standard_normal((9, 16)).astype(np.float32)], [a, b])  # shape mismatch
