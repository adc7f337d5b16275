#!/usr/bin/env python3
"""A few quant_gemm calls of one format pair and shape, for Nsight Compute
(run on the GPU machine), e.g.

    ncu --clock-control none -k regex:decode_kernel --launch-skip 2 --launch-count 1 \\
        --section SpeedOfLight --section WarpStateStats --section SourceCounters \\
        python3 bench/ncu_gemm.py mxfp4 16x8192x8192

FORMATS as in bench/gemm_bits.py: one format for both operands or "A,B"
(e.g. "mxfp8,nvfp4"), each optionally with its element ("mxfp8:e5m2").
SHAPE is MxNxK: D = A·Bᵀ with A [M, K] and B [N, K], both rowwise, FP32
output (so with M ≤ 32 the fused decode kernel runs on sm_90). Operands
are random normal BF16, quantized on the GPU; the GEMM runs five times.
LIBQUANT_LIBRARY picks the libquant.so (and so the plugin beside it).
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    import torch
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import libquant as lq
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from gemm_bits import quantizer  # the formats' spelling: "mxfp8:e5m2"
    fa, _, fb = sys.argv[1].partition(",")
    m, n, k = (int(d) for d in sys.argv[2].split("x"))

    gen = torch.Generator(device="cuda").manual_seed(1)
    a = quantizer(lq, fa).quantize(torch.randn(m, k, generator=gen, device="cuda").to(torch.bfloat16))
    b = quantizer(lq, fb or fa).quantize(torch.randn(n, k, generator=gen, device="cuda").to(torch.bfloat16))
    for _ in range(5):
        lq.gemm(a, b, trans_b=True)
    torch.cuda.synchronize()
    print("%s %dx%dx%d: 5 GEMMs" % (sys.argv[1], m, n, k))


if __name__ == "__main__":
    main()
