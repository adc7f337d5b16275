"""torch tensors in and typed torch views out, on every device in conftest.DEVICES
(cpu; cuda where torch sees a GPU and libquant has its CUDA plugin)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import libquant as lq  # noqa: E402

FP8 = {"float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2,
       "float8_e8m0fnu": torch.float8_e8m0fnu, "float32": torch.float32}


def gen(device: str) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(7)
    return g


@pytest.mark.parametrize("fmt,element", [("fp8", "e4m3"), ("fp8", "e5m2"), ("mxfp8", "e4m3"), ("mxfp4", 0),
                                         ("nvfp4", 0), ("fp8_block", 0)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_torch_quantize_typed_views(device: str, fmt: str, element: object, dtype: torch.dtype) -> None:
    if fmt == "nvfp4" and dtype == torch.float16:
        dtype = torch.bfloat16
    x = torch.randn(64, 128, generator=gen(device), device=device).to(dtype)
    qt = lq.Quantizer(fmt, element=element).quantize(x)  # type: ignore[arg-type]
    assert qt.device == lq.Device(device if device == "cpu" else "cuda:%d" % x.device.index)
    for direction, kind, buf in qt.buffers():
        t = buf.torch()
        assert t.device == x.device
        assert tuple(t.shape) == buf.shape
        if buf.packed_fp4:
            assert t.dtype == getattr(torch, "float4_e2m1fn_x2", torch.uint8)
        else:
            assert t.dtype == FP8[buf.dtype]
        assert t.data_ptr() == buf.ptr  # zero-copy
        d = torch.from_dlpack(buf)
        assert d.data_ptr() == buf.ptr and (d.dtype == t.dtype or buf.packed_fp4)
    y = qt.dequantize()
    assert isinstance(y, torch.Tensor) and y.device == x.device and y.dtype == torch.float32
    yb = qt.dequantize(dtype=torch.bfloat16)
    assert yb.dtype == torch.bfloat16
    # the same bytes as NumPy input on the CPU (GPU bytes equal CPU bytes, cuda/gputest)
    ref = lq.Quantizer(fmt, element=element).quantize(x.cpu().float().numpy() if dtype == torch.float32  # type: ignore[arg-type]
                                                       else x.cpu())
    for (_, _, a), (_, _, b) in zip(qt.buffers(), ref.buffers()):
        assert torch.equal(a.torch().view(torch.uint8).cpu() if a.torch().element_size() == 1
                           else a.torch().cpu(), b.torch().view(torch.uint8) if b.torch().element_size() == 1
                           else b.torch())


def test_torch_rejects_noncontiguous_and_bad_dtype(device: str) -> None:
    q = lq.Quantizer("fp8")
    x = torch.randn(32, 48, device=device)
    with pytest.raises(lq.UnsupportedError, match="not row-major contiguous"):
        q.quantize(x.t())
    with pytest.raises(lq.InvalidArgumentError, match="dtype float64"):
        q.quantize(x.double())
    with pytest.raises(lq.InvalidArgumentError, match="ndim 0"):
        q.quantize(torch.tensor(1.0, device=device))


def test_torch_quantize_into_caller_buffers(device: str) -> None:
    q = lq.Quantizer("mxfp8")
    x = torch.randn(64, 64, device=device)
    qt = q.empty(x.shape, device=device, torch=True)
    q.quantize_into(x, qt)
    ref = q.quantize(x)
    for (_, _, a), (_, _, b) in zip(qt.buffers(), ref.buffers()):
        assert torch.equal(a.torch().view(torch.uint8), b.torch().view(torch.uint8))
    assert torch.equal(qt.dequantize(), ref.dequantize())


def test_torch_gemm_and_amax(device: str) -> None:
    if device == "cuda":
        sup = lq.gemm_support("mxfp8", "nvfp4", "cuda:0")
        if sup.level == "unsupported":
            pytest.skip("libquant: mxfp8 x nvfp4 on cuda: " + sup.reason)
    x = torch.randn(64, 128, device=device)
    w = torch.randn(64, 128, device=device)
    a = lq.Quantizer("mxfp8").quantize(x)
    b = lq.Quantizer("nvfp4").quantize(w)
    try:
        d = lq.gemm(a, b, trans_b=True)
    except lq.DeviceUnavailableError as e:
        pytest.skip("libquant: %s" % e.message)
    assert isinstance(d, torch.Tensor) and d.shape == (64, 64) and d.device == x.device
    ref = a.dequantize().double() @ b.dequantize().double().T
    k = 128
    u = 2.0**-24
    bound = (k + 8) * u / (1 - (k + 8) * u) * (a.dequantize().double().abs() @ b.dequantize().double().abs().T)
    assert bool(((d.double() - ref).abs() <= bound + u * ref.abs()).all())
    amax = lq.Quantizer("fp8").compute_amax(x)
    assert isinstance(amax, torch.Tensor) and amax.device == x.device
    assert float(amax[0]) == float(x.abs().max())


def test_torch_stream_is_current_stream(device: str) -> None:
    if device != "cuda":
        t = lq._dlpack.as_dltensor(torch.zeros(4, 4))
        assert t.stream is None
        return
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        t = lq._dlpack.as_dltensor(torch.zeros(4, 4, device="cuda"))
        assert t.stream == s.cuda_stream
        x = torch.randn(256, 256, device="cuda")
        qt = lq.Quantizer("fp8").quantize(x)
        y = qt.dequantize()
    s.synchronize()
    assert float((y - x).abs().max()) <= float(x.abs().max()) / 16


def test_torch_linear(device: str) -> None:
    x = torch.randn(32, 64, device=device)
    w = torch.randn(64, 64, device=device)
    layer = lq.Linear(lq.Recipe.preset("mxfp8"), name="fc1")
    y, ctx = layer.forward(x, w, input_requires_grad=True, weight_requires_grad=True)
    assert isinstance(y, torch.Tensor) and y.shape == (32, 64)
    assert ctx is not None
    gi, gw, gb = ctx.backward(torch.randn(32, 64, device=device), grad_input=True, grad_weight=True)
    assert isinstance(gi, torch.Tensor) and gw.shape == (64, 64) and gb is None


def test_numpy_and_torch_share_cpu_views() -> None:
    qt = lq.Quantizer("fp8").quantize(torch.randn(16, 16))
    t = qt.rowwise.data.torch()  # type: ignore[union-attr]
    n = qt.rowwise.data.numpy()  # type: ignore[union-attr]
    assert t.data_ptr() == n.ctypes.data
    assert np.array_equal(t.view(torch.uint8).numpy(), n.view(np.uint8))
