"""Checkpoints of modules holding their weights only quantized (issue #20 §5 with
§4's quantized parameters): state_dict / load_state_dict, torch.save / torch.load
of a state dict (weights_only=True) and of a whole model, and copy.deepcopy
round-trip every buffer of every quantized weight (data, scale_inv, amax; both
directions; hybrid ones too) and its metadata (shape, usage, persistent,
formats, quantizer, layout), plus the delayed-scaling state, bit for bit; the
next training step after the round trip equals the step without it.

Loading across precisions never happens silently: a high-precision weight into a
quantized module is quantized, a quantized one from another recipe re-quantized,
a quantized one into a high-precision module dequantized, each with a warning
naming the change; torch.nn.Linear refuses a quantized state dict (strict)."""

from __future__ import annotations

import copy
import io
import os
import tempfile
import warnings
from typing import Any, Callable

import numpy as np
import pytest
import torch

import libquant as lq
import libquant.torch as lqt
from test_torch_modules import RECIPES, Net, call_or_skip, data


def hybrid_qfactory(role: lqt.Role) -> Any:
    """MXFP8 forward / NVFP4 backward (issue #20 §3c): the weight is a hybrid
    tensor (MXFP8 rowwise, NVFP4 columnwise), grad_output NVFP4 (RHT, stochastic
    rounding). Module level, so that pickle finds it by name."""
    if role.tensor_type == "grad_output":
        return lqt.HybridQuantizer(rowwise=lq.Quantizer("nvfp4"), columnwise=lq.Quantizer("nvfp4"))
    return lqt.HybridQuantizer(rowwise=lq.Quantizer("mxfp8"), columnwise=lq.Quantizer("nvfp4"))


def hybrid_identity_qfactory(role: lqt.Role) -> Any:
    """The same with fc2 kept in high precision (identity roles: its "quantized"
    weight is the FP32 values themselves; a quantized-only weight needs the
    identity's dtype to lay its buffer out)."""
    return lqt.IdentityQuantizer(torch.float32) if role.name == "fc2" else hybrid_qfactory(role)


def delayed_hybrid_qfactory(role: lqt.Role) -> Any:
    """Delayed-scaling FP8, E4M3 rowwise / E5M2 columnwise: a hybrid weight with a
    delayed-scaling state on each side."""
    return lqt.HybridQuantizer(rowwise=lq.Quantizer("fp8", scaling="delayed", amax_history_len=8),
                               columnwise=lq.Quantizer("fp8", element="e5m2", scaling="delayed", amax_history_len=8))


MAKERS: dict[str, Callable[[], lqt.Recipe]] = dict(RECIPES)
MAKERS["hybrid_mxfp8_nvfp4"] = lambda: lqt.CustomRecipe(hybrid_qfactory, name="mxfp8_fwd_nvfp4_bwd")
MAKERS["hybrid_identity_fc2"] = lambda: lqt.CustomRecipe(hybrid_identity_qfactory, name="hybrid_identity_fc2")
MAKERS["hybrid_fp8_delayed"] = lambda: lqt.CustomRecipe(delayed_hybrid_qfactory, name="fp8_delayed_hybrid")

HOWS = ["state_dict", "torch_save_state_dict", "torch_save_module", "deepcopy", "safetensors"]


def qmodules(model: torch.nn.Module) -> list[Any]:
    return [m for name, m in sorted(model.named_modules()) if isinstance(m, (lqt.Linear, lqt.GroupedLinear))]


def snapshot(model: torch.nn.Module) -> dict[str, Any]:
    """Everything a quantized model's checkpoint must carry: per quantized weight,
    the bytes of every buffer and the metadata (QTensor info and the module's
    record of it); the delayed-scaling state; the other parameters."""
    out: dict[str, Any] = {}
    for m in qmodules(model):
        for g, qt in enumerate(m.quantized_weights()):
            key = "%s/%d" % (m.lq_name, g)
            out[key + "/info"] = qt.info
            out[key + "/meta"] = m._lq_qweight_meta(g)
            for d, k, b in qt.buffers():
                out["%s/%s/%s" % (key, d, k)] = bytes(np.asarray(b.torch().contiguous().view(torch.uint8)
                                                                 .reshape(-1).cpu()))
        st = m._lq_extra_state(m._lq_last)
        out[m.lq_name + "/recipe"] = st["recipe"]
        out[m.lq_name + "/pending_forward"] = st["pending_forward"]
        for k, v in st["delayed_scaling"].items():
            out["%s/delayed/%s" % (m.lq_name, k)] = bytes(np.asarray(v.contiguous().view(torch.uint8).reshape(-1)))
    for n, p in model.named_parameters():
        if p.untyped_storage().nbytes() > p.element_size():  # not a placeholder
            out["param/" + n] = bytes(np.asarray(p.detach().contiguous().view(torch.uint8).reshape(-1).cpu()))
    return out


