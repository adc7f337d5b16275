#!/usr/bin/env python3
"""GPU quantize benchmark for libquant's CUDA plugin (run on the GPU machine).

Calls libquant's C ABI through ctypes with DLTensors built over PyTorch CUDA
tensors, the way a framework binding does: buffers allocated by PyTorch from
quant_quantizer_layout, wrapped once with quant_qtensor_from_buffers, then
quant_quantize_into on PyTorch's current stream.

For each shape, format and usage it prints the median time (CUDA events, many
runs, inputs rotated so the L2 cache does not serve them), the effective GB/s
on the minimum bytes (input read once + every output byte written once), that
as a fraction of a device-to-device copy measured in the same run, and for
formats that need a global amax first the fraction of the two-read bound.
Next to it, where asked, a torch.compile implementation of the same math, and
for a small shape the host time per call. Before timing, each format's GPU
bytes are compared with libquant's CPU bytes through the same ABI.

    python3 bench/gpu_quantize.py [--lib build/libquant.so] [--out DIR] [--quick]
        [--formats nvfp4,mxfp4] [--shapes 8192x8192] [--label before] [--compile-budget 0]
"""
import argparse
import ctypes as C
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ---------------------------------------------------------------------------
# quant.h through ctypes
# ---------------------------------------------------------------------------

kDLCPU, kDLCUDA = 1, 2

# The struct declarations are the Python package's (python/libquant/_lib.py),
# which python/tests/test_layout.py checks against quant.h field by field.
sys.path.insert(0, os.path.join(ROOT, "python"))
from libquant._lib import DLDataType, DLDevice, DLTensor  # noqa: E402
from libquant._lib import quant_buffer_desc as BufferDesc  # noqa: E402
from libquant._lib import quant_plugin_info as PluginInfo  # noqa: E402
from libquant._lib import quant_plugin_kernel_info as PluginKernelInfo  # noqa: E402
from libquant._lib import quant_quantize_options as Options  # noqa: E402
from libquant._lib import quant_quantizer_config as Config  # noqa: E402
from libquant._lib import quant_quantize_grouped_args as GroupedArgs  # noqa: E402


class Lib:
    def __init__(self, path):
        self.l = C.CDLL(path)
        self.l.quant_last_error.restype = C.c_char_p
        self.l.quant_status_string.restype = C.c_char_p
        self.l.quant_abi_version.restype = C.c_uint32

    def check(self, status, what):
        if status != 0:
            raise RuntimeError("%s: %s: %s" % (what, self.l.quant_status_string(status).decode(),
                                                self.l.quant_last_error().decode()))

    def __getattr__(self, name):
        return getattr(self.l, name)


_keep = []  # shape arrays the DLTensors point at


def dl_from_torch(t, dtype=None, shape=None):
    """A DLTensor over a contiguous torch tensor (dtype/shape override for raw buffers)."""
    assert t.is_contiguous()
    if dtype is None:
        dtype = {torch.bfloat16: (4, 16), torch.float16: (2, 16), torch.float32: (2, 32), torch.uint8: (1, 8)}[t.dtype]
        dtype = DLDataType(dtype[0], dtype[1], 1)
    shape = list(t.shape) if shape is None else list(shape)
    arr = (C.c_int64 * len(shape))(*shape)
    _keep.append(arr)
    dev = DLDevice(kDLCUDA, t.device.index) if t.is_cuda else DLDevice(kDLCPU, 0)
    return DLTensor(C.c_void_p(t.data_ptr()), dev, len(shape), dtype, arr, None, 0)


def config(fmt, usage, **kw):
    c = Config()
    c.struct_size = C.sizeof(Config)
    c.format = fmt.encode()
    c.usage = usage
    for k, v in kw.items():
        setattr(c, k, v)
    return c


