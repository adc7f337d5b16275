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
#define QUANT_VERSION_MINOR 4
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
  QUANT_ELEMENT_E2M1 = 3,    /* FP4 E2M1 (max 6) */
  QUANT_ELEMENT_E2M3 = 4,    /* FP6 E2M3 (max 7.5; OCP MX v1.0, the mxfp6 plugin) */
  QUANT_ELEMENT_E3M2 = 5     /* FP6 E3M2 (max 28; OCP MX v1.0, the mxfp6 plugin) */
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
 *                 Any M, K (spec §14: the bytes of the tensor zero-padded to
 *                 multiples of 32, padding dropped). Buffers per direction:
 *                 data [M, K] (columnwise NOT transposed), scale_inv E8M0
 *                 rowwise [pad128(M), pad4(ceil(K/32))], columnwise
 *                 [pad4(ceil(M/32)), pad128(K)]; padding is zero.
 * format "mxfp4": MXFP4, E2M1 elements packed two per byte (even index in the
 *                 low nibble) with one E8M0 scale per 32. element (E2M1 only),
 *                 scale_rounding, gemm_swizzled_scales. Any M, K (spec §14).
 *                 Data uint8 rowwise [M, ceil(K/2)], columnwise transposed
 *                 [K, ceil(M/2)] (an odd row's last high nibble is zero);
 *                 scale_inv rowwise [pad128(M), pad4(ceil(K/32))], columnwise
 *                 [pad128(K), pad4(ceil(M/32))].
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
 *                 direction. Any M, K (spec §14: the bytes of the tensor zero-padded to
 *                 multiples of 16, padding dropped; a partial RHT group is transformed
 *                 zero-padded; stochastic rounding keyed by the unpadded flat index).
 *                 Buffers per direction: data uint8 [M, ceil(K/2)] rowwise, [K, ceil(M/2)]
 *                 columnwise (the transpose; element 2i in the low nibble of byte i, an
 *                 odd row's last high nibble zero); scale_inv E4M3 [pad128(M),
 *                 pad4(ceil(K/16))] rowwise, [pad128(K), pad4(ceil(M/16))] columnwise
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
 * quantizer's current usage, rowwise first. Writes the full count to *count
 * and the entries to descs; descs may be NULL to ask for the count. Returns
 * QUANT_ERROR_BUFFER_TOO_SMALL, with *count set and no entry written, if
 * capacity < *count (descs non-NULL). */
quant_status quant_quantizer_layout(const quant_quantizer *quantizer, const int64_t *shape, int32_t ndim,
                                    quant_buffer_desc *descs, size_t capacity, size_t *count);

/* quant_quantizer_layout for usage (QUANT_USAGE_* bits; 0: the quantizer's)
 * instead of the quantizer's current usage, which it leaves alone: the buffers
 * of a quantize with quant_quantize_options.usage set to usage. */
quant_status quant_quantizer_layout_usage(const quant_quantizer *quantizer, uint32_t usage, const int64_t *shape,
                                          int32_t ndim, quant_buffer_desc *descs, size_t capacity, size_t *count);

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
  /* Version 2 (appended; on 64-bit targets it fills what was tail padding: zero the struct, as the
     rule above says): */
  uint32_t usage;         /* QUANT_USAGE_* bits to produce instead of the quantizer's usage (0: the
                             quantizer's). The quantizer is left alone, so threads sharing one can
                             each ask for their own directions; other bits: QUANT_ERROR_INVALID_ARGUMENT */
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

/* A quantize plan: quant_quantize_into(quantizer, input, options, dst) prepared
 * once and repeated on inputs of the same dtype, shape, strides, byte_offset and
 * device at other addresses (a layer's activations step after step, a decode
 * step's tokens). A run skips the checks and the argument building that the
 * call repeats every time; where the quantize is one call of a native plugin's
 * kernel (the CUDA plugin, a plain quantizer), a run enters no Go code at all
 * and costs little more than the plugin's kernel launch. Runs give the bytes
 * quant_quantize_into gives.
 *
 * quant_quantize_plan_create runs quant_quantize_into(quantizer, input, options,
 * dst) once, then returns the plan. The plan keeps the quantizer alive (freeing
 * its handle is allowed) and pins dst: until the plan is freed, freeing dst,
 * changing its usage or scale layout, or a quantize_into that would replace,
 * drop or re-lay-out its buffers fails with QUANT_ERROR_STATE. The quantizer's
 * settings are the plan's as they were at creation. options->amax, if set, is read
 * at every run from the address it had at creation: keep that memory alive until
 * the plan is freed. A plan runs on one thread at a time (runs from several threads
 * are serialized). */
typedef struct quant_quantize_plan quant_quantize_plan;

quant_status quant_quantize_plan_create(quant_quantizer *quantizer, const DLTensor *input,
                                        const quant_quantize_options *options, quant_qtensor *dst,
                                        quant_quantize_plan **out);

/* quant_quantize_into of the plan's input with data in place of input->data
 * (byte_offset still added), on stream (cudaStream_t; ignored on the CPU) in place
 * of options->stream. data must hold a tensor laid out as the plan's input (that
 * cannot be checked); NULL (for a non-empty tensor) or an address not aligned to
 * the dtype: QUANT_ERROR_INVALID_ARGUMENT. */
quant_status quant_quantize_plan_run(quant_quantize_plan *plan, const void *data, void *stream);

/* Frees the plan and unpins its dst. NULL is a no-op. */
quant_status quant_quantize_plan_free(quant_quantize_plan *plan);

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
  /* Appended (a caller built against an older quant.h passes a smaller
   * struct_size and gets 0). Nonzero: never the fused Hopper kernel (FP8
   * tensor cores, block scales applied per 32 / 16, README "Fused Hopper
   * GEMM"), always the exact path (dequantized to BF16, FP32 accumulation),
   * whose results are the same on every GPU. 0: the fastest path the device
   * has for the pair. */
  int32_t exact;
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
 * formats, sorted. Writes the full count to *count and the entries; entries
 * may be NULL to ask for the count. Returns QUANT_ERROR_BUFFER_TOO_SMALL, with
 * *count set and no entry written, if capacity < *count (entries non-NULL). */
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
 *     file, or a folder whose libquant_*.so files are loaded (and whose
 *     libquant-plugin-* files are offered as executable plugins, below);
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
 * no-op that reports the same index (with quant_plugin_load_ex's sha256, only
 * when it equals the digest the file had when it was loaded; see there). Fails with QUANT_ERROR_PLUGIN (and loads
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

/* Executable format plugins. A format written in Go cannot be loaded into
 * libquant's process (two Go runtimes), so it is an executable built with
 * libquant's pluginsdk package that libquant starts as a child process
 * (hashicorp/go-plugin: versioned handshake, gRPC with mutual TLS). Its
 * formats register like any other, with CPU kernels; tensors cross through
 * memory shared with the child, and CUDA tensors are refused.
 *
 * quant_plugin_load and LIBQUANT_PLUGIN_PATH take such a file as well as a
 * native .so: a file is an executable plugin when it is an ELF executable
 * (ET_EXEC, or ET_DYN with an interpreter) that does not export
 * quant_plugin_get. It runs only when its SHA-256 is known: from
 * quant_plugin_load_options.sha256, or from a line "<sha256>  <path>" (as
 * sha256sum writes it; a relative path is taken from the manifest's folder or
 * the working folder) of the file LIBQUANT_PLUGIN_MANIFEST names. A file
 * whose digest differs, or that is listed nowhere, is refused with
 * QUANT_ERROR_PLUGIN. In the plugin list, abi_version is the plugin's
 * handshake version.
 *
 * In a LIBQUANT_PLUGIN_PATH folder, executable plugins must be named
 * libquant-plugin-* (libquant_*.so files are always loaded as native
 * plugins). Such a file runs only if it is an executable plugin by the ELF
 * rule above AND a LIBQUANT_PLUGIN_MANIFEST line gives its digest (there are
 * no load options): an unlisted one is refused, never run, and its failure is
 * in the plugin list; a libquant-plugin-* file that is not an ELF executable
 * is skipped (neither run nor dlopened). Other files of the folder are
 * ignored: name any other executable plugin as a file entry.
 *
 * A plugin that crashes, exits, or does not answer a call within its deadline
 * is stopped: that call and later ones on its formats fail with
 * QUANT_ERROR_PLUGIN and the reason (also in the plugin list's message);
 * loading the file again starts it anew. A plugin never outlives libquant's
 * process, however it ends. */

typedef struct {
  size_t struct_size;       /* sizeof(quant_plugin_load_options) */
  const char *sha256;       /* the file's expected SHA-256, 64 hex digits; NULL: the manifest's */
  uint64_t arena_bytes;     /* executable: size of the shared memory; 0: 16 GiB (virtual, used as touched) */
  uint32_t call_timeout_ms; /* executable: the deadline of each call; 0: 60000 */
} quant_plugin_load_options;

/* quant_plugin_load with options; sha256 is checked for a native .so too.
 * For a file already loaded (or running), sha256 is compared with the digest
 * recorded when it was loaded, i.e. of the code that runs, not with the file
 * as it is now: a mismatch fails with QUANT_ERROR_PLUGIN naming both digests
 * and leaves the loaded plugin as it was (for an executable plugin,
 * quant_shutdown then a new load runs the file as it is now; a native plugin
 * is never unloaded). */
quant_status quant_plugin_load_ex(const char *path, const quant_plugin_load_options *opts, size_t *index);

/* Stops every executable plugin cleanly (native plugins stay loaded). Calls
 * on their formats then fail with QUANT_ERROR_PLUGIN until they are loaded
 * again. Call it before exiting, or let the plugins end with the process. */
quant_status quant_shutdown(void);

/* ------------------------------------------------------------------------- */
/* The caller's device allocator                                              */
/* ------------------------------------------------------------------------- */

/* Device memory for quantized tensors, linear contexts and scratch comes from
 * the plugin that serves the device (the CUDA plugin: cudaMallocAsync on the
 * call's stream). A framework with its own allocator can supply it instead,
 * for example PyTorch's caching allocator, so that libquant's buffers live in
 * its pools and a CUDA graph capture owns them (libquant.torch does this).
 *
 * alloc returns 0 and stores the buffer in *out (NULL only for 0 bytes), or
 * nonzero when it cannot: the libquant call then fails with
 * QUANT_ERROR_OUT_OF_MEMORY. stream is the call's (cudaStream_t). free gets a
 * pointer alloc returned and the stream that last used the buffer. Buffers
 * allocated before a change keep their allocator; a NULL allocator (or NULL
 * alloc) restores the plugin's. Copies, memsets and synchronisation stay the
 * plugin's. Both callbacks run on the threads that call libquant, possibly
 * concurrently, and must not call libquant. QUANT_ERROR_DEVICE_UNAVAILABLE
 * when no loaded plugin manages the device type's memory. */
typedef int32_t (*quant_device_alloc_fn)(void *user_data, int32_t device_id, size_t nbytes, void *stream, void **out);
typedef void (*quant_device_free_fn)(void *user_data, int32_t device_id, void *ptr, void *stream);

typedef struct {
  size_t struct_size;          /* sizeof(quant_device_allocator) */
  quant_device_alloc_fn alloc;
  quant_device_free_fn free;   /* required with alloc */
  void *user_data;             /* passed to both */
} quant_device_allocator;

quant_status quant_set_device_allocator(int32_t device_type, const quant_device_allocator *allocator);

/* ------------------------------------------------------------------------- */
/* Linear layers (TransformerEngine's Linear and GroupedLinear)               */
/* ------------------------------------------------------------------------- */

/* A quant_linear is the quantization state of one linear layer, as a
 * TransformerEngine module keeps it: one quantizer per role (input, weight,
 * grad_output) and GEMM, whose delayed-scaling state lives across steps, and
 * the quantized weight of each GEMM. The high-precision weight, bias and
 * activations stay the caller's: every call passes them as DLTensors.
 *
 *   forward   Y = X W^T + b        X [..., K] as its 2-D view [M, K], W [N, K], Y [..., N]
 *   dgrad    dX = dY W              (grad_input)
 *   wgrad    dW = dY^T X            (grad_weight)
 *   dbias    db = column sums of dY (grad_bias)
 *
 * A grouped layer (mixture of experts) has num_gemms GEMMs: the rows of X are
 * split into consecutive groups (m_splits, zeros allowed), group g is
 * multiplied by its own weight g (all [N, K]) and bias g, and its output rows
 * land where its input rows were.
 *
 * Products accumulate in FP32 (quant_gemm). The forward pass always runs on
 * quantized operands: the input and weight quantized rowwise. What backward
 * uses depends on backward_override (TransformerEngine's NVTE_BACKWARD_OVERRIDE):
 *  - QUANT_BACKWARD_OVERRIDE_NONE: backward quantizes dY with the grad_output
 *    quantizer and multiplies dY rowwise x W columnwise (dgrad) and dY
 *    columnwise x X columnwise (wgrad); it quantizes the directions of dY the
 *    requested gradients read (both, as TransformerEngine does, when dgrad and
 *    wgrad both run). The forward pass therefore quantizes
 *    X also columnwise when the weight needs a gradient (unless
 *    save_original_input) and W also columnwise when the input needs one.
 *  - QUANT_BACKWARD_OVERRIDE_HIGH_PRECISION: the context keeps copies of the
 *    original X and W and backward multiplies them with the unquantized dY
 *    (save_original_input is forced on).
 *  - QUANT_BACKWARD_OVERRIDE_DEQUANTIZED: the context keeps only the rowwise
 *    forward-quantized X and W and backward multiplies their values,
 *    dequantized to X's dtype, with the unquantized dY (save_original_input is
 *    forced off, so results do not depend on it).
 * save_original_input (NONE only) keeps a copy of the original X instead of
 * its columnwise quantized form, and quantizes it columnwise in backward.
 * A layer using delayed scaling (in any of its quantizers) rejects every
 * override and save_original_input with QUANT_ERROR_INVALID_ARGUMENT.
 *
 * A tensor is kept for backward only when a requested gradient needs it: X
 * only if weight_requires_grad, W only if input_requires_grad (a frozen
 * weight keeps no X). quant_linear_ctx_get_info reports what a context holds.
 *
 * The quantized weight. The layer quantizes weight g the first time a
 * forward needs it and reuses it until told the weight changed: call
 * quant_linear_weight_updated after every in-place update of the weight
 * (the optimizer step). A weight passed at another address, dtype or shape is
 * re-quantized without being told. The quantized weight is persistent: it is
 * re-quantized in place (same buffers), and once it holds a direction (a
 * training step needs columnwise) every later re-quantize refreshes that
 * direction too, even for inference steps, so usages never shrink
 * (TransformerEngine PR #2929). A context that still holds the old quantized
 * weight for its backward keeps it: the layer then re-quantizes into new
 * buffers (copy on write). A caller that holds its weight only quantized
 * (TransformerEngine's quantized_model_init) passes it as weight_qtensor
 * instead: quantized by itself (quant_quantize_into with persistent set, both
 * usages, e.g. over buffers of its own, after every optimizer step), used as
 * is and never cached.
 *
 * Current scaling across processes: input_amax, weight_amax and
 * grad_output_amax replace the amaxes the quantizers would compute
 * (quant_compute_amax gives them; all-reduce them with MAX first), so every
 * process quantizes with the same scales.
 *
 * Contexts. A forward that is given a ctx returns a context holding what the
 * requested gradients need. Backward runs once on it and frees what it held;
 * a second backward, or one on a freed context, fails. Free every context
 * with quant_linear_ctx_free (also when backward never runs). A context keeps
 * what it needs alive: it stays valid after its layer is freed, and the
 * caller may reuse X and W's memory once forward returns.
 *
 * Delayed scaling (recipe QUANT_RECIPE_FP8_DELAYED, or delayed quantizers).
 * Each quantize stages its amax in the quantizer's history (slot 0); the scale
 * it uses is the one from the last update. TransformerEngine updates the
 * forward state (input and weight quantizers) once the forward pass of the
 * step is done, and the backward state (grad_output quantizers) once the
 * backward pass is done. libquant leaves the timing to the caller, per layer:
 *   for each step:
 *     quant_linear_forward(...)                       every layer
 *     quant_linear_update_scaling(layer, QUANT_LINEAR_PASS_FORWARD, NULL, 0)
 *     quant_linear_backward(...)                      every layer
 *     quant_linear_update_scaling(layer, QUANT_LINEAR_PASS_BACKWARD, NULL, 0)
 *     optimizer step, quant_linear_weight_updated(layer, -1)
 * With several processes (data or tensor parallel), reduce the amaxes first:
 * quant_linear_scaling_amaxes gives this process's staged amaxes of a pass;
 * all-reduce them (MAX) with the other processes' and pass the result to
 * quant_linear_update_scaling. Without delayed scaling both calls do nothing
 * (count 0). */

typedef enum {
  QUANT_BACKWARD_OVERRIDE_NONE = 0,           /* quantized backward */
  QUANT_BACKWARD_OVERRIDE_HIGH_PRECISION = 1, /* backward on the original tensors */
  QUANT_BACKWARD_OVERRIDE_DEQUANTIZED = 2     /* backward on the dequantized forward operands */
} quant_backward_override;

typedef enum {
  QUANT_LINEAR_PASS_FORWARD = 1, /* the input and weight quantizers' delayed-scaling state */
  QUANT_LINEAR_PASS_BACKWARD = 2 /* the grad_output quantizers' */
} quant_linear_pass;

typedef struct quant_linear quant_linear;
typedef struct quant_linear_ctx quant_linear_ctx;

/* A layer's quantizers: either a recipe (and a name), or explicit quantizers. */
typedef struct {
  size_t struct_size;     /* sizeof(quant_linear_config) */
  quant_recipe *recipe;   /* quantizers from the recipe's roles: module_type "linear" (or
                             "grouped_linear"), tensor_type "input", "weight", "grad_output",
                             and name; one call per role and GEMM. NULL: the arrays below */
  const char *name;       /* the roles' name, e.g. "fc1" (NULL: "") */
  int32_t num_gemms;      /* 0: a plain linear layer (one GEMM, quant_linear_forward);
                             1..65536: a grouped layer (quant_grouped_linear_forward) */
  quant_quantizer *const *input_quantizers;       /* without a recipe: one per GEMM each (1 for */
  quant_quantizer *const *weight_quantizers;      /* a plain layer). The layer keeps references: */
  quant_quantizer *const *grad_output_quantizers; /* the caller may free its handles */
} quant_linear_config;

/* Creates a layer. Fails naming the role a recipe has no quantizer for. */
quant_status quant_linear_create(const quant_linear_config *config, quant_linear **out);

/* Frees a layer and its quantized weights. NULL is a no-op. Contexts of its
 * earlier forwards stay valid. */
quant_status quant_linear_free(quant_linear *layer);

/* A new handle to the layer's quantizer for tensor_type ("input", "weight" or
 * "grad_output") of GEMM gemm (0 for a plain layer). It shares the layer's
 * state: read its delayed-scaling state, or update it yourself. Free it with
 * quant_quantizer_free. */
quant_status quant_linear_quantizer(quant_linear *layer, const char *tensor_type, int32_t gemm,
                                    quant_quantizer **out);

/* Says the high-precision weight of GEMM gemm (every GEMM for -1) changed in
 * place: the next forward re-quantizes it. */
quant_status quant_linear_weight_updated(quant_linear *layer, int32_t gemm);

/* Describes the quantized weight of GEMM gemm (usage, formats, persistent).
 * QUANT_ERROR_STATE before a forward has quantized it. */
quant_status quant_linear_weight_get_info(const quant_linear *layer, int32_t gemm, quant_qtensor_info *info);

/* One forward call of a plain layer. Flags are 0 or 1. */
typedef struct {
  size_t struct_size;           /* sizeof(quant_linear_forward_args) */
  const DLTensor *input;        /* X [..., K]: FP32, BF16 or FP16 */
  const DLTensor *weight;       /* W [N, K] */
  const DLTensor *bias;         /* [N], or NULL */
  DLTensor *output;             /* Y [..., N] (X's leading dims): FP32, BF16 or FP16 */
  int32_t backward_override;    /* quant_backward_override */
  int32_t save_original_input;  /* keep X itself for wgrad; the overrides force it (on for
                                   HIGH_PRECISION, off for DEQUANTIZED) */
  int32_t input_requires_grad;  /* backward will compute grad_input */
  int32_t weight_requires_grad; /* backward will compute grad_weight; 0 for a frozen weight */
  void *stream;                 /* cudaStream_t for CUDA tensors: the whole forward runs on it */
  /* Version 2 of the struct (appended; older callers' smaller struct_size reads them as NULL): */
  const DLTensor *input_amax;   /* FP32 [2] (rowwise, columnwise) amax the input quantizer uses instead
                                   of computing it (quant_quantize_options.amax), e.g. all-reduced (MAX)
                                   across processes for current scaling; NULL computes it. A save_original_input
                                   context keeps a copy for backward's columnwise quantize */
  const DLTensor *weight_amax;  /* the same for the weight, used when the layer (re-)quantizes it; NULL
                                   computes it; not allowed with weight_qtensor */
  quant_qtensor *weight_qtensor;/* a weight the caller quantized ([N, K], e.g. quant_quantize_into over
                                   buffers of its own: a parameter held only in quantized form), used
                                   instead of quantizing weight, which must then be NULL. It must hold
                                   rowwise data, and columnwise too when input_requires_grad (quantized
                                   backward). The layer neither caches nor changes it; a context reads it
                                   in backward, so keep it alive and unchanged until then.
                                   QUANT_BACKWARD_OVERRIDE_HIGH_PRECISION with input_requires_grad needs
                                   the original weight and is refused with it */
} quant_linear_forward_args;

/* Runs the forward pass. ctx may be NULL (inference: nothing is kept; both
 * requires_grad flags must then be 0); otherwise *ctx receives a new context
 * for quant_linear_backward. */
quant_status quant_linear_forward(quant_linear *layer, const quant_linear_forward_args *args, quant_linear_ctx **ctx);

/* One backward call of a plain layer. A NULL gradient is not computed; at
 * least one must be set. grad_input needs input_requires_grad, grad_weight
 * weight_requires_grad, and grad_bias a bias, in the forward call. */
typedef struct {
  size_t struct_size;           /* sizeof(quant_linear_backward_args) */
  const DLTensor *grad_output;  /* dY, the output's shape: FP32, BF16 or FP16 */
  DLTensor *grad_input;         /* dX, the input's shape, or NULL */
  DLTensor *grad_weight;        /* dW [N, K], or NULL (overwritten, not accumulated) */
  DLTensor *grad_bias;          /* db [N], or NULL */
  void *stream;                 /* cudaStream_t for device tensors */
  /* Version 2 of the struct (appended): */
  const DLTensor *grad_output_amax; /* FP32 [2] amax the grad_output quantizer uses instead of computing
                                       it (quantized backward), e.g. all-reduced; NULL computes it */
} quant_linear_backward_args;

/* Runs the backward pass of ctx's forward, once. */
quant_status quant_linear_backward(quant_linear_ctx *ctx, const quant_linear_backward_args *args);

/* One forward call of a grouped layer with num_gemms GEMMs. */
typedef struct {
  size_t struct_size;           /* sizeof(quant_grouped_linear_forward_args) */
  const DLTensor *input;        /* X [..., K], as its 2-D view [M, K] */
  const int64_t *m_splits;      /* num_gemms row counts (>= 0, any value: spec §14) summing to M */
  const DLTensor *weights;      /* num_gemms weights [N, K] (an array of DLTensor) */
  const DLTensor *biases;       /* num_gemms biases [N], or NULL */
  DLTensor *output;             /* Y [..., N] */
  int32_t backward_override;    /* as quant_linear_forward_args */
  int32_t save_original_input;
  int32_t input_requires_grad;
  int32_t weight_requires_grad;
  void *stream;
  /* Version 2 of the struct (appended), per GEMM as quant_linear_forward_args' fields: */
  const DLTensor *input_amaxes;         /* FP32 [num_gemms, 2]: GEMM g's input amax, or NULL */
  const DLTensor *weight_amaxes;        /* FP32 [num_gemms, 2]: weight g's amax, or NULL */
  quant_qtensor *const *weight_qtensors;/* num_gemms caller-quantized weights; weights must then be NULL */
} quant_grouped_linear_forward_args;

quant_status quant_grouped_linear_forward(quant_linear *layer, const quant_grouped_linear_forward_args *args,
                                          quant_linear_ctx **ctx);

/* One backward call of a grouped layer. A group of zero rows gets zero
 * weight and bias gradients. */
typedef struct {
  size_t struct_size;           /* sizeof(quant_grouped_linear_backward_args) */
  const DLTensor *grad_output;  /* dY, the output's shape */
  DLTensor *grad_input;         /* dX, the input's shape, or NULL */
  DLTensor *grad_weights;       /* num_gemms dW [N, K], or NULL */
  DLTensor *grad_biases;        /* num_gemms db [N], or NULL */
  void *stream;
  /* Version 2 of the struct (appended): */
  const DLTensor *grad_output_amaxes; /* FP32 [num_gemms, 2]: GEMM g's grad_output amax, or NULL */
} quant_grouped_linear_backward_args;

quant_status quant_grouped_linear_backward(quant_linear_ctx *ctx, const quant_grouped_linear_backward_args *args);

/* What a context keeps of the input or the weight. */
typedef enum {
  QUANT_LINEAR_SAVED_NONE = 0,        /* nothing: no requested gradient needs it */
  QUANT_LINEAR_SAVED_ORIGINAL = 1,    /* a copy of the high-precision tensor */
  QUANT_LINEAR_SAVED_QUANTIZED = 2,   /* a quantized tensor of the context's own */
  QUANT_LINEAR_SAVED_LAYER_WEIGHT = 3 /* the layer's quantized weight, shared (not a copy) */
} quant_linear_saved;

typedef struct {
  size_t struct_size;           /* sizeof(quant_linear_ctx_info) */
  int32_t num_gemms;            /* 0 for a plain layer's context, as in the config */
  int32_t used;                 /* nonzero once backward ran (nothing is held then) */
  int32_t backward_override;    /* quant_backward_override */
  int32_t save_original_input;  /* effective: forced by the override */
  int32_t input_requires_grad;
  int32_t weight_requires_grad;
  int32_t input_saved;          /* quant_linear_saved */
  uint32_t input_usage;         /* directions the saved quantized input holds */
  int32_t weight_saved;         /* quant_linear_saved */
  uint32_t weight_usage;        /* direction of the layer's quantized weight backward reads */
  uint64_t input_bytes;         /* bytes of what is kept of the input, all GEMMs */
  uint64_t weight_bytes;        /* bytes of the weight data backward reads, all GEMMs */
  uint64_t owned_bytes;         /* bytes the context allocated itself (a shared layer weight
                                   is not included); freed by backward or quant_linear_ctx_free */
} quant_linear_ctx_info;

/* Describes a context. info->struct_size must be set. */
quant_status quant_linear_ctx_get_info(const quant_linear_ctx *ctx, quant_linear_ctx_info *info);

/* Frees a context and what it still holds. NULL is a no-op. */
quant_status quant_linear_ctx_free(quant_linear_ctx *ctx);

/* Writes the amax each delayed-scaling state of the pass staged this step,
 * in a fixed order (GEMM by GEMM; input then weight for the forward pass,
 * grad_output for the backward; rowwise then columnwise state for a hybrid
 * quantizer with two), and their number to *count. amaxes may be NULL to ask
 * for the count. QUANT_ERROR_BUFFER_TOO_SMALL, with *count set and no amax
 * written, if capacity < *count. */
quant_status quant_linear_scaling_amaxes(const quant_linear *layer, int32_t pass, float *amaxes, size_t capacity,
                                         size_t *count);

/* Runs the delayed-scaling update (quant_delayed_scaling_update's rule) on
 * every delayed-scaling state of the pass. reduced_amaxes: NULL (count 0) to
 * use each state's own staged amax, or count amaxes in
 * quant_linear_scaling_amaxes' order, reduced across processes. */
quant_status quant_linear_update_scaling(quant_linear *layer, int32_t pass, const float *reduced_amaxes,
                                         size_t count);

/* ------------------------------------------------------------------------- */
/* Grouped quantize                                                           */
/* ------------------------------------------------------------------------- */

/* Several tensors quantized with one quantizer in one call (MoE experts, as
 * TransformerEngine's grouped quantize): each inputs[i] (FP32, BF16 or FP16,
 * any shape, all of one dtype and on one device) is re-quantized into
 * outputs[i] exactly as quant_quantize_into would, in order; where the
 * device's kernels take a group (the CUDA plugin's fp8_block and fp8), all of them
 * in one launch, else one after the other. */
typedef struct {
  size_t struct_size;               /* sizeof(quant_quantize_grouped_args) */
  size_t count;                     /* number of tensors, >= 1 */
  const DLTensor *inputs;           /* [count] */
  quant_qtensor *const *outputs;    /* [count] distinct tensors, outputs[i] of inputs[i]'s shape */
  void *stream;                     /* cudaStream_t for CUDA tensors; ignored on the CPU */
} quant_quantize_grouped_args;

quant_status quant_quantize_grouped(quant_quantizer *quantizer, const quant_quantize_grouped_args *args);

#ifdef __cplusplus
}
#endif

#endif /* LIBQUANT_QUANT_H_ */
