// Checks lq_e8m0_round_up_mag (branch-free) against
// lq_e8m0_round_up_reference (the rule as it reads) on every float32 of its
// domain, +0 .. +Inf (sign 0, not NaN): 2139095041 patterns, a few seconds
// on one core. Run by `make test-cuda-host`; needs no GPU.
#include <stdio.h>

#include "../e8m0.h"

int main(void) {
  unsigned long long bad = 0;
  for (uint32_t u = 0; u <= 0x7F800000u; u++) {
    const uint32_t want = lq_e8m0_round_up_reference(u), got = lq_e8m0_round_up_mag(lq_bits_f32(u));
    if (want != got) {
      if (bad < 10) printf("%#010x: reference %u, lq_e8m0_round_up_mag %u\n", u, want, got);
      bad++;
    }
  }
  printf("e8m0: %llu of 2139095041 magnitudes differ (lq_e8m0_round_up_mag)\n", bad);
  return bad != 0;
}