class Prepared:
    """A quantizer and a quantized tensor over torch-allocated buffers."""

    def __init__(self, lib, cfg, shape, device):
        self.lib = lib
        self.q = C.c_void_p()
        lib.check(lib.quant_quantizer_create(C.byref(cfg), C.byref(self.q)), "quant_quantizer_create")
        sh = (C.c_int64 * 2)(*shape)
        n = C.c_size_t()
        lib.check(lib.quant_quantizer_layout(self.q, sh, 2, None, C.c_size_t(0), C.byref(n)), "layout")
        descs = (BufferDesc * n.value)()
        lib.check(lib.quant_quantizer_layout(self.q, sh, 2, descs, C.c_size_t(n.value), C.byref(n)), "layout")
        self.bufs, dls = [], (DLTensor * n.value)()
        self.out_bytes = 0
        for i, d in enumerate(descs):
            b = torch.empty(d.nbytes, dtype=torch.uint8, device=device)
            self.bufs.append((d.direction, d.kind, b))
            dls[i] = dl_from_torch(b, dtype=d.dtype, shape=list(d.shape)[:d.ndim])
            self.out_bytes += d.nbytes
        self.extra = []
        self.t = C.c_void_p()
        lib.check(lib.quant_qtensor_from_buffers(self.q, sh, 2, dls, C.c_size_t(n.value), C.byref(self.t)), "from_buffers")

    def run(self, x_dl, opts):
        self.lib.check(self.lib.quant_quantize_into(self.q, C.byref(x_dl), C.byref(opts), self.t), "quantize_into")

    def add_tensor(self, shape, device):
        """Another quantized tensor of this quantizer over torch buffers (a group member)."""
        sh = (C.c_int64 * 2)(*shape)
        n = C.c_size_t()
        self.lib.check(self.lib.quant_quantizer_layout(self.q, sh, 2, None, C.c_size_t(0), C.byref(n)), "layout")
        descs = (BufferDesc * n.value)()
        self.lib.check(self.lib.quant_quantizer_layout(self.q, sh, 2, descs, C.c_size_t(n.value), C.byref(n)), "layout")
        dls = (DLTensor * n.value)()
        for i, d in enumerate(descs):
            b = torch.empty(d.nbytes, dtype=torch.uint8, device=device)
            self.bufs.append((d.direction, d.kind, b))
            dls[i] = dl_from_torch(b, dtype=d.dtype, shape=list(d.shape)[:d.ndim])
        t = C.c_void_p()
        self.lib.check(self.lib.quant_qtensor_from_buffers(self.q, sh, 2, dls, C.c_size_t(n.value), C.byref(t)), "from_buffers")
        self.extra.append(t)
        return t

    def free(self):
        for t in getattr(self, "extra", []):
            self.lib.quant_qtensor_free(t)
        self.lib.quant_qtensor_free(self.t)
        self.lib.quant_quantizer_free(self.q)


# ---------------------------------------------------------------------------
# Formats
# ---------------------------------------------------------------------------

ROW, COL, BOTH = 1, 2, 3
USAGES = [("rowwise", ROW), ("columnwise", COL), ("both", BOTH)]

# name, format, config fields, global-amax reads of the input before the cast
FORMATS = [
    # The last field: input reads the global amaxes cost before the quantize
    # pass (0: none); amax_reads() resolves "rht" by direction.
    ("fp8 current e4m3", "fp8", {}, 1),
    ("fp8 delayed e4m3", "fp8", {"scaling": 1}, 0),
    ("mxfp8 e4m3", "mxfp8", {}, 0),
    ("mxfp8 e4m3 swizzled", "mxfp8", {"gemm_swizzled_scales": 1}, 0),
    ("mxfp4", "mxfp4", {}, 0),
    ("nvfp4 1x16", "nvfp4", {}, 1),
    ("nvfp4 1x16 rht", "nvfp4", {"rht": 1}, "rht"),
    ("nvfp4 1x16 rht sr", "nvfp4", {"rht": 1, "stochastic_rounding": 1, "seed": 7}, "rht"),
    ("nvfp4 16x16", "nvfp4", {"block_dims": 2}, 1),
    ("fp8_block 1x128", "fp8_block", {}, 0),
    ("fp8_block 128x128", "fp8_block", {"block_dims": 2}, 0),
]


def amax_reads(reads, usage):
    """Input reads of the amax passes: with the RHT the rowwise copy needs the
    plain amax and the columnwise one the RHT amax (spec §5.5), each one pass."""
    if reads == "rht":
        return 2 if usage == BOTH else 1
    return reads


