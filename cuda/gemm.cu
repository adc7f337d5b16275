// GEMM on the GPU (quant.h, quant_gemm; plugin ABI 2, quant_plugin_gemm):
//
//	D = alpha·op(A)·op(B) + beta·C + bias (+ old D when accumulate), row-major
//
// on cuBLASLt, FP32 accumulation, every M, N, K (spec §14 item 5), every
// transpose pair, D in FP32/BF16/FP16. The operands take one of three paths:
//
//   - FP8 per-tensor × FP8 per-tensor (E4M3×E4M3, E4M3×E5M2, E5M2×E4M3):
//     native FP8 tensor cores, the two scale_inv factors read by cuBLASLt
//     from device memory (A/B scale pointers). The host hands the direction
//     whose contraction dim is contiguous (TE's rule), so the call is always
//     TN. M, N, K must be multiples of 16 (cuBLASLt's FP8 alignment);
//     other shapes run the BF16 path.
//   - BF16 / FP16 / FP32 dense operands of one dtype: cuBLASLt directly (FP32
//     without TF32).
//   - Everything else, every mixed pair included: each operand is expanded by
//     one kernel (expand_kernel) to BF16 where its values are exactly BF16
//     (FP8 codes; MXFP8/MXFP4 code × E8M0 scale; NVFP4 E2M1 × E4M3 block
//     scale; BF16), else to FP32 (FP16 or FP32 dense, FP8 block codes × FP32
//     scale), then one cuBLASLt GEMM in that type. Per-tensor factors (FP8
//     scale_inv, NVFP4 amax/(6·448)) are not expanded: they live in device
//     memory, and cuBLASLt's BF16/FP32 algorithms on Hopper take alpha from
//     the host only (H100 run 2: all refused CUBLASLT_POINTER_MODE_DEVICE),
//     so cuBLASLt writes the FP32 sums and epilogue_kernel multiplies them by
//     alpha·fa·fb, formed on the device in float64 and rounded once (as the
//     CPU GEMM does, spec §11). Nothing waits on the host.
//
// The epilogue: cuBLASLt writes D itself where it can (no per-tensor factor
// left to apply, no bias, and no C or C of D's dtype, or accumulate as C =
// D); otherwise it writes FP32 sums Σ into scratch and epilogue_kernel
// computes alpha_eff·Σ + beta·C + bias + old D in FP32 and rounds once to D
// (host/gemm_cpu.go's order).
//
// Accuracy: the BF16, FP16 and FP32 paths multiply exact operand values with
// FP32 accumulation (host/gemm_test.go's bound). The native FP8 path does
// not: Hopper's FP8 tensor-core MMA accumulates with fewer bits (about 14,
// DeepSeek-V3 report §3.3.2) between cuBLASLt's promotions to FP32; the
// support table says so.
//
// Handles: one cuBLASLt handle per device and one 32 MiB cuBLASLt workspace
// per (device, stream) (two streams never share one), created on first use
// under a mutex; expansion buffers and scratch come stream-ordered
// (cudaMallocAsync) from the device's pool. No host synchronisation.
#include <cublasLt.h>

#include <map>
#include <mutex>
#include <utility>

#include "common.cuh"
#include "gemm_fused.cuh"

