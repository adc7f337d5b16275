"""torch.compile and activation recomputation over libquant.torch modules (issue #20 §6, §7).

The library's ops are torch custom operators with fake implementations and
registered autograd: torch.compile(fullgraph=True) must trace a model of these
modules without a graph break and give bit-identical outputs and gradients (the
compiled graph calls the same library code on the same operands). The model's
other ops are ReLU and additions, which inductor computes exactly as eager
does, so any difference would come from the modules."""

from __future__ import annotations

import copy
import gc
from typing import Any

import pytest
import torch
import torch.utils.checkpoint as tuc

import libquant.torch as lqt
from test_torch_modules import RECIPES, SPLITS, call_or_skip


class Block(torch.nn.Module):
    def __init__(self, d: int = 64, h: int = 128, device: Any = "cpu") -> None:
        super().__init__()
        self.fc1 = lqt.Linear(d, h, name="fc1", device=device)
        self.experts = lqt.GroupedLinear(len(SPLITS), h, h, name="experts", device=device)
        self.fc2 = lqt.Linear(h, d, name="fc2", device=device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        h = h + torch.relu(self.experts(h, SPLITS))
        return self.fc2(h)


def steps(model: Any, params: list[torch.nn.Parameter], recipe: lqt.Recipe, override: str | None,
          x: torch.Tensor, n: int = 2) -> list[tuple[torch.Tensor, list[torch.Tensor]]]:
    """n training steps (SGD in place, so every step re-quantizes the weights);
    each step's output and gradients."""
    out = []
    for i in range(n):
        for p in params:
            p.grad = None
        xi = (x * (1 + i)).requires_grad_(True)
        with lqt.autocast(recipe=recipe, backward_override=override):
            y = model(xi)
        (y.square().sum() * 1e-3).backward()
        out.append((y.detach(), [p.grad.clone() for p in params] + [xi.grad]))
        with torch.no_grad():
            for p in params:
                p.sub_(0.1 * p.grad)
    return out


def assert_same(a: list[Any], b: list[Any]) -> None:
    for (ya, ga), (yb, gb) in zip(a, b):
        assert torch.equal(ya, yb)
        assert len(ga) == len(gb) and all(torch.equal(u, v) for u, v in zip(ga, gb))


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_compile_fullgraph_bit_identical_to_eager(backend: str, device: str) -> None:
    """fullgraph=True raises on any graph break; the default backend (inductor)
    once, and aot_eager (the same AOTAutograd trace through the fake
    implementations, without code generation) for a recipe with state."""
    recipe = lqt.MXFP8BlockScaling() if backend == "inductor" else lqt.DelayedScaling(amax_history_len=8)
    torch.manual_seed(0)
    eager = Block(device=device)
    comp = copy.deepcopy(eager)
    x = torch.randn(sum(SPLITS), 64, device=device)
    torch._dynamo.reset()
    compiled = torch.compile(comp, fullgraph=True, backend=backend)
    want = call_or_skip(lambda: steps(eager, list(eager.parameters()), recipe, None, x, 3), device)
    got = steps(compiled, list(comp.parameters()), recipe, None, x, 3)
    assert_same(got, want)


@pytest.mark.parametrize("override", [None, "dequantized"])
@pytest.mark.parametrize("kind", ["fp8_current", "nvfp4_no_rht", "fp8_block"])
def test_compile_every_recipe_aot_eager(kind: str, override: str | None, device: str) -> None:
    gc.collect()
    live0 = lqt.live_contexts()
    recipe = RECIPES[kind]()
    torch.manual_seed(1)
    eager = Block(device=device)
    comp = copy.deepcopy(eager)
    x = torch.randn(sum(SPLITS), 64, device=device)
    torch._dynamo.reset()
    compiled = torch.compile(comp, fullgraph=True, backend="aot_eager")
    want = call_or_skip(lambda: steps(eager, list(eager.parameters()), recipe, override, x), device)
    assert_same(steps(compiled, list(comp.parameters()), recipe, override, x), want)
    with lqt.autocast(recipe=recipe, backward_override=override):
        y = compiled(x.requires_grad_(True))
    assert lqt.live_contexts() == live0 + 3  # a compiled forward keeps its contexts for backward ...
    del y
    gc.collect()
    assert lqt.live_contexts() == live0  # ... and frees them with its graph when backward never runs


def test_custom_ops_are_registered_with_fake_impls() -> None:
    from torch._library.custom_ops import CustomOpDef

    for name in ("linear_fwd", "linear_bwd", "grouped_linear_fwd", "grouped_linear_bwd"):
        op = getattr(torch.ops.libquant, name)
        assert isinstance(op.default, torch._ops.OpOverload)
    from libquant.torch import _ops

    for d in (_ops.linear_fwd, _ops.grouped_linear_fwd):
        assert isinstance(d, CustomOpDef) and d._abstract_fn is not None and d._backward_fn is not None
    with torch._subclasses.fake_tensor.FakeTensorMode():
        x, w = torch.empty(32, 64), torch.empty(16, 64)
        y, h = torch.ops.libquant.linear_fwd(x, w, None, 0, 0, 0, False, True, True)
        assert y.shape == (32, 16) and h.dtype == torch.int64


# ---------------------------------------------------------------------------
# activation recomputation
# ---------------------------------------------------------------------------


class Checkpointed(torch.nn.Module):
    def __init__(self, inner: Block, reentrant: bool) -> None:
        super().__init__()
        self.inner = inner
        self.reentrant = reentrant

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = tuc.checkpoint(self.inner, x, use_reentrant=self.reentrant)
        return out


@pytest.mark.parametrize("reentrant", [False, True])
@pytest.mark.parametrize("override", [None, "high_precision", "dequantized"])
@pytest.mark.parametrize("kind", sorted(RECIPES))
def test_checkpoint_gives_bit_identical_grads(kind: str, override: str | None, reentrant: bool,
                                              device: str) -> None:
    """torch.utils.checkpoint reruns the block's forward in backward: it must
    quantize exactly as the first forward did (same delayed-scaling scales, same
    cached weight), so the gradients equal those of running without it."""
    if kind == "fp8_delayed" and override:
        pytest.skip("delayed scaling takes no backward override (quant.h)")
    recipe = RECIPES[kind]()
    torch.manual_seed(2)
    plain = Block(device=device)
    ck = Checkpointed(copy.deepcopy(plain), reentrant)
    x = torch.randn(sum(SPLITS), 64, device=device)
    want = call_or_skip(lambda: steps(plain, list(plain.parameters()), recipe, override, x, 3), device)
    got = steps(ck, list(ck.parameters()), recipe, override, x, 3)
    assert_same(got, want)
