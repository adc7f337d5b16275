"""The ctypes declaration of include/quant.h and the loading of libquant.so.

Every struct, enum value and function of quant.h is declared here once;
tests/test_layout.py compiles a C program that prints the header's sizes,
offsets and enum values and compares them with these declarations.

The library is found, in order: the file named by LIBQUANT_LIBRARY; the copy a
wheel carries (libquant/_native/libquant.so); build/libquant.so of the source
tree this package sits in (an editable install).
"""

from __future__ import annotations

import ctypes as C
import os
import threading
from pathlib import Path
from typing import Any, Callable

from ._errors import error_for

# ---------------------------------------------------------------------------
# Constants (#define and enum values of quant.h)
# ---------------------------------------------------------------------------

QUANT_ABI_VERSION = 1

# DLDeviceType
kDLCPU = 1
kDLCUDA = 2
kDLCUDAHost = 3
kDLOpenCL = 4
kDLVulkan = 7
kDLMetal = 8
kDLVPI = 9
kDLROCM = 10
kDLROCMHost = 11
kDLExtDev = 12
kDLCUDAManaged = 13
kDLOneAPI = 14
kDLWebGPU = 15
kDLHexagon = 16
kDLMAIA = 17
kDLTrn = 18

# DLDataTypeCode
kDLInt = 0
kDLUInt = 1
kDLFloat = 2
kDLOpaqueHandle = 3
kDLBfloat = 4
kDLComplex = 5
kDLBool = 6
kDLFloat8_e3m4 = 7
kDLFloat8_e4m3 = 8
kDLFloat8_e4m3b11fnuz = 9
kDLFloat8_e4m3fn = 10
kDLFloat8_e4m3fnuz = 11
kDLFloat8_e5m2 = 12
kDLFloat8_e5m2fnuz = 13
kDLFloat8_e8m0fnu = 14
kDLFloat6_e2m3fn = 15
kDLFloat6_e3m2fn = 16
kDLFloat4_e2m1fn = 17

# Every enum and #define of quant.h, by its C name (the layout test checks each).
CONSTANTS: dict[str, int] = {k: v for k, v in globals().items() if k.startswith("kDL")}
CONSTANTS.update(
    QUANT_ABI_VERSION=1,
    QUANT_OK=0,
    QUANT_ERROR_INVALID_ARGUMENT=1,
    QUANT_ERROR_INVALID_HANDLE=2,
    QUANT_ERROR_UNSUPPORTED=3,
    QUANT_ERROR_DEVICE_UNAVAILABLE=4,
    QUANT_ERROR_OUT_OF_MEMORY=5,
    QUANT_ERROR_BUFFER_TOO_SMALL=6,
    QUANT_ERROR_STATE=7,
    QUANT_ERROR_PLUGIN=8,
    QUANT_ERROR_INTERNAL=9,
    QUANT_ERROR_POISONED=10,
    QUANT_USAGE_ROWWISE=1,
    QUANT_USAGE_COLUMNWISE=2,
    QUANT_DIRECTION_ANY=0,
    QUANT_DIRECTION_ROWWISE=1,
    QUANT_DIRECTION_COLUMNWISE=2,
    QUANT_ELEMENT_DEFAULT=0,
    QUANT_ELEMENT_E4M3=1,
    QUANT_ELEMENT_E5M2=2,
    QUANT_ELEMENT_E2M1=3,
    QUANT_ELEMENT_E2M3=4,
    QUANT_ELEMENT_E3M2=5,
    QUANT_SCALING_CURRENT=0,
    QUANT_SCALING_DELAYED=1,
    QUANT_AMAX_MAX=0,
    QUANT_AMAX_MOST_RECENT=1,
    QUANT_SCALE_RCEIL=0,
    QUANT_SCALE_FLOOR=1,
    QUANT_RHT_OFF=0,
    QUANT_RHT_DEFAULT=1,
    QUANT_RHT_CUSTOM_MASK=2,
    QUANT_BUFFER_DATA=0,
    QUANT_BUFFER_SCALE_INV=1,
    QUANT_BUFFER_AMAX=2,
    QUANT_MAX_BUFFER_DIMS=4,
    QUANT_COLUMNWISE_SOURCE_ORIGINAL=0,
    QUANT_COLUMNWISE_SOURCE_ROWWISE_DEQUANTIZED=1,
    QUANT_MAX_DIMS=8,
    QUANT_FORMAT_NAME_LEN=32,
    QUANT_GEMM_UNSUPPORTED=0,
    QUANT_GEMM_EMULATED=1,
    QUANT_GEMM_NATIVE=2,
    QUANT_GEMM_REASON_LEN=128,
    QUANT_RECIPE_FP8_DELAYED=1,
    QUANT_RECIPE_FP8_CURRENT=2,
    QUANT_RECIPE_FP8_BLOCK=3,
    QUANT_RECIPE_MXFP8=4,
    QUANT_RECIPE_NVFP4=5,
    QUANT_FP8_FORMAT_DEFAULT=0,
    QUANT_FP8_FORMAT_E4M3=1,
    QUANT_FP8_FORMAT_HYBRID=2,
    QUANT_PLUGIN_ORIGIN_EXPLICIT=0,
    QUANT_PLUGIN_ORIGIN_ENV=1,
    QUANT_PLUGIN_ORIGIN_AUTO=2,
    QUANT_OP_AMAX=1,
    QUANT_OP_QUANTIZE=2,
    QUANT_OP_DEQUANTIZE=4,
    QUANT_OP_DERIVE=8,
    QUANT_OP_SWIZZLE_SCALES=16,
    QUANT_OP_GEMM=32,
    QUANT_BACKWARD_OVERRIDE_NONE=0,
    QUANT_BACKWARD_OVERRIDE_HIGH_PRECISION=1,
    QUANT_BACKWARD_OVERRIDE_DEQUANTIZED=2,
    QUANT_LINEAR_PASS_FORWARD=1,
    QUANT_LINEAR_PASS_BACKWARD=2,
    QUANT_LINEAR_SAVED_NONE=0,
    QUANT_LINEAR_SAVED_ORIGINAL=1,
    QUANT_LINEAR_SAVED_QUANTIZED=2,
    QUANT_LINEAR_SAVED_LAYER_WEIGHT=3,
)