namespace lq {
namespace {

// ---------------------------------------------------------------------------
// Operands
// ---------------------------------------------------------------------------

enum class Kind {
  Dense,     // a dense tensor or the identity format: data [rows, cols]
  Fp8,       // per-tensor FP8: data rowwise [R, C], columnwise transposed [C, R]; scale_inv [1]
  Fp8Block,  // fp8_block: data rowwise [R, C], columnwise [C, R]; FP32 block scales
  Mxfp8,     // data [R, C] both directions; E8M0 scales
  Mxfp4,     // packed E2M1 rowwise [R, ⌈C/2⌉], columnwise [C, ⌈R/2⌉]; E8M0 scales
  Nvfp4,     // packed E2M1 as mxfp4; E4M3 scales per 16; FP32 amax [1]
};

// Everything a kernel needs to read element (r, c) of an operand's logical
// [R, C] view, without its per-tensor factor.
struct OpView {
  Kind kind;
  const uint8_t *data;
  int64_t R, C;
  int64_t pitch;  // bytes per physical row
  int colwise;    // the direction read is columnwise
  int transposed; // physical layout is [C, R] (the transposed copy)
  int trans;      // op(X) = X^T
  int el;         // Dense: 0 f32, 1 bf16, 2 f16; Fp8/Mxfp8: 0 e4m3, 1 e5m2
  const void *scale;
  int64_t s_pad_i, s_pad_j;  // MX/NVFP4 scale layout (i: non-contraction index, j: block)
  int s_jmajor, s_swizzled;
  int64_t s_stride;  // fp8_block
  int s_two_d;
  const float *factor;  // per-tensor factor source (Fp8 scale_inv, Nvfp4 amax), or NULL
};

// The value of logical element (r, c) (the per-tensor factor not applied).
__device__ __forceinline__ float op_value(const OpView &v, int64_t r, int64_t c) {
  // Physical (pr, pc) in the direction's data.
  const int64_t pr = v.transposed ? c : r, pc = v.transposed ? r : c;
  switch (v.kind) {
    case Kind::Dense: {
      const int64_t idx = pr * v.pitch + pc;
      if (v.el == 0) return reinterpret_cast<const float *>(v.data)[idx];
      if (v.el == 1) return __bfloat162float(reinterpret_cast<const __nv_bfloat16 *>(v.data)[idx]);
      return __half2float(reinterpret_cast<const __half *>(v.data)[idx]);
    }
    case Kind::Fp8: {
      uint8_t q = v.data[pr * v.pitch + pc];
      return v.el ? fp8_decode<Fp8::E5M2>(q) : fp8_decode<Fp8::E4M3>(q);
    }
    case Kind::Fp8Block: {
      uint8_t q = v.data[pr * v.pitch + pc];
      const float *s = reinterpret_cast<const float *>(v.scale);
      float si = v.s_two_d ? s[(pr / 128) * v.s_stride + pc / 128] : s[(pc / 128) * v.s_stride + pr];
      return __fmul_rn(fp8_decode<Fp8::E4M3>(q), si);
    }
    case Kind::Mxfp8:
    case Kind::Mxfp4: {
      // Scale (i, j): i the non-contraction index, j the 32-block along the
      // contraction dim (rowwise: (r, c/32); columnwise: (c, r/32)).
      const int64_t i = v.colwise ? c : r, j = v.colwise ? r / 32 : c / 32;
      const int64_t si = v.s_swizzled ? swizzle_index(i, j, v.s_pad_j) : v.s_jmajor ? j * v.s_pad_i + i : i * v.s_pad_j + j;
      const float s = e8m0_decode(reinterpret_cast<const uint8_t *>(v.scale)[si]);
      float x;
      if (v.kind == Kind::Mxfp8) {
        uint8_t q = v.data[pr * v.pitch + pc];
        x = v.el ? fp8_decode<Fp8::E5M2>(q) : fp8_decode<Fp8::E4M3>(q);
      } else {
        x = e2m1_decode((v.data[pr * v.pitch + pc / 2] >> (4 * (pc & 1))) & 0xF);
      }
      return __fmul_rn(s, x);
    }
    case Kind::Nvfp4: {
      const int64_t i = v.colwise ? c : r, j = v.colwise ? r / 16 : c / 16;
      const int64_t si = v.s_swizzled ? swizzle_index(i, j, v.s_pad_j) : i * v.s_pad_j + j;
      const float s = fp8_decode<Fp8::E4M3>(reinterpret_cast<const uint8_t *>(v.scale)[si]);
      const float x = e2m1_decode((v.data[pr * v.pitch + pc / 2] >> (4 * (pc & 1))) & 0xF);
      return __fmul_rn(s, x);  // exact: 2 × 4 significant bits
    }
  }
  return 0.0f;
}

// Elements p0 .. p0+7 (n of them inside) of row i of an operand whose
// physical row i holds them contiguously, the contraction dim being the
// physical one (the copy TE's rule picks for a quantized operand): one load
// of the codes and one scale (blocks of 16, 32 or 128 along p, p0 % 8 == 0).
__device__ __forceinline__ void expand8_contig(const OpView &v, int64_t i, int64_t p0, int n, float (&x)[8]) {
  const bool fp4 = v.kind == Kind::Mxfp4 || v.kind == Kind::Nvfp4;
  const uint8_t *q = v.data + i * v.pitch + (fp4 ? p0 / 2 : p0);
  const int nb = fp4 ? (n + 1) / 2 : n;  // bytes to read
  uint64_t codes = 0;
  if (nb == (fp4 ? 4 : 8) && (reinterpret_cast<uintptr_t>(q) & (fp4 ? 3 : 7)) == 0) {
    codes = fp4 ? *reinterpret_cast<const uint32_t *>(q) : *reinterpret_cast<const uint64_t *>(q);
  } else {
    for (int b = 0; b < nb; b++) codes |= (uint64_t)q[b] << (8 * b);
  }
  float s = 1.0f;
  switch (v.kind) {
    case Kind::Fp8Block: {
      const float *sc = reinterpret_cast<const float *>(v.scale);
      s = v.s_two_d ? sc[(i / 128) * v.s_stride + p0 / 128] : sc[(p0 / 128) * v.s_stride + i];
      break;
    }
    case Kind::Mxfp8:
    case Kind::Mxfp4: {
      const int64_t j = p0 / 32;
      const int64_t si = v.s_swizzled ? swizzle_index(i, j, v.s_pad_j) : v.s_jmajor ? j * v.s_pad_i + i : i * v.s_pad_j + j;
      s = e8m0_decode(reinterpret_cast<const uint8_t *>(v.scale)[si]);
      break;
    }
    case Kind::Nvfp4: {
      const int64_t j = p0 / 16;
      const int64_t si = v.s_swizzled ? swizzle_index(i, j, v.s_pad_j) : i * v.s_pad_j + j;
      s = fp8_decode<Fp8::E4M3>(reinterpret_cast<const uint8_t *>(v.scale)[si]);
      break;
    }
    default: break;
  }
#pragma unroll
  for (int e = 0; e < 8; e++) {
    float c;
    if (fp4) c = e2m1_decode((uint32_t)(codes >> (4 * e)) & 0xF);
    else {
      const uint8_t b = (uint8_t)(codes >> (8 * e));
      c = (v.kind == Kind::Fp8Block || v.el == 0) ? fp8_decode<Fp8::E4M3>(b) : fp8_decode<Fp8::E5M2>(b);
    }
    x[e] = e < n ? (v.kind == Kind::Fp8 ? c : __fmul_rn(s, c)) : 0.0f;
  }
}

// op(X) expanded into a row-major [rows_out, k] buffer of OT: for A, op(A)
// [M, K]; for B, op(B)ᵀ [N, K] (so that cuBLASLt always gets "TN"). Each
// thread writes 8 consecutive elements of a row (16 bytes of BF16). contig:
// the operand's physical rows are op rows (expand8_contig), else element by
// element (op_value).
template <typename OT>
__global__ void __launch_bounds__(256) expand_kernel(OpView v, int64_t rows_out, int64_t k, int is_b, int contig, OT *out) {
  const int64_t groups = (k + 7) / 8, n = rows_out * groups, stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; g < n; g += stride) {
    const int64_t i = g / groups, p0 = (g % groups) * 8;
    OT o[8];
    float xs[8];
    if (contig) {
      expand8_contig(v, i, p0, (int)(k - p0 < 8 ? k - p0 : 8), xs);
    } else {
#pragma unroll
      for (int e = 0; e < 8; e++) {
        const int64_t p = p0 + e;
        xs[e] = 0.0f;
        if (p < k) {
          // op(A)[i, p] = A[i, p] or A[p, i]; op(B)ᵀ[i, p] = op(B)[p, i] = B[p, i] or B[i, p].
          const bool t = is_b ? !v.trans : v.trans;
          xs[e] = t ? op_value(v, p, i) : op_value(v, i, p);
        }
      }
    }
#pragma unroll
    for (int e = 0; e < 8; e++) {
      if constexpr (sizeof(OT) == 2) o[e] = __float2bfloat16_rn(xs[e]);  // exact: a BF16 value
      else o[e] = xs[e];
    }
    OT *dst = out + i * k + p0;
    if (p0 + 8 <= k && (reinterpret_cast<uintptr_t>(dst) & 15) == 0) {
      if constexpr (sizeof(OT) == 2) {
        *reinterpret_cast<uint4 *>(dst) = *reinterpret_cast<const uint4 *>(o);
      } else {
        reinterpret_cast<float4 *>(dst)[0] = make_float4(o[0], o[1], o[2], o[3]);
        reinterpret_cast<float4 *>(dst)[1] = make_float4(o[4], o[5], o[6], o[7]);
      }
    } else {
      for (int e = 0; e < 8 && p0 + e < k; e++) dst[e] = o[e];
    }
  }
}

// NVFP4's per-tensor factor (plugins/nvfp4 TensorScale): fl32(amax · fl32(1/2688)).
__device__ __forceinline__ float op_factor(const OpView &v) {
  if (v.factor == nullptr) return 1.0f;
  if (v.kind == Kind::Nvfp4) return __fmul_rn(*v.factor, __uint_as_float(0x39C30C31u));  // fl32(1/2688)
  return *v.factor;  // FP8 scale_inv
}

// alpha·fa·fb in float64, rounded once (host/gemm_cpu.go), and beta, into
// out[0], out[1] for epilogue_kernel.
__global__ void alpha_kernel(OpView a, OpView b, float alpha, float beta, float *out) {
  out[0] = (float)((double)alpha * (double)op_factor(a) * (double)op_factor(b));
  out[1] = beta;
}

__device__ __forceinline__ float load_any(const void *p, int dt, int64_t i) {
  if (dt == 0) return reinterpret_cast<const float *>(p)[i];
  if (dt == 1) return __bfloat162float(reinterpret_cast<const __nv_bfloat16 *>(p)[i]);
  return __half2float(reinterpret_cast<const __half *>(p)[i]);
}

__device__ __forceinline__ void store_any(void *p, int dt, int64_t i, float x) {
  if (dt == 0) store_out(reinterpret_cast<float *>(p) + i, x);
  else if (dt == 1) store_out(reinterpret_cast<__nv_bfloat16 *>(p) + i, x);
  else store_out(reinterpret_cast<__half *>(p) + i, x);
}

// x = alpha_eff·s (0 without s); x += beta·c; x += bias[j]; x += d_old;
// D = round(x) (host/gemm_cpu.go cpuEpilogue). ab: {alpha_eff, beta}.
__global__ void epilogue_kernel(const float *s, const void *c, int cdt, const float *ab, const void *bias, int bdt, void *d,
                                int ddt, int accumulate, int64_t m, int64_t n) {
  const int64_t total = m * n, stride = (int64_t)gridDim.x * blockDim.x;
  const float al = ab[0], bt = c ? ab[1] : 0.0f;
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += stride) {
    float x = s ? al * s[idx] : 0.0f;
    if (c) x += bt * load_any(c, cdt, idx);
    if (bias) x += load_any(bias, bdt, idx % n);
    if (accumulate) x += load_any(d, ddt, idx);
    store_any(d, ddt, idx, x);
  }
}

