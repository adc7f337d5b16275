#!/usr/bin/env python3
"""quant_gemm against BF16 torch.matmul at decode shapes, each timed as a CUDA
graph of R back-to-back calls (run on the GPU machine):

    python3 bench/gemm_graph.py [--lib build/libquant.so] [--shapes 16x4096x8192,...] [--pairs mxfp8,mxfp4,...] [--bias]
                                [--modules mxfp8,nvfp4,...] [--weights N]

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

--weights: how many distinct weights the R calls of a graph cycle through
(call i uses weight i mod W), for both sides alike. A decode step reads each
layer's weight once, so a weight that one call leaves in L2 must not serve the
next: an FP4 weight of 8192 × 8192 (34–38 MB) fits in an H200's L2 (60 MB as
torch reports it), the BF16 one (134 MB) does not. The default, 0, takes the fewest W whose FP4
weights (N·K/2 bytes each) fill at least twice the L2 (at most R; the header
says where W = R falls short); --weights 1 reuses one weight, as this script
did before 2026-12-03.
"""
import argparse
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
R = 20       # calls per graph
ROUNDS = 7   # alternating replays of the two graphs


def graph_of(fn, torch):
    """A graph of R calls fn(0) .. fn(R - 1)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        # Warm-up outside the capture (kernel attributes, workspace; a
        # module's first call quantizes and caches its weight): every call
        # once, so that every weight a graph cycles through has had its first.
        for i in range(R):
            fn(i)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    # Captured on the warm-up's stream: the exact path's cuBLASLt workspace is
    # made per stream on first use (a cudaMalloc, which a capture refuses).
    with torch.cuda.graph(g, stream=s):
        for i in range(R):
            fn(i)
    torch.cuda.synchronize()
    return g


def weight_copies(asked, fp4_bytes, l2):
    """W for --weights: as asked, or the fewest whose FP4 weights fill twice the L2 (at most R)."""
    if asked:
        return asked
    return max(1, min(R, -(-2 * l2 // max(fp4_bytes, 1))))


def weights_note(asked, nw, fp4_bytes, l2):
    """A row's note where the auto rule fell short of twice the L2 (R copies of a small weight)."""
    if asked or nw * fp4_bytes >= 2 * l2:
        return ""
    return " weights: %d, %d MB of FP4 (L2 %d MB)" % (nw, nw * fp4_bytes >> 20, l2 >> 20)


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
    ap.add_argument("--weights", type=int, default=0,
                    help="distinct weights a graph's calls cycle through (0: enough FP4 weights to fill twice the L2)")
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

    if args.weights < 0 or args.weights > R:
        sys.exit("--weights %d: 0 (auto) or 1..%d (the calls a graph holds)" % (args.weights, R))
    l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    print("device: %s (L2 %d MB) | torch %s | %d calls per graph, median of %d alternating replays%s | %s" %
          (torch.cuda.get_device_name(), l2 >> 20, torch.__version__, R, ROUNDS, " | D = A·Bᵀ + bias" if args.bias else "",
           "weights: %d a graph" % args.weights if args.weights else "weights: a graph's FP4 weights fill 2 × L2"),
          flush=True)
    print("| shape | pair | libquant ms | BF16 %s ms | ratio | exact path ms | exact / libquant |" %
          ("torch.addmm" if args.bias else "torch.matmul"))
    print("| --- | --- | --- | --- | --- | --- | --- |")
    gen = torch.Generator(device="cuda").manual_seed(1)
    for shape in args.shapes.split(","):
        m, n, k = (int(d) for d in shape.split("x"))
        nw = weight_copies(args.weights, n * k // 2, l2)
        x = torch.randn(m, k, generator=gen, device="cuda").to(torch.bfloat16)
        ws = [torch.randn(n, k, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(nw)]
        bias = torch.randn(n, generator=gen, device="cuda").to(torch.bfloat16) if args.bias else None
        ref_out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        if bias is None:
            g_ref = graph_of(lambda i: torch.matmul(x, ws[i % nw].t(), out=ref_out), torch)
        else:
            g_ref = graph_of(lambda i: torch.addmm(bias, x, ws[i % nw].t(), out=ref_out), torch)
        for pair in args.pairs.split(",") if args.pairs else []:
            fa, _, fb = pair.partition("+")
            try:
                a = quantizer(lq, fa).quantize(x)
                bs = [quantizer(lq, fb or fa).quantize(w) for w in ws]
                out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
                g = graph_of(lambda i: lq.gemm(a, bs[i % nw], trans_b=True, out=out, bias=bias,
                                               stream=torch.cuda.current_stream().cuda_stream), torch)
                g_ex = graph_of(lambda i: lq.gemm(a, bs[i % nw], trans_b=True, out=out, bias=bias, exact=True,
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
            print("| M%d N%d K%d | %s | %.4f | %.4f | %.2fx | %.4f | %.2fx |%s" % (m, n, k, pair.replace("+", " x "), ml, mb, mb / ml, me, me / ml,
                  weights_note(args.weights, nw, n * k // 2, l2)), flush=True)
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
    l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    for shape in args.shapes.split(","):
        m, n, k = (int(d) for d in shape.split("x"))
        nw = weight_copies(args.weights, n * k // 2, l2)
        refs = [torch.nn.Linear(k, n, bias=True, device="cuda", dtype=torch.bfloat16) for _ in range(nw)]
        x = torch.randn(m, k, generator=gen, device="cuda").to(torch.bfloat16)
        with torch.no_grad():
            g_ref = graph_of(lambda i: refs[i % nw](x), torch)
            for kind in args.modules.split(","):
                try:
                    mods = [lqt.Linear.from_linear(ref, recipe=lqt.preset(kind)).eval() for ref in refs]
                    g = graph_of(lambda i: mods[i % nw](x), torch)
                except Exception as e:  # report and go on
                    print("| M%d N%d K%d | %s | error: %s | | |" % (m, n, k, kind, e), flush=True)
                    continue
                tl, tb = [], []
                for _ in range(ROUNDS):
                    tl.append(replay_ms(g, torch))
                    tb.append(replay_ms(g_ref, torch))
                ml, mb = statistics.median(tl), statistics.median(tb)
                print("| M%d N%d K%d | %s | %.4f | %.4f | %.2fx |%s" % (m, n, k, kind, ml, mb, mb / ml,
                      weights_note(args.weights, nw, n * k // 2, l2)), flush=True)
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
