#!/bin/bash
# The fused Hopper GEMM on the GPU machine in one command: build, precision
# probe, exactness checks, compute-sanitizer on small ragged shapes, timings,
# the peers (BF16 cuBLAS, torch._scaled_mm) in the same session, ncu on two
# shapes, then the plugin (make cuda), the Go GPU GEMM tests through it
# (build/gputest.test, built beforehand where Go is:
#   go test -c -o build/gputest.test ./cuda/gputest), gpu_gemm.py, and the
# decode shapes as CUDA graphs (bench/gemm_graph.py).
#   bash bench/gpu_fused.sh   (logs under $OUT when set, else build/)
set -o pipefail
out=${OUT:-build}
mkdir -p build "$out"
nvidia-smi -L | tee -a "$out/all.log"
nvcc -O3 -std=c++17 -lineinfo -gencode=arch=compute_90a,code=sm_90a -o build/fused_check cuda/gputest/fused_check.cu 2>&1 | tee -a "$out/all.log" || exit 1
(make -j16 cuda > build/plugin_build.log 2>&1; echo "plugin build rc=$?" >> build/plugin_build.log) &
rc=0
timeout 300 build/fused_check check 2>&1 | grep -v "^probe " | tee -a "$out/all.log" || rc=1
if command -v compute-sanitizer >/dev/null; then
  timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 build/fused_check small 2>&1 | tail -8 | tee -a "$out/all.log" || rc=1
fi
timeout 300 build/fused_check bench 2>&1 | tee -a "$out/all.log" || rc=1
PYTHONUNBUFFERED=1 timeout 200 python3 bench/gpu_gemm_peers.py 2>&1 | tee -a "$out/all.log" || rc=1
if command -v ncu >/dev/null; then
  for s in "8192 8192 8192 mxfp8" "16 8192 8192 mxfp8"; do
    timeout 120 ncu --kernel-name regex:fused_gemm --launch-skip 3 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
      build/fused_check one $s 2>&1 | grep -v "^==PROF==" | tail -80 >> "$out/ncu.log"
  done
fi
wait
tail -3 build/plugin_build.log | tee -a "$out/all.log"
if [ -x build/gputest.test ] && [ -f build/libquant_cuda.so ]; then
  LIBQUANT_CUDA_PLUGIN=$PWD/build/libquant_cuda.so timeout 200 build/gputest.test -test.count=1 -test.v \
    -test.run 'TestGemmFused|TestGemmMatchesCPU/^(mxfp8|nvfp4|mxfp4)_x_(mxfp8|nvfp4|mxfp4)$' > "$out/gputest.log" 2>&1 || rc=1
  grep -E "^(---|ok|FAIL|PASS)|fused_test|largest" "$out/gputest.log" | tail -40
fi
if [ -f build/libquant.so ] && [ -f build/libquant_cuda.so ]; then
  PYTHONUNBUFFERED=1 timeout 240 python3 bench/gpu_gemm.py --out "$out" > "$out/gpu_gemm.log" 2>&1 || rc=1
  grep -E "^\| |Host time" "$out/gpu_gemm.log" | grep -v -- "--- |" | tail -60
  # Where the fused kernel stops paying (the dispatch threshold): a few M.
  PYTHONUNBUFFERED=1 timeout 120 python3 bench/gpu_gemm.py --quick --shapes 32x8192x8192,64x8192x8192,128x8192x8192,256x8192x8192 \
    --out "$out/mid" > "$out/gpu_gemm_mid.log" 2>&1 || rc=1
  grep -E "^\| .*(mxfp|nvfp|bf16)" "$out/gpu_gemm_mid.log" | grep -v "x nvfp4" | tail -40
  # The decode shapes without the host (CUDA graphs of both sides): below
  # about 25 µs gpu_gemm.py's Python loop times the host, not the GPU.
  PYTHONUNBUFFERED=1 timeout 200 python3 bench/gemm_graph.py --lib build/libquant.so \
    --shapes 16x8192x8192,1x8192x8192,16x28672x8192,32x8192x8192,16x4096x8192,16x2048x8192,16x1024x8192 \
    > "$out/gemm_graph.log" 2>&1 || rc=1
  grep "^| M" "$out/gemm_graph.log"
fi
exit $rc