// ---------------------------------------------------------------------------
// Argument decoding
// ---------------------------------------------------------------------------

int dense_code(DLDataType t) {
  if (dtype_is(t, kDLFloat, 32)) return 0;
  if (dtype_is(t, kDLBfloat, 16)) return 1;
  if (dtype_is(t, kDLFloat, 16)) return 2;
  return -1;
}

bool is_format(const char *f, const char *name) { return strncmp(f, name, QUANT_PLUGIN_FORMAT_LEN) == 0; }

int32_t decode_operand(const quant_plugin_gemm_operand &o, const char *name, OpView *v, quant_plugin_error *err) {
  *v = OpView{};
  v->R = o.rows;
  v->C = o.cols;
  v->trans = o.trans != 0;
  v->colwise = o.direction == QUANT_DIRECTION_COLUMNWISE;
  const quant_plugin_storage &st = o.storage;
  const quant_plugin_tensor *data = find_buffer(st, QUANT_BUFFER_DATA);
  if (data == nullptr) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%s: the operand has no data buffer", name);
  if (data->device_type != kDLCUDA) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%s: data is not on a CUDA device", name);
  v->data = (const uint8_t *)data->data;
  const char *f = o.format;
  auto scale_of = [&](const char *what, const void **out) -> int32_t {
    const quant_plugin_tensor *s = find_buffer(st, QUANT_BUFFER_SCALE_INV);
    if (s == nullptr) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%s: the %s operand has no scale_inv buffer", name, what);
    *out = s->data;
    return QUANT_OK;
  };
  const int64_t R = o.rows, C = o.cols;
  if (is_format(f, "identity") || o.params == nullptr) {
    v->kind = Kind::Dense;
    v->el = dense_code(data->dtype);
    if (v->el < 0)
      return fail(err, QUANT_ERROR_UNSUPPORTED, "%s: dense dtype (code %d, bits %d) not supported (want float32, bfloat16 or float16)", name,
                  data->dtype.code, data->dtype.bits);
    v->pitch = C;
    return QUANT_OK;
  }
  const quant_plugin_params *p = o.params;
  if (is_format(f, "fp8")) {
    v->kind = Kind::Fp8;
    v->el = p->element == QUANT_ELEMENT_E5M2;
    v->transposed = v->colwise;
    v->pitch = v->colwise ? R : C;
    const quant_plugin_tensor *s = find_buffer(st, QUANT_BUFFER_SCALE_INV);
    if (s == nullptr) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%s: the fp8 operand has no scale_inv buffer", name);
    v->factor = (const float *)s->data;
    return QUANT_OK;
  }
  if (is_format(f, "fp8_block")) {
    v->kind = Kind::Fp8Block;
    v->transposed = v->colwise;
    v->pitch = v->colwise ? R : C;
    v->s_two_d = p->block_dims == 2;
    const int64_t pr = v->colwise ? C : R, pc = v->colwise ? R : C;  // physical [pr, pc]
    v->s_stride = pad_to(v->s_two_d ? ceil_div(pc, 128) : pr, 4);
    return scale_of("fp8_block", &v->scale);
  }
  if (is_format(f, "mxfp8") || is_format(f, "mxfp4")) {
    const bool fp4 = is_format(f, "mxfp4");
    v->kind = fp4 ? Kind::Mxfp4 : Kind::Mxfp8;
    v->el = !fp4 && p->element == QUANT_ELEMENT_E5M2;
    v->transposed = fp4 && v->colwise;
    v->pitch = fp4 ? ceil_div(v->colwise ? R : C, 2) : C;
    const int64_t ni = v->colwise ? C : R, nj = ceil_div(v->colwise ? R : C, 32);
    v->s_pad_i = pad_to(ni, 128);
    v->s_pad_j = pad_to(nj, 4);
    v->s_jmajor = !fp4 && v->colwise;
    v->s_swizzled = p->gemm_swizzled_scales != 0;
    return scale_of(f, &v->scale);
  }
  if (is_format(f, "nvfp4")) {
    v->kind = Kind::Nvfp4;
    v->transposed = v->colwise;
    v->pitch = ceil_div(v->colwise ? R : C, 2);
    const int64_t ni = v->colwise ? C : R, nj = ceil_div(v->colwise ? R : C, 16);
    v->s_pad_i = pad_to(ni, 128);
    v->s_pad_j = pad_to(nj, 4);
    v->s_swizzled = p->gemm_swizzled_scales != 0;
    const quant_plugin_tensor *am = find_buffer(st, QUANT_BUFFER_AMAX);
    if (am == nullptr) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%s: the nvfp4 operand has no amax buffer", name);
    v->factor = (const float *)am->data;
    return scale_of("nvfp4", &v->scale);
  }
  return fail(err, QUANT_ERROR_UNSUPPORTED, "%s: the CUDA GEMM does not know format %.32s", name, f);
}

