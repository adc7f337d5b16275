"""Shared harness for the CPU benchmark scripts (bench/numpy_*.py).

Each script implements a format's quantize math in vectorised NumPy, times it
on this machine, runs the matching Go benchmark (`go test -bench`), and prints
both figures with their ratio. GB/s counts the minimum bytes: the input read
once plus every output byte written once (landscape.md's convention).

Go benchmarks report a custom metric "GB/s" (b.ReportMetric) and are named
Benchmark<Op>/<case>, so that the <case> part matches a row here.
"""
import os
import re
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timeit(fn, min_time=1.0, warmup=1):
    """Median seconds per call of fn() over enough calls to take min_time."""
    for _ in range(warmup):
        fn()
    times = []
    start = time.perf_counter()
    while time.perf_counter() - start < min_time or len(times) < 3:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def go_bench(pkg, pattern, benchtime="1x", count=1, metric="GB/s"):
    """Runs `go test -bench pattern pkg` and returns {case: value} for
    benchmarks that report the custom metric (b.ReportMetric), "GB/s" by
    default or e.g. "GFLOP/s"; the best of count runs is kept. case is the
    benchmark name after its first '/', without the -N GOMAXPROCS suffix."""
    cmd = ["go", "test", "-run", "^$", "-bench", pattern, "-benchtime", benchtime,
           "-count", str(count), pkg]
    out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    res = {}
    pat = re.compile(r"^Benchmark[^/\s]+/(\S+?)(-\d+)?\s.*?([\d.]+) " + re.escape(metric) + r"(\s|$)")
    for line in out.splitlines():
        m = pat.match(line)
        if m:
            res[m.group(1)] = max(res.get(m.group(1), 0.0), float(m.group(3)))
    return res


def random_bf16(shape, seed=0):
    """Random normal values rounded to BF16, returned as float32 (exact BF16
    values) and as the uint16 bit patterns."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape, dtype=np.float32)
    bits = x.view(np.uint32)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    b16 = bits.astype(np.uint16)
    return (b16.astype(np.uint32) << 16).view(np.float32), b16


def print_table(title, rows):
    """rows: (case, bytes, numpy_seconds, go_gbps or None)."""
    print(title)
    print(f"{'case':<34} {'NumPy GB/s':>11} {'Go GB/s':>9} {'Go/NumPy':>9}")
    for case, nbytes, secs, go in rows:
        npg = nbytes / secs / 1e9
        if go:
            print(f"{case:<34} {npg:>11.3f} {go:>9.3f} {go / npg:>8.1f}x")
        else:
            print(f"{case:<34} {npg:>11.3f} {'-':>9} {'-':>9}")
    sys.stdout.flush()
