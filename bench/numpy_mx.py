#!/usr/bin/env python3
"""CPU benchmark of the block-scaled formats (issue 3): MXFP8, MXFP4 and FP8
block scaling, quantizing a 4096x4096 BF16 tensor rowwise, columnwise and both.

The same math as plugins/mxfp8 and plugins/fp8/block.go (spec §4, §6) is
written here in vectorised NumPy and timed; then the Go benchmarks
(BenchmarkQuantize/<case>) run and the table prints both with their ratio.
Before timing, the NumPy buffers are compared byte for byte with libquant's
(build/libquant.so through ctypes) on a smaller tensor, so both sides compute
the same thing.

Run with Debian's NumPy: apt-get install -y python3-numpy, then
/usr/bin/python3 bench/numpy_mx.py [--quick]
"""
import ctypes
import os
import subprocess
import sys

import numpy as np

from numpy_common import ROOT, go_bench, print_table, random_bf16, timeit

N = 4096
BF16_MAX = np.float32(np.uint32(0x7F7F0000).view(np.float32))


def pad(n, to):
    return (n + to - 1) // to * to


def bf16_to_f32(b16):
    return (b16.astype(np.uint32) << 16).view(np.float32)


# --- element codecs (spec §1.2, §1.3, §1.5) ----------------------------------

def encode_fp8(v, e5m2=False):
    """RNE with satfinite; NaN gives 0x7F; the sign of zero is kept."""
    bits = v.view(np.uint32)
    a = bits & np.uint32(0x7FFFFFFF)
    sign = (bits >> 24).astype(np.uint8) & np.uint8(0x80)
    if e5m2:
        shift, bias_off, sub_lim, sub_scale, sat, maxc = 21, (127 - 15) << 2, 0x38800000, 65536.0, 0x47700000, 0x7B
    else:
        shift, bias_off, sub_lim, sub_scale, sat, maxc = 20, (127 - 7) << 3, 0x3C800000, 512.0, 0x43E80000, 0x7E
    r = (a + np.uint32((1 << (shift - 1)) - 1) + ((a >> shift) & np.uint32(1))) >> shift
    code = (r - np.uint32(bias_off)).astype(np.uint8)
    small = a < sub_lim
    if small.any():  # subnormal codes: the scaled value is exact, rint is RNE
        code[small] = np.rint(np.abs(v[small]).astype(np.float64) * sub_scale).astype(np.uint8)
    code[a >= sat] = maxc
    code |= sign
    code[a > 0x7F800000] = 0x7F
    return code


def encode_e2m1(v):
    """Thresholds of spec §1.5 (ties to even), saturating; NaN gives +6 (code 7)."""
    a = np.abs(v)
    c = ((a > 0.25).astype(np.uint8) + (a >= 0.75) + (a > 1.25) + (a >= 1.75) + (a > 2.5) + (a >= 3.5) + (a > 5))
    c |= ((v.view(np.uint32) >> 28) & 8).astype(np.uint8)
    c[np.isnan(v)] = 7
    return c


def pack_e2m1(c):
    """Even index in the low nibble (spec §1.5), along the last axis."""
    return c[..., 0::2] | (c[..., 1::2] << 4)


# --- E8M0 scales (spec §1.4, §4.3, §4.4) -------------------------------------

def e8m0_rceil(amax, max_norm):
    t = amax * np.float32(1.0 / max_norm)  # fl32(amax * fl32(1/max))
    bits = t.view(np.uint32)
    e = (bits >> 23) & np.uint32(0xFF)
    m = bits & np.uint32(0x7FFFFF)
    e = e + ((m != 0) & (e != 0xFE) & ~((e == 0) & (m <= 0x400000)))
    e[bits == 0x7F800000] = 0xFE
    e[np.isnan(t)] = 0xFF
    return e.astype(np.uint8)


