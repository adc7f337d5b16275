#!/usr/bin/env python3
"""quant_gemm against BF16 torch.matmul at decode shapes, each timed as a CUDA
graph of R back-to-back calls (run on the GPU machine):

    python3 bench/gemm_graph.py [--lib build/libquant.so] [--shapes 16x4096x8192,...] [--pairs mxfp8,mxfp4,...] [--bias]
                                [--modules mxfp8,nvfp4,...]

At decode shapes a quant_gemm from Python costs more host time than its
kernel takes (bench/RESULTS.md), so bench/gpu_gemm.py's loop there times the
host. Here the calls are captured once into a graph (quant_gemm on the
capturing stream, its output preallocated) and the graph is replayed: the time
per call is GPU time, launch gaps included, host excluded, for libquant and
for the BF16 peer alike. Each row alternates the two graphs over ROUNDS
rounds and reports medians; the ratio is BF16 time / libquant time. The
last column is libquant's exact path (quant_gemm_args.exact: the operands
expanded to BF16, then cuBLASLt) timed the same way, as a ratio to the
default dispatch's time: the issue's "never slower than the BF16 expansion"
(below 1.00x, the default is slower).
Operands: random normal BF16 [M, K] and [N, K], quantized rowwise on the
GPU; D = A·Bᵀ in BF16. --bias: D = A·Bᵀ + bias (BF16 [N]), a linear layer's
forward, against torch.addmm (cuBLASLt's bias epilogue) for BF16. PAIRS: pairs separated by commas, a pair's two
formats by "+" ("mxfp8+nvfp4": A MXFP8, B NVFP4; one format: both).

--modules: a second table, a decode step through the PyTorch module as a user
runs it. For each recipe preset (libquant.torch.preset), libquant.torch.Linear
(K in, N out, with a bias, BF16 parameters; eval, no gradient, its quantized
weight cached by a first call outside the graph) on a BF16 [M, K] input,
against torch.nn.Linear in BF16 with the same parameters: the activation's
quantize, the GEMM and the bias, all inside the graph.
"""
import argparse
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
R = 20       # calls per graph
ROUNDS = 7   # alternating replays of the two graphs


def graph_of(fn, torch):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()  # warm-up outside the capture (kernel attributes, workspace)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    # Captured on the warm-up's stream: the exact path's cuBLASLt workspace is
    # made per stream on first use (a cudaMalloc, which a capture refuses).
    with torch.cuda.graph(g, stream=s):
        for _ in range(R):
            fn()
    torch.cuda.synchronize()
    return g


def replay_ms(g, torch):
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    g.replay()
    e1.record()
    e1.synchronize()
    return e0.elapsed_time(e1) / R


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=os.path.join(ROOT, "build", "libquant.so"))
    ap.add_argument("--shapes", default="16x8192x8192,1x8192x8192,16x28672x8192,32x8192x8192,16x4096x8192,16x2048x8192")
    ap.add_argument("--pairs", default="mxfp8,mxfp4,nvfp4,mxfp8+nvfp4")
    ap.add_argument("--bias", action="store_true", help="D = A·Bᵀ + bias (BF16 [N]); the peer torch.addmm")
    ap.add_argument("--modules", default="", help="recipe presets of a libquant.torch.Linear decode table ('' skips it)")
    ap.add_argument("--kernels", action="store_true",
                    help="after each row, the kernels of one call inside its graph (torch.profiler): libquant's "
                         "(and the exact path's in the pairs table, BF16 nn.Linear's in the modules table)")
    args = ap.parse_args()
    os.environ["LIBQUANT_LIBRARY"] = args.lib
    import torch
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import libquant as lq
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from gemm_bits import quantizer  # the formats' spelling: "mxfp8:e5m2"

    print("device: %s | torch %s | %d calls per graph, median of %d alternating replays%s" %
          (torch.cuda.get_device_name(), torch.__version__, R, ROUNDS, " | D = A·Bᵀ + bias" if args.bias else ""), flush=True)
    print("| shape | pair | libquant ms | BF16 %s ms | ratio | exact path ms | exact / libquant |" %
          ("torch.addmm" if args.bias else "torch.matmul"))
    print("| --- | --- | --- | --- | --- | --- | --- |")
    gen = torch.Generator(device="cuda").manual_seed(1)
    for shape in args.shapes.split(","):
        m, n, k = (int(d) for d in shape.split("x"))
        x = torch.randn(m, k, generator=gen, device="cuda").to(torch.bfloat16)
        w = torch.randn(n, k, generator=gen, device="cuda").to(torch.bfloat16)
        bias = torch.randn(n, generator=gen, device="cuda").to(torch.bfloat16) if args.bias else None
        ref_out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        if bias is None:
            g_ref = graph_of(lambda: torch.matmul(x, w.t(), out=ref_out), torch)
        else:
            g_ref = graph_of(lambda: torch.addmm(bias, x, w.t(), out=ref_out), torch)
        for pair in args.pairs.split(",") if args.pairs else []:
            fa, _, fb = pair.partition("+")
            try:
                a, b = quantizer(lq, fa).quantize(x), quantizer(lq, fb or fa).quantize(w)
                out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
                g = graph_of(lambda: lq.gemm(a, b, trans_b=True, out=out, bias=bias,
                                             stream=torch.cuda.current_stream().cuda_stream), torch)
                g_ex = graph_of(lambda: lq.gemm(a, b, trans_b=True, out=out, bias=bias, exact=True,
                                                stream=torch.cuda.current_stream().cuda_stream), torch)
            except Exception as e:  # report and go on: one pair's failure is not the table's
                print("| M%d N%d K%d | %s | error: %s | | | | |" % (m, n, k, pair, e), flush=True)
                continue
            tl, tb, te = [], [], []
            for _ in range(ROUNDS):
                tl.append(replay_ms(g, torch))
                tb.append(replay_ms(g_ref, torch))
                te.append(replay_ms(g_ex, torch))
            ml, mb, me = statistics.median(tl), statistics.median(tb), statistics.median(te)
            print("| M%d N%d K%d | %s | %.4f | %.4f | %.2fx | %.4f | %.2fx |" % (m, n, k, pair.replace("+", " x "), ml, mb, mb / ml, me, me / ml),
                  flush=True)
            if args.kernels:
                kernels_of_call(g, torch, "M%d N%d K%d %s" % (m, n, k, pair))
                kernels_of_call(g_ex, torch, "M%d N%d K%d %s exact" % (m, n, k, pair))
    if args.modules:
        modules_table(args, torch, gen)


