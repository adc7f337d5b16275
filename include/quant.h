/*
 * quant.h: the C ABI of libquant, a low-precision quantization engine.
 *
 * Conventions (see README.md, "The C ABI"):
 *  - Every function that can fail returns quant_status (QUANT_OK = 0). On failure
 *    quant_last_error() returns a thread-local message naming the argument and
 *    the reason; it stays valid until the next failed call on that thread.
 *  - Handles (quant_quantizer, quant_qtensor) are opaque. Each has a *_free.
 *    Passing a freed, foreign or wrongly typed handle returns
 *    QUANT_ERROR_INVALID_HANDLE; it never crashes.
 *  - Config and option structs begin with size_t struct_size, which the caller
 *    sets to sizeof(the struct) as its header knows it; fields may be appended in
 *    later versions without breaking old callers. Zero-initialised fields mean
 *    the documented default.
 *  - High-precision tensors are DLPack DLTensors: row-major and contiguous
 *    (strides NULL or the compact row-major strides; anything else is rejected),
 *    rank 1..8. A tensor [d0, ..., dn-1, K] is quantized as its 2-D view [M, K]
 *    with M = d0*...*dn-1.
 *  - Work on CUDA tensors runs asynchronously on the given stream; CPU work is
 *    finished when the call returns.
 *  - Do not fork() after loading libquant, and never dlclose() it (Go runtime).
 *
 * If you use dlpack.h too, include it before this header: the DLPack
 * declarations below are skipped when DLPACK_DLPACK_H_ is defined.
 */
#ifndef LIBQUANT_QUANT_H_
#define LIBQUANT_QUANT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ABI version: bumped on any incompatible change. quant_abi_version() returns
 * the library's; a caller compiled against another major version must not use it. */
#define QUANT_ABI_VERSION 1
#define QUANT_VERSION_MAJOR 0
#define QUANT_VERSION_MINOR 1
#define QUANT_VERSION_PATCH 0

/* ------------------------------------------------------------------------- */
/* DLPack v1.1 declarations (layout-compatible with dlpack.h).               */
/* ------------------------------------------------------------------------- */
#ifndef DLPACK_DLPACK_H_
#ifdef __cplusplus
typedef enum : int32_t {
#else
typedef enum {
#endif
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17,
  kDLTrn = 18
} DLDeviceType;

typedef struct {
  DLDeviceType device_type; /* kDLCPU or kDLCUDA for libquant */
  int32_t device_id;        /* 0 for CPU memory */
} DLDevice;

typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U,
  kDLBool = 6U,
  kDLFloat8_e3m4 = 7U,
  kDLFloat8_e4m3 = 8U,
  kDLFloat8_e4m3b11fnuz = 9U,
  kDLFloat8_e4m3fn = 10U,
  kDLFloat8_e4m3fnuz = 11U,
  kDLFloat8_e5m2 = 12U,
  kDLFloat8_e5m2fnuz = 13U,
  kDLFloat8_e8m0fnu = 14U,
  kDLFloat6_e2m3fn = 15U,
  kDLFloat6_e3m2fn = 16U,
  kDLFloat4_e2m1fn = 17U
} DLDataTypeCode;

typedef struct {
  uint8_t code;   /* a DLDataTypeCode */
  uint8_t bits;   /* bits per element */
  uint16_t lanes; /* 1 for libquant */
} DLDataType;

typedef struct {
  void *data;           /* CPU or device pointer */
  DLDevice device;      /* where data lives */
  int32_t ndim;         /* rank */
  DLDataType dtype;     /* element type */
  int64_t *shape;       /* ndim sizes */
  int64_t *strides;     /* ndim strides in elements, or NULL for row-major contiguous */
  uint64_t byte_offset; /* added to data */
} DLTensor;
#endif /* DLPACK_DLPACK_H_ */

/* ------------------------------------------------------------------------- */
/* Status and errors                                                          */
/* ------------------------------------------------------------------------- */
typedef enum {
  QUANT_OK = 0,
  QUANT_ERROR_INVALID_ARGUMENT = 1,   /* an argument is NULL, out of range or inconsistent */
  QUANT_ERROR_INVALID_HANDLE = 2,     /* a handle is freed, foreign, or of the wrong type */
  QUANT_ERROR_UNSUPPORTED = 3,        /* the format, dtype or operation is not supported */
  QUANT_ERROR_DEVICE_UNAVAILABLE = 4, /* no loaded plugin runs this on the tensor's device */
  QUANT_ERROR_OUT_OF_MEMORY = 5,      /* an allocation failed */
  QUANT_ERROR_BUFFER_TOO_SMALL = 6,   /* an output array is too short; the needed count is reported */
  QUANT_ERROR_STATE = 7,              /* the object cannot do this now (missing direction, underivable usage) */
  QUANT_ERROR_PLUGIN = 8,             /* a plugin failed to load or reported an error */
  QUANT_ERROR_INTERNAL = 9,           /* an internal fault; the library refuses every later call */
  QUANT_ERROR_POISONED = 10           /* refused: an earlier call hit QUANT_ERROR_INTERNAL */
} quant_status;

