// Shared pieces of the CUDA plugin: error handling, argument access, and the
// bit-exact device codecs. Every device codec here is the line-for-line
// counterpart of a Go function in internal/numeric or a plugin, named in its
// comment; the GPU exactness tests compare the two byte for byte.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <type_traits>

#include "e2m1.h"
#include "e8m0.h"
#include "launch.cuh"
#include "quant_plugin.h"

namespace lq {

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

inline int32_t fail(quant_plugin_error *err, int32_t status, const char *fmt, ...) {
  if (err != nullptr) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
  }
  return status;
}

// No GPU, no driver, or a device that cannot be used is "device not
// available" (what the host reports when no plugin serves CUDA at all).
inline bool device_missing(cudaError_t e) {
  return e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorInvalidDevice ||
         e == cudaErrorDevicesUnavailable || e == cudaErrorSystemDriverMismatch || e == cudaErrorSystemNotReady;
}

inline int32_t cuda_status(cudaError_t e) {
  if (e == cudaErrorMemoryAllocation) return QUANT_ERROR_OUT_OF_MEMORY;
  return device_missing(e) ? QUANT_ERROR_DEVICE_UNAVAILABLE : QUANT_ERROR_PLUGIN;
}

// The calling thread's current device, or a device-unavailable status naming
// the device the caller asked for.
inline int32_t current_device(int32_t want, int *cur, quant_plugin_error *err) {
  cudaError_t e = cudaGetDevice(cur);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return fail(err, cuda_status(e), "device cuda:%d is not available: %s (%s)", want, cudaGetErrorString(e), cudaGetErrorName(e));
  }
  return QUANT_OK;
}

// Stream-ordered allocation (cudaMallocAsync's semantics) from the plugin's
// own memory pool of the current device (cuda/plugin.cu), whose release
// threshold is unlimited: the memory libquant frees stays in the pool across
// synchronisations instead of going back to the driver at each one (the
// device's default pool releases at every synchronisation, so the first
// allocations after one mapped memory again: H100, a quantize of 8192×4096
// with its buffers allocated took 163–295 µs of host time after a
// synchronisation, 60–85 µs from this pool; bench/RESULTS.md). Free with
// cudaFreeAsync.
cudaError_t pool_malloc_async(void **p, size_t bytes, cudaStream_t s);

// Every CUDA call is checked; a failure becomes a status and a message naming
// the step.
#define LQ_CUDA(call, ...)                                                                      \
  do {                                                                                         \
    cudaError_t lq_e_ = (call);                                                                \
    if (lq_e_ != cudaSuccess) {                                                                \
      char lq_what_[256];                                                                      \
      snprintf(lq_what_, sizeof lq_what_, __VA_ARGS__);                                        \
      return ::lq::fail(err, ::lq::cuda_status(lq_e_), "%s: %s (%s)", lq_what_,               \
                        cudaGetErrorString(lq_e_), cudaGetErrorName(lq_e_));                   \
    }                                                                                          \
  } while (0)

// After each launch: the launch error (bad configuration, no kernel image for
// this GPU) is reported at once; execution errors surface at the next sync.
#define LQ_LAUNCHED(...) LQ_CUDA(cudaGetLastError(), __VA_ARGS__)

#define LQ_TRY(expr)                     \
  do {                                   \
    int32_t lq_s_ = (expr);              \
    if (lq_s_ != QUANT_OK) return lq_s_; \
  } while (0)

// Zeroes up to four 32-bit words (the amax accumulators a following kernel
// reduces into with atomics; null entries skipped). A kernel rather than
// cudaMemsetAsync: a memset between two kernels is no kernel boundary that
// programmatic dependent launch shortens, and this kernel lets the next one
// be scheduled at once (pdl_trigger), so that its cost hides behind that
// kernel's launch (bench/RESULTS.md, 2026-11-29 11:20 section, call 3).
struct ZeroWords {
  uint32_t *p[4];
};
template <typename = void>  // instantiated only where it is launched
__global__ void zero_words_kernel(ZeroWords w) {
  pdl_wait();
  pdl_trigger();
  if (threadIdx.x < 4 && w.p[threadIdx.x] != nullptr) *w.p[threadIdx.x] = 0;
}
inline int32_t zero_words(cudaStream_t s, quant_plugin_error *err, void *a, void *b = nullptr) {
  launch_kernel(zero_words_kernel<>, 1, 32, 0, s, ZeroWords{{(uint32_t *)a, (uint32_t *)b, nullptr, nullptr}});
  LQ_LAUNCHED("zeroing the amax (kernel launch)");
  return QUANT_OK;
}

// ---------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------

enum class InType { F32, BF16, F16 };

inline bool dtype_is(DLDataType t, uint8_t code, uint8_t bits) {
  return t.code == code && t.bits == bits && t.lanes == 1;
}

inline int32_t input_type(const quant_plugin_tensor &t, const char *arg, InType *out, quant_plugin_error *err) {
  if (dtype_is(t.dtype, kDLFloat, 32)) *out = InType::F32;
  else if (dtype_is(t.dtype, kDLBfloat, 16)) *out = InType::BF16;
  else if (dtype_is(t.dtype, kDLFloat, 16)) *out = InType::F16;
  else
    return fail(err, QUANT_ERROR_UNSUPPORTED, "%s: DLPack dtype (code %d, bits %d) not supported (want float32, bfloat16 or float16)",
                arg, t.dtype.code, t.dtype.bits);
  return QUANT_OK;
}

inline size_t in_size(InType t) { return t == InType::F32 ? 4 : 2; }

// The calling thread's current device must be the tensor's: work runs in the
// caller's context, and switching devices behind its back is not ours to do.
inline int32_t check_device(const quant_plugin_tensor &t, const char *arg, quant_plugin_error *err) {
  if (t.device_type != kDLCUDA)
    return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%s: not on a CUDA device (device type %d)", arg, t.device_type);
  int cur = -1;
  LQ_TRY(current_device(t.device_id, &cur, err));
  if (cur != t.device_id)
    return fail(err, QUANT_ERROR_INVALID_ARGUMENT,
                "%s: is on cuda:%d but the calling thread's current device is cuda:%d; make cuda:%d current first "
                "(cudaSetDevice, torch.cuda.device)",
                arg, t.device_id, cur, t.device_id);
  return QUANT_OK;
}

inline const quant_plugin_tensor *find_buffer(const quant_plugin_storage &st, int32_t kind) {
  for (uint32_t i = 0; i < st.num_buffers && i < QUANT_PLUGIN_MAX_BUFFERS; i++)
    if (st.kinds[i] == kind) return &st.buffers[i];
  return nullptr;
}

inline int64_t numel(const quant_plugin_tensor &t) {
  int64_t n = 1;
  for (int i = 0; i < t.ndim; i++) n *= t.shape[i];
  return n;
}

// A buffer of the storage, checked to have the kind, the dtype bits and the
// number of elements the layout promises.
inline int32_t get_buffer(const quant_plugin_storage &st, int32_t kind, const char *what, int64_t want_numel,
                          void **out, quant_plugin_error *err) {
  const quant_plugin_tensor *b = find_buffer(st, kind);
  if (b == nullptr) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%s: the storage has no such buffer", what);
  if (want_numel >= 0 && numel(*b) != want_numel)
    return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%s: has %lld elements, want %lld", what, (long long)numel(*b),
                (long long)want_numel);
  if (b->device_type != kDLCUDA)
    return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%s: not on a CUDA device", what);
  *out = b->data;
  return QUANT_OK;
}

// The row pitch in elements of a [rows, ≥ cols] data buffer: its last dim
// where the layout pads rows (spec §14 item 4 allows it), else cols.
inline int32_t row_pitch(const quant_plugin_storage &st, int32_t kind, const char *what, int64_t rows, int64_t cols, int64_t *pitch,
                         quant_plugin_error *err) {
  *pitch = cols;
  const quant_plugin_tensor *b = find_buffer(st, kind);
  if (b != nullptr && b->ndim == 2 && b->shape[0] == rows && rows > 0) {
    if (b->shape[1] < cols)
      return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%s: rows of %lld elements, want at least %lld", what, (long long)b->shape[1],
                  (long long)cols);
    *pitch = b->shape[1];
  }
  return QUANT_OK;
}

inline bool aligned16(const void *p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

inline cudaStream_t stream_of(void *s) { return reinterpret_cast<cudaStream_t>(s); }

__host__ __device__ inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
__host__ __device__ inline int64_t pad_to(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// ---------------------------------------------------------------------------
// Device codecs
// ---------------------------------------------------------------------------

// Input element widened to float32 (exact for every input type).
__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }

template <typename T> struct InTraits;
template <> struct InTraits<float> { static constexpr InType kind = InType::F32; };
template <> struct InTraits<__nv_bfloat16> { static constexpr InType kind = InType::BF16; };
template <> struct InTraits<__half> { static constexpr InType kind = InType::F16; };

// Loads 8 consecutive input elements as float32. VEC: 16-byte aligned vector
// loads (the caller checked alignment); otherwise element by element.
template <typename T, bool VEC>
__device__ __forceinline__ void load8(const T *p, float (&v)[8]) {
  if constexpr (VEC && sizeof(T) == 2) {
    uint4 u = __ldg(reinterpret_cast<const uint4 *>(p));
    const T *h = reinterpret_cast<const T *>(&u);
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = to_f32(h[i]);
  } else if constexpr (VEC && sizeof(T) == 4) {
    float4 a = __ldg(reinterpret_cast<const float4 *>(p));
    float4 b = __ldg(reinterpret_cast<const float4 *>(p) + 1);
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
    v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
  } else {
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = to_f32(p[i]);
  }
}

// |x| as a bit pattern: magnitudes order like their bit patterns.
__device__ __forceinline__ uint32_t mag_bits(float x) { return __float_as_uint(x) & 0x7FFFFFFFu; }

// host.AmaxCPU's per-element rule: NaN ignored (fmaxf), Inf counted. (amax_f
// gives the same bits in one instruction where this takes about four; H200,
// 2026-11-28: with it in every kernel, MXFP8 ran faster and fp8's tile kernel
// at 8191² 3-4 % slower, so MXFP8's blocks use amax_f and the rest this.)
__device__ __forceinline__ uint32_t amax_bits_nan_ignored(uint32_t m, float x) {
  uint32_t a = mag_bits(x);
  return (a <= 0x7F800000u && a > m) ? a : m;
}

// max(m, |x|) as floats, NaN ignored (fmaxf returns the other operand): one
// FMNMX with an |x| operand. Over non-negative magnitudes the result has the
// bits amax_bits_nan_ignored gives (Inf counted, subnormals kept: no .ftz).
__device__ __forceinline__ float amax_f(float m, float x) { return fmaxf(m, fabsf(x)); }

// max(m, |x|) with NaN propagated (max.NaN.f32): a NaN anywhere makes the
// result NaN, so one max gives both the amax and whether a NaN was seen.
__device__ __forceinline__ float amax_nan(float m, float x) {
  float d;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(m), "f"(fabsf(x)));
  return d;
}

// FP8 encoders: cvt.rn.satfinite.{e4m3,e5m2}x2.f32, the function
// numeric.EncodeE4M3 / EncodeE5M2 define (spec §1.2, §1.3).
enum class Fp8 { E4M3, E5M2 };

template <Fp8 F>
__device__ __forceinline__ uint16_t fp8x2(float lo, float hi) {
  return (uint16_t)__nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE,
                                            F == Fp8::E4M3 ? __NV_E4M3 : __NV_E5M2);
}

template <Fp8 F>
__device__ __forceinline__ uint8_t fp8(float x) {
  return (uint8_t)__nv_cvt_float_to_fp8(x, __NV_SATFINITE, F == Fp8::E4M3 ? __NV_E4M3 : __NV_E5M2);
}

// Decodes an FP8 code exactly (through FP16, which holds every FP8 value).
template <Fp8 F>
__device__ __forceinline__ float fp8_decode(uint8_t c) {
  __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)c, F == Fp8::E4M3 ? __NV_E4M3 : __NV_E5M2);
  return __half2float(__half(h));
}

// numeric.EncodeE2M1: RNE to E2M1 with saturation; NaN gives +6 (code 7); a
// negative value that rounds to 0 keeps its sign (code 8). lq_e2m1 (e2m1.h)
// is checked against the threshold definition on every float32 pattern.
__device__ __forceinline__ uint32_t e2m1(float x) { return lq_e2m1(x); }

// Codes of 8 values v[i]·f through lq_e2m1_fast, element i in bits 4i (low
// 4·n bits valid for the first n): the caller checked no NaN and
// fl(max|v|·f) < 7 (CAPPED: through lq_e2m1_capped, for any v[i]·f but NaN,
// saturating at 6, code 7). lq_e2m1_mag_m's bias is removed once for the
// packed word.
template <int N, bool CAPPED = false>
__device__ __forceinline__ uint32_t e2m1_fast_pack(const float *v, float f) {
  uint32_t h = 0, bias = 0;
#pragma unroll
  for (int i = 0; i < N; i++) {
    float y = __fmul_rn(v[i], f);
    uint32_t m = __float_as_uint(CAPPED ? lq_e2m1_mag_m_capped(fabsf(y)) : lq_e2m1_mag_m(fabsf(y)));
    h += (m << (4 * i)) + ((__float_as_uint(y) >> 31) << (4 * i + 3));
    bias += LQ_E2M1_M_BITS << (4 * i);
  }
  return h - bias;
}

// One 16-byte store (dst 16-byte aligned), as st.global.v4, where NVCC
// would split or merge a plain uint4 store: gemm.cu's KA == KB instances
// (four 4-byte stores), nvfp4.cu's rowwise codes under a condition (merged
// with the other branch's 8-byte store into an 8-byte and two 4-byte ones).
__device__ __forceinline__ void store_v4(void *dst, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(dst), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}

// prmt.b32 in its default mode: byte n of the result is byte s[4n+2:4n] of
// the pair (a: bytes 0-3, b: bytes 4-7), or, where bit 4n+3 of s is set,
// that byte's top bit replicated (0x00 or 0xFF).
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t s) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(s));
  return d;
}

// E2M1 sign bits (bit 4i+3 of a word of 8 codes) of a fast encode. The sign
// of fl(x·f) is x's (f > 0, no NaN in a fast block; -0 stays -0), so it is
// the top bit of x's 16-bit pattern, BF16 and FP16 alike. From bytes that
// are 0xFF where an element is negative (e: the even elements of the word's
// eight, o: the odd ones, one a byte): four prmt and two logic ops per eight
// codes, where shifting each element's sign into place took two and a half.
__device__ __forceinline__ uint32_t sign_bits8(uint32_t e, uint32_t o) { return (e & 0x08080808u) | (o & 0x80808080u); }

// The sign bits of eight elements held as raw pairs (element i is half i%2
// of w[i/2]), as sign_bits8 places them.
__device__ __forceinline__ uint32_t signs8_pairs(const uint32_t *w) {
  const uint32_t a = prmt(w[0], w[1], 0xFDB9u), b = prmt(w[2], w[3], 0xFDB9u);  // elements 0-3, 4-7
  return sign_bits8(prmt(a, b, 0x6420u), prmt(a, b, 0x7531u));
}

