#!/usr/bin/env python3
"""quant_gemm's output bits at the decode kernel's shapes, to tell whether two
builds of the CUDA plugin compute the same bits (run on the GPU machine):

    LIBQUANT_LIBRARY=/tmp/ab/A/libquant.so python3 bench/gemm_bits.py dump nvfp4 /tmp/a.npz
    LIBQUANT_LIBRARY=/tmp/ab/B/libquant.so python3 bench/gemm_bits.py dump nvfp4 /tmp/b.npz
    python3 bench/gemm_bits.py compare /tmp/a.npz /tmp/b.npz

FORMATS is one format for both operands or "A,B" (e.g. "mxfp8,nvfp4"), each
optionally with its element ("mxfp8:e5m2,mxfp4"); several separated by "+"
("nvfp4+mxfp8,mxfp4") go into one file.

The operands are made on the CPU from a fixed seed (the same in every
process): normal values times a power of two per 16-element block of each
row (2^-14 .. 2^2, some blocks zero, a few outliers), so that the block
scales span the E4M3 range, subnormal scales and zero included. Each shape
is one quant_gemm of the format's rowwise operands, D = A·Bᵀ in FP32; the
shapes with at most 32 rows on one side are those the fused decode kernel
takes by default on sm_90 (README, "Fused Hopper GEMM"). compare exits 1 if
any bit differs.
"""
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# M, N, K: decode (M ≤ 32) at one and two row tiles, K % 128 != 0, more CTAs
# than one wave (N > 64 per SM), and the operands swapped (N ≤ 32).
SHAPES = [(1, 300, 4096), (3, 50, 96), (7, 300, 4096), (16, 1000, 352), (16, 8192, 8192), (20, 77, 352),
          (32, 260, 1024), (3, 8500, 256), (16, 9000, 512), (500, 9, 224), (300, 20, 256)]


def operand(rows, k, gen):
    import torch
    x = torch.randn(rows, k, generator=gen)
    nb = (k + 15) // 16
    e = torch.randint(-14, 3, (rows, nb), generator=gen).float()
    s = torch.pow(2.0, e)
    s[torch.rand(rows, nb, generator=gen) < 0.05] = 0.0  # all-zero blocks
    x = x * s.repeat_interleave(16, dim=1)[:, :k]
    out = torch.rand(rows, k, generator=gen) < 0.001
    x[out] = x[out] * 64.0  # outliers
    return x.to(torch.bfloat16)


def quantizer(lq, spec):
    name, _, element = spec.partition(":")
    return lq.Quantizer(name, usage="rowwise", **({"element": element} if element else {}))


def dump(formats, path):
    import torch
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import libquant as lq
    out = {}
    for pair in formats.split("+"):
        fa, _, fb = pair.partition(",")
        qa, qb = quantizer(lq, fa), quantizer(lq, fb or fa)
        gen = torch.Generator().manual_seed(0x5EED)
        for m, n, k in SHAPES:
            a = qa.quantize(operand(m, k, gen).cuda())
            b = qb.quantize(operand(n, k, gen).cuda())
            d = lq.gemm(a, b, trans_b=True)
            torch.cuda.synchronize()
            bits = d.cpu().contiguous().view(torch.int32).numpy()
            out["%s %dx%dx%d" % (pair, m, n, k)] = bits
            print("%s %dx%dx%d: %d outputs, %d finite, checksum %08x" %
                  (pair, m, n, k, bits.size, int(np.isfinite(bits.view(np.float32)).sum()),
                   int(np.bitwise_xor.reduce(bits.ravel().astype(np.uint32)))))
    np.savez(path, **out)


def compare(pa, pb):
    a, b = np.load(pa), np.load(pb)
    bad = 0
    for key in a.files:
        x, y = a[key], b[key]
        diff = int((x != y).sum())
        print("%s: %d of %d outputs differ" % (key, diff, x.size))
        if diff:
            i = np.argwhere(x != y)[:3]
            for r, c in i:
                print("   (%d, %d): %r vs %r" % (r, c, x[r, c].view(np.float32), y[r, c].view(np.float32)))
        bad += diff
    print("ALL SAME" if bad == 0 else "%d outputs differ" % bad)
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "dump":
        dump(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(__doc__)
