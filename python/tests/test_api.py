"""The Pythonic API over every feature of quant.h, on NumPy arrays (CPU).

Exact checks decode the stored codes with ml_dtypes (code nobody here wrote) and
compare; GEMM results are checked against the float64 product of the dequantized
operands within the FP32 accumulation bound derived in gemm_bound below.
"""

from __future__ import annotations

import ctypes
import gc
import subprocess
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import libquant as lq
from conftest import BUILD, ROOT

RNG = np.random.default_rng(1234)
FORMATS = ["fp8", "fp8_block", "mxfp8", "mxfp4", "nvfp4"]


def randn(*shape: int, dtype: Any = np.float32) -> np.ndarray[Any, Any]:
    return RNG.standard_normal(shape).astype(dtype)


# ---------------------------------------------------------------------------
# version, errors
# ---------------------------------------------------------------------------


def test_version_and_abi() -> None:
    h = (ROOT / "include" / "quant.h").read_text()
    want = ".".join(line.split()[2] for line in h.splitlines()
                    if line.startswith(("#define QUANT_VERSION_MAJOR", "#define QUANT_VERSION_MINOR",
                                        "#define QUANT_VERSION_PATCH")))
    assert lq.version() == want
    assert lq.abi_version() == 1
    assert lq.status_string(7) == "QUANT_ERROR_STATE"
    assert lq.status_string(999) == "QUANT_ERROR_UNKNOWN_STATUS"


@pytest.mark.parametrize("kw,cls,text", [
    (dict(element="e2m1"), lq.InvalidArgumentError, "config.element"),
    (dict(scaling=3), lq.InvalidArgumentError, "config.scaling"),
    (dict(rht="default"), lq.InvalidArgumentError, "config.rht"),
    (dict(usage=4), lq.InvalidArgumentError, "usage"),
    (dict(dtype=(99, 8)), lq.UnsupportedError, "config.dtype"),
])
def test_quantizer_bad_options_raise_library_message(kw: dict[str, Any], cls: type, text: str) -> None:
    with pytest.raises(cls) as e:
        lq.Quantizer("fp8", **kw)
    assert text in str(e.value) and text in e.value.message
    assert isinstance(e.value, lq.LibquantError)
    assert e.value.status_name.startswith("QUANT_ERROR_")


def test_quantizer_unknown_format_and_option_names() -> None:
    with pytest.raises(lq.UnsupportedError, match='"fp9" is not registered'):
        lq.Quantizer("fp9")
    with pytest.raises(TypeError, match="not_an_option"):
        lq.Quantizer("fp8", not_an_option=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        lq.Quantizer("fp8", "e4m3")  # type: ignore[misc]  # options are keyword-only
    with pytest.raises(lq.InvalidArgumentError, match="element 'e9m9'"):
        lq.Quantizer("fp8", element="e9m9")


def test_error_classes_per_status() -> None:
    from libquant._errors import ERRORS, error_for

    assert sorted(ERRORS) == list(range(1, 11))
    assert len(set(ERRORS.values())) == 10
    e = error_for(42, "x")
    assert type(e) is lq.LibquantError and e.status == 42
    assert issubclass(lq.InvalidArgumentError, ValueError)
    assert issubclass(lq.OutOfMemoryError, MemoryError)


# ---------------------------------------------------------------------------
# quantizer: usage, layout
# ---------------------------------------------------------------------------


def test_usage_roundtrip() -> None:
    q = lq.Quantizer("fp8")
    assert q.usage == lq.BOTH
    q.usage = "columnwise"
    assert q.usage == lq.COLUMNWISE
    q.set_usage(lq.ROWWISE)
    assert q.usage == 1
    with pytest.raises(lq.InvalidArgumentError, match="usage"):
        q.usage = 0
    with pytest.raises(lq.InvalidArgumentError, match="usage"):
        q.usage = 8
    assert lq.Quantizer("fp8", usage="rowwise").usage == 1


@pytest.mark.parametrize("fmt", FORMATS)
def test_layout_matches_views(fmt: str) -> None:
    q = lq.Quantizer(fmt)
    x = randn(64, 96)
    descs = q.layout(x.shape)
    qt = q.quantize(x)
    got = [(d, k, b.dtype, b.shape) for d, k, b in qt.buffers()]
    assert got == [(d.direction, d.kind, d.dtype, d.shape) for d in descs]
    for d, (_, _, b) in zip(descs, qt.buffers()):
        assert b.nbytes == d.nbytes


def test_layout_errors() -> None:
    q = lq.Quantizer("fp8")
    with pytest.raises(lq.InvalidArgumentError, match="negative"):
        q.layout((-1, 8))
    with pytest.raises(lq.InvalidArgumentError, match="overflows"):
        q.layout((2**62, 8))
    with pytest.raises(lq.InvalidArgumentError, match="ndim"):
        q.layout(())
    with pytest.raises(lq.InvalidArgumentError, match="ndim"):
        q.layout((1,) * 9)


# ---------------------------------------------------------------------------
# quantize / views / dequantize
# ---------------------------------------------------------------------------


def fp8_scale(amax: float, fmax: float) -> np.float32:
    """spec §3.2: scale = fl32(fp8_max / amax) (IEEE RN division)."""
    return np.float32(fmax) / np.float32(amax)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.float16])
