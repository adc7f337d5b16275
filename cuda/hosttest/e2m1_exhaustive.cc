// Checks lq_e2m1, lq_e2m1_capped (every non-NaN float) and lq_e2m1_fast
// (|x| < 7) against lq_e2m1_reference on all 2^32 float32 bit patterns (a few
// seconds on one core). Run by `make test-cuda-host`; needs no GPU.
#include <stdio.h>

#include "../e2m1.h"

int main(void) {
  unsigned long long bad = 0, bad_capped = 0, bad_fast = 0, fast_n = 0;
  uint32_t u = 0;
  do {
    float x = lq_bits_f32(u);
    uint32_t want = lq_e2m1_reference(x), got = lq_e2m1(x);
    if (want != got) {
      if (bad < 10) printf("x=%a (%#010x): reference %u, lq_e2m1 %u\n", x, u, want, got);
      bad++;
    }
    if ((u & 0x7FFFFFFFu) <= 0x7F800000u) {
      got = lq_e2m1_capped(x);
      if (want != got) {
        if (bad_capped < 10) printf("x=%a (%#010x): reference %u, capped %u\n", x, u, want, got);
        bad_capped++;
      }
      if (fabsf(x) < 7.0f) {
        fast_n++;
        got = lq_e2m1_fast(x);
        if (want != got) {
          if (bad_fast < 10) printf("x=%a (%#010x): reference %u, fast %u\n", x, u, want, got);
          bad_fast++;
        }
      }
    }
    u++;
  } while (u != 0);
  printf("e2m1: %llu of 4294967296 float32 patterns differ (lq_e2m1)\n", bad);
  printf("e2m1: %llu of 4278190082 non-NaN patterns differ (lq_e2m1_capped)\n", bad_capped);
  printf("e2m1: %llu of %llu patterns with |x| < 7 differ (lq_e2m1_fast)\n", bad_fast, fast_n);
  return (bad | bad_capped | bad_fast) != 0;
}
