"""The same with torch: tensors in, typed torch views out (float8_e4m3fn,
float8_e8m0fnu, float4_e2m1fn_x2), on CUDA when torch and libquant's CUDA
plugin are there, else on the CPU. torch.from_dlpack works on every buffer.

    python3 examples/python/torch_quantize.py
"""

import torch

import libquant as lq

cuda = torch.cuda.is_available() and any(
    p.loaded and any(k.device.type == "cuda" for k in p.kernels) for p in lq.plugins())
device = "cuda" if cuda else "cpu"
x = torch.randn(256, 512, device=device, dtype=torch.bfloat16)

qt = lq.Quantizer("mxfp8").quantize(x)  # on torch's current stream when on CUDA
row = qt.rowwise
assert row is not None and row.scale_inv is not None
print(device, row.data.torch().dtype, tuple(row.data.torch().shape), row.scale_inv.torch().dtype)
print("dlpack:", torch.from_dlpack(row.data).dtype)
y = qt.dequantize()  # a torch tensor on x's device
print("max abs error %.4f" % float((y - x.float()).abs().max()))

fp4 = lq.Quantizer("nvfp4").quantize(x)
assert fp4.columnwise is not None
print("nvfp4 columnwise", fp4.columnwise.data.torch().dtype, tuple(fp4.columnwise.data.torch().shape))

# caller-owned buffers (torch's allocator), re-quantized in place
q = lq.Quantizer("fp8")
dst = q.empty(x.shape, device=device, torch=True)
for step in range(3):
    q.quantize_into(x * (step + 1), dst)
print("fp8 amax after 3 steps:", float(dst.rowwise.amax.torch()[0]))  # type: ignore[union-attr]
