"""Quantize a NumPy array to MXFP8 and NVFP4 and look inside: the codes, the
scales and the error, all zero-copy views of libquant's buffers.

    python3 examples/python/numpy_quantize.py
"""

import ml_dtypes
import numpy as np

import libquant as lq

rng = np.random.default_rng(0)
x = (rng.standard_normal((128, 256)) * np.exp2(rng.integers(-8, 8, (128, 1)))).astype(np.float32)

q = lq.Quantizer("mxfp8")  # E4M3 elements, one E8M0 scale per 32, TE's RCEIL rule
qt = q.quantize(x)
print(qt)
row = qt.rowwise
assert row is not None and row.scale_inv is not None
codes = row.data.numpy()  # float8_e4m3fn [128, 256], no copy
scales = row.scale_inv.numpy()  # float8_e8m0fnu [128, 8] (padded to 128 x 4k)
print("codes", codes.dtype, codes.shape, "first row:", codes[0, :8])
print("scales", scales.dtype, scales.shape, "first row:", scales[0, :8].astype(np.float32))
y = qt.dequantize()
print("mxfp8 max relative error: %.4f" % float(np.max(np.abs(y - x) / np.abs(x).max(axis=1, keepdims=True))))

nv = lq.Quantizer("nvfp4", usage="rowwise").quantize(x.astype(ml_dtypes.bfloat16))
d = nv.rowwise
assert d is not None and d.amax is not None
print("nvfp4 packed", d.data.numpy().shape, "-> unpacked", d.data.unpack_fp4().shape,
      d.data.unpack_fp4().dtype, "global amax", d.amax.numpy()[0])
print("nvfp4 first values:", d.data.unpack_fp4()[0, :8].astype(np.float32))