// E2M1 magnitude codes of the two BF16 values of word x times f = 2^k (f1:
// f as BF16 in both halves, f/2 and f/4 normal BF16 numbers too; f2, f4:
// f/2 and f/4 so, f1 - 0x00800080 and f2 - 0x00800080), lq_e2m1 of fl32(x·f)
// without its sign for |x·f| < 7 and no NaN: each half holds the BF16 number
// 64 + code/2, whose bits are 0x4280 + code. lq_e2m1_mag_m's three roundings
// (M + rne(2u), M + 2 + rne(u), M + 4 + rne(u/2), u = |x·f|, M = 2^23)
// halved into [64, 128), where BF16's spacing is 0.5 and ties go to the
// even mantissa as they go to the even integer there: 64 + rne(2u)/2,
// 65 + rne(u)/2, 66 + rne(u/2)/2, each one fma.rn.bf16x2 (the product exact;
// an x·f that is not a normal FP32 number is under 2^-126 and rounds to 64,
// 65, 66 as its FP32 form rounds to M, M+2, M+4), and their minimum is the
// code's. Subnormal x are exact operands of the BF16 fma (no flush).
__device__ __forceinline__ uint32_t e2m1_bf16x2_mags(uint32_t x, uint32_t f1, uint32_t f2, uint32_t f4) {
  const uint32_t a = x & 0x7FFF7FFFu;
  uint32_t p, q, r;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(p) : "r"(a), "r"(f1), "r"(0x42804280u));  // 64 + u
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(q) : "r"(a), "r"(f2), "r"(0x42824282u));  // 65 + u/2
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(f4), "r"(0x42844284u));  // 66 + u/4
  asm("min.bf16x2 %0, %0, %1;" : "+r"(p) : "r"(q));
  asm("min.bf16x2 %0, %0, %1;" : "+r"(p) : "r"(r));
  return p;
}

// Codes of the 8 BF16 values of words w[0..3] (element i half i%2 of w[i/2])
// times f (e2m1_bf16x2_mags' f1 and conditions), element i in bits 4i: the
// magnitude codes' low bytes (0x80 + code) gathered even and odd elements a
// byte each, their low nibbles side by side, and the sign bits of x
// (signs8_pairs: lq_e2m1 takes the sign of fl32(x·f), which is x's as f > 0).
// 12 instructions past the fma and min per 8 codes, where masking each pair
// and shifting its signs into place took 18 (issue-bound MXFP4 kernels).
// cuda/gputest/e2m1_bf16x2_check.cu checks every BF16 x in each of the 8
// places, with either sign, at every f = 2^(127-e8), e8 in [0, 251],
// against lq_e2m1.
__device__ __forceinline__ uint32_t e2m1_bf16x2_pack8(const uint32_t *w, uint32_t f1) {
  const uint32_t f2 = f1 - 0x00800080u, f4 = f2 - 0x00800080u;
  uint32_t c[4];
#pragma unroll
  for (int j = 0; j < 4; j++) c[j] = e2m1_bf16x2_mags(w[j], f1, f2, f4);
  const uint32_t m01 = prmt(c[0], c[1], 0x6240u), m23 = prmt(c[2], c[3], 0x6240u);  // bytes 0, 2 of each
  const uint32_t lo = prmt(m01, m23, 0x5410u), hi = prmt(m01, m23, 0x7632u);  // even / odd elements, 0x80 + code a byte
  return ((lo & 0x0F0F0F0Fu) | ((hi << 4) & 0xF0F0F0F0u)) | signs8_pairs(w);
}

// numeric.DecodeE2M1: 0, 0.5, 1, 1.5, 2, 3, 4, 6 (codes 8..15 negative),
// computed rather than looked up so that nothing goes to local memory.
__device__ __forceinline__ float e2m1_decode(uint32_t c) {
  uint32_t e = (c >> 1) & 3u;
  float mant = (c & 1u) ? 1.5f : 1.0f;
  float m = e == 0 ? ((c & 1u) ? 0.5f : 0.0f) : mant * __uint_as_float((e + 126u) << 23);
  return (c & 8u) ? -m : m;
}

// numeric.DecodeE8M0 and E8M0Reciprocal.
__device__ __forceinline__ float e8m0_decode(uint32_t b) {
  if (b == 0xFF) return __uint_as_float(0x7FFFFFFFu);
  if (b == 0) return __uint_as_float(0x00400000u);
  return __uint_as_float(b << 23);
}
// Selects rather than branches (b: 0 .. 0xFF).
__device__ __forceinline__ float e8m0_rcp(uint32_t b) {
  uint32_t r = (254u - b) << 23;
  r = b == 254 ? 0x00400000u : r;
  return __uint_as_float(b == 0xFF ? 0x7FFFFFFFu : r);
}

// numeric.Float32ToBF16 (NaN keeps sign and payload, made quiet).
__device__ __forceinline__ uint16_t f32_to_bf16_bits(float x) {
  uint32_t b = __float_as_uint(x);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((b >> 16) | 0x40u);
  b += 0x7FFFu + ((b >> 16) & 1u);
  return (uint16_t)(b >> 16);
}

// numeric.Float32ToFP16 (IEEE overflow to Inf, RNE subnormals, NaN kept quiet).
__device__ __forceinline__ uint16_t f32_to_f16_bits(float x) {
  uint32_t b = __float_as_uint(x);
  uint32_t sign = (b >> 16) & 0x8000u;
  uint32_t a = b & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);
  if (a < 0x38800000u) return (uint16_t)(sign | (uint32_t)rintf(__uint_as_float(a) * 16777216.0f));
  uint32_t e = ((a >> 23) - 127u + 15u) << 10;
  uint32_t m = a & 0x7FFFFFu;
  m += (1u << 12) - 1u + ((m >> 13) & 1u);
  return (uint16_t)(sign | (e + (m >> 13)));  // Go: e+m>>shift is e + (m>>shift)
}

// numeric.Float64ToBF16: one rounding from float64; every NaN is 0x7FC0.
__device__ __forceinline__ uint16_t f64_to_bf16_bits(double x) {
  if (x != x) return 0x7FC0;
  // cvt.rn.bf16.f64 (sm_90): IEEE round to nearest even into BF16, subnormals
  // and overflow to infinity included, as the integer form it replaced.
  return __bfloat16_as_ushort(__double2bfloat16(x));
}

// Stores a float into an output element with host.StoreFloat32's rounding.
__device__ __forceinline__ void store_out(float *p, float x) { *p = x; }
__device__ __forceinline__ void store_out(__nv_bfloat16 *p, float x) {
  *reinterpret_cast<uint16_t *>(p) = f32_to_bf16_bits(x);
}
__device__ __forceinline__ void store_out(__half *p, float x) { *reinterpret_cast<uint16_t *>(p) = f32_to_f16_bits(x); }

// fp8.ScaleFromAmax (TE's compute_scale_from_amax, spec §3.2).
__device__ __forceinline__ float scale_from_amax(float amax, float fp8_max, bool pow2, float eps, float value_for_inf) {
  if (amax < eps) amax = eps;
  if (isinf(amax) || amax == 0.0f || amax != amax) return 1.0f;
  float s = __fdiv_rn(fp8_max, amax);
  if (isinf(s)) s = value_for_inf;
  if (pow2) s = __uint_as_float(__float_as_uint(s) & 0xFF800000u);
  return s;
}

