#!/bin/bash
# Nsight Compute figures for a set of quantize calls, one line each (run on the
# GPU machine, from the checkout, with build/final/ carried as final_check.sh
# expects), e.g.
#   bash bench/ncu_set.sh "mxfp8 both 8192x8192" "fp8 columnwise 8191x8191 scaling=1"
# Each argument: FORMAT USAGE SHAPE [FIELD=VALUE ...] (bench/ncu_quantize.py's
# arguments). Per call: the quantize kernel's duration, DRAM and SM throughput
# (% of peak), achieved occupancy, registers, and the top three warp stall
# reasons; the full ncu text goes to $OUT/ncu_all.txt.
set -u
. "$(dirname "$0")/ncu_env.sh"
# The quantize kernels (the amax, zeroing and swizzle kernels excluded;
# NCU_KERNELS=regex:rht_amax, say, profiles another instead).
K=${NCU_KERNELS:-'regex:mx_quantize|mx_fast|cast_flat|cast_transpose|cast_strip|fp8_block_kernel|fp8_block_rows|fp8_block_bands|fp8_block_strip|mx8_rows|nvfp4_1d|nvfp4_2d|nvfp4_fast'}
S=smsp__average_warps_issue_stalled_
ST=$(for r in no_instruction branch_resolving long_scoreboard lg_throttle mio_throttle barrier short_scoreboard wait math_pipe_throttle not_selected selected drain membar; do printf "%s%s_per_issue_active.ratio," $S $r; done)
ST=${ST%,}
i=0
for spec in "$@"; do
  i=$((i+1))
  timeout 120 ncu --clock-control none -k "$K" --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --metrics "$ST" \
    python3 bench/ncu_quantize.py $spec > /tmp/ncu_$i.txt 2>&1
  f=/tmp/ncu_$i.txt; { echo "=== $spec"; cat $f; } >> $OUT/ncu_all.txt
  name=$(grep -m1 -oE '(mx_quantize|mx_fast|mx8_rows|cast_[a-z]+|fp8_block_[a-z]+|nvfp4_[a-z0-9]+)_kernel<[^>]{0,60}' $f)
  v() { grep -m1 -E "^\s+$1 " $f | awk '{print $NF}'; }
  # stall cycles per issued instruction, the three largest
  stalls=$(grep -E "^\s+${S}" $f | sed "s/${S}//; s/_per_issue_active.ratio//" | awk '{print $NF, $1}' | sort -gr | head -3 | awk '{printf "%s %s, ", $2, $1}')
  echo "$spec | $name | $(grep -m1 -E '^\s+Duration ' $f | awk '{print $NF, $(NF-1)}') | DRAM $(v 'DRAM Throughput')% | SM $(v 'Compute \(SM\) Throughput')% | occ $(v 'Achieved Occupancy')% | regs $(v 'Registers Per Thread') | grid $(v 'Grid Size') | cyc/issue $(v 'Warp Cycles Per Issued Instruction') | stalls $stalls"
done
