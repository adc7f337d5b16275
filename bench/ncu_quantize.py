#!/usr/bin/env python3
"""A few quantize calls of one format, shape and usage, for Nsight Compute
(run on the GPU machine), e.g.

    ncu --clock-control none -k regex:fp8_block --launch-skip 2 --launch-count 1 \\
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \\
        python3 bench/ncu_quantize.py fp8_block both 8192x8192

Format fields as in bench/gpu_quantize.py's FORMATS (e.g. block_dims=2). A
shape GxMxK runs one quant_quantize_grouped call of G tensors of MxK per
quantize (gpu_quantize.py's MoE batch is 64x256x7168).

With --kernels first, no Nsight Compute: the kernels of one call and their
mean duration (torch.profiler over 5 calls after the warm-up), e.g.

    python3 bench/ncu_quantize.py --kernels nvfp4 columnwise 8191x8191 rht=1
"""
import ctypes as C
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_quantize as gq  # noqa: E402


def main():
    argv = sys.argv[1:]
    kernels = argv[:1] == ["--kernels"]
    if kernels:
        argv = argv[1:]
    fmt, usage, dims = argv[0], argv[1], tuple(int(d) for d in argv[2].split("x"))
    fields = dict((kv.split("=")[0], int(kv.split("=")[1])) for kv in argv[3:])
    lib = gq.Lib(os.environ.get("LIBQUANT_LIBRARY", os.path.join(gq.ROOT, "build", "libquant.so")))
    u = {"rowwise": gq.ROW, "columnwise": gq.COL, "both": gq.BOTH}[usage]
    groups, shape = (dims[0], dims[1:]) if len(dims) == 3 else (0, dims)
    stream = torch.cuda.current_stream().cuda_stream
    p = gq.Prepared(lib, gq.config(fmt, u, **fields), shape, "cuda")
    if groups:
        xs = [torch.randn(*shape, dtype=torch.bfloat16, device="cuda") for _ in range(groups)]
        dls = (gq.DLTensor * groups)(*[gq.dl_from_torch(x) for x in xs])
        outs = (C.c_void_p * groups)(p.t.value, *[p.add_tensor(shape, "cuda").value for _ in range(groups - 1)])
        ga = gq.GroupedArgs(C.sizeof(gq.GroupedArgs), groups, dls, outs, C.c_void_p(stream))

        def call(_):
            lib.check(lib.quant_quantize_grouped(p.q, C.byref(ga)), "quant_quantize_grouped")
    else:
        x = torch.randn(*shape, dtype=torch.bfloat16, device="cuda")
        opts = gq.Options(C.sizeof(gq.Options), C.c_void_p(stream), None, 0)
        xd = gq.dl_from_torch(x)

        def call(_):
            p.run(xd, opts)
    for i in range(4):
        call(i)
    torch.cuda.synchronize()
    if kernels:
        from gpu_gemm import profile_kernels
        print("%s %s %s %s: kernels per call (torch.profiler, mean of 5 calls)" % (fmt, usage, argv[2], " ".join(argv[3:])))
        for us, key, n in profile_kernels(call):
            print("  %8.1f us  x%d  %s" % (us, n, key[:150]))
    p.free()


if __name__ == "__main__":
    main()