// numeric.Philox4x32_10.
__device__ __forceinline__ uint4 philox4x32_10(uint4 ctr, uint2 key) {
  uint32_t c0 = ctr.x, c1 = ctr.y, c2 = ctr.z, c3 = ctr.w, k0 = key.x, k1 = key.y;
#pragma unroll
  for (int r = 0; r < 10; r++) {
    if (r > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    uint32_t lo0 = 0xD2511F53u * c0, hi0 = __umulhi(0xD2511F53u, c0);
    uint32_t lo1 = 0xCD9E8D57u * c2, hi1 = __umulhi(0xCD9E8D57u, c2);
    uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  return make_uint4(c0, c1, c2, c3);
}

// ---------------------------------------------------------------------------
// 16-bit inputs as raw words (the nvfp4 and mxfp4 fast kernels)
// ---------------------------------------------------------------------------

template <typename T> struct Raw16;
template <> struct Raw16<__nv_bfloat16> {
  static constexpr uint32_t kInf = 0x7F80u;  // |bits| above this: NaN
  __device__ static __forceinline__ float lo(uint32_t w) { return __uint_as_float(w << 16); }
  __device__ static __forceinline__ float hi(uint32_t w) { return __uint_as_float(w & 0xFFFF0000u); }
  __device__ static __forceinline__ float mag(uint32_t h) { return __uint_as_float(h << 16); }
};
template <> struct Raw16<__half> {
  static constexpr uint32_t kInf = 0x7C00u;
  __device__ static __forceinline__ float lo(uint32_t w) { return __half2float(__ushort_as_half((unsigned short)(w & 0xFFFFu))); }
  __device__ static __forceinline__ float hi(uint32_t w) { return __half2float(__ushort_as_half((unsigned short)(w >> 16))); }
  __device__ static __forceinline__ float mag(uint32_t h) { return lo(h); }
};

__device__ __forceinline__ uint32_t vmax_u16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("max.u16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

__device__ __forceinline__ uint32_t vmin_u16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("min.u16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// max |x| of the two 16-bit values of a word into m, NaN ignored: max.bf16x2 /
// max.f16x2 (no .ftz: subnormals kept) of the magnitudes, which returns the
// other operand where one is NaN; m starts at +0, so a NaN never enters (fp8's
// amax pass, fp8_block's block maxima).
template <typename T>
__device__ __forceinline__ uint32_t hmax2_mag(uint32_t m, uint32_t w) {
  uint32_t d, a = w & 0x7FFF7FFFu;
  if constexpr (InTraits<T>::kind == InType::BF16) asm("max.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(m), "r"(a));
  else asm("max.f16x2 %0, %1, %2;" : "=r"(d) : "r"(m), "r"(a));
  return d;
}

// Float32 bits of a 16-bit magnitude h (not NaN).
template <typename T>
__device__ __forceinline__ uint32_t mag16_bits(uint32_t h) {
  if constexpr (InTraits<T>::kind == InType::BF16) return h << 16;
  else return __float_as_uint(__half2float(__ushort_as_half((unsigned short)h)));
}

// Float32 bits of the larger magnitude of a word of two 16-bit values (no NaN).
template <typename T>
__device__ __forceinline__ uint32_t hmax2_bits(uint32_t m) {
  return mag16_bits<T>(max(m & 0xFFFFu, m >> 16));  // magnitudes order like their bits
}

// max |x| of the 16 elements held as 8 words of pairs, as a 16-bit magnitude
// (NaN included: above kInf).
__device__ __forceinline__ uint32_t mag16(const uint32_t *w) {
  uint32_t m = w[0] & 0x7FFF7FFFu;
#pragma unroll
  for (int j = 1; j < 8; j++) m = vmax_u16x2(m, w[j] & 0x7FFF7FFFu);
  return max(m & 0xFFFFu, m >> 16);
}

// Shared-memory position (in 16-bit elements) of element (row, col) of a raw
// 64×128 tile of 16-bit values (the nvfp4 and mxfp4 fast kernels): each row
// is 256 bytes; the 16-byte chunk j of a thread's 64-byte quarter q moves
// to chunk j ^ x(row, q), so that the row phase's 16-byte stores (8 lanes: two
// rows × four quarters per phase) hit eight different bank groups.
//
// EDGE: the kernels' ragged instance puts rows lr ≡ w (mod 8) in warp w (so a
// warp's rows share one 16-byte offset when K is odd, see load_chunk); a
// phase's two rows are then 8 apart, and bit 3 of the row takes bit 0's place.
template <bool EDGE = false>
__device__ __forceinline__ int swz(int row, int col) {
  int q = col >> 5, j = (col >> 3) & 3;
  int x = ((q >> 1) & 1) | (((EDGE ? row >> 3 : row) & 1) << 1);
  return row * 128 + 32 * q + 8 * (j ^ x) + (col & 7);
}

// Stores the 16 words a row-phase thread (row lr, quarter q) holds into the
// raw tile at their swz positions: four 16-byte stores.
template <bool EDGE = false>
__device__ __forceinline__ void store_chunk_swz(uint16_t *tile, int lr, int q, const uint32_t (&w)[16]) {
  const int x = ((q >> 1) & 1) | (((EDGE ? lr >> 3 : lr) & 1) << 1);
#pragma unroll
  for (int j = 0; j < 4; j++)
    *reinterpret_cast<uint4 *>(&tile[lr * 128 + 32 * q + 8 * (j ^ x)]) = make_uint4(w[4 * j], w[4 * j + 1], w[4 * j + 2], w[4 * j + 3]);
}

// How a kernel may load input rows (spec §14: any K, so rows need not start
// on a 16-byte boundary).
enum RowLoad : int {
  kRowsScalar = 0,   // element by element
  kRowsAligned = 1,  // every row starts 16-byte aligned: vector loads
  kRowsShifted = 2,  // 16-bit input, 16-byte aligned base, rows at any even offset:
                     // aligned vector loads, then a funnel shift (load_shifted)
};

// The load mode for a [m, k] input of elem-byte elements at base.
inline int row_load_mode(const void *base, int64_t k, size_t elem) {
  if (!aligned16(base)) return kRowsScalar;
  if ((k * (int64_t)elem) % 16 == 0) return kRowsAligned;
  return elem == 2 ? kRowsShifted : kRowsScalar;
}

// 2·W 16-bit elements starting at src (2-byte aligned, inside the tensor that
// ends at end) as W words of pairs, from W/4 + 1 aligned 16-byte loads shifted
// into place: every load the warp makes stays a whole-sector 16-byte load (the
// neighbouring thread's extra chunk is its own first one, served by L1). The
// word shift is taken from (ws & 1, ws & 2) with two rounds of selects, so no
// register array is indexed at run time. The caller checked that the last
// aligned chunk ends inside the tensor (shifted_fits).
template <int W>
__device__ __forceinline__ void load_shifted(const uint16_t *src, uint32_t (&w)[W]) {
  constexpr int NC = W / 4 + 1;
  const uintptr_t a = reinterpret_cast<uintptr_t>(src);
  const uint4 *base = reinterpret_cast<const uint4 *>(a & ~(uintptr_t)15);
  const int off = (int)(a & 15), ws = off >> 2, hs = (off & 2) * 8;
  uint32_t raw[4 * NC];
#pragma unroll
  for (int i = 0; i < NC; i++) {
    uint4 u = __ldg(base + i);
    raw[4 * i] = u.x; raw[4 * i + 1] = u.y; raw[4 * i + 2] = u.z; raw[4 * i + 3] = u.w;
  }
  uint32_t s1[W + 3];
#pragma unroll
  for (int j = 0; j < W + 3; j++) s1[j] = (ws & 1) ? raw[j + 1] : raw[j];
  uint32_t s2[W + 1];
#pragma unroll
  for (int j = 0; j < W + 1; j++) s2[j] = (ws & 2) ? s1[j + 2] : s1[j];
#pragma unroll
  for (int j = 0; j < W; j++) w[j] = __funnelshift_r(s2[j], s2[j + 1], hs);
}

// load_shifted for a src whose offset within 16 bytes is the same for every
// lane of the warp (the kernels arrange their rows so): the shift is a switch
// on that offset, taken by the whole warp, and each case is a straight run of
// funnel shifts with constant register indices.
template <int W, int OFF>
__device__ __forceinline__ void shift_words(const uint32_t *raw, uint32_t (&w)[W]) {
  constexpr int ws = OFF >> 2, hs = (OFF & 2) * 8;
#pragma unroll
  for (int j = 0; j < W; j++) w[j] = hs ? __funnelshift_r(raw[j + ws], raw[j + ws + 1], hs) : raw[j + ws];
}

// The W words at byte offset off (even, 0..14) of the loaded words raw.
template <int W>
__device__ __forceinline__ void shift_uniform(const uint32_t (&raw)[W + 4], int off, uint32_t (&w)[W]) {
  switch (off) {
    case 0: shift_words<W, 0>(raw, w); break;
    case 2: shift_words<W, 2>(raw, w); break;
    case 4: shift_words<W, 4>(raw, w); break;
    case 6: shift_words<W, 6>(raw, w); break;
    case 8: shift_words<W, 8>(raw, w); break;
    case 10: shift_words<W, 10>(raw, w); break;
    case 12: shift_words<W, 12>(raw, w); break;
    default: shift_words<W, 14>(raw, w); break;
  }
}

template <int W>
__device__ __forceinline__ void load_shifted_uniform(const uint16_t *src, uint32_t (&w)[W]) {
  constexpr int NC = W / 4 + 1;
  const uintptr_t a = reinterpret_cast<uintptr_t>(src);
  const uint4 *base = reinterpret_cast<const uint4 *>(a & ~(uintptr_t)15);
  uint32_t raw[4 * NC];
#pragma unroll
  for (int i = 0; i < NC; i++) {
    uint4 u = __ldg(base + i);
    raw[4 * i] = u.x; raw[4 * i + 1] = u.y; raw[4 * i + 2] = u.z; raw[4 * i + 3] = u.w;
  }
  switch ((int)(a & 15)) {
    case 0: shift_words<W, 0>(raw, w); break;
    case 2: shift_words<W, 2>(raw, w); break;
    case 4: shift_words<W, 4>(raw, w); break;
    case 6: shift_words<W, 6>(raw, w); break;
    case 8: shift_words<W, 8>(raw, w); break;
    case 10: shift_words<W, 10>(raw, w); break;
    case 12: shift_words<W, 12>(raw, w); break;
    default: shift_words<W, 14>(raw, w); break;
  }
}

// Whether load_shifted of 2·W elements at src reads only inside [.., end).
template <int W>
__device__ __forceinline__ bool shifted_fits(const uint16_t *src, const void *end) {
  uintptr_t last = (reinterpret_cast<uintptr_t>(src) & ~(uintptr_t)15) + 16 * (W / 4 + 1);
  return last <= reinterpret_cast<uintptr_t>(end);
}

// Row r, columns c .. c+31 of the input as 16 words of element pairs (zeros
// outside the tensor: the zero padding of spec §14). EDGE: the kernel's
// ragged instance, whose warps hold rows of one 16-byte offset (shifted
// loads); otherwise rows are aligned (mode kRowsAligned) or scalar.
template <typename T, bool EDGE = true>
__device__ __forceinline__ void load_chunk(const void *in, int64_t m, int64_t k, int mode, int64_t r, int64_t c, uint32_t (&w)[16]) {
  const T *src = (const T *)in + r * k + c;
  if (EDGE && mode == kRowsShifted && r < m && c + 32 <= k) {
    const uint16_t *s16 = reinterpret_cast<const uint16_t *>(src);
    if (shifted_fits<16>(s16, (const T *)in + m * k)) {
      load_shifted_uniform<16>(s16, w);
      return;
    }
  }
  if (!EDGE) {  // the aligned instance: k a multiple of 32 (the old code, as measured)
#pragma unroll
    for (int b = 0; b < 2; b++) {
      bool ok = r < m && c + 16 * b < k;
      if (ok && mode == kRowsAligned) {
        uint4 u0 = __ldg(reinterpret_cast<const uint4 *>(src + 16 * b));
        uint4 u1 = __ldg(reinterpret_cast<const uint4 *>(src + 16 * b) + 1);
        w[8 * b + 0] = u0.x; w[8 * b + 1] = u0.y; w[8 * b + 2] = u0.z; w[8 * b + 3] = u0.w;
        w[8 * b + 4] = u1.x; w[8 * b + 5] = u1.y; w[8 * b + 6] = u1.z; w[8 * b + 7] = u1.w;
      } else if (ok) {
        const uint16_t *s16 = reinterpret_cast<const uint16_t *>(src + 16 * b);
#pragma unroll
        for (int j = 0; j < 8; j++) w[8 * b + j] = (uint32_t)s16[2 * j] | ((uint32_t)s16[2 * j + 1] << 16);
      } else {
#pragma unroll
        for (int j = 0; j < 8; j++) w[8 * b + j] = 0;
      }
    }
    return;
  }
#pragma unroll
  for (int b = 0; b < 2; b++) {
    bool ok = r < m && c + 16 * b < k;
    if (ok && mode == kRowsAligned && c + 16 * b + 16 <= k) {
      uint4 u0 = __ldg(reinterpret_cast<const uint4 *>(src + 16 * b));
      uint4 u1 = __ldg(reinterpret_cast<const uint4 *>(src + 16 * b) + 1);
      w[8 * b + 0] = u0.x; w[8 * b + 1] = u0.y; w[8 * b + 2] = u0.z; w[8 * b + 3] = u0.w;
      w[8 * b + 4] = u1.x; w[8 * b + 5] = u1.y; w[8 * b + 6] = u1.z; w[8 * b + 7] = u1.w;
    } else if (ok) {
      const uint16_t *s16 = reinterpret_cast<const uint16_t *>(src + 16 * b);
      const int64_t n = k - c - 16 * b;  // valid elements from here (> 0)
#pragma unroll
      for (int j = 0; j < 8; j++) {
        uint32_t lo = 2 * j < n ? (uint32_t)s16[2 * j] : 0u, hi = 2 * j + 1 < n ? (uint32_t)s16[2 * j + 1] : 0u;
        w[8 * b + j] = lo | (hi << 16);
      }
    } else {
#pragma unroll
      for (int j = 0; j < 8; j++) w[8 * b + j] = 0;
    }
  }
}

// 16-byte asynchronous copies global -> shared (cp.async, sm_80+), so that
// loads are in flight while other work goes on (fp8_block: the next tile;
// mx: a warp's ragged rows).
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem) {
  uint32_t a = (uint32_t)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(a), "l"(gmem) : "memory");
}
// cp.async of 16 bytes to the shared address a (from __cvta_generic_to_shared,
// taken once) from g, or a zero fill where n is 0 (src-size 0: nothing is
// read, so g may be any valid address).
__device__ __forceinline__ void cp_async16_n(uint32_t a, const void *g, uint32_t n) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(a), "l"(g), "r"(n) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_1() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_2() { asm volatile("cp.async.wait_group 2;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait_n() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

// The interior strips of the mxfp4 fast kernel's EDGE instance with both
// directions (spec §14: rows at any even offset): a warp holds eight rows 8
// apart (one 16-byte offset) of a sub-tile's 128 columns. It copies the 18
// 16-byte chunks from the 32-byte boundary at or below each of them into its
// own shared memory with cp.async (stage_rows8) while it processes the
// previous sub-tile, a prefetch that costs no registers; each lane then
// shifts its 32 elements out of its row's chunks 4q + h .. 4q + h + 4, h = 1
// where the row starts 16 bytes or more past its boundary (unstage_rows8).
// Each copy instruction covers two whole rows' 256 bytes, and lanes 2i and
// 2i+1 one whole sector (from 16-byte boundaries, as before 2026-12-02,
// every other row's lane pairs straddled sectors: bench/RESULTS.md,
// 2026-12-02 15:05 section). (H100, 8191², mxfp4 rowwise: each lane copying
// its own five chunks, so that one instruction takes 16 bytes of 32 sectors
// and every sector is asked for by two, ran at about 0.6× the speed of plain
// loads with cp.async.cg, which passes L1, and at 0.98× with .ca.) The
// caller checked that the 18th chunk of every row lies inside the tensor.
constexpr int kRowChunks = 18;

// row0: the warp's first row at the sub-tile's first column; step: bytes
// from one of its rows to the next (8 rows of the tensor).
__device__ __forceinline__ void stage_rows8(uint4 *st, const void *row0, int64_t step) {
  const int lane = threadIdx.x & 31;
  const uintptr_t r0 = reinterpret_cast<uintptr_t>(row0);
#pragma unroll
  for (int u = 0; u < 4; u++) {
    const int i = 2 * u + (lane >> 4), j = lane & 15;
    cp_async16(st + i * kRowChunks + j, reinterpret_cast<const void *>(((r0 + i * step) & ~(uintptr_t)31) + 16 * j));
  }
  if (lane < 16) {
    const int i = lane >> 1, j = 16 + (lane & 1);
    cp_async16(st + i * kRowChunks + j, reinterpret_cast<const void *>(((r0 + i * step) & ~(uintptr_t)31) + 16 * j));
  }
  cp_async_commit();
}

// The 32 elements of lane (row lane/4, quarter lane%4) as 16 words of
// pairs, the rows staged by stage_rows8(st, row0, step). Every lane of the
// warp calls it; on return the warp may copy the next rows into st (every
// lane has read).
__device__ __forceinline__ void unstage_rows8(const uint4 *st, const void *row0, int64_t step, uint32_t (&w)[16]) {
  const int lane = threadIdx.x & 31;
  const uintptr_t a = reinterpret_cast<uintptr_t>(row0) + (lane >> 2) * step;
  const uint4 *s = st + (lane >> 2) * kRowChunks + 4 * (lane & 3) + ((a >> 4) & 1);
  uint32_t raw[20];
  cp_async_wait_all();
  __syncwarp();  // the other lanes' copies
#pragma unroll
  for (int i = 0; i < 5; i++) {
    uint4 u = s[i];
    raw[4 * i] = u.x; raw[4 * i + 1] = u.y; raw[4 * i + 2] = u.z; raw[4 * i + 3] = u.w;
  }
  __syncwarp();
  shift_uniform<16>(raw, (int)(a & 15), w);
}

// The low n (0..8) bytes of v at p, in at most five stores aligned to their
// size, with no loop (H100 run 3: byte loops at the ends of a warp's run
// doubled the EDGE mxfp8 kernel's time).
__device__ __forceinline__ void put_bytes(uint8_t *p, uint64_t v, int n) {
  if (n <= 0) return;
  if (n >= 1 && (reinterpret_cast<uintptr_t>(p) & 1)) {
    *p = (uint8_t)v;
    p += 1, v >>= 8, n -= 1;
  }
  if (n >= 2 && (reinterpret_cast<uintptr_t>(p) & 2)) {
    *reinterpret_cast<uint16_t *>(p) = (uint16_t)v;
    p += 2, v >>= 16, n -= 2;
  }
  if (n >= 4 && (reinterpret_cast<uintptr_t>(p) & 4)) {
    *reinterpret_cast<uint32_t *>(p) = (uint32_t)v;
    p += 4, v >>= 32, n -= 4;
  }
  if (n >= 8) {
    *reinterpret_cast<uint64_t *>(p) = v;
    return;
  }
  if (n >= 4) {
    *reinterpret_cast<uint32_t *>(p) = (uint32_t)v;
    p += 4, v >>= 32, n -= 4;
  }
  if (n >= 2) {
    *reinterpret_cast<uint16_t *>(p) = (uint16_t)v;
    p += 2, v >>= 16, n -= 2;
  }
  if (n >= 1) *p = (uint8_t)v;
}

// Stores the first n bytes (all 4·W when n ≥ 4·W) of the words w at dst: one
// vector store where dst is aligned to it, else narrower ones (rows of packed
// FP4 are ⌈K/2⌉ bytes, spec §14 item 4, so they start anywhere).
template <int W>
__device__ __forceinline__ void store_bytes(uint8_t *dst, const uint32_t (&w)[W], int64_t n) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(dst);
  if (n >= 4 * W) {
    if constexpr (W == 4) {
      if ((a & 15) == 0) {
        *reinterpret_cast<uint4 *>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
        return;
      }
    }
    if constexpr (W % 2 == 0) {
      if ((a & 7) == 0) {
#pragma unroll
        for (int i = 0; i < W; i += 2) *reinterpret_cast<uint2 *>(dst + 4 * i) = make_uint2(w[i], w[i + 1]);
        return;
      }
    }
    if ((a & 3) == 0) {
#pragma unroll
      for (int i = 0; i < W; i++) *reinterpret_cast<uint32_t *>(dst + 4 * i) = w[i];
      return;
    }
    if ((a & 1) == 0) {
#pragma unroll
      for (int i = 0; i < W; i++) {
        *reinterpret_cast<uint16_t *>(dst + 4 * i) = (uint16_t)w[i];
        *reinterpret_cast<uint16_t *>(dst + 4 * i + 2) = (uint16_t)(w[i] >> 16);
      }
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < W; i += 2) {
    const uint64_t v = (uint64_t)w[i] | (i + 1 < W ? (uint64_t)w[i + 1] << 32 : 0);
    const int64_t chunk = i + 1 < W ? 8 : 4, left = n - 4 * i;
    put_bytes(dst + 4 * i, v, (int)(left < 0 ? 0 : left < chunk ? left : chunk));
  }
}

// Stores a run of W-byte pieces (W = 4 or 8) held one per lane: the lane
// holds the W bytes v at dst, the next piece of the run is held by lane + step
// (dst + W), and of its own piece the first n bytes are inside the tensor (n is
// W up to the run's end, then less, then 0). first / last: the lane holds the
// run's first / last piece. Where dst is not W-byte aligned (K or M not a
// multiple of W, spec §14) each lane writes the aligned W bytes that begin
// inside its own piece, taking the rest from the next lane's, so the run is
// still written with aligned W-byte stores; only the run's ends go byte by
// byte. Every lane of the warp must call it (the shuffle).
template <int W>
__device__ __forceinline__ void store_run(uint8_t *dst, uint64_t me, int n, int step, bool first, bool last) {
  static_assert(W == 4 || W == 8, "pieces of 4 or 8 bytes");
  const int off = (int)(reinterpret_cast<uintptr_t>(dst) & (W - 1));
  const uint64_t nx = W == 8 ? __shfl_down_sync(0xFFFFFFFFu, me, step) : (uint64_t)__shfl_down_sync(0xFFFFFFFFu, (uint32_t)me, step);
  int nn = __shfl_down_sync(0xFFFFFFFFu, n, step);
  if (last) nn = 0;
  if (n <= 0) return;
  // 4-byte pieces: the ends are at most 3 bytes, written as predicated byte
  // stores (put_bytes' branches, taken by one lane of sixteen, serialized
  // the warp: fp8's transposed runs).
  auto put = [](uint8_t *p, uint64_t v, int c) {
    if (W == 8) {
      put_bytes(p, v, c);
    } else {
#pragma unroll
      for (int j = 0; j < 3; j++)
        if (j < c) p[j] = (uint8_t)(v >> (8 * j));
    }
  };
  if (off == 0) {
    if (W == 4 && n == 4) *reinterpret_cast<uint32_t *>(dst) = (uint32_t)me;
    else if (W == 4) put(dst, me, n);
    else put_bytes(dst, me, n);
    return;
  }
  const int head = W - off;  // bytes of each piece before the next aligned word
  if (first) put(dst, me, min(head, n));
  if (n == W && nn >= head) {
    const uint64_t word = (me >> (8 * head)) | (nx << (8 * off));
    if (W == 8) *reinterpret_cast<uint64_t *>(dst + head) = word;
    else *reinterpret_cast<uint32_t *>(dst + head) = (uint32_t)word;
  } else {
    if (n > head) put(dst + head, me >> (8 * head), n - head);
    if (n == W) put(dst + W, nx, min(head, nn));
  }
}

// store_run for 16-byte pieces (the four words w, first n bytes inside):
// each lane writes the two aligned 8-byte words that begin inside its piece,
// the second one completed with the next lane's first bytes.
__device__ __forceinline__ void store_run16(uint8_t *dst, const uint32_t (&w)[4], int n, int step, bool first, bool last) {
  const int off = (int)(reinterpret_cast<uintptr_t>(dst) & 7);
  const uint64_t lo = (uint64_t)w[0] | ((uint64_t)w[1] << 32), hi = (uint64_t)w[2] | ((uint64_t)w[3] << 32);
  const uint64_t nx = __shfl_down_sync(0xFFFFFFFFu, lo, step);
  int nn = __shfl_down_sync(0xFFFFFFFFu, n, step);
  if (last) nn = 0;
  if (n <= 0) return;
  if (off == 0) {
    if (n == 16) {
      *reinterpret_cast<uint64_t *>(dst) = lo;
      *reinterpret_cast<uint64_t *>(dst + 8) = hi;
    } else {
      put_bytes(dst, lo, min(8, n));
      put_bytes(dst + 8, hi, n - 8);
    }
    return;
  }
  const int head = 8 - off;
  if (first) put_bytes(dst, lo, min(head, n));
  const uint64_t mid = (lo >> (8 * head)) | (hi << (8 * off));  // bytes head .. head+7
  if (n >= head + 8) *reinterpret_cast<uint64_t *>(dst + head) = mid;
  else if (n > head) put_bytes(dst + head, mid, n - head);
  if (n == 16 && nn >= head) {
    *reinterpret_cast<uint64_t *>(dst + head + 8) = (hi >> (8 * head)) | (nx << (8 * off));
  } else {
    if (n > head + 8) put_bytes(dst + head + 8, hi >> (8 * head), n - head - 8);
    if (n == 16) put_bytes(dst + 16, nx, min(head, nn));
  }
}

// A warp's run of FP8 codes, 8 bytes per lane, all lanes in one row
// (store_run over the whole warp).
__device__ __forceinline__ void store_run8(uint8_t *dst, uint2 v, int n) {
  const unsigned lane = threadIdx.x & 31;
  store_run<8>(dst, (uint64_t)v.x | ((uint64_t)v.y << 32), n, 1, lane == 0, lane == 31);
}

// store_run8 for a run that lies whole inside the tensor (8 bytes in every
// lane; an interior tile of a ragged tensor, spec §14): no lengths are
// shuffled and the offset is the warp's (dst − 8·lane is one address). Each
// lane but the last writes the aligned 8 bytes that begin in its piece
// (two funnel shifts of 32-bit words, the shift chosen by the uniform
// offset); the run's unaligned ends, the head of lane 0's piece and the tail
// of lane 31's, are bytes j < head of lane 0 and j ≥ head of lane 31, each at
// dst + j: eight predicated byte stores at constant offsets, the same
// instructions in both lanes. (H100, 8191²: against a version with 64-bit
// shifts by variable amounts and the ends as 1/2/4-byte pieces, which ncu
// counted at 50 instructions per warp and row, this one issued 2 % more
// instructions in all, ran rowwise 2 % slower and columnwise 2.5 % faster:
// kept for the columnwise instance, which the other left 2 % behind the
// checked path it replaced.)
// WIDTH 16: two runs per warp, one per half-warp (fp8_block's 128-byte rows
// and transposed rows); their offsets may differ, so the shuffles come first.
template <int WIDTH = 32>
__device__ __forceinline__ void store_run8_full(uint8_t *dst, uint2 v) {
  static_assert(WIDTH == 16 || WIDTH == 32, "runs of a warp or a half-warp");
  const unsigned lane = threadIdx.x & (WIDTH - 1);
  const int off = (int)(reinterpret_cast<uintptr_t>(dst) & 7);
  if (WIDTH == 32 && off == 0) {  // the same for every lane
    *reinterpret_cast<uint2 *>(dst) = v;
    return;
  }
  const uint32_t n0 = __shfl_down_sync(0xFFFFFFFFu, v.x, 1, WIDTH), n1 = __shfl_down_sync(0xFFFFFFFFu, v.y, 1, WIDTH);
  if (off == 0) {  // WIDTH 16: this half-warp's run is aligned
    *reinterpret_cast<uint2 *>(dst) = v;
    return;
  }
  const int head = 8 - off;  // bytes of the piece before the next aligned word
  // Bytes head .. head+7 of the 16 bytes (v.x, v.y, n0, n1).
  const bool hi = head >= 4;
  const uint32_t a = hi ? v.y : v.x, b = hi ? n0 : v.y, c = hi ? n1 : n0;
  const int hs = 8 * (head & 3);
  if (lane != WIDTH - 1) *reinterpret_cast<uint2 *>(dst + head) = make_uint2(__funnelshift_r(a, b, hs), __funnelshift_r(b, c, hs));
  const bool first = lane == 0, last = lane == WIDTH - 1;
#pragma unroll
  for (int j = 0; j < 8; j++)
    if ((first && j < head) || (last && j >= head)) dst[j] = (uint8_t)((j < 4 ? v.x : v.y) >> (8 * (j & 3)));
}

// The 4×4 byte transpose of the words a[0..3] (byte j of a[i] is element
// (i, j)): c[j] holds column j, row i in byte i (fp8's and fp8_block's
// transposed codes).
__device__ __forceinline__ void transpose4x4_bytes(uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t (&c)[4]) {
  const uint32_t t0 = __byte_perm(a0, a1, 0x5140), t1 = __byte_perm(a0, a1, 0x7362);
  const uint32_t t2 = __byte_perm(a2, a3, 0x5140), t3 = __byte_perm(a2, a3, 0x7362);
  c[0] = __byte_perm(t0, t2, 0x5410);
  c[1] = __byte_perm(t0, t2, 0x7632);
  c[2] = __byte_perm(t1, t3, 0x5410);
  c[3] = __byte_perm(t1, t3, 0x7632);
}

// Keeps the first nv nibbles of the words w (element i in bits 4i) and zeroes
// the rest: positions of the zero padding never reach a buffer (spec §14 item
// 4: the high nibble of an odd row's last byte is zero, whatever the padded
// element's code would have been, e.g. under a NaN scale or after the RHT).
template <int W>
__device__ __forceinline__ void keep_nibbles(uint32_t (&w)[W], int64_t nv) {
#pragma unroll
  for (int i = 0; i < W; i++) {
    int64_t lo = 8 * i;
    if (nv <= lo) w[i] = 0;
    else if (nv < lo + 8) w[i] &= (1u << (4 * (nv - lo))) - 1u;
  }
}

// Warp-wide max of unsigned values.
__device__ __forceinline__ uint32_t warp_max(uint32_t v) { return __reduce_max_sync(0xFFFFFFFFu, v); }

// Tile t (t < 2^31, which every launch checks) of a tensor with tiles_c
// tiles per row: its tile row *tr and column *tc by one 32-bit division. The
// int64 division compiles to a 64-bit routine issued per tile: in the MXFP8
// grouped kernel, whose tensor changes between tiles, about 2 of its 25 warp
// instructions per 32 elements (bench/RESULTS.md, the MoE batch's ncu).
__device__ __forceinline__ void tile_rc(int64_t t, int64_t tiles_c, int64_t *tr, int64_t *tc) {
  const uint32_t n = (uint32_t)tiles_c, q = (uint32_t)t / n;
  *tr = q;
  *tc = (uint32_t)t - q * n;
}

// The GEMM-swizzled position of compact scale (i, j) (swizzle.Index, spec §4.7).
// i, j, cols ≥ 0, so the divisions are shifts and the four terms disjoint
// bit fields (signed int64 division and remainder by constants take
// several instructions each).
__device__ __forceinline__ int64_t swizzle_index(int64_t i, int64_t j, int64_t cols) {
  const uint64_t u = (uint64_t)i, v = (uint64_t)j;
  return (int64_t)((((u >> 7) * ((uint64_t)cols >> 2) + (v >> 2)) << 9) | ((u & 31) << 4) | (((u >> 5) & 3) << 2) | (v & 3));
}

// Launch geometry helper: enough blocks to fill the GPU a few times.
inline int grid_cap() {
  static const int sms = [] {  // once per process (a thread-safe static)
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) == cudaSuccess && cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && n > 0)
      return n;
    cudaGetLastError();  // leave no error for the next launch check
    return 132;
  }();
  return sms * 8;
}

// The padding of a scale buffer of [pad_i, pad_j] entries whose valid ones
// are [ni, nj] (MXFP8, MXFP4 and NVFP4 scales past the tensor, zeros: spec
// §14 item 4): rows ni..pad_i, then columns nj..pad_j of the valid rows.
// Padding and valid entries are distinct positions in every layout (the
// swizzle is a bijection), so the quantize kernels zero only the padding, or
// scale_padding_kernel ahead of one that does not, where a memset of the
// whole buffer per call wrote every scale twice (host time per call, issue
// #15).
//
// S: a scale buffer with fields buf, ni, nj, pad_i, pad_j and index(i, j), the
// position of entry (i, j) in its layout.
template <typename S>
__host__ __device__ __forceinline__ int64_t scale_padding_entries(const S &s) {
  return s.buf == nullptr ? 0 : (s.pad_i - s.ni) * s.pad_j + s.ni * (s.pad_j - s.nj);
}

// Zeroes part `part` of `parts` of the padding of s (a null buffer: none).
template <typename S>
__device__ __forceinline__ void zero_scale_padding(const S &s, int64_t part, int64_t parts) {
  if (s.buf == nullptr) return;
  int64_t a = (s.pad_i - s.ni) * s.pad_j, w = s.pad_j - s.nj, n = a + s.ni * w;
  for (int64_t idx = part * blockDim.x + threadIdx.x; idx < n; idx += parts * blockDim.x) {
    int64_t i, j;
    if (idx < a) {
      i = s.ni + idx / s.pad_j;
      j = idx % s.pad_j;
    } else {
      i = (idx - a) / w;
      j = s.nj + (idx - a) % w;
    }
    s.buf[s.index(i, j)] = 0;
  }
}

// The padding of up to two scale buffers (a null one: none), zeroed by one
// small kernel ahead of a quantize kernel that does not zero it: a kernel
// boundary that programmatic dependent launch shortens, where a memset's is
// not (bench/RESULTS.md, 2026-11-29 11:20 section, call 5). It lets the
// quantize kernel be scheduled at once (pdl_trigger). Instantiated only in
// the files that launch it (mx.cu, nvfp4.cu).
template <typename S>
__global__ void scale_padding_kernel(S r, S c) {
  pdl_wait();
  pdl_trigger();
  zero_scale_padding(r, blockIdx.x, gridDim.x);
  zero_scale_padding(c, blockIdx.x, gridDim.x);
}
template <typename S>
int32_t launch_scale_padding(const S &r, const S &c, cudaStream_t s, quant_plugin_error *err) {
  const int64_t nr = scale_padding_entries(r), nc = scale_padding_entries(c), n = nr > nc ? nr : nc;
  if (n == 0) return QUANT_OK;
  const int64_t blocks = ceil_div(n, (int64_t)256);
  launch_kernel(scale_padding_kernel<S>, (unsigned)(blocks > grid_cap() ? grid_cap() : blocks), 256, 0, s, r, c);
  LQ_LAUNCHED("scale padding kernel launch");
  return QUANT_OK;
}

// dst[c][r] = src[r][c] for bytes: [m, k] -> [k, m], any m, k and alignment
// (the derive of fp8 and of fp8_block 128x128, and their "both" quantize where
// the input rows are not 16-byte aligned: the rowwise codes, then these
// transposed). A CTA of 256 threads takes a tile of kTM = 128 input rows by
// kTK = 64 columns: 64 runs of up to 128 output bytes (output row k0 + c,
// bytes m0 .. m0 + 127). Every access is an aligned 4-byte word, whatever m,
// k and the pointers' alignment, but at the edges of the tensor:
//   - load: the 17 aligned words under each input row's 64 bytes, for the
//     tile's rows and the kTH = 3 rows above it, staged as loaded: row r's
//     byte c sits a_r + c bytes into its staged row, a_r the row's offset in
//     its first word (a word at the buffer's start or end: its bytes inside,
//     one by one);
//   - store: output run c begins e bytes into an aligned word; lane l of a
//     warp writes the run's aligned word l, whose bytes are input rows
//     4l − e .. 4l − e + 3 of the tile at column c (rows −e .. −1: the
//     halo), four byte reads from shared memory. The run's last e bytes lie
//     in the word after, which is word 0 of the tile below (a 128-byte step,
//     so its run begins at the same e): that tile writes them, as this one
//     writes its word 0, with the same values (bytes of the same input). A
//     warp's runs c = w, w + 8, ... are 8·m bytes apart: one e for all.
//     Interior tiles (a tile row above and one below, all 64 columns inside
//     the tensor) do just that, unchecked. Edge tiles run the same steps with
//     bounds checks (a separate path: one path for both, checked, took
//     74 µs at 8191² against these two's 45); there words that are partly
//     another's go byte by byte: word 0 of the first tile row (its first e
//     bytes end the output row before), and the words past the last input row
//     in the last tile row, which also writes word 32 where its rows reach
//     past word 31. (bench/models/transpose_bytes_model.py checks these
//     indices: every byte once right, every word access aligned, in bounds.)
// The staged rows are 17 words apart plus a word every four rows, so that
// the 32 lanes' rows 4l + const fall in 32 banks. (H200, 8191²,
// 2 × 67 MB: 0.045 ms, 70 % of the copy bandwidth (8192²: 0.043); 0.056
// when the edge tiles went byte by byte, which cost 256x7168 9.0 µs against
// 3.8 now; 0.082-0.088 for the 64×64 tile of a byte per thread and access
// this replaced, 0.108 for a strip kernel of aligned 8-byte words, about 0.10
// for 64×64 tiles of aligned words whose runs' end words went byte by byte,
// and 0.064 for the edge-byte kernel on 128×128 tiles: bench/RESULTS.md,
// 2026-11-29 12:30, 13:20 and 14:30 sections.) A template so that each file that
// launches it gets one copy and the others none.
constexpr int kTM = 128, kTK = 64, kTH = 3, kTS = kTM + kTH, kTW = kTK / 4 + 1;
__device__ __forceinline__ int tb_row(int s) { return s * kTW + (s >> 2); }  // staged row s's first word
constexpr int kTWords = kTS * kTW + kTS / 4 + 1;

template <typename Byte>
__global__ void __launch_bounds__(256) transpose_bytes_kernel(const Byte *__restrict__ src, Byte *__restrict__ dst, int64_t m, int64_t k) {
  pdl_wait();
  __shared__ uint32_t words[kTWords];
  const uint8_t *sm = reinterpret_cast<const uint8_t *>(words);
  const int64_t tiles_m = (m + kTM - 1) / kTM;
  const int64_t m0 = (int64_t)(blockIdx.x % tiles_m) * kTM, k0 = (int64_t)(blockIdx.x / tiles_m) * kTK;
  const int t = threadIdx.x;
  const uintptr_t sb = reinterpret_cast<uintptr_t>(src), db = reinterpret_cast<uintptr_t>(dst);
  if (m0 > 0 && m0 + kTM < m && k0 + kTK <= k) {
    constexpr int kLoads = (kTS * kTW + 255) / 256;
    uint32_t v[kLoads];
#pragma unroll
    for (int j = 0; j < kLoads; j++) {
      const int i = t + 256 * j;
      if (i < kTS * kTW) {
        const int s = i / kTW, w = i - s * kTW;
        const uintptr_t a = sb + (uintptr_t)((m0 - kTH + s) * k + k0);
        v[j] = __ldg(reinterpret_cast<const uint32_t *>(a & ~(uintptr_t)3) + w);
      }
    }
#pragma unroll
    for (int j = 0; j < kLoads; j++) {
      const int i = t + 256 * j;
      if (i < kTS * kTW) {
        const int s = i / kTW;
        words[tb_row(s) + i - s * kTW] = v[j];
      }
    }
    const int w = t / 32, l = t % 32;
    const uintptr_t run = db + (uintptr_t)((k0 + w) * m + m0);
    const int e = (int)(run & 3);
    int base[4];  // byte b of lane l's words: staged row 4l − e + b + kTH at column 0
#pragma unroll
    for (int b = 0; b < 4; b++) {
      const int s = 4 * l - e + b + kTH;
      base[b] = 4 * tb_row(s) + (int)((sb + (uintptr_t)((m0 - kTH + s) * k + k0)) & 3);
    }
    uint32_t *out = reinterpret_cast<uint32_t *>(run - e) + l;
    const int64_t step = 2 * m;  // words between runs c and c + 8
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kTK / 8; i++) {
      const int c = w + 8 * i;
      out[i * step] = (uint32_t)sm[base[0] + c] | (uint32_t)sm[base[1] + c] << 8 | (uint32_t)sm[base[2] + c] << 16 |
                      (uint32_t)sm[base[3] + c] << 24;
    }
    return;
  }
  // An edge tile: the same staging and stores, with the bounds checks.
  const uintptr_t se = sb + (uintptr_t)(m * k);
  const int rows = m - m0 < kTM ? (int)(m - m0) : kTM, cols = k - k0 < kTK ? (int)(k - k0) : kTK;
  const int s_lo = m0 > 0 ? 0 : kTH, s_hi = kTH + rows;  // staged rows s: input rows m0 + s - kTH
  constexpr int kLoads = (kTS * kTW + 255) / 256;
  uint32_t v[kLoads];
#pragma unroll
  for (int j = 0; j < kLoads; j++) {
    const int i = t + 256 * j, s = i / kTW, w = i - s * kTW;
    if (i < kTS * kTW && s >= s_lo && s < s_hi) {
      const uintptr_t p = ((sb + (uintptr_t)((m0 - kTH + s) * k + k0)) & ~(uintptr_t)3) + 4 * w;
      if (p >= sb && p + 4 <= se) {
        v[j] = __ldg(reinterpret_cast<const uint32_t *>(p));
      } else {  // a word at the buffer's start or end: its bytes inside only
        uint32_t x = 0;
#pragma unroll
        for (int b = 0; b < 4; b++)
          if (p + b >= sb && p + b < se) x |= (uint32_t)__ldg(reinterpret_cast<const uint8_t *>(p + b)) << (8 * b);
        v[j] = x;
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kLoads; j++) {
    const int i = t + 256 * j, s = i / kTW;
    if (i < kTS * kTW && s >= s_lo && s < s_hi) words[tb_row(s) + i - s * kTW] = v[j];
  }
  const int w = t / 32, l = t % 32;
  const uintptr_t run = db + (uintptr_t)((k0 + w) * m + m0);
  const int e = (int)(run & 3);
  // Byte b of lane l's word is input row r = 4l − e + b of the tile, staged
  // row r + kTH; the tile writes it if r < rows and, in the first tile row,
  // r ≥ 0 (rows −e .. −1 are the last output row's, written by its last tile
  // row). Words 0 .. 31 cover rows up to 127 − e; the last tile row also
  // writes word 32 (lane 0) where its rows reach past that.
  int base[4], xbase[4];
  uint32_t mask = 0, xmask = 0;
#pragma unroll
  for (int b = 0; b < 4; b++) {
    const int r = 4 * l - e + b, xr = kTM - e + b;
    base[b] = 4 * tb_row(r + kTH) + (int)((sb + (uintptr_t)((m0 + r) * k + k0)) & 3);
    if ((m0 > 0 || r >= 0) && r < rows) mask |= 1u << b;
    if (xr < rows) xmask |= 1u << b;
    xbase[b] = xr < rows ? 4 * tb_row(xr + kTH) + (int)((sb + (uintptr_t)((m0 + xr) * k + k0)) & 3) : 0;
  }
  if (l != 0 || m0 + kTM < m) xmask = 0;
  uint8_t *out = reinterpret_cast<uint8_t *>(run - e) + 4 * l;
  const int64_t step = 8 * m;  // bytes between runs c and c + 8
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kTK / 8; i++) {
    const int c = w + 8 * i;
    if (c >= cols) break;
    const uint32_t x = (uint32_t)sm[base[0] + c] | (uint32_t)sm[base[1] + c] << 8 | (uint32_t)sm[base[2] + c] << 16 |
                       (uint32_t)sm[base[3] + c] << 24;
    if (mask == 15) {
      *reinterpret_cast<uint32_t *>(out + i * step) = x;
    } else {
#pragma unroll
      for (int b = 0; b < 4; b++)
        if (mask >> b & 1) out[i * step + b] = (uint8_t)(x >> (8 * b));
    }
#pragma unroll
    for (int b = 0; b < 4; b++)
      if (xmask >> b & 1) out[i * step + 4 * 32 + b] = sm[xbase[b] + c];
  }
}

// Launches transpose_bytes_kernel over an [m, k] byte matrix (nothing when empty).
template <typename Byte>
int32_t transpose_bytes(const Byte *src, Byte *dst, int64_t m, int64_t k, cudaStream_t s, quant_plugin_error *err) {
  const int64_t tiles = ((m + kTM - 1) / kTM) * ((k + kTK - 1) / kTK);
  if (tiles == 0) return QUANT_OK;
  if (tiles > 0x7FFFFFFF) return fail(err, QUANT_ERROR_UNSUPPORTED, "byte transpose: [%lld, %lld] has too many tiles", (long long)m, (long long)k);
  launch_kernel(transpose_bytes_kernel<Byte>, (unsigned)tiles, 256, 0, s, src, dst, m, k);
  LQ_LAUNCHED("byte transpose kernel launch");
  return QUANT_OK;
}

// ---------------------------------------------------------------------------
// Groups of tensors in one launch (quant_quantize_grouped: MoE experts, issue
// #15). A kernel templated on G walks work units 0 .. grp.total() (tiles,
// strips, amax ranges: whatever the kernel's CTA takes) and asks
// grp.locate(unit, &local) for the unit's tensor parameters P and its index
// within that tensor. Single<P> is one tensor (the single quantize: locate is
// the identity); Group<P, N> holds up to N tensors whose units are numbered
// tensor after tensor, passed whole as a __grid_constant__ kernel parameter
// (up to 32 KB since CUDA 12.1), so that one kernel serves both calls.
// ---------------------------------------------------------------------------
constexpr size_t kMaxKernelParams = 32764;

//
// A kernel whose CTA walks several units in increasing order (a persistent
// grid) finds the first with index_of (binary search) and the next ones with
// locate_from, which steps forward from the last tensor: the group's tensor
// parameters are read through the constant cache with a run-time index, and
// each dependent read there can cost an L2 round trip (H100: a loop over the
// 128 tensors of a group cost ~30 µs per CTA).
template <typename P>
struct Single {
  static constexpr bool kGroup = false;
  P p;
  int64_t n;  // units
  __device__ __forceinline__ int index_of(int64_t) const { return 0; }
  __device__ __forceinline__ const P &locate_from(int64_t unit, int *, int64_t *local) const {
    *local = unit;
    return p;
  }
  __host__ __device__ __forceinline__ int64_t total() const { return n; }
  __host__ __device__ __forceinline__ int size() const { return 1; }
  __host__ __device__ __forceinline__ const P &tensor(int) const { return p; }
  __device__ __forceinline__ const P &locate(int64_t unit, int64_t *local) const {
    *local = unit;
    return p;
  }
};

// The last i in [0, count) with first[i] <= unit (first ascending, first[0]
// <= unit): the tensor of a group that holds work unit `unit`.
__device__ __forceinline__ int last_at_or_before(const int64_t *first, int count, int64_t unit) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (first[mid] <= unit) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

template <typename P, int N>
struct Group {
  static constexpr bool kGroup = true;
  static constexpr int kMax = N;
  int count;
  int64_t first[N + 1];  // first unit of tensor i; first[count] = all units
  P t[N];
  __host__ __device__ __forceinline__ int64_t total() const { return first[count]; }
  __host__ __device__ __forceinline__ int size() const { return count; }
  __host__ __device__ __forceinline__ const P &tensor(int i) const { return t[i]; }
  void clear() {
    count = 0;
    first[0] = 0;
  }
  // Appends a tensor of units work units (count < N).
  void add(const P &p, int64_t units) {
    t[count] = p;
    first[count + 1] = first[count] + units;
    count++;
  }
  __device__ __forceinline__ int index_of(int64_t unit) const { return last_at_or_before(first, count, unit); }
  __device__ __forceinline__ const P &locate(int64_t unit, int64_t *local) const {
    const int i = index_of(unit);
    *local = unit - first[i];
    return t[i];
  }
  // unit's tensor, searched forward from tensor *i (which holds a unit at
  // or before it); *i becomes the found one.
  __device__ __forceinline__ const P &locate_from(int64_t unit, int *i, int64_t *local) const {
    int j = *i;
    while (j + 1 < count && first[j + 1] <= unit) j++;
    *i = j;
    *local = unit - first[j];
    return t[j];
  }
};

// The global amaxes of a group (nvfp4's first pass): max |x| (NaN ignored)
// over each item's n elements, reduced with atomicMax on the bits into *out,
// which units_zero_kernel zeroed first. A unit is kAmaxUnitElems elements
// (the last of an item shorter), one CTA of kAmaxThreads each.
struct AmaxItem {
  const void *in;
  int64_t n;
  uint32_t *out;
};
constexpr int64_t kAmaxUnitElems = 65536;
constexpr int kAmaxThreads = 256;

inline int64_t amax_units(int64_t n) { return ceil_div(n, kAmaxUnitElems); }

// max |x| (bits, NaN ignored) over x[lo .. hi), lo a multiple of 8, by a CTA
// of kAmaxThreads: 16-byte loads, U in flight per thread, where x is 16-byte
// aligned. U = 8 where one CTA reads a whole small input (fp8_small_kernel,
// nvfp4's self_amax): its latency is the kernel's (bench/RESULTS.md, "fp8's
// small-tensor kernel with loads in flight").
template <typename T, int U = 4>
__device__ __forceinline__ uint32_t amax_range(const T *x, int64_t lo, int64_t hi) {
  static_assert(U >= 2, "U loads in flight, then at most U - 1");
  float m = 0.0f;  // amax_f: the bits amax_bits_nan_ignored gives
  if ((reinterpret_cast<uintptr_t>(x) & 15) == 0) {
    int64_t e = lo + 8 * threadIdx.x;
    constexpr int64_t step = 8 * kAmaxThreads;
    for (; e + (U - 1) * step + 8 <= hi; e += U * step) {
      float v[U][8];
#pragma unroll
      for (int u = 0; u < U; u++) load8<T, true>(x + e + u * step, v[u]);
#pragma unroll
      for (int u = 0; u < U; u++)
#pragma unroll
        for (int i = 0; i < 8; i++) m = amax_f(m, v[u][i]);
    }
    // At most U - 1 groups left per thread: their loads all in flight
    // before any is reduced (an input shorter than U groups per thread,
    // a decode step's, is only this).
    if (e + 8 <= hi) {
      float v[U - 1][8];
#pragma unroll
      for (int u = 0; u < U - 1; u++) {
        if (e + u * step + 8 <= hi) load8<T, true>(x + e + u * step, v[u]);
        else
#pragma unroll
          for (int i = 0; i < 8; i++) v[u][i] = 0.0f;
      }
#pragma unroll
      for (int u = 0; u < U - 1; u++)
#pragma unroll
        for (int i = 0; i < 8; i++) m = amax_f(m, v[u][i]);
    }
    const int64_t tail = lo + ((hi - lo) / 8) * 8;  // only an item's last unit has one
    if (tail + threadIdx.x < hi) m = amax_f(m, to_f32(x[tail + threadIdx.x]));
  } else {
    for (int64_t e = lo + threadIdx.x; e < hi; e += kAmaxThreads) m = amax_f(m, to_f32(x[e]));
  }
  return __float_as_uint(m);
}

// The CTA's max of v into *out (atomicMax on non-negative float bits). Every
// thread of the CTA calls it. red is one array per kernel, whatever the call
// site: the leading barrier keeps a second call from writing it while warp 0
// still reads the first call's maxima (rht_amax_kernel and
// nv_group_amax_kernel reduce two; without it the RHT's columnwise amax could
// take the rowwise one's partial maxima, which TestRaggedShapesMatchCPU
// caught at [520, 8191]).
__device__ __forceinline__ void cta_max_atomic(uint32_t v, uint32_t *out) {
  __shared__ uint32_t red[32];
  v = warp_max(v);
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < (int)(blockDim.x >> 5) ? red[lane] : 0;
    v = warp_max(v);
    if (lane == 0 && v != 0) atomicMax(out, v);
  }
}

template <typename T, typename G>
__global__ void __launch_bounds__(kAmaxThreads) units_amax_kernel(const __grid_constant__ G g) {
  pdl_wait();
  int64_t local;
  const AmaxItem &it = g.locate(blockIdx.x, &local);
  const int64_t lo = local * kAmaxUnitElems, hi = lo + kAmaxUnitElems < it.n ? lo + kAmaxUnitElems : it.n;
  cta_max_atomic(amax_range<T>((const T *)it.in, lo, hi), it.out);
}

// Zeroes every item's *out (before units_amax_kernel); one thread per item.
template <typename G>
__global__ void units_zero_kernel(const __grid_constant__ G g) {
  pdl_wait();
  for (int i = threadIdx.x; i < g.size(); i += blockDim.x) *g.tensor(i).out = 0;
}

// The global amax (max |x|, NaN ignored) of a 2-D input into *out (device),
// which it zeroes first (fp8_tensor.cu).
int32_t global_amax(const quant_plugin_tensor &in, InType t, float *out, cudaStream_t s, quant_plugin_error *err);

}  // namespace lq

// Entry points of the kernel families (one .cu file each).
extern "C" {
int32_t lq_fp8_amax(const quant_plugin_amax_args *a, quant_plugin_error *err);
int32_t lq_fp8_quantize(const quant_plugin_quantize_args *a, quant_plugin_error *err);
int32_t lq_fp8_dequantize(const quant_plugin_dequantize_args *a, quant_plugin_error *err);
int32_t lq_fp8_derive(const quant_plugin_derive_args *a, quant_plugin_error *err);
int32_t lq_fp8_delayed_update(const quant_plugin_delayed_update_args *a, quant_plugin_error *err);
int32_t lq_fp8_delayed_update_grouped(const quant_plugin_delayed_update_grouped_args *a, quant_plugin_error *err);
int32_t lq_fp8_quantize_grouped(const quant_plugin_quantize_grouped_args *a, quant_plugin_error *err);
int32_t lq_global_amax(const quant_plugin_amax_args *a, quant_plugin_error *err);
int32_t lq_mx_quantize(const quant_plugin_quantize_args *a, quant_plugin_error *err);
int32_t lq_mx_dequantize(const quant_plugin_dequantize_args *a, quant_plugin_error *err);
int32_t lq_mx_swizzle(const quant_plugin_swizzle_args *a, quant_plugin_error *err);
int32_t lq_mx_quantize_grouped(const quant_plugin_quantize_grouped_args *a, quant_plugin_error *err);
int32_t lq_block_quantize(const quant_plugin_quantize_args *a, quant_plugin_error *err);
int32_t lq_block_quantize_grouped(const quant_plugin_quantize_grouped_args *a, quant_plugin_error *err);
int32_t lq_block_dequantize(const quant_plugin_dequantize_args *a, quant_plugin_error *err);
int32_t lq_block_derive(const quant_plugin_derive_args *a, quant_plugin_error *err);
int32_t lq_nvfp4_amax(const quant_plugin_amax_args *a, quant_plugin_error *err);
int32_t lq_nvfp4_quantize(const quant_plugin_quantize_args *a, quant_plugin_error *err);
int32_t lq_nvfp4_dequantize(const quant_plugin_dequantize_args *a, quant_plugin_error *err);
int32_t lq_nvfp4_derive(const quant_plugin_derive_args *a, quant_plugin_error *err);
int32_t lq_nvfp4_swizzle(const quant_plugin_swizzle_args *a, quant_plugin_error *err);
int32_t lq_nvfp4_quantize_grouped(const quant_plugin_quantize_grouped_args *a, quant_plugin_error *err);
int32_t lq_identity_quantize(const quant_plugin_quantize_args *a, quant_plugin_error *err);
int32_t lq_identity_dequantize(const quant_plugin_dequantize_args *a, quant_plugin_error *err);
int32_t lq_identity_derive(const quant_plugin_derive_args *a, quant_plugin_error *err);
int32_t lq_gemm(const quant_plugin_gemm_args *a, quant_plugin_error *err);
int32_t lq_gemm_support(quant_plugin_gemm_support_args *a, quant_plugin_error *err);
}

namespace lq {

// ---- Strips walked down M (fp8's cast_strip_kernel, fp8_block's
// fp8_block_col_strip_kernel) ----
//
// At a token count M that is not a multiple of 32 the transposed rows [K, M]
// start at every offset mod 32. A CTA of 256 threads owns a strip of kSW
// input columns (kSW output rows) over a segment of M (a multiple of kSH
// rows) and walks down it kSH rows at a time: the strip's output is one
// contiguous range per output row, and output row r's offset o = addr(r, s0)
// mod 32 is the same for every chunk (chunks start at multiples of 32), so
// each output row goes out as whole 32-byte sectors of the global frame (two
// aligned 16-byte stores each, from neighbouring lanes); only where a row's
// segment begins and ends does a partial 16-byte piece go out byte by byte.
// (With pieces aligned to 16 bytes only, two of each 128-byte run's five
// sectors were written in halves, one in each of two chunks: the L2 takes
// each half as a sector write of its own; bench/RESULTS.md, "the cost of
// partial-sector writes".)
//
// Per chunk each thread holds 4 rows × 8 columns, casts them, transposes 4×4
// bytes and writes one word per column into T (StripCols::put); a warp then
// writes four output rows, lane j the aligned 16 bytes that hold the chunk's
// bytes [16j − o, 16j − o + 16): a 4-byte and a 16-byte shared load and four
// funnel shifts (StripCols::store). T's row holds the previous chunk's last
// 32 bytes before the chunk's (the prefix: the bytes of pieces j = 0, 1 before
// the chunk), and is shifted by 4·⌊o/4⌋ bytes so that the 16-byte load is
// aligned; its 16-byte granules are XOR-swizzled by the row's group of 8 so
// that a warp's transposed words (8 rows, 4 words each) hit 32 banks. T is
// double-buffered (the prefix comes from the other buffer).
constexpr int kSW = 64, kSH = 128;
constexpr int kStripRowWords = 64;  // 16 granules per T row (the swizzle keeps granule indices < 16)
constexpr int kStripAlign = 32;     // the output's alignment: o = addr mod kStripAlign
constexpr int kStripPre = kStripAlign / 4;  // prefix words per T row
constexpr int kStripDepth = 2;      // chunks whose loads are in flight

// The physical word in T of row cc's logical word lw (lw = data word +
// kStripPre + ⌊o/4⌋: the prefix is logical words ⌊o/4⌋ .. ⌊o/4⌋ + 7; the
// largest, the flush's last piece, lies in granule kSH/16 + 3 = 11).
__device__ __forceinline__ int strip_word(int cc, int lw) { return cc * kStripRowWords + 4 * ((lw >> 2) ^ ((cc >> 3) & 7)) + (lw & 3); }

// Row R, columns c .. c+7 of the input (rows 16-byte aligned) as raw words:
// 16-bit input in r[0..3] (pairs), fp32 in r[0..7]; zeros outside the tensor.
template <typename T>
__device__ __forceinline__ void strip_load(const T *x, int64_t m, int64_t k, int64_t R, int64_t c, uint32_t (&r)[8]) {
  const bool in = R < m;
  const T *src = x + R * k + c;
  if (in && c + 8 <= k) {
    const uint4 u = __ldg(reinterpret_cast<const uint4 *>(src));
    r[0] = u.x; r[1] = u.y; r[2] = u.z; r[3] = u.w;
    if constexpr (sizeof(T) == 4) {
      const uint4 v = __ldg(reinterpret_cast<const uint4 *>(src) + 1);
      r[4] = v.x; r[5] = v.y; r[6] = v.z; r[7] = v.w;
    }
    return;
  }
#pragma unroll
  for (int e = 0; e < 8; e++) {
    uint32_t b = 0;
    if (in && c + e < k) {
      if constexpr (sizeof(T) == 2) b = *reinterpret_cast<const uint16_t *>(src + e);
      else b = __float_as_uint(src[e]);
    }
    if constexpr (sizeof(T) == 2) {
      if (e & 1) r[e >> 1] |= b << 16;
      else r[e >> 1] = b;
    } else {
      r[e] = b;
    }
  }
}

// Rows R .. R+3 (a thread's four rows of a chunk), columns c .. c+7, as
// strip_load: the loads a strip kernel keeps in flight per chunk.
template <typename T>
__device__ __forceinline__ void strip_load4(const T *x, int64_t m, int64_t k, int64_t R, int64_t c, uint32_t (&r)[4][8]) {
#pragma unroll
  for (int i = 0; i < 4; i++) strip_load<T>(x, m, k, R + i, c, r[i]);
}

// ---- Strips over 16-bit rows at any even offset (kRowsShifted: an odd K) ----
//
// There (spec §14: any K) a row starts at any even offset mod 16, so a
// thread's 8 elements straddle two aligned chunks, and shifting them out of
// registers cost the strip kernels more than the tile kernel's checked path
// (H100, 8191², fp8 columnwise: 44 % of copy against 52 %). Instead each
// chunk's kSH rows of the strip are copied into shared memory as the
// kStripStageG aligned 16-byte granules under the row's kSW columns
// (cp.async, every granule once, consecutive lanes on consecutive granules: no
// registers held while in flight), kStripStages chunks ahead; each thread
// then reads its 8 elements of a row from the two granules that hold them
// and shifts them by the row's offset. A warp's rows 4g + i (one i) lie 8 apart
// (StripCols: g = 8(warp/2) + 2q + warp%2), 8·K elements, a multiple of 16
// bytes, so the offset is the warp's and the shift one straight run of
// funnel shifts per case (shift_uniform). Granules past the tensor's end
// are zero-filled, so nothing outside it is read.
//
// The kernel's loop per chunk n: unstage chunk n (StripStager::unstage4); ...;
// cp_async_wait_n<kStripStages − 2> (chunk n + 1 has landed for this
// thread: the later ones may be in flight); the barrier that
// closes T; stage chunk n + kStripStages into the buffer of chunk n (every
// thread has read it: the barrier), commit; store from T. (H200, 8191²:
// three stages, two chunks in flight, ran the same in every fp8 and
// fp8_block direction but 128x128 columnwise, 0.109 ms against 0.102 with
// two, which leave more CTAs per SM.)
constexpr int kStripStageG = kSW / 8 + 1;                               // granules per staged row
constexpr int kStripStages = 2;                                         // staged chunks: the one read and one in flight
constexpr int kStripStageChunk = kSH * kStripStageG;                    // granules per staged chunk
constexpr int kStripStageBytes = kStripStages * kStripStageChunk * 16;  // dynamic shared memory per 256 threads

// cp.async of the first bytes (0..16) of the 16 at gmem, the rest zeros.
__device__ __forceinline__ void cp_async16_zfill(void *smem, const void *gmem, int bytes) {
  uint32_t a = (uint32_t)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(a), "l"(gmem), "r"(bytes) : "memory");
}

// cp.async of 16 bytes at gmem.
__device__ __forceinline__ void cp_async16_shared(uint32_t smem, const void *gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem), "l"(gmem) : "memory");
}

