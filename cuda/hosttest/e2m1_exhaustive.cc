// Checks lq_e2m1 against lq_e2m1_reference on all 2^32 float32 bit patterns
// (a few seconds on one core). Run by `make cuda-hosttest`; needs no GPU.
#include <stdio.h>

#include "../e2m1.h"

int main(void) {
  unsigned long long bad = 0;
  uint32_t u = 0;
  do {
    float x = lq_bits_f32(u);
    uint32_t want = lq_e2m1_reference(x), got = lq_e2m1(x);
    if (want != got) {
      if (bad < 10) printf("x=%a (%#010x): reference %u, fast %u\n", x, u, want, got);
      bad++;
    }
    u++;
  } while (u != 0);
  printf("e2m1: %llu of 4294967296 float32 patterns differ\n", bad);
  return bad != 0;
}
