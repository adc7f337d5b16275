"""Checkpoints of libquant.torch modules (issue #20 §5): state_dict /
load_state_dict and torch.save / torch.load round-trip the delayed-scaling state
(scale and amax history of every quantizer, hybrid sides included) bit for bit,
so the next step after loading equals the next step without the round trip;
loading into another recipe re-quantizes and warns.

safetensors files: test_torch_safetensors.py."""

from __future__ import annotations

import copy
import io
import warnings
from typing import Any

import pytest
import torch

import libquant as lq
import libquant.torch as lqt
from test_torch_modules import SPLITS, Net, call_or_skip, data, grads


def delayed_states(m: torch.nn.Module) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for name, mod in m.named_modules():
        if isinstance(mod, (lqt.Linear, lqt.GroupedLinear)) and mod._lq_last is not None:
            for k, v in mod._lq_extra_state(mod._lq_last)["delayed_scaling"].items():
                out[name + "." + k] = v
    return out


def step(m: Net, recipe: lqt.Recipe, x: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, dict[str, Any]]:
    m.zero_grad(set_to_none=True)
    with lqt.autocast(recipe=recipe):
        y = m(x)
    torch.nn.functional.mse_loss(y, t).backward()
    g = grads(m)
    with torch.no_grad():
        for p in m.parameters():
            p.sub_(0.05 * p.grad)
    return y.detach(), g


def hybrid_delayed() -> lqt.CustomRecipe:
    """Delayed-scaling FP8 with E4M3 rowwise / E5M2 columnwise sides: two states per quantizer."""

    def qfactory(role: lqt.Role) -> Any:
        return lqt.HybridQuantizer(rowwise=lq.Quantizer("fp8", scaling="delayed", amax_history_len=8),
                                   columnwise=lq.Quantizer("fp8", element="e5m2", scaling="delayed",
                                                           amax_history_len=8))

    return lqt.CustomRecipe(qfactory, name="fp8_delayed_hybrid")


@pytest.mark.parametrize("how", ["state_dict", "torch_save_state_dict", "torch_save_module", "safetensors"])
@pytest.mark.parametrize("which", ["preset", "hybrid"])
def test_delayed_scaling_state_round_trips_bit_for_bit(which: str, how: str, device: str) -> None:
    make = (lambda: lqt.DelayedScaling(amax_history_len=8)) if which == "preset" else hybrid_delayed
    recipe = make()
    torch.manual_seed(0)
    a = Net(device=device)
    x, t = data(device)
    for i in range(3):
        call_or_skip(lambda: step(a, recipe, x * (1 + 0.5 * i), t), device)
    before = delayed_states(a)
    assert before and any(float(v.abs().sum()) > 0 for k, v in before.items() if k.endswith("amax_history"))
    if which == "hybrid":  # both sides of every hybrid quantizer carry a state
        assert {k.split("/")[2] for k in before} == {"rowwise", "columnwise"}
        assert any("grad_output" in k for k in before)
    sd = a.state_dict()
    assert "fc1._extra_state" in sd and "experts._extra_state" in sd
    assert sd["fc1._extra_state"]["recipe"] == recipe.describe()
    if how == "torch_save_module":
        buf = io.BytesIO()
        torch.save(a, buf)
        buf.seek(0)
        b = torch.load(buf, weights_only=False)
    else:
        if how == "torch_save_state_dict":
            buf = io.BytesIO()
            torch.save(sd, buf)
            buf.seek(0)
            sd = torch.load(buf, weights_only=False)
        if how == "safetensors":
            from test_torch_qcheckpoint import safetensors_round_trip

            sd = safetensors_round_trip(sd, device)
        b = Net(device=device)
        b.load_state_dict(sd)  # no recipe yet: applied when b first runs under one
    # a new recipe object with the same description (as after a restart) takes the state
    recipe_b = make()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ya, ga = step(a, recipe, x, t)
        yb, gb = step(b, recipe_b, x, t)
    assert torch.equal(ya, yb)
    assert ga.keys() == gb.keys() and all(torch.equal(ga[k], gb[k]) for k in ga)
    after_a, after_b = delayed_states(a), delayed_states(b)
    assert after_a.keys() == after_b.keys() == before.keys()
    assert all(torch.equal(after_a[k], after_b[k]) for k in after_a)


def test_state_dict_without_round_trip_differs() -> None:
    """The check above can fail: a model without the loaded state takes another step."""
    recipe = lqt.DelayedScaling(amax_history_len=8)
    torch.manual_seed(0)
    a = Net()
    x, t = data("cpu")
    for i in range(3):
        step(a, recipe, x * (1 + 0.5 * i), t)
    b = Net()
    b.load_state_dict({k: v for k, v in a.state_dict().items() if not k.endswith("_extra_state")})
    ya, _ = step(a, recipe, x, t)
    yb, _ = step(b, recipe, x, t)
    assert not torch.equal(ya, yb)


def test_loading_into_another_recipe_requantizes_and_warns(device: str) -> None:
    torch.manual_seed(0)
    a = Net(recipe=lqt.DelayedScaling(amax_history_len=8), device=device)
    x, t = data(device)
    call_or_skip(lambda: a(x).sum().backward(), device)
    sd = a.state_dict()
    mx = lqt.MXFP8BlockScaling()
    b = Net(recipe=mx, device=device)
    with pytest.warns(UserWarning, match="re-quantized"):
        b.load_state_dict(sd)
    ref = Net(recipe=mx, device=device)
    ref.load_state_dict({k: v for k, v in sd.items() if not k.endswith("_extra_state")})
    assert torch.equal(b(x), ref(x))  # exactly MXFP8 of the loaded weights
    c = Net(device=device)  # no recipe yet: the warning comes when it first runs under another one
    c.load_state_dict(sd)
    with pytest.warns(UserWarning, match="fp8_delayed"):
        with lqt.autocast(recipe=mx):
            c(x)


def test_weights_loaded_in_place_are_requantized(device: str) -> None:
    torch.manual_seed(0)
    r = lqt.MXFP8BlockScaling()
    a, b = Net(recipe=r, device=device), Net(recipe=r, device=device)
    x, _ = data(device)
    ya = call_or_skip(lambda: a(x), device)
    b(x)  # b quantized its own weights once
    b.load_state_dict(a.state_dict())  # copy_ into the same Parameters: same addresses
    assert torch.equal(b(x), ya)


def test_state_dict_of_a_never_quantized_module_is_nn_linears() -> None:
    m = lqt.Linear(8, 4)
    assert list(m.state_dict()) == ["weight", "bias"]
    torch.nn.Linear(8, 4).load_state_dict(m.state_dict())
    m.load_state_dict(torch.nn.Linear(8, 4).state_dict())
    g = lqt.GroupedLinear(len(SPLITS), 8, 4)
    g2 = copy.deepcopy(g)
    g2.load_state_dict(g.state_dict())