/* A static, human-readable name of a status ("QUANT_ERROR_INVALID_ARGUMENT"). */
const char *quant_status_string(quant_status status);

/* The message of the last failed call on this thread ("" if none yet). It is
 * replaced by the next failure on the same thread; successful calls leave it. */
const char *quant_last_error(void);

/* The ABI version of the loaded library (QUANT_ABI_VERSION it was built with). */
uint32_t quant_abi_version(void);

/* The library version, "MAJOR.MINOR.PATCH". */
const char *quant_version(void);

/* ------------------------------------------------------------------------- */
/* Quantizers                                                                 */
/* ------------------------------------------------------------------------- */

/* Usage bits: which directions a quantizer produces or a tensor holds. Rowwise
 * blocks run along the last dim (a GEMM contracting over it needs this);
 * columnwise blocks run along the first, flattened dim. */
#define QUANT_USAGE_ROWWISE 1u
#define QUANT_USAGE_COLUMNWISE 2u

/* A single direction, where a call needs one (0 lets the call choose). */
#define QUANT_DIRECTION_ANY 0u
#define QUANT_DIRECTION_ROWWISE 1u
#define QUANT_DIRECTION_COLUMNWISE 2u

typedef enum {
  QUANT_ELEMENT_DEFAULT = 0, /* the format's default */
  QUANT_ELEMENT_E4M3 = 1,    /* FP8 E4M3 (max 448) */
  QUANT_ELEMENT_E5M2 = 2,    /* FP8 E5M2 (max 57344) */
  QUANT_ELEMENT_E2M1 = 3     /* FP4 E2M1 (max 6) */
} quant_element;

typedef enum {
  QUANT_SCALING_CURRENT = 0, /* fp8: scale from this tensor's amax */
  QUANT_SCALING_DELAYED = 1  /* fp8: scale from the amax history */
} quant_scaling;

typedef enum {
  QUANT_AMAX_MAX = 0,        /* delayed scaling: max over the history */
  QUANT_AMAX_MOST_RECENT = 1 /* delayed scaling: this step's amax */
} quant_amax_algo;

typedef enum {
  QUANT_SCALE_RCEIL = 0, /* MX: TransformerEngine's rule, exponent rounded up, no clipping */
  QUANT_SCALE_FLOOR = 1  /* MX: OCP MX v1.0, floor(log2(amax)) - emax, values clamped */
} quant_scale_rounding;

typedef enum {
  QUANT_RHT_OFF = 0,        /* no random Hadamard transform */
  QUANT_RHT_DEFAULT = 1,    /* RHT on the columnwise copy, sign mask 0xD7E8 */
  QUANT_RHT_CUSTOM_MASK = 2 /* RHT on the columnwise copy, sign mask rht_sign_mask */
} quant_rht;

