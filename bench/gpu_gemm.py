#!/usr/bin/env python3
"""GPU GEMM benchmark for libquant's CUDA plugin (issue #11; run on the GPU machine).

One run, side by side, for Y = X·Wᵀ (X [M, K], W [N, K], Y [M, N] in BF16):
BF16 torch.matmul; torch._scaled_mm with FP8 per-tensor scales; torch's
blockwise FP8 scaled GEMM (1x128 x 128x128 and 1x128 x 1x128) where this
torch offers it; and libquant's quant_gemm for each format and a hybrid
pair, through the C ABI (ctypes, DLTensors over torch tensors, torch's
stream), the operands quantized once beforehand (so libquant's time includes
its BF16 expansion, not the quantize). Prints median ms (CUDA events),
TFLOP/s and the ratio to the BF16 and FP8 torch baselines (each libquant FP8
row and its torch baseline of the same scaling timed in alternation, see
time_paired; the torch FP8 rows show that paired time; every other libquant
row is timed in alternation with BF16 torch.matmul, its "vs BF16" ratio
from that pairing), the host time
per quant_gemm call (enqueue, no sync) at the decode shape, and where the
exact MX/NVFP4 rows spend their time beyond the BF16 GEMM (the expansion: ms
over the "libquant bf16" row and the bandwidth that makes).

Then a whole linear layer, forward + backward (Y = X·Wᵀ, dX, dW; no bias), per
recipe preset through libquant.torch.Linear on CUDA tensors, against BF16
torch.nn.functional.linear, at M 8192 (tokens), K 4096 (in), N 4096 (out), each
recipe's row timed in alternation with a BF16 F.linear of its own
(--linear MxKxN; --linear "" skips it). A recipe the library refuses prints
"unsupported: <its message>" in its row; everything else still prints.

    python3 bench/gpu_gemm.py [--lib build/libquant.so] [--out DIR] [--shapes 8192x8192x8192,...] [--linear 8192x4096x4096] [--quick]
"""
import argparse
import ctypes as C
import statistics
import datetime
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_quantize import DLTensor, Lib, Options, Prepared, config, dl_from_torch, time_gpu  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROW = 1


class GemmOperand(C.Structure):
    _fields_ = [("qtensor", C.c_void_p), ("tensor", C.POINTER(DLTensor)), ("trans", C.c_int32)]


class GemmArgs(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("a", GemmOperand), ("b", GemmOperand), ("alpha", C.POINTER(C.c_float)),
                ("beta", C.POINTER(C.c_float)), ("c", C.POINTER(DLTensor)), ("bias", C.POINTER(DLTensor)),
                ("d", C.POINTER(DLTensor)), ("accumulate", C.c_int32), ("stream", C.c_void_p), ("exact", C.c_int32)]


# name, (format, config fields) of X, of W; None: a dense BF16 tensor.
LIBQUANT = [
    ("bf16 (quant_gemm)", None, None),
    ("fp8 e4m3 (native)", ("fp8", {}), ("fp8", {})),
    ("fp8_block 1x128 x 128x128", ("fp8_block", {}), ("fp8_block", {"block_dims": 2})),
    ("fp8_block 1x128 x 1x128", ("fp8_block", {}), ("fp8_block", {})),
    ("mxfp8", ("mxfp8", {}), ("mxfp8", {})),
    ("mxfp4", ("mxfp4", {}), ("mxfp4", {})),
    ("nvfp4", ("nvfp4", {}), ("nvfp4", {"block_dims": 2})),
    ("mxfp8 x nvfp4", ("mxfp8", {}), ("nvfp4", {"block_dims": 2})),
    # The same pairs with quant_gemm_args.exact: always the BF16 expansion,
    # beside the default rows above, which take the fused Hopper kernel
    # where the dispatch picks it (cuda/gemm.cu fused_faster).
    ("mxfp8 exact", ("mxfp8", {}), ("mxfp8", {})),
    ("mxfp4 exact", ("mxfp4", {}), ("mxfp4", {})),
    ("nvfp4 exact", ("nvfp4", {}), ("nvfp4", {"block_dims": 2})),
]


