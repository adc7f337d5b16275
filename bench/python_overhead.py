#!/usr/bin/env python3
"""What the Python package adds per call, next to the C ABI's own cost.

In one run: builds bench/python_overhead.c against the loaded libquant.so (the
same calls from a C program), then times from Python, on the same inputs:
  - quantize of a 128x256 FP32 tensor (Quantizer.quantize on a NumPy array and
    on a torch CPU tensor; the QTensor is freed when dropped, as the C loop
    frees it);
  - quantize_into of a 1x32 FP32 tensor (NumPy, and torch CPU) into a QTensor
    made once (the per-call cost of a re-quantize: the kernel's work is
    negligible there), and the same call through a QuantizePlan;
  - gemm of small quantized operands (32x64 x (32x64)^T into a preallocated out);
  - an empty ctypes call (quant_abi_version), the floor of any ctypes binding;
and each call once more through bare ctypes (a prebuilt DLTensor, no package
code), interleaved run by run with the package's, so that "package - bare
ctypes" is the package's own cost even on a busy machine.
Each figure is the fastest of 15 runs of N calls (the C program: fastest of 15,
run before and after the Python runs): other work on the machine only adds.

    python3 bench/python_overhead.py [--format fp8] [--iters 1000]

Needs numpy and ml_dtypes (torch optional); `make venv` makes an environment:
~/.cache/libquant/venv-*/bin/python bench/python_overhead.py
"""

from __future__ import annotations

import argparse
import ctypes as C
import datetime
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))

import numpy as np  # noqa: E402

import libquant as lq  # noqa: E402
from libquant import _dlpack, _lib  # noqa: E402

REPS = 15


