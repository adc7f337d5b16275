#!/usr/bin/env python3
"""libquant's native FP8 GEMMs against torch's, the same problem side by side (issue #11 item 5).

For each shape (MxNxK, Y = X·Wᵀ, BF16 out) and each FP8 scaling (per-tensor,
fp8_block 1x128 x 128x128, fp8_block 1x128 x 1x128): the kernels each side runs
(torch.profiler: name and mean us per call), and their times measured in
alternation (torch, libquant, torch, libquant, ...; --rounds rounds, each a
median of CUDA-event samples), so that clock and temperature drift falls on
both sides alike. Prints the libcublasLt files loaded in this process (torch's
and the plugin's may be different builds).

    python3 bench/gpu_fp8_vs_torch.py [--lib build/libquant.so] [--shapes 16384x28672x8192,...] [--rounds 3] [--once]

--once: call each GEMM twice and stop (for a CUBLASLT_LOG_LEVEL=2 trace of what
each side hands cuBLASLt).
"""
import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_gemm import ROOT, gemm_call, profile_kernels, quantized, torch_blockwise  # noqa: E402
from gpu_quantize import Lib, dl_from_torch, time_gpu  # noqa: E402

PAIRS = [  # name, torch baseline name, X spec, W spec
    ("fp8 per-tensor", "torch._scaled_mm fp8", ("fp8", {}), ("fp8", {})),
    ("fp8_block 1x128 x 128x128", "torch scaled_mm 1x128 x 128x128", ("fp8_block", {}), ("fp8_block", {"block_dims": 2})),
    ("fp8_block 1x128 x 1x128", "torch scaled_mm 1x128 x 1x128", ("fp8_block", {}), ("fp8_block", {})),
]


def kernel_times(f, calls=5):
    """The GPU kernels one f() call runs, full names, mean us per call."""
    return "; ".join("%s %.1f us x%d" % (key, us, n) for us, key, n in profile_kernels(f, calls)) or "no kernels seen"


def loaded_cublaslt():
    with open("/proc/self/maps") as f:
        return sorted({line.split()[-1] for line in f if "libcublasLt" in line})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default=os.path.join(ROOT, "build", "libquant.so"))
    ap.add_argument("--shapes", default="16384x28672x8192,4096x4096x4096,8192x8192x8192")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--once", action="store_true")
    args = ap.parse_args()
    lib = Lib(args.lib)
    print("device:", torch.cuda.get_device_name(), "| torch", torch.__version__, flush=True)
    stream = torch.cuda.current_stream().cuda_stream
    table = []
    for shape in args.shapes.split(","):
        m, n, k = (int(d) for d in shape.split("x"))
        flop = 2.0 * m * n * k
        torch.manual_seed(0)
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        xq, wq = x.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
        one = torch.ones((), device="cuda", dtype=torch.float32)
        tfn = {"torch._scaled_mm fp8": lambda i: torch._scaled_mm(xq, wq.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)}
        tfn.update(torch_blockwise(x, w, m, n, k))
        keep = []
        d_dl = dl_from_torch(y)
        for name, tname, sa, sb in PAIRS:
            a = quantized(lib, sa, x, keep)
            b = quantized(lib, sb, w, keep)
            lfn, _ = gemm_call(lib, a, b, d_dl, stream)
            t = tfn.get(tname)
            if not callable(t):
                print("M%d N%d K%d %s: torch baseline %s" % (m, n, k, name, t), flush=True)
                continue
            if args.once:
                for f, who in ((t, "torch"), (lfn, "libquant")):
                    print("=== M%d N%d K%d %s: %s" % (m, n, k, name, who), flush=True)
                    f(0)
                    f(1)
                    torch.cuda.synchronize()
                continue
            iters = 10 if flop > 3e12 else 30
            tt, lt = [], []
            for r in range(args.rounds):
                tt.append(time_gpu(t, iters=iters))
                lt.append(time_gpu(lfn, iters=iters))
            tk, lk = kernel_times(t), kernel_times(lfn)
            tm, lm = statistics.median(tt), statistics.median(lt)
            row = ("M%d N%d K%d" % (m, n, k), name, tm, lm, tm / lm, " ".join("%.3f" % v for v in tt), " ".join("%.3f" % v for v in lt), tk, lk)
            table.append(row)
            print("%s %s: torch %.4f ms, libquant %.4f ms, ratio %.3f (rounds torch %s | libquant %s)\n  torch kernels: %s\n  libquant kernels: %s"
                  % row, flush=True)
        for p in keep:
            p.free()
        del x, w, y, xq, wq
        torch.cuda.empty_cache()
    print("libcublasLt loaded:", loaded_cublaslt())
    if table:
        print("\n| shape | scaling | torch ms | libquant ms | torch / libquant | rounds torch | rounds libquant |")
        print("| --- | --- | ---: | ---: | ---: | --- | --- |")
        for r in table:
            print("| %s | %s | %.4f | %.4f | %.3f | %s | %s |" % r[:7])


if __name__ == "__main__":
    main()
