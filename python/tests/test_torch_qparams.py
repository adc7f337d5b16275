"""Quantized parameters (issue #20 item 4; TransformerEngine's quantized_model_init):
modules that hold their weights only in quantized form, fed to the linear ops
as caller-quantized weights (quant_linear_forward_args.weight_qtensor), and the
FP32 master weights an optimizer steps, written back with quantize_into.

Also the Python binding of the version-2 linear args: weight_qtensor and the
amax overrides at the libquant.Linear level."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest
import torch

import libquant as lq
import libquant.torch as lqt
from test_torch_modules import RECIPES, SPLITS, Net, call_or_skip, data, fp32_loss


def _buffers(qt: lq.QTensor) -> dict[tuple[str, str], bytes]:
    return {(d, k): bytes(np.asarray(b.torch().contiguous().view(torch.uint8).reshape(-1).cpu()))
            for d, k, b in qt.buffers()}


def _quantized_modules(model: torch.nn.Module) -> list[Any]:
    return [m for m in model.modules() if isinstance(m, (lqt.Linear, lqt.GroupedLinear))]


# ---------------------------------------------------------------------------
# AdamW on master weights: the quantized weight is the quantization of the master
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(RECIPES))
def test_adamw_master_weights_requantize_bit_exact(kind: str, device: str) -> None:
    recipe = RECIPES[kind]()
    torch.manual_seed(0)
    with lqt.quantized_model_init(recipe=recipe):
        model = call_or_skip(lambda: Net(device=device), device)
    mods = _quantized_modules(model)
    assert len(mods) == 3 and all(m.quantized_weight for m in mods)
    # The modules hold no high-precision weight: each weight parameter is a
    # one-element placeholder that only receives the gradient.
    for m in mods:
        for name in m._lq_weight_names():
            p = getattr(m, name)
            assert p.untyped_storage().nbytes() == p.element_size(), name
    master = lqt.MasterWeights(model)
    opt = torch.optim.AdamW(master.parameters(), lr=3e-3)
    master.attach(opt)
    assert all(w.device == torch.device(device, 0) if device != "cpu" else w.device.type == "cpu"
               for _, _, w in master.masters())
    x, t = data(device)
    losses = []
    for step in range(40):
        opt.zero_grad(set_to_none=True)
        with lqt.autocast(recipe=recipe):
            loss = torch.nn.functional.mse_loss(call_or_skip(lambda: model(x), device), t)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        # after every step: quantized weight == quantize(master), bit for bit, in
        # every buffer of both directions (usages never shrink: spec §10)
        for m, g, w in master.masters():
            got = m.quantized_weights()[g]
            assert got.usage == 3 and got.persistent
            want = m.weight_quantizer(g).quantize(w.detach(), usage="both", persistent=True)
            assert _buffers(got) == _buffers(want), "%s gemm %d differs after step %d" % (m.lq_name, g, step)
    # the layers cached no quantized weight of their own: the caller's is the only copy
    for m in mods:
        with pytest.raises(lq.StateError, match="no quantized weight yet"):
            m.quantization_layer().weight_info(0)
    assert losses[-1] < 0.5 * losses[0], losses
    assert losses[-1] <= 2 * fp32_loss(device), (losses[-1], fp32_loss(device))


def test_quantized_weight_forward_equals_module_with_that_weight(device: str) -> None:
    """A module holding its weight quantized computes, bit for bit, what the
    default module with the same initial weight computes (its layer quantizes
    that weight itself, into the same bits), and its weight gradient lands on the
    placeholder parameter unchanged."""
    for recipe in (lqt.MXFP8BlockScaling(), lqt.Float8CurrentScaling()):
        torch.manual_seed(1)
        qm = call_or_skip(lambda: lqt.Linear(64, 32, recipe=recipe, quantized_weight=True, device=device), device)
        torch.manual_seed(1)
        ref = lqt.Linear(64, 32, recipe=recipe, device=device)  # the same initial weight and bias
        assert _buffers(qm.quantized_weights()[0]) == _buffers(
            qm.weight_quantizer().quantize(ref.weight.detach(), usage="both"))
        x = torch.randn(48, 64, device=device)
        y1, y2 = call_or_skip(lambda: qm(x), device), ref(x)
        assert torch.equal(y1, y2)
        y1.square().sum().backward()
        y2.square().sum().backward()
        assert qm.weight.grad is not None and ref.weight.grad is not None
        assert torch.equal(qm.weight.grad, ref.weight.grad)
        assert torch.equal(qm.bias.grad, ref.bias.grad)


def test_memory_per_parameter_vs_bf16(capsys: pytest.CaptureFixture[str]) -> None:
    """Prints the bytes per weight element a module keeps: quantized-only against
    a BF16 weight alone and against the default module (a BF16 weight plus the
    layer's cached quantized copy, both usages). Quantized-only must be below the
    default module's for every recipe, and below BF16's for the sub-8-bit one."""
    rows = []
    for kind in sorted(RECIPES):
        recipe = RECIPES[kind]()
        with lqt.quantized_model_init(recipe=recipe):
            model = Net(dtype=torch.bfloat16)
        master = lqt.MasterWeights(model)
        q = master.quantized_bytes() / master.num_weights()
        # the default module: BF16 weight + the cache a training forward fills
        ref = Net(dtype=torch.bfloat16, recipe=recipe)
        x, _ = data("cpu", torch.bfloat16)
        ref(x.requires_grad_(True)).sum().backward()
        cached = 0
        for m in _quantized_modules(ref):
            for g in range(max(m._lq_num_gemms(), 1)):
                layer = m.quantization_layer()
                assert layer.weight_info(g).usage == 3  # a training step's cache holds both directions
                wq = layer.quantizer("weight", g)
                wq.usage = "both"
                cached += sum(d.nbytes for d in wq.layout((m.out_features, m.in_features)))
        n = sum(p.numel() for name, p in ref.named_parameters() if "weight" in name)
        rows.append((kind, q, 2.0, 2.0 + cached / n))
        assert q < 2.0 + cached / n
    with capsys.disabled():
        print("\nbytes per weight element: recipe, quantized only (quantized_model_init), BF16 weight, "
              "BF16 weight + cached quantized weight")
        for kind, q, bf16, default in rows:
            print("  %-14s %6.3f   %5.3f   %6.3f   (%.2fx BF16)" % (kind, q, bf16, default, q / bf16))
    assert dict((k, q) for k, q, _, _ in rows)["nvfp4_no_rht"] < 2.0


def test_quantized_weight_bad_input() -> None:
    with pytest.raises(lq.InvalidArgumentError, match="quantized_weight: needs a recipe"):
        lqt.Linear(8, 8, quantized_weight=True)
    m = lqt.Linear(32, 32, recipe=lqt.Float8CurrentScaling(), quantized_weight=True)
    x = torch.randn(4, 32)
    with pytest.raises(lq.InvalidArgumentError, match="autocast\\(enabled=False\\)"):
        with lqt.autocast(enabled=False):
            m(x)
    with pytest.raises(lq.InvalidArgumentError, match="holds its weights quantized under fp8_current"):
        with lqt.autocast(recipe=lqt.MXFP8BlockScaling()):
            m(x)
    # the high_precision override needs the original weight for grad_input: the library refuses
    with pytest.raises(lq.InvalidArgumentError, match="weight_qtensor: set with backward_override high_precision"):
        with lqt.autocast(recipe=m.recipe, backward_override="high_precision"):
            m(x.requires_grad_(True))
    with pytest.raises(lq.InvalidArgumentError, match="has no module holding quantized weights"):
        lqt.MasterWeights(Net())
    with pytest.raises(lq.InvalidArgumentError, match="does not hold quantized weights"):
        lqt.Linear(8, 8).quantized_weights()
    # dequantized backward reads only the forward's rowwise operands: allowed
    with lqt.autocast(recipe=m.recipe, backward_override="dequantized"):
        m(torch.randn(4, 32, requires_grad=True)).sum().backward()
    gc.collect()


# ---------------------------------------------------------------------------
# libquant.Linear: weight_qtensor and the amax overrides
# ---------------------------------------------------------------------------


def test_linear_weight_qtensor_and_amax_overrides(device: str) -> None:
    rec = lq.Recipe.preset("fp8_current")
    g = torch.Generator().manual_seed(3)
    x, w, dy = (torch.randn(32, 64, generator=g).to(device), torch.randn(16, 64, generator=g).to(device),
                torch.randn(32, 16, generator=g).to(device))
    own, given = lq.Linear(rec, name="a"), lq.Linear(rec, name="a")
    q = given.quantizer("weight")
    q.usage = "both"
    qw = q.empty((16, 64), device=device, torch=True)
    q.quantize_into(w, qw, persistent=True)
    y1, c1 = call_or_skip(lambda: own.forward(x, w, input_requires_grad=True, weight_requires_grad=True), device)
    y2, c2 = given.forward(x, None, weight_qtensor=qw, input_requires_grad=True, weight_requires_grad=True)
    assert torch.equal(y1, y2)
    assert c1 is not None and c2 is not None
    g1 = c1.backward(dy, grad_input=True, grad_weight=True)
    g2 = c2.backward(dy, grad_input=True, grad_weight=True)
    assert torch.equal(g1[0], g2[0]) and torch.equal(g1[1], g2[1])
    # amax overrides: the tensor's own amax gives the default bits, 3x others
    iq, gq = own.quantizer("input"), own.quantizer("grad_output")
    xa, ga = iq.compute_amax(x), gq.compute_amax(dy)
    for scale, same in ((1.0, True), (3.0, False)):
        y, c = own.forward(x, w, input_amax=xa * scale, input_requires_grad=True)
        assert c is not None
        dx, _, _ = c.backward(dy, grad_input=True, grad_output_amax=ga * scale)
        assert torch.equal(y, y1) == same and torch.equal(dx, g1[0]) == same
    with pytest.raises(lq.InvalidArgumentError, match="input_amax: float32 \\[3\\]"):
        own.forward(x, w, input_amax=torch.zeros(3, device=device))
    with pytest.raises(lq.InvalidArgumentError, match="weight: set together with weight_qtensor"):
        given.forward(x, w, weight_qtensor=qw)
    # grouped: [num_gemms, 2] amaxes and weight_qtensors
    grp = lq.Linear(rec, name="e", num_gemms=2)
    yg1, _ = grp.grouped_forward(x, [16, 16], [w, w])
    yg2, _ = grp.grouped_forward(x, [16, 16], None, weight_qtensors=[qw, qw])
    assert torch.equal(yg1, yg2)
    with pytest.raises(lq.InvalidArgumentError, match="input_amaxes: float32 \\[2\\], want float32 \\[num_gemms=2, 2\\]"):
        grp.grouped_forward(x, [16, 16], [w, w], input_amaxes=xa)
    assert SPLITS  # the module tests' groups (imported for Net)
