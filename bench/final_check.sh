#!/bin/bash
# One device call that checks merged main (lead, 2026-11-25): the GPU test suite,
# the demo, the MLP on CUDA tensors, an mxfp8 aligned / ragged quantize pass and
# two gpu_gemm passes alternating a second plugin (v1/) with main's. Expects in
# build/final/ what bench/RESULTS.md ("Merged main ..., end of session") lists.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 PYTHONUNBUFFERED=1
F=${FINAL:-$PWD/build/final}
log() { echo "== $(date -u +%T) [${SECONDS}s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
(cd $F && xz -d -T16 *.xz v1/*.xz && chmod +x gputest.test demo mlp_train && cp libquant.so v1/)
export LIBQUANT_CUDA_PLUGIN=$F/libquant_cuda.so LIBQUANT_LIBRARY=$F/libquant.so
log gputest
timeout 320 $F/gputest.test -test.count=1 -test.v > $OUT/gputest.log 2>&1; echo "gputest rc=$?"
echo "passed: $(grep -c -E '^\s*--- PASS' $OUT/gputest.log)  failed: $(grep -c -E '^\s*--- FAIL' $OUT/gputest.log)  skipped: $(grep -c -E '^\s*--- SKIP' $OUT/gputest.log)"
grep -E '^\s*--- FAIL' $OUT/gputest.log | head -10; tail -2 $OUT/gputest.log
log demo
(cd $F && ./demo) > $OUT/demo.log 2>&1; echo "demo rc=$?"; grep -iE "mxfp8 .*mxfp8|nvfp4 .*nvfp4" $OUT/demo.log | grep -i cuda | head -3
log mlp
timeout 100 $F/mlp_train device=cuda > $OUT/mlp.log 2>&1; echo "mlp rc=$?"; grep -iE "fail|within|runs" $OUT/mlp.log | tail -4
log bench
python3 bench/gpu_quantize.py --lib $F/libquant.so --shapes 8192x8192,8191x8191 --quick --compile-budget 0 --formats "mxfp8 e4m3" --out $OUT/q 2>&1 | grep -E "mxfp8" | cut -c1-100
for p in 1 2; do for v in v1 .; do
  LIBQUANT_LIBRARY=$F/$v/libquant.so LIBQUANT_CUDA_PLUGIN=$F/$v/libquant_cuda.so timeout 100 python3 bench/gpu_gemm.py --lib $F/$v/libquant.so --shapes 4096x4096x4096,16x8192x8192 --quick --out $OUT/g$p$(basename $v) > /dev/null 2>&1
  echo "gemm $v pass $p rc=$?"; grep -E "libquant (mxfp8|mxfp4|nvfp4|mxfp8 x nvfp4) \||Linear mxfp8|Linear nvfp4|Linear fp8_block" $OUT/g$p$(basename $v)/bench_gemm.md | cut -c1-330
done; done
log done
