// The identity format on CUDA (spec §8.4; plugins/identity on the CPU): the
// "quantized" tensor holds the high-precision values themselves, in the held
// dtype (the input's unless the quantizer names FP32, BF16 or FP16). Quantize
// and dequantize are casts with host.StoreFloat32's rounding (one RNE rounding
// through FP32, which holds every BF16 and FP16 value exactly), derive is a
// copy, and the amax is the input's max |x| (reported for hybrids).
#include "common.cuh"

namespace lq {
namespace {

// The input as FP32, bit for bit as host.LoadFloat32 reads it: an FP16 NaN
// keeps its sign and payload and becomes quiet (numeric.FP16ToFloat32), where
// __half2float gives the canonical NaN.
__device__ __forceinline__ float load_f32(float x) { return x; }
__device__ __forceinline__ float load_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float load_f32(__half x) {
  uint32_t b = __half_as_ushort(x);
  if ((b & 0x7C00u) == 0x7C00u && (b & 0x3FFu) != 0) return __uint_as_float(((b & 0x8000u) << 16) | 0x7FC00000u | ((b & 0x3FFu) << 13));
  return __half2float(x);
}

template <typename In, typename Out>
__global__ void cast_kernel(const In *__restrict__ in, Out *__restrict__ out, int64_t n) {
  pdl_wait();
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    store_out(out + i, load_f32(in[i]));
}

template <typename In, typename Out>
int32_t launch_cast(const void *in, void *out, int64_t n, cudaStream_t s, quant_plugin_error *err) {
  if (n == 0) return QUANT_OK;
  const int threads = 256;
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks > 65536) blocks = 65536;
  launch_kernel(cast_kernel<In, Out>, (unsigned)blocks, threads, 0, s, static_cast<const In *>(in), static_cast<Out *>(out), n);
  LQ_LAUNCHED("identity cast of %lld elements", (long long)n);
  return QUANT_OK;
}

template <typename In>
int32_t cast_from(const void *in, void *out, InType to, int64_t n, cudaStream_t s, quant_plugin_error *err) {
  switch (to) {
    case InType::F32: return launch_cast<In, float>(in, out, n, s, err);
    case InType::BF16: return launch_cast<In, __nv_bfloat16>(in, out, n, s, err);
    case InType::F16: return launch_cast<In, __half>(in, out, n, s, err);
  }
  return fail(err, QUANT_ERROR_INTERNAL, "identity: output type");
}

// cast copies n elements from src to dst (FP32, BF16 or FP16 each): a plain
// copy when the dtypes agree.
int32_t cast(const quant_plugin_tensor &src, const char *src_name, const quant_plugin_tensor &dst, const char *dst_name, int64_t n,
             cudaStream_t s, quant_plugin_error *err) {
  InType from, to;
  LQ_TRY(input_type(src, src_name, &from, err));
  LQ_TRY(input_type(dst, dst_name, &to, err));
  if (numel(src) < n || numel(dst) < n)
    return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%s: has %lld elements, %s %lld, want %lld", src_name, (long long)numel(src), dst_name,
                (long long)numel(dst), (long long)n);
  if (n == 0) return QUANT_OK;
  if (src.data == nullptr || dst.data == nullptr) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%s or %s: data is NULL", src_name, dst_name);
  if (from == to) {
    LQ_CUDA(cudaMemcpyAsync(dst.data, src.data, (size_t)n * in_size(from), cudaMemcpyDeviceToDevice, s), "identity copy of %lld elements",
            (long long)n);
    return QUANT_OK;
  }
  switch (from) {
    case InType::F32: return cast_from<float>(src.data, dst.data, to, n, s, err);
    case InType::BF16: return cast_from<__nv_bfloat16>(src.data, dst.data, to, n, s, err);
    case InType::F16: return cast_from<__half>(src.data, dst.data, to, n, s, err);
  }
  return fail(err, QUANT_ERROR_INTERNAL, "identity: input type");
}

int32_t data_of(const quant_plugin_storage &st, const char *what, const quant_plugin_tensor **out, quant_plugin_error *err) {
  const quant_plugin_tensor *b = find_buffer(st, QUANT_BUFFER_DATA);
  if (b == nullptr) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%s: the storage has no DATA buffer", what);
  if (b->device_type != kDLCUDA) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%s: not on a CUDA device", what);
  *out = b;
  return QUANT_OK;
}

}  // namespace
}  // namespace lq

using namespace lq;

extern "C" int32_t lq_identity_quantize(const quant_plugin_quantize_args *a, quant_plugin_error *err) {
  LQ_TRY(check_device(a->input, "input", err));
  int64_t n = a->input.shape[0] * a->input.shape[1];
  const void *first = nullptr;
  for (int d = 0; d < 2; d++) {
    if (a->out[d].num_buffers == 0) continue;
    const quant_plugin_tensor *b = nullptr;
    LQ_TRY(data_of(a->out[d], d == 0 ? "out[rowwise]" : "out[columnwise]", &b, err));
    if (b->data == first) continue;  // a plain tensor's directions share one buffer
    first = b->data;
    LQ_TRY(cast(a->input, "input", *b, "data", n, stream_of(a->stream), err));
  }
  return QUANT_OK;
}

extern "C" int32_t lq_identity_dequantize(const quant_plugin_dequantize_args *a, quant_plugin_error *err) {
  LQ_TRY(check_device(a->out, "out", err));
  const quant_plugin_tensor *b = nullptr;
  LQ_TRY(data_of(a->storage, "storage", &b, err));
  return cast(*b, "data", a->out, "out", a->m * a->k, stream_of(a->stream), err);
}

extern "C" int32_t lq_identity_derive(const quant_plugin_derive_args *a, quant_plugin_error *err) {
  const quant_plugin_tensor *from = nullptr, *to = nullptr;
  LQ_TRY(data_of(a->from, "from", &from, err));
  LQ_TRY(data_of(a->to, "to", &to, err));
  return cast(*from, "from data", *to, "to data", a->m * a->k, stream_of(a->stream), err);
}
