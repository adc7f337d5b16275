"""safetensors files of libquant.torch models (issue #20 §5). The round trips
(quantized-only weights of every recipe and hybrid, the delayed-scaling state,
resumed training bit for bit) are the "safetensors" cases of
test_torch_qcheckpoint.py and test_torch_checkpoint.py; here: the file is a plain
safetensors file (other readers see its tensors, float8 buffers with their
float8 dtype), loading it into another recipe re-quantizes and warns, and bad
input is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

import libquant as lq
import libquant.torch as lqt
from test_torch_modules import data
from test_torch_qcheckpoint import MAKERS, build, train


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
