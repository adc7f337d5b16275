#!/usr/bin/env python3
"""A stream of small quantizes on the GPU: fp8 current against delayed scaling
(128x256 and 16x4096 BF16, both directions), 200 quant_quantize_into calls in
a row through bare ctypes (as gpu_quantize.py's host-time table makes them),
five times: the CUDA events' time per call beside the host's time per call in
the same loop, so that a host-bound stream shows as such. --profile also
prints torch.profiler's CUDA activities over 20 calls (every kernel, copy and
memset of a call). Run on the GPU machine:

    LIBQUANT_LIBRARY=<dir>/libquant.so python3 bench/quantize_events.py [--profile]

(bench/RESULTS.md, 2026-12-02 04:17 section, calls 7-9.)
"""
import ctypes as C
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_quantize as gq  # noqa: E402


def main():
    profile = "--profile" in sys.argv[1:]
    lib = gq.Lib(os.environ.get("LIBQUANT_LIBRARY", os.path.join(gq.ROOT, "build", "libquant.so")))
    stream = torch.cuda.current_stream().cuda_stream
    fn = C.CFUNCTYPE(C.c_int32, C.c_void_p, C.c_void_p, C.c_void_p, C.c_void_p)(("quant_quantize_into", lib.l))
    for name, fields in (("current", {}), ("delayed", {"scaling": 1})):
        for shape in ((128, 256), (16, 4096)):
            x = torch.randn(*shape, dtype=torch.bfloat16, device="cuda")
            p = gq.Prepared(lib, gq.config("fp8", gq.BOTH, **fields), shape, "cuda")
            xd = gq.dl_from_torch(x)
            opts = gq.Options(C.sizeof(gq.Options), C.c_void_p(stream), None, 0)
            args = (p.q.value, C.addressof(xd), C.addressof(opts), p.t.value)
            for _ in range(100):
                st = fn(*args)
                if st:
                    lib.check(st, "quantize_into")
            torch.cuda.synchronize()
            for _ in range(5):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                e0.record()
                t0 = time.perf_counter()
                for _ in range(200):
                    fn(*args)
                t1 = time.perf_counter()
                e1.record()
                torch.cuda.synchronize()
                print("%s %s events us per call %.2f  host us per call %.2f"
                      % (name, shape, e0.elapsed_time(e1) * 1e3 / 200, (t1 - t0) / 200 * 1e6), flush=True)
            if profile:
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                    for _ in range(20):
                        fn(*args)
                    torch.cuda.synchronize()
                print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=8))
            p.free()


if __name__ == "__main__":
    main()
