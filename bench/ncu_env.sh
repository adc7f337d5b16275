# Sourced by the ncu scripts (ncu_set.sh, ncu_source.sh) on the GPU machine:
# CUDA's tools and libraries on the paths, and build/libquant.so and
# build/libquant_cuda.so unpacked from $FINAL (default build/final, as
# final_check.sh carries it) unless already there.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 PATH=$PATH:/usr/local/cuda/bin
F=${FINAL:-$PWD/build/final}
mkdir -p build
[ -f build/libquant.so ] || xz -dc $F/libquant.so.xz > build/libquant.so
[ -f build/libquant_cuda.so ] || xz -dc $F/libquant_cuda.so.xz > build/libquant_cuda.so