/* The parameters of a quantizer. Set struct_size and format; every other field
 * left zero takes the format's default. A field the chosen format does not use
 * must stay zero (QUANT_ERROR_INVALID_ARGUMENT otherwise).
 *
 * format "fp8"  : per-tensor FP8. element (E4M3 default, E5M2), scaling.
 *                 current: force_pow2_scales, amax_epsilon.
 *                 delayed: amax_history_len (default 1024), amax_compute_algo, margin.
 * format "mxfp8": MXFP8, one E8M0 scale per 32 elements (1x32 rowwise, 32x1
 *                 columnwise). element (E4M3 default, E5M2), scale_rounding
 *                 (QUANT_SCALE_RCEIL default, QUANT_SCALE_FLOOR), gemm_swizzled_scales.
 *                 Both flattened dims must be multiples of 32. Buffers per
 *                 direction: data [M, K] (columnwise NOT transposed), scale_inv
 *                 E8M0 rowwise [pad128(M), pad4(K/32)], columnwise
 *                 [pad4(M/32), pad128(K)]; padding is zero.
 * format "mxfp4": MXFP4, E2M1 elements packed two per byte (even index in the
 *                 low nibble) with one E8M0 scale per 32. element (E2M1 only),
 *                 scale_rounding, gemm_swizzled_scales. Both dims multiples of
 *                 32. Data uint8 rowwise [M, K/2], columnwise transposed
 *                 [K, M/2]; scale_inv rowwise [pad128(M), pad4(K/32)],
 *                 columnwise [pad128(K), pad4(M/32)].
 *                 With gemm_swizzled_scales the MX scale_inv buffers keep their
 *                 shape and hold the cuBLAS swizzled layout instead;
 *                 quant_qtensor_set_gemm_swizzled_scales converts either way.
 *                 MX formats can only drop a usage (update_usage).
 * format "fp8_block": FP8 block scaling (DeepSeek style), E4M3 only (E5M2 is
 *                 rejected). block_dims 1 (1x128 blocks, default) or 2
 *                 (128x128), fp32_scales (default: power-of-two scales),
 *                 amax_epsilon. Any shape; the last blocks may be partial.
 *                 Data rowwise [M, K], columnwise transposed [K, M]; FP32
 *                 scale_inv 1-D rowwise [ceil(K/128), pad4(M)], columnwise
 *                 [ceil(M/128), pad4(K)]; 2-D rowwise [ceil(M/128),
 *                 pad4(ceil(K/128))], columnwise [ceil(K/128), pad4(ceil(M/128))].
 *                 2-D tensors can derive columnwise from rowwise.
 * format "nvfp4": NVFP4, TransformerEngine's bytes. E2M1 elements (element: default or
 *                 E2M1) with an E4M3 scale per 1x16 block and an FP32 global amax per
 *                 direction. Both dims of the 2-D view [M, K] must be multiples of 16.
 *                 Buffers per direction: data uint8 [M, K/2] rowwise, [K, M/2] columnwise
 *                 (the transpose; element 2i in the low nibble of byte i); scale_inv E4M3
 *                 [pad128(M), pad4(K/16)] rowwise, [pad128(K), pad4(M/16)] columnwise
 *                 (padding zero); amax FP32 [1] (part of the data: dequantize and the
 *                 GEMM read it). Values decode as e2m1 * scale_inv * amax / (6 * 448).
 *                 block_dims: 1 (1x16 blocks, default) or 2 (16x16 tiles, for weights:
 *                 both directions hold the same codes, and quant_qtensor_update_usage
 *                 can build the columnwise copy from rowwise data).
 *                 gemm_swizzled_scales: write scale_inv in the GEMM-swizzled layout
 *                 (quant_qtensor_set_gemm_swizzled_scales converts either way).
 *                 rht: QUANT_RHT_DEFAULT (sign mask 0xD7E8) or QUANT_RHT_CUSTOM_MASK
 *                 (rht_sign_mask, 16 bits, only then) stores the columnwise copy as the
 *                 16-point random Hadamard transform of the data (rowwise data is never
 *                 transformed); needs BF16 input whenever the columnwise copy is made, and
 *                 block_dims 1. Dequantize returns the transformed values unless
 *                 quant_dequantize_ex is asked to undo it.
 *                 stochastic_rounding: round elements stochastically; seed and offset
 *                 (only with it) key the random bits, which depend on nothing else
 *                 (not on threads or devices): equal seed and offset give equal bytes.
 *                 Advance offset (or seed) every step.
 * mxfp8, mxfp4 and fp8_block compute their scales per block: they ignore
 * quant_quantize_options.amax, and quant_compute_amax reports max |x|. */
typedef struct {
  size_t struct_size;          /* sizeof(quant_quantizer_config) */
  const char *format;          /* registered format name, e.g. "fp8" */
  uint32_t usage;              /* QUANT_USAGE_* bits; 0 = rowwise and columnwise */
  int32_t element;             /* quant_element */
  int32_t scaling;             /* quant_scaling */
  int32_t force_pow2_scales;   /* nonzero: round the scale down to a power of two */
  float amax_epsilon;          /* lower bound applied to the amax before the scale */
  int32_t amax_history_len;    /* delayed scaling history length */
  int32_t amax_compute_algo;   /* quant_amax_algo */
  float margin;                /* delayed scaling: scale = fp8_max * 2^-margin / amax */
  int32_t block_dims;          /* block formats: 1 = 1-D blocks (default), 2 = 2-D blocks */
  int32_t fp32_scales;         /* fp8_block: nonzero keeps FP32 scales instead of powers of two */
  int32_t scale_rounding;      /* quant_scale_rounding (MX formats) */
  int32_t gemm_swizzled_scales;/* nonzero: write scales in the GEMM-swizzled layout */
  int32_t rht;                 /* quant_rht (nvfp4) */
  uint32_t rht_sign_mask;      /* with QUANT_RHT_CUSTOM_MASK: bit i set flips sign i (16 bits) */
  int32_t stochastic_rounding; /* nvfp4: nonzero rounds stochastically */
  uint64_t seed;               /* stochastic rounding: random stream key */
  uint64_t offset;             /* stochastic rounding: position in the stream */
  DLDataType dtype;            /* identity: the dtype held; {0,0,0} keeps the input's */
} quant_quantizer_config;

typedef struct quant_quantizer quant_quantizer;

/* Creates a quantizer. *out is set only on success. */
quant_status quant_quantizer_create(const quant_quantizer_config *config, quant_quantizer **out);