// Granules of a staged chunk per thread (the last pass: threads 0 .. 127).
constexpr int kStripStagePasses = (kStripStageChunk + 255) / 256;

// A thread's share of the staged strip, worked out once per CTA rather than
// every chunk (the strip kernels are issue-bound: H200, 8191², fp8_block
// 1x128 columnwise, copying and unstaging took 10 of the kernel's 23 warp
// instructions per 32 elements; bench/RESULTS.md, 2026-12-02 19:48 section,
// call 3). Chunk n's rows start kSH·n rows below the segment's, kSH·k
// elements = 256·k bytes, a multiple of 16, so
//   - granule u's source is the same byte offset rel[u] from the chunk's
//     first staged granule in every chunk (base + 256·k·n), and
//   - row rl + i's offset mod 16 (off(i), the shift) is the same in every
//     chunk.
// Interior chunks (every row of the chunk and the next one inside the
// tensor, and K ≥ 72, so that a row's 9 granules end before the tensor does)
// copy whole granules with no checks; the others, and a K of 2^24 elements or
// more (rel would not fit 32 bits), take the checked copy.
struct StripStager {
  uintptr_t xb, base;  // the input; the segment's first staged granule (row s0)
  uint32_t rel[kStripStagePasses];
  uint32_t offs;  // off(i) in bits 4i .. 4i + 3
  bool fast;      // rel is valid (K < 2^24)

