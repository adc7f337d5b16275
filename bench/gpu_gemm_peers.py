"""Peers of the fused Hopper GEMM at the issue #12 shapes: BF16 cuBLAS (torch.matmul)
and torch._scaled_mm (FP8 E4M3 per-tensor, the fastest FP8 GEMM torch has on Hopper),
timed with CUDA events (median), random data, BF16 output.

    python3 bench/gpu_gemm_peers.py [--shapes MxNxK,...]

Run in the same command as `build/fused_check bench` so that both tables come
from one machine and one session.
"""

import argparse

import torch

SHAPES = [
    (8192, 8192, 8192, "8192^3"),
    (4096, 4096, 4096, "4096^3"),
    (16384, 28672, 8192, "llm M16384 N28672 K8192"),
    (16, 8192, 8192, "decode M16 N8192 K8192"),
]


def median_ms(fn, iters):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        e0 = torch.cuda.Event(enable_timing=True)
        e1 = torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1))
    ts.sort()
    return ts[len(ts) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="", help="MxNxK list (default: the issue's shapes)")
    args = ap.parse_args()
    shapes = SHAPES
    if args.shapes:
        shapes = []
        for t in args.shapes.split(","):
            m, n, k = (int(x) for x in t.split("x"))
            shapes.append((m, n, k, f"M{m} N{n} K{k}"))
    dev = torch.device("cuda")
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    print(f"{'shape':26s} {'peer':16s} {'ms':>10s} {'TFLOP/s':>10s}")
    for m, n, k, name in shapes:
        flops = 2.0 * m * n * k
        iters = 5 if m * n * k > 1 << 36 else 20
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        b = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
        ms = median_ms(lambda: torch.matmul(a, b.t()), iters)
        print(f"{name:26s} {'bf16 cublas':16s} {ms:10.3f} {flops / ms / 1e9:10.1f}", flush=True)
        a8 = a.to(torch.float8_e4m3fn)
        b8 = b.to(torch.float8_e4m3fn)
        one = torch.ones((), device=dev, dtype=torch.float32)
        try:
            ms = median_ms(lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16), iters)
            print(f"{name:26s} {'_scaled_mm e4m3':16s} {ms:10.3f} {flops / ms / 1e9:10.1f}", flush=True)
        except RuntimeError as e:  # shapes _scaled_mm refuses (it needs multiples of 16)
            print(f"{name:26s} {'_scaled_mm e4m3':16s} refused: {str(e).splitlines()[0]}")
        del a, b, a8, b8
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
