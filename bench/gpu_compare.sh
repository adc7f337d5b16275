#!/bin/bash
# One device call: builds the CUDA plugin (with the ptxas resource report) and,
# given OLD_SRC, an older plugin from OLD_SRC/cuda/*.cu next to a copy of
# build/libquant.so in build/old/; times the formats with
# bench/gpu_quantize.py for both (same run, same machine); runs the GPU
# exactness suite. Results under $OUT. Run it in the repository root on the
# GPU machine, with build/libquant.so and build/gputest.test built beforehand
# (make lib; go test -c -o build/gputest.test ./cuda/gputest) and, for the
# comparison, the old sources extracted, e.g.
#   git archive <commit> cuda | tar -x -C build/old_src   (then OLD_SRC=build/old_src)
# Environment: OUT (default /tmp/out), OLD_SRC, FORMATS (bench names, comma
# separated), COMPILE_BUDGET (seconds of torch.compile, default 0).
set -u
OUT=${OUT:-/tmp/out}
OLD_SRC=${OLD_SRC:-}
F=${FORMATS:-"fp8 current e4m3,fp8 delayed e4m3,mxfp8 e4m3,mxfp4,nvfp4 1x16,nvfp4 16x16,fp8_block 1x128,fp8_block 128x128"}
mkdir -p $OUT
log() { echo "== $(date +%T) [${SECONDS}s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
log build
( make -j16 cuda NVCCFLAGS="-O3 -std=c++17 -lineinfo -Xptxas -v" > $OUT/build.log 2>&1; echo "new build rc=$?" ) &
if [ -n "$OLD_SRC" ]; then
  ( mkdir -p build/old && cp build/libquant.so build/old/ &&
    for f in $OLD_SRC/cuda/*.cu; do
      nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Iinclude -I$OLD_SRC/cuda -Xcompiler -fPIC,-fvisibility=hidden \
        -c -o build/old/$(basename $f .cu).o $f &
    done; wait
    nvcc -gencode=arch=compute_90a,code=sm_90a -shared -cudart static -Xlinker --version-script=$PWD/cuda/libquant_cuda.map \
      -o build/old/libquant_cuda.so build/old/*.o; echo "old build rc=$?" ) > /tmp/old_build.log 2>&1 &
fi
wait
[ -n "$OLD_SRC" ] && tail -2 /tmp/old_build.log
grep -E "error" $OUT/build.log | head -30
export PYTHONUNBUFFERED=1
if [ -f build/libquant_cuda.so ]; then
  log bench
  python3 bench/gpu_quantize.py --formats "$F" --compile-budget ${COMPILE_BUDGET:-0} --out $OUT/after > $OUT/bench.log 2>&1; echo "rc=$?"
fi
if [ -n "$OLD_SRC" ]; then
  log bench old plugin
  python3 bench/gpu_quantize.py --lib build/old/libquant.so --formats "$F" --compile-budget 0 --label before --out $OUT/before >> $OUT/bench.log 2>&1
  echo "rc=$?"
fi
if [ -f build/libquant_cuda.so ]; then
  log gputest
  timeout $((575 - SECONDS)) env LIBQUANT_CUDA_PLUGIN=build/libquant_cuda.so build/gputest.test -test.v > $OUT/gputest.log 2>&1
  echo "gputest rc=$?"
  grep -c -E '^\s*--- PASS' $OUT/gputest.log; grep -E '^\s*--- FAIL|^(ok|FAIL|PASS)' $OUT/gputest.log | head -20
fi
rm -f $OUT/*/bench_gpu.json
log tables
grep "^| 8192x8192" $OUT/after/bench_gpu.md
grep -h "us per call" $OUT/*/bench_gpu.md
log done
