// libquant_cuda.so: libquant's CUDA plugin. quant_plugin_get fills the table
// (include/quant_plugin.h): CUDA kernels for the built-in formats and the
// stream-ordered device memory the host allocates quantized tensors with.
// Loading the plugin starts no CUDA work; the first kernel or allocation does.
#include <mutex>

#include "common.cuh"

using namespace lq;

namespace lq {

// One pool per device, made at its first allocation and kept for the life of
// the process (common.cuh, pool_malloc_async).
constexpr int kMaxPoolDevices = 64;
cudaMemPool_t g_pools[kMaxPoolDevices];
std::mutex g_pools_mu;

cudaError_t pool_malloc_async(void **p, size_t bytes, cudaStream_t s) {
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  if (dev < 0 || dev >= kMaxPoolDevices) return cudaMallocAsync(p, bytes, s);
  cudaMemPool_t pool;
  {
    std::lock_guard<std::mutex> lock(g_pools_mu);
    pool = g_pools[dev];
    if (pool == nullptr) {
      cudaMemPoolProps props{};
      props.allocType = cudaMemAllocationTypePinned;
      props.location.type = cudaMemLocationTypeDevice;
      props.location.id = dev;
      if ((e = cudaMemPoolCreate(&pool, &props)) != cudaSuccess) return e;
      uint64_t keep = UINT64_MAX;
      if ((e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep)) != cudaSuccess) {
        cudaMemPoolDestroy(pool);
        return e;
      }
      g_pools[dev] = pool;
    }
  }
  return cudaMallocFromPoolAsync(p, bytes, pool, s);
}

}  // namespace lq

namespace {

// Every entry point turns a C++ exception (none is expected: this code throws
// nothing, but the CUDA runtime is C++ underneath) into a status.
template <typename F>
int32_t guarded(quant_plugin_error *err, F f) {
  try {
    return f();
  } catch (...) {
    return fail(err, QUANT_ERROR_INTERNAL, "unexpected C++ exception in the CUDA plugin");
  }
}

#define LQ_ARGS(a)                                                                               \
  do {                                                                                           \
    if ((a) == nullptr) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "args: NULL");            \
  } while (0)

int32_t check_2d(const quant_plugin_tensor &t, const char *arg, quant_plugin_error *err) {
  if (t.ndim != 2) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%s: rank %d, want the 2-D view", arg, t.ndim);
  if (t.shape[0] < 0 || t.shape[1] < 0) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%s: negative dims", arg);
  if (t.data == nullptr && t.shape[0] * t.shape[1] > 0) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%s: data is NULL", arg);
  return QUANT_OK;
}

// arg: the argument's name in messages ("params", "items[3].params").
int32_t check_params(const quant_plugin_params *p, const char *arg, quant_plugin_error *err) {
  if (p == nullptr) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%s: NULL", arg);
  if (p->struct_size < offsetof(quant_plugin_params, reserved1))
    return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "%s: struct_size %u is too small", arg, p->struct_size);
  return QUANT_OK;
}
int32_t check_params(const quant_plugin_params *p, quant_plugin_error *err) { return check_params(p, "params", err); }

// The status st of a check of items[i]'s field in a grouped entry, whose
// message names the field alone ("params: NULL"), prefixed with "items[i]."
// (formatted only when the check fails: a group's items are checked on
// every call).
int32_t item_status(int32_t st, uint32_t i, quant_plugin_error *err) {
  if (st == QUANT_OK || err == nullptr) return st;
  char m[sizeof err->message];
  memcpy(m, err->message, sizeof m);
  m[sizeof m - 1] = 0;
  return fail(err, st, "items[%u].%s", i, m);
}

// Kernel entry points with argument checks common to every format.
int32_t amax_entry(const quant_plugin_amax_args *a, quant_plugin_error *err, int32_t (*fn)(const quant_plugin_amax_args *, quant_plugin_error *)) {
  LQ_ARGS(a);
  LQ_TRY(check_params(a->params, err));
  LQ_TRY(check_2d(a->input, "input", err));
  return guarded(err, [&] { return fn(a, err); });
}

int32_t quantize_entry(const quant_plugin_quantize_args *a, quant_plugin_error *err,
                       int32_t (*fn)(const quant_plugin_quantize_args *, quant_plugin_error *)) {
  LQ_ARGS(a);
  LQ_TRY(check_params(a->params, err));
  LQ_TRY(check_2d(a->input, "input", err));
  if (a->input.shape[0] * a->input.shape[1] > 0 && a->input.data == nullptr)
    return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "input: data is NULL");
  return guarded(err, [&] { return fn(a, err); });
}

