// How the plugin launches its kernels (cuda/common.cuh's kernels and
// cuda/gemm_fused.cu's, which does not include common.cuh).
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace lq {

// Every kernel of the plugin is launched by launch_kernel, with programmatic
// stream serialization (programmatic dependent launch): the GPU may schedule
// the kernel while the kernel before it on the stream is still running or
// flushing, instead of after that kernel's completion has gone through the
// front end. So every kernel begins with pdl_wait(), which holds its threads
// until the kernel before it has completed and its memory writes are visible;
// nothing of the plugin reads or writes global memory before it (the kernel
// parameters are constant-bank data). A kernel launched after a memset, a
// copy, an event wait or a host function waits as a plain launch does.
// The kernels that do real work do not trigger their dependents early
// (pdl_trigger below): measured, that gained nothing over the implicit
// trigger at the kernel's end. The small kernels that replaced memsets ahead
// of a quantize kernel (zero_words_kernel and scale_padding_kernel in
// common.cuh) do.
// What it saves is the gap between two kernels: on an H200, 1.6-1.7 µs per
// boundary, 13 % of a 12 µs memory-bound kernel (bench/pdl_probe.cu;
// bench/RESULTS.md, 2026-11-29 11:20 section), and the host's enqueue is no
// slower than <<<>>>'s. cuda/gputest/source_test.go checks both rules in the
// sources: no <<<>>> launch, and pdl_wait() first in every kernel.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel on the stream (launched by launch_kernel) be
// scheduled now; it still waits in its pdl_wait() for this one's completion.
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// kern<<<grid, block, smem, s>>>(args...) with the attribute above, in
// thread-block clusters of `cluster` CTAs along x (1: none; grid.x a
// multiple of it). The launch error, if any, is the runtime's last error,
// as after <<<>>>: LQ_LAUNCHED reports it.
template <typename... P, typename... A>
inline cudaError_t launch_kernel_cluster(void (*kern)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, unsigned cluster,
                                         A &&...args) {
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = cluster;
  attr[1].val.clusterDim.y = 1;
  attr[1].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = cluster > 1 ? 2 : 1;
  return cudaLaunchKernelEx(&cfg, kern, std::forward<A>(args)...);
}

// launch_kernel_cluster without clusters.
template <typename... P, typename... A>
inline cudaError_t launch_kernel(void (*kern)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, A &&...args) {
  return launch_kernel_cluster(kern, grid, block, smem, s, 1, std::forward<A>(args)...);
}

}  // namespace lq
