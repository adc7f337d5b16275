/* A caller that includes dlpack.h before quant.h: quant.h must use the
 * caller's DLPack declarations instead of its own. This stands in for dlpack.h
 * v1.1 (its guard macro and its DLTensor), with a marker field our copy lacks,
 * to prove quant.h's copy was skipped. */
#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_
#include <stdint.h>
typedef enum { kDLCPU = 1, kDLCUDA = 2 } DLDeviceType;
typedef struct { DLDeviceType device_type; int32_t device_id; } DLDevice;
typedef enum { kDLInt = 0U, kDLUInt = 1U, kDLFloat = 2U, kDLBfloat = 4U } DLDataTypeCode;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct {
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides;
  uint64_t byte_offset;
} DLTensor;
typedef struct { DLTensor dl_tensor; void *manager_ctx; } DLManagedTensor; /* only in dlpack.h */
#endif
#include "quant.h"

int quant_dlpack_first_check(DLManagedTensor *m);
int quant_dlpack_first_check(DLManagedTensor *m) {
  quant_buffer_desc d;
  d.dtype.code = kDLFloat;
  return m->dl_tensor.ndim + d.dtype.code;
}
