#!/usr/bin/env python3
"""NVFP4 quantize (spec §5) in vectorised NumPy against libquant's Go kernels.

Implements the same math as plugins/nvfp4: E4M3 block scales and FP32 global
scales of §5.2, 1×16 and 16×16 blocks, the columnwise copy (transposed), the
16-point random Hadamard transform of §5.5 (float64 matrix product, one
rounding to BF16) and stochastic rounding of §5.6 with the Philox4x32-10
scheme of plugins/nvfp4/stochastic.go. Before timing it checks its bytes
against the Go kernels on a small tensor (go test -run TestDumpForNumPy), so
the two columns below compute the same thing.

Run: /usr/bin/python3 bench/numpy_nvfp4.py  (Debian's python3-numpy)
"""
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from numpy_common import ROOT, go_bench, print_table, random_bf16  # noqa: E402

F32 = np.float32
FLT_MAX = np.finfo(np.float32).max


# --- codecs ------------------------------------------------------------------

def _e4m3_table():
    t = np.zeros(256, np.float32)
    for c in range(256):
        s = -1.0 if c & 0x80 else 1.0
        e, m = (c >> 3) & 0xF, c & 7
        if e == 15 and m == 7:
            t[c] = np.nan
        elif e == 0:
            t[c] = s * m * 2.0 ** -9
        else:
            t[c] = s * (1 + m / 8) * 2.0 ** (e - 7)
    return t


E4M3 = _e4m3_table()


def e4m3_encode(x):
    """RNE + satfinite to E4M3 of non-negative float32 x (spec §1.2)."""
    a = x.view(np.uint32) & 0x7FFFFFFF
    e = (a >> 23).astype(np.int32) - 127 + 7
    m = a & 0x7FFFFF
    m = m + (1 << 19) - 1 + ((m >> 20) & 1)
    normal = (e.astype(np.uint32) << 3) + (m >> 20)
    sub = np.rint(x.astype(np.float64) * 512).astype(np.uint32)
    out = np.where(a < 0x3C800000, sub, normal)
    out = np.where(a >= 0x43E80000, 0x7E, out)
    return out.astype(np.uint8)


def _e2m1_tables():
    vals = np.array([0, .5, 1, 1.5, 2, 3, 4, 6])
    enc = np.zeros(4096, np.uint8)   # [(b >> 21) << 1 | low21 == 0] -> RNE code
    floor = np.zeros(1024, np.uint8)  # [t >> 21] -> largest grid value <= t
    for i in range(4096):
        b = np.uint32((i >> 1) << 21 | (0 if i & 1 else 1))
        v = float(np.array([b], np.uint32).view(np.float32)[0])
        neg = v < 0 or (v == 0 and b >> 31)
        a = abs(v)
        if a != a:
            enc[i] = 7
            continue
        thresholds = [(0.25, True), (0.75, False), (1.25, True), (1.75, False), (2.5, True), (3.5, False), (5, True)]
        c = sum(1 for t, incl in thresholds if a > t or (not incl and a == t))
        enc[i] = c | (8 if neg else 0)
    for i in range(1024):
        v = float(np.array([i << 21], np.uint32).view(np.float32)[0])
        floor[i] = 7 if v != v else int(np.searchsorted(vals, v, side="right") - 1)
    return enc, floor


E2M1_ENC, E2M1_FLOOR = _e2m1_tables()


def e2m1_encode(y):
    b = y.view(np.uint32)
    exact = ((b & 0x1FFFFF) == 0).astype(np.uint32)
    return E2M1_ENC[(b >> 21) << 1 | exact]


