// Checks lq_e8m0_round_up (branch-free) against lq_e8m0_round_up_reference
// (the rule as it reads) on all 2^32 float32 bit patterns, and
// lq_e8m0_round_up_mag on those of its domain (+0 .. +Inf: sign 0, not NaN),
// a few seconds on one core. Run by `make test-cuda-host`; needs no GPU.
#include <stdio.h>

#include "../e8m0.h"

int main(void) {
  unsigned long long bad = 0;
  uint32_t u = 0;
  do {
    const uint32_t want = lq_e8m0_round_up_reference(u), got = lq_e8m0_round_up(lq_bits_f32(u));
    if (want != got) {
      if (bad < 10) printf("%#010x: reference %u, lq_e8m0_round_up %u\n", u, want, got);
      bad++;
    }
    if (u <= 0x7F800000u) {
      const uint32_t mag = lq_e8m0_round_up_mag(lq_bits_f32(u));
      if (want != mag) {
        if (bad < 10) printf("%#010x: reference %u, lq_e8m0_round_up_mag %u\n", u, want, mag);
        bad++;
      }
    }
    u++;
  } while (u != 0);
  printf("e8m0: %llu mismatches over 4294967296 float32 patterns (lq_e8m0_round_up) and 2139095041 magnitudes (lq_e8m0_round_up_mag)\n", bad);
  return bad != 0;
}
