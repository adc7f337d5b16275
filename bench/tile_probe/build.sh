#!/bin/bash
# Builds the tile-kernel probe (bench/tile_probe/probe.cu): the fused tile
# kernel of cuda/gemm_fused.cu as of 4ef7d3b (the file's lines before its
# decode kernel, from git: the patches were written against that kernel,
# which still had its E2M1 and cp.async paths) with one of the variant
# patches here applied,
# timed against itself and BF16 cuBLAS and compared bit for bit
# (bench/RESULTS.md, "the fused tile kernel's variants at 128..8192 rows"). Run from the
# checkout's root:
#   bash bench/tile_probe/build.sh bench/tile_probe/variants.patch build/probe/tile_probe [nvcc flags, e.g. -L<dir of libcublas.so.13>]
#   build/probe/tile_probe            # every shape, every variant
#   build/probe/tile_probe 256 8192 8192 1   # one shape, variant 1 only (for ncu)
# half.patch goes with probe.cu as of 9c80b63, the commit that added it (the
# half-split pipeline, variant "PIPE" there).
set -eu
patch_file=$1 out=$2
shift 2
tmp=$(mktemp -d)
git show 4ef7d3b:cuda/gemm_fused.cu > "$tmp/gemm_fused.cu"
n=$(grep -n '^// Decode kernel: few rows of A' "$tmp/gemm_fused.cu" | cut -d: -f1)
{ head -n $((n - 3)) "$tmp/gemm_fused.cu"; echo '}  // namespace qfused'; } > "$tmp/tile_part.cuh"
patch -s "$tmp/tile_part.cuh" < "$patch_file"
nvcc -O3 -std=c++17 -lineinfo -gencode=arch=compute_90a,code=sm_90a -Icuda -Iinclude -I"$tmp" "$@" -o "$out" bench/tile_probe/probe.cu \
  -l:libcublas.so.13 -Xlinker -rpath,/usr/local/cuda/lib64
rm -rf "$tmp"