/* Frees a quantizer. NULL is a no-op. */
quant_status quant_quantizer_free(quant_quantizer *quantizer);

/* Sets which directions the next quantize produces (QUANT_USAGE_* bits, nonzero). */
quant_status quant_quantizer_set_usage(quant_quantizer *quantizer, uint32_t usage);

/* Reads the usage bits. */
quant_status quant_quantizer_get_usage(const quant_quantizer *quantizer, uint32_t *usage);

/* ------------------------------------------------------------------------- */
/* Buffer layout                                                              */
/* ------------------------------------------------------------------------- */
typedef enum {
  QUANT_BUFFER_DATA = 0,      /* quantized elements */
  QUANT_BUFFER_SCALE_INV = 1, /* dequantization scales */
  QUANT_BUFFER_AMAX = 2       /* FP32 amax the scales came from */
} quant_buffer_kind;

#define QUANT_MAX_BUFFER_DIMS 4

/* One buffer of a quantized tensor's layout. */
typedef struct {
  uint32_t direction;                    /* QUANT_DIRECTION_ROWWISE or _COLUMNWISE */
  int32_t kind;                          /* quant_buffer_kind */
  DLDataType dtype;                      /* element type of the buffer */
  int32_t ndim;                          /* rank of the buffer */
  int64_t shape[QUANT_MAX_BUFFER_DIMS];  /* its shape */
  uint64_t nbytes;                       /* its size in bytes */
} quant_buffer_desc;

/* Lists the buffers quantizing a tensor of this shape would produce with the
 * quantizer's current usage, rowwise first. Writes at most capacity entries to
 * descs and the full count to *count; descs may be NULL to ask for the count.
 * Returns QUANT_ERROR_BUFFER_TOO_SMALL if capacity < *count (descs non-NULL). */
quant_status quant_quantizer_layout(const quant_quantizer *quantizer, const int64_t *shape, int32_t ndim,
                                    quant_buffer_desc *descs, size_t capacity, size_t *count);

/* ------------------------------------------------------------------------- */
/* Quantized tensors                                                          */
/* ------------------------------------------------------------------------- */
typedef struct quant_qtensor quant_qtensor;

typedef struct {
  size_t struct_size;     /* sizeof(quant_quantize_options) */
  void *stream;           /* cudaStream_t for CUDA tensors; ignored on the CPU */
  const DLTensor *amax;   /* optional FP32 [2] amax (rowwise, columnwise) to use instead of
                             computing it, e.g. after an all-reduce; on the input's device */
  int32_t persistent;     /* nonzero: the tensor never loses a usage when re-quantized in place */
} quant_quantize_options;

/* Computes the global amax(es) quantize would use for input: writes FP32
 * [rowwise, columnwise] into amax (2 elements, on the input's device), so that a
 * caller can all-reduce them and pass them back through quant_quantize_options. */
quant_status quant_compute_amax(const quant_quantizer *quantizer, const DLTensor *input, DLTensor *amax,
                                void *stream);

/* Quantizes input (FP32, BF16 or FP16) into a new tensor. options may be NULL. */
quant_status quant_quantize(quant_quantizer *quantizer, const DLTensor *input,
                            const quant_quantize_options *options, quant_qtensor **out);

/* Re-quantizes input into an existing tensor of the same shape, reusing its
 * buffers. A persistent tensor keeps every direction it has (they are all
 * refreshed); a temporary one ends with exactly the quantizer's usage. */
quant_status quant_quantize_into(quant_quantizer *quantizer, const DLTensor *input,
                                 const quant_quantize_options *options, quant_qtensor *dst);

/* Dequantizes into out (FP32, BF16 or FP16, the tensor's element count,
 * contiguous, on its device). direction QUANT_DIRECTION_ANY uses rowwise data
 * when present, else columnwise. Values a format stores in a transformed
 * domain come back as stored, still transformed (nvfp4's columnwise copy with
 * rht set holds the random Hadamard transform of the data, and this returns
 * it); quant_dequantize_ex can undo the transform. */
quant_status quant_dequantize(const quant_qtensor *tensor, uint32_t direction, DLTensor *out, void *stream);

/* Options of quant_dequantize_ex. Zero-initialised fields give
 * quant_dequantize's behaviour. */
typedef struct {
  size_t struct_size;     /* sizeof(quant_dequantize_options) */
  uint32_t direction;     /* QUANT_DIRECTION_*; ANY: rowwise when present, else columnwise */
  int32_t undo_transform; /* nonzero: map values stored in a transformed domain back to the
                             input's domain (nvfp4 with rht: the inverse Hadamard transform of
                             the columnwise copy); directions stored untransformed are unaffected */
  void *stream;           /* cudaStream_t for CUDA tensors; ignored on the CPU */
} quant_dequantize_options;

