#!/usr/bin/env python3
"""Host time of one linear layer step (forward + backward through
libquant.torch.Linear on CUDA tensors) per recipe, and where it goes
(cProfile, the Python-level functions with the most own time, ctypes calls
into libquant included as their C functions' names).

    python3 bench/linear_host.py [--lib build/libquant.so] [--shape 8192x4096x4096] [--steps 40]
    python3 bench/linear_host.py --device cpu --shape 16x64x64 --steps 200   (CPU tensors: the
        Python and torch layers around the library's calls, which then include the CPU work)

The GPU is kept from filling its queue by a synchronization every 4 steps;
the host time of a step is perf_counter around the step alone (enqueue, no
wait for the GPU), median / min / max over the steps. A step whose host time
exceeds its GPU time leaves the GPU idle: then the layer's wall time is the
host's (bench/gpu_gemm.py's linear rows).
"""
import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default=os.path.join(ROOT, "build", "libquant.so"))
    ap.add_argument("--shape", default="8192x4096x4096", help="MxKxN")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--recipes", default="bf16,fp8_delayed,fp8_current,fp8_block,mxfp8,nvfp4")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = ap.parse_args()
    dev = args.device
    cuda = dev == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize()
    os.environ.setdefault("LIBQUANT_LIBRARY", args.lib)
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import libquant.torch as lqt
    presets = {"fp8_delayed": lqt.DelayedScaling, "fp8_current": lqt.Float8CurrentScaling, "fp8_block": lqt.Float8BlockScaling,
               "mxfp8": lqt.MXFP8BlockScaling, "nvfp4": lqt.NVFP4BlockScaling}
    m, k, n = (int(d) for d in args.shape.split("x"))
    torch.manual_seed(0)
    x = torch.randn(m, k, device=dev, dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(m, n, device=dev, dtype=torch.bfloat16)
    print("host ms per step (enqueue only), M%d K%d N%d on %s, %d steps: median / min / max; wall ms per step (GPU events on cuda)" % (m, k, n, dev, args.steps))
    for name in args.recipes.split(","):
        if name == "bf16":
            mod = torch.nn.Linear(k, n, bias=False, device=dev, dtype=torch.bfloat16)
        else:
            mod = lqt.Linear(k, n, bias=False, device=dev, dtype=torch.bfloat16, recipe=presets[name]())

        def step():
            x.grad = None
            mod.weight.grad = None
            mod(x).backward(dy)

        for _ in range(5):
            step()
        sync()
        host = []
        if cuda:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
        w0 = time.perf_counter()
        for i in range(args.steps):
            t0 = time.perf_counter()
            step()
            host.append((time.perf_counter() - t0) * 1e3)
            if i % 4 == 3:
                sync()
        if cuda:
            e.record()
        sync()
        wall = s.elapsed_time(e) / args.steps if cuda else (time.perf_counter() - w0) * 1e3 / args.steps
        print("%-12s host %.3f / %.3f / %.3f ms, wall %.3f ms per step" % (name, statistics.median(host), min(host), max(host), wall), flush=True)
        if name != "bf16":
            pr = cProfile.Profile()
            pr.enable()
            for i in range(8):
                step()
                if i % 4 == 3:
                    sync()
            pr.disable()
            out = io.StringIO()
            pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(12)
            lines = [l for l in out.getvalue().splitlines() if l.strip()]
            print("\n".join("    " + l[:160] for l in lines[3:20]), flush=True)


if __name__ == "__main__":
    main()
