"""Executable (Go) format plugins from Python: load_plugin's options over
quant_plugin_load_ex (sha256, arena_bytes, call_timeout_ms), shutdown(), and the
MXFP6 plugin's packed FP6 buffers (examples/goplugin/mxfp6, built by
`make goplugins`; these tests skip where Go is missing, as on the GPU machine).

The reference below is written from the spec, sharing no code with the plugin
(examples/goplugin/mxfp6/exact_test.go states the same rule with big.Rat):
  - OCP MX v1.0 §5.3.2: FP6 E2M3 (max 7.5, emax 2) and E3M2 (max 28, emax 4),
    decoded and rounded (to nearest even, saturating) by ml_dtypes' float6 types;
  - §6.3 FLOOR (spec §4.4): X = 2^(floor(log2 amax) - emax), exponent clamped to
    E8M0's [-127, 127], scaled values clamped to ±max;
  - RCEIL (spec §4.3, TE's MXFP8 rule): X = 2^ceil(log2 fl32(amax * fl32(1/max)));
  - spec §14: any shape, a partial block quantized as if zero-padded; rows of
    4·ceil(n/4) codes, 4 codes per 3 bytes, code i in bits 6i..6i+5.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import libquant as lq
from conftest import BUILD, ROOT, run

GOPLUGIN = BUILD / "goplugin" / "mxfp6"
MANIFEST = BUILD / "goplugin" / "plugins.sha256"

# element -> (ml_dtypes type, max, emax_elem) (OCP MX v1.0 §5.3.2)
ELEMENTS: dict[str, tuple[Any, float, int]] = {
    "e2m3": (ml_dtypes.float6_e2m3fn, 7.5, 2),
    "e3m2": (ml_dtypes.float6_e3m2fn, 28.0, 4),
}


@pytest.fixture(scope="module")
def plugin() -> tuple[str, str]:
    """(path, sha256) of the mxfp6 plugin executable, built here."""
    if shutil.which("go") is None:
        pytest.skip("Go is not installed: the mxfp6 plugin is a Go executable (make goplugins builds it)")
    run(["make", "-s", "-C", str(ROOT), "goplugins"])
    digest = hashlib.sha256(GOPLUGIN.read_bytes()).hexdigest()
    assert MANIFEST.read_text().split()[0] == digest  # the manifest make writes says the same
    return str(GOPLUGIN), digest


@pytest.fixture
def mxfp6(plugin: tuple[str, str]) -> Any:
    """Loads the plugin with its digest and explicit options (a no-op when it is
    running; after shutdown() it starts it anew). Stops it after the module."""
    path, digest = plugin
    idx = lq.load_plugin(path, sha256=digest, arena_bytes=1 << 30, call_timeout_ms=30000)
    yield idx


@pytest.fixture(scope="module", autouse=True)
def _stop_plugins_after_module() -> Any:
    yield
    lq.shutdown()


def test_load_plugin_with_digest(plugin: tuple[str, str], mxfp6: int) -> None:
    path, digest = plugin
    assert lq.load_plugin(path, sha256=digest) == mxfp6  # loaded: a no-op, same index
    # Loaded, but a caller naming another digest is refused as a first load would be,
    # against the digest of the binary that runs (quant.h, quant_plugin_load).
    with pytest.raises(lq.PluginError, match="already running") as e:
        lq.load_plugin(path, sha256="0" * 64)
    assert digest in e.value.message and "0" * 64 in e.value.message
    assert lq.load_plugin(path) == mxfp6  # no digest: still the no-op
    info = lq.plugin_info(mxfp6)
    assert info.loaded and info.name == "mxfp6" and info.origin == "explicit", info
    assert info.formats == ("mxfp6",) and info.abi_version == 1  # the handshake version (quant.h)
    (k,) = info.kernels
    assert k.device == lq.Device("cpu") and k.defines_format and {"quantize", "dequantize"} <= set(k.op_names)
    # Layout (spec §14): data [rows, 4·ceil(n/4)] FP6, 3 bytes per 4 codes; E8M0 [rows, ceil(n/32)].
    got = [(d.direction, d.kind, d.dtype, d.shape, d.nbytes) for d in lq.Quantizer("mxfp6", usage="both").layout((33, 70))]
    assert got == [("rowwise", "data", "float6_e2m3fn", (33, 72), 33 * 54),
                   ("rowwise", "scale_inv", "float8_e8m0fnu", (33, 3), 99),
                   ("columnwise", "data", "float6_e2m3fn", (70, 36), 70 * 27),
                   ("columnwise", "scale_inv", "float8_e8m0fnu", (70, 2), 140)]


def test_load_plugin_wrong_digest(plugin: tuple[str, str], tmp_path: Path) -> None:
    # A copy at a new path: the loaded file would be a no-op whatever the digest.
    path, digest = plugin
    copy = tmp_path / "mxfp6"
    shutil.copy2(path, copy)
    with pytest.raises(lq.PluginError, match="was expected") as e:
        lq.load_plugin(copy, sha256="0" * 64)
    assert isinstance(e.value, lq.LibquantError) and e.value.status_name == "QUANT_ERROR_PLUGIN"
    assert digest in e.value.message and "quant_plugin_load_ex" in e.value.message
    with pytest.raises(lq.PluginError, match="not 64 hex digits"):
        lq.load_plugin(copy, sha256="xyz")
    # Listed nowhere (no sha256, no LIBQUANT_PLUGIN_MANIFEST in the test env): refused.
    with pytest.raises(lq.PluginError):
        lq.load_plugin(copy)


def test_load_plugin_native_digest(tmp_path: Path) -> None:
    # quant.h: "sha256 is checked for a native .so too".
    run(["make", "-s", "-C", str(ROOT), "build/libquant_toy.so"])
    copy = tmp_path / "libquant_toy_copy.so"
    shutil.copy2(BUILD / "libquant_toy.so", copy)
    with pytest.raises(lq.PluginError, match="was expected"):
        lq.load_plugin(str(copy), sha256="f" * 64)


def test_load_plugin_bad_options() -> None:
    with pytest.raises(lq.InvalidArgumentError, match="arena_bytes"):
        lq.load_plugin("unused", arena_bytes=-1)
    with pytest.raises(lq.InvalidArgumentError, match="call_timeout_ms"):
        lq.load_plugin("unused", call_timeout_ms=1 << 32)
    with pytest.raises(lq.InvalidArgumentError, match="call_timeout_ms"):
        lq.load_plugin("unused", call_timeout_ms=1.5)  # type: ignore[arg-type]
    with pytest.raises(lq.InvalidArgumentError, match="sha256"):
        lq.load_plugin("unused", sha256=b"00")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# The exact rule, in NumPy
# ---------------------------------------------------------------------------


def _e8m0(element: str, rounding: str, amax: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The E8M0 scale byte of each block amax (float32)."""
    _, mx, emax = ELEMENTS[element]
    if rounding == "floor":
        _, ex = np.frexp(amax.astype(np.float64))  # amax = frac·2^ex, frac in [0.5, 1)
        e = np.clip(ex - 1 - emax + 127, 0, 254)
        return np.where(amax == 0, 0, e).astype(np.uint8)
    # fl32(1/max): the float64 quotient rounded to float32; neither 1/7.5 nor 1/28
    # lies on a float32 rounding midpoint, so this is the exact quotient's rounding.
    v = (amax.astype(np.float32) * np.float32(1.0 / mx)).astype(np.float32)
    frac, ex = np.frexp(v.astype(np.float64))
    k = np.where(frac == 0.5, ex - 1, ex)  # ceil(log2 v)
    return np.where(v == 0, 0, np.clip(k + 127, 0, 254)).astype(np.uint8)