def test_fp8_views_are_typed_zero_copy_and_exact(dtype: Any) -> None:
    x = randn(48, 40, dtype=dtype)
    qt = lq.Quantizer("fp8").quantize(x)
    rw = qt.rowwise
    cw = qt.columnwise
    assert rw is not None and cw is not None
    assert rw.format == "fp8" and cw.format == "fp8"
    data = rw.data.numpy()
    assert data.dtype == ml_dtypes.float8_e4m3fn and data.shape == (48, 40)
    assert cw.data.numpy().shape == (40, 48)
    np.testing.assert_array_equal(cw.data.numpy().view(np.uint8), data.view(np.uint8).T)
    amax = np.abs(x.astype(np.float32)).max()
    assert rw.amax is not None and rw.scale_inv is not None
    assert rw.amax.numpy()[0] == amax
    scale = fp8_scale(amax, 448)
    assert rw.scale_inv.numpy()[0] == np.float32(1) / scale  # spec §3.2: fl32(1/scale)
    # zero-copy: the view's memory is the library's, and two views share it
    assert data.__array_interface__["data"][0] == rw.data.ptr
    again = qt.rowwise.data.numpy()  # type: ignore[union-attr]
    assert np.shares_memory(data, again)
    # dequantize is code * scale_inv, exactly
    y = qt.dequantize()
    assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == x.shape
    np.testing.assert_array_equal(y, data.astype(np.float32) * rw.scale_inv.numpy()[0])
    yb = qt.dequantize(direction="columnwise", dtype=ml_dtypes.bfloat16)
    assert yb.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(yb, y.astype(ml_dtypes.bfloat16))


def test_views_keep_the_tensor_alive() -> None:
    x = randn(32, 32)
    qt = lq.Quantizer("mxfp8").quantize(x)
    view = qt.rowwise.data.numpy()  # type: ignore[union-attr]
    want = view.copy()
    del qt
    gc.collect()
    for _ in range(20):  # churn the allocator: a freed buffer would change
        lq.Quantizer("mxfp8").quantize(randn(32, 32) * 100)
    np.testing.assert_array_equal(view.view(np.uint8), want.view(np.uint8))


def test_mxfp8_dequantize_exact_and_scales() -> None:
    x = randn(64, 128)
    qt = lq.Quantizer("mxfp8", element="e5m2").quantize(x)
    rw = qt.rowwise
    assert rw is not None and rw.scale_inv is not None
    d = rw.data.numpy()
    assert d.dtype == ml_dtypes.float8_e5m2
    s = rw.scale_inv.numpy()
    assert s.dtype == ml_dtypes.float8_e8m0fnu and s.shape == (128, 4)
    scales = s[:64, :4].astype(np.float32)
    want = d.astype(np.float32) * np.repeat(scales, 32, axis=1)
    np.testing.assert_array_equal(qt.dequantize(), want)
    assert rw.amax is None


