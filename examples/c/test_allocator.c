/* test_allocator: quant_set_device_allocator. Device buffers come from the
 * caller's callbacks while an allocator is set, every buffer goes back through
 * the allocator it came from (also after the allocator is changed or removed),
 * a refusal is QUANT_ERROR_OUT_OF_MEMORY, and bad arguments are errors naming
 * them. "CUDA" here is build/libquant_fake_cuda.so (host memory, kernels that
 * do nothing): this checks libquant's bookkeeping, not CUDA. */
#include <stdint.h>
#include <stdlib.h>

#include "check.h"

enum { MAX_LIVE = 64 };

typedef struct {
  int allocs, frees, refuse;
  void *live[MAX_LIVE];
  int32_t last_device;
  void *last_stream;
} pool;

static int32_t pool_alloc(void *user, int32_t device_id, size_t nbytes, void *stream, void **out) {
  pool *p = (pool *)user;
  int i;
  if (p->refuse) return 7;
  p->last_device = device_id;
  p->last_stream = stream;
  for (i = 0; i < MAX_LIVE; i++) {
    if (p->live[i] == NULL) {
      p->live[i] = calloc(1, nbytes);
      p->allocs++;
      *out = p->live[i];
      return p->live[i] == NULL;
    }
  }
  return 1;
}

static void pool_free(void *user, int32_t device_id, void *ptr, void *stream) {
  pool *p = (pool *)user;
  int i;
  (void)device_id;
  (void)stream;
  for (i = 0; i < MAX_LIVE; i++) {
    if (p->live[i] == ptr) {
      free(ptr);
      p->live[i] = NULL;
      p->frees++;
      return;
    }
  }
  fprintf(stderr, "test_allocator: free of %p, which this pool did not allocate\n", ptr);
  abort();
}

static quant_qtensor *quantize_cuda(quant_quantizer *q, uint16_t *x, int64_t *shape, void *stream) {
  DLTensor in = check_tensor(x, kDLBfloat, 16, 2, shape);
  quant_quantize_options o;
  quant_qtensor *t = NULL;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.stream = stream;
  in.device.device_type = kDLCUDA;
  EXPECT_OK(quant_quantize(q, &in, &o, &t));
  return t;
}

int main(void) {
  static uint16_t x[64 * 64];
  int64_t shape[2] = {64, 64};
  size_t idx;
  pool a, b;
  quant_device_allocator al;
  quant_quantizer_config cfg = check_config("mxfp8");
  quant_quantizer *q = NULL;
  quant_qtensor *t0, *t1, *t2;
  void *stream = (void *)(uintptr_t)0x1234;

  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  memset(&al, 0, sizeof al);
  al.struct_size = sizeof al;
  al.alloc = pool_alloc;
  al.free = pool_free;
  al.user_data = &a;

  /* Before any plugin serves CUDA memory: nothing to replace. */
  EXPECT_ERR(quant_set_device_allocator(kDLCUDA, &al), QUANT_ERROR_DEVICE_UNAVAILABLE, "cuda");
  EXPECT_ERR(quant_set_device_allocator(kDLCPU, &al), QUANT_ERROR_UNSUPPORTED, "device_type");
  EXPECT_ERR(quant_set_device_allocator(99, &al), QUANT_ERROR_INVALID_ARGUMENT, "device_type: 99");

  EXPECT_OK(quant_plugin_load("build/libquant_fake_cuda.so", &idx));
  EXPECT_OK(quant_quantizer_create(&cfg, &q));
  quant_quantizer_set_usage(q, QUANT_USAGE_ROWWISE | QUANT_USAGE_COLUMNWISE);

  al.struct_size = 8;
  EXPECT_ERR(quant_set_device_allocator(kDLCUDA, &al), QUANT_ERROR_INVALID_ARGUMENT, "allocator: struct_size 8");
  al.struct_size = sizeof al;
  al.free = NULL;
  EXPECT_ERR(quant_set_device_allocator(kDLCUDA, &al), QUANT_ERROR_INVALID_ARGUMENT, "allocator.free: is NULL");
  al.free = pool_free;

  /* t0 from the plugin, t1 from pool a, t2 from pool b. */
  t0 = quantize_cuda(q, x, shape, stream);
  CHECK(a.allocs == 0);
  EXPECT_OK(quant_set_device_allocator(kDLCUDA, &al));
  t1 = quantize_cuda(q, x, shape, stream);
  CHECK(a.allocs > 0 && a.frees == 0);
  CHECK(a.last_device == 0 && a.last_stream == stream);
  al.user_data = &b;
  EXPECT_OK(quant_set_device_allocator(kDLCUDA, &al));
  t2 = quantize_cuda(q, x, shape, stream);
  CHECK(b.allocs == a.allocs);
  EXPECT_OK(quant_set_device_allocator(kDLCUDA, NULL)); /* back to the plugin */

  /* Every buffer goes back where it came from. */
  EXPECT_OK(quant_qtensor_free(t1));
  CHECK(a.frees == a.allocs);
  EXPECT_OK(quant_qtensor_free(t2));
  CHECK(b.frees == b.allocs);
  EXPECT_OK(quant_qtensor_free(t0));
  CHECK(a.frees == a.allocs && b.frees == b.allocs);

  /* A refusal fails the call with OUT_OF_MEMORY and leaks nothing. */
  al.user_data = &a;
  a.refuse = 1;
  EXPECT_OK(quant_set_device_allocator(kDLCUDA, &al));
  {
    DLTensor in = check_tensor(x, kDLBfloat, 16, 2, shape);
    quant_qtensor *t = NULL;
    in.device.device_type = kDLCUDA;
    EXPECT_ERR(quant_quantize(q, &in, NULL, &t), QUANT_ERROR_OUT_OF_MEMORY, "quant_set_device_allocator");
    CHECK(t == NULL);
  }
  CHECK(a.frees == a.allocs);
  EXPECT_OK(quant_set_device_allocator(kDLCUDA, NULL));
  quant_quantizer_free(q);
  return check_summary("test_allocator");
}
