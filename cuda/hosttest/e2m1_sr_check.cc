// Checks lq_e2m1_sr (the kernels' stochastic rounding to E2M1) against
// lq_e2m1_sr_reference (the definition, spec §5.6), without a GPU:
//   - every float32 pattern with |x| <= 16 (where t meets the grid's
//     thresholds), each with a pseudo-random byte at a pseudo-random place j of
//     a pseudo-random word, and its sign from another bit;
//   - every 4099th of those patterns with all 256 bytes;
//   - every 65537th pattern of all 2^32 (large values, infinities, NaNs) and
//     the special values with all 256 bytes.
// About 20 s on one core. Run by `make test-cuda-host`.
#include <stdio.h>

#include "../e2m1.h"

static uint64_t mix(uint64_t z) {  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static unsigned long long n, bad;

static void check(uint32_t u, uint32_t r, uint64_t h) {
  const int j = (int)(h & 3);
  const uint32_t w = ((uint32_t)(h >> 8) & ~(0xFFu << (8 * j))) | (r << (8 * j));
  const float x = lq_bits_f32(u);
  const uint32_t want = lq_e2m1_sr_reference(x, r), got = lq_e2m1_sr(x, w, j);
  n++;
  if (want != got) {
    if (bad < 10) printf("x=%a (%#010x) byte %u at %d: reference %u, lq_e2m1_sr %u\n", x, u, r, j, want, got);
    bad++;
  }
}

int main(void) {
  for (uint32_t a = 0; a <= 0x41800000u; a++) {
    const uint64_t h = mix(a);
    check(a | ((uint32_t)(h >> 40) & 1u) << 31, (uint32_t)(h >> 48) & 0xFFu, h);
    if (a % 4099 == 0)
      for (uint32_t r = 0; r < 256; r++) check(a | (r & 1u) << 31, r, mix(h + r));
  }
  uint32_t u = 0;
  do {
    for (uint32_t r = 0; r < 256; r++) check(u, r, mix(u + r));
    u += 65537;
  } while (u >= 65537);
  const uint32_t special[] = {0u, 1u, 0x007FFFFFu, 0x00800000u, 0x3F000000u, 0x3F7FFFFFu, 0x3F800000u, 0x40000000u,
                              0x40800000u, 0x40C00000u, 0x41000000u, 0x7F7FFFFFu, 0x7F800000u, 0x7F800001u, 0x7FC00000u, 0x7FFFFFFFu};
  for (uint32_t s : special)
    for (uint32_t r = 0; r < 256; r++) {
      check(s, r, mix(s + r));
      check(s | 0x80000000u, r, mix(s + r + 7));
    }
  printf("e2m1 stochastic rounding: %llu of %llu (x, byte) pairs differ (lq_e2m1_sr)\n", bad, n);
  return bad != 0;
}