def modules_table(args, torch, gen):
    """libquant.torch.Linear's forward against torch.nn.Linear's, BF16, in graphs."""
    import libquant.torch as lqt
    print("")
    print("| shape | recipe | libquant.torch.Linear ms | BF16 torch.nn.Linear ms | ratio |")
    print("| --- | --- | --- | --- | --- |")
    for shape in args.shapes.split(","):
        m, n, k = (int(d) for d in shape.split("x"))
        ref = torch.nn.Linear(k, n, bias=True, device="cuda", dtype=torch.bfloat16)
        x = torch.randn(m, k, generator=gen, device="cuda").to(torch.bfloat16)
        with torch.no_grad():
            g_ref = graph_of(lambda: ref(x), torch)
            for kind in args.modules.split(","):
                try:
                    mod = lqt.Linear.from_linear(ref, recipe=lqt.preset(kind)).eval()
                    g = graph_of(lambda: mod(x), torch)
                except Exception as e:  # report and go on
                    print("| M%d N%d K%d | %s | error: %s | | |" % (m, n, k, kind, e), flush=True)
                    continue
                tl, tb = [], []
                for _ in range(ROUNDS):
                    tl.append(replay_ms(g, torch))
                    tb.append(replay_ms(g_ref, torch))
                ml, mb = statistics.median(tl), statistics.median(tb)
                print("| M%d N%d K%d | %s | %.4f | %.4f | %.2fx |" % (m, n, k, kind, ml, mb, mb / ml), flush=True)
                if args.kernels:
                    kernels_of_call(g, torch, "M%d N%d K%d %s" % (m, n, k, kind))
            if args.kernels:
                kernels_of_call(g_ref, torch, "M%d N%d K%d BF16 nn.Linear" % (m, n, k))


def kernels_of_call(g, torch, label):
    """The kernels (and memsets, copies) of the middle one of a graph's R calls
    (torch.profiler, one replay): each one's start after the call's first kernel starts, and its
    duration, µs; the call's span runs to the next call's first kernel."""
    from torch.profiler import profile, ProfilerActivity
    g.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        g.replay()
        torch.cuda.synchronize()
    ks = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA and e.device_time > 0),
                key=lambda e: e.time_range.start)
    if not ks or len(ks) % R:
        print("  %s: %d kernels in %d calls, not split per call" % (label, len(ks), R))
        return
    per = len(ks) // R
    i = (R // 2) * per
    call, t0 = ks[i:i + per], ks[i].time_range.start
    span = ks[i + per].time_range.start - t0
    print("  %s: %d kernel(s) a call, %.1f µs from its first kernel's start to the next call's" % (label, per, span))
    for e in call:
        print("    +%6.1f µs %6.1f µs  %s" % (e.time_range.start - t0, e.device_time, e.name[:90]))


if __name__ == "__main__":
    main()
