// Package numeric holds the bit-exact codecs every format plugin shares:
// FP8 E4M3 and E5M2, the E8M0 scale, FP4 E2M1, BF16 and FP16, plus the float32
// helpers the quantizers need. No plugin re-implements a codec that lives here.
//
// Every encoder is round-to-nearest-even with satfinite, exactly as
// shared/spec/formats.md §1 defines it; the tests check each against an
// independent rational reference.
package numeric