// ---------------------------------------------------------------------------
// cuBLASLt
// ---------------------------------------------------------------------------

const char *lt_status(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case CUBLAS_STATUS_MAPPING_ERROR: return "mapping error";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "execution failed";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "internal error";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported";
    default: return "error";
  }
}

#define LQ_LT(call, what)                                                                                       \
  do {                                                                                                          \
    cublasStatus_t lq_s_ = (call);                                                                              \
    if (lq_s_ != CUBLAS_STATUS_SUCCESS)                                                                         \
      return fail(err, lq_s_ == CUBLAS_STATUS_ALLOC_FAILED ? QUANT_ERROR_OUT_OF_MEMORY : QUANT_ERROR_PLUGIN,      \
                  "cuBLASLt %s: %s (status %d)", what, lt_status(lq_s_), (int)lq_s_);                          \
  } while (0)

constexpr size_t kWorkspace = 32u << 20;

struct DeviceState {
  cublasLtHandle_t handle = nullptr;
  std::map<cudaStream_t, void *> workspaces;
};

std::mutex g_mu;
std::map<int, DeviceState> g_devices;

// The device's handle and this stream's workspace, made on first use.
int32_t lt_state(int dev, cudaStream_t s, cublasLtHandle_t *h, void **ws, quant_plugin_error *err) {
  std::lock_guard<std::mutex> lock(g_mu);
  DeviceState &d = g_devices[dev];
  if (d.handle == nullptr) LQ_LT(cublasLtCreate(&d.handle), "handle creation");
  auto it = d.workspaces.find(s);
  if (it == d.workspaces.end()) {
    void *p = nullptr;
    LQ_CUDA(cudaMalloc(&p, kWorkspace), "allocating the cuBLASLt workspace (%zu bytes) on cuda:%d", kWorkspace, dev);
    it = d.workspaces.emplace(s, p).first;
  }
  *h = d.handle;
  *ws = it->second;
  return QUANT_OK;
}

// One cuBLASLt matmul in column-major terms: D'[m', n'] = alpha·op(A')·op(B')
// + beta·C', where A' is op(B) of the row-major problem and B' op(A).
struct LtCall {
  int64_t m, n, k;              // m' = N, n' = M, k' = K
  cudaDataType_t ta, tb, tc, td;
  cublasOperation_t opa, opb;
  const void *a, *b;
  int64_t lda, ldb;
  const void *c;                // may equal d
  void *d;
  int64_t ldd;
  float alpha, beta;            // host scalars
  bool use_c;
  const float *a_scale, *b_scale;  // FP8 scale pointers (device), or NULL
  int32_t a_scale_mode, b_scale_mode;  // cublasLtMatmulMatrixScale_t (0: per-tensor scalar)
  cublasComputeType_t compute;
};

