#!/bin/bash
# One device call for the quantize speed work (issue #15): builds the CUDA
# plugin (with the ptxas resource report), runs the GPU exactness suite, times
# quant_quantize_into from C (build/bench_dispatch) and runs
# bench/gpu_quantize.py (both shapes, the MoE batch, host time per call, copy
# bandwidth, torch.compile). Build here first: make lib build/bench_dispatch;
# go test -c -o build/gputest.test ./cuda/gputest. Results under $OUT.
# Environment: OUT (default /tmp/out), FORMATS (bench names, comma separated;
# empty: all), SHAPES, COMPILE_BUDGET (seconds, default 60), GPUTEST_RUN (a
# -test.run pattern; empty: all), SKIP_BENCH=1.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p $OUT
log() { echo "== $(date +%T) [${SECONDS}s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
log build
make -j16 cuda NVCCFLAGS="-O3 -std=c++17 -lineinfo -Xptxas -v" > $OUT/build.log 2>&1; echo "build rc=$?"
grep -E "error" $OUT/build.log | head -30
[ -f build/libquant_cuda.so ] || exit 1
log gputest
timeout 240 env LIBQUANT_CUDA_PLUGIN=build/libquant_cuda.so build/gputest.test -test.v ${GPUTEST_RUN:+-test.run "$GPUTEST_RUN"} > $OUT/gputest.log 2>&1
echo "gputest rc=$?"
grep -c -E '^\s*--- PASS' $OUT/gputest.log; grep -E '^\s*--- FAIL|^(ok|FAIL|PASS)|panic' $OUT/gputest.log | head -20
log CUDA runtime call costs on this machine
nvcc -O2 -arch=sm_90 -o build/launch_floor bench/launch_floor.cu && build/launch_floor | tee $OUT/launch_floor.log
log host time from C
rt=$(ls /usr/local/cuda/lib64/libcudart.so.1* 2>/dev/null | head -1)
[ -z "$rt" ] && rt=$(python3 -c "import nvidia.cuda_runtime, glob, os; print(glob.glob(os.path.join(nvidia.cuda_runtime.__path__[0], 'lib', 'libcudart.so*'))[0])" 2>/dev/null)
build/bench_dispatch build/libquant_cuda.so "$rt" 2>&1 | tee $OUT/dispatch.log
echo "-- the same against the fake CUDA plugin (libquant's own share: ABI, host, plugin dispatch; no CUDA call)"
build/bench_dispatch build/libquant_fake_cuda.so 2>&1 | tee -a $OUT/dispatch.log
[ "${SKIP_BENCH:-0}" = 1 ] && exit 0
log bench
export PYTHONUNBUFFERED=1
python3 bench/gpu_quantize.py ${FORMATS:+--formats "$FORMATS"} ${SHAPES:+--shapes "$SHAPES"} --compile-budget ${COMPILE_BUDGET:-60} --out $OUT > $OUT/bench.log 2>&1
echo "bench rc=$?"
rm -f $OUT/bench_gpu.json
if [ -n "${NCU:-}" ]; then
  # NCU="fmt usage shape [fields]": one kernel's counters (the reason for a miss).
  log ncu $NCU
  timeout 120 ncu --clock-control none -k regex:"${NCU_KERNEL:-quantize|block|cast|mx|nvfp4}" --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats \
    python3 bench/ncu_quantize.py $NCU > $OUT/ncu.log 2>&1; echo "ncu rc=$?"
  grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Stall|One or More|No Eligible|Issued Warp" $OUT/ncu.log | head -30
fi
log tables
grep -E "^\| (8192x8192|2048x7168)" $OUT/bench_gpu.md | cut -c1-150
sed -n '/^MoE batch/,$p' $OUT/bench_gpu.md
log done