int32_t dequantize_entry(const quant_plugin_dequantize_args *a, quant_plugin_error *err,
                         int32_t (*fn)(const quant_plugin_dequantize_args *, quant_plugin_error *)) {
  LQ_ARGS(a);
  LQ_TRY(check_params(a->params, err));
  if (a->direction != QUANT_DIRECTION_ROWWISE && a->direction != QUANT_DIRECTION_COLUMNWISE)
    return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "direction: %u is not rowwise or columnwise", a->direction);
  if (numel(a->out) != a->m * a->k) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "out: element count differs from m*k");
  return guarded(err, [&] { return fn(a, err); });
}

#define AMAX(name, fn) \
  int32_t name(const quant_plugin_amax_args *a, quant_plugin_error *err) { return amax_entry(a, err, fn); }
#define QUANTIZE(name, fn) \
  int32_t name(const quant_plugin_quantize_args *a, quant_plugin_error *err) { return quantize_entry(a, err, fn); }
#define DEQUANTIZE(name, fn) \
  int32_t name(const quant_plugin_dequantize_args *a, quant_plugin_error *err) { return dequantize_entry(a, err, fn); }

AMAX(fp8_amax, lq_fp8_amax)
QUANTIZE(fp8_quantize, lq_fp8_quantize)
DEQUANTIZE(fp8_dequantize, lq_fp8_dequantize)
AMAX(mx_amax, lq_global_amax)
QUANTIZE(mx_quantize, lq_mx_quantize)
DEQUANTIZE(mx_dequantize, lq_mx_dequantize)
AMAX(nvfp4_amax, lq_nvfp4_amax)
QUANTIZE(nvfp4_quantize, lq_nvfp4_quantize)
DEQUANTIZE(nvfp4_dequantize, lq_nvfp4_dequantize)

QUANTIZE(identity_quantize, lq_identity_quantize)
DEQUANTIZE(identity_dequantize, lq_identity_dequantize)

QUANTIZE(block_quantize, lq_block_quantize)
DEQUANTIZE(block_dequantize, lq_block_dequantize)

int32_t block_derive(const quant_plugin_derive_args *a, quant_plugin_error *err) {
  LQ_ARGS(a);
  LQ_TRY(check_params(a->params, err));
  return guarded(err, [&] { return lq_block_derive(a, err); });
}

int32_t fp8_derive(const quant_plugin_derive_args *a, quant_plugin_error *err) {
  LQ_ARGS(a);
  return guarded(err, [&] { return lq_fp8_derive(a, err); });
}
int32_t identity_derive(const quant_plugin_derive_args *a, quant_plugin_error *err) {
  LQ_ARGS(a);
  return guarded(err, [&] { return lq_identity_derive(a, err); });
}
int32_t nvfp4_derive(const quant_plugin_derive_args *a, quant_plugin_error *err) {
  LQ_ARGS(a);
  LQ_TRY(check_params(a->params, err));
  return guarded(err, [&] { return lq_nvfp4_derive(a, err); });
}
int32_t mx_swizzle(const quant_plugin_swizzle_args *a, quant_plugin_error *err) {
  LQ_ARGS(a);
  LQ_TRY(check_params(a->params, err));
  return guarded(err, [&] { return lq_mx_swizzle(a, err); });
}
int32_t nvfp4_swizzle(const quant_plugin_swizzle_args *a, quant_plugin_error *err) {
  LQ_ARGS(a);
  LQ_TRY(check_params(a->params, err));
  return guarded(err, [&] { return lq_nvfp4_swizzle(a, err); });
}

// ---------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------

int32_t check_mem_device(int32_t id, quant_plugin_error *err) {
  int cur = -1;
  LQ_TRY(current_device(id, &cur, err));
  if (cur != id)
    return fail(err, QUANT_ERROR_INVALID_ARGUMENT,
                "device: cuda:%d asked for, but the calling thread's current device is cuda:%d; make it current first", id, cur);
  return QUANT_OK;
}

int32_t mem_device_count(int32_t *count, quant_plugin_error *err) {
  if (count == nullptr) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "count: NULL");
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
    cudaGetLastError();
    *count = 0;
    return QUANT_OK;
  }
  LQ_CUDA(e, "cudaGetDeviceCount");
  *count = n;
  return QUANT_OK;
}

