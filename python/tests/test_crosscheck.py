"""libquant's CPU bytes against code nobody here wrote.

- fp8 per-tensor: the element codes equal ml_dtypes casts of the scaled values
  (spec §3.2: q = RNE_sat(fl32(x * fl32(fp8_max / amax)))).
- MXFP8 (E4M3, E5M2) and MXFP4 with FLOOR and RCEIL: bytes and E8M0 scales equal
  torchao.prototype.mx_formats.mx_tensor.to_mx (torchao 0.17, pinned in
  requirements-test.txt), rowwise and columnwise.
- NVFP4 1x16: equal to torchao's nvfp4_quantize after the three arithmetic
  substitutions spec §13 item 7 names (each checked to be the only difference).

Inputs: random normal data and adversarial blocks (zeros, -0, FP32 subnormals,
huge values, one large element among tiny ones, exact powers of two, amaxes with
mantissa above 1.75 that FLOOR clips, E4M3/E2M1 rounding ties) in FP32 and BF16.
Shapes are multiples of the blocks so that torchao accepts them.

Spec references are to ../shared/spec/formats.md; torchao references are to
torchao/prototype/mx_formats/{mx_tensor.py,nvfp4_tensor.py,kernels.py}.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")
mx = pytest.importorskip("torchao.prototype.mx_formats.mx_tensor")
nv = pytest.importorskip("torchao.prototype.mx_formats.nvfp4_tensor")
kernels = pytest.importorskip("torchao.prototype.mx_formats.kernels")

import libquant as lq  # noqa: E402

M, K = 128, 256


def adversarial(m: int, k: int, seed: int) -> np.ndarray[Any, Any]:
    """Rows of 16-element pieces, each a different hard case, in a random order."""
    rng = np.random.default_rng(seed)
    e4m3_ties = np.array([1.0625, 1.1875, -1.3125, 0.0078125 * 1.5, 2.0**-9 * 2.5, 240.0, -464.0 / 2 * 1.0], np.float32)
    e2m1_ties = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -2.5, -5.0], np.float32)
    cases = [
        lambda: np.zeros(16, np.float32),
        lambda: np.full(16, -0.0, np.float32),
        lambda: rng.standard_normal(16).astype(np.float32) * np.float32(1e-40),  # FP32 subnormals
        lambda: rng.standard_normal(16).astype(np.float32) * np.float32(1e30),
        lambda: np.concatenate([[np.float32(1e4)], rng.standard_normal(15).astype(np.float32) * 1e-6]),
        lambda: (2.0 ** rng.integers(-20, 20, 16)).astype(np.float32) * rng.choice([-1, 1], 16),
        lambda: np.float32(1.9 * 2.0 ** rng.integers(-10, 10)) * rng.uniform(-1, 1, 16).astype(np.float32),
        lambda: np.concatenate([[np.float32(448)], rng.choice(e4m3_ties, 15)]).astype(np.float32),
        lambda: np.concatenate([[np.float32(6)], rng.choice(e2m1_ties, 15)]).astype(np.float32),
        lambda: rng.standard_normal(16).astype(np.float32),
    ]
    pieces = [cases[i % len(cases)]() for i in range(m * k // 16)]
    order = rng.permutation(len(pieces))
    return np.concatenate([pieces[i] for i in order]).reshape(m, k).astype(np.float32)


def inputs() -> list[Any]:
    rng = np.random.default_rng(3)
    out = []
    for name, x in (("random", rng.standard_normal((M, K)).astype(np.float32) * 3),
                    ("adversarial", adversarial(M, K, 5))):
        out.append(pytest.param(x, id=name + "-f32"))
        out.append(pytest.param(x.astype(ml_dtypes.bfloat16), id=name + "-bf16"))
    return out


def u8(a: Any) -> np.ndarray[Any, Any]:
    if isinstance(a, torch.Tensor):
        return a.contiguous().view(torch.uint8).numpy()
    return np.asarray(a).view(np.uint8)


def torch_in(x: np.ndarray[Any, Any]) -> Any:
    if x.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(x.view(np.uint16).copy()).view(torch.bfloat16)
    return torch.from_numpy(x.copy())


# ---------------------------------------------------------------------------
# fp8 per-tensor vs ml_dtypes
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("x", inputs())
@pytest.mark.parametrize("element,fmax,npdt", [("e4m3", 448.0, ml_dtypes.float8_e4m3fn),
                                               ("e5m2", 57344.0, ml_dtypes.float8_e5m2)])
@pytest.mark.parametrize("pow2,eps", [(False, 0.0), (True, 0.0), (False, 1e3)])
def test_fp8_current_codes_equal_ml_dtypes(x: np.ndarray[Any, Any], element: str, fmax: float, npdt: Any,
                                           pow2: bool, eps: float) -> None:
    qt = lq.Quantizer("fp8", element=element, force_pow2_scales=pow2, amax_epsilon=eps).quantize(x)
    xf = x.astype(np.float32)
    amax = np.float32(np.abs(xf).max())
    assert qt.rowwise.amax.numpy()[0] == amax  # type: ignore[union-attr]
    a = max(amax, np.float32(eps))  # spec §3.2: amax < eps -> eps
    scale = np.float32(fmax) / a if a > 0 else np.float32(1)
    if pow2:  # spec §3.2: keep sign and exponent bits, i.e. round down to 2^k
        scale = np.array([scale], np.float32).view(np.uint32) & np.uint32(0xFF800000)
        scale = scale.view(np.float32)[0]
    want = (xf * scale).astype(npdt)  # ml_dtypes: round to nearest even
    # |x*scale| <= fmax*(1+2^-24) here, which RNE takes to fmax: saturation never differs
    np.testing.assert_array_equal(u8(qt.rowwise.data.numpy()), u8(want))  # type: ignore[union-attr]
    np.testing.assert_array_equal(u8(qt.columnwise.data.numpy()), u8(want).T)  # type: ignore[union-attr]
    assert qt.rowwise.scale_inv.numpy()[0] == np.float32(1) / scale  # type: ignore[union-attr]


def test_fp8_delayed_saturates_where_ml_dtypes_does_not() -> None:
    """Delayed scaling uses the last step's scale (1.0 on a fresh quantizer), so
    values can exceed 448. TE's cast saturates (spec §2.3, RNE_sat); ml_dtypes'
    float8_e4m3fn cast turns an overflow into NaN. The difference is exactly
    that: libquant equals the ml_dtypes cast of the values clipped to ±448 first,
    and differs from the unclipped cast exactly where |x| rounds above 448."""
    x = adversarial(64, 64, 9) * np.float32(1e-2)
    x[0, :8] = [500, -1e6, 464, 463.99, -448, 449, 480, np.float32(3e38)]
    q = lq.Quantizer("fp8", scaling="delayed")
    codes = u8(q.quantize(x).rowwise.data.numpy())  # type: ignore[union-attr]
    clipped = np.clip(x, -448, 448).astype(ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(codes, u8(clipped))
    raw = x.astype(ml_dtypes.float8_e4m3fn)
    differs = codes != u8(raw)
    assert np.array_equal(differs, np.isnan(raw.astype(np.float32)))
    # 464 is the tie between 448 and 480: RNE keeps the even 448, so it does not overflow
    assert differs[0, :8].tolist() == [True, True, False, False, False, False, True, True]


# ---------------------------------------------------------------------------
# MXFP8 / MXFP4 vs torchao to_mx
# ---------------------------------------------------------------------------

MX_CASES = [("mxfp8", "e4m3", torch.float8_e4m3fn), ("mxfp8", "e5m2", torch.float8_e5m2),
            ("mxfp4", "e2m1", torch.float4_e2m1fn_x2)]


@pytest.mark.parametrize("x", inputs())
@pytest.mark.parametrize("fmt,element,tdt", MX_CASES)
@pytest.mark.parametrize("rounding", ["floor", "rceil"])
def test_mx_equals_torchao_to_mx(x: np.ndarray[Any, Any], fmt: str, element: str, tdt: Any, rounding: str) -> None:
    qt = lq.Quantizer(fmt, element=element, scale_rounding=rounding).quantize(x)
    mode = mx.ScaleCalculationMode(rounding)
    xt = torch_in(x)
    s_row, d_row = mx.to_mx(xt, tdt, 32, mode)
    s_col, d_col = mx.to_mx(xt.t().contiguous(), tdt, 32, mode)
    rw, cw = qt.rowwise, qt.columnwise
    assert rw is not None and cw is not None and rw.scale_inv is not None and cw.scale_inv is not None
    np.testing.assert_array_equal(u8(rw.scale_inv.numpy())[:M, :K // 32], u8(s_row).reshape(M, K // 32))
    s_col = u8(s_col).reshape(K, M // 32)
    if fmt == "mxfp8":  # spec §4.5/4.6: columnwise data [M, K] not transposed; scales [M/32, K]
        np.testing.assert_array_equal(u8(cw.scale_inv.numpy())[:M // 32, :K], s_col.T)
        cw_data = u8(cw.data.numpy()).T
    else:  # MXFP4 columnwise is transposed: data [K, M/2], scales [K, M/32]
        np.testing.assert_array_equal(u8(cw.scale_inv.numpy())[:K, :M // 32], s_col)
        cw_data = u8(cw.data.numpy())
    x32 = x.astype(np.float32)
    for got, want, scales, xin in ((u8(rw.data.numpy()), u8(d_row), u8(s_row).reshape(M, K // 32), x32),
                                   (cw_data, u8(d_col), s_col, x32.T)):
        # Blocks whose E8M0 scale is 0 (2^-127: amax below 2^-127 * max_elem) differ by
        # design: TE multiplies by exp2f_rcp(0) = 2^127 (spec §4.3); torchao divides by
        # 2^-126 for FLOOR (mx_tensor.py: to_mx clamps scale_fp32 to F32_MIN_NORMAL) and
        # by 1.0 for RCEIL (_to_mx_rceil: descale_fp = 1.0 where exponent == 0).
        zero = np.repeat(scales == 0, 32 if fmt == "mxfp8" else 16, axis=1)
        np.testing.assert_array_equal(got[~zero], want[~zero])
        if zero.any() and fmt == "mxfp4":
            # |x| < 2^-127 * 6 * 2: both factors leave every such element below E2M1's
            # smallest step, so both rules store zero codes
            np.testing.assert_array_equal(got[zero], want[zero])
        elif zero.any():
            fmax = float(torch.finfo(tdt).max)
            ao = np.float32(2.0**126) if rounding == "floor" else np.float32(1.0)
            with np.errstate(over="ignore"):  # only the zero-scale blocks are read; others may overflow
                ref_te = torch.clamp(torch.from_numpy(xin * np.float32(2.0**127)), -fmax, fmax).to(tdt)
                ref_ao = torch.clamp(torch.from_numpy(xin * ao), -fmax, fmax).to(tdt)
            np.testing.assert_array_equal(got[zero], u8(ref_te)[zero])
            np.testing.assert_array_equal(want[zero], u8(ref_ao)[zero])
            assert (got[zero] != want[zero]).any()


def test_mx_non_finite_blocks_differ_by_design() -> None:
    """Non-finite inputs, where the two libraries' rules differ:
    - NaN: TE's block amax is an fmaxf reduction that ignores NaN (spec §2.3, §4.3), so
      the scale is that of the block's finite elements; torchao's torch.amax propagates
      NaN and to_mx writes scale 0xFF (mx_tensor.py: to_mx, nan_mask / E8M0 NaN).
    - +Inf with RCEIL: both give 0xFE (TE's satfinite cvt.rp; torchao 0.17's
      _to_mx_rceil clamps too; spec §13 item 8 says torchao gives 0xFF, true of older
      torchao releases).
    - +Inf with FLOOR: libquant's OCP rule gives the NaN scale 0xFF; torchao takes the
      biased exponent field of Inf (255) minus emax 8 = 247 (mx_tensor.py: to_mx,
      FLOOR branch, then clamps to the E8M0 range)."""
    x = np.ones((32, 64), np.float32)
    x[0, 0] = np.inf
    x[1, 33] = np.nan
    xt = torch.from_numpy(x)
    got = {}
    for r in ("rceil", "floor"):
        lqs = u8(lq.Quantizer("mxfp8", scale_rounding=r, usage="rowwise").quantize(x)
                 .rowwise.scale_inv.numpy())[:32, :2]  # type: ignore[union-attr]
        tas = u8(mx.to_mx(xt, torch.float8_e4m3fn, 32, mx.ScaleCalculationMode(r))[0]).reshape(32, 2)
        ones = 127 + 0 - 8 if r == "floor" else 127 - 8  # 1.0 / 2^8 rounds to exponent -8 both ways
        # every all-finite block agrees
        mask = np.ones((32, 2), bool)
        mask[0, 0] = mask[1, 1] = False
        np.testing.assert_array_equal(lqs[mask], tas[mask])
        assert (lqs[mask] == ones).all()
        got[r] = (int(lqs[0, 0]), int(tas[0, 0]), int(lqs[1, 1]), int(tas[1, 1]))
    assert got["rceil"] == (0xFE, 0xFE, 119, 0xFF)
    assert got["floor"] == (0xFF, 255 - 8, 119, 0xFF)


# ---------------------------------------------------------------------------
# NVFP4 vs torchao
# ---------------------------------------------------------------------------

FLT_MAX = np.float32(np.finfo(np.float32).max)


def te_rule_nvfp4(xt: Any, amax: Any) -> tuple[Any, Any, Any, Any]:
    """torchao's nvfp4_quantize (two-level path, nvfp4_tensor.py) with the three
    substitutions spec §13 item 7 names, in torchao's own ops otherwise:
      1. block scale: TE's fl32(bamax * fl32(S_enc * fl32(1/6))) with S_enc =
         fl32(2688/amax), instead of torchao's (bamax/6) / (amax/2688) (division);
      2. no lower clamp of the block scale to E4M3_EPS = 2^-6 (TE keeps zero and
         subnormal E4M3 scales);
      3. element factor: TE's fl32(1 / fl32(scale_fp8 * S_dec)) with S_dec =
         fl32(1/S_enc), instead of torchao's fl32(fl32(1/pts) / scale_fp8).
    E4M3 rounding (torch's cast), E2M1 rounding (torchao's f32_to_f4_unpacked) and the
    nibble packing (torchao's pack_uint4) are torchao's. Returns (scales e4m3,
    packed bytes, the fp32 pre-cast block scales, the element factors)."""
    x = xt.float().reshape(xt.shape[0], -1, 16)
    a = amax.float()
    s_enc = torch.where(a > 0, torch.clamp(torch.tensor(2688.0) / a, max=float(FLT_MAX)), torch.tensor(1.0))
    s_dec = (1.0 / s_enc.double()).float()
    inv6 = torch.tensor(1 / 6, dtype=torch.float32)
    bamax = x.abs().amax(-1)
    s_dec_b = bamax * (s_enc * inv6)
    s_fp8 = torch.clamp(s_dec_b, max=448.0).to(torch.float8_e4m3fn)
    enc = torch.clamp(1.0 / (s_fp8.float() * s_dec), max=float(FLT_MAX))
    q = torch.clamp(x * enc.unsqueeze(-1), -6.0, 6.0).reshape(xt.shape)
    packed = kernels.pack_uint4(kernels.f32_to_f4_unpacked(q))
    return s_fp8, packed, s_dec_b, enc


def torchao_nvfp4(xt: Any, amax: Any) -> tuple[Any, Any, Any, Any]:
    """torchao as released: nvfp4_quantize plus its intermediates (same formulas)."""
    pts = nv.per_tensor_amax_to_scale(amax)
    scales, packed = nv.nvfp4_quantize(xt, 16, pts)
    x = xt.float().reshape(xt.shape[0], -1, 16)
    raw = (x.abs().amax(-1) / 6.0) / pts
    recip = (1.0 / pts) / scales.float()
    return scales, packed, raw, recip


@pytest.mark.parametrize("x", inputs())
def test_nvfp4_equals_torchao_with_te_arithmetic(x: np.ndarray[Any, Any]) -> None:
    qt = lq.Quantizer("nvfp4").quantize(x)
    xt = torch_in(x)
    amax = torch.tensor(float(np.abs(x.astype(np.float32)).max()))
    rw, cw = qt.rowwise, qt.columnwise
    assert rw is not None and cw is not None and rw.scale_inv is not None and cw.scale_inv is not None
    assert rw.amax is not None and float(rw.amax.numpy()[0]) == float(amax)
    for view, xin, rows in ((rw, xt, M), (cw, xt.t().contiguous(), K)):
        assert view.scale_inv is not None
        s_te, d_te, pre_te, enc_te = te_rule_nvfp4(xin, amax)
        cols = xin.shape[1]
        lq_scales = u8(view.scale_inv.numpy())[:rows, :cols // 16]
        np.testing.assert_array_equal(lq_scales, u8(s_te))
        np.testing.assert_array_equal(u8(view.data.numpy()), u8(d_te))
        # torchao as released differs only through the substituted steps:
        s_ao, d_ao, pre_ao, enc_ao = torchao_nvfp4(xin, amax)
        same_scale = u8(s_ao) == u8(s_te)
        same_factor = (enc_ao == enc_te).numpy() & same_scale
        blocks_equal = (u8(d_ao).reshape(rows, -1, 8) == u8(d_te).reshape(rows, -1, 8)).all(-1)
        assert blocks_equal[same_factor].all()  # same scale and factor: same bytes
        # a differing scale byte comes from the clamp (rule 2) or the division (rule 1)
        clamp = (pre_ao < nv.E4M3_EPS).numpy()
        division = (pre_ao != pre_te).numpy()
        assert (clamp | division)[~same_scale].all()


def test_nvfp4_tiny_and_zero_blocks_differ_by_design() -> None:
    """spec §13 item 7: torchao clamps block scales to [2^-6, 448]; TE allows zero and
    subnormal E4M3 scales. A zero block gets scale 0x00 from libquant and 0x08 (2^-6)
    from torchao; a block whose scale is 2.5 * 2^-9 (subnormal E4M3, a tie that RNE
    takes to 2 * 2^-9, byte 0x02) gets 0x02 from libquant and 0x08 from torchao. Both
    store zero for the zero block."""
    x = np.zeros((16, 64), np.float32)
    x[:, 32:48] = 1.0
    x[0, 32] = 2688.0  # global amax 2688: S_enc = 1, block scale = bamax / 6
    x[:, 16:32] = np.float32(6 * 2.5 * 2.0**-9)  # block scale 2.5 * 2^-9 exactly
    qt = lq.Quantizer("nvfp4", usage="rowwise").quantize(x)
    ls = u8(qt.rowwise.scale_inv.numpy())[:16, :4]  # type: ignore[union-attr]
    ao, _, _, _ = torchao_nvfp4(torch.from_numpy(x), torch.tensor(2688.0))
    ts = u8(ao)
    assert (ls[:, 0] == 0x00).all() and (ts[:, 0] == 0x08).all()
    assert (ls[:, 1] == 0x02).all() and (ts[:, 1] == 0x08).all()
    np.testing.assert_array_equal(u8(qt.rowwise.data.numpy())[:, :8], 0)  # type: ignore[union-attr]
    assert (ls[:, 3] == 0x00).all() and (ts[:, 3] == 0x08).all()  # the other zero block
    np.testing.assert_array_equal(ls[:, 2], ts[:, 2])  # a normal block: equal