def assert_same(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a.keys() == b.keys()
    bad = [k for k in a if a[k] != b[k]]
    assert not bad, "differ: %s" % bad[:8]


def build(recipe: lqt.Recipe, seed: int, device: str = "cpu") -> Net:
    torch.manual_seed(seed)
    with lqt.quantized_model_init(recipe=recipe):
        return Net(device=device)


def train(model: Net, recipe: lqt.Recipe, steps: int, x: torch.Tensor, t: torch.Tensor) -> list[Any]:
    """AdamW on FP32 master weights (MasterWeights), as issue #20 §4 trains; returns
    each step's output and the module gradients of its last step."""
    master = lqt.MasterWeights(model)
    opt = torch.optim.AdamW(master.parameters(), lr=3e-3)
    master.attach(opt)
    out: list[Any] = []
    for i in range(steps):
        opt.zero_grad(set_to_none=True)
        with lqt.autocast(recipe=recipe):
            y = model(x * (1 + 0.25 * i))
        torch.nn.functional.mse_loss(y, t).backward()
        out.append(y.detach())
        if i == steps - 1:
            out.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
        opt.step()
    return out


def safetensors_round_trip(sd: dict[str, Any], device: str = "cpu") -> dict[str, Any]:
    """sd written to a safetensors file (lqt.save_safetensors) and read back."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "model.safetensors")
        lqt.save_safetensors(sd, path)
        return lqt.load_safetensors(path, device=device)


def round_trip(a: Net, how: str, make: Callable[[], lqt.Recipe], device: str = "cpu") -> Net:
    if how == "deepcopy":
        return copy.deepcopy(a)
    if how == "torch_save_module":
        buf = io.BytesIO()
        torch.save(a, buf)
        buf.seek(0)
        b: Net = torch.load(buf, weights_only=False)
        return b
    sd = a.state_dict()
    if how == "torch_save_state_dict":
        buf = io.BytesIO()
        torch.save(sd, buf)
        buf.seek(0)
        sd = torch.load(buf, weights_only=True)  # plain tensors, dicts, strings and numbers
    if how == "safetensors":
        sd = safetensors_round_trip(sd)
    b = build(make(), seed=7, device=device)  # another initialization: the load must replace every byte
    assert_differs = snapshot(b) != snapshot(a)
    assert assert_differs
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same recipe: nothing changes precision, nothing warns
        b.load_state_dict(sd)
    return b


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_quantized_weights_round_trip_bit_for_bit(kind: str, how: str, device: str) -> None:
    make = MAKERS[kind]
    recipe = make()
    a = call_or_skip(lambda: build(recipe, seed=0, device=device), device)
    x, t = data(device)
    call_or_skip(lambda: train(a, recipe, 3, x, t), device)
    before = snapshot(a)
    b = round_trip(a, how, make, device)
    assert_same(snapshot(b), before)
    assert [n for n, _ in b.named_parameters()] == [n for n, _ in a.named_parameters()]
    assert list(b.state_dict()) == list(a.state_dict())
    for m in qmodules(b):  # still quantized-only: one-element gradient placeholders
        assert m.quantized_weight
        for name in m._lq_weight_names():
            p = getattr(m, name)
            assert p.untyped_storage().nbytes() == p.element_size(), name
    if how == "deepcopy":  # the copy owns its buffers
        for ma, mb in zip(qmodules(a), qmodules(b)):
            for (_, ra), (_, rb) in zip(ma._lq_qbufs[0], mb._lq_qbufs[0]):
                assert ra.data_ptr() != rb.data_ptr()
    # the next training steps (fresh master weights and AdamW on both, as a
    # resumed run without optimizer state) are the same, bit for bit
    # a module with quantized weights runs under its own recipe: after a restart a
    # new object of the same description (the loaded model's), after deepcopy the same
    rb = b.fc1.recipe
    assert (rb is recipe) == (how == "deepcopy") and rb.describe() == recipe.describe()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sa = train(a, recipe, 2, x, t)
        sb = train(b, rb, 2, x, t)
    assert all(torch.equal(u, v) for u, v in zip(sa[:-1], sb[:-1]))
    assert sa[-1].keys() == sb[-1].keys() and all(torch.equal(sa[-1][k], sb[-1][k]) for k in sa[-1])
    assert_same(snapshot(b), snapshot(a))


def test_state_dict_layout_and_a_changed_byte_is_loaded_as_is() -> None:
    """The state dict holds, in place of each weight's placeholder, typed zero-copy
    views of its buffers and the metadata; a byte changed in the checkpoint is the
    byte the loaded model holds (the check above compares what was saved, not what
    quantizing again would give)."""
    recipe = lqt.MXFP8BlockScaling()
    a = build(recipe, seed=0)
    sd = a.state_dict()
    assert "fc1.weight" not in sd and "experts.weight1" not in sd and "fc1.bias" in sd
    keys = sorted(k for k in sd if k.startswith("fc1.weight."))
    assert keys == ["fc1.weight.quantized.columnwise.data", "fc1.weight.quantized.columnwise.scale_inv",
                    "fc1.weight.quantized.rowwise.data", "fc1.weight.quantized.rowwise.scale_inv"]
    assert sd["fc1.weight.quantized.rowwise.data"].dtype == torch.float8_e4m3fn
    assert sd["fc1.weight.quantized.rowwise.scale_inv"].dtype == torch.float8_e8m0fnu
    # MXFP8 rowwise scales: [pad128(M), pad4(K/32)] (spec's format table), M=128, K=64
    assert tuple(sd["fc1.weight.quantized.rowwise.scale_inv"].shape) == (128, 4)
    assert sd["fc1.weight.quantized.rowwise.data"].data_ptr() == a.fc1._lq_qbufs[0][0][1].data_ptr()  # zero-copy
    meta = sd["fc1._extra_state"]["quantized_weights"]["weight"]
    assert meta["shape"] == [128, 64] and meta["usage"] == 3 and meta["persistent"] is True
    assert meta["formats"] == ["mxfp8", "mxfp8"] and meta["dtype"] == "float32"
    assert meta["buffers"][0] == ["rowwise", "data", "float8_e4m3fn", [128, 64], 8192]
    sd = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in sd.items()}
    raw = sd["experts.weight2.quantized.columnwise.data"].view(torch.uint8)
    raw.view(-1)[5] ^= 1
    b = build(lqt.MXFP8BlockScaling(), seed=3)
    b.load_state_dict(sd)
    sa, sb = snapshot(a), snapshot(b)
    assert [k for k in sa if sa[k] != sb[k]] == ["experts/2/columnwise/data"]
    diff = np.flatnonzero(np.frombuffer(sa["experts/2/columnwise/data"], np.uint8)
                          != np.frombuffer(sb["experts/2/columnwise/data"], np.uint8))
    assert diff.tolist() == [5]


def test_bad_quantized_checkpoints_are_refused() -> None:
    recipe = lqt.Float8CurrentScaling()
    a = build(recipe, seed=0)
    sd = a.state_dict()
    b = build(recipe, seed=1)
    keep = snapshot(b)
    short = dict(sd)
    short["fc2.weight.quantized.rowwise.data"] = sd["fc2.weight.quantized.rowwise.data"][:-1]
    with pytest.raises(RuntimeError, match="rowwise.data: .* bytes in the checkpoint"):
        b.load_state_dict(short)
    no_meta = dict(sd)
    no_meta["fc2._extra_state"] = {k: v for k, v in sd["fc2._extra_state"].items() if k != "quantized_weights"}
    with pytest.raises(RuntimeError, match="without their metadata"):
        b.load_state_dict(no_meta)
    with pytest.raises(RuntimeError, match="Missing key.*fc1.weight"):
        b.load_state_dict({k: v for k, v in sd.items() if not k.startswith("fc1.weight.")})
    wide = build(recipe, seed=0)
    wide.fc1 = lqt.Linear(64, 64, name="fc1", recipe=recipe, quantized_weight=True)
    with pytest.raises(RuntimeError, match="shape \\(128, 64\\) in the checkpoint, \\(64, 64\\) here"):
        wide.load_state_dict(sd, strict=False)
    # a quantized state dict is no torch.nn.Linear state dict: strict loading fails loudly
    lin = lqt.Linear(64, 32, recipe=recipe, quantized_weight=True)
    with pytest.raises(RuntimeError,
                       match="(?s)Missing key.*\"weight\".*Unexpected key.*weight.quantized.rowwise.data"):
        torch.nn.Linear(64, 32).load_state_dict(lin.state_dict())
    assert "fc1/0/rowwise/data" in keep


def test_high_precision_checkpoint_into_quantized_model_quantizes_and_warns() -> None:
    torch.manual_seed(0)
    hp = Net()
    recipe = lqt.Float8BlockScaling()
    b = build(recipe, seed=5)
    with pytest.warns(UserWarning, match="holds weight in high precision \\(float32\\).*quantized on loading"):
        b.load_state_dict(hp.state_dict())
    for m in qmodules(b):
        ref = dict(hp.named_modules())[m.lq_name]
        for g, name in enumerate(m._lq_weight_names()):
            want = m.weight_quantizer(g).quantize(getattr(ref, name).detach(), usage="both", persistent=True)
            got = m.quantized_weights()[g]
            assert [bytes(np.asarray(b.torch().view(torch.uint8).reshape(-1))) for _, _, b in got.buffers()] == \
                [bytes(np.asarray(b.torch().view(torch.uint8).reshape(-1))) for _, _, b in want.buffers()]
        assert torch.equal(m.bias if isinstance(m, lqt.Linear) else m.bias0,
                           ref.bias if isinstance(ref, lqt.Linear) else ref.bias0)


@pytest.mark.parametrize("kind", ["mxfp8", "nvfp4_no_rht", "hybrid_mxfp8_nvfp4", "hybrid_fp8_delayed"])
def test_quantized_checkpoint_into_high_precision_model_dequantizes_and_warns(kind: str) -> None:
    recipe = MAKERS[kind]()
    a = build(recipe, seed=0)
    x, t = data("cpu")
    train(a, recipe, 1, x, t)
    sd = a.state_dict()
    torch.manual_seed(9)
    b = Net()
    fmt = a.fc1.quantized_weights()[0].formats[0]
    with pytest.warns(UserWarning, match="loaded dequantized \\(the precision changes from %s to float32\\)" % fmt):
        b.load_state_dict(sd)
    for m in qmodules(a):
        mb = dict(b.named_modules())[m.lq_name]
        for g, name in enumerate(m._lq_weight_names()):
            assert torch.equal(getattr(mb, name).detach(), m.dequantized_weight(g)), (m.lq_name, name)
    # and b, in high precision, computes what a's dequantized weights give
    torch.manual_seed(9)
    ref = Net()
    ref.load_state_dict({k: v for k, v in b.state_dict().items()})
    assert torch.equal(ref(x), b(x))


def test_quantized_checkpoint_into_another_recipe_requantizes_and_warns() -> None:
    a = build(lqt.MXFP8BlockScaling(), seed=0)
    sd = a.state_dict()
    other = lqt.NVFP4BlockScaling(disable_rht=True)
    b = build(other, seed=4)
    with pytest.warns(UserWarning, match="holds weight quantized under mxfp8.*under nvfp4.*re-quantized"):
        b.load_state_dict(sd)
    for m in qmodules(a):
        mb = dict(b.named_modules())[m.lq_name]
        for g in range(len(m._lq_weight_names())):
            want = mb.weight_quantizer(g).quantize(m.dequantized_weight(g), usage="both", persistent=True)
            got = mb.quantized_weights()[g]
            assert [bytes(np.asarray(v.torch().view(torch.uint8).reshape(-1))) for _, _, v in got.buffers()] == \
                [bytes(np.asarray(v.torch().view(torch.uint8).reshape(-1))) for _, _, v in want.buffers()]
        assert mb._lq_qweight_meta(0)["formats"] == ["nvfp4", "nvfp4"]


def test_deepcopy_of_a_quantized_module_is_independent() -> None:
    recipe = lqt.Float8CurrentScaling()
    torch.manual_seed(0)
    m = lqt.Linear(64, 32, recipe=recipe, quantized_weight=True)
    c = copy.deepcopy(m)
    assert c.recipe is m.recipe and c.quantized_weight and c._lq_mid != m._lq_mid
    x = torch.randn(16, 64)
    assert torch.equal(c(x), m(x))
    c.write_weight(0, torch.zeros(32, 64))
    assert not torch.equal(c(x), m(x))
    assert torch.equal(c.dequantized_weight(), torch.zeros(32, 64))
    assert not torch.equal(m.dequantized_weight(), torch.zeros(32, 64))


class Run:
    """A model with quantized weights, its FP32 master weights and AdamW."""

    def __init__(self, model: Net) -> None:
        self.model = model
        self.recipe = model.fc1.recipe
        self.master = lqt.MasterWeights(model)
        self.opt = torch.optim.AdamW(self.master.parameters(), lr=3e-3)
        self.master.attach(self.opt)

    def step(self, x: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        self.opt.zero_grad(set_to_none=True)
        with lqt.autocast(recipe=self.recipe):
            y = self.model(x)
        torch.nn.functional.mse_loss(y, t).backward()
        g = {n: p.grad.clone() for n, p in self.model.named_parameters() if p.grad is not None}
        self.opt.step()
        return y.detach(), g

    def checkpoint(self) -> dict[str, Any]:
        buf = io.BytesIO()
        torch.save({"model": self.model.state_dict(), "master": self.master.state_dict(),
                    "opt": self.opt.state_dict()}, buf)
        buf.seek(0)
        ck: dict[str, Any] = torch.load(buf, weights_only=True)
        return ck


@pytest.mark.parametrize("kind", ["fp8_delayed", "nvfp4_no_rht", "hybrid_mxfp8_nvfp4", "hybrid_fp8_delayed"])
def test_resume_from_checkpoint_continues_bit_for_bit(kind: str, device: str) -> None:
    """Model, master weights and optimizer state saved mid-training and loaded
    into a fresh run: every later step (outputs, gradients, quantized bytes,
    delayed-scaling state, master weights) equals the uninterrupted run's."""
    make = MAKERS[kind]
    a = Run(call_or_skip(lambda: build(make(), seed=0, device=device), device))
    x, t = data(device)
    for i in range(3):
        call_or_skip(lambda: a.step(x * (1 + 0.25 * i), t), device)
    ck = a.checkpoint()
    b_model = build(make(), seed=11, device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b_model.load_state_dict(ck["model"])
    b = Run(b_model)
    b.master.load_state_dict(ck["master"])
    b.opt.load_state_dict(ck["opt"])
    for i in range(3):
        xi = x * (1 - 0.2 * i)
        ya, ga = a.step(xi, t)
        yb, gb = b.step(xi, t)
        assert torch.equal(ya, yb), i
        assert ga.keys() == gb.keys() and all(torch.equal(ga[k], gb[k]) for k in ga), i
        assert_same(snapshot(b.model), snapshot(a.model))
        ma, mb = a.master.state_dict(), b.master.state_dict()
        assert ma.keys() == mb.keys() and all(torch.equal(ma[k], mb[k]) for k in ma)
    # without the master weights' and optimizer's state the run diverges: the check can fail
    c = Run(build(make(), seed=11, device=device))
    c.model.load_state_dict(ck["model"])
    a.step(x, t)
    c.step(x, t)
    assert snapshot(c.model) != snapshot(a.model)


def test_master_weights_state_dict_refuses_other_models() -> None:
    r = lqt.MXFP8BlockScaling()
    m = lqt.MasterWeights(build(r, seed=0))
    sd = m.state_dict()
    assert sorted(sd) == ["experts.weight0", "experts.weight1", "experts.weight2", "fc1.weight", "fc2.weight"]
    assert all(v.dtype == torch.float32 for v in sd.values())
    with pytest.raises(lq.InvalidArgumentError, match="missing master weights \\['fc2.weight'\\]"):
        m.load_state_dict({k: v for k, v in sd.items() if k != "fc2.weight"})
    with pytest.raises(lq.InvalidArgumentError, match="shape \\(3,\\), want \\(128, 64\\)"):
        m.load_state_dict(dict(sd, **{"fc1.weight": torch.zeros(3)}))