def e8m0_floor(amax, emax):
    bits = amax.view(np.uint32)
    e = ((bits >> 23) & np.uint32(0xFF)).astype(np.int32)  # subnormals have field 0: 2^-127
    e = np.maximum(e - emax, 0).astype(np.uint8)
    e[bits >= 0x7F800000] = 0xFF
    return e


def e8m0_rcp(e):
    """exp2f_rcp: 2^(127-e); 254 gives 2^-127, 255 NaN."""
    bits = (np.uint32(254) - e.astype(np.uint32)) << 23
    bits[e == 254] = 0x00400000
    bits[e == 255] = 0x7FFFFFFF
    return bits.view(np.float32)


ELEMENTS = {"e4m3": (448.0, 8), "e5m2": (57344.0, 15), "e2m1": (6.0, 2)}


def mx_quantize(b16, element="e4m3", floor=False, row=True, col=True):
    """Returns {(direction, kind): buffer} in libquant's layouts."""
    m, k = b16.shape
    x = bf16_to_f32(b16)
    max_norm, emax = ELEMENTS[element]
    exponent = (lambda a: e8m0_floor(a, emax)) if floor else (lambda a: e8m0_rceil(a, max_norm))
    enc = encode_e2m1 if element == "e2m1" else (lambda v: encode_fp8(v, element == "e5m2"))
    out = {}
    if row:
        xb = x.reshape(m, k // 32, 32)
        e = exponent(np.fmax.reduce(np.abs(xb), axis=2))  # fmaxf: NaN skipped, as TE (spec §4.3)
        q = enc(xb * e8m0_rcp(e)[..., None]).reshape(m, k)
        s = np.zeros((pad(m, 128), pad(k // 32, 4)), np.uint8)
        s[:m, :k // 32] = e
        out["rowwise", "data"] = pack_e2m1(q) if element == "e2m1" else q
        out["rowwise", "scale_inv"] = s
    if col:
        xb = x.reshape(m // 32, 32, k)
        e = exponent(np.fmax.reduce(np.abs(xb), axis=1))  # [M/32, K]
        q = enc(xb * e8m0_rcp(e)[:, None, :]).reshape(m, k)
        if element == "e2m1":  # transposed [K, M/2], scales [pad128(K), pad4(M/32)]
            out["columnwise", "data"] = np.ascontiguousarray(pack_e2m1(q.T))
            s = np.zeros((pad(k, 128), pad(m // 32, 4)), np.uint8)
            s[:k, :m // 32] = e.T
        else:  # not transposed [M, K], scales [pad4(M/32), pad128(K)]
            out["columnwise", "data"] = q
            s = np.zeros((pad(m // 32, 4), pad(k, 128)), np.uint8)
            s[:m // 32, :k] = e
        out["columnwise", "scale_inv"] = s
    return out


# --- FP8 block scaling (spec §6) ---------------------------------------------

def scale_from_amax(amax, pow2, eps=0.0, value_for_inf=BF16_MAX):
    """compute_scale_from_amax (spec §3.2) with fp8_max 448."""
    a = np.where(amax < np.float32(eps), np.float32(eps), amax).astype(np.float32)
    with np.errstate(divide="ignore", over="ignore"):
        s = np.float32(448) / a
    s[np.isinf(s)] = value_for_inf
    s[np.isinf(a) | (a == 0) | np.isnan(a)] = 1
    if pow2:
        s = (s.view(np.uint32) & np.uint32(0xFF800000)).view(np.float32)
    return s


def block_quantize(b16, dims=1, fp32_scales=False, row=True, col=True):
    m, k = b16.shape
    assert m % 128 == 0 and k % 128 == 0, "the NumPy version takes whole blocks only"
    x = bf16_to_f32(b16)
    pow2 = not fp32_scales
    out = {}
    amax = lambda v, axis: np.fmax.reduce(np.abs(v), axis=axis)  # fmaxf: NaN ignored
    if dims == 2:
        x4 = x.reshape(m // 128, 128, k // 128, 128)
        s = scale_from_amax(amax(x4, (1, 3)), pow2)
        inv = np.float32(1) / s
        q = encode_fp8(x4 * s[:, None, :, None]).reshape(m, k)
        if row:
            out["rowwise", "data"] = q
            si = np.zeros((m // 128, pad(k // 128, 4)), np.float32)
            si[:, :k // 128] = inv
            out["rowwise", "scale_inv"] = si
        if col:
            out["columnwise", "data"] = np.ascontiguousarray(q.T)
            si = np.zeros((k // 128, pad(m // 128, 4)), np.float32)
            si[:, :m // 128] = inv.T
            out["columnwise", "scale_inv"] = si
        return out
    if row:
        xb = x.reshape(m, k // 128, 128)
        s = scale_from_amax(amax(xb, 2), pow2)  # [M, K/128]
        out["rowwise", "data"] = encode_fp8(xb * s[..., None]).reshape(m, k)
        si = np.zeros((k // 128, pad(m, 4)), np.float32)
        si[:, :m] = (np.float32(1) / s).T
        out["rowwise", "scale_inv"] = si
    if col:
        xb = x.reshape(m // 128, 128, k)
        s = scale_from_amax(amax(xb, 1), pow2)  # [M/128, K]
        out["columnwise", "data"] = np.ascontiguousarray(encode_fp8(xb * s[:, None, :]).reshape(m, k).T)
        si = np.zeros((m // 128, pad(k, 4)), np.float32)
        si[:, :k] = np.float32(1) / s
        out["columnwise", "scale_inv"] = si
    return out


# --- libquant through ctypes, for the byte comparison ---------------------------

class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class QuantizerConfig(ctypes.Structure):  # quant_quantizer_config
    _fields_ = [("struct_size", ctypes.c_size_t), ("format", ctypes.c_char_p), ("usage", ctypes.c_uint32),
                ("element", ctypes.c_int32), ("scaling", ctypes.c_int32), ("force_pow2_scales", ctypes.c_int32),
                ("amax_epsilon", ctypes.c_float), ("amax_history_len", ctypes.c_int32),
                ("amax_compute_algo", ctypes.c_int32), ("margin", ctypes.c_float), ("block_dims", ctypes.c_int32),
                ("fp32_scales", ctypes.c_int32), ("scale_rounding", ctypes.c_int32),
                ("gemm_swizzled_scales", ctypes.c_int32), ("rht", ctypes.c_int32), ("rht_sign_mask", ctypes.c_uint32),
                ("stochastic_rounding", ctypes.c_int32), ("seed", ctypes.c_uint64), ("offset", ctypes.c_uint64),
                ("dtype", DLDataType)]


def load_libquant():
    path = os.path.join(ROOT, "build", "libquant.so")
    subprocess.run(["make", "-s", "lib"], cwd=ROOT, check=True)
    lib = ctypes.CDLL(path)
    lib.quant_last_error.restype = ctypes.c_char_p
    return lib


def libquant_quantize(lib, b16, fmt, **fields):
    """Quantizes b16 with both usages; returns {(direction, kind): bytes}."""
    def ok(status, what):
        if status != 0:
            raise RuntimeError(f"{what}: status {status}: {lib.quant_last_error().decode()}")
    cfg = QuantizerConfig(struct_size=ctypes.sizeof(QuantizerConfig), format=fmt.encode())
    for name, value in fields.items():
        setattr(cfg, name, value)
    q, t = ctypes.c_void_p(), ctypes.c_void_p()
    ok(lib.quant_quantizer_create(ctypes.byref(cfg), ctypes.byref(q)), "quant_quantizer_create")
    b16 = np.ascontiguousarray(b16)
    shape = (ctypes.c_int64 * 2)(*b16.shape)
    inp = DLTensor(data=b16.ctypes.data, device=DLDevice(1, 0), ndim=2, dtype=DLDataType(4, 16, 1), shape=shape)
    ok(lib.quant_quantize(q, ctypes.byref(inp), None, ctypes.byref(t)), "quant_quantize")
    out = {}
    for d, dname in ((1, "rowwise"), (2, "columnwise")):
        for kind, kname in ((0, "data"), (1, "scale_inv")):
            v = DLTensor()
            ok(lib.quant_qtensor_buffer(t, d, kind, ctypes.byref(v)), "quant_qtensor_buffer")
            n = int(np.prod([v.shape[i] for i in range(v.ndim)])) * v.dtype.bits // 8
            out[dname, kname] = ctypes.string_at(v.data, n)
    lib.quant_qtensor_free(t)
    lib.quant_quantizer_free(q)
    return out


# name: (NumPy function, kwargs, libquant format, config fields)
FORMATS = {
    "mxfp8": (mx_quantize, {}, "mxfp8", {}),
    "mxfp8_floor": (mx_quantize, {"floor": True}, "mxfp8", {"scale_rounding": 1}),
    "mxfp4": (mx_quantize, {"element": "e2m1"}, "mxfp4", {}),
    "fp8_block_1d": (block_quantize, {"dims": 1}, "fp8_block", {"block_dims": 1}),
    "fp8_block_2d": (block_quantize, {"dims": 2}, "fp8_block", {"block_dims": 2}),
}


def check_same_bytes(lib):
    """NumPy and libquant agree byte for byte on a 256x384 input with outliers,
    zeros, subnormals, NaN and Inf."""
    x, b16 = random_bf16((256, 384), seed=1)
    rng = np.random.default_rng(2)
    b16 = b16.copy()
    b16[rng.integers(0, 256, 40), rng.integers(0, 384, 40)] = 0x4780  # 65536: outliers
    b16[3, 0:64] = 0  # zero blocks
    b16[5, 0:32] = rng.integers(1, 0x7F, 32).astype(np.uint16)  # bf16 subnormals
    b16[7, 40] = 0x7FC0  # NaN
    b16[9, 70] = 0xFF80  # -Inf
    for name, (fn, kw, fmt, fields) in FORMATS.items():
        want = libquant_quantize(lib, b16, fmt, **fields)
        got = fn(b16, **kw)
        for key, buf in want.items():
            mine = np.ascontiguousarray(got[key]).tobytes()
            if mine != buf:
                diff = np.flatnonzero(np.frombuffer(mine, np.uint8) != np.frombuffer(buf, np.uint8))
                raise SystemExit(f"{name} {key}: NumPy and libquant differ at {diff.size} bytes, first {diff[:5]}")
    print("NumPy and libquant agree byte for byte on every format and direction (256x384, with specials).")


def out_bytes(bufs):
    return sum(b.nbytes for b in bufs.values())


def main():
    quick = "--quick" in sys.argv
    check_same_bytes(load_libquant())
    _, b16 = random_bf16((N, N))
    go = {}
    for pkg in ("./plugins/mxfp8", "./plugins/fp8"):
        go.update(go_bench(pkg, "Quantize/", benchtime="3x" if quick else "10x", count=1 if quick else 3))
    rows = []
    for name, (fn, kw, _, _) in FORMATS.items():
        for direction, flags in (("rowwise", (True, False)), ("columnwise", (False, True)), ("both", (True, True))):
            call = lambda: fn(b16, row=flags[0], col=flags[1], **kw)
            nbytes = b16.nbytes + out_bytes(call())
            secs = timeit(call, min_time=0.3 if quick else 1.0)
            case = f"{name}_{direction}"
            rows.append((case, nbytes, secs, go.get(case)))
    print_table(f"Quantize {N}x{N} BF16 on the CPU ({os.cpu_count()} cores; NumPy {np.__version__}, one thread)", rows)
    worst = min(g / (b / s / 1e9) for _, b, s, g in rows if g)
    print(f"lowest Go/NumPy ratio: {worst:.1f}x (target: 5x)")


if __name__ == "__main__":
    main()