int32_t mem_alloc(quant_plugin_memory_args *a, quant_plugin_error *err) {
  LQ_ARGS(a);
  a->ptr = nullptr;
  if (a->nbytes == 0) return QUANT_OK;
  LQ_TRY(check_mem_device(a->device_id, err));
  LQ_CUDA(pool_malloc_async(&a->ptr, a->nbytes, stream_of(a->stream)), "cudaMallocFromPoolAsync of %llu bytes on cuda:%d",
          (unsigned long long)a->nbytes, a->device_id);
  return QUANT_OK;
}

int32_t mem_free(quant_plugin_memory_args *a, quant_plugin_error *err) {
  LQ_ARGS(a);
  if (a->ptr == nullptr) return QUANT_OK;
  LQ_CUDA(cudaFreeAsync(a->ptr, stream_of(a->stream)), "cudaFreeAsync on cuda:%d", a->device_id);
  return QUANT_OK;
}

int32_t mem_copy(quant_plugin_memory_args *a, quant_plugin_error *err) {
  LQ_ARGS(a);
  if (a->nbytes == 0) return QUANT_OK;
  cudaMemcpyKind kind;
  switch (a->copy_kind) {
    case QUANT_PLUGIN_COPY_HOST_TO_DEVICE: kind = cudaMemcpyHostToDevice; break;
    case QUANT_PLUGIN_COPY_DEVICE_TO_HOST: kind = cudaMemcpyDeviceToHost; break;
    case QUANT_PLUGIN_COPY_DEVICE_TO_DEVICE: kind = cudaMemcpyDeviceToDevice; break;
    default: return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "copy_kind: %d is not a QUANT_PLUGIN_COPY_*", a->copy_kind);
  }
  if (a->ptr == nullptr || a->src == nullptr) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "copy: NULL pointer");
  LQ_CUDA(cudaMemcpyAsync(a->ptr, a->src, a->nbytes, kind, stream_of(a->stream)), "cudaMemcpyAsync of %llu bytes",
          (unsigned long long)a->nbytes);
  return QUANT_OK;
}

int32_t mem_set(quant_plugin_memory_args *a, quant_plugin_error *err) {
  LQ_ARGS(a);
  if (a->nbytes == 0) return QUANT_OK;
  if (a->ptr == nullptr) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "memset: NULL pointer");
  LQ_CUDA(cudaMemsetAsync(a->ptr, a->value, a->nbytes, stream_of(a->stream)), "cudaMemsetAsync of %llu bytes",
          (unsigned long long)a->nbytes);
  return QUANT_OK;
}

int32_t mem_sync(quant_plugin_memory_args *a, quant_plugin_error *err) {
  LQ_ARGS(a);
  LQ_CUDA(cudaStreamSynchronize(stream_of(a->stream)), "cudaStreamSynchronize");
  return QUANT_OK;
}

// ---------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------

// A group: every item gets the checks a single quantize gets.
int32_t grouped_entry(const quant_plugin_quantize_grouped_args *a, quant_plugin_error *err,
                      int32_t (*fn)(const quant_plugin_quantize_grouped_args *, quant_plugin_error *)) {
  LQ_ARGS(a);
  if (a->count > 0 && a->items == nullptr) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "items: NULL");
  for (uint32_t i = 0; i < a->count; i++) {
    const quant_plugin_quantize_args *q = &a->items[i];
    LQ_TRY(item_status(check_params(q->params, err), i, err));
    LQ_TRY(item_status(check_2d(q->input, "input", err), i, err));
  }
  return guarded(err, [&] { return fn(a, err); });
}

int32_t block_quantize_grouped(const quant_plugin_quantize_grouped_args *a, quant_plugin_error *err) {
  return grouped_entry(a, err, lq_block_quantize_grouped);
}
int32_t fp8_quantize_grouped(const quant_plugin_quantize_grouped_args *a, quant_plugin_error *err) {
  return grouped_entry(a, err, lq_fp8_quantize_grouped);
}
int32_t mx_quantize_grouped(const quant_plugin_quantize_grouped_args *a, quant_plugin_error *err) {
  return grouped_entry(a, err, lq_mx_quantize_grouped);
}
int32_t nvfp4_quantize_grouped(const quant_plugin_quantize_grouped_args *a, quant_plugin_error *err) {
  return grouped_entry(a, err, lq_nvfp4_quantize_grouped);
}

int32_t fp8_delayed_update(const quant_plugin_delayed_update_args *a, quant_plugin_error *err) {
  LQ_ARGS(a);
  LQ_TRY(check_params(a->params, err));
  return guarded(err, [&] { return lq_fp8_delayed_update(a, err); });
}

