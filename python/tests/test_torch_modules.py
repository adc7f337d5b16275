"""libquant.torch modules (issue #20): drop-in Linear, GroupedLinear, convert,
autocast, recipes, the seeds' semantics, training under every recipe and
backward mode, module gradients equal to the C-level linear ops bit for bit.

Bit-for-bit comparisons are against the library's own linear ops
(libquant.Linear, i.e. quant_linear_forward / _backward) and quant_gemm run on
the same operands: the modules must add nothing of their own to the numerics.
The training tests bound the final loss by 2x the FP32 run's (issue #20 §9).

CUDA: every test that runs modules takes the ``device`` fixture (conftest:
cpu, and cuda where torch sees a GPU and libquant has its CUDA plugin loaded).
The CUDA cases compare against the same C-level ops on CUDA tensors (the same
library on the same device), bit for bit; test_torch_cuda.py compares CUDA
with the CPU (a derived tolerance), CUDA graphs and moving quantized weights.
"""

from __future__ import annotations

import copy
import gc
from typing import Any, Callable

import pytest
import torch

import libquant as lq
import libquant.torch as lqt

# Every recipe in its FP32 form (NVFP4's Hadamard transform needs BF16 input,
# spec §5.5: its RHT-free variant runs in FP32 and the default one in BF16 below).
RECIPES: dict[str, Callable[[], lqt.Recipe]] = {
    "fp8_delayed": lambda: lqt.DelayedScaling(amax_history_len=16),
    "fp8_current": lqt.Float8CurrentScaling,
    "fp8_block": lqt.Float8BlockScaling,
    "mxfp8": lqt.MXFP8BlockScaling,
    "nvfp4_no_rht": lambda: lqt.NVFP4BlockScaling(disable_rht=True),
}
OVERRIDES = [None, "high_precision", "dequantized"]
SPLITS = [32, 64, 32]  # multiples of every block size (MXFP8 32, NVFP4 16)


def lib_recipe(r: lqt.Recipe) -> lq.Recipe:
    """A second, independent library recipe equal to r (for C-level references)."""
    assert isinstance(r, lqt.Preset)
    return lq.Recipe.preset(r.kind, **r.options)


def call_or_skip(fn: Callable[[], Any], device: str = "cpu") -> Any:
    """Runs fn. On CUDA, a GEMM the library's support table marks unsupported
    there (quant_gemm_support: a format pair cuBLASLt cannot multiply) skips the
    test with the library's own message; every other error fails it, on every
    device."""
    try:
        return fn()
    except lq.UnsupportedError as e:
        if device.startswith("cuda") and "gemm" in str(e).lower() and "linear ops run on the cpu" not in str(e).lower():
            pytest.skip("libquant: unsupported on CUDA: %s" % e)
        raise