@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4"])
def test_packed_fp4_unpack(fmt: str) -> None:
    x = randn(32, 64)
    qt = lq.Quantizer(fmt, usage="rowwise").quantize(x)
    assert qt.columnwise is None
    b = qt.rowwise.data  # type: ignore[union-attr]
    assert b.packed_fp4 and b.dtype == "uint8" and b.shape == (32, 32)
    vals = b.unpack_fp4()
    assert vals.dtype == ml_dtypes.float4_e2m1fn and vals.shape == (32, 64)
    np.testing.assert_array_equal(lq.pack_fp4(vals), b.numpy())
    # values decode as e2m1 * block scale (* global factor for nvfp4): recompute exactly
    s = qt.rowwise.scale_inv.numpy().astype(np.float32)  # type: ignore[union-attr]
    block = 32 if fmt == "mxfp4" else 16
    want = vals.astype(np.float32) * np.repeat(s[:32, : 64 // block], block, axis=1)
    if fmt == "nvfp4":
        amax = qt.rowwise.amax.numpy()[0]  # type: ignore[union-attr]
        # spec §5.2 dequantize: final_scale = fl32(fl32(S_dec_b * amax) * fl32(1/(6*448)))
        fs = (np.repeat(s[:32, :4], 16, axis=1) * amax).astype(np.float32) * np.float32(1 / 2688)
        want = vals.astype(np.float32) * fs
    np.testing.assert_array_equal(qt.dequantize(), want)
    with pytest.raises(lq.UnsupportedError, match="not packed FP4"):
        qt.rowwise.scale_inv.unpack_fp4()  # type: ignore[union-attr]


def test_dequantize_errors_name_the_argument() -> None:
    qt = lq.Quantizer("fp8").quantize(randn(8, 16))
    with pytest.raises(lq.InvalidArgumentError, match="out: shape"):
        qt.dequantize(out=np.empty(100, np.float32))
    with pytest.raises(lq.InvalidArgumentError, match="out: dtype uint8"):
        qt.dequantize(out=np.empty((8, 16), np.uint8))
    with pytest.raises(lq.InvalidArgumentError, match="direction"):
        qt.dequantize(direction=9)
    qt.update_usage("rowwise")
    with pytest.raises(lq.StateError, match="no columnwise data"):
        qt.dequantize(direction="columnwise")


def test_multi_dim_input_is_its_2d_view() -> None:
    x = randn(2, 3, 32)
    qt = lq.Quantizer("fp8").quantize(x)
    assert qt.shape == (2, 3, 32)
    assert qt.rowwise.data.shape == (6, 32)  # type: ignore[union-attr]
    assert qt.dequantize().shape == (2, 3, 32)


def test_quantize_usage_override_restores_quantizer_usage() -> None:
    q = lq.Quantizer("fp8")
    qt = q.quantize(randn(16, 16), usage="columnwise")
    assert qt.formats == ("", "fp8") and qt.rowwise is None
    assert q.usage == lq.BOTH
    assert lq.quantize(randn(16, 16), "fp8", usage="rowwise", element="e5m2").formats == ("fp8", "")


def test_quantize_into_reuses_buffers_and_amax_option() -> None:
    q = lq.Quantizer("fp8")
    x = randn(48, 40)
    amax = q.compute_amax(x)
    assert isinstance(amax, np.ndarray) and amax.dtype == np.float32
    np.testing.assert_array_equal(amax, [np.abs(x).max()] * 2)
    qt = q.quantize(x, amax=amax * 2)
    assert qt.rowwise.amax.numpy()[0] == amax[0] * 2  # type: ignore[union-attr]
    ptr = qt.rowwise.data.ptr  # type: ignore[union-attr]
    x2 = x.copy()
    x2[0, 0] = 1000
    assert lq.quantize_into(x2, q, qt) is qt
    assert qt.rowwise.data.ptr == ptr  # type: ignore[union-attr]
    assert qt.rowwise.amax.numpy()[0] == 1000  # type: ignore[union-attr]
    with pytest.raises(lq.InvalidArgumentError, match="does not match"):
        q.quantize_into(randn(40, 48), qt)
    with pytest.raises(lq.InvalidArgumentError, match="amax: want float32 with 2"):
        q.compute_amax(x, out=np.empty(3, np.float32))


def test_empty_and_from_buffers_use_caller_memory() -> None:
    q = lq.Quantizer("nvfp4")
    x = randn(32, 64)
    qt = q.empty(x.shape)
    q.quantize_into(x, qt)
    ref = q.quantize(x)
    for (d1, k1, b1), (d2, k2, b2) in zip(qt.buffers(), ref.buffers()):
        assert (d1, k1) == (d2, k2)
        np.testing.assert_array_equal(b1.numpy().view(np.uint8), b2.numpy().view(np.uint8))
    # typed arrays in layout order
    q8 = lq.Quantizer("fp8")
    bufs = [np.zeros(d.shape, lq._dlpack.numpy_dtype(*d.dl_dtype)) for d in q8.layout(x.shape)]
    t = q8.from_buffers(x.shape, bufs)
    q8.quantize_into(x, t)
    assert bufs[2][0] == np.abs(x).max()  # the caller's amax array holds the result
    with pytest.raises(lq.InvalidArgumentError, match="buffers: got 5"):
        q8.from_buffers(x.shape, bufs[:5])
    with pytest.raises(lq.InvalidArgumentError, match=r"buffers\[3\]"):
        q8.from_buffers(x.shape, bufs[:3] + [np.zeros(x.shape, ml_dtypes.float8_e4m3fn)] + bufs[4:])


def test_update_usage_persistent_and_swizzle() -> None:
    q = lq.Quantizer("fp8")
    qt = q.quantize(randn(16, 32))
    qt.update_usage("rowwise")
    assert qt.usage == lq.ROWWISE
    lq.update_usage(qt, "both")  # fp8 derives columnwise from rowwise
    assert qt.usage == lq.BOTH
    qt.update_usage("columnwise")
    with pytest.raises(lq.StateError, match="cannot derive rowwise"):
        qt.update_usage("rowwise")
    with pytest.raises(lq.UnsupportedError, match="no GEMM-swizzled"):
        qt.set_gemm_swizzled_scales(True)
    p = q.quantize(randn(16, 32), persistent=True)
    assert p.persistent
    with pytest.raises(lq.StateError):
        p.update_usage("rowwise")
    p.persistent = False
    p.update_usage("rowwise")
    xm = randn(256, 256)
    m = lq.Quantizer("mxfp8").quantize(xm)
    compact = m.rowwise.scale_inv.numpy().copy()  # type: ignore[union-attr]
    m.set_gemm_swizzled_scales(True)
    sw = lq.Quantizer("mxfp8", gemm_swizzled_scales=True).quantize(xm)
    assert not np.array_equal(compact.view(np.uint8), sw.rowwise.scale_inv.numpy().view(np.uint8))  # type: ignore[union-attr]
    np.testing.assert_array_equal(m.rowwise.scale_inv.numpy().view(np.uint8),  # type: ignore[union-attr]
                                  sw.rowwise.scale_inv.numpy().view(np.uint8))  # type: ignore[union-attr]
    m.set_gemm_swizzled_scales(False)
    np.testing.assert_array_equal(m.rowwise.scale_inv.numpy().view(np.uint8), compact.view(np.uint8))  # type: ignore[union-attr]


def test_hybrid_and_identity() -> None:
    row = lq.Quantizer("mxfp8")
    col = lq.Quantizer("nvfp4")
    h = lq.Quantizer.hybrid(row, col)
    row.close()
    col.close()  # the hybrid keeps its own references
    x = randn(64, 64)
    qt = h.quantize(x)
    assert qt.formats == ("mxfp8", "nvfp4")
    assert qt.rowwise.data.dtype == "float8_e4m3fn"  # type: ignore[union-attr]
    assert qt.columnwise.data.packed_fp4  # type: ignore[union-attr]
    qt.update_usage("rowwise")  # a hybrid tensor can drop a direction ...
    with pytest.raises(lq.StateError):
        qt.update_usage("both")  # ... but never derive one
    h2 = lq.Quantizer.hybrid(lq.Quantizer("mxfp8"), lq.Quantizer("nvfp4"),
                             columnwise_source="rowwise_dequantized")
    assert h2.quantize(x).formats == ("mxfp8", "nvfp4")
    with pytest.raises(lq.InvalidArgumentError, match="columnwise_source"):
        lq.Quantizer.hybrid(lq.Quantizer("fp8"), lq.Quantizer("fp8"), columnwise_source="sideways")
    ident = lq.Quantizer("identity")
    it = ident.quantize(x)
    assert it.formats == ("identity", "identity")
    np.testing.assert_array_equal(it.rowwise.data.numpy(), x)  # type: ignore[union-attr]
    ib = lq.Quantizer("identity", dtype="bfloat16").quantize(x)
    assert ib.rowwise.data.numpy().dtype == ml_dtypes.bfloat16  # type: ignore[union-attr]
    np.testing.assert_array_equal(ib.rowwise.data.numpy(), x.astype(ml_dtypes.bfloat16))  # type: ignore[union-attr]


def test_delayed_scaling_state_and_update() -> None:
    q = lq.Quantizer("fp8", scaling="delayed", amax_history_len=4)
    scale, hist = q.delayed_scaling_state()
    s, h = scale.numpy(), hist.numpy()
    assert s.shape == (1,) and h.shape == (4,) and s[0] == 1.0 and h[0] == 0.0
    x = randn(16, 16)
    x[0, 0] = 1000
    q.quantize(x)
    assert h[0] == 1000  # zero-copy: the staged amax shows in the same view
    q.update_delayed_scaling(64.0)
    assert h[3] == 64.0 and h[0] == 0.0
    assert s[0] == np.float32(448) / np.float32(64)  # spec §2.4 step 5
    q.update_delayed_scaling()
    with pytest.raises(lq.InvalidArgumentError, match="reduced_amax"):
        q.update_delayed_scaling(-1.0)
    with pytest.raises(lq.InvalidArgumentError, match="direction"):
        q.update_delayed_scaling(None, direction=5)
    with pytest.raises(lq.StateError, match="does not use delayed scaling"):
        lq.Quantizer("fp8").delayed_scaling_state()


# ---------------------------------------------------------------------------
# recipes
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind,fmt", [("fp8_delayed", "fp8"), ("fp8_current", "fp8"), ("fp8_block", "fp8_block"),
                                      ("mxfp8", "mxfp8"), ("nvfp4", "nvfp4")])