MAX_BUFFER_DIMS = CONSTANTS["QUANT_MAX_BUFFER_DIMS"]
MAX_DIMS = CONSTANTS["QUANT_MAX_DIMS"]
FORMAT_NAME_LEN = CONSTANTS["QUANT_FORMAT_NAME_LEN"]
GEMM_REASON_LEN = CONSTANTS["QUANT_GEMM_REASON_LEN"]

# ---------------------------------------------------------------------------
# Structs
# ---------------------------------------------------------------------------


class DLDevice(C.Structure):
    _fields_ = [("device_type", C.c_int32), ("device_id", C.c_int32)]


class DLDataType(C.Structure):
    _fields_ = [("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16)]


class DLTensor(C.Structure):
    _fields_ = [
        ("data", C.c_void_p),
        ("device", DLDevice),
        ("ndim", C.c_int32),
        ("dtype", DLDataType),
        ("shape", C.POINTER(C.c_int64)),
        ("strides", C.POINTER(C.c_int64)),
        ("byte_offset", C.c_uint64),
    ]


class quant_quantizer_config(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("format", C.c_char_p),
        ("usage", C.c_uint32),
        ("element", C.c_int32),
        ("scaling", C.c_int32),
        ("force_pow2_scales", C.c_int32),
        ("amax_epsilon", C.c_float),
        ("amax_history_len", C.c_int32),
        ("amax_compute_algo", C.c_int32),
        ("margin", C.c_float),
        ("block_dims", C.c_int32),
        ("fp32_scales", C.c_int32),
        ("scale_rounding", C.c_int32),
        ("gemm_swizzled_scales", C.c_int32),
        ("rht", C.c_int32),
        ("rht_sign_mask", C.c_uint32),
        ("stochastic_rounding", C.c_int32),
        ("seed", C.c_uint64),
        ("offset", C.c_uint64),
        ("dtype", DLDataType),
    ]


class quant_buffer_desc(C.Structure):
    _fields_ = [
        ("direction", C.c_uint32),
        ("kind", C.c_int32),
        ("dtype", DLDataType),
        ("ndim", C.c_int32),
        ("shape", C.c_int64 * MAX_BUFFER_DIMS),
        ("nbytes", C.c_uint64),
    ]


class quant_quantize_options(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("stream", C.c_void_p),
        ("amax", C.POINTER(DLTensor)),
        ("persistent", C.c_int32),
        ("usage", C.c_uint32),
    ]


class quant_dequantize_options(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("direction", C.c_uint32),
        ("undo_transform", C.c_int32),
        ("stream", C.c_void_p),
    ]


class quant_qtensor_info(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("ndim", C.c_int32),
        ("shape", C.c_int64 * MAX_DIMS),
        ("usage", C.c_uint32),
        ("device", DLDevice),
        ("persistent", C.c_int32),
        ("rowwise_format", C.c_char * FORMAT_NAME_LEN),
        ("columnwise_format", C.c_char * FORMAT_NAME_LEN),
    ]


class quant_gemm_operand(C.Structure):
    _fields_ = [
        ("qtensor", C.c_void_p),
        ("tensor", C.POINTER(DLTensor)),
        ("trans", C.c_int32),
    ]


class quant_gemm_args(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("a", quant_gemm_operand),
        ("b", quant_gemm_operand),
        ("alpha", C.POINTER(C.c_float)),
        ("beta", C.POINTER(C.c_float)),
        ("c", C.POINTER(DLTensor)),
        ("bias", C.POINTER(DLTensor)),
        ("d", C.POINTER(DLTensor)),
        ("accumulate", C.c_int32),
        ("stream", C.c_void_p),
        ("exact", C.c_int32),
    ]


class quant_gemm_support_entry(C.Structure):
    _fields_ = [
        ("format_a", C.c_char * FORMAT_NAME_LEN),
        ("format_b", C.c_char * FORMAT_NAME_LEN),
        ("level", C.c_int32),
        ("reason", C.c_char * GEMM_REASON_LEN),
    ]


class quant_role(C.Structure):
    _fields_ = [
        ("module_type", C.c_char_p),
        ("tensor_type", C.c_char_p),
        ("name", C.c_char_p),
    ]


class quant_recipe_config(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("kind", C.c_int32),
        ("fp8_format", C.c_int32),
        ("margin", C.c_float),
        ("amax_history_len", C.c_int32),
        ("amax_compute_algo", C.c_int32),
        ("force_pow2_scales", C.c_int32),
        ("amax_epsilon", C.c_float),
        ("fp32_scales", C.c_int32),
        ("disable_rht", C.c_int32),
        ("disable_stochastic_rounding", C.c_int32),
        ("disable_2d_quantization", C.c_int32),
        ("seed", C.c_uint64),
        ("offset", C.c_uint64),
    ]


class quant_recipe_rule(C.Structure):
    _fields_ = [("pattern", quant_role), ("quantizer", C.c_void_p)]


class quant_plugin_info(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("path", C.c_char_p),
        ("name", C.c_char_p),
        ("version", C.c_char_p),
        ("abi_version", C.c_uint32),
        ("origin", C.c_int32),
        ("status", C.c_int32),
        ("message", C.c_char_p),
        ("num_formats", C.c_uint32),
        ("num_kernels", C.c_uint32),
    ]


DEVICE_ALLOC_FN = C.CFUNCTYPE(C.c_int32, C.c_void_p, C.c_int32, C.c_size_t, C.c_void_p, C.POINTER(C.c_void_p))
DEVICE_FREE_FN = C.CFUNCTYPE(None, C.c_void_p, C.c_int32, C.c_void_p, C.c_void_p)


class quant_device_allocator(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("alloc", DEVICE_ALLOC_FN),
        ("free", DEVICE_FREE_FN),
        ("user_data", C.c_void_p),
    ]


class quant_plugin_load_options(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("sha256", C.c_char_p),
        ("arena_bytes", C.c_uint64),
        ("call_timeout_ms", C.c_uint32),
    ]


class quant_plugin_kernel_info(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("format", C.c_char_p),
        ("device_type", C.c_int32),
        ("ops", C.c_uint32),
        ("defines_format", C.c_int32),
    ]


class quant_linear_config(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("recipe", C.c_void_p),
        ("name", C.c_char_p),
        ("num_gemms", C.c_int32),
        ("input_quantizers", C.POINTER(C.c_void_p)),
        ("weight_quantizers", C.POINTER(C.c_void_p)),
        ("grad_output_quantizers", C.POINTER(C.c_void_p)),
    ]


class quant_linear_forward_args(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("input", C.POINTER(DLTensor)),
        ("weight", C.POINTER(DLTensor)),
        ("bias", C.POINTER(DLTensor)),
        ("output", C.POINTER(DLTensor)),
        ("backward_override", C.c_int32),
        ("save_original_input", C.c_int32),
        ("input_requires_grad", C.c_int32),
        ("weight_requires_grad", C.c_int32),
        ("stream", C.c_void_p),
        # version 2
        ("input_amax", C.POINTER(DLTensor)),
        ("weight_amax", C.POINTER(DLTensor)),
        ("weight_qtensor", C.c_void_p),
    ]


class quant_linear_backward_args(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("grad_output", C.POINTER(DLTensor)),
        ("grad_input", C.POINTER(DLTensor)),
        ("grad_weight", C.POINTER(DLTensor)),
        ("grad_bias", C.POINTER(DLTensor)),
        ("stream", C.c_void_p),
        # version 2
        ("grad_output_amax", C.POINTER(DLTensor)),
    ]


class quant_grouped_linear_forward_args(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("input", C.POINTER(DLTensor)),
        ("m_splits", C.POINTER(C.c_int64)),
        ("weights", C.POINTER(DLTensor)),
        ("biases", C.POINTER(DLTensor)),
        ("output", C.POINTER(DLTensor)),
        ("backward_override", C.c_int32),
        ("save_original_input", C.c_int32),
        ("input_requires_grad", C.c_int32),
        ("weight_requires_grad", C.c_int32),
        ("stream", C.c_void_p),
        # version 2
        ("input_amaxes", C.POINTER(DLTensor)),
        ("weight_amaxes", C.POINTER(DLTensor)),
        ("weight_qtensors", C.POINTER(C.c_void_p)),
    ]


class quant_grouped_linear_backward_args(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("grad_output", C.POINTER(DLTensor)),
        ("grad_input", C.POINTER(DLTensor)),
        ("grad_weights", C.POINTER(DLTensor)),
        ("grad_biases", C.POINTER(DLTensor)),
        ("stream", C.c_void_p),
        # version 2
        ("grad_output_amaxes", C.POINTER(DLTensor)),
    ]


class quant_linear_ctx_info(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("num_gemms", C.c_int32),
        ("used", C.c_int32),
        ("backward_override", C.c_int32),
        ("save_original_input", C.c_int32),
        ("input_requires_grad", C.c_int32),
        ("weight_requires_grad", C.c_int32),
        ("input_saved", C.c_int32),
        ("input_usage", C.c_uint32),
        ("weight_saved", C.c_int32),
        ("weight_usage", C.c_uint32),
        ("input_bytes", C.c_uint64),
        ("weight_bytes", C.c_uint64),
        ("owned_bytes", C.c_uint64),
    ]


class quant_quantize_grouped_args(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("count", C.c_size_t),
        ("inputs", C.POINTER(DLTensor)),
        ("outputs", C.POINTER(C.c_void_p)),
        ("stream", C.c_void_p),
    ]


# Every struct of quant.h by its C name (the layout test checks each).
STRUCTS: dict[str, type[C.Structure]] = {
    "DLDevice": DLDevice,
    "DLDataType": DLDataType,
    "DLTensor": DLTensor,
    "quant_quantizer_config": quant_quantizer_config,
    "quant_device_allocator": quant_device_allocator,
    "quant_buffer_desc": quant_buffer_desc,
    "quant_quantize_options": quant_quantize_options,
    "quant_dequantize_options": quant_dequantize_options,
    "quant_qtensor_info": quant_qtensor_info,
    "quant_gemm_operand": quant_gemm_operand,
    "quant_gemm_args": quant_gemm_args,
    "quant_gemm_support_entry": quant_gemm_support_entry,
    "quant_role": quant_role,
    "quant_recipe_config": quant_recipe_config,
    "quant_recipe_rule": quant_recipe_rule,
    "quant_plugin_info": quant_plugin_info,
    "quant_plugin_kernel_info": quant_plugin_kernel_info,
    "quant_plugin_load_options": quant_plugin_load_options,
    "quant_linear_config": quant_linear_config,
    "quant_linear_forward_args": quant_linear_forward_args,
    "quant_linear_backward_args": quant_linear_backward_args,
    "quant_grouped_linear_forward_args": quant_grouped_linear_forward_args,
    "quant_grouped_linear_backward_args": quant_grouped_linear_backward_args,
    "quant_linear_ctx_info": quant_linear_ctx_info,
    "quant_quantize_grouped_args": quant_quantize_grouped_args,
}

# quant_recipe_callback
RECIPE_CALLBACK = C.CFUNCTYPE(C.c_int32, C.c_void_p, C.POINTER(quant_role), C.POINTER(C.c_void_p))

# ---------------------------------------------------------------------------
# Functions: name -> (restype, argtypes), in quant.h's order.
# ---------------------------------------------------------------------------

_P = C.c_void_p  # an opaque handle or a pointer the binding passes through
_PT = C.POINTER(DLTensor)
_S = C.c_int32  # quant_status
_SZ = C.c_size_t

FUNCTIONS: dict[str, tuple[Any, list[Any]]] = {
    "quant_status_string": (C.c_char_p, [C.c_int32]),
    "quant_last_error": (C.c_char_p, []),
    "quant_abi_version": (C.c_uint32, []),
    "quant_version": (C.c_char_p, []),
    "quant_quantizer_create": (_S, [C.POINTER(quant_quantizer_config), C.POINTER(_P)]),
    "quant_quantizer_free": (_S, [_P]),
    "quant_quantizer_set_usage": (_S, [_P, C.c_uint32]),
    "quant_quantizer_get_usage": (_S, [_P, C.POINTER(C.c_uint32)]),
    "quant_quantizer_layout": (
        _S,
        [_P, C.POINTER(C.c_int64), C.c_int32, C.POINTER(quant_buffer_desc), _SZ, C.POINTER(_SZ)],
    ),
    "quant_quantizer_layout_usage": (
        _S,
        [_P, C.c_uint32, C.POINTER(C.c_int64), C.c_int32, C.POINTER(quant_buffer_desc), _SZ, C.POINTER(_SZ)],
    ),
    "quant_compute_amax": (_S, [_P, _PT, _PT, _P]),
    "quant_quantize": (_S, [_P, _PT, C.POINTER(quant_quantize_options), C.POINTER(_P)]),
    "quant_quantize_into": (_S, [_P, _PT, C.POINTER(quant_quantize_options), _P]),
    "quant_quantize_plan_create": (_S, [_P, _PT, C.POINTER(quant_quantize_options), _P, C.POINTER(_P)]),
    "quant_quantize_plan_run": (_S, [_P, _P, _P]),
    "quant_quantize_plan_free": (_S, [_P]),
    "quant_dequantize": (_S, [_P, C.c_uint32, _PT, _P]),
    "quant_dequantize_ex": (_S, [_P, C.POINTER(quant_dequantize_options), _PT]),
    "quant_qtensor_from_buffers": (_S, [_P, C.POINTER(C.c_int64), C.c_int32, _PT, _SZ, C.POINTER(_P)]),
    "quant_qtensor_free": (_S, [_P]),
    "quant_qtensor_update_usage": (_S, [_P, C.c_uint32, _P]),
    "quant_qtensor_set_gemm_swizzled_scales": (_S, [_P, C.c_int32, _P]),
    "quant_qtensor_get_info": (_S, [_P, C.POINTER(quant_qtensor_info)]),
    "quant_qtensor_buffer": (_S, [_P, C.c_uint32, C.c_int32, _PT]),
    "quant_delayed_scaling_state": (_S, [_P, C.c_uint32, _PT, _PT]),
    "quant_delayed_scaling_update": (_S, [_P, C.c_uint32, C.POINTER(C.c_float)]),
    "quant_quantizer_create_hybrid": (_S, [_P, _P, C.c_int32, C.POINTER(_P)]),
    "quant_qtensor_set_persistent": (_S, [_P, C.c_int32]),
    "quant_gemm": (_S, [C.POINTER(quant_gemm_args)]),
    "quant_gemm_support": (_S, [DLDevice, C.c_char_p, C.c_char_p, C.POINTER(quant_gemm_support_entry)]),
    "quant_gemm_support_table": (_S, [DLDevice, C.POINTER(quant_gemm_support_entry), _SZ, C.POINTER(_SZ)]),
    "quant_recipe_create": (_S, [C.POINTER(quant_recipe_config), C.POINTER(_P)]),
    "quant_recipe_create_callback": (_S, [RECIPE_CALLBACK, _P, C.POINTER(_P)]),
    "quant_recipe_create_rules": (_S, [C.POINTER(quant_recipe_rule), _SZ, C.POINTER(_P)]),
    "quant_recipe_free": (_S, [_P]),
    "quant_recipe_quantizer": (_S, [_P, C.POINTER(quant_role), C.POINTER(_P)]),
    "quant_plugin_load": (_S, [C.c_char_p, C.POINTER(_SZ)]),
    "quant_plugin_count": (_S, [C.POINTER(_SZ)]),
    "quant_plugin_get_info": (_S, [_SZ, C.POINTER(quant_plugin_info)]),
    "quant_plugin_get_kernel": (_S, [_SZ, _SZ, C.POINTER(quant_plugin_kernel_info)]),
    "quant_plugin_get_format": (_S, [_SZ, _SZ, C.POINTER(C.c_char_p)]),
    "quant_plugin_load_ex": (_S, [C.c_char_p, C.POINTER(quant_plugin_load_options), C.POINTER(_SZ)]),
    "quant_shutdown": (_S, []),
    "quant_set_device_allocator": (_S, [C.c_int32, C.POINTER(quant_device_allocator)]),
    "quant_linear_create": (_S, [C.POINTER(quant_linear_config), C.POINTER(_P)]),
    "quant_linear_free": (_S, [_P]),
    "quant_linear_quantizer": (_S, [_P, C.c_char_p, C.c_int32, C.POINTER(_P)]),
    "quant_linear_weight_updated": (_S, [_P, C.c_int32]),
    "quant_linear_weight_get_info": (_S, [_P, C.c_int32, C.POINTER(quant_qtensor_info)]),
    "quant_linear_forward": (_S, [_P, C.POINTER(quant_linear_forward_args), C.POINTER(_P)]),
    "quant_linear_backward": (_S, [_P, C.POINTER(quant_linear_backward_args)]),
    "quant_grouped_linear_forward": (_S, [_P, C.POINTER(quant_grouped_linear_forward_args), C.POINTER(_P)]),
    "quant_grouped_linear_backward": (_S, [_P, C.POINTER(quant_grouped_linear_backward_args)]),
    "quant_linear_ctx_get_info": (_S, [_P, C.POINTER(quant_linear_ctx_info)]),
    "quant_linear_ctx_free": (_S, [_P]),
    "quant_linear_scaling_amaxes": (_S, [_P, C.c_int32, C.POINTER(C.c_float), _SZ, C.POINTER(_SZ)]),
    "quant_linear_update_scaling": (_S, [_P, C.c_int32, C.POINTER(C.c_float), _SZ]),
    "quant_quantize_grouped": (_S, [_P, C.POINTER(quant_quantize_grouped_args)]),
}

# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------

_PKG = Path(__file__).resolve().parent


def candidate_paths() -> list[tuple[str, Path]]:
    """Where the library is looked for, in order, with the reason for each."""
    out: list[tuple[str, Path]] = []
    env = os.environ.get("LIBQUANT_LIBRARY")
    if env:
        out.append(("LIBQUANT_LIBRARY", Path(env)))
    out.append(("wheel", _PKG / "_native" / "libquant.so"))
    out.append(("source tree", _PKG.parent.parent / "build" / "libquant.so"))
    return out


def find_library() -> Path:
    """The libquant.so this process loads (see the module docstring for the order)."""
    cands = candidate_paths()
    if cands[0][0] == "LIBQUANT_LIBRARY":
        # An explicit choice is never silently replaced by another copy.
        if not cands[0][1].is_file():
            raise OSError("LIBQUANT_LIBRARY=%s: no such file" % cands[0][1])
        return cands[0][1]
    for _, p in cands:
        if p.is_file():
            return p
    raise OSError(
        "libquant.so not found; looked at %s. Build it with `make lib`, install the wheel, "
        "or set LIBQUANT_LIBRARY" % ", ".join(str(p) for _, p in cands)
    )


class Library:
    """libquant.so with every quant.h function declared (attribute access by C name)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.cdll = C.CDLL(str(path))
        for name, (restype, argtypes) in FUNCTIONS.items():
            f = getattr(self.cdll, name)
            f.restype = restype
            f.argtypes = argtypes
            setattr(self, name, f)
        self._last_error: Callable[[], bytes] = self.cdll.quant_last_error
        self._status_string: Callable[[int], bytes] = self.cdll.quant_status_string

    def __getattr__(self, name: str) -> Any:  # declared functions are set in __init__
        raise AttributeError(name)

    def error(self, status: int, what: str = "") -> Exception:
        """The exception for a non-OK status, with this thread's last error message."""
        msg = (self._last_error() or b"").decode("utf-8", "replace")
        name = (self._status_string(status) or b"").decode("utf-8", "replace")
        return error_for(status, msg if not what else "%s (%s)" % (msg, what), name)


_lock = threading.Lock()
_library: Library | None = None


def lib() -> Library:
    """The loaded library (loaded on first use)."""
    global _library
    if _library is None:
        with _lock:
            if _library is None:
                _library = Library(find_library())
    return _library


def check(status: int) -> None:
    """Raises the LibquantError subclass for a non-OK status."""
    if status:
        raise lib().error(status)
