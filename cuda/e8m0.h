// E8M0 scale rounding shared by the device code (common.cuh) and the host
// test that checks it on every float32 (cuda/hosttest/e8m0_exhaustive.cc).
#pragma once

#include "e2m1.h"  // LQ_HD, lq_f32_bits, lq_umin

// numeric.Float32ToE8M0RoundUp (TE's float_to_e8m0, spec §4.3) as the rule
// reads: NaN 0xFF; +Inf 0xFE; otherwise the exponent field, one up where the
// mantissa is not 0, unless it is 0xFE or a subnormal's mantissa is at most
// 0x400000 (-Inf keeps 0xFF). The reference for lq_e8m0_round_up_mag.
LQ_HD uint32_t lq_e8m0_round_up_reference(uint32_t b) {
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return 0xFF;
  if (b == 0x7F800000u) return 0xFE;
  uint32_t e = (b >> 23) & 0xFFu;
  const uint32_t m = b & 0x7FFFFFu;
  if (m != 0 && e != 0xFE && !(e == 0 && m <= 0x400000u)) e++;
  return e & 0xFFu;
}

// The rule without branches for a magnitude, x in [+0, +Inf] and never NaN
// (the device's only use: a block's amax, NaN skipped (spec §4.3), times the
// format's 1/max): adding 0x7FFFFF (0x3FFFFF to a subnormal) carries into
// the exponent exactly where it should go up, then at most 0xFE; the NaN and
// -Inf cases cannot occur. A few instructions per block where the branches
// took about 20 (the MXFP4 kernels are issue-bound, bench/RESULTS.md
// 2026-11-29 call 3).
LQ_HD uint32_t lq_e8m0_round_up_mag(float x) {
  const uint32_t a = lq_f32_bits(x);
  return lq_umin((a + (a < 0x00800000u ? 0x003FFFFFu : 0x007FFFFFu)) >> 23, 0xFEu);
}