int32_t lt_run(const LtCall &c, int dev, cudaStream_t s, quant_plugin_error *err) {
  cublasLtHandle_t h;
  void *ws;
  LQ_TRY(lt_state(dev, s, &h, &ws, err));
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  int32_t st = QUANT_OK;
  auto body = [&]() -> int32_t {
    LQ_LT(cublasLtMatmulDescCreate(&op, c.compute, CUDA_R_32F), "matmul descriptor");
    LQ_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &c.opa, sizeof c.opa), "transa");
    LQ_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &c.opb, sizeof c.opb), "transb");
    if (c.a_scale_mode) LQ_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &c.a_scale_mode, sizeof c.a_scale_mode), "A scale mode");
    if (c.b_scale_mode) LQ_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &c.b_scale_mode, sizeof c.b_scale_mode), "B scale mode");
    if (c.a_scale) LQ_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &c.a_scale, sizeof c.a_scale), "A scale");
    if (c.b_scale) LQ_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &c.b_scale, sizeof c.b_scale), "B scale");
    // Stored (column-major) shapes: A' is [m', k'] after opa.
    const uint64_t ar = c.opa == CUBLAS_OP_N ? c.m : c.k, ac = c.opa == CUBLAS_OP_N ? c.k : c.m;
    const uint64_t br = c.opb == CUBLAS_OP_N ? c.k : c.n, bc = c.opb == CUBLAS_OP_N ? c.n : c.k;
    LQ_LT(cublasLtMatrixLayoutCreate(&la, c.ta, ar, ac, c.lda), "A layout");
    LQ_LT(cublasLtMatrixLayoutCreate(&lb, c.tb, br, bc, c.ldb), "B layout");
    LQ_LT(cublasLtMatrixLayoutCreate(&lc, c.tc, c.m, c.n, c.ldd), "C layout");
    LQ_LT(cublasLtMatrixLayoutCreate(&ld, c.td, c.m, c.n, c.ldd), "D layout");
    LQ_LT(cublasLtMatmulPreferenceCreate(&pref), "preference");
    size_t wsz = kWorkspace;
    LQ_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsz, sizeof wsz), "workspace size");
    // Split-K partial sums only in the compute type (FP32): a reduction in
    // D's type or in place in D rounds partial sums to BF16/FP16 (H100 run 3:
    // BF16 accumulate into D was off by more than one rounding).
    uint32_t red = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    LQ_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &red, sizeof red), "reduction schemes");
    cublasLtMatmulHeuristicResult_t res{};
    int found = 0;
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, ld, pref, 1, &res, &found);
    if (hs == CUBLAS_STATUS_NOT_SUPPORTED) found = 0;
    else LQ_LT(hs, "algorithm search");
    if (found == 0)
      return fail(err, QUANT_ERROR_UNSUPPORTED, "cuBLASLt has no algorithm for this GEMM (m'=%lld n'=%lld k'=%lld)", (long long)c.m,
                  (long long)c.n, (long long)c.k);
    const void *cptr = c.use_c ? c.c : c.d;
    LQ_LT(cublasLtMatmul(h, op, &c.alpha, c.a, la, c.b, lb, &c.beta, cptr, lc, c.d, ld, &res.algo, ws, kWorkspace, s), "matmul");
    return QUANT_OK;
  };
  st = body();
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (ld) cublasLtMatrixLayoutDestroy(ld);
  if (lc) cublasLtMatrixLayoutDestroy(lc);
  if (lb) cublasLtMatrixLayoutDestroy(lb);
  if (la) cublasLtMatrixLayoutDestroy(la);
  if (op) cublasLtMatmulDescDestroy(op);
  return st;
}

cudaDataType_t cuda_type(int code) { return code == 0 ? CUDA_R_32F : code == 1 ? CUDA_R_16BF : CUDA_R_16F; }

// Stream-ordered scratch freed when the call returns (the frees are ordered
// after the work on the stream).
struct Scratch {
  cudaStream_t s;
  void *p[4] = {nullptr, nullptr, nullptr, nullptr};
  int n = 0;
  explicit Scratch(cudaStream_t st) : s(st) {}
  ~Scratch() {
    for (int i = 0; i < n; i++) cudaFreeAsync(p[i], s);
  }
  int32_t get(size_t bytes, void **out, const char *what, quant_plugin_error *err) {
    LQ_CUDA(cudaMallocAsync(out, bytes > 0 ? bytes : 16, s), "allocating %zu bytes for %s", bytes, what);
    p[n++] = *out;
    return QUANT_OK;
  }
};

// The fused Hopper kernel's operand (cuda/gemm_fused.cu), if v can be one: MX
// (E8M0 per 32) or NVFP4 codes, read K-major (op(A) [M, K] or op(B)ᵀ [N, K]
// with K contiguous: MXFP8 rowwise, MXFP4/NVFP4 either direction), scales
// one row per operand row (compact or GEMM-swizzled).
bool fused_operand(const OpView &v, bool is_b, int64_t rows, qfused::Operand *o) {
  if (v.kind != Kind::Mxfp8 && v.kind != Kind::Mxfp4 && v.kind != Kind::Nvfp4) return false;
  const bool kmajor = is_b ? v.trans != v.transposed : v.trans == v.transposed;
  if (!kmajor || (v.s_jmajor && !v.s_swizzled)) return false;
  o->data = v.data;
  o->scale = reinterpret_cast<const uint8_t *>(v.scale);
  o->rows = rows;
  o->ld = v.pitch;
  o->scale_stride = v.s_pad_j;
  o->swizzled = v.s_swizzled;
  o->elem = v.kind == Kind::Mxfp8 ? (v.el ? qfused::kE5M2 : qfused::kE4M3) : qfused::kE2M1;
  return true;
}

// Where the fused kernel is faster than expanding to BF16 and cuBLASLt
// (H100, N = K = 8192, bench/RESULTS.md "Fused Hopper GEMM"): the expansion
// of the large operand dominates when the other is small. MX: M = 16..256
// fused 0.07-0.21 ms vs 0.32-0.44 ms; at 4096³ and up the BF16 path wins
// 3.5x (the per-32 promotion keeps the FP32 pipes, not the tensor cores,
// busy). NVFP4 (two wgmmas and promotions per 32, two stages of shared
// memory at 128×128): fused wins at M ≤ 32 (0.10-0.19 ms vs 0.34), loses at
// M = 64 (0.37 vs 0.34) and M = 128 (0.54 vs 0.37).
#define FUSED_WHERE "min(M,N) <= 256 (NVFP4: 32)"
bool fused_faster(int64_t M, int64_t N, int64_t K, bool nvfp4) {
  (void)K;
  const int64_t small = M < N ? M : N;
  return small <= (nvfp4 ? 32 : 256);
}