def test_recipe_presets(kind: str, fmt: str) -> None:
    r = lq.Recipe.preset(kind)
    q = r.quantizer("linear", "weight", "fc1")
    qt = q.quantize(randn(64, 64, dtype=ml_dtypes.bfloat16))  # nvfp4's RHT needs bf16 (spec §5.5)
    assert qt.formats[0] == fmt
    g = r.quantizer(lq.Role("linear", "grad_output"))
    assert g.quantize(randn(64, 64, dtype=ml_dtypes.bfloat16)).formats[0] == fmt


def test_recipe_preset_options_and_errors() -> None:
    r = lq.Recipe.preset("fp8_delayed", fp8_format="hybrid", amax_history_len=16)
    q = r.quantizer("linear", "grad_output")
    assert q.quantize(randn(16, 16)).rowwise.data.dtype == "float8_e5m2"  # type: ignore[union-attr]
    assert q.delayed_scaling_state()[1].shape == (16,)
    with pytest.raises(lq.InvalidArgumentError, match="kind"):
        lq.Recipe.preset(99)
    with pytest.raises(lq.InvalidArgumentError, match="kind 'fp16'"):
        lq.Recipe.preset("fp16")


def test_recipe_python_callback() -> None:
    seen: list[lq.Role] = []

    def qfactory(role: lq.Role) -> lq.Quantizer:
        seen.append(role)
        if role.tensor_type == "weight":
            return lq.Quantizer("nvfp4")
        if role.tensor_type == "boom":
            raise KeyError("no quantizer for boom")
        if role.tensor_type == "wrong":
            return "fp8"  # type: ignore[return-value]
        return lq.Quantizer("mxfp8")

    r = lq.Recipe.from_callback(qfactory)
    assert r.quantizer("linear", "weight", "fc2").quantize(randn(32, 32)).formats[0] == "nvfp4"
    assert r.quantizer("linear", "input").quantize(randn(32, 32)).formats[0] == "mxfp8"
    assert seen[0] == lq.Role("linear", "weight", "fc2")
    with pytest.raises(lq.LibquantError) as e:
        r.quantizer("linear", "boom")
    assert isinstance(e.value.__cause__, KeyError)
    with pytest.raises(lq.LibquantError) as e:
        r.quantizer("linear", "wrong")
    assert "not a Quantizer" in str(e.value.__cause__)
    # a quantizer handed to libquant is consumed
    kept = lq.Quantizer("fp8")
    r2 = lq.Recipe.from_callback(lambda role: kept)
    r2.quantizer("linear", "input")
    with pytest.raises(lq.InvalidHandleError):
        kept.quantize(randn(4, 4))
    with pytest.raises(lq.LibquantError) as e:
        r2.quantizer("linear", "input")
    assert isinstance(e.value.__cause__, lq.InvalidHandleError)