  // tid: the thread's index among the strip's 256; rl: its first row of a
  // chunk (StripCols: 4g).
  __device__ __forceinline__ StripStager(const void *x, int64_t k, int64_t s0, int64_t c0, int rl, unsigned tid) {
    xb = reinterpret_cast<uintptr_t>(x);
    const uintptr_t first = xb + (uintptr_t)(s0 * k + c0) * 2;
    base = first & ~(uintptr_t)15;
    fast = k < ((int64_t)1 << 24);
#pragma unroll
    for (int u = 0; u < kStripStagePasses; u++) {
      const int idx = (int)tid + 256 * u, rr = idx / kStripStageG, j = idx - rr * kStripStageG;
      rel[u] = (uint32_t)((((first + (uintptr_t)rr * (uintptr_t)k * 2) & ~(uintptr_t)15) - base) + 16 * (uintptr_t)j);
    }
    offs = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) offs |= (uint32_t)((first + (uintptr_t)(rl + i) * (uintptr_t)k * 2) & 15) << (4 * i);
  }

  // Copies chunk rows r0 .. r0 + kSH − 1 (r0 = s0 + kSH·n), columns c0 .. c0 +
  // kSW − 1 (and the granule around them) of the [m, k] 16-bit input into st
  // (one staged chunk). Rows past m copy nothing (unstage gives zeros there).
  // Does not commit.
  __device__ __forceinline__ void stage(uint4 *st, int64_t m, int64_t k, int64_t s0, int64_t r0, int64_t c0, unsigned tid) const {
    const uint32_t sb = (uint32_t)__cvta_generic_to_shared(st);
    if (fast && r0 + kSH < m && k >= 72) {
      const uintptr_t b = base + (uintptr_t)(r0 - s0) * (uintptr_t)k * 2;
#pragma unroll
      for (int u = 0; u < kStripStagePasses; u++) {
        const int idx = (int)tid + 256 * u;
        if (idx < kStripStageChunk) cp_async16_shared(sb + 16 * idx, reinterpret_cast<const void *>(b + rel[u]));
      }
      return;
    }
    const uintptr_t end = xb + (uintptr_t)(m * k) * 2;
#pragma unroll
    for (int u = 0; u < kStripStagePasses; u++) {
      const int idx = (int)tid + 256 * u;
      if (idx < kStripStageChunk) {
        const int rr = idx / kStripStageG, j = idx - rr * kStripStageG;
        const int64_t R = r0 + rr;
        const uintptr_t a = ((xb + (uintptr_t)(R * k + c0) * 2) & ~(uintptr_t)15) + 16 * (uintptr_t)j;
        const int bytes = R < m && a < end ? (end - a >= 16 ? 16 : (int)(end - a)) : 0;
        cp_async16_zfill(st + idx, bytes > 0 ? reinterpret_cast<const void *>(a) : reinterpret_cast<const void *>(xb), bytes);
      }
    }
  }

  // strip_load4 from a staged chunk (stage at r0, landed and visible): rows
  // r0 + rl + i, columns c0 + 8cg .. +7 as pairs in r[i][0..3], zeros outside
  // the tensor. Every lane of the warp calls it (a warp's rows rl + i lie 8
  // apart, 16·k bytes: off(i) is the warp's, so the shift's switch is too).
  __device__ __forceinline__ void unstage4(const uint4 *st, int64_t m, int64_t k, int64_t r0, int rl, int64_t c0, int cg, uint32_t (&r)[4][8]) const {
    const uint4 *row = st + rl * kStripStageG + cg;
    const bool whole = r0 + kSH <= m && c0 + kSW <= k;  // the whole chunk inside the tensor
    const int64_t left = k - (c0 + 8 * cg);             // valid columns of the thread's 8
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const uint4 a = row[i * kStripStageG], b = row[i * kStripStageG + 1];
      const uint32_t w8[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
      uint32_t w[4];
      shift_uniform<4>(w8, (int)((offs >> (4 * i)) & 15), w);
      if (whole) {
#pragma unroll
        for (int j = 0; j < 4; j++) r[i][j] = w[j];
      } else {
        const int nv = r0 + rl + i < m ? (left >= 8 ? 8 : left > 0 ? (int)left : 0) : 0;
#pragma unroll
        for (int j = 0; j < 4; j++) r[i][j] = 2 * j + 1 < nv ? w[j] : 2 * j < nv ? (w[j] & 0xFFFFu) : 0u;
      }
    }
  }
};

