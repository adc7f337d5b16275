"""A GEMM of an MXFP8 x NVFP4 hybrid pair: activations quantized MXFP8 for the
forward pass, weights NVFP4, then Y = X W^T on the CPU (emulated: dequantized
tile by tile into an FP32 GEMM), checked against float64.

    python3 examples/python/hybrid_gemm.py
"""

import numpy as np

import libquant as lq

rng = np.random.default_rng(1)
x = rng.standard_normal((64, 256)).astype(np.float32)
w = rng.standard_normal((128, 256)).astype(np.float32) * 0.05

# one quantizer per direction: MXFP8 rowwise (forward), NVFP4 columnwise (backward)
hybrid = lq.Quantizer.hybrid(lq.Quantizer("mxfp8"), lq.Quantizer("nvfp4"))
xq = hybrid.quantize(x)
wq = lq.Quantizer("nvfp4").quantize(w)
print("X:", xq.formats, " W:", wq.formats)
print(lq.gemm_support("mxfp8", "nvfp4"))

y = lq.gemm(xq, wq, trans_b=True)  # fprop: X rowwise (mxfp8) x W rowwise (nvfp4)
ref = xq.dequantize(direction="rowwise").astype(np.float64) @ wq.dequantize().astype(np.float64).T
print("Y", y.shape, y.dtype, "max |Y - ref| = %.3g" % float(np.abs(y - ref).max()))
assert np.abs(y - ref).max() <= 1e-4 * np.abs(ref).max()

# wgrad-style: both operands transposed read their columnwise (nvfp4) side
dy = rng.standard_normal((64, 128)).astype(np.float32)
dyq = lq.Quantizer.hybrid(lq.Quantizer("mxfp8"), lq.Quantizer("nvfp4")).quantize(dy)
dw = lq.gemm(dyq, xq, trans_a=True)
print("dW", dw.shape, "from", dyq.formats[1], "x", xq.formats[1])