def test_recipe_rules() -> None:
    rules = [(lq.Role("linear", "weight"), lq.Quantizer("nvfp4")), (lq.Role("", "", "fc1"), lq.Quantizer("fp8")),
             (lq.Role("linear"), lq.Quantizer("mxfp8"))]
    r = lq.Recipe.from_rules(rules)
    del rules
    gc.collect()
    assert r.quantizer("linear", "weight", "fc1").quantize(randn(32, 32)).formats[0] == "nvfp4"
    assert r.quantizer("linear", "input", "fc1").quantize(randn(32, 32)).formats[0] == "fp8"
    assert r.quantizer("linear", "input", "fc2").quantize(randn(32, 32)).formats[0] == "mxfp8"
    with pytest.raises(lq.LibquantError, match="dpa"):
        r.quantizer("dpa", "qkv")


# ---------------------------------------------------------------------------
# GEMM
# ---------------------------------------------------------------------------


def gemm_bound(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """|D - A·B| for an FP32-accumulated product of FP32 operands: each of the K
    products and K-1 sums rounds once (unit u = 2^-24), so the error is at most
    γ_{K+8}·Σ|a||b| (γ_n = n·u/(1-n·u); +8 covers the blocked summation's extra
    partial sums, as host/gemm_test.go derives), plus half an ulp for the output."""
    k = a.shape[1]
    u = 2.0**-24
    g = (k + 8) * u / (1 - (k + 8) * u)
    return g * (np.abs(a) @ np.abs(b)) + u * np.abs(a @ b)


@pytest.mark.parametrize("fa,fb", [("mxfp8", "nvfp4"), ("fp8", "fp8"), ("fp8_block", "mxfp4"), ("nvfp4", "identity")])
def test_gemm_fprop_against_float64(fa: str, fb: str) -> None:
    x = randn(64, 128)
    w = randn(32, 128)
    a = lq.Quantizer(fa).quantize(x)
    b = lq.Quantizer(fb).quantize(w)
    d = lq.gemm(a, b, trans_b=True)
    assert d.shape == (64, 32) and d.dtype == np.float32
    da = a.dequantize(direction="rowwise").astype(np.float64)
    db = b.dequantize(direction="rowwise").astype(np.float64)
    ref = da @ db.T
    assert np.all(np.abs(d - ref) <= gemm_bound(da, db.T))


def test_gemm_options_and_plain_operands() -> None:
    x = randn(16, 32)
    w = randn(32, 24)
    a = lq.Quantizer("fp8").quantize(x)
    da = a.dequantize().astype(np.float64)
    c = randn(16, 24)
    bias = randn(24)
    d = lq.gemm(a, w, alpha=0.5, beta=2.0, c=c, bias=bias)
    ref = 0.5 * (da @ w) + 2.0 * c + bias
    assert np.all(np.abs(d - ref) <= gemm_bound(da, w.astype(np.float64)) + 4 * 2.0**-24 * np.abs(ref) + 1e-6)
    acc = d.copy()
    lq.gemm(a, w, out=acc, accumulate=True)
    assert np.all(np.abs(acc - (d + da @ w)) <= 2 * gemm_bound(da, w.astype(np.float64)) + 1e-5)
    # wgrad-style: both transposed operands read columnwise
    dw = lq.gemm(a, lq.Quantizer("fp8").quantize(randn(16, 8)), trans_a=True)
    assert dw.shape == (32, 8)
    out = np.empty((16, 24), ml_dtypes.bfloat16)
    assert lq.gemm(x, w, out=out) is out
    with pytest.raises(lq.InvalidArgumentError, match="beta"):
        lq.gemm(x, w, beta=1.0)
    a.update_usage("rowwise")
    with pytest.raises(lq.StateError, match="columnwise"):
        lq.gemm(a, w, trans_a=True)
    with pytest.raises(lq.InvalidArgumentError):
        lq.gemm(x, randn(31, 24))


def test_capability_table_rows() -> None:
    rows = lq.gemm_support_table("cpu")
    names = {"fp8", "fp8_block", "mxfp8", "mxfp4", "nvfp4", "identity"}
    pairs = {(r.format_a, r.format_b) for r in rows}
    assert {(a, b) for a in names for b in names} <= pairs
    assert all(r.level in ("native", "emulated", "unsupported") and r.reason for r in rows)
    one = lq.gemm_support("mxfp8", "nvfp4", "cpu")
    assert one in rows and one.level == "emulated"
    cuda = lq.gemm_support_table("cuda:0")
    assert len(cuda) == len(rows)
    with pytest.raises(lq.UnsupportedError, match="device type 7"):
        lq.gemm_support("mxfp8", "nvfp4", lq.Device(7))


# ---------------------------------------------------------------------------
# plugins
# ---------------------------------------------------------------------------


def _toy(name: str) -> str:
    p = BUILD / name
    subprocess.run(["make", "-s", "-C", str(ROOT), "build/" + name], check=True, capture_output=True)
    return str(p)


def test_plugin_loading() -> None:
    toy = _toy("libquant_toy.so")
    i = lq.load_plugin(toy)
    assert lq.load_plugin(toy) == i  # loading again is a no-op with the same index
    info = lq.plugin_info(i)
    assert info.loaded and info.path == toy and info.origin == "explicit" and info.abi_version >= 1
    assert info in lq.plugins()
    for k in info.kernels:
        assert set(k.op_names) <= {"amax", "quantize", "dequantize", "derive", "swizzle_scales", "gemm"}
    for f in info.formats:
        lq.Quantizer(f)  # a format the plugin defines is registered
    with pytest.raises(lq.PluginError, match="abi"):
        lq.load_plugin(_toy("libquant_toy_abi99.so"))
    with pytest.raises(lq.PluginError, match="quant_plugin_get"):
        lq.load_plugin(_toy("libquant_toy_noentry.so"))
    with pytest.raises(lq.PluginError):
        lq.load_plugin(str(BUILD / "no_such_plugin.so"))
    with pytest.raises(lq.InvalidArgumentError):
        lq.plugin_info(10**6)


# ---------------------------------------------------------------------------
# DLPack
# ---------------------------------------------------------------------------


class OnlyDLPack:
    """An object that speaks nothing but the DLPack protocol."""

    def __init__(self, a: np.ndarray[Any, Any]) -> None:
        self.a = a

    def __dlpack__(self, **kw: Any) -> Any:
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self) -> Any:
        return self.a.__dlpack_device__()


