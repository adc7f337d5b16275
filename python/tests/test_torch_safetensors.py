"""safetensors files of libquant.torch models (issue #20 §5): save_safetensors /
load_safetensors round-trip quantized-only weights (every buffer of every
direction, hybrid ones too, and their metadata), the delayed-scaling state and
the parameters bit for bit, so that training resumed from the file continues as
without the round trip; the file is a plain safetensors file (other readers see
its tensors, float8 buffers with their float8 dtype); loading it into another
recipe re-quantizes and warns, as a state dict does."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

import libquant as lq
import libquant.torch as lqt
from test_torch_checkpoint import delayed_states, hybrid_delayed, step
from test_torch_modules import Net, data
from test_torch_qcheckpoint import MAKERS, assert_same, build, qmodules, snapshot, train


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_quantized_weights_round_trip_through_a_file(kind: str, tmp_path: Path) -> None:
    make = MAKERS[kind]
    recipe = make()
    a = build(recipe, seed=0)
    x, t = data("cpu")
    train(a, recipe, 3, x, t)
    before = snapshot(a)
    path = tmp_path / "model.safetensors"
    lqt.save_safetensors(a, path, metadata={"note": kind})
    b = build(make(), seed=7)  # another initialization: the load must replace every byte
    assert snapshot(b) != before
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # same recipe: nothing changes precision
        b.load_state_dict(lqt.load_safetensors(path))
    assert_same(snapshot(b), before)
    for m in qmodules(b):
        assert m.quantized_weight
    rb = b.fc1.recipe
    assert rb is not None and rb.describe() == recipe.describe()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sa = train(a, recipe, 2, x, t)
        sb = train(b, rb, 2, x, t)
    assert all(torch.equal(u, v) for u, v in zip(sa[:-1], sb[:-1]))
    assert sa[-1].keys() == sb[-1].keys() and all(torch.equal(sa[-1][k], sb[-1][k]) for k in sa[-1])
    with safe_open(str(path), framework="pt") as f:
        assert f.metadata()["note"] == kind


@pytest.mark.parametrize("which", ["preset", "hybrid"])
def test_delayed_scaling_state_round_trips_through_a_file(which: str, tmp_path: Path) -> None:
    make = (lambda: lqt.DelayedScaling(amax_history_len=8)) if which == "preset" else hybrid_delayed
    recipe = make()
    torch.manual_seed(0)
    a = Net()
    x, t = data("cpu")
    for i in range(3):
        step(a, recipe, x * (1 + 0.5 * i), t)
    before = delayed_states(a)
    assert before
    lqt.save_safetensors(a, tmp_path / "m.safetensors")
    b = Net()
    b.load_state_dict(lqt.load_safetensors(tmp_path / "m.safetensors"))
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


def test_the_file_is_plain_safetensors(tmp_path: Path) -> None:
    """Another reader sees every tensor: parameters, the quantized buffers (FP8
    codes as float8, E8M0 scales as bytes with their dtype in the metadata) and
    the extra state's tensors; the extra state's other values are JSON."""
    recipe = MAKERS["mxfp8"]()
    a = build(recipe, seed=0)
    x, t = data("cpu")
    train(a, recipe, 1, x, t)
    path = tmp_path / "m.safetensors"
    lqt.save_safetensors(a, path)
    sd = a.state_dict()
    with safe_open(str(path), framework="pt") as f:
        names = set(f.keys())
        meta = f.metadata()
        tensors = {n: f.get_tensor(n) for n in names}
    plain = {k for k, v in sd.items() if isinstance(v, torch.Tensor)}
    assert plain <= names
    assert any(v.dtype == torch.float8_e4m3fn for v in tensors.values())
    dtypes = json.loads(meta["libquant.dtypes"])
    assert dtypes and all(dt == "float8_e8m0fnu" for dt, _ in dtypes.values())
    for k, v in sd.items():
        if isinstance(v, torch.Tensor) and k not in dtypes:
            assert tensors[k].dtype == v.dtype and torch.equal(tensors[k].view(torch.uint8), v.contiguous().view(torch.uint8))
    extra = json.loads(meta["libquant.extra_state:fc1._extra_state"])
    assert extra["__dict__"]["recipe"] == recipe.describe()


def test_loading_a_file_into_another_recipe_requantizes_and_warns(tmp_path: Path) -> None:
    a = build(MAKERS["mxfp8"](), seed=0)
    lqt.save_safetensors(a, tmp_path / "m.safetensors")
    b = build(MAKERS["nvfp4_no_rht"](), seed=1)
    with pytest.warns(UserWarning, match="re-quantized"):
        b.load_state_dict(lqt.load_safetensors(tmp_path / "m.safetensors"))


def test_bad_input_is_refused(tmp_path: Path) -> None:
    m = lqt.Linear(8, 4)
    with pytest.raises(lq.InvalidArgumentError, match="reserved"):
        lqt.save_safetensors(m, tmp_path / "x", metadata={"libquant.format": "2"})
    with pytest.raises(lq.InvalidArgumentError, match="neither a tensor"):
        lqt.save_safetensors({"w": 3}, tmp_path / "x")
    lqt.save_safetensors(m, tmp_path / "plain")  # a plain nn.Linear state: loads into torch's own module
    torch.nn.Linear(8, 4).load_state_dict(lqt.load_safetensors(tmp_path / "plain"))
