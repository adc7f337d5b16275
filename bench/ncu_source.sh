#!/bin/bash
# Per-SASS-instruction execution counts of one quantize kernel (Nsight Compute's
# source page), for finding where an issue-bound kernel's instructions go. Run
# on the GPU machine from the checkout, with build/final/ carried as
# final_check.sh expects (FINAL= another folder), e.g.
#   bash bench/ncu_source.sh "nvfp4_fast|nvfp4 both 8192x8192" "mx_fast|mxfp4 both 8192x8192"
# Each argument: KERNEL_REGEX|FORMAT USAGE SHAPE [FIELD=VALUE ...] (the part
# after '|' is bench/ncu_quantize.py's arguments). Per call, under $OUT:
# ncu_src_<i>.csv.xz (one row per SASS instruction: its text, executions,
# stall samples) and ncu_src_<i>.txt (the summary of
# bench/ncu_source_summary.py, also printed, and ncu's details page).
set -u
. "$(dirname "$0")/ncu_env.sh"
i=0
for arg in "$@"; do
  i=$((i+1))
  kern=${arg%%|*}
  spec=${arg#*|}
  rep=/tmp/ncu_src_$i
  rm -f $rep.ncu-rep
  timeout 150 ncu --clock-control none -k "regex:$kern" --launch-skip 2 --launch-count 1 \
    --section SourceCounters --section InstructionStats --section SpeedOfLight \
    --metrics smsp__inst_executed.sum,smsp__inst_executed_pipe_alu.sum,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed_pipe_lsu.sum \
    -o $rep python3 bench/ncu_quantize.py $spec > $OUT/ncu_src_$i.txt 2>&1
  echo "ncu rc=$? ($spec)"
  ncu --import $rep.ncu-rep --page source --csv --print-source sass > /tmp/ncu_src_$i.csv 2>> $OUT/ncu_src_$i.txt
  ncu --import $rep.ncu-rep --page details >> $OUT/ncu_src_$i.txt 2>&1
  xz -c /tmp/ncu_src_$i.csv > $OUT/ncu_src_$i.csv.xz
  shape=$(echo "$spec" | awk '{print $3}')
  python3 bench/ncu_source_summary.py /tmp/ncu_src_$i.csv --elements $((${shape//x/*})) | tee -a $OUT/ncu_src_$i.txt
done