def test_dlpack_input_is_not_copied() -> None:
    x = randn(32, 64)
    q = lq.Quantizer("fp8", usage="rowwise")
    ref = q.quantize(x)
    got = q.quantize(OnlyDLPack(x))
    np.testing.assert_array_equal(got.rowwise.data.numpy().view(np.uint8),  # type: ignore[union-attr]
                                  ref.rowwise.data.numpy().view(np.uint8))  # type: ignore[union-attr]
    t = lq._dlpack.as_dltensor(OnlyDLPack(x))
    assert t.dl.data == x.__array_interface__["data"][0]  # the same memory


def test_dlpack_export() -> None:
    qt = lq.Quantizer("nvfp4").quantize(randn(32, 64))
    amax = np.from_dlpack(qt.rowwise.amax)  # type: ignore[union-attr]
    assert amax.dtype == np.float32 and amax[0] == np.float32(np.abs(qt.dequantize()).max()) or amax[0] > 0
    raw = np.from_dlpack(qt.rowwise.data)  # type: ignore[union-attr]
    assert raw.dtype == np.uint8 and raw.shape == (32, 32)
    assert np.shares_memory(raw, qt.rowwise.data.numpy())  # type: ignore[union-attr]
    f8 = lq.Quantizer("fp8").quantize(randn(8, 8))
    b = np.from_dlpack(f8.rowwise.data.bytes_view())  # type: ignore[union-attr]
    assert b.shape == (64,) and b.ctypes.data == f8.rowwise.data.ptr  # type: ignore[union-attr]
    np.testing.assert_array_equal(np.asarray(f8.rowwise.data).view(np.uint8).ravel(), b)  # type: ignore[union-attr]
    # an unconsumed capsule releases its reference when it dies
    before = len(lq._dlpack._exported)
    cap = f8.rowwise.data.__dlpack__()  # type: ignore[union-attr]
    assert len(lq._dlpack._exported) == before + 1
    del cap
    gc.collect()
    assert len(lq._dlpack._exported) == before