/* quant_dequantize with options; options may be NULL (the defaults above). */
quant_status quant_dequantize_ex(const quant_qtensor *tensor, const quant_dequantize_options *options,
                                 DLTensor *out);

/* Assembles a tensor over caller-owned buffers, given in the order
 * quant_quantizer_layout lists them for this shape. The buffers are borrowed:
 * they must outlive the tensor, and quant_qtensor_free leaves them alone. */
quant_status quant_qtensor_from_buffers(const quant_quantizer *quantizer, const int64_t *shape, int32_t ndim,
                                        const DLTensor *buffers, size_t count, quant_qtensor **out);

/* Frees a tensor and the buffers libquant allocated for it. NULL is a no-op. */
quant_status quant_qtensor_free(quant_qtensor *tensor);

/* Makes the tensor hold exactly the directions in usage (TransformerEngine's
 * update_usage): a missing direction is created from the other where the format
 * allows it without re-quantizing (fp8, 2-D fp8_block and nvfp4 with
 * block_dims 2: columnwise from rowwise), an extra one
 * is dropped. Fails with QUANT_ERROR_STATE, changing nothing, when a direction
 * cannot be derived, when the tensor is hybrid and would need one, or when a
 * persistent tensor would drop one. */
quant_status quant_qtensor_update_usage(quant_qtensor *tensor, uint32_t usage, void *stream);

/* Converts the scales of every direction to the GEMM-swizzled layout
 * (gemm_swizzled nonzero) or back to the compact one, in place. Formats without
 * such a layout return QUANT_ERROR_UNSUPPORTED. */
quant_status quant_qtensor_set_gemm_swizzled_scales(quant_qtensor *tensor, int32_t gemm_swizzled, void *stream);

#define QUANT_MAX_DIMS 8
#define QUANT_FORMAT_NAME_LEN 32

typedef struct {
  size_t struct_size;                            /* sizeof(quant_qtensor_info) */
  int32_t ndim;                                  /* logical rank */
  int64_t shape[QUANT_MAX_DIMS];                 /* logical shape */
  uint32_t usage;                                /* directions present (QUANT_USAGE_* bits) */
  DLDevice device;                               /* where the buffers live */
  int32_t persistent;                            /* nonzero for persistent tensors */
  char rowwise_format[QUANT_FORMAT_NAME_LEN];    /* "" when absent */
  char columnwise_format[QUANT_FORMAT_NAME_LEN]; /* "" when absent */
} quant_qtensor_info;

/* Describes a tensor. info->struct_size must be set; fields past it are not written. */
quant_status quant_qtensor_get_info(const quant_qtensor *tensor, quant_qtensor_info *info);

/* Fills view with a DLTensor over one buffer of one direction. The view (its
 * data and shape) stays valid until the tensor is freed or re-quantized into a
 * new layout. */
quant_status quant_qtensor_buffer(const quant_qtensor *tensor, uint32_t direction, quant_buffer_kind kind,
                                  DLTensor *view);

/* ------------------------------------------------------------------------- */
/* Delayed scaling (format "fp8", scaling QUANT_SCALING_DELAYED)             */
/* ------------------------------------------------------------------------- */

/* Views of the quantizer's FP32 scale [1] and amax history [L] (CPU memory).
 * Element 0 of the history stages this step's amax: quantize max-reduces into
 * it. Either output may be NULL. direction picks the side of a hybrid
 * quantizer (QUANT_DIRECTION_ANY for a plain one). */
quant_status quant_delayed_scaling_state(const quant_quantizer *quantizer, uint32_t direction, DLTensor *scale,
                                         DLTensor *amax_history);

/* Runs the amax-history and scale update (TransformerEngine's fused rule).
 * reduced_amax, when not NULL, is this step's amax after the caller reduced it
 * (MAX) across processes; NULL uses the staged history[0]. */
quant_status quant_delayed_scaling_update(quant_quantizer *quantizer, uint32_t direction,
                                          const float *reduced_amax);

/* ------------------------------------------------------------------------- */
/* Hybrid and identity quantizers, persistent tensors                         */
/* ------------------------------------------------------------------------- */

/* Where a hybrid quantizer's columnwise side takes its input from. */
typedef enum {
  QUANT_COLUMNWISE_SOURCE_ORIGINAL = 0,           /* the tensor being quantized */
  QUANT_COLUMNWISE_SOURCE_ROWWISE_DEQUANTIZED = 1 /* its rowwise-quantized, dequantized value, so that the
                                                     backward pass sees the forward-quantized tensor */
} quant_columnwise_source;

