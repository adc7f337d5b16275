"""libquant.torch on CUDA (issue #20 items 7 and 9): the modules on the GPU
against the same modules on the CPU (a derived tolerance), a training step
captured in a CUDA graph and replayed, and modules holding quantized-only weights
moved between devices (``Module.to`` / ``.cuda()`` / ``.cpu()``).

The rest of the module suite runs on CUDA through the ``device`` fixture
(conftest.py) and compares there against the library's C-level ops on CUDA
tensors, bit for bit. Every CUDA case skips, saying why, where torch sees no GPU
or libquant has no CUDA plugin loaded.
"""

from __future__ import annotations

import copy
import ctypes
import gc
import math
from collections import Counter
from typing import Any, Callable

import numpy as np
import pytest
import torch

import libquant as lq
import libquant.torch as lqt
from conftest import CUDA_SKIP
from test_torch_compile import Block
from test_torch_modules import SPLITS, call_or_skip

cuda_only = pytest.mark.skipif(CUDA_SKIP is not None, reason=str(CUDA_SKIP))

# ---------------------------------------------------------------------------
# GPU against CPU: one Linear, forward and backward, within a derived bound
# ---------------------------------------------------------------------------

U32 = 2.0**-24  # FP32 unit roundoff
U_ACC = 2.0**-13  # Hopper's FP8 tensor-core accumulator (~14 bits), one bit of margin (cuda/gputest)


def gamma(n: int, u: float) -> float:
    """Higham's gamma_n = n u / (1 - n u)."""
    return n * u / (1 - n * u)


# recipe -> (maker, the K block of its fused GEMM path or 0 for per-tensor / per-block FP8)
CPU_GPU_RECIPES: dict[str, tuple[Callable[[], lqt.Recipe], int]] = {
    "fp8_delayed": (lambda: lqt.DelayedScaling(amax_history_len=4), 0),
    "fp8_current": (lqt.Float8CurrentScaling, 0),
    "fp8_block": (lqt.Float8BlockScaling, 0),
    "mxfp8": (lqt.MXFP8BlockScaling, 32),
    "nvfp4_rn": (lambda: lqt.NVFP4BlockScaling(disable_rht=True, disable_stochastic_rounding=True), 16),
}


