"""Linear and grouped-linear layers through Python (quant_linear_*), CPU.

Outputs and gradients are checked against the float64 product of the operands
the layer multiplies (the dequantized forward operands; the originals for the
high-precision backward) within gemm_bound (test_api.py derives it)."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import libquant as lq
from test_api import gemm_bound, randn


def dq(q: lq.Quantizer, x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return np.asarray(q.quantize(x, usage="rowwise").dequantize(), dtype=np.float64)


@pytest.mark.parametrize("kind", ["fp8_current", "mxfp8", "fp8_block"])
def test_linear_forward_backward(kind: str) -> None:
    x, w, b = randn(64, 96), randn(32, 96), randn(32)
    layer = lq.Linear(lq.Recipe.preset(kind), name="fc1")
    y, ctx = layer.forward(x, w, b, input_requires_grad=True, weight_requires_grad=True,
                           backward_override="high_precision")
    assert ctx is not None and y.shape == (64, 32) and y.dtype == np.float32
    xq = dq(layer.quantizer("input"), x)
    wq = dq(layer.quantizer("weight"), w)
    assert np.all(np.abs(y - (xq @ wq.T + b)) <= gemm_bound(xq, wq.T) + 2.0**-23 * np.abs(b))
    info = ctx.info
    assert info.input_saved == "original" and info.weight_saved == "original" and not info.used
    assert info.owned_bytes >= x.nbytes + w.nbytes
    winfo = layer.weight_info()
    assert winfo.shape == (32, 96) and winfo.rowwise_format
    dy = randn(64, 32)
    gi, gw, gb = ctx.backward(dy, grad_input=True, grad_weight=True, grad_bias=True)
    x64, w64, dy64 = (a.astype(np.float64) for a in (x, w, dy))
    assert np.all(np.abs(gi - dy64 @ w64) <= gemm_bound(dy64, w64))
    assert np.all(np.abs(gw - dy64.T @ x64) <= gemm_bound(dy64.T, x64))
    assert np.all(np.abs(gb - dy64.sum(0)) <= gemm_bound(np.ones((1, 64)), np.abs(dy64))[0])
    assert ctx.info.used
    with pytest.raises(lq.StateError):
        ctx.backward(dy, grad_input=True)
    ctx.close()
    layer.weight_updated()
    layer.close()


def test_linear_inference_and_errors() -> None:
    x, w = randn(2, 16, 64, dtype=ml_dtypes.bfloat16), randn(64, 64, dtype=ml_dtypes.bfloat16)
    layer = lq.Linear(lq.Recipe.preset("mxfp8"), name="fc2")
    with pytest.raises(lq.StateError):
        layer.weight_info()
    y, ctx = layer.forward(x, w)
    assert ctx is None and y.shape == (2, 16, 64) and y.dtype == ml_dtypes.bfloat16
    out = np.empty((2, 16, 64), np.float32)
    y2, _ = layer.forward(x, w, out=out)
    assert y2 is out
    with pytest.raises(lq.InvalidArgumentError, match="backward_override"):
        layer.forward(x, w, backward_override="sideways")
    with pytest.raises(lq.InvalidArgumentError):
        layer.forward(x, randn(64, 32, dtype=ml_dtypes.bfloat16))
    with pytest.raises(lq.InvalidArgumentError, match="grouped"):
        layer.grouped_forward(x, [32], [w])
    with pytest.raises(lq.LibquantError, match="grad_output"):
        lq.Linear(lq.Recipe.from_rules([(lq.Role("linear", "input"), lq.Quantizer("fp8")),
                                        (lq.Role("linear", "weight"), lq.Quantizer("fp8"))]))


def test_linear_explicit_quantizers_and_quantized_backward() -> None:
    q = [lq.Quantizer("fp8")]
    layer = lq.Linear(input_quantizers=q, weight_quantizers=[lq.Quantizer("fp8")],
                      grad_output_quantizers=[lq.Quantizer("fp8", element="e5m2")])
    x, w = randn(32, 64), randn(16, 64)
    y, ctx = layer.forward(x, w, weight_requires_grad=True, input_requires_grad=True)
    assert ctx is not None
    i = ctx.info
    assert i.input_saved == "quantized" and i.input_usage == lq.COLUMNWISE
    assert i.weight_saved == "layer_weight"
    gi, gw, gb = ctx.backward(randn(32, 16), grad_input=True, grad_weight=np.empty((16, 64), np.float32))
    assert gi.shape == (32, 64) and gw.shape == (16, 64) and gb is None
    # a frozen weight keeps no X
    _, ctx2 = layer.forward(x, w, input_requires_grad=True)
    assert ctx2 is not None and ctx2.info.input_saved == "none"


def test_grouped_linear() -> None:
    n, k = 24, 64
    splits = [32, 0, 64]
    x = randn(sum(splits), k)
    ws = [randn(n, k) for _ in splits]
    bs = [randn(n) for _ in splits]
    layer = lq.Linear(lq.Recipe.preset("fp8_current"), name="experts", num_gemms=3)
    y, ctx = layer.grouped_forward(x, splits, ws, bs, input_requires_grad=True, weight_requires_grad=True,
                                   backward_override="high_precision")
    assert ctx is not None and y.shape == (96, n)
    row = 0
    for g, m in enumerate(splits):
        if m:
            xq = dq(layer.quantizer("input", g), x[row:row + m])
            wq = dq(layer.quantizer("weight", g), ws[g])
            ref = xq @ wq.T + bs[g]
            assert np.all(np.abs(y[row:row + m] - ref) <= gemm_bound(xq, wq.T) + 2.0**-23 * np.abs(bs[g]))
        row += m
    dy = randn(96, n)
    gi, gws, gbs = ctx.grouped_backward(dy, grad_input=True, grad_weights=True, grad_biases=True)
    assert gi.shape == x.shape and len(gws) == 3 and len(gbs) == 3
    np.testing.assert_array_equal(gws[1], 0)  # an empty group gets zero gradients
    np.testing.assert_array_equal(gbs[1], 0)
    d64 = dy.astype(np.float64)
    assert np.all(np.abs(gws[2] - d64[32:].T @ x[32:].astype(np.float64)) <= gemm_bound(d64[32:].T, x[32:]))
    with pytest.raises(lq.InvalidArgumentError, match="m_splits"):
        layer.grouped_forward(x, [1, 2, 3], ws)


def test_linear_delayed_scaling_amaxes() -> None:
    layer = lq.Linear(lq.Recipe.preset("fp8_delayed"), name="fc")
    x, w = randn(16, 32), randn(8, 32)
    x[3, 4] = 50.0
    _, ctx = layer.forward(x, w, input_requires_grad=True, weight_requires_grad=True)
    am = layer.scaling_amaxes("forward")
    assert am[:2] == [50.0, float(np.abs(w).max())]
    layer.update_scaling("forward", [100.0] * len(am))
    scale, hist = layer.quantizer("input").delayed_scaling_state()
    assert scale.numpy()[0] == np.float32(448) / np.float32(100)
    assert ctx is not None
    ctx.backward(randn(16, 8), grad_input=True, grad_weight=True)
    assert len(layer.scaling_amaxes("backward")) >= 1
    layer.update_scaling("backward")
    with pytest.raises(lq.InvalidArgumentError, match="override"):
        layer.forward(x, w, input_requires_grad=True, backward_override="dequantized")
    plain = lq.Linear(lq.Recipe.preset("mxfp8"))
    assert plain.scaling_amaxes("forward") == []
    with pytest.raises(lq.InvalidArgumentError, match="pass"):
        plain.scaling_amaxes("sideways")