/* Creates a hybrid quantizer: the rowwise direction uses rowwise's format and
 * parameters, the columnwise direction columnwise's (two distinct quantizers,
 * neither hybrid), so one quantized tensor holds two formats (e.g. MXFP8
 * forward, NVFP4 backward). The hybrid's own usage bits (default: both) decide
 * which sides run. It shares the two quantizers' state (delayed scaling) and
 * keeps them alive: the caller may free its handles at once. A hybrid tensor's
 * update_usage can only drop directions.
 *
 * Identity is a format like any other: config.format "identity" holds the
 * high-precision values (cast to config.dtype if set, else the input's dtype)
 * in one buffer that serves both directions; use it on either side of a
 * hybrid, or from a recipe to keep a role in high precision. */
quant_status quant_quantizer_create_hybrid(quant_quantizer *rowwise, quant_quantizer *columnwise,
                                           int32_t columnwise_source, quant_quantizer **out);

/* Marks a tensor persistent (nonzero) or temporary (0). A persistent tensor,
 * such as a weight kept across steps, never loses a direction: quantize_into
 * refreshes every direction it holds whatever the quantizer's usage, and
 * update_usage refuses to drop one (TransformerEngine PR #2929). Same as
 * quant_quantize_options.persistent at creation. */
quant_status quant_qtensor_set_persistent(quant_qtensor *tensor, int32_t persistent);

/* ------------------------------------------------------------------------- */
/* GEMM                                                                       */
/* ------------------------------------------------------------------------- */

/* One GEMM operand: a quantized tensor, or a plain FP32/BF16/FP16 DLTensor
 * (set exactly one), and whether the GEMM uses its transpose. */
typedef struct {
  const quant_qtensor *qtensor; /* a quantized operand, or NULL */
  const DLTensor *tensor;       /* a high-precision operand, or NULL */
  int32_t trans;                /* nonzero: op(X) = X^T, else op(X) = X */
} quant_gemm_operand;

/* D = alpha * op(A) * op(B) + beta * C + bias   (+ D's old contents if accumulate)
 *
 * Row-major. Each operand is taken as its 2-D view [rows, cols] (leading dims
 * flattened); op(A) is [M, K], op(B) is [K, N]; d (and c) have the 2-D view
 * [M, N]. Products accumulate in FP32; d is FP32, BF16 or FP16 and the
 * epilogue runs in FP32 in this order: alpha*sum, + beta*c, + bias[j], + old d.
 *
 * A quantized operand is read in the direction its contraction needs
 * (TransformerEngine's rule): A contracts over its last dim (rowwise data)
 * unless trans, then over its first (columnwise); B contracts over its first
 * dim (columnwise) unless trans, then over its last (rowwise). So fprop
 * Y = X W^T takes X rowwise and W rowwise, dgrad dX = dY W takes dY rowwise and
 * W columnwise, wgrad dW = dY^T X takes both columnwise. A missing direction
 * fails with QUANT_ERROR_STATE naming the operand and the direction. Formats
 * may differ (hybrid tensors, identity, plain tensors); per-tensor factors
 * (FP8 scale_inv, NVFP4 global scales) are folded into alpha.
 *
 * On the CPU every pair is emulated: tiles are dequantized on the fly into an
 * FP32 blocked GEMM. Other devices need a GEMM kernel from a loaded plugin
 * (QUANT_ERROR_DEVICE_UNAVAILABLE otherwise); quant_gemm_support says which
 * pairs run where. */
typedef struct {
  size_t struct_size;   /* sizeof(quant_gemm_args) */
  quant_gemm_operand a; /* A */
  quant_gemm_operand b; /* B */
  const float *alpha;   /* NULL: 1 */
  const float *beta;    /* scale of c; NULL: 1. Must be NULL when c is NULL */
  const DLTensor *c;    /* optional addend [M, N]; may be d itself */
  const DLTensor *bias; /* optional [N], added to every row */
  DLTensor *d;          /* output [M, N], FP32, BF16 or FP16 */
  int32_t accumulate;   /* nonzero: add the product to d's contents */
  void *stream;         /* cudaStream_t for device tensors; ignored on the CPU */
} quant_gemm_args;

/* Runs one GEMM; all tensors on one device. */
quant_status quant_gemm(const quant_gemm_args *args);

typedef enum {
  QUANT_GEMM_UNSUPPORTED = 0, /* cannot run: reason says why */
  QUANT_GEMM_EMULATED = 1,    /* runs by dequantizing to a wider type */
  QUANT_GEMM_NATIVE = 2       /* the hardware multiplies the formats directly */
} quant_gemm_support_level;

#define QUANT_GEMM_REASON_LEN 128

/* How operands of two formats multiply on a device. A plain DLTensor operand
 * counts as format "identity". */
typedef struct {
  char format_a[QUANT_FORMAT_NAME_LEN]; /* format of A's direction the GEMM reads */
  char format_b[QUANT_FORMAT_NAME_LEN]; /* format of B's direction the GEMM reads */
  int32_t level;                        /* quant_gemm_support_level */
  char reason[QUANT_GEMM_REASON_LEN];   /* why, in words */
} quant_gemm_support_entry;