# libquant rows with a torch FP8 baseline of the same scaling: row name -> baseline name.
PAIRED = {
    "fp8 e4m3 (native)": "torch._scaled_mm fp8",
    "fp8_block 1x128 x 128x128": "torch scaled_mm 1x128 x 128x128",
    "fp8_block 1x128 x 1x128": "torch scaled_mm 1x128 x 1x128",
}


def time_paired(f, g, iters=20, warmup=5, min_ms=0.2):
    """Median milliseconds per call of f and of g, their samples taken in
    alternation (f g, g f, f g, ...: each sample as in time_gpu, enough
    back-to-back calls for about min_ms). The two medians then see the same
    clocks: timed one after the other, a GEMM that runs after a few seconds of
    full load meets other clocks than the one before it (H100, 2026-11-24,
    bench/RESULTS.md: the same cuBLASLt kernel on both sides read 0.84-0.91x
    timed after torch's, 0.99-1.01x in alternation, in one run)."""
    for fn in (f, g):
        for i in range(warmup):
            fn(i)
    torch.cuda.synchronize()
    one = []
    for fn in (f, g):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn(0)
        e.record()
        torch.cuda.synchronize()
        one.append(s.elapsed_time(e))
    reps = max(1, min(20, int(min_ms / max(min(one), 1e-3) + 0.999)))
    samples = {f: [], g: []}
    for i in range(iters):
        for fn in ((f, g) if i % 2 == 0 else (g, f)):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for j in range(reps):
                fn(i * reps + j)
            e.record()
            samples[fn].append((s, e))
    torch.cuda.synchronize()
    return tuple(statistics.median(s.elapsed_time(e) for s, e in samples[fn]) / reps for fn in (f, g))


def quantized(lib, spec, x, keep):
    fmt, fields = spec
    p = Prepared(lib, config(fmt, ROW, **fields), tuple(x.shape), "cuda")
    opts = Options(C.sizeof(Options), C.c_void_p(torch.cuda.current_stream().cuda_stream), None, 0)
    p.run(dl_from_torch(x), opts)
    keep.append(p)
    return p


def gemm_call(lib, a, b, d_dl, stream, exact=0):
    """A callable running quant_gemm(Y = A·Bᵀ) once; a/b: Prepared or a DLTensor."""
    args = GemmArgs()
    args.struct_size = C.sizeof(GemmArgs)
    args.exact = exact
    for op, src, trans in ((args.a, a, 0), (args.b, b, 1)):
        if isinstance(src, Prepared):
            op.qtensor = src.t
        else:
            op.tensor = C.pointer(src)
        op.trans = trans
    args.d = C.pointer(d_dl)
    args.stream = C.c_void_p(stream)
    ref = C.byref(args)
    return lambda i: lib.check(lib.quant_gemm(ref), "quant_gemm"), args