def gemm_gap(a: torch.Tensor, b: torch.Tensor, block: int) -> torch.Tensor:
    """The bound on |D_gpu - D_cpu| for D = a @ b.T (a [M, K], b [N, K]: the
    dequantized operands, float64), elementwise.

    The quantized operands are the same bytes on both devices (the quantize
    kernels are bit-exact against the CPU: cuda/gputest), so the outputs differ
    only by the GEMMs' roundings. With S = sum_k |a_k b_k| (the bias and alpha
    terms are inside it; the bias here is added once):
    - CPU quant_gemm: |D_cpu - R| <= gamma_{K+8}(u) S (host/gemm_test.go's bound:
      each term sees at most K+8 FP32 roundings), u = 2^-24;
    - GPU: the same, plus the accumulator: FP8 x FP8 on Hopper's tensor cores
      sums exact products in about 14 bits between cuBLASLt's FP32 promotions,
      modelled as rounding with u_acc = 2^-13: + gamma_K(u_acc) S (cuda/gputest
      gemm_test.go); MX / NVFP4 operands are expanded to BF16 exactly and summed
      in FP32, except on the fused Hopper kernel, whose block sums of at most 32
      products are off by less than 2^-13 (32 (1 + 2^-13) max_block |a_k b_k| +
      sum_block |a_k b_k|) (products truncated to 13 bits of the largest, their
      sum to 13 bits of its own magnitude: fused_test.go's fusedTerm), summed
      over K's blocks.
    Both lie within their bound of the exact R, so they differ by at most the sum
    of the two bounds, plus one FP32 rounding of each output (u |R|, R <= |D_cpu|
    + its bound)."""
    p = a.abs()[:, None, :] * b.abs()[None, :, :]  # [M, N, K]
    s = p.sum(-1)
    k = a.shape[1]
    if block:
        blocks = p.reshape(p.shape[0], p.shape[1], k // block, block)
        extra = 2.0**-13 * (32 * (1 + 2.0**-13) * blocks.amax(-1) + blocks.sum(-1)).sum(-1)
    else:
        extra = gamma(k, U_ACC) * s
    e_cpu = gamma(k + 8, U32) * s
    return e_cpu + (e_cpu + extra) + 2 * U32 * (s + e_cpu + extra)


def deq(q: Any, x: torch.Tensor, direction: str) -> torch.Tensor:
    """x quantized by q (both usages), the given direction dequantized, float64."""
    qt = q.quantize(x, usage="both")
    out = torch.empty(tuple(x.shape), dtype=torch.float32)
    qt.dequantize(direction=direction, out=out)
    return out.double()


@cuda_only
@pytest.mark.parametrize("kind", sorted(CPU_GPU_RECIPES))
def test_cuda_linear_matches_cpu_within_derived_bound(kind: str) -> None:
    make, block = CPU_GPU_RECIPES[kind]
    torch.manual_seed(5)
    m_cpu = lqt.Linear(128, 64, name="fc")
    m_gpu = copy.deepcopy(m_cpu).cuda()
    x = torch.randn(64, 128)
    dy = torch.randn(64, 64)
    xc, xg = x.clone().requires_grad_(True), x.cuda().requires_grad_(True)
    with lqt.autocast(recipe=make()):
        yc = m_cpu(xc)
    with lqt.autocast(recipe=make()):
        yg = call_or_skip(lambda: m_gpu(xg), "cuda")
    yc.backward(dy)
    yg.backward(dy.cuda())
    # the operands both devices multiplied (the CPU layer's quantizers, which ran
    # one step, as the GPU layer's did; delayed scaling: the same first-step scale)
    lay = m_cpu.quantization_layer()
    w = m_cpu.weight.detach()
    iq, wq, gq = lay.quantizer("input"), lay.quantizer("weight"), lay.quantizer("grad_output")
    x_row, x_col = deq(iq, x, "rowwise"), deq(iq, x, "columnwise")
    w_row, w_col = deq(wq, w, "rowwise"), deq(wq, w, "columnwise")
    g_row, g_col = deq(gq, dy, "rowwise"), deq(gq, dy, "columnwise")
    b = m_cpu.bias.detach().double()
    checks = [
        ("y", yc, yg, gemm_gap(x_row, w_row, block) + 2 * gamma(1, U32) * b.abs()),
        ("dx", xc.grad, xg.grad, gemm_gap(g_row, w_col.T.contiguous(), block)),  # dX = dY W: K = 64 outputs
        ("dw", m_cpu.weight.grad, m_gpu.weight.grad, gemm_gap(g_col.T.contiguous(), x_col.T.contiguous(), block)),
        # db = column sums of dY (high precision or its quantized form: the same on both)
        ("db", m_cpu.bias.grad, m_gpu.bias.grad,
         2 * gamma(64, U32) * torch.maximum(dy.double().abs(), g_row.abs()).sum(0)),
    ]
    for name, c, g, bound in checks:
        diff = (g.detach().cpu().double() - c.detach().double()).abs()
        assert bool((diff <= bound).all()), "%s %s: |gpu - cpu| %.3g > bound %.3g at %s" % (
            kind, name, float((diff - bound).max()), float(bound.flatten()[int((diff - bound).argmax())]),
            tuple(np.unravel_index(int((diff - bound).argmax()), tuple(diff.shape))))
        # the bound is far below the values: a wrong scale, layout or operand fails
        assert float(bound.median()) < 0.25 * float(c.detach().abs().median()), (kind, name)


# ---------------------------------------------------------------------------
# CUDA graphs
# ---------------------------------------------------------------------------

# Recipes whose step is a function of its inputs and state alone (no stochastic
# rounding: NVFP4's random stream would be replayed as captured).
GRAPH_RECIPES: dict[str, Callable[[], lqt.Recipe]] = {
    "fp8_delayed": lambda: lqt.DelayedScaling(amax_history_len=8),
    "fp8_current": lqt.Float8CurrentScaling,
    "fp8_block": lqt.Float8BlockScaling,
    "mxfp8": lqt.MXFP8BlockScaling,
    "nvfp4_rn": lambda: lqt.NVFP4BlockScaling(disable_rht=True, disable_stochastic_rounding=True),
    # The RHT's columnwise copies: their transformed input's room is lent by
    # the host from the caller's allocator during a capture.
    "nvfp4_rht": lambda: lqt.NVFP4BlockScaling(disable_stochastic_rounding=True),
}
# The model's dtype per kind (float32 otherwise): the RHT takes BF16 input
# (spec §5.5).
GRAPH_DTYPES = {"nvfp4_rht": torch.bfloat16}

# cudaGraphNodeType
_NODE_KERNEL, _NODE_MEM_ALLOC, _NODE_MEM_FREE = 0, 10, 11


def _cudart() -> Any:
    """The CUDA runtime torch loaded (its path from /proc/self/maps), or None."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                if "libcudart.so" in line:
                    return ctypes.CDLL(line.split()[-1])
    except OSError:
        pass
    return None


def graph_node_types(g: torch.cuda.CUDAGraph) -> Counter[int] | None:
    """How many nodes of each cudaGraphNodeType the captured graph holds (it must
    be made with keep_graph=True), or None without a CUDA runtime to ask."""
    rt = _cudart()
    if rt is None:
        return None
    graph = ctypes.c_void_p(int(g.raw_cuda_graph()))
    n = ctypes.c_size_t(0)
    assert rt.cudaGraphGetNodes(graph, None, ctypes.byref(n)) == 0
    nodes = (ctypes.c_void_p * max(n.value, 1))()
    assert rt.cudaGraphGetNodes(graph, nodes, ctypes.byref(n)) == 0
    out: Counter[int] = Counter()
    for i in range(n.value):
        t = ctypes.c_int(-1)
        assert rt.cudaGraphNodeGetType(ctypes.c_void_p(nodes[i]), ctypes.byref(t)) == 0
        out[t.value] += 1
    return out


def train_step(model: torch.nn.Module, params: list[torch.nn.Parameter], recipe: lqt.Recipe,
               x: torch.Tensor) -> torch.Tensor:
    """Forward, backward and an in-place SGD update (so that the next step's
    forward re-quantizes every weight), on the current stream."""
    with lqt.autocast(recipe=recipe):
        y: torch.Tensor = model(x)
    (y.square().sum() * 1e-3).backward()
    with torch.no_grad():
        for p in params:
            p.sub_(0.05 * p.grad)
    return y


def capture_step(kind: str, warmup: int = 2) -> tuple[Any, ...]:
    """An eager model and a copy whose training step is captured in a CUDA graph
    after `warmup` eager steps (on the capture stream, the eager model the same
    steps on the default one); returns (recipe, eager, graphed, graph, static x,
    static y, inputs for the replays)."""
    recipe = GRAPH_RECIPES[kind]()
    dtype = GRAPH_DTYPES.get(kind, torch.float32)
    torch.manual_seed(0)
    eager = Block(device="cuda").to(dtype)
    graphed = copy.deepcopy(eager)
    ep, gp = list(eager.parameters()), list(graphed.parameters())
    xs = [(torch.randn(sum(SPLITS), 64, device="cuda") * (1 + 0.25 * i)).to(dtype) for i in range(warmup + 3)]
    static_x = torch.empty_like(xs[0])
    # The warm-up runs on a side stream, the capture stream, as torch's CUDA
    # graph docs ask (state made lazily on first use is made outside the
    # capture). The library's GEMMs no longer need it: a capture on a stream
    # that ran none works too (test_cuda_graph_gemm_on_a_stream_that_ran_no_gemm).
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for i in range(warmup):
            for p in gp:
                p.grad = None
            static_x.copy_(xs[i])
            call_or_skip(lambda: train_step(graphed, gp, recipe, static_x), "cuda")
    torch.cuda.current_stream().wait_stream(s)
    for i in range(warmup):
        for p in ep:
            p.grad = None
        train_step(eager, ep, recipe, xs[i])
    gc.collect()
    assert lqt.live_contexts() == 0  # no context from the warm-up is freed inside the capture
    for p in gp:
        p.grad = None  # the captured backward allocates the gradients from the graph's pool
    g = torch.cuda.CUDAGraph(keep_graph=True)
    # capture_error_mode "global" (torch's default): any host synchronisation or
    # non-capturable call (cudaMalloc, cudaStreamSynchronize, a copy to the
    # host) in any thread during the capture makes it fail.
    with torch.cuda.graph(g, stream=s, capture_error_mode="global"):
        static_y = train_step(graphed, gp, recipe, static_x)
    g.instantiate()
    return recipe, eager, graphed, g, static_x, static_y, xs[warmup:]


@cuda_only
@pytest.mark.parametrize("kind", sorted(GRAPH_RECIPES))
def test_cuda_graph_training_step_replays_bit_identical(kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A training step (forward, backward, SGD update) of two Linears and a
    GroupedLinear captured with torch.cuda.graph and replayed on new inputs
    equals the same eager steps bit for bit: outputs, every gradient, the updated
    weights, and (delayed scaling) the scales, which the graph updates on the
    GPU, step after step.

    What the library does inside the capture: the linear ops quantize X, W and dY
    with kernels on torch's current stream, the weights in place into their
    cached quantized copies (the step's update re-quantizes them each replay),
    and run their GEMMs through cuBLASLt on a workspace made before the capture;
    delayed scaling keeps its scales and amax histories in device memory and
    updates them with a kernel (libquant.torch asks for the update without the
    amaxes when no process group reduces them, so nothing is read back). There
    is no host synchronisation: the capture runs in "global" mode, which fails on
    one. Allocations: the library's buffers (quantized X and dY, what a forward
    keeps for backward, and the GEMMs' scratch and cuBLASLt workspace, lent to
    the plugin by the host) come from torch's caching allocator during the
    capture (test_cuda_graph_library_buffers_come_from_torchs_pool); any graph
    memory node must be freed inside the step (checked below: as many frees as
    allocations, so a replay returns all it takes)."""
    recipe, eager, graphed, g, static_x, static_y, xs = capture_step(kind)
    ep, gp = list(eager.parameters()), list(graphed.parameters())
    for i, x in enumerate(xs):
        static_x.copy_(x)
        g.replay()
        for p in ep:
            p.grad = None
        y = train_step(eager, ep, recipe, x)
        torch.cuda.synchronize()
        assert torch.equal(static_y, y), "replay %d: output differs from the eager step" % i
        for (n, pe), pg in zip(eager.named_parameters(), gp):
            assert torch.equal(pg.grad, pe.grad), "replay %d: grad %s differs" % (i, n)
            assert torch.equal(pg, pe), "replay %d: updated %s differs" % (i, n)
    if kind == "fp8_delayed":  # the scales moved on, on the GPU, as the eager model's did
        from test_torch_checkpoint import delayed_states

        de, dg = delayed_states(eager), delayed_states(graphed)
        assert de.keys() == dg.keys() and de
        assert all(torch.equal(de[k], dg[k]) for k in de if k.endswith("/scale"))
    types = graph_node_types(g)
    if types is not None:
        with capsys.disabled():
            print("\ncuda graph %s: %d nodes: %d kernels, %d memory allocations, %d frees" % (
                kind, sum(types.values()), types[_NODE_KERNEL], types[_NODE_MEM_ALLOC], types[_NODE_MEM_FREE]))
        assert types[_NODE_KERNEL] > 0
        assert types[_NODE_MEM_ALLOC] == types[_NODE_MEM_FREE], dict(types)


@cuda_only
@pytest.mark.parametrize("kind", ["fp8_current", "mxfp8", "nvfp4_rht"])
def test_cuda_graph_library_buffers_come_from_torchs_pool(kind: str, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #20 item 7, "no allocation inside the library during capture": while
    a capture is under way, libquant.torch hands the library torch's caching
    allocator (quant_set_device_allocator, _torch.torch_allocator_if_capturing),
    so the quantized operands, the contexts' buffers, the dequantized copies and
    the GEMMs' scratch (the host lends the plugin a workspace from that allocator:
    the expanded MX/NVFP4 operands, the FP32 sums and cuBLASLt's workspace) and
    an NVFP4 quantize's room for the RHT's transformed input (lent the same way) come
    from the capture's private pool, which torch reserves outside the graph: no
    graph memory nodes at all. The same step captured without the hook (the CUDA
    plugin's cudaMallocAsync, recorded as graph memory nodes) has some."""
    from libquant.torch import _ops

    with_hook = graph_node_types(capture_step(kind)[3])
    if with_hook is None:
        pytest.skip("no CUDA runtime found in the process to read the graph's nodes")

    class Off:
        def __init__(self, _t: torch.Tensor) -> None:
            pass

        def __enter__(self) -> None:
            pass

        def __exit__(self, *exc: Any) -> None:
            pass

    monkeypatch.setattr(_ops, "torch_allocator_if_capturing", Off)
    without = graph_node_types(capture_step(kind)[3])
    assert without is not None
    with capsys.disabled():
        print("\ncuda graph %s: library allocations inside the capture: %d with torch's allocator, %d without"
              % (kind, with_hook[_NODE_MEM_ALLOC], without[_NODE_MEM_ALLOC]))
    assert with_hook[_NODE_MEM_ALLOC] == 0 and with_hook[_NODE_MEM_FREE] == 0, dict(with_hook)
    assert without[_NODE_MEM_ALLOC] > 0, dict(without)


@cuda_only
@pytest.mark.parametrize("exact", [True, False])
def test_cuda_graph_gemm_on_a_stream_that_ran_no_gemm(exact: bool, capsys: pytest.CaptureFixture[str]) -> None:
    """libquant.gemm captured in a CUDA graph on a fresh stream, with no GEMM
    run on it before and no workspace lent by the host: the CUDA plugin used to
    make a stream's cuBLASLt workspace with cudaMalloc on its first GEMM, which a
    capture in "global" mode refuses (the capture ended in
    cudaErrorStreamCaptureInvalidated); inside a capture it now takes the
    algorithm's workspace from its pool in stream order. MXFP8 operands at
    M = N = 128 run the BF16 path (cuBLASLt) by default and with exact=True
    (cuda/gemm.cu fused_faster); the replays equal the eager GEMM bit for bit."""
    gen = torch.Generator(device="cuda").manual_seed(3)
    q = lq.Quantizer("mxfp8", usage="rowwise")
    a = q.quantize(torch.randn(128, 256, generator=gen, device="cuda").to(torch.bfloat16))
    b = q.quantize(torch.randn(128, 256, generator=gen, device="cuda").to(torch.bfloat16))
    ref = lq.gemm(a, b, trans_b=True, exact=exact)
    out = torch.empty_like(ref)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(g, stream=s, capture_error_mode="global"):
        lq.gemm(a, b, trans_b=True, out=out, exact=exact)
    g.instantiate()
    for _ in range(2):
        out.zero_()
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, ref)
    types = graph_node_types(g)
    if types is not None:
        with capsys.disabled():
            print("\ncuda graph gemm exact=%s: %d kernels, %d memory allocations, %d frees" % (
                exact, types[_NODE_KERNEL], types[_NODE_MEM_ALLOC], types[_NODE_MEM_FREE]))
        assert types[_NODE_MEM_ALLOC] == types[_NODE_MEM_FREE], dict(types)


# ---------------------------------------------------------------------------
# Module.to / .cuda() / .cpu() of quantized-only weights
# ---------------------------------------------------------------------------


def qbytes(m: Any) -> list[dict[tuple[str, str], bytes]]:
    return [{(d, k): bytes(np.asarray(b.torch().contiguous().view(torch.uint8).reshape(-1).cpu()))
             for d, k, b in qt.buffers()} for qt in m.quantized_weights()]


def test_to_dtype_keeps_quantized_bytes_and_placeholders() -> None:
    """On the CPU: .to(the same device) moves nothing; a dtype change reaches the
    placeholders (the weight gradient's dtype) and the bias, never the quantized
    bytes, and no placeholder is made dense; the Parameter objects stay."""
    torch.manual_seed(0)
    m = lqt.GroupedLinear(3, 64, 32, recipe=lqt.MXFP8BlockScaling(), quantized_weight=True)
    before, params = qbytes(m), list(m.parameters())
    qts = m.quantized_weights()
    assert m.to("cpu") is m and m.quantized_weights() == qts  # the same QTensors: nothing moved
    m.to(torch.bfloat16)
    assert list(m.parameters()) == params and qbytes(m) == before
    for w in m.weights():
        assert w.dtype == torch.bfloat16 and w.untyped_storage().nbytes() == w.element_size()
    assert all(b.dtype == torch.bfloat16 for b in m.biases())
    assert m.quantized_weights() == qts
    y = m(torch.randn(96, 64, dtype=torch.bfloat16, requires_grad=True), [32, 32, 32])
    y.float().sum().backward()
    assert m.weight0.grad is not None and m.weight0.grad.dtype == torch.bfloat16


@cuda_only
@pytest.mark.parametrize("kind", ["fp8_current", "mxfp8", "nvfp4_no_rht", "hybrid"])
def test_quantized_weights_move_between_devices_bit_for_bit(kind: str) -> None:
    """.cuda() then .cpu() of a model holding its weights only quantized: every
    buffer of every quantized weight moves byte for byte (uint8 copies), the
    QTensors are assembled again over the moved buffers on the new device, the
    placeholders stay one element and the same Parameters; the moved model
    computes on CUDA what a model built there with the same weights computes."""
    from test_torch_modules import Net, data
    from test_torch_qcheckpoint import MAKERS

    make = MAKERS["hybrid_mxfp8_nvfp4" if kind == "hybrid" else kind]
    recipe = make()
    torch.manual_seed(0)
    with lqt.quantized_model_init(recipe=recipe):
        a = Net()
    before = {m.lq_name: qbytes(m) for m in a.modules() if isinstance(m, (lqt.Linear, lqt.GroupedLinear))}
    params = list(a.parameters())
    a.cuda()
    assert list(a.parameters()) == params
    for m in a.modules():
        if isinstance(m, (lqt.Linear, lqt.GroupedLinear)):
            assert qbytes(m) == before[m.lq_name], m.lq_name
            for qt in m.quantized_weights():
                assert qt.device.device_type == lq.Device("cuda:0").device_type
                assert all(b.torch().is_cuda for _, _, b in qt.buffers())
            for name in m._lq_weight_names():
                p = getattr(m, name)
                assert p.is_cuda and p.untyped_storage().nbytes() == p.element_size()
    # the same weights quantized on CUDA give the same bytes (the quantize is
    # bit-exact across devices) and the same outputs: a model built on CUDA that
    # loads the initial weights in high precision (quantized there on loading)
    torch.manual_seed(0)
    ref = Net()  # a's initial weights and biases (the same seed, on the CPU)
    with lqt.quantized_model_init(recipe=recipe):
        b = call_or_skip(lambda: Net(device="cuda"), "cuda")
    with pytest.warns(UserWarning, match="quantized on loading"):
        b.load_state_dict(ref.state_dict())
    for ma, mb in zip(a.modules(), b.modules()):
        if isinstance(ma, (lqt.Linear, lqt.GroupedLinear)):
            assert qbytes(ma) == qbytes(mb), ma.lq_name
    x, t = data("cuda")
    with lqt.autocast(recipe=recipe):
        ya = call_or_skip(lambda: a(x), "cuda")
    with lqt.autocast(recipe=recipe):
        yb = b(x)
    assert ya.is_cuda and torch.equal(ya, yb)
    a.cpu()
    for m in a.modules():
        if isinstance(m, (lqt.Linear, lqt.GroupedLinear)):
            assert qbytes(m) == before[m.lq_name], m.lq_name
            assert all(not b_.torch().is_cuda for qt in m.quantized_weights() for _, _, b_ in qt.buffers())
    assert a.fc1.weight.device.type == "cpu" and math.prod(a.fc1.weight.shape) == 128 * 64