// Whether the fused kernel takes this GEMM by default (no exact flag): a pair
// it covers (MX × MX, NVFP4 × NVFP4) on sm_90, at shapes where it beats the
// BF16 path (bench/RESULTS.md, "Fused Hopper GEMM").
bool fused_pick(const OpView &va, const OpView &vb, int64_t M, int64_t N, int64_t K, int dev, qfused::Params *p) {
  const bool nv = va.kind == Kind::Nvfp4;
  if (nv != (vb.kind == Kind::Nvfp4)) return false;
  if (!fused_operand(va, false, M, &p->a) || !fused_operand(vb, true, N, &p->b)) return false;
  if (!fused_faster(M, N, K, nv)) return false;
  if (M > 65535 * 64 || N > 65535 * 64) return false;  // the kernel's grid rows (qfused::gemm refuses more)
  if (!qfused::device_ok(dev)) return false;
  p->M = M, p->N = N, p->K = K;
  p->sb16 = nv;
  return true;
}

// Whether the expansion of op(X) (A) or op(X)ᵀ (B) reads X's physical rows:
// op row i, contraction index p is physical (i, p).
int contiguous(const OpView &v, bool is_b) {
  if (v.kind == Kind::Dense) return 0;
  const bool t = is_b ? !v.trans : v.trans;  // logical (r, c) = t ? (p, i) : (i, p)
  return t == (v.transposed != 0);
}

unsigned grid_for(int64_t n) {
  int64_t b = ceil_div(n > 0 ? n : 1, 256);
  if (b > grid_cap()) b = grid_cap();
  return (unsigned)b;
}

