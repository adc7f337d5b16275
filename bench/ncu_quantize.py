#!/usr/bin/env python3
"""A few quantize calls of one format, shape and usage, for Nsight Compute
(run on the GPU machine), e.g.

    ncu --clock-control none -k regex:fp8_block --launch-skip 2 --launch-count 1 \\
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \\
        python3 bench/ncu_quantize.py fp8_block both 8192x8192

Format fields as in bench/gpu_quantize.py's FORMATS (e.g. block_dims=2). A
shape GxMxK runs one quant_quantize_grouped call of G tensors of MxK per
quantize (gpu_quantize.py's MoE batch is 64x256x7168).
"""
import ctypes as C
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_quantize as gq  # noqa: E402


def main():
    fmt, usage, dims = sys.argv[1], sys.argv[2], tuple(int(d) for d in sys.argv[3].split("x"))
    fields = dict((kv.split("=")[0], int(kv.split("=")[1])) for kv in sys.argv[4:])
    lib = gq.Lib(os.path.join(gq.ROOT, "build", "libquant.so"))
    u = {"rowwise": gq.ROW, "columnwise": gq.COL, "both": gq.BOTH}[usage]
    groups, shape = (dims[0], dims[1:]) if len(dims) == 3 else (0, dims)
    stream = torch.cuda.current_stream().cuda_stream
    p = gq.Prepared(lib, gq.config(fmt, u, **fields), shape, "cuda")
    if groups:
        xs = [torch.randn(*shape, dtype=torch.bfloat16, device="cuda") for _ in range(groups)]
        dls = (gq.DLTensor * groups)(*[gq.dl_from_torch(x) for x in xs])
        outs = (C.c_void_p * groups)(p.t.value, *[p.add_tensor(shape, "cuda").value for _ in range(groups - 1)])
        ga = gq.GroupedArgs(C.sizeof(gq.GroupedArgs), groups, dls, outs, C.c_void_p(stream))
        for _ in range(4):
            lib.check(lib.quant_quantize_grouped(p.q, C.byref(ga)), "quant_quantize_grouped")
    else:
        x = torch.randn(*shape, dtype=torch.bfloat16, device="cuda")
        opts = gq.Options(C.sizeof(gq.Options), C.c_void_p(stream), None, 0)
        xd = gq.dl_from_torch(x)
        for _ in range(4):
            p.run(xd, opts)
    torch.cuda.synchronize()
    p.free()


if __name__ == "__main__":
    main()