// Bytes [lo, hi) (0 ≤ lo ≤ hi ≤ 16) of the 16 bytes w at dst, one by one (a
// row's first and last chunk of the segment).
__device__ __forceinline__ void strip_put_partial(uint8_t *dst, const uint32_t (&w)[4], int lo, int hi) {
#pragma unroll
  for (int b = 0; b < 16; b++)
    if (b >= lo && b < hi) dst[b] = (uint8_t)(w[b >> 2] >> (8 * (b & 3)));
}

// One thread's share of a strip's column side. Rows 4g .. 4g+3 of each
// chunk, columns 8cg .. 8cg+7: a warp's four row groups are 2 apart, so that
// its rows 4g + i are 8 apart (one offset mod 8 for the whole warp's rowwise
// codes where K is not a multiple of 8). Store phase: lane j of row slot rho
// writes chunk j of output rows cc = 32s + 4·warp + rho, s = 0, 1.
struct StripCols {
  int g, cg;
  uintptr_t colbase;
  int64_t M, c0, s0;
  int wa[8];  // the T words of the thread's 8 columns (the same every chunk)
  int ra32[2], ra128[2], sh[2], ot[2];
  uint8_t *gb[2];
  bool rv[2];

  __device__ __forceinline__ int o_of(int cc) const { return (int)((colbase + (uintptr_t)((c0 + cc) * M + s0)) & (kStripAlign - 1)); }