// allow_block: try FP8 block scaling in cuBLASLt (a retry without it follows
// where cuBLASLt has no algorithm for it).
int32_t gemm(const quant_plugin_gemm_args *a, quant_plugin_error *err, bool allow_block = true) {
  const int64_t M = a->m, N = a->n, K = a->k;
  if (M < 0 || N < 0 || K < 0) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "m, n, k: negative");
  LQ_TRY(check_device(a->d, "d", err));
  const int ddt = dense_code(a->d.dtype);
  if (ddt < 0) return fail(err, QUANT_ERROR_UNSUPPORTED, "d: dtype not supported (want float32, bfloat16 or float16)");
  if (numel(a->d) != M * N) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "d: %lld elements, want m*n = %lld", (long long)numel(a->d), (long long)(M * N));
  const bool has_c = a->c.data != nullptr, has_bias = a->bias.data != nullptr;
  const int cdt = has_c ? dense_code(a->c.dtype) : -1, bdt = has_bias ? dense_code(a->bias.dtype) : -1;
  if (has_c && (cdt < 0 || numel(a->c) != M * N)) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "c: want [m, n] float32, bfloat16 or float16");
  if (has_bias && (bdt < 0 || numel(a->bias) != N)) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "bias: want [n] float32, bfloat16 or float16");
  if (has_c) LQ_TRY(check_device(a->c, "c", err));
  if (has_bias) LQ_TRY(check_device(a->bias, "bias", err));
  OpView va, vb;
  LQ_TRY(decode_operand(a->a, "a", &va, err));
  LQ_TRY(decode_operand(a->b, "b", &vb, err));
  if ((va.trans ? va.R : va.C) != K || (va.trans ? va.C : va.R) != M || (vb.trans ? vb.C : vb.R) != K || (vb.trans ? vb.R : vb.C) != N)
    return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "a, b: operand views do not make [m=%lld, k=%lld] x [k, n=%lld]", (long long)M, (long long)K,
                (long long)N);
  if (M == 0 || N == 0) return QUANT_OK;
  int dev = 0;
  LQ_TRY(current_device(a->d.device_id, &dev, err));
  cudaStream_t s = stream_of(a->stream);
  Scratch scratch(s);

  // alpha (with the per-tensor factors) and beta on the device.
  float *ab = nullptr;
  LQ_TRY(scratch.get(2 * sizeof(float), (void **)&ab, "alpha and beta", err));
  const bool fp8_tensor = va.kind == Kind::Fp8 && vb.kind == Kind::Fp8 && !(va.el == 1 && vb.el == 1) && M % 16 == 0 && N % 16 == 0 &&
                          K % 16 == 0 && aligned16(va.data) && aligned16(vb.data);
  // FP8 block scaling (CUDA >= 12.9 cuBLASLt, Hopper): A 1x128 (VEC128_32F),
  // B 1x128 or 128x128 (BLK128x128_32F), TN as the host hands them, whole
  // 128-blocks along K, and the scale buffers in the layouts cuBLASLt reads:
  // fp8_block's 1-D [K/128, pad4(rows)] is its [K/128, rows] when rows % 4 == 0;
  // the 2-D [N/128, pad4(K/128)] is [N/128, K/128] when (K/128) % 4 == 0.
  const bool fp8_block = allow_block && va.kind == Kind::Fp8Block && vb.kind == Kind::Fp8Block && !va.s_two_d && M % 16 == 0 &&
                         N % 16 == 0 && K % 128 == 0 && (!vb.s_two_d || (K / 128) % 4 == 0) && aligned16(va.data) && aligned16(vb.data) &&
                         aligned16(va.scale) && aligned16(vb.scale) && contiguous(va, false) && contiguous(vb, true);
  const bool fp8_native = fp8_tensor || fp8_block;
  // The epilogue runs in cuBLASLt where it is alpha·Σ + beta·C' with C' of
  // D's dtype (C itself, or old D with beta 1 when accumulating) and no
  // per-tensor factor is left to apply; else FP32 sums go to scratch and
  // epilogue_kernel finishes.
  // One compute type for both operands (unless native FP8): BF16 when both
  // expand exactly to it, FP16 for two FP16 tensors, else FP32.
  auto bf16_exact = [](const OpView &v) { return v.kind != Kind::Fp8Block && (v.kind != Kind::Dense || v.el == 1); };
  int ct = 0;  // 0 f32, 1 bf16, 2 f16 (dense_code's numbering)
  if (bf16_exact(va) && bf16_exact(vb)) ct = 1;
  else if (va.kind == Kind::Dense && vb.kind == Kind::Dense && va.el == 2 && vb.el == 2) ct = 2;
  const bool factors = !fp8_native && (va.factor != nullptr || vb.factor != nullptr);
  // cuBLASLt writes BF16/FP16 inputs' products to their own type or FP32,
  // FP32 inputs' to FP32, FP8's to any of the three.
  // With C (or old D) added, D of 16 bits goes through the FP32 epilogue:
  // one rounding after the addition, whatever cuBLASLt's epilogue does.
  const bool d_ok = (fp8_native || ddt == 0 || ddt == ct) && (ddt == 0 || !(has_c || a->accumulate));
  const bool direct_epi = K > 0 && d_ok && !factors && !has_bias && !(has_c && a->accumulate) && (!has_c || cdt == ddt);
  if (!direct_epi) {
    OpView fa = va, fb = vb;
    if (fp8_native) fa.factor = fb.factor = nullptr;  // cuBLASLt's scale pointers apply them
    alpha_kernel<<<1, 1, 0, s>>>(fa, fb, a->alpha, has_c ? a->beta : 0.0f, ab);
    LQ_LAUNCHED("alpha kernel launch");
  }
  if (K > 0 && !(a->flags & QUANT_PLUGIN_GEMM_EXACT)) {
    qfused::Params fp{};
    if (fused_pick(va, vb, M, N, K, dev, &fp)) {
      // alpha·fa·fb from the device (ab[0]); D directly where the epilogue is
      // alpha·Σ into FP32 or BF16, else plain FP32 sums and epilogue_kernel.
      if (direct_epi) {
        alpha_kernel<<<1, 1, 0, s>>>(va, vb, a->alpha, has_c ? a->beta : 0.0f, ab);
        LQ_LAUNCHED("alpha kernel launch");
      }
      const bool direct = !has_c && !has_bias && !a->accumulate && (ddt == 0 || ddt == 1);
      fp.alpha = 1.0f;
      fp.alpha_dev = direct ? ab : nullptr;
      fp.ldd = N;
      float *sums = nullptr;
      if (!direct) LQ_TRY(scratch.get((size_t)M * N * sizeof(float), (void **)&sums, "the FP32 sums", err));
      fp.d = direct ? a->d.data : sums;
      fp.d_bf16 = direct && ddt == 1;
      LQ_CUDA(qfused::gemm(fp, s), "the fused Hopper GEMM (m=%lld n=%lld k=%lld)", (long long)M, (long long)N, (long long)K);
      if (!direct) {
        epilogue_kernel<<<grid_for(M * N), 256, 0, s>>>(sums, has_c ? a->c.data : nullptr, cdt, ab, has_bias ? a->bias.data : nullptr, bdt,
                                                        a->d.data, ddt, a->accumulate, M, N);
        LQ_LAUNCHED("epilogue kernel launch");
      }
      return QUANT_OK;
    }
  }
  if (K == 0) {  // no products: the epilogue of zeros
    epilogue_kernel<<<grid_for(M * N), 256, 0, s>>>(nullptr, has_c ? a->c.data : nullptr, cdt, ab, has_bias ? a->bias.data : nullptr, bdt,
                                                    a->d.data, ddt, a->accumulate, M, N);
    LQ_LAUNCHED("epilogue kernel launch");
    return QUANT_OK;
  }

  LtCall c{};
  c.m = N;
  c.n = M;
  c.k = K;
  c.compute = CUBLAS_COMPUTE_32F;
  if (fp8_native) {
    // Both physical copies are [rows, K] row-major (the host picked them so).
    c.ta = vb.el ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
    c.tb = va.el ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
    c.opa = CUBLAS_OP_T;
    c.opb = CUBLAS_OP_N;
    c.a = vb.data;
    c.lda = K;
    c.b = va.data;
    c.ldb = K;
    c.a_scale = vb.factor;
    c.b_scale = va.factor;
    if (fp8_block) {
      c.ta = c.tb = CUDA_R_8F_E4M3;
      c.a_scale = (const float *)vb.scale;
      c.b_scale = (const float *)va.scale;
      c.a_scale_mode = vb.s_two_d ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
      c.b_scale_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    }
  } else {
    c.ta = c.tb = cuda_type(ct);
    const size_t esz = ct == 0 ? 4 : 2;
    // An operand goes to cuBLASLt as it is where it is a dense tensor of the
    // compute type; else it is expanded.
    auto direct = [&](const OpView &v) { return v.kind == Kind::Dense && v.el == ct; };
    // B' = op(A): dense A [R, C] row-major is column-major [C, R], ld C.
    if (direct(va)) {
      c.b = va.data;
      c.ldb = va.C;
      c.opb = va.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    } else {
      void *buf;
      LQ_TRY(scratch.get((size_t)M * K * esz, &buf, "the expanded a", err));
      const int contig = contiguous(va, false);
      if (ct == 0) expand_kernel<float><<<grid_for(M * ceil_div(K, 8)), 256, 0, s>>>(va, M, K, 0, contig, (float *)buf);
      else expand_kernel<__nv_bfloat16><<<grid_for(M * ceil_div(K, 8)), 256, 0, s>>>(va, M, K, 0, contig, (__nv_bfloat16 *)buf);
      LQ_LAUNCHED("expand a kernel launch");
      c.b = buf;
      c.ldb = K;
      c.opb = CUBLAS_OP_N;
    }
    // A' = op(B)ᵀ [N, K].
    if (direct(vb)) {
      c.a = vb.data;
      c.lda = vb.C;
      c.opa = vb.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    } else {
      void *buf;
      LQ_TRY(scratch.get((size_t)N * K * esz, &buf, "the expanded b", err));
      const int contig = contiguous(vb, true);
      if (ct == 0) expand_kernel<float><<<grid_for(N * ceil_div(K, 8)), 256, 0, s>>>(vb, N, K, 1, contig, (float *)buf);
      else expand_kernel<__nv_bfloat16><<<grid_for(N * ceil_div(K, 8)), 256, 0, s>>>(vb, N, K, 1, contig, (__nv_bfloat16 *)buf);
      LQ_LAUNCHED("expand b kernel launch");
      c.a = buf;
      c.lda = K;
      c.opa = CUBLAS_OP_T;
    }
  }
  c.ldd = N;
  if (direct_epi) {
    c.td = c.tc = cuda_type(ddt);
    c.d = a->d.data;
    c.alpha = a->alpha;
    if (has_c) {
      c.use_c = true;
      c.c = a->c.data;
      c.beta = a->beta;
    } else if (a->accumulate) {
      c.use_c = true;  // old D, beta 1
      c.c = a->d.data;
      c.beta = 1.0f;
    }
    const int32_t st = lt_run(c, dev, s, err);
    if (st == QUANT_ERROR_UNSUPPORTED && fp8_block) return gemm(a, err, false);
    return st;
  }
  float *sums;
  LQ_TRY(scratch.get((size_t)M * N * sizeof(float), (void **)&sums, "the FP32 sums", err));
  c.td = c.tc = CUDA_R_32F;
  c.d = sums;
  c.use_c = false;
  c.alpha = 1.0f;  // Σ; epilogue_kernel applies alpha_eff
  c.beta = 0.0f;
  {
    const int32_t st = lt_run(c, dev, s, err);
    if (st == QUANT_ERROR_UNSUPPORTED && fp8_block) return gemm(a, err, false);
    LQ_TRY(st);
  }
  epilogue_kernel<<<grid_for(M * N), 256, 0, s>>>(sums, has_c ? a->c.data : nullptr, cdt, ab, has_bias ? a->bias.data : nullptr, bdt,
                                                  a->d.data, ddt, a->accumulate, M, N);
  LQ_LAUNCHED("epilogue kernel launch");
  return QUANT_OK;
}

