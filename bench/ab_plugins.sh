#!/bin/bash
# A/B of CUDA plugin variants linked on the device from objects built here
# (the carry limit leaves no room for two whole plugins beside libquant.so):
#
#   VARIANTS="A B" TEST_VARIANT=B RUN='TestX|TestY' BENCH='...' EXTRA='...' bash bench/ab_plugins.sh
#
# Expects build/ab/common.tar.xz (the objects every variant shares),
# build/ab/<V>.tar.xz (each variant's own objects; AB=folder: another folder
# than build/ab) or build/ab/<V>.so.xz (the variant's plugin, linked here),
# build/final/libquant.so.xz and build/final/gputest.test.xz (FINAL=folder:
# another folder). Runs the GPU tests matching RUN_<V> (else RUN) against
# each plugin <V> named in TEST_VARIANT (a variant with neither is said and
# skipped; one log per variant, gputest_<V>.log), then
# BENCH's gpu_quantize.py
# arguments (if set) for every variant in turn, ROUNDS times (default 2),
# each row labelled with its variant, then EXTRA's arguments once against
# the first TEST_VARIANT's plugin (if set). Logs under $OUT.
# A variant may name a base variant, BASE_<V>=<W>: it links W's objects but
# those its own archive replaces (to A/B one object against a whole set
# without carrying the set twice). A variant's (or its base's) object
# replaces the common object of the same name. RUN_<V>, if set, replaces RUN for that
# variant's tests, BENCH_<V> BENCH for its bench runs.
# RUN is Go's -test.run: it splits at a top-level '|' before '/', so name
# the subtest level in every alternative ('TestA/mxfp4|TestB/mxfp4'; in
# 'TestA|TestB/mxfp4' all of TestA runs).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
W=/tmp/ab
log() { echo "== $(date -u +%T) [${SECONDS}s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
mkdir -p $W
xz -dc ${FINAL:-build/final}/libquant.so.xz > $W/libquant.so
xz -dc ${FINAL:-build/final}/gputest.test.xz > $W/gputest.test && chmod +x $W/gputest.test
# Every variant's archive and every base's (a base need not be a variant).
bases=""
for v in $VARIANTS; do bases="$bases $(eval echo \${BASE_$v:-})"; done
for v in $(echo common $VARIANTS $bases | tr ' ' '\n' | awk 'NF && !seen[$0]++'); do
  [ -f ${AB:-build/ab}/$v.so.xz ] && continue  # a plugin linked here
  [ $v = common ] && [ ! -f ${AB:-build/ab}/common.tar.xz ] && continue
  # Unpacked afresh every call: a warm machine keeps /tmp/ab from the call
  # before, whose objects would otherwise be linked in place of this call's.
  rm -rf $W/obj_$v && mkdir -p $W/obj_$v && tar -xJf ${AB:-build/ab}/$v.tar.xz -C $W/obj_$v || { echo "archive $v missing"; exit 1; }
done
for v in $VARIANTS; do
  mkdir -p $W/$v && cp $W/libquant.so $W/$v/
  if [ -f ${AB:-build/ab}/$v.so.xz ]; then
    xz -dc ${AB:-build/ab}/$v.so.xz > $W/$v/libquant_cuda.so
    how=unpacked
  else
    # The variant's own objects, then its base's and the common ones it does
    # not replace (by file name).
    objs="$W/obj_$v/*.o"
    base=$(eval echo \${BASE_$v:-})
    if [ -n "$base" ]; then
      for o in $W/obj_$base/*.o; do [ -f $W/obj_$v/$(basename $o) ] || objs="$objs $o"; done
    fi
    for o in $W/obj_common/*.o; do
      n=$(basename $o)
      [ -f $W/obj_$v/$n ] || { [ -n "$base" ] && [ -f $W/obj_$base/$n ]; } || objs="$objs $o"
    done
    nvcc -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_90,code=compute_90 -shared -cudart static \
      -Xlinker --version-script=$PWD/cuda/libquant_cuda.map -o $W/$v/libquant_cuda.so $objs \
      -L/usr/local/cuda/lib64 -lcublasLt -Xlinker -rpath,/usr/local/cuda/lib64 || { echo "link $v failed"; exit 1; }
    how=linked
  fi
  # A variant whose objects leave a symbol undefined (an archive missing an
  # object, or one older than the plugin's table) links but does not load;
  # stop here rather than fail every test and bench row.
  python3 -c 'import ctypes, sys; ctypes.CDLL(sys.argv[1])' $W/$v/libquant_cuda.so || { echo "variant $v: the plugin does not load"; exit 1; }
  log "$how $v"
done
for tv in ${TEST_VARIANT:-}; do
  run=$(eval echo "\"\${RUN_$tv:-\${RUN:-}}\"")
  [ -n "$run" ] || { echo "gputest $tv: neither RUN_$tv nor RUN is set: no tests"; continue; }
  log "gputest $tv ${run}"
  LIBQUANT_CUDA_PLUGIN=$W/$tv/libquant_cuda.so LIBQUANT_LIBRARY=$W/$tv/libquant.so \
    timeout ${TEST_TIMEOUT:-300} $W/gputest.test -test.count=1 -test.v -test.run "$run" > $OUT/gputest_$tv.log 2>&1
  echo "gputest $tv rc=$?"
  echo "passed: $(grep -c -E '^\s*--- PASS' $OUT/gputest_$tv.log)  failed: $(grep -c -E '^\s*--- FAIL' $OUT/gputest_$tv.log)  skipped: $(grep -c -E '^\s*--- SKIP' $OUT/gputest_$tv.log)"
  grep -E '^\s*--- FAIL' $OUT/gputest_$tv.log | head -10; tail -2 $OUT/gputest_$tv.log
done
if [ -n "${BENCH:-}" ]; then
  for round in $(seq 1 ${ROUNDS:-2}); do
    for v in $VARIANTS; do
      log "bench round $round $v"; mkdir -p $W/q_${v}_$round
      bench=$(eval echo "\"\${BENCH_$v:-\$BENCH}\"")
      eval "timeout ${BENCH_TIMEOUT:-200} python3 bench/gpu_quantize.py --lib $W/$v/libquant.so --label $v --out $W/q_${v}_$round $bench" \
        > $OUT/q_${v}_$round.log 2>&1
      echo "rc=$?"; grep -E "exact=|MoE|copy|host|launch" $OUT/q_${v}_$round.log | cut -c1-200
    done
  done
fi
if [ -n "${EXTRA:-}" ]; then  # one more gpu_quantize.py run, against the first TEST_VARIANT's plugin
  tv=${TEST_VARIANT%% *}; log "extra $tv"; mkdir -p $W/extra
  eval "timeout ${EXTRA_TIMEOUT:-300} python3 bench/gpu_quantize.py --lib $W/$tv/libquant.so --out $W/extra $EXTRA" > $OUT/extra.log 2>&1
  echo "rc=$?"; grep -E "exact=|MoE|copy|host|launch" $OUT/extra.log | cut -c1-200
fi
