#!/bin/bash
# The device check of merged main (lead, 2026-11-25), in two calls that fit the
# 600 s limit:
#   bash bench/final_check.sh tests   the GPU test suite (RUN=pattern: part of it), the demo, the MLP on
#                                     CUDA tensors (about 350-450 s);
#   bash bench/final_check.sh bench   every format's quantize at 8192², 8191²
#                                     and 8191×8192, the GEMM and linear rows at
#                                     4096³ and the decode shape, and the torch
#                                     CUDA module suite (about 250 s);
#   bash bench/final_check.sh bench2  every format at 8192² and 2048×7168, the
#                                     MoE batch and the host time per call
#                                     (issue #15's table), the GEMM rows at
#                                     8192³ and the LLM shape (about 400 s).
# Expects in build/final/ (carried): libquant.so.xz, libquant_cuda.so.xz,
# gputest.test.xz, demo, mlp_train (and e2m1_bf16x2_check), built here from main (bench/RESULTS.md,
# "Merged main ..., end of session", lists the commands).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 PYTHONUNBUFFERED=1
F=${FINAL:-$PWD/build/final}
W=/tmp/final
log() { echo "== $(date -u +%T) [${SECONDS}s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
mkdir -p $W && for f in libquant.so libquant_cuda.so gputest.test; do [ -f $W/$f ] || xz -dc $F/$f.xz > $W/$f; done
cp $F/demo $F/mlp_train $W/ && chmod +x $W/gputest.test $W/demo $W/mlp_train
# gpu_quantize.py and gpu_gemm.py load the plugin beside --lib; gputest reads LIBQUANT_CUDA_PLUGIN.
export LIBQUANT_CUDA_PLUGIN=$W/libquant_cuda.so LIBQUANT_LIBRARY=$W/libquant.so
case "${1:-tests}" in
tests)
  log gputest
  timeout 500 $W/gputest.test -test.count=1 -test.v -test.run "${RUN:-.}" > $OUT/gputest.log 2>&1; echo "gputest rc=$?"
  echo "passed: $(grep -c -E '^\s*--- PASS' $OUT/gputest.log)  failed: $(grep -c -E '^\s*--- FAIL' $OUT/gputest.log)  skipped: $(grep -c -E '^\s*--- SKIP' $OUT/gputest.log)"
  grep -E '^\s*--- FAIL' $OUT/gputest.log | head -10; tail -2 $OUT/gputest.log
  log demo
  (cd $W && ./demo) > $OUT/demo.log 2>&1; echo "demo rc=$?"; grep -A7 "GEMM support on cuda" $OUT/demo.log
  log mlp
  timeout 100 $W/mlp_train device=cuda > $OUT/mlp.log 2>&1; echo "mlp rc=$?"; grep -iE "fail|within|runs" $OUT/mlp.log | tail -4
  if [ -f $F/e2m1_bf16x2_check ]; then  # make e2m1-bf16x2-check's binary, built here
    log e2m1_bf16x2_check; cp $F/e2m1_bf16x2_check $W/ && chmod +x $W/e2m1_bf16x2_check && timeout 60 $W/e2m1_bf16x2_check 2>&1 | tail -2
  fi
  ;;
bench)
  log quantize
  timeout 240 python3 bench/gpu_quantize.py --lib $W/libquant.so --shapes 8192x8192,8191x8191,8191x8192 --quick --compile-budget 0 \
    --formats "fp8 current e4m3,fp8 delayed e4m3,mxfp8 e4m3,mxfp4,nvfp4 1x16,nvfp4 1x16 rht,nvfp4 16x16,fp8_block 1x128,fp8_block 128x128" \
    --out $OUT/q > $OUT/q.log 2>&1; echo "quantize rc=$?"
  log gemm
  timeout 150 python3 bench/gpu_gemm.py --lib $W/libquant.so --shapes 4096x4096x4096,16x8192x8192 --quick --out $OUT/g > $OUT/g.log 2>&1
  echo "gemm rc=$?"; grep -E "libquant (mxfp8|mxfp4|nvfp4|mxfp8 x nvfp4) \||Linear " $OUT/g/bench_gemm.md | cut -c1-200
  log pytest
  timeout 200 python3 -m pytest -q -rfsx python/tests/test_torch_cuda.py python/tests/test_torch_modules.py python/tests/test_torch_compile.py -k cuda > $OUT/pytest.log 2>&1
  echo "pytest rc=$?"; tail -2 $OUT/pytest.log
  ;;
bench2)
  log quantize
  timeout 330 python3 bench/gpu_quantize.py --lib $W/libquant.so --shapes 8192x8192,2048x7168 --compile-budget 0 \
    --out $OUT/q2 > $OUT/q2.log 2>&1; echo "quantize rc=$?"; tail -12 $OUT/q2.log
  log gemm
  timeout 200 python3 bench/gpu_gemm.py --lib $W/libquant.so --shapes 8192x8192x8192,16384x28672x8192 --linear '' --quick \
    --out $OUT/g2 > $OUT/g2.log 2>&1
  echo "gemm rc=$?"; grep -E "libquant (mxfp8|mxfp4|nvfp4|mxfp8 x nvfp4) \|" $OUT/g2/bench_gemm.md | cut -c1-200
  ;;
esac
log done
