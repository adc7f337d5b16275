"""libquant: low-precision quantization (FP8, MXFP8, MXFP4, NVFP4, FP8 block, and
plugin formats such as the Go MXFP6 plugin) over its C ABI (include/quant.h),
through ctypes.

    import numpy as np, libquant
    q = libquant.Quantizer("mxfp8")
    qt = q.quantize(np.random.randn(128, 256).astype(np.float32))
    qt.rowwise.data.numpy()        # float8_e4m3fn [128, 256], zero-copy
    qt.rowwise.scale_inv.numpy()   # float8_e8m0fnu scales
    y = qt.dequantize()

Inputs are NumPy arrays, torch tensors (CPU and CUDA, on torch's current
stream) or any ``__dlpack__`` object, never copied. Every failed call raises a
LibquantError subclass with the library's message. Subpackages (libquant.torch)
build on the names below and on libquant._torch.
"""

from ._core import (
    BOTH,
    COLUMNWISE,
    ROWWISE,
    BufferDesc,
    Device,
    DirectionView,
    GemmSupport,
    PluginInfo,
    PluginKernel,
    QTensor,
    QTensorInfo,
    Quantizer,
    QuantizePlan,
    abi_version,
    compute_amax,
    dequantize,
    gemm,
    gemm_support,
    gemm_support_table,
    library_path,
    load_plugin,
    plugin_info,
    plugins,
    quantize,
    quantize_into,
    quantize_grouped,
    shutdown,
    status_string,
    update_usage,
    version,
)
from ._dlpack import Buffer, pack_fp4, pack_fp6, unpack_fp4, unpack_fp6
from ._errors import (
    BufferTooSmallError,
    DeviceUnavailableError,
    InternalError,
    InvalidArgumentError,
    InvalidHandleError,
    LibquantError,
    OutOfMemoryError,
    PluginError,
    PoisonedError,
    StateError,
    UnsupportedError,
)
from ._linear import Linear, LinearContext, LinearContextInfo
from ._recipe import Recipe, Role

__version__ = "0.4.0"

__all__ = [
    "BOTH", "COLUMNWISE", "ROWWISE", "Buffer", "BufferDesc", "BufferTooSmallError", "Device",
    "DeviceUnavailableError", "DirectionView", "GemmSupport", "InternalError", "InvalidArgumentError",
    "InvalidHandleError", "LibquantError", "Linear", "LinearContext", "LinearContextInfo", "OutOfMemoryError",
    "PluginError", "PluginInfo", "PluginKernel", "PoisonedError", "QTensor", "QTensorInfo", "QuantizePlan", "Quantizer",
    "Recipe", "Role", "StateError", "UnsupportedError", "abi_version", "compute_amax", "dequantize", "gemm",
    "gemm_support", "gemm_support_table", "library_path", "load_plugin", "pack_fp4", "pack_fp6", "plugin_info",
    "plugins", "quantize", "quantize_grouped", "quantize_into", "shutdown", "status_string", "unpack_fp4",
    "unpack_fp6", "update_usage", "version",
]
