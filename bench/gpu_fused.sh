#!/bin/bash
# The fused Hopper GEMM on the GPU machine in one command: build, precision
# probe, exactness checks, compute-sanitizer on small ragged shapes, timings,
# and the peers (BF16 cuBLAS, torch._scaled_mm) in the same session.
#   bash bench/gpu_fused.sh   (logs under $OUT when set, else build/)
set -o pipefail
out=${OUT:-build}
mkdir -p build "$out"
nvidia-smi -L | tee "$out/device.log"
nvcc -O3 -std=c++17 -lineinfo -gencode=arch=compute_90a,code=sm_90a -o build/fused_check cuda/gputest/fused_check.cu 2>&1 | tee "$out/build.log" || exit 1
rc=0
timeout 300 build/fused_check check 2>&1 | tee "$out/check.log" || rc=1
if command -v compute-sanitizer >/dev/null; then
  timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 build/fused_check small 2>&1 | tail -25 | tee "$out/sanitizer.log" || rc=1
else
  echo "compute-sanitizer not found: memcheck skipped" | tee "$out/sanitizer.log"
fi
timeout 300 build/fused_check bench 2>&1 | tee "$out/bench.log" || rc=1
PYTHONUNBUFFERED=1 timeout 200 python3 bench/gpu_gemm_peers.py 2>&1 | tee "$out/peers.log" || rc=1
exit $rc
