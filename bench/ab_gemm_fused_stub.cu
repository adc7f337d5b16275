// For quantize A/B plugins only (bench/ab_plugins.sh; never shipped): the
// fused GEMM's entry points (cuda/gemm_fused.cuh), refusing every call, linked
// in place of gemm_fused.o, whose 24 MB of compressed fatbin would leave no
// room in a device call's carry for two whole plugins. Built like the
// plugin's objects:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Icuda -Iinclude \
//     -Xcompiler -fPIC,-fvisibility=hidden -c -o gemm_fused.o bench/ab_gemm_fused_stub.cu
#include "gemm_fused.cuh"
namespace qfused {
cudaError_t gemm(Params, cudaStream_t) { return cudaErrorInvalidValue; }
bool takes(Params) { return false; }
bool beats_expansion(Params) { return false; }
bool device_ok(int) { return false; }
}  // namespace qfused
