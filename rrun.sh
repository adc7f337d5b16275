#!/bin/bash
# Device run for branch raggedspeed (not committed): build, exactness, bench, ncu.
set -o pipefail
OUT=${OUT:-build/out}; mkdir -p $OUT
S=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
make -j16 cuda > $OUT/build.log 2>&1; echo "make cuda rc=$? $((SECONDS-S))s"; grep -E "error" $OUT/build.log | head
[ -f build/libquant_cuda.so ] || exit 1
export LIBQUANT_CUDA_PLUGIN=$PWD/build/libquant_cuda.so
: > $OUT/tests.log
for pat in ${TESTS}; do
  timeout ${TEST_T:-120} build/gputest.test -test.count=1 -test.v -test.run "$pat" >> $OUT/tests.log 2>&1; echo "test $pat rc=$? $((SECONDS-S))s"
done
echo "passed: $(grep -c -E '^\s*--- PASS' $OUT/tests.log) failed: $(grep -c -E '^\s*--- FAIL' $OUT/tests.log)"
grep -E '^\s*--- FAIL|Error Trace|differ|mismatch' $OUT/tests.log | head -20
timeout ${BENCH_T:-150} python3 bench/gpu_quantize.py --shapes ${SHAPES:-8192x8192,8191x8191} ${FORMATS:+--formats "$FORMATS"} --compile-budget 0 --out $OUT > $OUT/quant.log 2>&1; echo "bench rc=$? $((SECONDS-S))s"
grep -E "^\| " $OUT/quant.log | grep -v MoE | cut -d'|' -f2-9 | head -80
if [ -n "${NCU:-}" ]; then
  timeout ${NCU_T:-90} ncu --clock-control none -k regex:"${NCU_KERNEL}" --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats \
    python3 bench/ncu_quantize.py $NCU > $OUT/ncu.log 2>&1; echo "ncu rc=$? $((SECONDS-S))s"
  grep -E "Registers Per|Achieved Occupancy|Theoretical Occupancy|DRAM Throughput|Memory Throughput|Duration|Block Limit|Stall|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth" $OUT/ncu.log | head -40
fi
rm -f $OUT/bench_gpu.json
echo "total $((SECONDS-S))s"