// ---------------------------------------------------------------------------
// Support table
// ---------------------------------------------------------------------------

bool known(const char *f) {
  return is_format(f, "identity") || is_format(f, "fp8") || is_format(f, "fp8_block") || is_format(f, "mxfp8") || is_format(f, "mxfp4") ||
         is_format(f, "nvfp4");
}

int32_t gemm_support(quant_plugin_gemm_support_args *a, quant_plugin_error *err) {
  if (a->format_a == nullptr || a->format_b == nullptr) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "format_a, format_b: NULL");
  const char *fa = a->format_a, *fb = a->format_b;
  auto say = [&](int32_t level, const char *fmt, ...) {
    a->level_out = level;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->reason_out, sizeof a->reason_out, fmt, ap);
    va_end(ap);
    return QUANT_OK;
  };
  if (a->device_type != kDLCUDA) return say(QUANT_GEMM_UNSUPPORTED, "the CUDA plugin's GEMM runs on cuda only");
  for (const char *f : {fa, fb})
    if (!known(f)) return say(QUANT_GEMM_UNSUPPORTED, "the CUDA GEMM does not know format %.32s", f);
  const bool e5a = a->params_a && a->params_a->element == QUANT_ELEMENT_E5M2, e5b = a->params_b && a->params_b->element == QUANT_ELEMENT_E5M2;
  if (is_format(fa, "fp8") && is_format(fb, "fp8")) {
    if (e5a && e5b) return say(QUANT_GEMM_EMULATED, "E5M2 x E5M2 has no FP8 tensor-core GEMM: codes expanded to BF16, FP32 accumulation");
    return say(QUANT_GEMM_NATIVE, "FP8 tensor cores (cuBLASLt; Hopper accumulates with ~14 bits between FP32 promotions); M, N, K not multiples of 16: BF16");
  }
  if (is_format(fa, "identity") && is_format(fb, "identity"))
    return say(QUANT_GEMM_NATIVE, "cuBLASLt in the tensors' dtype (BF16, FP16; FP32 without TF32); mixed dtypes in FP32");
  if (is_format(fa, "fp8_block") && is_format(fb, "fp8_block") && !(a->params_a && a->params_a->block_dims == 2))
    return say(QUANT_GEMM_NATIVE, "FP8 block scaling (cuBLASLt) for 1x128 x 1x128 or 128x128, M, N %% 16, K %% 128 (512 for 128x128); else FP32");
  if (is_format(fa, "fp8_block") || is_format(fb, "fp8_block"))
    return say(QUANT_GEMM_EMULATED, "FP8 codes times FP32 block scales expanded to FP32, FP32 GEMM (cuBLASLt)");
  const bool mx_a = is_format(fa, "mxfp8") || is_format(fa, "mxfp4"), mx_b = is_format(fb, "mxfp8") || is_format(fb, "mxfp4");
  if ((mx_a && mx_b) || (is_format(fa, "nvfp4") && is_format(fb, "nvfp4"))) {
    int dev = 0;
    if (cudaGetDevice(&dev) == cudaSuccess && qfused::device_ok(dev))
      return say(QUANT_GEMM_NATIVE, "sm_90: codes on FP8 tensor cores, 13-bit block sums (README) where " FUSED_WHERE "; else or exact: BF16");
    cudaGetLastError();
  }
  return say(QUANT_GEMM_EMULATED, "expanded exactly to BF16 (per-tensor factors into alpha), BF16 tensor cores, FP32 accumulation");
}

}  // namespace
}  // namespace lq

extern "C" int32_t lq_gemm(const quant_plugin_gemm_args *a, quant_plugin_error *err) { return lq::gemm(a, err); }
extern "C" int32_t lq_gemm_support(quant_plugin_gemm_support_args *a, quant_plugin_error *err) { return lq::gemm_support(a, err); }
