// Package fakecuda measures and tests the host's per-call dispatch cost on
// machines without a GPU: testdata/fake_cuda.c is a native plugin that serves fp8 and
// mxfp8 on "CUDA" with a quantize and a GEMM that launch nothing and "device"
// memory that is host memory. It lives in its own package because loading it
// makes CUDA look available to every later test in the process.
package fakecuda