class Net(torch.nn.Module):
    """Two Linears and a GroupedLinear: the issue's small model."""

    def __init__(self, d: int = 64, h: int = 128, dtype: torch.dtype = torch.float32, device: Any = "cpu",
                 recipe: lqt.Recipe | None = None, save_original_input: bool = False) -> None:
        super().__init__()
        # Initialised on the CPU and then moved: the CPU's generator gives every
        # device the same weights (CUDA's would draw others), so a CUDA run
        # trains the CPU run's model and its loss compares with the CPU's.
        kw: dict[str, Any] = dict(device="cpu", dtype=dtype, recipe=recipe, save_original_input=save_original_input)
        self.fc1 = lqt.Linear(d, h, name="fc1", **kw)
        self.experts = lqt.GroupedLinear(len(SPLITS), h, h, name="experts", **kw)
        self.fc2 = lqt.Linear(h, d, name="fc2", **kw)
        if torch.device(device).type != "cpu":
            self.to(device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.nn.functional.gelu(self.fc1(x))
        h = h + torch.nn.functional.gelu(self.experts(h, SPLITS))
        return self.fc2(h)


def data(device: Any, dtype: torch.dtype = torch.float32, d: int = 64, seed: int = 1) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(sum(SPLITS), d, generator=g)
    teacher = torch.randn(d, d, generator=g) / d**0.5
    y = torch.tanh(x @ teacher) + 0.3 * torch.randn(sum(SPLITS), d, generator=g)  # noise floor ~0.09
    return x.to(device, dtype), y.to(device, dtype)


def grads(m: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None}


# ---------------------------------------------------------------------------
# 1. Drop-in modules
# ---------------------------------------------------------------------------


def test_linear_is_a_drop_in_for_nn_linear(device: str) -> None:
    torch.manual_seed(0)
    ref = torch.nn.Linear(48, 24, device=device, dtype=torch.bfloat16)
    torch.manual_seed(0)
    m = lqt.Linear(48, 24, device=device, dtype=torch.bfloat16)
    assert isinstance(m, torch.nn.Linear)
    assert m.weight.dtype == torch.bfloat16 and m.weight.device.type == device
    assert torch.equal(m.weight, ref.weight) and torch.equal(m.bias, ref.bias)  # reset_parameters
    assert list(m.state_dict()) == list(ref.state_dict()) == ["weight", "bias"]
    assert m.extra_repr() == ref.extra_repr()
    assert lqt.Linear(4, 3, bias=False).bias is None
    # outside autocast and without a recipe it IS nn.Linear, bit for bit
    x = torch.randn(5, 48, device=device, dtype=torch.bfloat16)
    assert torch.equal(m(x), ref(x))
    m.load_state_dict(torch.nn.Linear(48, 24, dtype=torch.bfloat16).state_dict())
    r = lqt.MXFP8BlockScaling()
    m2 = lqt.Linear(48, 24, recipe=r, save_original_input=True)
    assert "recipe=mxfp8" in m2.extra_repr() and "save_original_input=True" in m2.extra_repr()
    with pytest.raises(lq.InvalidArgumentError, match="recipe"):
        lqt.Linear(4, 4, recipe="mxfp8")  # type: ignore[arg-type]


def test_convert_swaps_linears_in_place_keeping_parameters(device: str) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Linear(32, 8))).to(device)
    params = [p for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    r = lqt.MXFP8BlockScaling()
    out = lqt.convert(model, recipe=r, filter=lambda mod, fqn: fqn != "2.1")
    assert out is model
    assert type(model[0]) is lqt.Linear and type(model[2][0]) is lqt.Linear
    assert type(model[2][1]) is torch.nn.Linear  # filtered out
    assert model[2][0].lq_name == "2.0" and model[0].recipe is r
    assert [p for p in model.parameters()] == params  # the very same Parameter objects
    x = torch.randn(32, 64, device=device)
    call_or_skip(lambda: model(x).sum().backward(), device)  # runs quantized without autocast: the module's own recipe
    opt.step()
    assert model[0].quantization_layer() is not None
    assert model[0].quantization_layer().weight_info().device == lq.Device(
        "cpu" if device == "cpu" else "cuda:%d" % torch.device(device, 0).index)
    single = lqt.convert(torch.nn.Linear(8, 8), recipe=r)
    assert isinstance(single, lqt.Linear)


def test_grouped_linear_shapes_and_high_precision(device: str) -> None:
    torch.manual_seed(0)
    g = lqt.GroupedLinear(3, 64, 32, device=device)
    assert [n for n, _ in g.named_parameters()] == ["weight0", "bias0", "weight1", "bias1", "weight2", "bias2"]
    x = torch.randn(128, 64, device=device)
    y = g(x, SPLITS)
    parts = torch.split(x, SPLITS)
    ref = torch.cat([torch.nn.functional.linear(p, getattr(g, "weight%d" % i), getattr(g, "bias%d" % i))
                     for i, p in enumerate(parts)])
    assert torch.equal(y, ref)
    with pytest.raises(lq.InvalidArgumentError, match="m_splits"):
        g(x, [64, 64])
    assert "num_gemms=3" in repr(g)


# ---------------------------------------------------------------------------
# 2. autocast, presets, CustomRecipe
# ---------------------------------------------------------------------------


def test_autocast_nesting_and_enabled_false(device: str) -> None:
    torch.manual_seed(0)
    m = lqt.Linear(64, 64, device=device)
    x = torch.randn(32, 64, device=device)
    hp = m(x)
    r1, r2 = lqt.MXFP8BlockScaling(), lqt.Float8CurrentScaling()
    with lqt.autocast(recipe=r1):
        y1 = m(x)
        assert m.quantization_layer(r1) is not None
        with lqt.autocast(recipe=r2, backward_override="dequantized"):
            y2 = m(x)
            with lqt.autocast(enabled=False):
                assert torch.equal(m(x), hp)  # high precision inside enabled=False
            with lqt.autocast():  # recipe=None inherits the enclosing recipe
                assert torch.equal(m(x), y2)
        assert torch.equal(m(x), y1)  # back to the outer recipe
    assert torch.equal(m(x), hp)
    assert not torch.equal(y1, hp) and m.quantization_layer(r2) is not None
    with pytest.raises(lq.InvalidArgumentError, match="backward_override"):
        with lqt.autocast(recipe=r1, backward_override="sideways"):
            pass
    with lqt.autocast():  # the default recipe, as TransformerEngine's: delayed scaling
        m(x)
    assert any(s.recipe.describe().startswith("fp8_delayed") for s in m._lq_slots.values())
    with pytest.raises(lq.InvalidArgumentError, match="recipe option"):
        lqt.preset("mxfp8", nonsense=1)


def test_custom_recipe_roles_hybrid_and_identity(device: str) -> None:
    seen: list[lqt.Role] = []

    def qfactory(role: lqt.Role) -> Any:
        seen.append(role)
        if role.name == "head":
            return lqt.IdentityQuantizer()
        if role.tensor_type == "grad_output":
            return lq.Quantizer("nvfp4")
        return lqt.HybridQuantizer(rowwise=lq.Quantizer("mxfp8"), columnwise=lq.Quantizer("nvfp4"))

    r = lqt.CustomRecipe(qfactory)
    body, head = lqt.Linear(64, 64, name="body", device=device), lqt.Linear(64, 64, name="head", device=device)
    x = torch.randn(32, 64, requires_grad=True, device=device)

    def run() -> None:
        with lqt.autocast(recipe=r):
            y = head(body(x))
        y.sum().backward()

    call_or_skip(run, device)
    roles = {(s.module_type, s.tensor_type, s.name) for s in seen}
    assert roles == {("linear", t, n) for t in ("input", "weight", "grad_output") for n in ("body", "head")}
    wi = body.quantization_layer().weight_info()
    assert (wi.rowwise_format, wi.columnwise_format) == ("mxfp8", "nvfp4")
    assert head.quantization_layer().weight_info().rowwise_format == "identity"
    # an identity head is exactly the high-precision product of its input
    h = body(x)  # outside autocast: high precision... but we need the quantized body output:
    with lqt.autocast(recipe=r):
        hb = body(x)
        yh = head(hb)
    assert torch.equal(yh, lq.gemm(hb.detach(), head.weight.detach(), trans_b=True, bias=head.bias.detach()))
    del h
    bad = lqt.CustomRecipe(lambda role: 42)  # type: ignore[arg-type,return-value]
    with pytest.raises(lq.LibquantError):
        with lqt.autocast(recipe=bad):
            lqt.Linear(8, 8, device=device)(torch.randn(4, 8, device=device))


# ---------------------------------------------------------------------------
# 3a. train/eval alternations: every step equals a fresh model's same step
# ---------------------------------------------------------------------------

# Delayed scaling carries state from step to step by design (a fresh model's
# scales differ), and NVFP4's stochastic rounding advances its random stream:
# both are excluded from "equals a freshly built model"; the rest must match.
FRESH_RECIPES = {
    "fp8_current": lqt.Float8CurrentScaling,
    "fp8_block": lqt.Float8BlockScaling,
    "mxfp8": lqt.MXFP8BlockScaling,
    "nvfp4_rn": lambda: lqt.NVFP4BlockScaling(disable_rht=True, disable_stochastic_rounding=True),
}


def _same_step(model: Net, recipe: lqt.Recipe, x: torch.Tensor, t: torch.Tensor,
               override: str | None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    with lqt.autocast(recipe=recipe, backward_override=override):
        out = model(x)
    torch.nn.functional.mse_loss(out, t).backward()
    return out.detach(), grads(model)


@pytest.mark.parametrize("override", OVERRIDES)
@pytest.mark.parametrize("kind", sorted(FRESH_RECIPES))
def test_train_eval_alternation_equals_fresh_model(kind: str, override: str | None, device: str) -> None:
    gc.collect()
    live0 = lqt.live_contexts()
    torch.manual_seed(0)
    recipe = FRESH_RECIPES[kind]()
    model = Net(device=device)
    x, t = data(device)
    xs = [x, x.flip(0), x * 0.5]
    schedule = ["train", "no_grad", "train", "eval", "frozen", "train", "inference", "train"]
    i = 0
    for what in schedule:
        xi = xs[i % len(xs)]
        i += 1
        if what == "train":
            model.train()
            fresh = Net(device=device)
            fresh.load_state_dict({k: v for k, v in model.state_dict().items() if not k.endswith("_extra_state")})
            got = call_or_skip(lambda: _same_step(model, recipe, xi, t, override), device)
            want = _same_step(fresh, recipe, xi, t, override)
            assert torch.equal(got[0], want[0]), "outputs differ from a fresh model's at step %d" % i
            assert got[1].keys() == want[1].keys()
            for k in got[1]:
                assert torch.equal(got[1][k], want[1][k]), "grad %s differs from a fresh model's at step %d" % (k, i)
            with torch.no_grad():  # an in-place optimizer step: the weights must be re-quantized
                for p in model.parameters():
                    p.sub_(0.05 * p.grad)
            for lay in (model.fc1, model.experts, model.fc2):
                wi = lay.quantization_layer().weight_info()
                assert wi.persistent
        elif what == "no_grad":
            with torch.no_grad(), lqt.autocast(recipe=recipe, backward_override=override):
                model(xi)
        elif what == "inference":
            with torch.inference_mode(), lqt.autocast(recipe=recipe, backward_override=override):
                model(xi)
        elif what == "eval":
            model.eval()
            with lqt.autocast(recipe=recipe, backward_override=override):
                model(xi).sum().backward()  # eval mode still trains here (gradients wanted)
        elif what == "frozen":
            for p in model.fc1.parameters():
                p.requires_grad_(False)
            with lqt.autocast(recipe=recipe, backward_override=override):
                model(xi.requires_grad_(True)).sum().backward()
            xi.requires_grad_(False)
            for p in model.fc1.parameters():
                p.requires_grad_(True)
    gc.collect()
    assert lqt.live_contexts() == live0


def test_no_grad_step_keeps_the_weight_usage_training_needs(device: str) -> None:
    """TransformerEngine PR #2929: an inference forward after training must not
    leave the quantized weight without its columnwise copy."""
    m = lqt.Linear(64, 64, recipe=lqt.MXFP8BlockScaling(), device=device)
    x = torch.randn(32, 64, requires_grad=True, device=device)
    call_or_skip(lambda: m(x).sum().backward(), device)
    assert m.quantization_layer().weight_info().usage == lq.BOTH
    with torch.no_grad():
        m.weight.mul_(0.5)  # an update, then an inference step re-quantizes
        m(x)
    assert m.quantization_layer().weight_info().usage == lq.BOTH


# ---------------------------------------------------------------------------
# 3b / 4. module gradients equal the C-level linear ops bit for bit
# ---------------------------------------------------------------------------


def _c_level_linear(recipe: lqt.Recipe, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, dy: torch.Tensor,
                    override: str | None, save_original_input: bool) -> tuple[torch.Tensor, ...]:
    layer = lq.Linear(lib_recipe(recipe), name="fc")
    y, ctx = layer.forward(x, w, b, backward_override=override or "none", save_original_input=save_original_input,
                           input_requires_grad=True, weight_requires_grad=True)
    assert ctx is not None
    gi, gw, gb = ctx.backward(dy, grad_input=True, grad_weight=True, grad_bias=True)
    return y, gi, gw, gb


@pytest.mark.parametrize("save_original_input", [False, True])
@pytest.mark.parametrize("override", OVERRIDES)
@pytest.mark.parametrize("kind", sorted(RECIPES))
def test_linear_grads_equal_c_level_ops(kind: str, override: str | None, save_original_input: bool,
                                        device: str) -> None:
    recipe = RECIPES[kind]()
    if kind == "fp8_delayed" and (override or save_original_input):
        pytest.skip("delayed scaling takes no backward override and no save_original_input (quant.h)")
    torch.manual_seed(3)
    m = lqt.Linear(96, 64, name="fc", device=device, save_original_input=save_original_input)
    x = torch.randn(64, 96, device=device, requires_grad=True)
    dy = torch.randn(64, 64, device=device)
    with lqt.autocast(recipe=recipe, backward_override=override):
        y = call_or_skip(lambda: m(x), device)
    y.backward(dy)
    # the C-level reference: "dequantized" ignores save_original_input (forced off),
    # "high_precision" forces it on; without an override it is the module's flag
    ref_save = {None: save_original_input, "high_precision": True, "dequantized": False}[override]
    ry, gi, gw, gb = _c_level_linear(recipe, x.detach(), m.weight.detach(), m.bias.detach(), dy, override, ref_save)
    assert torch.equal(y, ry) and torch.equal(x.grad, gi)
    assert torch.equal(m.weight.grad, gw) and torch.equal(m.bias.grad, gb)
    if override is None:
        return
    # what backward multiplies, independently of the linear op: the forward-quantized
    # X and W (rowwise, dequantized) for "dequantized", the originals for "high_precision"
    lay = m.quantization_layer()
    xd, wd, dyd = x.detach(), m.weight.detach(), dy
    if override == "dequantized":
        xd = lay.quantizer("input").quantize(xd, usage="rowwise").dequantize()
        wd = lay.quantizer("weight").quantize(wd, usage="rowwise").dequantize()
    assert torch.equal(x.grad, lq.gemm(dyd, wd))
    assert torch.equal(m.weight.grad, lq.gemm(dyd, xd, trans_a=True))


@pytest.mark.parametrize("override", OVERRIDES)
@pytest.mark.parametrize("kind", ["fp8_current", "mxfp8", "nvfp4_no_rht"])
def test_grouped_grads_equal_c_level_ops(kind: str, override: str | None, device: str) -> None:
    recipe = RECIPES[kind]()
    torch.manual_seed(4)
    m = lqt.GroupedLinear(3, 64, 32, name="experts", device=device)
    x = torch.randn(128, 64, device=device, requires_grad=True)
    dy = torch.randn(128, 32, device=device)
    with lqt.autocast(recipe=recipe, backward_override=override):
        y = call_or_skip(lambda: m(x, SPLITS), device)
    y.backward(dy)
    layer = lq.Linear(lib_recipe(recipe), name="experts", num_gemms=3)
    ws = [w.detach() for w in m.weights()]
    bs = [b.detach() for b in m.biases()]
    ry, ctx = layer.grouped_forward(x.detach(), SPLITS, ws, bs, backward_override=override or "none",
                                    input_requires_grad=True, weight_requires_grad=True)
    assert ctx is not None
    gi, gws, gbs = ctx.grouped_backward(dy, grad_input=True, grad_weights=True, grad_biases=True)
    assert torch.equal(y, ry) and torch.equal(x.grad, gi)
    for g in range(3):
        assert torch.equal(m.weights()[g].grad, gws[g]) and torch.equal(m.biases()[g].grad, gbs[g])


class _SeenOps(torch.utils._python_dispatch.TorchDispatchMode):
    """Records the operators that reach the dispatcher below autograd (what a
    tracer such as make_fx sees)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("kind", ["fp8_current", "mxfp8"])
def test_eager_path_equals_the_operators(kind: str, device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain eager calls skip the custom operators' dispatch (_ops._eager: their
    Python layers cost more host time per step than the library's C calls);
    under a dispatch mode (FX tracing, fake tensors) the modules go through
    libquant::linear_fwd / _bwd and the grouped ones. Both give the same bits."""
    from libquant.torch import _ops

    recipe = RECIPES[kind]()
    torch.manual_seed(5)
    lin = lqt.Linear(96, 64, name="fc", device=device, recipe=recipe)
    grp = lqt.GroupedLinear(3, 64, 32, name="experts", device=device, recipe=recipe)
    x1, x2 = torch.randn(64, 96, device=device), torch.randn(128, 64, device=device)
    dy1, dy2 = torch.randn(64, 64, device=device), torch.randn(128, 32, device=device)

    def step() -> list[torch.Tensor]:
        out = []
        for mod, x, dy, extra in ((lin, x1, dy1, ()), (grp, x2, dy2, (SPLITS,))):
            mod.zero_grad(set_to_none=True)
            xr = x.clone().requires_grad_(True)
            y = call_or_skip(lambda: mod(xr, *extra), device)
            y.backward(dy)
            out += [y.detach(), xr.grad] + [p.grad for p in mod.parameters()]
        return out

    def refuse(*a: Any, **k: Any) -> Any:
        raise AssertionError("an eager call reached a custom operator")

    with monkeypatch.context() as mp:
        for name in ("linear_fwd", "linear_bwd", "grouped_linear_fwd", "grouped_linear_bwd"):
            mp.setattr(_ops, name, refuse)
        eager = step()
    seen = _SeenOps()
    with seen:
        traced = step()
    for name in ("linear_fwd", "linear_bwd", "grouped_linear_fwd", "grouped_linear_bwd"):
        assert "libquant.%s.default" % name in seen.ops
    assert len(eager) == len(traced) == 2 * 2 + 2 + 2 * 3
    for a, b in zip(eager, traced):
        assert a is not None and torch.equal(a, b)


# ---------------------------------------------------------------------------
# 4. training under every recipe and backward mode within 2x the FP32 loss
# ---------------------------------------------------------------------------


def train(recipe: lqt.Recipe | None, override: str | None, device: str, dtype: torch.dtype = torch.float32,
          steps: int = 40) -> list[float]:
    torch.manual_seed(0)
    model = Net(dtype=dtype, device=device)
    x, t = data(device, dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        if recipe is None:
            out = model(x)
        else:
            with lqt.autocast(recipe=recipe, backward_override=override):
                out = model(x)
        loss = torch.nn.functional.mse_loss(out.float(), t.float())
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


_FP32: dict[tuple[str, torch.dtype], float] = {}


def fp32_loss(device: str, dtype: torch.dtype = torch.float32) -> float:
    if (device, dtype) not in _FP32:
        _FP32[(device, dtype)] = train(None, None, device, dtype)[-1]
    return _FP32[(device, dtype)]


@pytest.mark.parametrize("override", OVERRIDES)
@pytest.mark.parametrize("kind", sorted(RECIPES))
def test_training_within_2x_fp32_loss(kind: str, override: str | None, device: str) -> None:
    if kind == "fp8_delayed" and override:
        pytest.skip("delayed scaling takes no backward override (quant.h)")
    gc.collect()
    live0 = lqt.live_contexts()
    losses = call_or_skip(lambda: train(RECIPES[kind](), override, device), device)
    ref = fp32_loss(device)
    assert losses[-1] < losses[0] * 0.5, losses  # it trains
    assert losses[-1] <= 2 * ref, (losses[-1], ref)
    gc.collect()
    assert lqt.live_contexts() == live0


@pytest.mark.parametrize("override", OVERRIDES)
def test_training_nvfp4_default_recipe_bf16(override: str | None, device: str) -> None:
    """NVFP4 as TransformerEngine runs it (RHT, stochastic rounding, 16x16 weights), on BF16."""
    losses = call_or_skip(lambda: train(lqt.NVFP4BlockScaling(), override, device, torch.bfloat16), device)
    assert losses[-1] < losses[0] * 0.5, losses
    assert losses[-1] <= 2 * fp32_loss(device), (losses[-1], fp32_loss(device))


def hybrid_recipe() -> lqt.CustomRecipe:
    """MXFP8 forward, NVFP4 backward; the last layer (fc2) kept in high precision."""

    def qfactory(role: lqt.Role) -> Any:
        if role.name == "fc2":
            return None  # identity
        if role.tensor_type == "grad_output":
            return lqt.HybridQuantizer(rowwise=lq.Quantizer("nvfp4"), columnwise=lq.Quantizer("nvfp4"))
        return lqt.HybridQuantizer(rowwise=lq.Quantizer("mxfp8"), columnwise=lq.Quantizer("nvfp4"))

    return lqt.CustomRecipe(qfactory, name="mxfp8_fwd_nvfp4_bwd")


def test_hybrid_mxfp8_forward_nvfp4_backward_with_identity_roles_trains(device: str) -> None:
    r = hybrid_recipe()
    losses = call_or_skip(lambda: train(r, None, device), device)
    assert losses[-1] < losses[0] * 0.5, losses
    assert losses[-1] <= 2 * fp32_loss(device), (losses[-1], fp32_loss(device))


# ---------------------------------------------------------------------------
# delayed scaling: updated once per pass, at the right points
# ---------------------------------------------------------------------------


def test_delayed_scaling_updates_after_each_pass(device: str) -> None:
    torch.manual_seed(0)
    r = lqt.DelayedScaling(amax_history_len=4)
    m = lqt.Linear(32, 16, device=device)
    x = torch.randn(8, 32, requires_grad=True)
    x.data[0, 0] = 40.0
    x = x.detach().to(device).requires_grad_(True)

    def state(role: str) -> tuple[float, float]:
        # read afresh each time: on the GPU the state lives in device memory and
        # quant_delayed_scaling_state copies it back into the (CPU) views
        s_, h_ = m.quantization_layer().quantizer(role).delayed_scaling_state()
        return float(s_.numpy()[0]), float(h_.numpy()[0])

    with lqt.autocast(recipe=r):
        y = call_or_skip(lambda: m(x), device)
    assert state("input") == (1.0, 40.0)  # staged; the scale is not updated yet
    y.backward(torch.randn(8, 16, device=device))
    assert state("grad_output")[0] != 1.0  # backward pass done: its scale is updated at once
    assert state("input")[0] == 1.0
    with lqt.autocast(recipe=r):
        m(x)  # the next step's forward uses scales from the last step's amaxes
    assert state("input")[0] == pytest.approx(448.0 / 40.0)


def test_forward_context_freed_without_backward(device: str) -> None:
    gc.collect()
    live0 = lqt.live_contexts()
    m = lqt.Linear(32, 32, recipe=lqt.MXFP8BlockScaling(), device=device)
    y = call_or_skip(lambda: m(torch.randn(32, 32, requires_grad=True, device=device)), device)
    assert lqt.live_contexts() == live0 + 1
    del y  # the graph goes, and with it the library context (no backward ran)
    assert lqt.live_contexts() == live0


def test_deepcopy_gets_its_own_layers(device: str) -> None:
    m = Net(recipe=lqt.MXFP8BlockScaling(), device=device)
    x, _ = data(device)
    call_or_skip(lambda: m(x).sum().backward(), device)
    c = copy.deepcopy(m)
    assert c.fc1._lq_mid != m.fc1._lq_mid and c.fc1._lq_slots == {}
    assert torch.equal(c(x), m(x))


@pytest.mark.parametrize("override,save,want", [(None, False, "quantized"), (None, True, "original"),
                                                 ("high_precision", False, "original"),
                                                 ("dequantized", True, "quantized")])
def test_save_original_input_decides_what_the_context_keeps(override: str | None, save: bool, want: str,
                                                           device: str) -> None:
    """What a forward keeps of X for the weight gradient (quant_linear_ctx_info):
    save_original_input keeps X itself; "dequantized" forces it off (the forward-
    quantized X is what backward must see), "high_precision" forces it on."""
    from libquant.torch import _ops

    m = lqt.Linear(64, 64, save_original_input=save, device=device)
    x = torch.randn(32, 64, requires_grad=True, device=device)
    before = set(_ops._CTXS)
    with lqt.autocast(recipe=lqt.MXFP8BlockScaling(), backward_override=override):
        y = call_or_skip(lambda: m(x), device)
    (cid,) = set(_ops._CTXS) - before
    info = _ops._CTXS[cid].info
    assert info.input_saved == want and info.weight_saved != "none"
    assert info.save_original_input == (want == "original")
    y.sum().backward()
    assert cid not in _ops._CTXS  # backward took and freed it


def test_delayed_scaling_refuses_overrides_with_the_library_message() -> None:
    m = lqt.Linear(32, 32)
    with pytest.raises(lq.InvalidArgumentError, match="override"):
        with lqt.autocast(recipe=lqt.DelayedScaling(), backward_override="dequantized"):
            m(torch.randn(32, 32, requires_grad=True))


def test_module_recipe_without_autocast_compiles_fullgraph(device: str) -> None:
    torch.manual_seed(0)
    m = Net(recipe=lqt.Float8CurrentScaling(), device=device)
    x, _ = data(device)
    want = call_or_skip(lambda: m(x), device)
    torch._dynamo.reset()
    got = torch.compile(m, fullgraph=True, backend="aot_eager")(x)
    assert torch.equal(got, want)
    plain = Net(device=device)  # no recipe, no autocast: high precision, and still one graph
    torch._dynamo.reset()
    assert torch.equal(torch.compile(plain, fullgraph=True, backend="aot_eager")(x), plain(x))


def test_leading_dims_frozen_weights_and_bias_only_training(device: str) -> None:
    r = lqt.MXFP8BlockScaling()
    m = lqt.Linear(64, 32, recipe=r, device=device)
    x = torch.randn(2, 16, 64, requires_grad=True, device=device)
    y = call_or_skip(lambda: m(x), device)
    assert y.shape == (2, 16, 32)
    y.backward(torch.ones_like(y))
    assert x.grad is not None and x.grad.shape == x.shape and m.weight.grad is not None
    ref = lq.Linear(lib_recipe(r))
    ry, ctx = ref.forward(x.detach().reshape(32, 64), m.weight.detach(), m.bias.detach(), input_requires_grad=True,
                          weight_requires_grad=True)
    assert ctx is not None and torch.equal(y.detach().reshape(32, 32), ry)
    gi, gw, gb = ctx.backward(torch.ones(32, 32, device=device), grad_input=True, grad_weight=True, grad_bias=True)
    assert torch.equal(x.grad.reshape(32, 64), gi) and torch.equal(m.weight.grad, gw) and torch.equal(m.bias.grad, gb)
    # a frozen weight with a trainable bias: only the bias gets a gradient
    m.weight.requires_grad_(False)
    m.bias.grad = None
    m(torch.randn(32, 64, device=device)).sum().backward()
    assert m.bias.grad is not None and torch.equal(m.bias.grad, torch.full((32,), 32.0, device=device))
