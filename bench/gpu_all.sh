#!/bin/bash
# Everything GPU-side in one device call, in the repository root of the GPU
# machine, with these built beforehand where Go is:
#   make lib build/demo build/mlp_train && go test -c -o build/gputest.test ./cuda/gputest
# (carry build/libquant.so, build/gputest.test, build/demo and build/mlp_train).
# It builds the CUDA plugin, runs the GPU = CPU exactness and GEMM suites
# (cuda/gputest), the Python suite on CUDA tensors (python/tests; torch's CUDA
# cases run there), the demo's cuda capability table, the MLP training on CUDA
# tensors with every recipe (make mlp DEVICE=cuda's run), and the benchmarks: quantize aligned vs
# ragged (8192² vs 8191²), GEMM against torch, the Python overhead, and the
# torch training step. Logs under $OUT (default build/out); a summary last.
# STEPS picks a subset (default all: gputest demo mlp pytest quantize overhead
# gemm train), to split the work over several device calls; BUDGET is the
# seconds the call may take (default 570).
set -u
STEPS=${STEPS:-"gputest demo mlp pytest quantize overhead gemm train"}
want() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
export LIBQUANT_LIBRARY=$PWD/build/libquant.so
OUT=${OUT:-build/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
log() { echo "== $(date +%T) [${SECONDS}s] $*"; }
left() { echo $(( ${BUDGET:-570} - SECONDS )); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
nvcc --version | tail -1
log build
make -j16 cuda > "$OUT/build.log" 2>&1; echo "make cuda rc=$?"; grep -E "error" "$OUT/build.log" | head -20
[ -f build/libquant_cuda.so ] || { echo "no plugin built"; exit 1; }

if want gputest; then
log gputest
timeout $(( $(left) - 300 )) env LIBQUANT_CUDA_PLUGIN=$PWD/build/libquant_cuda.so build/gputest.test -test.count=1 -test.v \
  > "$OUT/gputest.log" 2>&1; echo "gputest rc=$?"
echo "passed subtests: $(grep -c -E '^\s*--- PASS' "$OUT/gputest.log")  failed: $(grep -c -E '^\s*--- FAIL' "$OUT/gputest.log")  skipped: $(grep -c -E '^\s*--- SKIP' "$OUT/gputest.log")"
grep -E '^\s*--- FAIL' "$OUT/gputest.log" | head -20
fi

if want demo; then
log demo
(cd build && ./demo) > "$OUT/demo.log" 2>&1; echo "demo rc=$?"
grep -i -A30 "cuda" "$OUT/demo.log" | grep -iE "native|emulated" | head -12
fi

if want mlp; then
log mlp_train device=cuda
# mlp_train loads the CUDA runtime itself (dlopen): nvcc's toolkit lib64 first.
timeout 150 env LD_LIBRARY_PATH="$(dirname "$(dirname "$(command -v nvcc)")")/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  build/mlp_train device=cuda > "$OUT/mlp.log" 2>&1; echo "mlp_train rc=$?"
grep -v -E '^$' "$OUT/mlp.log" | head -32
fi

if want pytest; then
log pytest
timeout $(( $(left) - 200 )) env LIBQUANT_LIBRARY=$PWD/build/libquant.so python3 -m pytest -q -rs -p no:cacheprovider python/tests \
  > "$OUT/pytest.log" 2>&1; echo "pytest rc=$?"
tail -1 "$OUT/pytest.log"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -20
fi

if want quantize; then
log bench quantize
timeout 100 python3 bench/gpu_quantize.py --shapes 8192x8192,8191x8191 --compile-budget 0 --out "$OUT" > "$OUT/quant.log" 2>&1; echo "rc=$?"
fi
if want overhead; then
log bench overhead
timeout 40 python3 bench/python_overhead.py > "$OUT/overhead.log" 2>&1; echo "rc=$?"
fi
if want gemm; then
log bench gemm
timeout $(( $(left) - 40 )) python3 bench/gpu_gemm.py --out "$OUT" > "$OUT/gemm.log" 2>&1; echo "rc=$?"
fi
if want train; then
log bench torch_train
timeout $(( $(left) )) python3 bench/torch_train.py --steps 5 --budget $(( $(left) - 30 )) > "$OUT/train.log" 2>&1; echo "rc=$?"
fi
log tables
grep -E "^\| " "$OUT/quant.log" | head -40
[ -f "$OUT/overhead.log" ] && tail -12 "$OUT/overhead.log"
grep -E "^\| " "$OUT/gemm.log" | head -40
grep -E "^\| " "$OUT/train.log" | head -20
log done