def ref_rowwise(x: np.ndarray[Any, Any], element: str, rounding: str) -> tuple[Any, Any, Any]:
    """(codes [m, 4·ceil(k/4)] uint8, scales [m, ceil(k/32)] uint8, dequantized
    float32 [m, k]) of x [m, k] with blocks of 32 along k."""
    f6, mx, _ = ELEMENTS[element]
    m, k = x.shape
    nb = -(-k // 32)
    xp = np.zeros((m, nb * 32), np.float32)
    xp[:, :k] = x
    blocks = xp.reshape(m, nb, 32)
    e = _e8m0(element, rounding, np.abs(blocks).max(axis=-1))
    # x·2^(127-e) in float64 is exact and its float32 rounding is IEEE's multiply.
    scaled = (blocks.astype(np.float64) * np.ldexp(1.0, 127 - e.astype(np.int64))[..., None]).astype(np.float32)
    codes = np.clip(scaled, -mx, mx).astype(f6)
    deq = (codes.astype(np.float64) * np.ldexp(1.0, e.astype(np.int64) - 127)[..., None]).astype(np.float32)
    codes8 = np.zeros((m, -(-k // 4) * 4), np.uint8)
    codes8[:, :k] = codes.view(np.uint8).reshape(m, nb * 32)[:, :k]
    return codes8, e, deq.reshape(m, nb * 32)[:, :k]


SHAPES = [(1, 1), (3, 5), (33, 45), (64, 96), (65, 97)]


@pytest.mark.parametrize("element", sorted(ELEMENTS))
@pytest.mark.parametrize("rounding", ["rceil", "floor"])
@pytest.mark.parametrize("shape", SHAPES, ids=["%dx%d" % s for s in SHAPES])
def test_mxfp6_matches_exact_rule(mxfp6: int, element: str, rounding: str, shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(6)
    m, k = shape
    x = (rng.standard_normal(shape) * np.ldexp(1.0, rng.integers(-20, 20, size=shape))).astype(np.float32)
    q = lq.Quantizer("mxfp6", element=element, scale_rounding=rounding, usage="both")
    qt = q.quantize(x)
    for direction, xd in (("rowwise", x), ("columnwise", np.ascontiguousarray(x.T))):
        codes, scales, deq = ref_rowwise(xd, element, rounding)  # columnwise: stored transposed
        view = getattr(qt, direction)
        data = view.data
        assert data.dtype == "float6_%sfn" % element and data.shape == codes.shape
        assert data.nbytes == codes.shape[0] * codes.shape[1] * 3 // 4
        packed = data.numpy()
        assert packed.dtype == np.uint8 and packed.shape == (codes.shape[0], codes.shape[1] * 3 // 4)
        np.testing.assert_array_equal(lq.unpack_fp6(packed).view(np.uint8), codes)  # padding codes zero
        np.testing.assert_array_equal(packed, lq.pack_fp6(codes.view(ELEMENTS[element][0])))
        got = data.unpack_fp6()
        assert got.dtype == ELEMENTS[element][0] and got.shape == (xd.shape[0], xd.shape[1])
        np.testing.assert_array_equal(view.scale_inv.numpy().view(np.uint8), scales)
        y = qt.dequantize(direction=direction)
        np.testing.assert_array_equal(y, deq.T if direction == "columnwise" else deq)


@pytest.mark.parametrize("element", sorted(ELEMENTS))
@pytest.mark.parametrize("rounding", ["rceil", "floor"])
@pytest.mark.parametrize("direction", ["rowwise", "columnwise"])
def test_mxfp6_representable_round_trips(mxfp6: int, element: str, rounding: str, direction: str) -> None:
    """dequantize(quantize(x)) == x when every block is FP6 grid values times 2^s
    and its amax fixes X = 2^s: FLOOR, amax = max·2^s (floor(log2 max) = emax);
    RCEIL, amax = 2^emax·2^s (2^emax/max is 0.53 or 0.57, so the ceiling is 2^0
    whatever fl32(1/max)'s rounding)."""
    f6, mx, emax = ELEMENTS[element]
    rng = np.random.default_rng(7)
    grid = np.arange(64, dtype=np.uint8).view(f6).astype(np.float32)
    anchor = np.float32(mx if rounding == "floor" else 2.0 ** emax)
    grid = grid[np.abs(grid) <= anchor]
    lines, n = 37, 70  # blocks run along n: 32 + 32 + a partial 6
    nb = -(-n // 32)
    v = rng.choice(grid, size=(lines, nb * 32))
    s = rng.integers(-30, 30, size=(lines, nb))
    for b in range(nb):  # one element per block at ±anchor
        v[:, b * 32 + rng.integers(0, min(32, n - b * 32))] = anchor * rng.choice([-1, 1], size=lines)
    xs = np.ascontiguousarray((v * np.ldexp(1.0, np.repeat(s, 32, axis=1))).astype(np.float32)[:, :n])
    for b in range(nb):  # exact in float32: grid values have 4 significant bits, |s| < 30
        amax = np.abs(xs[:, b * 32:(b + 1) * 32]).max(axis=1)
        np.testing.assert_array_equal(amax, anchor * np.ldexp(1.0, s[:, b]))
    x = xs if direction == "rowwise" else np.ascontiguousarray(xs.T)
    q = lq.Quantizer("mxfp6", element=element, scale_rounding=rounding, usage=direction)
    qt = q.quantize(x)
    np.testing.assert_array_equal(qt.dequantize(direction=direction), x)
    np.testing.assert_array_equal(getattr(qt, direction).scale_inv.numpy().view(np.uint8), (s + 127).astype(np.uint8))


def test_mxfp6_torch_views(mxfp6: int) -> None:
    torch = pytest.importorskip("torch")
    t = torch.randn(33, 70, dtype=torch.bfloat16)
    qt = lq.Quantizer("mxfp6", usage="both").quantize(t)
    for view in (qt.rowwise, qt.columnwise):
        d = view.data.torch()
        assert d.dtype == torch.uint8 and tuple(d.shape) == view.data.packed_shape()  # torch has no FP6 dtype
        np.testing.assert_array_equal(d.numpy(), view.data.numpy())
        assert d.data_ptr() == view.data.ptr  # a view, not a copy
    # BF16 in: the same codes as the float32 of the same values
    ref = lq.Quantizer("mxfp6", usage="both").quantize(t.float().numpy())
    np.testing.assert_array_equal(qt.rowwise.data.numpy(), ref.rowwise.data.numpy())
    # quantize_into torch-allocated buffers
    q = lq.Quantizer("mxfp6", usage="both")
    dst = q.empty(tuple(t.shape), torch=True)
    q.quantize_into(t, dst)
    np.testing.assert_array_equal(dst.columnwise.data.numpy(), qt.columnwise.data.numpy())


def test_fp6_pack_helpers() -> None:
    for element, (f6, _, _) in ELEMENTS.items():
        v = np.arange(64, dtype=np.uint8).view(f6).reshape(4, 16)
        p = lq.pack_fp6(v)
        assert p.shape == (4, 12)
        np.testing.assert_array_equal(lq.unpack_fp6(p, dtype=element).view(np.uint8), v.view(np.uint8))
        # code i in bits 6i..6i+5, little bit-endian (spec §14, DLPack's sub-byte order)
        bits = np.unpackbits(p[0], bitorder="little")
        for i in range(16):
            assert int(np.packbits(bits[6 * i:6 * i + 6], bitorder="little")[0]) == i
    odd = lq.unpack_fp6(lq.pack_fp6(np.float32([1.0, -2.0, 7.5, 0.5, 3.0])), 5)
    np.testing.assert_array_equal(odd.astype(np.float32), [1.0, -2.0, 7.5, 0.5, 3.0])
    with pytest.raises(lq.InvalidArgumentError, match="width"):
        lq.unpack_fp6(np.zeros((2, 3), np.uint8), 9)
    with pytest.raises(lq.InvalidArgumentError, match="groups of 3"):
        lq.unpack_fp6(np.zeros((2, 4), np.uint8))
    with pytest.raises(lq.InvalidArgumentError, match="dtype"):
        lq.unpack_fp6(np.zeros((2, 3), np.uint8), dtype="float8_e4m3fn")


def test_shutdown_then_calls_fail_cleanly(plugin: tuple[str, str], mxfp6: int) -> None:
    path, digest = plugin
    x = np.random.default_rng(3).standard_normal((8, 40)).astype(np.float32)
    q = lq.Quantizer("mxfp6")
    before = q.quantize(x).rowwise.data.numpy().copy()
    lq.shutdown()
    with pytest.raises(lq.PluginError, match="quant_shutdown") as e:
        q.quantize(x)
    assert "mxfp6" in e.value.message
    with pytest.raises(lq.PluginError, match="quant_shutdown"):
        lq.Quantizer("mxfp6", element="e3m2").quantize(x)
    info = lq.plugin_info(mxfp6)
    assert not info.loaded and info.status == lq.PluginError.status and "quant_shutdown" in info.message
    lq.shutdown()  # nothing running: still fine
    # Loading the file again starts it anew (a new entry of the plugin list; the
    # stopped one stays listed with its reason); the old quantizer works again.
    again = lq.load_plugin(path, sha256=digest)
    assert lq.plugin_info(again).loaded and lq.plugin_info(again).path == path
    assert lq.load_plugin(path, sha256=digest) == again
    np.testing.assert_array_equal(q.quantize(x).rowwise.data.numpy(), before)
