/*
 * quant_plugin.h: the native plugin ABI of libquant.
 *
 * A native plugin is a shared library that exports one C function,
 * quant_plugin_get (QUANT_PLUGIN_ENTRY), which fills a versioned table:
 *  - the plugin's name, its own version, and the plugin ABI it was built for;
 *  - formats it defines (a name and a layout function; the host registers them
 *    like its built-in formats);
 *  - kernel sets per (format, device type): amax, quantize (every usage in one
 *    call), dequantize, derive (update_usage), scale swizzling, and a slot
 *    reserved for GEMM. A NULL function pointer means "not provided";
 *  - memory functions for a device type (stream-ordered allocation, copies,
 *    memset, synchronize), which back the host's allocator for that device.
 *
 * libquant loads plugins with quant_plugin_load(path), from the
 * LIBQUANT_PLUGIN_PATH variable, and loads libquant_cuda.so from the folder of
 * libquant.so itself (see quant.h, "Plugins").
 *
 * Rules every plugin follows:
 *  - Plain C: fixed-width types, structs passed by pointer, no C++ exceptions
 *    or longjmp across the boundary.
 *  - Every function returns an int32_t holding a quant_status (QUANT_OK = 0).
 *    On failure it writes a NUL-terminated message into err->message naming the
 *    argument and the reason; the host prefixes the plugin's name.
 *  - Functions may be called concurrently from several threads.
 *  - Device work runs asynchronously on the given stream, on the calling thread,
 *    in the calling thread's current device context. A tensor on another device
 *    than the current one is an error, not a silent device switch.
 *  - Arrays and strings the table points at stay valid for the life of the
 *    process (plugins are never unloaded).
 *  - Incompatible changes bump QUANT_PLUGIN_ABI_VERSION. The host refuses a
 *    plugin whose table says a version outside [QUANT_PLUGIN_ABI_MIN_VERSION,
 *    QUANT_PLUGIN_ABI_VERSION], with a message naming both.
 *    Compatible additions append fields to the structs below; the host's
 *    struct_size tells the plugin how much of a struct the host knows.
 *
 * Versions:
 *  1: formats, per-format kernels (amax, quantize, dequantize, derive,
 *     swizzle), memory.
 *  2: adds the GEMM (quant_plugin_gemm, appended to the table). A version 1
 *     plugin still loads: the host first offers version 2; a plugin that
 *     answers with table->abi_version 1 and a failure is asked again with 1
 *     (plugins built against version 1 compare host_abi_version for
 *     equality). A version 2 plugin offered 1 by an older host serves it
 *     without the GEMM (it must not write past the host's struct_size).
 */
#ifndef LIBQUANT_QUANT_PLUGIN_H_
#define LIBQUANT_QUANT_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#include "quant.h" /* quant_status, DLDataType, quant_buffer_kind */

