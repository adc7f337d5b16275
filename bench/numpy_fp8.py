#!/usr/bin/env python3
"""Per-tensor FP8 (current scaling, E4M3) on the CPU: vectorised NumPy against
libquant's Go kernels (`go test -bench Quantize ./plugins/fp8`), 4096x4096 BF16.

The NumPy code is the same math (spec §3.2: amax, scale = fl32(448/amax),
q = RNE_sat_e4m3(fl32(x*scale)), columnwise = transpose); it is checked against
an exact rational reference on a sample before timing.

Run: /usr/bin/python3 bench/numpy_fp8.py   (Debian's python3-numpy)
"""
import sys
from fractions import Fraction

import numpy as np

from numpy_common import go_bench, print_table, random_bf16, timeit


def encode_e4m3(y):
    """RNE + satfinite to E4M3 codes, from float32 bits (vectorised)."""
    b = y.view(np.uint32)
    sign = ((b >> 24) & 0x80).astype(np.uint8)
    a = b & np.uint32(0x7FFFFFFF)
    sub = a < 0x3C800000
    with np.errstate(invalid="ignore"):  # lanes that are not subnormal are discarded below
        subcode = np.rint(a.view(np.float32) * np.float32(512)).astype(np.uint8)
    m = a & np.uint32(0x7FFFFF)
    m = m + np.uint32(0x7FFFF) + ((m >> 20) & 1)
    e = ((a >> 23).astype(np.int64) - 120) << 3
    code = (e + (m >> 20)).astype(np.int64)
    out = np.where(sub, subcode, np.clip(code, 0, 0x7E)).astype(np.uint8)
    out = np.where(a >= 0x43E80000, np.uint8(0x7E), out)
    out |= sign
    return np.where(a > 0x7F800000, np.uint8(0x7F), out)


def quantize(x, row, col):
    amax = np.float32(np.nanmax(np.abs(x)))
    scale = np.float32(448.0) / amax if amax > 0 and np.isfinite(amax) else np.float32(1)
    q = encode_e4m3((x * scale).astype(np.float32))
    return (q if row else None), (np.ascontiguousarray(q.T) if col else None)


def exact_e4m3(v):
    """Exact RNE/satfinite reference from the grid of E4M3 values."""
    if v != v:
        return 0x7F
    grid = [(Fraction(m, 8) * Fraction(2) ** -6 if e == 0 else (1 + Fraction(m, 8)) * Fraction(2) ** (e - 7), e << 3 | m)
            for e in range(16) for m in range(8) if not (e == 15 and m == 7)]
    s = 0x80 if np.signbit(v) else 0
    a = abs(Fraction(float(v))) if np.isfinite(v) else Fraction(10**9)
    best = min(grid, key=lambda g: (abs(g[0] - a), g[1] & 1))
    return s | best[1]


def self_check():
    rng = np.random.default_rng(1)
    y = (rng.standard_normal(3000) * 2.0 ** rng.integers(-12, 10, 3000)).astype(np.float32)
    y = np.concatenate([y, np.array([464, -464, 448.5, 2 ** -10, np.inf, np.nan, 0.0, -0.0], dtype=np.float32)])
    got = encode_e4m3(y)
    want = np.array([exact_e4m3(v) for v in y], dtype=np.uint8)
    bad = np.nonzero(got != want)[0]
    if len(bad):
        sys.exit(f"numpy E4M3 encoder disagrees with the exact reference at {y[bad[:5]]}: {got[bad[:5]]} vs {want[bad[:5]]}")


def main():
    self_check()
    m = k = 4096
    x, _ = random_bf16((m, k))
    inb = m * k * 2
    go = go_bench("./plugins/fp8", "Quantize/fp8_current_e4m3", benchtime="10x")
    rows = []
    for name, row, col in (("rowwise", True, False), ("columnwise", False, True), ("both", True, True)):
        out = m * k * ((1 if row else 0) + (1 if col else 0)) + 8 * (row + col)
        secs = timeit(lambda: quantize(x, row, col))
        rows.append((f"fp8_current_e4m3/{name}", inb + out, secs, go.get(f"fp8_current_e4m3/{name}")))
    print_table(f"per-tensor FP8, {m}x{k} BF16 -> E4M3, CPU ({__import__('os').cpu_count()} cores)", rows)


if __name__ == "__main__":
    main()