  // tid: the thread's index among the strip's 256 threads.
  __device__ __forceinline__ StripCols(uint8_t *col, int64_t m, int64_t k, int64_t c0_, int64_t s0_, unsigned tid) {
    const int warp = tid >> 5, lane = tid & 31;
    const int q = lane >> 3;
    cg = lane & 7;
    g = 8 * (warp >> 1) + 2 * q + (warp & 1);
    colbase = reinterpret_cast<uintptr_t>(col);
    M = m;
    c0 = c0_;
    s0 = s0_;
#pragma unroll
    for (int e = 0; e < 8; e++) {
      const int cc = 8 * cg + e;
      wa[e] = strip_word(cc, g + kStripPre + (o_of(cc) >> 2));
    }
    const int rho = lane >> 3, j = lane & 7;
#pragma unroll
    for (int s = 0; s < 2; s++) {
      const int cc = 32 * s + 4 * warp + rho, o = o_of(cc);
      ra128[s] = strip_word(cc, 4 * j + kStripPre);
      ra32[s] = strip_word(cc, 4 * j + kStripPre - 1);
      sh[s] = 32 - 8 * (o & 3);
      ot[s] = 16 * j - o;  // the chunk's first byte, relative to the segment's first row
      gb[s] = col + (c0 + cc) * M + s0 + ot[s];
      rv[s] = c0 + cc < k;
    }
  }

  // The chunk's codes of the thread's rows 4g+i, columns 8cg+4h .. +3 in
  // rw[i][h] (byte e: column 8cg+4h+e) into T t, the prefix from prev.
  __device__ __forceinline__ void put(uint32_t *t, const uint32_t *prev, const uint32_t (&rw)[4][2]) const {
#pragma unroll
    for (int h = 0; h < 2; h++) {
      uint32_t cw[4];
      transpose4x4_bytes(rw[0][h], rw[1][h], rw[2][h], rw[3][h], cw);
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int a = wa[4 * h + e];
        if (g >= kSH / 4 - kStripPre) {
          // The last chunk's last 32 bytes are this chunk's prefix
          // (logical word lw − kSH/4, from the other buffer).
          const int cc = 8 * cg + 4 * h + e;
          t[strip_word(cc, g + kStripPre + (o_of(cc) >> 2) - kSH / 4)] = prev[a];
        }
        t[a] = cw[e];
      }
    }
  }

  // Chunk n's output rows from T t (after the barrier that closes put); L:
  // rows of the segment.
  __device__ __forceinline__ void store(const uint32_t *t, int n, int64_t L) const {
    const int64_t nb = (int64_t)n * kSH;
#pragma unroll
    for (int s = 0; s < 2; s++) {
      if (!rv[s]) continue;
      const uint4 u = *reinterpret_cast<const uint4 *>(&t[ra128[s]]);
      const uint32_t pw = t[ra32[s]];
      uint32_t w[4];
      w[0] = __funnelshift_rc(pw, u.x, sh[s]);
      w[1] = __funnelshift_rc(u.x, u.y, sh[s]);
      w[2] = __funnelshift_rc(u.y, u.z, sh[s]);
      w[3] = __funnelshift_rc(u.z, u.w, sh[s]);
      const int64_t tt = nb + ot[s];
      if (tt >= 0 && tt + 16 <= L) *reinterpret_cast<uint4 *>(gb[s] + nb) = make_uint4(w[0], w[1], w[2], w[3]);
      else strip_put_partial(gb[s] + nb, w, tt >= 0 ? 0 : (int)-tt, tt + 16 <= L ? 16 : (int)(L - tt));
    }
  }

  // The bytes after the last chunk's last whole pieces: pieces j = 8 and 9
  // of the last chunk (o of those bytes in T t, the last chunk's, the rest
  // past the segment), by lanes j = 0 and 1.
  __device__ __forceinline__ void flush(const uint32_t *t, int nchunks, int64_t L, unsigned tid) const {
    const int warp = tid >> 5, lane = tid & 31, rho = lane >> 3, j = lane & 7;
    static_assert(kStripAlign == 32, "two pieces per row");
    if (j >= 2) return;
    const int64_t nb = (int64_t)(nchunks - 1) * kSH + kSH;
#pragma unroll
    for (int s = 0; s < 2; s++) {
      const int cc = 32 * s + 4 * warp + rho;
      const int64_t tt = nb + ot[s];
      if (!rv[s] || tt >= L) continue;
      const int lw = 4 * (kSH / 16 + j) + kStripPre;
      const uint4 u = *reinterpret_cast<const uint4 *>(&t[strip_word(cc, lw)]);
      const uint32_t pw = t[strip_word(cc, lw - 1)];
      uint32_t w[4];
      w[0] = __funnelshift_rc(pw, u.x, sh[s]);
      w[1] = __funnelshift_rc(u.x, u.y, sh[s]);
      w[2] = __funnelshift_rc(u.y, u.z, sh[s]);
      w[3] = __funnelshift_rc(u.z, u.w, sh[s]);
      strip_put_partial(gb[s] + nb, w, tt >= 0 ? 0 : (int)-tt, (int)(L - tt < 16 ? L - tt : 16));
    }
  }
};

// One wave of strip CTAs (per_sm resident per SM: the work per CTA is
// uniform, so a second partial wave would cost a whole CTA time): as many
// segments per strip as the slots allow, each a multiple of kSH rows; strips
// of width columns (a multiple of kSW).
inline void strip_grid(int64_t m, int64_t k, int per_sm, int64_t *strips, int64_t *segs, int64_t *seg_rows, int width = kSW) {
  *strips = ceil_div(k, (int64_t)width);
  const int64_t slots = (int64_t)per_sm * (grid_cap() / 8);
  int64_t sg = slots / *strips;
  if (sg < 1) sg = 1;
  *seg_rows = ceil_div(ceil_div(m, sg), (int64_t)kSH) * kSH;
  *segs = ceil_div(m, *seg_rows);
}

// ---- Rows of words, and rows in flat order (fp8_block's tile and rows
// kernels, mx.cu's MXFP8 rows kernel) ----

// Element e of a row of words (fp8_block: words_of<T>() of them; the flat rows
// kernels: chunk_words<T>()), widened to float32 (exact: to_f32).
template <typename T, int N>
__device__ __forceinline__ float elem(const uint32_t (&w)[N], int e) {
  if constexpr (sizeof(T) == 4) {
    return __uint_as_float(w[e]);
  } else {
    const uint32_t x = w[e >> 1];
    if constexpr (InTraits<T>::kind == InType::BF16) return __uint_as_float((e & 1) ? (x & 0xFFFF0000u) : (x << 16));
    else return __half2float(__ushort_as_half((unsigned short)((e & 1) ? (x >> 16) : (x & 0xFFFFu))));
  }
}

// max |x| (NaN ignored) of a word's elements folded into m: packed 16-bit
// magnitudes (hmax2_mag) or float32 bits (amax_f); mag_bits_of turns the
// result into float32 bits. m starts at 0.
template <typename T>
__device__ __forceinline__ uint32_t mag_acc(uint32_t m, uint32_t w) {
  if constexpr (sizeof(T) == 4) return __float_as_uint(amax_f(__uint_as_float(m), __uint_as_float(w)));
  else return hmax2_mag<T>(m, w);
}
template <typename T>
__device__ __forceinline__ uint32_t mag_bits_of(uint32_t m) {
  if constexpr (sizeof(T) == 4) return m;
  else return hmax2_bits<T>(m);
}

// 32-bit words of a chunk of 16 elements.
template <typename T>
__host__ __device__ constexpr int chunk_words() { return 4 * (int)sizeof(T); }

// The flat rows kernels (fp8_block_rows_kernel, mx8_rows_kernel): rowwise
// codes [M, K] at pitch K hold the code of input element f at byte f, so
// with the input and the codes at the same offset mod 16 elements an aligned
// chunk of 16 input elements maps onto an aligned 16-byte chunk of codes
// whatever K is (spec §14); a row's blocks start o = (its first element)
// mod 16 elements into a chunk, a compile-time constant of the chunk's
// arithmetic through with_offset.
// max |x| (NaN ignored, float32 bits) of elements 0 .. O−1 (lo) and O .. 15 (hi).
template <typename T, int O>
__device__ __forceinline__ void chunk_max(const uint32_t (&w)[chunk_words<T>()], uint32_t *lo, uint32_t *hi) {
  uint32_t l = 0, h = 0;
  if constexpr (sizeof(T) == 2) {
#pragma unroll
    for (int j = 0; j < 8; j++) {
      if (2 * j + 2 <= O) l = hmax2_mag<T>(l, w[j]);
      else if (2 * j >= O) h = hmax2_mag<T>(h, w[j]);
      else l = hmax2_mag<T>(l, w[j] & 0xFFFFu), h = hmax2_mag<T>(h, w[j] & 0xFFFF0000u);
    }
  } else {
#pragma unroll
    for (int e = 0; e < 16; e++) {
      if (e < O) l = mag_acc<T>(l, w[e]);
      else h = mag_acc<T>(h, w[e]);
    }
  }
  *lo = mag_bits_of<T>(l);
  *hi = mag_bits_of<T>(h);
}

// The chunk's FP8 codes: elements 0 .. O−1 scaled by sp, the rest by s.
template <typename T, int O, Fp8 F = Fp8::E4M3>
__device__ __forceinline__ uint4 chunk_codes(const uint32_t (&w)[chunk_words<T>()], float sp, float s) {
  uint32_t c[8];
#pragma unroll
  for (int j = 0; j < 8; j++)
    c[j] = fp8x2<F>(__fmul_rn(elem<T>(w, 2 * j), 2 * j < O ? sp : s), __fmul_rn(elem<T>(w, 2 * j + 1), 2 * j + 1 < O ? sp : s));
  return make_uint4(c[0] | (c[1] << 16), c[2] | (c[3] << 16), c[4] | (c[5] << 16), c[6] | (c[7] << 16));
}

// f(std::integral_constant<int, o>) for o in 0 .. 15 (warp-uniform).
template <typename F>
__device__ __forceinline__ void with_offset(int o, F &&f) {
#define LQ_OFFSET_CASE(n) \
  case n: f(std::integral_constant<int, n>{}); break;
  switch (o) {
    LQ_OFFSET_CASE(0) LQ_OFFSET_CASE(1) LQ_OFFSET_CASE(2) LQ_OFFSET_CASE(3) LQ_OFFSET_CASE(4) LQ_OFFSET_CASE(5) LQ_OFFSET_CASE(6)
    LQ_OFFSET_CASE(7) LQ_OFFSET_CASE(8) LQ_OFFSET_CASE(9) LQ_OFFSET_CASE(10) LQ_OFFSET_CASE(11) LQ_OFFSET_CASE(12)
    LQ_OFFSET_CASE(13) LQ_OFFSET_CASE(14) LQ_OFFSET_CASE(15)
  }
#undef LQ_OFFSET_CASE
}

// Bytes a .. b−1 of the 16 at dst (16-byte aligned) as aligned 8/4/2/1-byte stores.
__device__ __forceinline__ void store_bytes16(uint8_t *dst, uint4 v, int a, int b) {
  const uint64_t lo = (uint64_t)v.x | ((uint64_t)v.y << 32), hi = (uint64_t)v.z | ((uint64_t)v.w << 32);
#pragma unroll 1
  for (int x = a; x < b;) {
    const uint64_t u = (x < 8 ? lo : hi) >> (8 * (x & 7));
    if ((x & 7) == 0 && x + 8 <= b) *reinterpret_cast<uint64_t *>(dst + x) = u, x += 8;
    else if ((x & 3) == 0 && x + 4 <= b) *reinterpret_cast<uint32_t *>(dst + x) = (uint32_t)u, x += 4;
    else if ((x & 1) == 0 && x + 2 <= b) *reinterpret_cast<uint16_t *>(dst + x) = (uint16_t)u, x += 2;
    else dst[x] = (uint8_t)u, x += 1;
  }
}

// The host side of a flat rows kernel's launch, for its parameters P (fields
// in_al, out_al, m, k, phase, nseg, seg_steps). flat_rows_place: the walk over
// [m, k] input in (elements of sz bytes) and codes out, rounded down to a
// 16-element boundary (phase elements before the tensor's first); false
// where the two do not lie at one offset mod 16 elements, or where a row has
// kFlatRowMax elements or more (FlatRow's positions in a row are 32-bit).
constexpr int64_t kFlatRowMax = (int64_t)1 << 30;
template <typename P>
bool flat_rows_place(P &p, const void *in, uint8_t *out, size_t sz, int64_t m, int64_t k) {
  const uintptr_t ia = reinterpret_cast<uintptr_t>(in), oa = reinterpret_cast<uintptr_t>(out);
  if (ia % sz != 0 || (ia / sz) % 16 != oa % 16 || k >= kFlatRowMax) return false;
  p.phase = (int)(oa % 16);
  p.in_al = reinterpret_cast<const void *>(ia - p.phase * sz);
  p.out_al = out - p.phase;
  p.m = m;
  p.k = k;
  return true;
}

// The parameters an FP4 rows kernel's walk takes (mx4_rows_kernel,
// nv4_rows_kernel, nv4_band16_kernel; flat_item, flat_rows_plan), whose
// packed codes do not follow the input's flat frame.
struct Fp4RowPlace {
  const void *in_al;  // input rounded down to a 16-element boundary: phase elements before the tensor
  uint8_t *out;       // rowwise codes, rows of pitch bytes
  int64_t m, k, pitch;
  int phase;
  int nseg, seg_steps;  // segments per row, steps per segment
};

