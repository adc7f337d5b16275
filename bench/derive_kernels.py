#!/usr/bin/env python3
"""The kernels of a derive (quant_qtensor_update_usage adding the columnwise
copy of a rowwise-quantized tensor) and their mean time, via torch.profiler
(run on the GPU machine; LIBQUANT_LIBRARY picks the library, whose CUDA
plugin is the one beside it), e.g.

    python3 bench/derive_kernels.py fp8 8191x8191
    python3 bench/derive_kernels.py fp8_block 8191x8191 block_dims=2

Each profiled call derives the columnwise copy (update_usage "both") and
drops it again (update_usage "rowwise", no kernel).
"""
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import libquant as lq  # noqa: E402
from gpu_gemm import profile_kernels  # noqa: E402


def main():
    fmt, dims = sys.argv[1], tuple(int(d) for d in sys.argv[2].split("x"))
    fields = dict((kv.split("=")[0], int(kv.split("=")[1])) for kv in sys.argv[3:])
    q = lq.Quantizer(fmt, usage="rowwise", **fields)
    qt = q.quantize(torch.randn(*dims, dtype=torch.bfloat16, device="cuda"))

    def call(_):
        qt.update_usage("both")
        qt.update_usage("rowwise")

    for i in range(3):
        call(i)
    torch.cuda.synchronize()
    print("%s derive %s %s: kernels per call (torch.profiler, mean of 5 calls)" % (fmt, sys.argv[2], " ".join(sys.argv[3:])))
    for us, key, n in profile_kernels(call):
        print("  %8.1f us  x%d  %s" % (us, n, key[:150]))


if __name__ == "__main__":
    main()