def philox(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 on uint64 arrays holding 32-bit words."""
    mask = np.uint64(0xFFFFFFFF)
    k0, k1 = np.uint64(k0), np.uint64(k1)
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c0
        p1 = np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = (p1 >> np.uint64(32)) ^ c1 ^ k0, p1 & mask, (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & mask
        k0 = (k0 + np.uint64(0x9E3779B9)) & mask
        k1 = (k1 + np.uint64(0xBB67AE85)) & mask
    return c0, c1, c2, c3


def sr_bytes(rows, cols, direction, seed, offset):
    """[rows, cols] random bytes of stochastic rounding (stochastic.go's scheme)."""
    blocks = np.arange(rows * cols // 16, dtype=np.uint64)
    hi = (blocks >> np.uint64(32)) | np.uint64(direction << 31)
    z = np.zeros_like(blocks)
    w = philox(blocks & np.uint64(0xFFFFFFFF), hi, z + np.uint64(offset & 0xFFFFFFFF),
               z + np.uint64(offset >> 32), seed & 0xFFFFFFFF, seed >> 32)
    words = np.stack(w, axis=1).astype(np.uint32)  # [blocks, 4]
    return words.view(np.uint8).reshape(rows, cols)  # little endian: byte i of word j is element 4j+i


def sr_encode(y, rbits):
    b = y.view(np.uint32)
    a = b & 0x7FFFFFFF
    e = np.uint32(118) + (a >= 0x40000000).astype(np.uint32) + (a >= 0x40800000).astype(np.uint32)
    t = rbits.astype(np.float32) * (e << 23).view(np.float32) + a.view(np.float32)
    sign = np.where(a > 0x7F800000, 0, (b >> 28) & 8).astype(np.uint8)
    return sign | E2M1_FLOOR[t.view(np.uint32) >> 21]


# --- RHT ---------------------------------------------------------------------

def rht_matrix(mask=0xD7E8):
    h = np.array([[1.0]])
    while h.shape[0] < 16:
        h = np.block([[h, h], [h, -h]])
    s = np.array([-1.0 if mask >> i & 1 else 1.0 for i in range(16)])
    return (s[:, None] * h) / 4  # out_j = sum_i x_i s_i H[i][j] / 4


def f64_to_bf16_value(y):
    """One RNE rounding of float64 to BF16, returned as float32 values."""
    b = y.view(np.uint64)
    a = b & np.uint64(0x7FFFFFFFFFFFFFFF)
    r = (a + np.uint64((1 << 44) - 1) + ((a >> np.uint64(45)) & np.uint64(1))) >> np.uint64(45)
    h = ((r - np.uint64(896 << 7)) & np.uint64(0xFFFF)) | ((b >> np.uint64(48)) & np.uint64(0x8000))
    normal = (a >= np.uint64(0x3810000000000000)) & (a < np.uint64(0x47F0000000000000))
    if not normal.all():  # subnormal, zero, overflow: rare; exact fallbacks
        with np.errstate(invalid="ignore", over="ignore"):
            sub = np.rint(np.abs(y) * 2.0 ** 133).astype(np.uint64) | ((b >> np.uint64(48)) & np.uint64(0x8000))
        h = np.where(normal, h, np.where(a < np.uint64(0x3810000000000000), sub, ((b >> np.uint64(48)) & np.uint64(0x8000)) | np.uint64(0x7F80)))
    return (h.astype(np.uint32) << 16).view(np.float32)


# --- quantize ----------------------------------------------------------------

def global_scales(amax):
    with np.errstate(divide="ignore", over="ignore"):
        s_enc = F32(2688) / F32(amax)
    s_enc = F32(min(s_enc, FLT_MAX)) if s_enc == s_enc else F32(FLT_MAX)
    if amax == 0 or s_enc == 0:
        s_enc = F32(1)
    s_dec = F32(1.0 / float(s_enc))
    return F32(s_enc * F32(1.0 / 6)), s_dec


def scale_buffer(codes):
    rows, nb = codes.shape
    out = np.zeros(((rows + 127) // 128 * 128, (nb + 3) // 4 * 4), np.uint8)
    out[:rows, :nb] = codes
    return out


def quantize_blocks(v, amax, sr=None, tile_amax=None):
    """v: stored [rows, cols] float32. Returns (data [rows, cols/2], codes [rows, cols/16])."""
    rows, cols = v.shape
    enc6, s_dec = global_scales(amax)
    blocks = v.reshape(rows, cols // 16, 16)
    bamax = np.abs(blocks).max(axis=2) if tile_amax is None else tile_amax
    codes = e4m3_encode((bamax * enc6).astype(np.float32))
    with np.errstate(divide="ignore"):
        enc_b = np.minimum(F32(1) / (E4M3[codes] * s_dec), FLT_MAX).astype(np.float32)
    y = blocks * enc_b[:, :, None]
    q = e2m1_encode(y) if sr is None else sr_encode(y, sr.reshape(y.shape))
    q = q.reshape(rows, cols)
    return (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8), codes


def quantize(x, rowwise=True, columnwise=True, rht=False, sr_seed=None, two_d=False):
    """x: [M, K] float32 holding BF16 values. Returns {direction: (data, scale, amax)}."""
    m, k = x.shape
    out = {}
    amax = F32(np.abs(x).max())
    sr = sr_seed is not None
    if two_d:
        t = np.abs(x).reshape(m // 16, 16, k // 16, 16).max(axis=(1, 3))
        tile_amax = np.repeat(t, 16, axis=0)
        data, codes = quantize_blocks(x, amax, sr_bytes(m, k, 0, sr_seed, 0) if sr else None, tile_amax)
        if rowwise:
            out["rowwise"] = (data, scale_buffer(codes), amax)
        if columnwise:
            q = np.stack([data & 0xF, data >> 4], axis=2).reshape(m, k).T
            out["columnwise"] = ((q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8),
                                 scale_buffer(np.repeat(codes[::16].T, 16, axis=0)), amax)
        return out
    if rowwise:
        data, codes = quantize_blocks(x, amax, sr_bytes(m, k, 0, sr_seed, 0) if sr else None)
        out["rowwise"] = (data, scale_buffer(codes), amax)
    if columnwise:
        xt = np.ascontiguousarray(x.T)
        col_amax = amax
        if rht:
            y = xt.reshape(k, m // 16, 16).astype(np.float64) @ rht_matrix()
            y[y == 0] = 0.0  # an exact zero is +0
            xt = f64_to_bf16_value(y.reshape(k, m))
            col_amax = F32(np.abs(xt).max())
        data, codes = quantize_blocks(xt, col_amax, sr_bytes(k, m, 1, sr_seed, 0) if sr else None)
        out["columnwise"] = (data, scale_buffer(codes), col_amax)
    return out


CASES = [  # (name, kwargs): the Go benchmark's cases (plugins/nvfp4/bench_test.go)
    ("rowwise", dict(columnwise=False)),
    ("columnwise", dict(rowwise=False)),
    ("both", dict()),
    ("rowwise_sr", dict(columnwise=False, sr_seed=1)),
    ("columnwise_rht", dict(rowwise=False, rht=True)),
    ("columnwise_rht_sr", dict(rowwise=False, rht=True, sr_seed=1)),
    ("both_rht", dict(rht=True)),
    ("both_rht_sr", dict(rht=True, sr_seed=1)),
    ("both_2d", dict(two_d=True)),
]


def out_bytes(res):
    return sum(d.nbytes + s.nbytes + 4 for d, s, _ in res.values())


def cross_check():
    """Same bytes as the Go kernels on a small tensor, for every case."""
    m, k = 64, 96
    x, bits = random_bf16((m, k), seed=7)
    with tempfile.TemporaryDirectory() as d:
        bits.tofile(os.path.join(d, "in.bf16"))
        env = dict(os.environ, NVFP4_DUMP_DIR=d, NVFP4_DUMP_SHAPE=f"{m}x{k}")
        subprocess.run(["go", "test", "-count=1", "-run", "^TestDumpForNumPy$", "./plugins/nvfp4/"],
                       cwd=ROOT, env=env, check=True, capture_output=True)
        for name, kw in CASES:
            for direction, (data, scale, amax) in quantize(x, **kw).items():
                got = np.fromfile(os.path.join(d, f"{name}.{direction}"), np.uint8)
                want = np.concatenate([data.ravel(), scale.ravel(), np.array([amax], np.float32).view(np.uint8)])
                if not np.array_equal(got, want):
                    raise SystemExit(f"cross-check failed: {name} {direction} differs from the Go kernels")
    print(f"cross-check: NumPy bytes equal the Go kernels' for all {len(CASES)} cases ({m}x{k} BF16)")


def best_time(fn, runs=5):
    """The fastest of runs calls (after one warm-up): the statistic go_bench
    reports for Go (its best of -count runs), so both columns compare alike on a
    machine shared with other work."""
    fn()
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    cross_check()
    m = k = 4096
    x, _ = random_bf16((m, k), seed=0)
    go = go_bench("./plugins/nvfp4/", "^BenchmarkQuantize$", benchtime="5x", count=5)
    rows = []
    for name, kw in CASES:
        res = quantize(x, **kw)
        nbytes = x.size * 2 + out_bytes(res)
        secs = best_time(lambda: quantize(x, **kw))
        rows.append((name, nbytes, secs, go.get(name)))
    print_table(f"NVFP4 quantize, {m}x{k} BF16 input (input + output bytes / time; best of 5 each)", rows)


if __name__ == "__main__":
    main()