def torch_blockwise(x, w, m, n, k):
    """torch's 1x128 x 128x128 and 1x128 x 1x128 FP8 GEMMs, where it has them: {name: fn or error}."""
    out = {}
    xq = x.to(torch.float8_e4m3fn)
    wq = w.to(torch.float8_e4m3fn)
    kb = (k + 127) // 128
    sa = torch.ones(m, kb, device="cuda", dtype=torch.float32)
    for name, sb in (("torch scaled_mm 1x128 x 128x128", torch.ones((n + 127) // 128, kb, device="cuda", dtype=torch.float32)),
                     ("torch scaled_mm 1x128 x 1x128", torch.ones(n, kb, device="cuda", dtype=torch.float32))):
        try:
            # The scales are "outer-dim major" for cuBLASLt: sa as [K/128, M]ᵀ.
            a_s = sa.t().contiguous().t()
            b_s = sb.t().contiguous().t() if sb.shape[0] == n else sb
            f = lambda i, a_s=a_s, b_s=b_s: torch._scaled_mm(xq, wq.t(), scale_a=a_s, scale_b=b_s.t(), out_dtype=torch.bfloat16)
            f(0)
            torch.cuda.synchronize()
            out[name] = f
        except Exception as e:  # noqa: BLE001 - a baseline torch lacks is reported, not fatal
            out[name] = "n/a: %s" % str(e).split("\n")[0][:120]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default=os.path.join(ROOT, "build", "libquant.so"))
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--shapes", default="", help="MxNxK list (default: 8192³, 4096³, M16384 N28672 K8192, M16 N8192 K8192)")
    ap.add_argument("--linear", default="8192x4096x4096", help="MxKxN of the linear-layer rows ('' skips them)")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    lib = Lib(args.lib)
    dev = torch.cuda.get_device_name()
    shapes = [(8192, 8192, 8192), (4096, 4096, 4096), (16384, 28672, 8192), (16, 8192, 8192)]
    if args.shapes:
        shapes = [tuple(int(d) for d in s.split("x")) for s in args.shapes.split(",")]
    stream = torch.cuda.current_stream().cuda_stream
    rows = []
    host_us = {}
    expansion = []
    breakdown = []
    order = []
    print("device:", dev, "| torch", torch.__version__, flush=True)
    for (m, n, k) in shapes:
        flop = 2.0 * m * n * k
        iters = 10 if flop > 3e12 else 30
        if args.quick:
            iters = 5
        torch.manual_seed(0)
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        res = {}
        bf16_fn = lambda i: torch.matmul(x, w.t(), out=y)  # noqa: E731
        res["torch.matmul bf16"] = time_gpu(bf16_fn, iters=iters)
        bf16_pair = {}  # libquant row -> torch.matmul bf16 timed in alternation with it
        xq, wq = x.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
        one = torch.ones((), device="cuda", dtype=torch.float32)
        tfns = {}  # the torch FP8 baselines, timed again in alternation with their libquant row
        try:
            f = lambda i: torch._scaled_mm(xq, wq.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)  # noqa: E731
            res["torch._scaled_mm fp8"] = time_gpu(f, iters=iters)
            tfns["torch._scaled_mm fp8"] = f
        except Exception as e:  # noqa: BLE001
            res["torch._scaled_mm fp8"] = "n/a: %s" % str(e).split("\n")[0][:120]
        for name, f in torch_blockwise(x, w, m, n, k).items():
            res[name] = time_gpu(f, iters=iters) if callable(f) else f
            if callable(f):
                tfns[name] = f
        d_dl = dl_from_torch(y)
        for name, sa, sb in LIBQUANT:
            keep = []
            try:
                a = quantized(lib, sa, x, keep) if sa else dl_from_torch(x)
                b = quantized(lib, sb, w, keep) if sb else dl_from_torch(w)
                f, _ = gemm_call(lib, a, b, d_dl, stream, exact=int(name.endswith(" exact")))
                base = PAIRED.get(name)
                if base in tfns:
                    # Same scaling as a torch baseline: both timed in
                    # alternation, so that clock drift falls on both alike
                    # (and, for the record, one after the other as well).
                    seq_t, seq_l = res[base], time_gpu(f, iters=iters)
                    res[base], res["libquant " + name] = time_paired(tfns[base], f, iters=2 * iters)
                    order.append(("M%d N%d K%d" % (m, n, k), name, seq_t, seq_l, res[base], res["libquant " + name]))
                    # Which cuBLASLt kernel each side runs (the same one, where the ratio is 1.00).
                    breakdown.append(("M%d N%d K%d" % (m, n, k), base, kernel_times(tfns[base])))
                    breakdown.append(("M%d N%d K%d" % (m, n, k), name, kernel_times(f)))
                else:
                    # Against BF16 torch.matmul, likewise in alternation.
                    bf16_pair["libquant " + name], res["libquant " + name] = time_paired(bf16_fn, f, iters=iters)
                if name.endswith(" exact") or name.startswith("mxfp8 x"):
                    breakdown.append(("M%d N%d K%d" % (m, n, k), name, kernel_times(f)))
                if m == 16:
                    for i in range(20):
                        f(i)
                    torch.cuda.synchronize()
                    batches = []
                    for _ in range(10):
                        t0 = time.perf_counter()
                        for i in range(100):
                            f(i)
                        batches.append((time.perf_counter() - t0) / 100 * 1e6)
                        torch.cuda.synchronize()
                    host_us[name] = (min(batches), statistics.median(batches))
            except Exception as e:  # noqa: BLE001 - one failing row must not stop the table
                res["libquant " + name] = "error: %s" % str(e)[:160]
            for p in keep:
                p.free()
            torch.cuda.synchronize()
        lq_bf16 = res.get("libquant bf16 (quant_gemm)")
        for name, code_bytes, scale_bytes in (("mxfp8 exact", 1.0, 1 / 32), ("mxfp4 exact", 0.5, 1 / 32), ("nvfp4 exact", 0.5, 1 / 16)):
            ms = res.get("libquant " + name)
            if isinstance(ms, float) and isinstance(lq_bf16, float):
                gb = (m + n) * (k * (code_bytes + scale_bytes) + ((k + 15) // 16 * 16) * 2) / 1e9
                extra = ms - lq_bf16
                expansion.append(("M%d N%d K%d" % (m, n, k), name, extra, gb, gb / (extra * 1e-3) if extra > 0 else float("nan")))
        bf16 = res["torch.matmul bf16"]
        fp8 = res.get("torch._scaled_mm fp8")
        for name, ms in res.items():
            row = {"shape": "M%d N%d K%d" % (m, n, k), "name": name}
            if isinstance(ms, float):
                row.update(ms=ms, tflops=flop / (ms * 1e-3) / 1e12, vs_bf16=bf16_pair.get(name, bf16) / ms)
                # the torch FP8 baseline of the same scaling
                base = fp8
                for blk in ("1x128 x 128x128", "1x128 x 1x128"):
                    if blk in name:
                        base = res.get("torch scaled_mm " + blk)
                if isinstance(base, float) and (name.startswith("libquant fp8") or name.startswith("torch")) and "bf16" not in name:
                    row["vs_fp8"] = base / ms
            else:
                row["error"] = ms
            rows.append(row)
            print(fmt_row(row), flush=True)
        del x, w, y, xq, wq, tfns
        torch.cuda.empty_cache()
    linear = linear_rows(args) if args.linear else []
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = ["Device: %s; torch %s; %s. Y = X·Wᵀ, BF16 out; libquant operands quantized beforehand (expansion included). "
             "Each libquant row is timed in alternation with its baseline (torch FP8 of the same scaling, else BF16 torch.matmul), "
             "and its ratios use that alternating baseline time." % (dev, torch.__version__, date), "",
             "| shape | GEMM | ms | TFLOP/s | vs BF16 torch.matmul | vs torch FP8 of the same scaling |", "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            r["shape"], r["name"], "%.3f" % r["ms"] if "ms" in r else r.get("error", ""), "%.0f" % r["tflops"] if "tflops" in r else "",
            "%.2f" % r["vs_bf16"] if "vs_bf16" in r else "", "%.2f" % r["vs_fp8"] if "vs_fp8" in r else ""))
    lines += ["", "Host time per quant_gemm call from Python (ctypes), M16 N8192 K8192, enqueue only: 10 batches of 100 calls, "
              "the GPU idle before each; fastest batch / median batch, us per call:", "",
              "| GEMM | min us | median us |", "| --- | --- | --- |"]
    lines += ["| %s | %.1f | %.1f |" % (k, v[0], v[1]) for k, v in host_us.items()]
    if order:
        lines += ["", "FP8 rows against torch's of the same scaling, timed one after the other (torch's row first, libquant's "
                  "some seconds later: the order before time_paired) and in alternation (the table above), ms:", "",
                  "| shape | GEMM | torch, then | libquant | torch / libquant | torch, alternating | libquant | torch / libquant |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        lines += ["| %s | %s | %.3f | %.3f | %.2f | %.3f | %.3f | %.2f |" % (s_, n_, a, b, a / b, c, d, c / d) for s_, n_, a, b, c, d in order]
    if expansion:
        lines += ["", "Exact MX/NVFP4 rows beyond the BF16 GEMM on BF16 operands (\"libquant bf16\" row): the expansion of both "
                  "operands (codes + scales read, BF16 written), and for nvfp4 the kernel forming its device alpha "
                  "(an FP32-sums epilogue pass only with C, bias or accumulate).", "",
                  "| shape | GEMM | extra ms | expansion GB | GB/s if all expansion |", "| --- | --- | --- | --- | --- |"]
        lines += ["| %s | %s | %.3f | %.3f | %.0f |" % e for e in expansion]
    if breakdown:
        lines += ["", "Kernels per call (torch.profiler, mean of 5 calls, us): the exact MX/NVFP4 rows, the hybrid, and each FP8 row next to its torch baseline:", "",
                  "| shape | GEMM | kernels |", "| --- | --- | --- |"]
        lines += ["| %s | %s | %s |" % b for b in breakdown]
    if linear:
        lines += ["", "Linear layer forward + backward (Y = X·Wᵀ, dX = dY·W, dW = dYᵀ·X; BF16 X, W, dY; no bias), libquant.torch.Linear "
                  "with each recipe preset against torch.nn.functional.linear in BF16:", "",
                  "| shape | linear | ms | TFLOP/s | vs BF16 F.linear |", "| --- | --- | --- | --- | --- |"]
        for r in linear:
            if "ms" in r:
                lines.append("| %s | %s | %.3f | %.0f | %.2f |" % (r["shape"], r["name"], r["ms"], r["tflops"], r["vs_bf16"]))
            else:
                lines.append("| %s | %s | %s |  |  |" % (r["shape"], r["name"], r["error"]))
        lines += ["", "GPU kernels per linear step (torch.profiler, mean of 3 steps after the timing; the same kernel "
                  "names summed, longest first):", "", "| linear | kernels |", "| --- | --- |"]
        lines += ["| %s | %s |" % (r["name"], r["kernels"]) for r in linear if "kernels" in r]
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "bench_gemm.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def profile_kernels(f, calls=5):
    """The GPU kernels `calls` calls of f run (torch.profiler), longest first:
    [(mean us per call, full kernel name, launches per call)], copies and
    memsets left out."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(calls):
            f(i)
        torch.cuda.synchronize()
    out = []
    for e in prof.key_averages():
        us = getattr(e, "device_time_total", None)
        if us is None:
            us = getattr(e, "cuda_time_total", 0)
        if us > 0 and not e.key.startswith("cuda") and "Memcpy" not in e.key and "Memset" not in e.key:
            out.append((us / calls, e.key, e.count // calls))
    out.sort(reverse=True)
    return out


def kernel_times(f, calls=5):
    """The GPU kernels one f() call runs, with their mean duration: 'name us, ...' (torch.profiler)."""
    try:
        out = []
        for us, key, _ in profile_kernels(f, calls):
            for short in ("expand_contig_kernel", "expand_kernel", "epilogue_kernel", "scale_kernel", "alpha_kernel", "fused"):
                if short in key:
                    key = short
                    break
            out.append("%s %.1f us" % (key[:64], us))
        return ", ".join(out) or "no kernels seen"
    except Exception as e:  # noqa: BLE001 - the profile is extra information
        return "profiler: %s" % str(e).split("\n")[0][:100]


# The recipe presets of libquant.torch, by name.
LINEAR_RECIPES = ["fp8_delayed", "fp8_current", "fp8_block", "mxfp8", "nvfp4"]


def linear_rows(args):
    """Forward + backward of one linear layer per recipe against BF16 F.linear: [row]."""
    m, k, n = (int(d) for d in args.linear.split("x"))
    shape = "M%d K%d N%d" % (m, k, n)
    flop = 3 * 2.0 * m * n * k  # Y, dX, dW
    iters = 5 if args.quick else 20
    rows = []

    def row(name, ms, bf16=None):
        r = {"shape": shape, "name": name}
        if isinstance(ms, float):
            r.update(ms=ms, tflops=flop / (ms * 1e-3) / 1e12, vs_bf16=(bf16 or ms) / ms)
        else:
            r["error"] = ms
        rows.append(r)
        print(fmt_row(r) if "ms" in r else "%-22s %-36s %s" % (shape, name, r["error"]), flush=True)

    torch.manual_seed(0)
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = (torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5).requires_grad_(True)
    dy = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)

    def step(fwd, params):
        def f(i):
            for p in params:
                p.grad = None
            fwd(x).backward(dy)
        return f

    bf16_step = step(lambda t: torch.nn.functional.linear(t, w), [x, w])
    bf16 = time_gpu(bf16_step, iters=iters)
    row("torch F.linear bf16", bf16, bf16)
    rows[-1]["kernels"] = step_kernels(bf16_step)
    try:
        os.environ.setdefault("LIBQUANT_LIBRARY", args.lib)
        sys.path.insert(0, os.path.join(ROOT, "python"))
        import libquant.torch as lqt
        presets = {"fp8_delayed": lqt.DelayedScaling, "fp8_current": lqt.Float8CurrentScaling, "fp8_block": lqt.Float8BlockScaling,
                   "mxfp8": lqt.MXFP8BlockScaling, "nvfp4": lqt.NVFP4BlockScaling}
    except Exception as e:  # noqa: BLE001 - the GEMM table above still stands
        for name in LINEAR_RECIPES:
            row("libquant.torch.Linear " + name, "unsupported: libquant.torch: %s" % str(e).split("\n")[0][:200])
        return rows
    for name in LINEAR_RECIPES:
        try:
            mod = lqt.Linear(k, n, bias=False, device="cuda", dtype=torch.bfloat16, recipe=presets[name]())
            with torch.no_grad():
                mod.weight.copy_(w)
            mod.weight_updated()
            f = step(mod, [x, mod.weight])
            f(0)
            torch.cuda.synchronize()
            # Timed in alternation with BF16 F.linear (time_paired), as the
            # GEMM rows are: the ratio is the one of the same clocks.
            t_lq, t_bf16 = time_paired(f, bf16_step, iters=iters)
            row("libquant.torch.Linear " + name, t_lq, t_bf16)
            rows[-1]["kernels"] = step_kernels(f)
        except Exception as e:  # noqa: BLE001 - a refused recipe is a row, not the end of the run
            row("libquant.torch.Linear " + name, "unsupported: %s" % str(e).split("\n")[0][:200])
        torch.cuda.synchronize()
    return rows


def step_kernels(f, calls=3):
    """Where one linear step's GPU time goes (torch.profiler): 'total us: name
    us xN, ...', the kernels summed by short name, longest first."""
    try:
        by = {}
        for us, key, n in profile_kernels(f, calls):
            short = key.replace("(anonymous namespace)::", "").replace("void ", "")
            short = short.split("<")[0].split("(")[0].strip().split("::")[-1][:40]
            t, c = by.get(short, (0.0, 0))
            by[short] = (t + us, c + n)
        items = sorted(by.items(), key=lambda kv: -kv[1][0])
        total = sum(t for t, _ in by.values())
        return "%.0f us: " % total + ", ".join("%s %.0f us x%d" % (k, t, c) for k, (t, c) in items[:12])
    except Exception as e:  # noqa: BLE001 - the profile is extra information
        return "profiler: %s" % str(e).split("\n")[0][:100]


def fmt_row(r):
    if "ms" not in r:
        return "%-22s %-36s %s" % (r["shape"], r["name"], r.get("error"))
    return "%-22s %-36s %8.3f ms %6.0f TFLOP/s  %.2fx bf16%s" % (r["shape"], r["name"], r["ms"], r["tflops"], r["vs_bf16"],
                                                             "  %.2fx fp8" % r["vs_fp8"] if "vs_fp8" in r else "")


if __name__ == "__main__":
    main()
