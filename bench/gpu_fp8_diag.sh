#!/bin/bash
# One device call: why libquant's FP8 GEMMs differ from torch's (issue #11 item 5).
# Carries build/libquant.so, build/libquant_cuda.so, build/lt_probe (built here:
# make lib; make cuda; nvcc ... bench/lt_probe.cu). Results under $OUT/diag.log.
# STEPS: any of probe trace time gputest bench (default: probe trace time).
set -u
OUT=${OUT:-/tmp/out}
mkdir -p $OUT
L=$OUT/diag.log
exec > >(tee -a $L) 2>&1
STEPS=${STEPS:-"probe trace time"}
want() { [[ " $STEPS " == *" $1 "* ]]; }
log() { echo "== $(date +%T) [${SECONDS}s] $*"; }
export PYTHONUNBUFFERED=1 LIBQUANT_CUDA_PLUGIN=$PWD/build/libquant_cuda.so LD_LIBRARY_PATH=/usr/local/cuda/lib64
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw,power.limit --format=csv,noheader
TLIB=$(python3 -c "
import torch; torch.zeros(1, device='cuda') @ torch.zeros(1, device='cuda')
print(sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libcublasLt' in l})[0].rsplit('/', 1)[0])")
log "torch's cuBLASLt: $TLIB; toolkit's: $(ls /usr/local/cuda/lib64/libcublasLt.so.* | tr '\n' ' ')"
if want probe; then
  for lib in "$TLIB" /usr/local/cuda/lib64; do
    for p in "16384 28672 8192 tensor" "8192 8192 8192 tensor" "4096 4096 4096 tensor" "4096 4096 4096 blk1d" "4096 4096 4096 blk2d" ${PROBE_MORE:-}; do
      log "probe $p with $lib"
      LD_LIBRARY_PATH=$lib timeout 100 build/lt_probe $p 8
    done
  done
fi
if want trace; then
  log "cuBLASLt trace of one call each side"
  CUBLASLT_LOG_LEVEL=2 timeout 120 python3 bench/gpu_fp8_vs_torch.py --once --shapes 16384x28672x8192,4096x4096x4096 > $OUT/trace.log 2>&1
  echo "trace rc=$?"
  grep -E "^===|cublasLtMatmul\b|cublasLtMatmul\(|AlgoGetHeuristic|PreferenceSetAttribute" $OUT/trace.log | cut -c1-1500 | head -80
  rm -f $OUT/trace.log
fi
if want time; then
  log "alternating timing, kernels per call"
  timeout 200 python3 bench/gpu_fp8_vs_torch.py --rounds ${ROUNDS:-3} ${SHAPES:+--shapes $SHAPES}
  echo "time rc=$?"
fi
if want gputest; then
  log gputest
  timeout 150 build/gputest.test -test.count=1 -test.v -test.run 'TestGemm' > $OUT/gputest.log 2>&1
  echo "gputest rc=$?"
  grep -c -E '^\s*--- PASS' $OUT/gputest.log; grep -E '^\s*--- FAIL|^(ok|FAIL|PASS)|panic' $OUT/gputest.log | head -20
fi
if want bench; then
  log bench
  timeout 200 python3 bench/gpu_gemm.py --linear "" --out $OUT ${BENCH_SHAPES:+--shapes $BENCH_SHAPES} > $OUT/gemm.log 2>&1
  echo "bench rc=$?"
  grep -E "^\| M.*(fp8|scaled_mm)" $OUT/bench_gemm.md
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
log done
