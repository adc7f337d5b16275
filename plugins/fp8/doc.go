// Package fp8 is the FP8 format plugin: per-tensor scaling ("fp8": current and
// delayed, E4M3 and E5M2, spec §1.2, §1.3, §2, §3) and, in fp8_block, the
// DeepSeek-style 1×128 and 128×128 block scaling (spec §6). It registers its
// formats and CPU kernels with the host at init.
package fp8