def served_formats(lib):
    """Formats the loaded CUDA plugin has kernels for."""
    n = C.c_size_t()
    lib.check(lib.quant_plugin_count(C.byref(n)), "plugin_count")
    out, report = set(), []
    for i in range(n.value):
        info = PluginInfo()
        info.struct_size = C.sizeof(PluginInfo)
        lib.check(lib.quant_plugin_get_info(C.c_size_t(i), C.byref(info)), "plugin_info")
        report.append("%s (%s) status=%d %s" % (info.name.decode(), info.path.decode(), info.status, info.message.decode()))
        for k in range(info.num_kernels):
            ki = PluginKernelInfo()
            ki.struct_size = C.sizeof(PluginKernelInfo)
            lib.check(lib.quant_plugin_get_kernel(C.c_size_t(i), C.c_size_t(k), C.byref(ki)), "plugin_kernel")
            if ki.device_type == kDLCUDA:
                out.add(ki.format.decode())
    return out, report


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------

def time_gpu(fn, iters=50, warmup=5, min_ms=0.2):
    """Median milliseconds per fn() call between CUDA events. A sample holds
    enough back-to-back calls to keep the GPU busy for about min_ms, so that
    for short kernels the host's enqueue time (several us per call) does not
    open gaps between them inside the events: what is measured is the time per
    call in a stream of calls, the bandwidth a training loop sees."""
    for i in range(warmup):
        fn(i)
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn(0)
    e.record()
    torch.cuda.synchronize()
    reps = max(1, min(20, int(min_ms / max(s.elapsed_time(e), 1e-3) + 0.999)))
    times = []
    for i in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for j in range(reps):
            fn(i * reps + j)
        e.record()
        times.append((s, e))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in times) / reps


def copy_bandwidth(n=512 * 1024 * 1024):
    """Read+write GB/s of a device-to-device copy of n BF16 elements (default 1 GiB)."""
    x = torch.randn(n, dtype=torch.bfloat16, device="cuda")
    y = torch.empty_like(x)
    ms = time_gpu(lambda i: y.copy_(x), iters=30)
    del x, y
    return 2 * n * 2 / (ms * 1e-3) / 1e9


# ---------------------------------------------------------------------------
# torch.compile implementations of the same math (not bit-exact references)
# ---------------------------------------------------------------------------

def _e8m0_ceil(scale):
    bits = scale.view(torch.int32)
    e = (bits >> 23) & 0xFF
    return e + ((bits & 0x7FFFFF) != 0).to(torch.int32)


def torch_fp8_current(x, rows, cols):
    amax = x.abs().amax().float()
    scale = 448.0 / amax
    q = (x.float() * scale).clamp(-448, 448).to(torch.float8_e4m3fn)
    out = []
    if rows:
        out.append(q)
    if cols:
        out.append(q.t().contiguous())
    return out, (1.0 / scale)


def _mx_blocks(xf, emax_rcp, qmax):
    amax = xf.abs().amax(-1, keepdim=True)
    e = _e8m0_ceil(amax * emax_rcp)
    f = ((254 - e) << 23).view(torch.float32)
    return (xf * f).clamp(-qmax, qmax), e.to(torch.uint8)