/* Says how format_a x format_b multiply on device (kDLCPU or kDLCUDA). */
quant_status quant_gemm_support(DLDevice device, const char *format_a, const char *format_b,
                                quant_gemm_support_entry *entry);

/* The whole table for a device: one entry per ordered pair of registered
 * formats, sorted. Writes at most capacity entries and the full count to
 * *count; entries may be NULL to ask for the count. Returns
 * QUANT_ERROR_BUFFER_TOO_SMALL if capacity < *count (entries non-NULL). */
quant_status quant_gemm_support_table(DLDevice device, quant_gemm_support_entry *entries, size_t capacity,
                                      size_t *count);

/* ------------------------------------------------------------------------- */
/* Recipes and roles                                                          */
/* ------------------------------------------------------------------------- */

/* A quantizer slot (TransformerEngine's QuantizerRole). NULL and "" are the
 * empty string; in a rule's pattern an empty field matches anything. */
typedef struct {
  const char *module_type; /* "linear", "grouped_linear", "dpa" */
  const char *tensor_type; /* "input", "weight", "output", "grad_output", "grad_input"; dpa: "qkv", "s", "do", "dp" */
  const char *name;        /* free-form, e.g. "fc1" */
} quant_role;

typedef enum {
  QUANT_RECIPE_FP8_DELAYED = 1, /* format "fp8", delayed scaling */
  QUANT_RECIPE_FP8_CURRENT = 2, /* format "fp8", current scaling */
  QUANT_RECIPE_FP8_BLOCK = 3,   /* format "fp8_block": 1x128 activations and grads, 128x128 weights */
  QUANT_RECIPE_MXFP8 = 4,       /* format "mxfp8" */
  QUANT_RECIPE_NVFP4 = 5        /* format "nvfp4": RHT on inputs and grads, 16x16 weights, SR on grads */
} quant_recipe_kind;

typedef enum {
  QUANT_FP8_FORMAT_DEFAULT = 0, /* HYBRID for FP8 delayed/current, E4M3 for MXFP8 and FP8 block */
  QUANT_FP8_FORMAT_E4M3 = 1,    /* E4M3 for every role */
  QUANT_FP8_FORMAT_HYBRID = 2   /* E4M3 forward, E5M2 for grad_output/grad_input (do/dp) */
} quant_fp8_format;

/* A built-in recipe. Zero fields take TransformerEngine's defaults; fields a
 * kind does not use must stay zero where noted. Every role's quantizer
 * produces both directions until its usage is set. */
typedef struct {
  size_t struct_size;                  /* sizeof(quant_recipe_config) */
  int32_t kind;                        /* quant_recipe_kind */
  int32_t fp8_format;                  /* quant_fp8_format (0 for NVFP4) */
  float margin;                        /* FP8 delayed */
  int32_t amax_history_len;            /* FP8 delayed; 0: 1024 */
  int32_t amax_compute_algo;           /* FP8 delayed: quant_amax_algo */
  int32_t force_pow2_scales;           /* FP8 current: power-of-two scales */
  float amax_epsilon;                  /* FP8 current and block: amax floor */
  int32_t fp32_scales;                 /* FP8 block: FP32 scales instead of powers of two */
  int32_t disable_rht;                 /* NVFP4: no Hadamard transform (NVTE_NVFP4_DISABLE_RHT) */
  int32_t disable_stochastic_rounding; /* NVFP4: round grads to nearest */
  int32_t disable_2d_quantization;     /* NVFP4: 1x16 blocks for weights too */
  uint64_t seed;                       /* NVFP4 stochastic rounding stream */
  uint64_t offset;
} quant_recipe_config;

typedef struct quant_recipe quant_recipe;

/* A custom recipe's factory: set *out to a NEW quantizer for role and return
 * QUANT_OK, or return an error status (quant_last_error() should say why).
 * libquant takes over the quantizer: the handle set in *out is consumed, and
 * quant_recipe_quantizer hands the quantizer to its caller under a new
 * handle. Setting no quantizer is an error: use an "identity" quantizer to keep
 * a role in high precision. Called on the thread that called
 * quant_recipe_quantizer (so concurrently when several threads ask one recipe
 * at once); it may call back into libquant. */
typedef quant_status (*quant_recipe_callback)(void *user_data, const quant_role *role, quant_quantizer **out);

/* A declarative rule: roles matching pattern get a copy of quantizer. */
typedef struct {
  quant_role pattern;                /* empty fields match anything */
  const quant_quantizer *quantizer;  /* template: each role gets a clone with its own state */
} quant_recipe_rule;

/* Creates a built-in recipe. Fails naming the format when it is not
 * registered in this build. */
quant_status quant_recipe_create(const quant_recipe_config *config, quant_recipe **out);