def test_closed_objects_raise() -> None:
    q = lq.Quantizer("fp8")
    qt = q.quantize(randn(4, 4))
    qt.close()
    qt.close()  # idempotent
    with pytest.raises(lq.InvalidHandleError, match="closed"):
        qt.dequantize()
    with q:
        pass
    with pytest.raises(lq.InvalidHandleError, match="closed"):
        q.quantize(randn(4, 4))
    assert repr(qt) == "QTensor(closed)"


def test_no_fork_note_in_readme() -> None:
    # Go's runtime does not survive fork(); the README says so for Python users.
    assert "spawn" in (ROOT / "README.md").read_text()


def test_ctypes_empty_call_baseline() -> None:
    lib = lq._lib.lib()
    assert lib.quant_abi_version() == 1
    assert isinstance(lib.cdll, ctypes.CDLL)


def test_close_waits_for_live_views() -> None:
    """close() with views alive makes the object unusable at once but frees the
    library's buffers only when the last view dies, so a view never reads freed memory."""
    x = randn(64, 64)
    qt = lq.Quantizer("mxfp8").quantize(x)
    view = qt.rowwise.data.numpy()  # type: ignore[union-attr]
    want = view.copy()
    qt.close()
    with pytest.raises(lq.InvalidHandleError):
        qt.dequantize()
    for _ in range(20):
        lq.Quantizer("mxfp8").quantize(randn(64, 64) * 100)
    np.testing.assert_array_equal(view.view(np.uint8), want.view(np.uint8))
    assert qt._deferred is not None
    del view
    gc.collect()
    q = lq.Quantizer("fp8", scaling="delayed", amax_history_len=8)
    _, hist = q.delayed_scaling_state()
    h = hist.numpy()
    q.close()
    assert h.shape == (8,) and h[0] == 0


def test_nvfp4_rht_undo_transform_and_stochastic_rounding() -> None:
    x = randn(64, 64, dtype=ml_dtypes.bfloat16)
    qt = lq.Quantizer("nvfp4", rht="default").quantize(x)
    xf = x.astype(np.float32)
    plain = qt.dequantize(direction="columnwise")  # still in the Hadamard domain
    undone = qt.dequantize(direction="columnwise", undo_transform=True)
    err_undone = np.abs(undone - xf).max()
    assert err_undone < np.abs(plain - xf).max()
    # Bound: the 16-point transform (entries ±1/4) gives |y| <= 4 max|x|; an E2M1 code is
    # off by at most half its largest step (1, between 4 and 6) in units of the block scale
    # amax_y/6, itself rounded to E4M3 (relative 2^-4): |e_y| <= (4 max|x| / 6)(1 + 2^-4);
    # the inverse (entries ±1/4, 16 terms) multiplies the largest error by at most 4.
    assert err_undone <= 4 * (4 * np.abs(xf).max() / 6) * (1 + 2.0**-4)
    custom = lq.Quantizer("nvfp4", rht="custom", rht_sign_mask=0x1234).quantize(x)
    assert not np.array_equal(custom.columnwise.data.numpy(), qt.columnwise.data.numpy())  # type: ignore[union-attr]
    with pytest.raises(lq.InvalidArgumentError, match="rht_sign_mask"):
        lq.Quantizer("nvfp4", rht_sign_mask=0x1234)
    sr = [lq.Quantizer("nvfp4", stochastic_rounding=True, seed=7, offset=o).quantize(x) for o in (0, 0, 1)]
    b = [t.rowwise.data.numpy() for t in sr]  # type: ignore[union-attr]
    assert np.array_equal(b[0], b[1]) and not np.array_equal(b[0], b[2])