// The walk over [m, k] 16-bit input in, codes out at pitch bytes a row.
inline void fp4_rows_place(Fp4RowPlace &p, const void *in, int64_t m, int64_t k, uint8_t *out, int64_t pitch) {
  const uintptr_t ia = reinterpret_cast<uintptr_t>(in);
  p.phase = (int)((ia / 2) % 16);
  p.in_al = reinterpret_cast<const void *>(ia - 2 * (uintptr_t)p.phase);
  p.m = m;
  p.k = k;
  p.out = out;
  p.pitch = pitch;
}

// Rows too few for every resident warp (resident CTAs of threads each) are
// cut into segments of steps (steps per row): sets p.nseg and p.seg_steps,
// returns the CTAs to launch.
template <typename P>
int64_t flat_rows_plan(P &p, int resident, int threads, int64_t steps) {
  const int64_t warps = (int64_t)resident * (threads / 32);
  int64_t nseg = p.m >= warps ? 1 : ceil_div(warps, p.m);
  if (nseg > steps) nseg = steps;
  p.seg_steps = (int)ceil_div(steps, nseg);
  p.nseg = (int)ceil_div(steps, (int64_t)p.seg_steps);
  const int64_t ctas = ceil_div(p.m * p.nseg, (int64_t)(threads / 32));
  return ctas < resident ? ctas : resident;
}

// How many CTAs of threads each of kernel, with smem bytes of dynamic shared
// memory (the kernel's limit raised to that first), fit on the current
// device (0: none, or a query failed; its error is cleared).
template <typename K>
int resident_ctas(K kernel, int threads, size_t smem = 0) {
  int per_sm = 0, dev = 0, sms = 0;
  if ((smem > 0 && cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess) ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem) != cudaSuccess || cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || per_sm < 1) {
    cudaGetLastError();
    return 0;
  }
  return per_sm * sms;
}

// Work item `item` of a flat rows kernel of 8 warps per CTA (p.m rows, each
// cut into p.nseg segments of p.seg_steps of its steps): its row, returned,
// and its steps t0 .. t1−1. Rows go out so that 8 consecutive rows of the
// walk (a CTA's warps, with one segment per row) are rows 128G + c + 16w,
// w = 0..7: rows 16 apart start at one offset o mod 16 (o follows r·k mod
// 16), so a CTA runs one of with_offset's 16 copies of the step and an SM
// as many as it holds CTAs, not all 16 (H200, 8191²: a fifth of the flat
// rows kernels' cycles waited on instruction fetch). The rows after the
// last whole 128 keep their order. One segment per row (rows enough for every
// warp, the large tensors) takes no 64-bit division.
template <typename P>
__device__ __forceinline__ int64_t flat_item(const P &p, int64_t item, int steps, int *t0, int *t1) {
  int64_t v = item;
  if (p.nseg == 1) {
    *t0 = 0;
    *t1 = steps;
  } else {
    v = item / p.nseg;
    *t0 = (int)(item - v * p.nseg) * p.seg_steps;
    *t1 = min(*t0 + p.seg_steps, steps);
  }
  if (v >= (p.m & ~(int64_t)127)) return v;
  const int rem = (int)(v & 127);
  return (v & ~(int64_t)127) + 16 * (rem & 7) + (rem >> 3);
}

// One warp's row (or segment of one: steps t0 .. t1−1 of 32 chunks) in a flat
// rows kernel: row r of [m, k] input at in_al + phase elements, its codes at
// out_al + phase bytes. Lane l holds chunk 32t + l of step t. Positions in
// the row are 32-bit (k < kFlatRowMax, flat_rows_place), and the tests on
// them combine with & and |, not && and || (short-circuit branches and 64-bit
// compares made the load's test alone a tenth of mx8_rows_kernel's
// instructions: bench/RESULTS.md, 2026-11-29 16:45 section).
template <typename T>
struct FlatRow {
  static constexpr int CW = chunk_words<T>();
  const T *in;
  uint8_t *out;
  int lim;  // chunk c holds the row's elements at o−16c .. lim−16c−1 of it
  int nc;   // chunks the row touches
  int o, t0, t1, lane;

  __device__ __forceinline__ FlatRow(const void *in_al, uint8_t *out_al, int phase, int64_t r, int64_t k, int t0_, int t1_) {
    const int64_t f0 = phase + r * k;  // the row's first element, counted from in_al
    o = (int)(f0 & 15);
    lim = (int)k + o;
    nc = (lim + 15) >> 4;
    in = (const T *)in_al + (f0 & ~(int64_t)15);
    out = out_al + (f0 & ~(int64_t)15);
    t0 = t0_;
    t1 = t1_;
    lane = threadIdx.x & 31;
  }

  // Step t's chunks (the segment's own, and lane 0 of step t1: its first o
  // elements end the segment's last block), zero where not loaded.
  __device__ __forceinline__ void load(int t, uint32_t (&w)[CW]) const {
    const int c = 32 * t + lane;
    const bool ok = (c < nc) & ((t < t1) | ((t == t1) & (lane == 0)));
#pragma unroll
    for (int q = 0; q < CW / 4; q++) {
      uint4 u = make_uint4(0, 0, 0, 0);
      if (ok) u = __ldg(reinterpret_cast<const uint4 *>(in + 16 * c) + q);
      w[4 * q] = u.x, w[4 * q + 1] = u.y, w[4 * q + 2] = u.z, w[4 * q + 3] = u.w;
    }
  }

  // Zeroes step t's elements past the row's end (the next row's): the zero
  // padding of spec §14, which enters no maximum.
  __device__ __forceinline__ void clip(int t, uint32_t (&w)[CW]) const {
    if (32 * t + 32 <= (lim >> 4)) return;  // every chunk whole (the warp's condition)
    const int b = lim - 16 * (32 * t + lane);
    const int n = b >= 16 ? 16 : b > 0 ? b : 0;
    if constexpr (sizeof(T) == 2) {
#pragma unroll
      for (int j = 0; j < 8; j++) w[j] = n >= 2 * j + 2 ? w[j] : n == 2 * j + 1 ? w[j] & 0xFFFFu : 0u;
    } else {
#pragma unroll
      for (int e = 0; e < 16; e++) w[e] = e < n ? w[e] : 0u;
    }
  }

  // The codes v of the lane's chunk of step t: the bytes of this row and
  // segment (a chunk's bytes of another row or segment are left to it).
  __device__ __forceinline__ void store(int t, uint4 v) const {
    const int c = 32 * t + lane, left = lim - 16 * c;
    const int sa = (t == t0) & (lane == 0) ? o : 0, sb = left >= 16 ? 16 : left > 0 ? left : 0;
    if (sa == 0 && sb == 16) *reinterpret_cast<uint4 *>(out + 16 * c) = v;
    else if (sa < sb) store_bytes16(out + 16 * c, v, sa, sb);
  }

  // Whether the lane writes the tail: step t1's lane 0, whose first o
  // elements (clipped at the row's end) end the segment's last block.
  __device__ __forceinline__ bool has_tail() const { return (lane == 0) & (o != 0) & (32 * t1 < nc); }
  __device__ __forceinline__ void store_tail(uint4 v) const {
    const int left = lim - 16 * 32 * t1;
    const int sb = left >= o ? o : left > 0 ? left : 0;
    if (sb > 0) store_bytes16(out + 16 * 32 * (int64_t)t1, v, 0, sb);
  }
};

// The chunks a flat rows kernel's warp holds as it walks its row: step t's
// (cur, clipped at the row's end) with their maxima lo (elements 0 .. o−1 of
// the lane's chunk) and hi (o .. 15), step t + 1's (nxt) and, loaded two steps
// ahead, step t + 2's (nn) with step t + 1's maxima (lon, hin), taken over by
// the next step instead of reduced again.
template <typename T>
struct FlatWalk {
  static constexpr int CW = chunk_words<T>();
  uint32_t cur[CW], nxt[CW], nn[CW];
  uint32_t lo, hi, lon, hin;

  // Step t0: its chunks and maxima, and step t0 + 1's chunks.
  __device__ __forceinline__ void start(const FlatRow<T> &fr) {
    fr.load(fr.t0, cur);
    fr.load(fr.t0 + 1, nxt);
    fr.clip(fr.t0, cur);
    with_offset(fr.o, [&](auto oc) { chunk_max<T, decltype(oc)::value>(cur, &lo, &hi); });
  }
  // At step t: step t + 2's chunks, step t + 1's clipped and their maxima.
  __device__ __forceinline__ void ahead(const FlatRow<T> &fr, int t) {
    fr.load(t + 2, nn);
    fr.clip(t + 1, nxt);
    with_offset(fr.o, [&](auto oc) { chunk_max<T, decltype(oc)::value>(nxt, &lon, &hin); });
  }
  // On to step t + 1.
  __device__ __forceinline__ void next() {
#pragma unroll
    for (int q = 0; q < CW; q++) cur[q] = nxt[q], nxt[q] = nn[q];
    lo = lon, hi = hin;
  }
};

// ---- Packed FP4 codes from a flat rows kernel (mx4_rows_kernel, nv4_rows_kernel, nv4_band16_kernel) ----
//
// FP4 codes (half a byte per element, rows of ⌈K/2⌉ bytes) do not follow the
// input's flat frame. From 16-bit rows at any even offset (an odd K, spec
// §14) each lane first shifts its chunk by the row's offset o
// (fp4_row_cols): it then holds row columns 16L .. 16L + 15 (L = 32t + lane,
// step t), whose 8 code bytes are bytes 8L .. 8L + 7 of the row
// (Fp4RowStore).

// Row columns 16L .. 16L + 15 of the walk's step into x: elements o .. 15 of
// the lane's chunk, then 0 .. o − 1 of the next lane's (lane 31: lane 0's
// chunk of the next step, which the loads two steps ahead hold). Every lane
// of the warp calls it.
template <typename T>
__device__ __forceinline__ void fp4_row_cols(const FlatWalk<T> &w, int o, uint32_t (&x)[8]) {
  static_assert(sizeof(T) == 2, "16-bit input");
  const int lane = threadIdx.x & 31;
  with_offset(o, [&](auto oc) {
    constexpr int O = decltype(oc)::value;
    uint32_t nx[8];
#pragma unroll
    for (int i = 0; i < (O + 1) / 2; i++) nx[i] = __shfl_sync(0xFFFFFFFFu, lane == 0 ? w.nxt[i] : w.cur[i], (lane + 1) & 31);
#pragma unroll
    for (int j = 0; j < 8; j++) {
      const int q = j + O / 2;
      const uint32_t a = q < 8 ? w.cur[q] : nx[q - 8];
      if constexpr (O % 2 == 0) {
        x[j] = a;
      } else {
        const uint32_t b = q + 1 < 8 ? w.cur[q + 1] : nx[q + 1 - 8];
        x[j] = __byte_perm(a, b, 0x5432);
      }
    }
  });
}

// The stores of a warp's row (or segment) of packed FP4 codes, rows of pitch
// bytes at out: lane L's 8 code bytes (code i in bits 4i, the padding
// nibbles zeroed by the caller) are bytes 8L .. 8L + 7 of the row. Rows of
// 8n bytes from an 8-byte aligned buffer (words: K = 16n − 1 here) store
// them as they are, one aligned 8-byte store a lane; other rows, which start
// sh bytes past an aligned word, store the aligned words under them, each
// from two lanes' codes (a shuffle), and byte stores only where a word is
// shared with the row before or after, or with another segment of the row.
// The first case has a path of its own: with the two in one (the second's
// tests on every store) mx4_rows_kernel ran 0.053 ms at 8191² against 0.050;
// the code address advances by a step's bytes (with the scale's, 0.050 →
// 0.047-0.048; H200, bench/RESULTS.md 2026-11-29 19:38 section).
struct Fp4RowStore {
  uint8_t *op;     // word L's address: the row's aligned word below it, + 8L
  uint64_t carry;  // lane 31's codes of the step before
  int sh, pitch, t0, t1, lane;
  bool words;

  __device__ __forceinline__ Fp4RowStore(uint8_t *out, int64_t r, int pitch_, bool words_, int t0_, int t1_) {
    uint8_t *const orow = out + r * (int64_t)pitch_;
    sh = (int)(reinterpret_cast<uintptr_t>(orow) & 7);
    lane = threadIdx.x & 31;
    op = orow - sh + 8 * (32 * t0_ + lane);
    carry = 0;
    pitch = pitch_;
    t0 = t0_;
    t1 = t1_;
    words = words_;
  }

  // Lane L = 32t + lane's codes cw at step t (the steps in order, every lane
  // of the warp), then on to step t + 1.
  __device__ __forceinline__ void store(uint64_t cw, int t) {
    const int L = 32 * t + lane;
    if (words) {
      if (8 * L < pitch) *reinterpret_cast<uint64_t *>(op) = cw;
    } else {
      // Word L: bytes 8 − sh .. 7 of lane L − 1's codes (lane 0: lane 31's
      // of the step before), then bytes 0 .. 7 − sh of lane L's; its bytes
      // sh .. sh + pitch − 8L − 1 are the row's, and at the segment's first
      // step lane 0's bytes below sh are not this segment's. (The byte
      // stores as loops: no call and no predicated stores in the step,
      // which the rows' ends and the segments' rarely take.)
      uint64_t wv = cw;
      if (sh != 0) {
        const uint64_t up = __shfl_up_sync(0xFFFFFFFFu, cw, 1), pc = lane == 0 ? carry : up;
        carry = __shfl_sync(0xFFFFFFFFu, cw, 31);
        wv = (pc >> (64 - 8 * sh)) | (cw << (8 * sh));
      }
      const int lo = (lane == 0) & (t == t0) ? sh : 0, hi = min(8, sh + pitch - 8 * L);
      if ((lo == 0) & (hi == 8)) {
        *reinterpret_cast<uint64_t *>(op) = wv;
      } else {
#pragma unroll 1
        for (int e = lo; e < hi; e++) op[e] = (uint8_t)(wv >> (8 * e));
      }
      // The segment's last lane: its bytes 8 − sh .. 7 open word L + 1.
      if ((sh != 0) & (lane == 31) & (t == t1 - 1)) {
        const int h1 = min(sh, sh + pitch - 8 * (L + 1));
#pragma unroll 1
        for (int e = 0; e < h1; e++) op[8 + e] = (uint8_t)(cw >> (64 - 8 * sh + 8 * e));
      }
    }
    op += 256;
  }
};

// Row r's steps t0 .. t1 − 1 of an FP4 rows kernel's walk over p (the
// row's segment, every lane of the warp): step(t, x, st) with the lane's row
// columns 16L .. 16L + 15 of step t in x (fp4_row_cols) and the row's code
// stores st (Fp4RowStore, words: rows of 8n bytes from an aligned buffer).
template <typename T, typename P, typename F>
__device__ __forceinline__ void fp4_row_walk(const P &p, int64_t r, int t0, int t1, bool words, F &&step) {
  const FlatRow<T> fr(p.in_al, p.out, p.phase, r, p.k, t0, t1);  // (its out unused: the codes are not flat)
  Fp4RowStore st(p.out, r, (int)p.pitch, words, t0, t1);
  FlatWalk<T> w;
  w.start(fr);
  for (int t = t0; t < t1; t++) {
    w.ahead(fr, t);
    uint32_t x[8];
    fp4_row_cols(w, fr.o, x);
    step(t, x, st);
    w.next();
  }
}

}  // namespace lq