def torch_mxfp8(x, rows, cols):
    m, k = x.shape
    out = []
    xf = x.float()
    if rows:
        q, e = _mx_blocks(xf.view(m, k // 32, 32), 1 / 448, 448)
        out += [q.view(m, k).to(torch.float8_e4m3fn), e]
    if cols:
        q, e = _mx_blocks(xf.view(m // 32, 32, k).transpose(1, 2), 1 / 448, 448)
        out += [q.transpose(1, 2).reshape(m, k).to(torch.float8_e4m3fn), e]
    return out


def _e2m1_codes(y):
    a = y.abs()
    c = ((a > 0.25).int() + (a >= 0.75).int() + (a > 1.25).int() + (a >= 1.75).int() + (a > 2.5).int() +
         (a >= 3.5).int() + (a > 5).int())
    c = c | ((y < 0).int() << 3)
    c = c.to(torch.uint8)
    return c[..., 0::2] | (c[..., 1::2] << 4)


def _nvfp4_dir(xf):
    m, k = xf.shape
    amax = xf.abs().amax()
    s_enc = 2688.0 / amax
    b = xf.view(m, k // 16, 16)
    bamax = b.abs().amax(-1, keepdim=True)
    s = (bamax * (s_enc / 6)).clamp(max=448).to(torch.float8_e4m3fn)
    enc = 1.0 / (s.float() * (1.0 / s_enc))
    q = _e2m1_codes(b * enc).view(m, k // 2)
    return q, s


def torch_nvfp4(x, rows, cols):
    out = []
    xf = x.float()
    if rows:
        out += list(_nvfp4_dir(xf))
    if cols:
        out += list(_nvfp4_dir(xf.t().contiguous()))
    return out


def torch_mxfp4(x, rows, cols):
    m, k = x.shape
    out = []
    xf = x.float()
    if rows:
        q, e = _mx_blocks(xf.view(m, k // 32, 32), 1 / 6, 6)
        out += [_e2m1_codes(q.view(m, k)), e]
    if cols:
        q, e = _mx_blocks(xf.t().contiguous().view(k, m // 32, 32), 1 / 6, 6)
        out += [_e2m1_codes(q.view(k, m)), e]
    return out


TORCH_IMPLS = {"fp8 current e4m3": torch_fp8_current, "mxfp8 e4m3": torch_mxfp8, "nvfp4 1x16": torch_nvfp4, "mxfp4": torch_mxfp4}


# ---------------------------------------------------------------------------


def exact_shape(shape):
    """The shape a row's exactness is checked at: (256 + M mod 256, 512 + K mod 512),
    the row's own residues modulo every block and tile size (16 .. 256) and its
    rows' alignment, at a size the CPU quantizes quickly; 8191x8191 is checked at
    511x1023, so that ragged rows are checked on their own kernel instances."""
    return (256 + shape[0] % 256, 512 + shape[1] % 512)


def exactness(lib, fmt, fields, usage, stream, shape=(256, 512)):
    """GPU bytes vs CPU bytes through the C ABI on one random input of this shape."""
    x = torch.randn(*shape, dtype=torch.bfloat16, device="cuda") * 3
    x[0, :7] = float("inf")
    x[3, 5] = float("nan")
    x[17] = 0
    outs = []
    for dev, xx in (("cuda", x), ("cpu", x.cpu())):
        p = Prepared(lib, config(fmt, usage, **fields), shape, dev)
        for _, _, b in p.bufs:
            b.fill_(0xA5)
        opts = Options(C.sizeof(Options), C.c_void_p(stream if dev == "cuda" else 0), None, 0)
        p.run(dl_from_torch(xx), opts)
        torch.cuda.synchronize()
        outs.append([b.cpu() for _, _, b in p.bufs])
        p.free()
    return all(torch.equal(a, b) for a, b in zip(*outs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default=os.path.join(ROOT, "build", "libquant.so"))
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--quick", action="store_true", help="one shape, fewer runs")
    ap.add_argument("--compile-budget", type=float, default=150, help="seconds allowed for torch.compile")
    ap.add_argument("--formats", default="", help="comma-separated FORMATS names (exact): only those rows")
    ap.add_argument("--shapes", default="", help="comma-separated MxK shapes instead of the defaults (e.g. 8192x8192)")
    ap.add_argument("--label", default="", help="text added to each row's format name (e.g. 'before')")
    args = ap.parse_args()
    wanted = [f.strip() for f in args.formats.split(",") if f.strip()]

    lib = Lib(args.lib)
    served, report = served_formats(lib)
    dev = torch.cuda.get_device_name()
    print("device:", dev, "| torch", torch.__version__, "| plugins:", "; ".join(report))
    stream = torch.cuda.current_stream().cuda_stream
    copy_bw = copy_bandwidth()
    print("device-to-device copy: %.0f GB/s" % copy_bw)

    rows = []
    exact = {}
    shapes = [(8192, 8192), (2048, 7168)] if not args.quick else [(8192, 8192)]
    if args.shapes:
        shapes = [tuple(int(d) for d in sh.split("x")) for sh in args.shapes.split(",")]
    # The same copy at each shape's size: what a kernel of that size reaches
    # at best (a short kernel pays its launch, ramp and tail on fewer bytes).
    shape_copy = {sh: copy_bandwidth(sh[0] * sh[1]) for sh in shapes}
    for sh, bw in shape_copy.items():
        print("copy of a %dx%d BF16 tensor: %.0f GB/s (%.0f%% of the large copy)" % (sh[0], sh[1], bw, 100 * bw / copy_bw))
    compile_left = args.compile_budget
    for name, fmt, fields, reads in FORMATS:
        if wanted and name not in wanted:
            continue
        fields = dict(fields)
        if fmt not in served:
            print("%-24s not served by the CUDA plugin: skipped" % name)
            continue
        for uname, usage in USAGES:
            for es in sorted({exact_shape(sh) for sh in shapes}):
                try:
                    exact[(name, uname, es)] = exactness(lib, fmt, fields, usage, stream, es)
                except Exception as e:  # noqa: BLE001 - a row failing must not stop the table
                    exact[(name, uname, es)] = "error: %s" % e
        for shape in shapes:
            xs = [torch.randn(*shape, dtype=torch.bfloat16, device="cuda") for _ in range(3)]
            dls = [dl_from_torch(x) for x in xs]
            in_bytes = xs[0].numel() * 2
            for uname, usage in USAGES:
                row = {"format": name + (" " + args.label if args.label else ""), "shape": "%dx%d" % shape, "usage": uname,
                       "exact": exact.get((name, uname, exact_shape(shape)))}
                try:
                    p = Prepared(lib, config(fmt, usage, **fields), shape, "cuda")
                    opts = Options(C.sizeof(Options), C.c_void_p(stream), None, 0)
                    ms = time_gpu(lambda i: p.run(dls[i % 3], opts), iters=20 if args.quick else 60)
                    min_bytes = in_bytes + p.out_bytes
                    gbs = min_bytes / (ms * 1e-3) / 1e9
                    row.update(ms=ms, gbs=gbs, copy_frac=gbs / copy_bw)
                    if amax_reads(reads, usage):
                        bound = (min_bytes + amax_reads(reads, usage) * in_bytes) / (ms * 1e-3) / 1e9
                        row["two_read_frac"] = bound / copy_bw
                        # The global-amax pass alone (quant_compute_amax), to
                        # split the time between the two passes.
                        amax_t = torch.empty(2, dtype=torch.float32, device="cuda")
                        adl = dl_from_torch(amax_t)
                        row["amax_ms"] = time_gpu(lambda i: lib.check(lib.quant_compute_amax(p.q, C.byref(dls[i % 3]), C.byref(adl), C.c_void_p(stream)), "amax"), iters=20)
                    p.free()
                except Exception as e:  # noqa: BLE001
                    row["error"] = str(e)
                impl = TORCH_IMPLS.get(name)
                if impl is not None and shape == (8192, 8192) and uname in ("rowwise", "both") and compile_left > 0:
                    t0 = time.time()
                    try:
                        f = torch.compile(lambda x, impl=impl, r=usage & 1, c=usage & 2: impl(x, r, c))
                        f(xs[0])
                        tms = time_gpu(lambda i: f(xs[i % 3]), iters=20)
                        row["torch_compile_ms"] = tms
                        row["speedup_vs_compile"] = tms / row["ms"] if "ms" in row else None
                    except Exception as e:  # noqa: BLE001
                        row["torch_compile_error"] = str(e)[:200]
                    compile_left -= time.time() - t0
                rows.append(row)
                print(fmt_row(row), flush=True)
            del xs

    # MoE batch: 64 expert tensors of 256x7168 through one quant_quantize_grouped
    # call, next to 64 quant_quantize_into calls (one launch for the group where
    # the plugin has a grouped kernel: fp8_block, mxfp8, mxfp4; three for fp8 and
    # nvfp4, whose amaxes come first; one call per tensor otherwise).
    moe = []
    moe_g, moe_shape = 64, (256, 7168)
    if not args.quick:
        for name, fmt, fields, reads in FORMATS:
            if (wanted and name not in wanted) or fmt not in served:
                continue
            xs = [torch.randn(*moe_shape, dtype=torch.bfloat16, device="cuda") for _ in range(moe_g)]
            dls = (DLTensor * moe_g)(*[dl_from_torch(x) for x in xs])
            in_bytes = moe_g * xs[0].numel() * 2
            for uname, usage in USAGES:
                row = {"format": name, "usage": uname}
                try:
                    p = Prepared(lib, config(fmt, usage, **fields), moe_shape, "cuda")
                    outs = (C.c_void_p * moe_g)(p.t.value, *[p.add_tensor(moe_shape, "cuda").value for _ in range(moe_g - 1)])
                    ga = GroupedArgs(C.sizeof(GroupedArgs), moe_g, dls, outs, C.c_void_p(stream))
                    out_bytes = sum(b.numel() for _, _, b in p.bufs)
                    ms = time_gpu(lambda i: lib.check(lib.quant_quantize_grouped(p.q, C.byref(ga)), "grouped"), iters=20)
                    opts = Options(C.sizeof(Options), C.c_void_p(stream), None, 0)

                    def loop(i):
                        for j in range(moe_g):
                            lib.check(lib.quant_quantize_into(p.q, C.byref(dls[j]), C.byref(opts), C.c_void_p(outs[j])), "into")
                    loop_ms = time_gpu(loop, iters=10)
                    gbs = (in_bytes + out_bytes) / (ms * 1e-3) / 1e9
                    row.update(ms=ms, loop_ms=loop_ms, gbs=gbs, copy_frac=gbs / copy_bw)
                    if amax_reads(reads, usage):
                        row["two_read_frac"] = (in_bytes + out_bytes + amax_reads(reads, usage) * in_bytes) / (ms * 1e-3) / 1e9 / copy_bw
                    p.free()
                except Exception as e:  # noqa: BLE001
                    row["error"] = str(e)
                moe.append(row)
                print("MoE %dx%s %-24s %-10s %s" % (moe_g, moe_shape, name, uname, row), flush=True)
            del xs, dls

    # Host overhead per call on a small shape (enqueue time, no sync), against
    # an empty ctypes call into libquant. Batches of 200 calls with the GPU idle
    # before each: the launch queue (about 1000 entries) never fills, so a call
    # never waits for the GPU to make room (with 5000 calls in a row it did, and
    # the figure was the GPU's time per call). Also the events' time per call
    # over 200 calls in a row: the GPU's time per call, or the host's where
    # enqueueing is the slower of the two.
    overhead = {}
    for name, fmt, fields, _ in FORMATS:
        if fmt not in served or name not in ("fp8 current e4m3", "mxfp8 e4m3", "nvfp4 1x16", "fp8 delayed e4m3", "mxfp4", "fp8_block 1x128"):
            continue
        if wanted and name not in wanted:
            continue
        x = torch.randn(128, 256, dtype=torch.bfloat16, device="cuda")
        p = Prepared(lib, config(fmt, BOTH, **fields), (128, 256), "cuda")
        xd = dl_from_torch(x)
        opts = Options(C.sizeof(Options), C.c_void_p(stream), None, 0)
        # The call as a binding makes it: a ctypes function with its argtypes
        # declared, arguments built once, the status checked (no per-call
        # attribute lookups or byref objects in the harness).
        fn = C.CFUNCTYPE(C.c_int32, C.c_void_p, C.c_void_p, C.c_void_p, C.c_void_p)(("quant_quantize_into", lib.l))
        call_args = (p.q.value, C.addressof(xd), C.addressof(opts), p.t.value)
        for _ in range(100):
            p.run(xd, opts)
        torch.cuda.synchronize()
        n, batches = 200, 25

        def host_us(f, a, what):
            """Fastest and median batch, us per call."""
            per_call = []
            for _ in range(batches):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(n):
                    st = f(*a)
                    if st:
                        lib.check(st, what)
                per_call.append((time.perf_counter() - t0) / n * 1e6)
            torch.cuda.synchronize()
            per_call.sort()
            return per_call[0], per_call[len(per_call) // 2]
        fastest, median = host_us(fn, call_args, "quantize_into")
        # The same call through a quantize plan (quant_quantize_plan_run: the
        # input's address and the stream; the CUDA plugin's call prepared once).
        plan = C.c_void_p()
        lib.check(lib.quant_quantize_plan_create(p.q, C.byref(xd), C.byref(opts), p.t, C.byref(plan)), "plan_create")
        run = C.CFUNCTYPE(C.c_int32, C.c_void_p, C.c_void_p, C.c_void_p)(("quant_quantize_plan_run", lib.l))
        run_args = (plan.value, x.data_ptr(), stream)
        for _ in range(100):
            run(*run_args)
        plan_fastest, plan_median = host_us(run, run_args, "plan_run")
        lib.check(lib.quant_quantize_plan_free(plan), "plan_free")
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(n):
            fn(*call_args)
        e1.record()
        torch.cuda.synchronize()
        gpu_us = e0.elapsed_time(e1) * 1e3 / n
        empty = C.CFUNCTYPE(C.c_uint32)(("quant_abi_version", lib.l))
        t2 = time.perf_counter()
        for _ in range(5000):
            empty()
        t3 = time.perf_counter()
        overhead[name] = (fastest, median, (t3 - t2) / 5000 * 1e6, gpu_us, plan_fastest, plan_median)
        p.free()

    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = ["Device: %s; torch %s; %s; copy %.0f GB/s (read+write, same run)." % (dev, torch.__version__, date, copy_bw), "",
             "| shape | format | usage | exact vs CPU | ms | GB/s | of copy | of two-read bound | amax pass ms | torch.compile ms | speedup |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    lines.insert(1, "\"exact vs CPU\": GPU bytes = CPU bytes at (256 + M mod 256) x (512 + K mod 512), the row's raggedness (exact_shape).")
    lines.insert(2, "Copy of one tensor of the shape (same run; \"of copy\" is against the large copy): " + ", ".join(
        "%dx%d %.0f GB/s (%.0f%%)" % (sh[0], sh[1], bw, 100 * bw / copy_bw) for sh, bw in shape_copy.items()) + ".")
    for r in rows:
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["shape"], r["format"], r["usage"], r.get("exact"), f2(r.get("ms"), 3), f2(r.get("gbs"), 0),
            pct(r.get("copy_frac")), pct(r.get("two_read_frac")), f2(r.get("amax_ms"), 3), f2(r.get("torch_compile_ms"), 3),
            ("%.1fx" % r["speedup_vs_compile"]) if r.get("speedup_vs_compile") else r.get("error", r.get("torch_compile_error", ""))[:60]))
    if moe:
        lines += ["", "MoE batch: %d tensors of %dx%d BF16, one quant_quantize_grouped call against %d quant_quantize_into calls:" % (
            moe_g, moe_shape[0], moe_shape[1], moe_g), "",
            "| format | usage | grouped ms | GB/s | of copy | of two-read bound | %d calls ms |" % moe_g,
            "| --- | --- | --- | --- | --- | --- | --- |"]
        for r in moe:
            lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (r["format"], r["usage"], f2(r.get("ms"), 3), f2(r.get("gbs"), 0),
                                                              pct(r.get("copy_frac")), pct(r.get("two_read_frac")),
                                                              f2(r.get("loop_ms"), 3) if "loop_ms" in r else r.get("error", "")[:60]))
    lines += ["", "Host time per quant_quantize_into call, 128x256 BF16, both directions (enqueue only, via ctypes, argtypes "
              "declared; 25 batches of 200 calls, the GPU idle before each: fastest / median batch), and the events' time per "
              "call in a run of 200 (events; the host's time where it is the slower):", "",
              "| format | host us, fastest batch | median batch | empty ctypes call us | events us per call, 200 in a row "
              "| quant_quantize_plan_run us, fastest / median batch |", "| --- | --- | --- | --- | --- | --- |"]
    for name, (us, med, base, gpu, pus, pmed) in overhead.items():
        lines.append("| %s | %.1f | %.1f | %.1f | %.1f | %.1f / %.1f |" % (name, us, med, base, gpu, pus, pmed))
    text = "\n".join(lines)
    print()
    print(text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "bench_gpu.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(args.out, "bench_gpu.json"), "w") as f:
        json.dump({"device": dev, "date": date, "copy_gbs": copy_bw, "shape_copy_gbs": {"%dx%d" % sh: bw for sh, bw in shape_copy.items()}, "rows": rows, "moe": moe,
                   "overhead_us": overhead, "command": " ".join(sys.argv)}, f, indent=1, default=str)


def f2(v, d):
    return "" if v is None else ("%." + str(d) + "f") % v


def pct(v):
    return "" if v is None else "%.0f%%" % (100 * v)


def fmt_row(r):
    return "%-10s %-24s %-10s exact=%-5s %8s ms %6s GB/s %5s of copy %5s two-read  compile %s ms %s" % (
        r["shape"], r["format"], r["usage"], r.get("exact"), f2(r.get("ms"), 3), f2(r.get("gbs"), 0), pct(r.get("copy_frac")),
        pct(r.get("two_read_frac")), f2(r.get("torch_compile_ms"), 3), r.get("error", r.get("torch_compile_error", "")))


if __name__ == "__main__":
    main()