def test_remaining_config_fields_reach_the_library() -> None:
    # delayed scaling: most_recent and margin (spec §2.4 steps 3-5: scale = 448·2^-margin / a0)
    q = lq.Quantizer("fp8", scaling="delayed", amax_history_len=3, amax_compute_algo="most_recent", margin=2.0)
    scale, hist = q.delayed_scaling_state()
    q.update_delayed_scaling(100.0)
    q.update_delayed_scaling(10.0)
    assert scale.numpy()[0] == np.float32(448 * 2.0**-2) / np.float32(10)  # most recent, not max(100, 10)
    # fp8_block 2-D blocks with FP32 scales: scale_inv [ceil(M/128), pad4(ceil(K/128))] (quant.h)
    b = lq.Quantizer("fp8_block", block_dims=2, fp32_scales=True).quantize(randn(200, 300))
    assert b.rowwise.scale_inv.shape == (2, 4) and b.rowwise.scale_inv.dtype == "float32"  # type: ignore[union-attr]
    s = b.rowwise.scale_inv.numpy()[:2, :3]  # type: ignore[union-attr]
    assert not np.all(np.log2(s) == np.round(np.log2(s)))  # FP32 scales, not powers of two
    p2 = lq.Quantizer("fp8_block").quantize(randn(200, 300)).rowwise.scale_inv.numpy()  # type: ignore[union-attr]
    assert np.all(np.log2(p2[p2 > 0]) == np.round(np.log2(p2[p2 > 0])))  # default: powers of two
    with pytest.raises(lq.InvalidArgumentError, match="E5M2|e5m2"):
        lq.Quantizer("fp8_block", element="e5m2")
    with pytest.raises(lq.InvalidArgumentError, match="block_dims"):
        lq.Quantizer("fp8", block_dims=2)
    # nvfp4 16x16 weight blocks derive columnwise from rowwise
    w = lq.Quantizer("nvfp4", block_dims=2).quantize(randn(64, 64))
    cw = w.columnwise.data.numpy().copy()  # type: ignore[union-attr]
    w.update_usage("rowwise")
    w.update_usage("both")
    np.testing.assert_array_equal(w.columnwise.data.numpy(), cw)  # type: ignore[union-attr]


def test_hybrid_delayed_scaling_per_direction() -> None:
    h = lq.Quantizer.hybrid(lq.Quantizer("fp8", scaling="delayed", amax_history_len=2),
                            lq.Quantizer("fp8", scaling="delayed", amax_history_len=5, element="e5m2"))
    _, hr = h.delayed_scaling_state("rowwise")
    _, hc = h.delayed_scaling_state("columnwise")
    assert hr.shape == (2,) and hc.shape == (5,)
    x = randn(16, 16)
    h.quantize(x)
    assert hr.numpy()[0] == hc.numpy()[0] == np.abs(x).max()
    h.update_delayed_scaling(None, direction="columnwise")
    assert hc.numpy()[0] == 0 and hr.numpy()[0] == np.abs(x).max()


def test_threads_share_quantizers_and_a_callback_recipe() -> None:
    """ctypes releases the GIL around each call: 8 threads quantize with one
    quantizer and ask one Python-callback recipe for quantizers at once."""
    from concurrent.futures import ThreadPoolExecutor

    q = lq.Quantizer("mxfp8")
    x = randn(64, 128)
    want = q.quantize(x).rowwise.data.numpy().view(np.uint8).copy()  # type: ignore[union-attr]
    recipe = lq.Recipe.from_callback(lambda role: lq.Quantizer("nvfp4" if role.tensor_type == "weight" else "fp8"))

    def work(i: int) -> bool:
        ok = True
        for _ in range(20):
            got = q.quantize(x).rowwise.data.numpy().view(np.uint8)  # type: ignore[union-attr]
            ok &= bool(np.array_equal(got, want))
            r = recipe.quantizer("linear", "weight" if i % 2 else "input", "t%d" % i)
            ok &= r.quantize(x).formats[0] == ("nvfp4" if i % 2 else "fp8")
            with pytest.raises(lq.InvalidArgumentError):
                lq.Quantizer("fp8", element="e2m1")
        return ok

    with ThreadPoolExecutor(8) as ex:
        assert all(ex.map(work, range(8)))


@pytest.mark.parametrize("fmt,block", [("mxfp8", 32), ("mxfp4", 32), ("nvfp4", 16)])
@pytest.mark.parametrize("shape", [(45, 37), (7, 3), (33, 17)])
def test_any_shape_equals_zero_padded_bytes(fmt: str, block: int, shape: tuple[int, int]) -> None:
    """spec §14 rule 1: the bytes of X at every valid element are those of X zero-padded
    to whole blocks, padding dropped; packed FP4 of an odd width unpacks to the logical width."""
    m, k = shape
    x = randn(m, k)
    pm, pk = -(-m // block) * block, -(-k // block) * block
    xp = np.zeros((pm, pk), np.float32)
    xp[:m, :k] = x
    q = lq.Quantizer(fmt)
    got, ref = q.quantize(x), q.quantize(xp)
    for d, rows, cols in (("rowwise", m, k), ("columnwise", k if fmt != "mxfp8" else m, m if fmt != "mxfp8" else k)):
        g, r = got.buffer(d, "data"), ref.buffer(d, "data")
        if g.packed_fp4:
            assert g.fp4_width == cols and g.unpack_fp4().shape == (rows, cols)
            np.testing.assert_array_equal(g.unpack_fp4().view(np.uint8), r.unpack_fp4().view(np.uint8)[:rows, :cols])
        else:
            np.testing.assert_array_equal(g.numpy().view(np.uint8), r.numpy().view(np.uint8)[:rows, :cols])
    np.testing.assert_array_equal(got.dequantize(), ref.dequantize()[:m, :k])