#ifdef __cplusplus
extern "C" {
#endif

#define QUANT_PLUGIN_ABI_VERSION 2u
/* The oldest plugin ABI this header's host still loads. */
#define QUANT_PLUGIN_ABI_MIN_VERSION 1u

/* The one exported symbol. */
#define QUANT_PLUGIN_ENTRY "quant_plugin_get"

#define QUANT_PLUGIN_ERROR_LEN 512
#define QUANT_PLUGIN_MAX_BUFFERS 4
#define QUANT_PLUGIN_MAX_DIMS 4
#define QUANT_PLUGIN_FORMAT_LEN 32

/* A failed call's message. */
typedef struct {
  char message[QUANT_PLUGIN_ERROR_LEN]; /* NUL-terminated */
} quant_plugin_error;

/* A dense row-major tensor. */
typedef struct {
  void *data;                           /* CPU or device address; NULL only when empty */
  DLDataType dtype;                     /* element type */
  int32_t device_type;                  /* DLDeviceType: kDLCPU or kDLCUDA */
  int32_t device_id;                    /* device index (0 for the CPU) */
  int32_t ndim;                         /* 0..QUANT_PLUGIN_MAX_DIMS */
  int64_t shape[QUANT_PLUGIN_MAX_DIMS]; /* sizes of the ndim dims */
} quant_plugin_tensor;

/* One direction of a quantized tensor: its buffers in the order the format's
 * layout lists them. num_buffers == 0 means the direction is not present. */
typedef struct {
  uint32_t num_buffers;
  int32_t kinds[QUANT_PLUGIN_MAX_BUFFERS];                 /* quant_buffer_kind of each */
  quant_plugin_tensor buffers[QUANT_PLUGIN_MAX_BUFFERS];   /* its memory */
} quant_plugin_storage;

/* One direction's format parameters: quant_quantizer_config's fields after
 * the format filled its defaults (the host's Params). */
typedef struct {
  uint32_t struct_size;                   /* sizeof(quant_plugin_params) as the host knows it */
  uint32_t reserved0;
  char format[QUANT_PLUGIN_FORMAT_LEN];   /* format name */
  int32_t element;                        /* quant_element */
  int32_t scaling;                        /* quant_scaling */
  int32_t force_pow2_scales;
  float amax_epsilon;
  int32_t amax_history_len;
  int32_t amax_compute_algo;              /* quant_amax_algo */
  float margin;
  int32_t block_dims;
  int32_t fp32_scales;
  int32_t scale_rounding;                 /* quant_scale_rounding */
  int32_t gemm_swizzled_scales;
  int32_t rht;                            /* quant_rht */
  uint32_t rht_sign_mask;
  int32_t stochastic_rounding;
  uint64_t seed;
  uint64_t offset;
  DLDataType dtype;                       /* identity: the dtype held ({0,0,0}: the input's) */
  uint32_t reserved1;
} quant_plugin_params;

/* Directions, as usage bits (QUANT_USAGE_ROWWISE / _COLUMNWISE). Index 0 of
 * the storage arrays below is rowwise, index 1 columnwise. */

/* amax: writes the global FP32 amax(es) a quantize of input would use into out
 * (FP32 [2], on the input's device): slot 0 rowwise, slot 1 columnwise; only
 * the slots of the directions in want are written. */
typedef struct {
  uint32_t struct_size;
  uint32_t want;                 /* usage bits */
  const quant_plugin_params *params;
  quant_plugin_tensor input;     /* ndim 2: [m, k], FP32/BF16/FP16 */
  quant_plugin_tensor out;       /* FP32 [2] */
  void *stream;                  /* cudaStream_t for CUDA work */
} quant_plugin_amax_args;

/* quantize: writes every present direction of out in one call (a kernel that
 * can read the input once for both directions does). */
typedef struct {
  uint32_t struct_size;
  uint32_t reserved0;
  const quant_plugin_params *params;
  quant_plugin_tensor input;          /* ndim 2: [m, k], FP32/BF16/FP16 */
  quant_plugin_storage out[2];        /* [0] rowwise, [1] columnwise; num_buffers 0 = not asked */
  quant_plugin_tensor amax_in;        /* data NULL, or FP32 [2] caller amaxes (rowwise, columnwise) */
  int32_t has_delayed_scale;          /* nonzero: delayed scaling; cast with delayed_scale and
                                         write the input's amax to each AMAX buffer, which the
                                         host then stages into the amax history */
  float delayed_scale;
  void *stream;
  /* Appended (read them only when struct_size covers them): delayed scaling
   * whose state lives on the input's device (spec §2.3). When has_delayed_scale
   * is set and delayed_scale_dev is not NULL, cast with *delayed_scale_dev (FP32,
   * device memory; delayed_scale is ignored) and max-reduce the input's amax
   * into *delayed_amax_dev (the history's staging slot h[0], FP32, device) on
   * the stream, besides writing it to each AMAX buffer; the host then stages
   * nothing and does not wait for the stream. */
  const float *delayed_scale_dev;
  float *delayed_amax_dev;
  /* (No field may be appended here: quantize_grouped's items are an array of
   * this struct, laid out at the host's sizeof. Append to
   * quant_plugin_quantize_grouped_args instead.) */
} quant_plugin_quantize_args;

/* delayed_update: the fused amax-history and scale update of spec §2.4 on a
 * state in device memory, on the stream: a0 = reduced_amax when has_reduced
 * and it is non-zero, else h[0]; when a0 == 0 nothing changes; otherwise
 * h'[i] = h[i+1], h'[L-1] = a0, h'[0] = 0, amax = max(h[1..L-1], a0) ("max",
 * NaN ignored) or a0 ("most_recent"), and scale = scaled_max / amax when amax
 * is finite and positive; a scale of +Inf becomes FLT_MAX. */
typedef struct {
  uint32_t struct_size;
  uint32_t reserved0;
  const quant_plugin_params *params;  /* amax_compute_algo */
  quant_plugin_tensor scale;          /* FP32 [1] */
  quant_plugin_tensor history;        /* FP32 [L] */
  int32_t has_reduced;
  float reduced_amax;                 /* >= 0 */
  float scaled_max;                   /* fl32(fp8_max · 2^-margin), computed by the host */
  uint32_t reserved1;
  void *stream;
} quant_plugin_delayed_update_args;

/* dequantize: writes direction `direction` of storage into out (FP32, BF16 or
 * FP16, m*k elements, logical row-major [m, k]). */
typedef struct {
  uint32_t struct_size;
  uint32_t direction;                 /* QUANT_DIRECTION_ROWWISE or _COLUMNWISE */
  const quant_plugin_params *params;
  quant_plugin_storage storage;
  int64_t m, k;
  quant_plugin_tensor out;
  void *stream;
} quant_plugin_dequantize_args;

/* derive: fills direction to_direction (storage to) from from_direction
 * (storage from) without re-quantizing (update_usage). */
typedef struct {
  uint32_t struct_size;
  uint32_t from_direction;
  uint32_t to_direction;
  uint32_t reserved0;
  const quant_plugin_params *params;
  quant_plugin_storage from;
  quant_plugin_storage to;
  int64_t m, k;
  void *stream;
} quant_plugin_derive_args;

/* swizzle_scales: rewrites storage's SCALE_INV buffer in place into the
 * GEMM-swizzled (swizzled != 0) or the compact layout. params describe the
 * layout the buffer is in now. */
typedef struct {
  uint32_t struct_size;
  uint32_t direction;
  int32_t swizzled;
  uint32_t reserved0;
  const quant_plugin_params *params;
  quant_plugin_storage storage;
  int64_t m, k;
  void *stream;
} quant_plugin_swizzle_args;

typedef int32_t (*quant_plugin_amax_fn)(const quant_plugin_amax_args *args, quant_plugin_error *err);
typedef int32_t (*quant_plugin_quantize_fn)(const quant_plugin_quantize_args *args, quant_plugin_error *err);
typedef int32_t (*quant_plugin_dequantize_fn)(const quant_plugin_dequantize_args *args, quant_plugin_error *err);
typedef int32_t (*quant_plugin_derive_fn)(const quant_plugin_derive_args *args, quant_plugin_error *err);
typedef int32_t (*quant_plugin_swizzle_fn)(const quant_plugin_swizzle_args *args, quant_plugin_error *err);
typedef int32_t (*quant_plugin_delayed_update_fn)(const quant_plugin_delayed_update_args *args, quant_plugin_error *err);

/* quantize_grouped: count quantizes of one format in one call (one launch
 * where it can: MoE experts). items[i] is what a quantize call of tensor i
 * would get; every item has the same params, stream and present directions.
 * Equal, byte for byte, to calling quantize on each item in order. */
typedef struct {
  uint32_t struct_size;
  uint32_t count;
  const quant_plugin_quantize_args *items; /* [count] */
  void *stream;
  /* Appended (read it only when struct_size covers it): uint8 scratch the
   * host lends for this call (data NULL: the plugin allocates what it needs,
   * stream-ordered). The host lends it where a caller's allocator holds every
   * device buffer (a CUDA graph capture's pool), for a columnwise copy with
   * the RHT: quant_plugin_rht_workspace(m, k) bytes per item, item i's room
   * after those of the items before it (the transformed input in BF16). A
   * single quantize that needs the loan comes as a group of one. */
  quant_plugin_tensor workspace;
} quant_plugin_quantize_grouped_args;

/* One item's room in quant_plugin_quantize_grouped_args.workspace: an
 * [m, k] input's RHT transform in BF16, whole 16-row groups, 256-byte
 * aligned. */
static inline int64_t quant_plugin_rht_workspace(int64_t m, int64_t k) { return ((m + 15) / 16 * 16 * k * 2 + 255) / 256 * 256; }

typedef int32_t (*quant_plugin_quantize_grouped_fn)(const quant_plugin_quantize_grouped_args *args, quant_plugin_error *err);

/* delayed_update_grouped: count delayed_update calls of one format in one
 * call (one launch where it can: a linear layer's forward pass updates its
 * input's and its weight's states together). items[i] is what a
 * delayed_update call of state i would get; each item keeps its own params
 * and scaled_max, every item's stream is the group's, and no two items may
 * share a buffer. Equal to calling delayed_update on each item in order. */
typedef struct {
  uint32_t struct_size;
  uint32_t count;
  const quant_plugin_delayed_update_args *items; /* [count] */
  void *stream;
} quant_plugin_delayed_update_grouped_args;

typedef int32_t (*quant_plugin_delayed_update_grouped_fn)(const quant_plugin_delayed_update_grouped_args *args,
                                                          quant_plugin_error *err);

/* ---- GEMM (ABI 2) ------------------------------------------------------- */

/* One GEMM operand as the host resolved it (quant.h, quant_gemm): the one
 * direction the contraction reads (TransformerEngine's rule: A rowwise unless
 * trans, B columnwise unless trans), or a dense tensor. */
typedef struct {
  char format[QUANT_PLUGIN_FORMAT_LEN]; /* that direction's format; "identity" for a dense tensor */
  const quant_plugin_params *params;    /* the direction's parameters; NULL for a dense tensor */
  uint32_t direction;                   /* QUANT_DIRECTION_ROWWISE or _COLUMNWISE; 0 for a dense tensor */
  int32_t trans;                        /* nonzero: op(X) = X^T */
  int64_t rows, cols;                   /* X's 2-D view [rows, cols] before op */
  quant_plugin_storage storage;         /* the direction's buffers in layout order; a dense tensor
                                           is one QUANT_BUFFER_DATA buffer [rows, cols] */
} quant_plugin_gemm_operand;

/* D = alpha * op(A) * op(B) + beta * C + bias (+ D's old contents if
 * accumulate), row-major, op(A) [m, k], op(B) [k, n], D and C [m, n], bias
 * [n]: quant_gemm's definition (quant.h), FP32 accumulation, the epilogue in
 * FP32 in the order alpha*sum, + beta*c, + bias, + old d, rounded once to d's
 * dtype. Per-tensor factors (FP8 scale_inv, NVFP4 global amaxes) are the
 * plugin's to fold in; they live in device memory and must be read there (no
 * host synchronisation). Any m, n, k >= 0 (an empty k gives the epilogue of
 * zeros). */
typedef struct {
  uint32_t struct_size;             /* sizeof(quant_plugin_gemm_args) as the host knows it */
  uint32_t reserved0;
  quant_plugin_gemm_operand a, b;
  int64_t m, n, k;
  float alpha;
  float beta;                       /* used only with c */
  quant_plugin_tensor c;            /* data NULL: none; may be d itself (same data and dtype) */
  quant_plugin_tensor bias;         /* data NULL: none; [n] */
  quant_plugin_tensor d;            /* [m, n] FP32, BF16 or FP16 */
  int32_t accumulate;               /* nonzero: add the result to d's contents */
  uint32_t flags;                   /* QUANT_PLUGIN_GEMM_* bits (0 from hosts that predate them) */
  quant_plugin_tensor workspace;    /* data NULL: the plugin allocates what it needs, stream-ordered;
                                       else uint8 scratch the host lends for this call */
  void *stream;                     /* cudaStream_t for CUDA work */
} quant_plugin_gemm_args;

/* flags: the caller asked for the exact path (quant_gemm_args.exact): no
 * kernel whose sums are less precise than FP32 accumulation of exact
 * products (such as the fused Hopper GEMM's FP8 tensor-core block sums). */
#define QUANT_PLUGIN_GEMM_EXACT 1u

typedef int32_t (*quant_plugin_gemm_fn)(const quant_plugin_gemm_args *args, quant_plugin_error *err);

/* How the plugin multiplies operands of format_a x format_b on device_type
 * (quant_gemm_support): level_out is a quant_gemm_support_level, reason_out
 * says why in words. params_a / params_b may be NULL (then: the format's
 * defaults, or any parameters: the answer for the format in general). */
typedef struct {
  uint32_t struct_size;
  int32_t device_type;
  const char *format_a;
  const char *format_b;
  const quant_plugin_params *params_a;
  const quant_plugin_params *params_b;
  int32_t level_out;
  char reason_out[QUANT_GEMM_REASON_LEN];
} quant_plugin_gemm_support_args;

typedef int32_t (*quant_plugin_gemm_support_fn)(quant_plugin_gemm_support_args *args, quant_plugin_error *err);

/* The GEMM of one device type. */
typedef struct {
  int32_t device_type;                  /* DLDeviceType it runs on */
  uint32_t reserved0;
  quant_plugin_gemm_fn gemm;            /* required */
  quant_plugin_gemm_support_fn support;  /* required */
  void *reserved[4];
} quant_plugin_gemm;

/* The kernels of one format on one device type. */
typedef struct {
  const char *format;                     /* a built-in format ("fp8", "mxfp8", ...) or one the plugin defines */
  int32_t device_type;                    /* DLDeviceType they run on */
  uint32_t reserved0;
  quant_plugin_amax_fn amax;              /* may be NULL */
  quant_plugin_quantize_fn quantize;      /* required */
  quant_plugin_dequantize_fn dequantize;  /* may be NULL */
  quant_plugin_derive_fn derive;          /* may be NULL */
  quant_plugin_swizzle_fn swizzle_scales; /* may be NULL */
  void *reserved_gemm;                    /* unused: NULL (the GEMM is per device, quant_plugin_gemm) */
  quant_plugin_delayed_update_fn delayed_update; /* may be NULL: formats without delayed scaling */
  quant_plugin_quantize_grouped_fn quantize_grouped; /* may be NULL: the host calls quantize per tensor */
  quant_plugin_delayed_update_grouped_fn delayed_update_grouped; /* may be NULL: the host calls delayed_update per state */
  void *reserved[1];
} quant_plugin_kernels;

/* Buffer description a layout function fills. */
typedef struct {
  int32_t kind;                           /* quant_buffer_kind */
  DLDataType dtype;
  int32_t ndim;                           /* 1..QUANT_PLUGIN_MAX_DIMS */
  int64_t shape[QUANT_PLUGIN_MAX_DIMS];
} quant_plugin_buffer_desc;

/* check: validates params (format already set) and fills defaults in place. */
typedef struct {
  uint32_t struct_size;
  uint32_t reserved0;
  quant_plugin_params *params;
} quant_plugin_check_args;

/* layout: lists the buffers of direction `direction` of an [m, k] tensor. */
typedef struct {
  uint32_t struct_size;
  uint32_t direction;                                  /* QUANT_DIRECTION_ROWWISE or _COLUMNWISE */
  const quant_plugin_params *params;
  int64_t m, k;
  uint32_t num_buffers;                                /* out: 1..QUANT_PLUGIN_MAX_BUFFERS */
  uint32_t reserved0;
  quant_plugin_buffer_desc buffers[QUANT_PLUGIN_MAX_BUFFERS]; /* out */
} quant_plugin_layout_args;

typedef int32_t (*quant_plugin_check_fn)(const quant_plugin_check_args *args, quant_plugin_error *err);
typedef int32_t (*quant_plugin_layout_fn)(quant_plugin_layout_args *args, quant_plugin_error *err);

#define QUANT_PLUGIN_DERIVE_COLUMNWISE_FROM_ROWWISE 1u
#define QUANT_PLUGIN_DERIVE_ROWWISE_FROM_COLUMNWISE 2u

/* A format the plugin defines. */
typedef struct {
  const char *name;              /* must not clash with a registered format */
  quant_plugin_check_fn check;   /* may be NULL: any params are accepted as given */
  quant_plugin_layout_fn layout; /* required */
  uint32_t derivable;            /* QUANT_PLUGIN_DERIVE_* bits */
  uint32_t reserved0;
} quant_plugin_format;

/* Memory operations. */
#define QUANT_PLUGIN_COPY_HOST_TO_DEVICE 1
#define QUANT_PLUGIN_COPY_DEVICE_TO_HOST 2
#define QUANT_PLUGIN_COPY_DEVICE_TO_DEVICE 3

typedef struct {
  uint32_t struct_size;
  int32_t device_id;
  void *stream;       /* the stream the operation is ordered on */
  uint64_t nbytes;
  void *ptr;          /* alloc: out; free: the memory; copy/memset: destination */
  const void *src;    /* copy: source */
  int32_t copy_kind;  /* copy: QUANT_PLUGIN_COPY_* */
  int32_t value;      /* memset: the byte */
} quant_plugin_memory_args;

typedef int32_t (*quant_plugin_memory_fn)(quant_plugin_memory_args *args, quant_plugin_error *err);

typedef struct {
  int32_t device_type;                       /* DLDeviceType served, e.g. kDLCUDA */
  uint32_t reserved0;
  int32_t (*device_count)(int32_t *count, quant_plugin_error *err);
  quant_plugin_memory_fn alloc;              /* stream-ordered allocation (cudaMallocAsync) */
  quant_plugin_memory_fn free;               /* stream-ordered free */
  quant_plugin_memory_fn copy;               /* asynchronous on the stream */
  quant_plugin_memory_fn memset;             /* asynchronous on the stream */
  quant_plugin_memory_fn synchronize;        /* waits for the stream */
  void *reserved[4];
} quant_plugin_memory;

/* The table quant_plugin_get fills. The host zeroes it and sets struct_size;
 * the plugin sets abi_version first, always, even when it refuses the host. */
typedef struct {
  uint32_t struct_size;                 /* set by the host: sizeof(quant_plugin_table) */
  uint32_t abi_version;                 /* set by the plugin: QUANT_PLUGIN_ABI_VERSION it was built with */
  const char *name;                     /* short name, e.g. "cuda" */
  const char *version;                  /* the plugin's own version string */
  uint32_t num_formats;
  uint32_t num_kernels;
  uint32_t num_memory;
  uint32_t reserved0;
  const quant_plugin_format *formats;   /* num_formats entries */
  const quant_plugin_kernels *kernels;  /* num_kernels entries */
  const quant_plugin_memory *memory;    /* num_memory entries (one per device type) */
  /* ABI 2 */
  uint32_t num_gemm;
  uint32_t reserved1;
  const quant_plugin_gemm *gemm;        /* num_gemm entries (one per device type) */
} quant_plugin_table;

/* The entry point. host_abi_version is the host's QUANT_PLUGIN_ABI_VERSION; a
 * plugin that cannot serve it still sets table->abi_version and returns
 * QUANT_ERROR_PLUGIN with a message. It must not start device work (no CUDA
 * context is created by loading a plugin). */
typedef int32_t (*quant_plugin_get_fn)(uint32_t host_abi_version, quant_plugin_table *table,
                                       quant_plugin_error *err);

#if defined(_WIN32)
#define QUANT_PLUGIN_EXPORT __declspec(dllexport)
#else
#define QUANT_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
}
#endif

#endif /* LIBQUANT_QUANT_PLUGIN_H_ */
