#!/bin/bash
# Device check of the FP8 heuristic workspace cap (cuda/gemm.cu kFp8HeuristicWorkspace,
# 2026-11-28): the GEMM and linear suites, the decode shape's FP8 rows against torch's
# (three runs), then every shape of bench/gpu_gemm.py.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 PYTHONUNBUFFERED=1
F=$PWD/build/final
mkdir -p /tmp/new && xz -dc $F/libquant.so.xz > /tmp/new/libquant.so
xz -dc $F/libquant_cuda.so.xz > /tmp/new/libquant_cuda.so
xz -dc $F/gputest.test.xz > /tmp/gputest.test && chmod +x /tmp/gputest.test
export LIBQUANT_CUDA_PLUGIN=/tmp/new/libquant_cuda.so
i=0
for g in 'TestGemm' 'TestLinear|TestGroupedLinear'; do
  i=$((i+1))
  (timeout 300 /tmp/gputest.test -test.count=1 -test.v -test.run "$g" > $OUT/t$i.log 2>&1; echo "rc=$?" >> $OUT/t$i.log) &
done
wait
cat $OUT/t1.log $OUT/t2.log > $OUT/tests.log && rm $OUT/t1.log $OUT/t2.log
echo "tests: passed $(grep -c -E '^\s*--- PASS' $OUT/tests.log) failed $(grep -c -E '^\s*--- FAIL' $OUT/tests.log); $(grep '^rc=' $OUT/tests.log | tr '\n' ' ')"
for r in 1 2 3; do
  timeout 60 python3 bench/gpu_gemm.py --lib /tmp/new/libquant.so --shapes 16x8192x8192 --linear '' --out /tmp/d$r > /dev/null 2>&1
  echo "decode new run $r: $(grep -E '^\| M16 N8192 K8192 \| (torch scaled_mm|torch._scaled|libquant fp8)' /tmp/d$r/bench_gemm.md | grep -v us | awk -F'|' '{printf "%s %s %s; ", $3, $4, $7}')"
  [ $r = 1 ] && cp /tmp/d$r/bench_gemm.md $OUT/decode_new1.md 2>/dev/null
done
timeout 200 python3 bench/gpu_gemm.py --lib /tmp/new/libquant.so --quick --out $OUT/all > $OUT/all.log 2>&1; echo "all shapes rc=$?"
grep -E "fp8|vs BF16" $OUT/all/bench_gemm.md | grep -v " us" | cut -c1-120 | head -30