int32_t fp8_delayed_update_grouped(const quant_plugin_delayed_update_grouped_args *a, quant_plugin_error *err) {
  LQ_ARGS(a);
  if (a->count > 0 && a->items == nullptr) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "items: NULL");
  for (uint32_t i = 0; i < a->count; i++) LQ_TRY(item_status(check_params(a->items[i].params, err), i, err));
  return guarded(err, [&] { return lq_fp8_delayed_update_grouped(a, err); });
}

#define KERNELS(fmt, amax, quantize, dequantize, derive, swizzle, update, grouped, update_grouped) \
  { fmt, kDLCUDA, 0, amax, quantize, dequantize, derive, swizzle, nullptr, update, grouped, update_grouped, { nullptr } }

const quant_plugin_kernels kKernels[] = {
    KERNELS("fp8", fp8_amax, fp8_quantize, fp8_dequantize, fp8_derive, nullptr, fp8_delayed_update, fp8_quantize_grouped, fp8_delayed_update_grouped),
    KERNELS("fp8_block", mx_amax, block_quantize, block_dequantize, block_derive, nullptr, nullptr, block_quantize_grouped, nullptr),
    KERNELS("mxfp8", mx_amax, mx_quantize, mx_dequantize, nullptr, mx_swizzle, nullptr, mx_quantize_grouped, nullptr),
    KERNELS("mxfp4", mx_amax, mx_quantize, mx_dequantize, nullptr, mx_swizzle, nullptr, mx_quantize_grouped, nullptr),
    KERNELS("identity", mx_amax, identity_quantize, identity_dequantize, identity_derive, nullptr, nullptr, nullptr, nullptr),
    KERNELS("nvfp4", nvfp4_amax, nvfp4_quantize, nvfp4_dequantize, nvfp4_derive, nvfp4_swizzle, nullptr, nvfp4_quantize_grouped, nullptr),
};

int32_t gemm_entry(const quant_plugin_gemm_args *a, quant_plugin_error *err) {
  LQ_ARGS(a);
  if (a->struct_size < sizeof(quant_plugin_gemm_args))
    return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "args: struct_size %u is smaller than this plugin's %zu", a->struct_size,
                sizeof(quant_plugin_gemm_args));
  if (a->a.params != nullptr) LQ_TRY(check_params(a->a.params, "a.params", err));
  if (a->b.params != nullptr) LQ_TRY(check_params(a->b.params, "b.params", err));
  return guarded(err, [&] { return lq_gemm(a, err); });
}

int32_t gemm_support_entry(quant_plugin_gemm_support_args *a, quant_plugin_error *err) {
  LQ_ARGS(a);
  return guarded(err, [&] { return lq_gemm_support(a, err); });
}

const quant_plugin_gemm kGemm[] = {
    {kDLCUDA, 0, gemm_entry, gemm_support_entry, {nullptr, nullptr, nullptr, nullptr}},
};

const quant_plugin_memory kMemory[] = {
    {kDLCUDA, 0, mem_device_count, mem_alloc, mem_free, mem_copy, mem_set, mem_sync, {nullptr, nullptr, nullptr, nullptr}},
};

}  // namespace

extern "C" QUANT_PLUGIN_EXPORT int32_t quant_plugin_get(uint32_t host_abi_version, quant_plugin_table *table,
                                                       quant_plugin_error *err) {
  if (table == nullptr) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "table: NULL");
  // A host of ABI 1 is served without the GEMM (whose table fields it does
  // not have); a newer host is answered with this plugin's version, 2.
  const uint32_t v = host_abi_version == 1 ? 1u : QUANT_PLUGIN_ABI_VERSION;
  table->abi_version = v;
  if (host_abi_version < QUANT_PLUGIN_ABI_MIN_VERSION)
    return fail(err, QUANT_ERROR_PLUGIN, "cuda: built for plugin ABI %u (and %u), the host speaks %u", QUANT_PLUGIN_ABI_VERSION,
                QUANT_PLUGIN_ABI_MIN_VERSION, host_abi_version);
  const size_t need = v == 1 ? offsetof(quant_plugin_table, num_gemm) : sizeof(quant_plugin_table);
  if (table->struct_size < need)
    return fail(err, QUANT_ERROR_PLUGIN, "cuda: the host's table (%u bytes) is smaller than plugin ABI %u's (%zu)", table->struct_size, v,
                need);
  if (v >= 2) {
    table->num_gemm = 1;
    table->gemm = kGemm;
  }
  table->name = "cuda";
  table->version = "0.1.0";
  table->num_formats = 0;
  table->formats = nullptr;
  table->num_kernels = sizeof kKernels / sizeof kKernels[0];
  table->kernels = kKernels;
  table->num_memory = 1;
  table->memory = kMemory;
  return QUANT_OK;
}