def interleaved(fns: list[Callable[[], Any]], iters: int) -> list[float]:
    """ns per call of each fn: the fastest of REPS runs, the fns' runs interleaved."""
    best = [float("inf")] * len(fns)
    for f in fns:
        for _ in range(max(iters // 10, 1)):
            f()
    for _ in range(REPS):
        for k, f in enumerate(fns):
            t0 = time.perf_counter_ns()
            for _ in range(iters):
                f()
            best[k] = min(best[k], (time.perf_counter_ns() - t0) / iters)
    return best


def c_figures(fmt: str, iters: int) -> dict[str, float]:
    exe = ROOT / "build" / "python_overhead"
    src = ROOT / "bench" / "python_overhead.c"
    lib = Path(lq.library_path())
    exe.parent.mkdir(exist_ok=True)
    subprocess.run(["cc", "-std=c99", "-O2", "-Wall", "-Werror", "-I", str(ROOT / "include"), str(src),
                    "-L", str(lib.parent), "-lquant", "-Wl,-rpath," + str(lib.parent), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe), fmt, str(iters)], check=True, capture_output=True, text=True).stdout
    return {k: float(v) for k, v in (line.split() for line in out.splitlines())}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--format", default="fp8")
    ap.add_argument("--iters", type=int, default=1000)
    args = ap.parse_args()
    fmt, iters = args.format, args.iters

    c_before = c_figures(fmt, iters)
    i = np.arange(128 * 256)
    x = (((i * 37 % 101) - 50) * np.float32(0.173)).astype(np.float32).reshape(128, 256)
    j = np.arange(32 * 64)
    ab = (((j * 13 % 29) - 14) * np.float32(0.11)).astype(np.float32).reshape(32, 64)
    q = lq.Quantizer(fmt)
    qa, qb = q.quantize(ab), q.quantize(ab)
    d = np.empty((32, 32), np.float32)
    lib = _lib.lib()

    # bare ctypes: the same C calls with prebuilt arguments
    xd = _dlpack.as_dltensor(x)
    out = C.c_void_p()
    qh = q.handle
    quantize, free = lib.quant_quantize, lib.quant_qtensor_free

    def bare_quantize() -> None:
        quantize(qh, C.byref(xd.dl), None, C.byref(out))
        free(out)

    dd = _dlpack.as_dltensor(d)
    g = _lib.quant_gemm_args()
    g.struct_size = C.sizeof(g)
    g.a.qtensor, g.b.qtensor, g.b.trans = qa.handle, qb.handle, 1
    g.d = C.pointer(dd.dl)
    gemm = lib.quant_gemm

    def bare_gemm() -> None:
        gemm(C.byref(g))

    empty = lib.quant_abi_version
    rows: list[tuple[str, str, float, float]] = []
    pq, bq = interleaved([lambda: q.quantize(x), bare_quantize], iters)
    rows.append(("quantize 128x256 fp32 (NumPy)", "quantize", pq, bq))
    try:
        import torch

        xt = torch.from_numpy(x)
        pt, bt = interleaved([lambda: q.quantize(xt), bare_quantize], iters)
        rows.append(("quantize 128x256 fp32 (torch CPU)", "quantize", pt, bt))
    except ImportError:
        pass
    xs = x.reshape(-1)[:32].reshape(1, 32).copy()
    ts = q.quantize(xs)
    xsd = _dlpack.as_dltensor(xs)
    tsh = ts.handle
    quantize_into = lib.quant_quantize_into

    def bare_quantize_into() -> None:
        quantize_into(qh, C.byref(xsd.dl), None, tsh)

    pi, bi = interleaved([lambda: q.quantize_into(xs, ts), bare_quantize_into], iters)
    rows.append(("quantize_into 1x32 fp32 (NumPy), dst given", "quantize_into", pi, bi))
    try:
        import torch

        xst = torch.from_numpy(xs)
        pit, bit = interleaved([lambda: q.quantize_into(xst, ts), bare_quantize_into], iters)
        rows.append(("quantize_into 1x32 fp32 (torch CPU), dst given", "quantize_into", pit, bit))
    except ImportError:
        pass
    plan = q.plan_into(xs, ts)
    plan_run, xs_ptr = lib.quant_quantize_plan_run, xs.ctypes.data

    def bare_plan_run() -> None:
        plan_run(plan._h, xs_ptr, None)

    pp, bp = interleaved([lambda: plan.run(xs), bare_plan_run], iters)
    rows.append(("QuantizePlan.run 1x32 fp32 (NumPy), the same quantize_into planned", "plan_run", pp, bp))
    try:
        import torch

        plan.close()
        plan = q.plan_into(xst, ts)  # a plan made on a torch tensor: runs match its template

        ppt, bpt = interleaved([lambda: plan.run(xst), bare_plan_run], iters)
        rows.append(("QuantizePlan.run 1x32 fp32 (torch CPU)", "plan_run", ppt, bpt))
    except ImportError:
        pass
    plan.close()
    pg, bg = interleaved([lambda: lq.gemm(qa, qb, trans_b=True, out=d), bare_gemm], iters)
    rows.append(("gemm 32x64 x (32x64)^T, out given", "gemm", pg, bg))
    (pe,) = interleaved([empty], iters * 10)
    rows.append(("empty ctypes call (quant_abi_version)", "empty", pe, pe))
    c_after = c_figures(fmt, iters)
    c = {k: min(v, c_after[k]) for k, v in c_before.items()}

    print("python_overhead (%s): format %s, %s, %d CPUs, Python %s, NumPy %s, load %.2f" % (
        datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), fmt, platform.machine(),
        os.cpu_count() or 0, platform.python_version(), np.__version__, os.getloadavg()[0]))
    print("| call | package µs | bare ctypes µs | C µs | package − bare ctypes µs | package − C µs |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, key, p, b in rows:
        print("| %s | %.2f | %.2f | %.2f | %.2f | %.2f |" % (name, p / 1e3, b / 1e3, c[key] / 1e3, (p - b) / 1e3,
                                                         (p - c[key]) / 1e3))


if __name__ == "__main__":
    main()