/* Creates a custom recipe from a factory callback; user_data is passed to it. */
quant_status quant_recipe_create_callback(quant_recipe_callback callback, void *user_data, quant_recipe **out);

/* Creates a custom recipe from a rule table: the first rule whose pattern
 * matches a role wins; no match is an error naming the role. The recipe keeps
 * its own references to the quantizers: the caller may free its handles. */
quant_status quant_recipe_create_rules(const quant_recipe_rule *rules, size_t count, quant_recipe **out);

/* Frees a recipe. NULL is a no-op. Quantizers it handed out stay valid. */
quant_status quant_recipe_free(quant_recipe *recipe);

/* Returns a new quantizer for role, owned by the caller (quant_quantizer_free). */
quant_status quant_recipe_quantizer(quant_recipe *recipe, const quant_role *role, quant_quantizer **out);

/* ------------------------------------------------------------------------- */
/* Plugins                                                                    */
/* ------------------------------------------------------------------------- */

/* Native plugins add formats and kernels for other devices (include/
 * quant_plugin.h is their ABI). libquant loads, on its first call:
 *  1. every entry of LIBQUANT_PLUGIN_PATH (':'-separated, like PATH): a plugin
 *     file, or a folder whose libquant_*.so files are loaded;
 *  2. libquant_cuda.so from the folder libquant.so itself was loaded from,
 *     unless LIBQUANT_PLUGIN_AUTOLOAD=0.
 * A plugin that fails to load leaves libquant working without it; the failure
 * is listed by quant_plugin_get_info with its reason. CUDA tensors need a loaded
 * CUDA plugin: without one, calls on them fail with
 * QUANT_ERROR_DEVICE_UNAVAILABLE. */

typedef enum {
  QUANT_PLUGIN_ORIGIN_EXPLICIT = 0, /* quant_plugin_load */
  QUANT_PLUGIN_ORIGIN_ENV = 1,      /* LIBQUANT_PLUGIN_PATH */
  QUANT_PLUGIN_ORIGIN_AUTO = 2      /* libquant_cuda.so next to libquant.so */
} quant_plugin_origin;

/* Operation bits of a plugin's kernel set. */
#define QUANT_OP_AMAX 1u
#define QUANT_OP_QUANTIZE 2u
#define QUANT_OP_DEQUANTIZE 4u
#define QUANT_OP_DERIVE 8u
#define QUANT_OP_SWIZZLE_SCALES 16u
#define QUANT_OP_GEMM 32u

typedef struct {
  size_t struct_size;   /* sizeof(quant_plugin_info) */
  const char *path;     /* the file, as given */
  const char *name;     /* the plugin's name ("" if it failed before saying) */
  const char *version;  /* the plugin's own version ("" if unknown) */
  uint32_t abi_version; /* plugin ABI it was built for (0 if unknown) */
  int32_t origin;       /* quant_plugin_origin */
  int32_t status;       /* QUANT_OK when loaded; else the quant_status of the failure */
  const char *message;  /* "" when loaded; else why it did not load */
  uint32_t num_formats; /* formats it defines */
  uint32_t num_kernels; /* kernel sets it provides */
} quant_plugin_info;

typedef struct {
  size_t struct_size;     /* sizeof(quant_plugin_kernel_info) */
  const char *format;     /* format name */
  int32_t device_type;    /* DLDeviceType the kernels run on */
  uint32_t ops;           /* QUANT_OP_* bits provided */
  int32_t defines_format; /* nonzero: the plugin defines this format itself */
} quant_plugin_kernel_info;

/* Loads a plugin file and registers what it provides. *index (may be NULL)
 * receives its position in the plugin list. Loading a file already loaded is a
 * no-op that reports the same index. Fails with QUANT_ERROR_PLUGIN (and loads
 * nothing) for a missing file, a library without quant_plugin_get, a plugin
 * built for another plugin ABI version, or an invalid table. */
quant_status quant_plugin_load(const char *path, size_t *index);

/* The number of entries in the plugin list: loaded plugins, and automatic or
 * LIBQUANT_PLUGIN_PATH loads that failed. */
quant_status quant_plugin_count(size_t *count);

/* Describes entry index of the plugin list. The strings stay valid for the life
 * of the process. info->struct_size must be set. */
quant_status quant_plugin_get_info(size_t index, quant_plugin_info *info);

/* Describes kernel set `kernel` (0..num_kernels-1) of plugin `index`. */
quant_status quant_plugin_get_kernel(size_t index, size_t kernel, quant_plugin_kernel_info *info);

/* The name of format `format` (0..num_formats-1) that plugin `index` defines;
 * valid for the life of the process. */
quant_status quant_plugin_get_format(size_t index, size_t format, const char **name);

#ifdef __cplusplus
}
#endif

#endif /* LIBQUANT_QUANT_H_ */
