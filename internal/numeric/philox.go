package numeric

// Philox4x32-10 constants (Salmon et al., "Parallel random numbers: as easy as
// 1, 2, 3", SC 2011; Random123 philox.h). The same generator backs curand's
// Philox_4x32_10 and TE's stochastic rounding (spec §5.6).
const (
	philoxM0 = 0xD2511F53 // multiplier of counter word 0
	philoxM1 = 0xCD9E8D57 // multiplier of counter word 2
	philoxW0 = 0x9E3779B9 // key bump of key word 0 (golden ratio)
	philoxW1 = 0xBB67AE85 // key bump of key word 1 (sqrt(3)-1)
)

// Philox4x32_10 is the counter-based generator Philox4x32 with 10 rounds: it
// maps a 128-bit counter and a 64-bit key to 128 random bits. Each round is
//
//	(hi0, lo0) = M0 · ctr[0]   (the 64-bit product's halves)
//	(hi1, lo1) = M1 · ctr[2]
//	ctr        = [hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0]
//
// and the key is bumped by (W0, W1) between rounds. It matches Random123's
// known-answer vectors (tested).
func Philox4x32_10(ctr [4]uint32, key [2]uint32) [4]uint32 {
	c0, c1, c2, c3 := ctr[0], ctr[1], ctr[2], ctr[3]
	k0, k1 := key[0], key[1]
	var p0, p1 uint64
	// Ten rounds, unrolled (the key bumps between them).
	p0, p1 = philoxM0*uint64(c0), philoxM1*uint64(c2)
	c0, c1, c2, c3 = uint32(p1>>32)^c1^k0, uint32(p1), uint32(p0>>32)^c3^k1, uint32(p0)
	k0, k1 = k0+philoxW0, k1+philoxW1
	p0, p1 = philoxM0*uint64(c0), philoxM1*uint64(c2)
	c0, c1, c2, c3 = uint32(p1>>32)^c1^k0, uint32(p1), uint32(p0>>32)^c3^k1, uint32(p0)
	k0, k1 = k0+philoxW0, k1+philoxW1
	p0, p1 = philoxM0*uint64(c0), philoxM1*uint64(c2)
	c0, c1, c2, c3 = uint32(p1>>32)^c1^k0, uint32(p1), uint32(p0>>32)^c3^k1, uint32(p0)
	k0, k1 = k0+philoxW0, k1+philoxW1
	p0, p1 = philoxM0*uint64(c0), philoxM1*uint64(c2)
	c0, c1, c2, c3 = uint32(p1>>32)^c1^k0, uint32(p1), uint32(p0>>32)^c3^k1, uint32(p0)
	k0, k1 = k0+philoxW0, k1+philoxW1
	p0, p1 = philoxM0*uint64(c0), philoxM1*uint64(c2)
	c0, c1, c2, c3 = uint32(p1>>32)^c1^k0, uint32(p1), uint32(p0>>32)^c3^k1, uint32(p0)
	k0, k1 = k0+philoxW0, k1+philoxW1
	p0, p1 = philoxM0*uint64(c0), philoxM1*uint64(c2)
	c0, c1, c2, c3 = uint32(p1>>32)^c1^k0, uint32(p1), uint32(p0>>32)^c3^k1, uint32(p0)
	k0, k1 = k0+philoxW0, k1+philoxW1
	p0, p1 = philoxM0*uint64(c0), philoxM1*uint64(c2)
	c0, c1, c2, c3 = uint32(p1>>32)^c1^k0, uint32(p1), uint32(p0>>32)^c3^k1, uint32(p0)
	k0, k1 = k0+philoxW0, k1+philoxW1
	p0, p1 = philoxM0*uint64(c0), philoxM1*uint64(c2)
	c0, c1, c2, c3 = uint32(p1>>32)^c1^k0, uint32(p1), uint32(p0>>32)^c3^k1, uint32(p0)
	k0, k1 = k0+philoxW0, k1+philoxW1
	p0, p1 = philoxM0*uint64(c0), philoxM1*uint64(c2)
	c0, c1, c2, c3 = uint32(p1>>32)^c1^k0, uint32(p1), uint32(p0>>32)^c3^k1, uint32(p0)
	k0, k1 = k0+philoxW0, k1+philoxW1
	p0, p1 = philoxM0*uint64(c0), philoxM1*uint64(c2)
	c0, c1, c2, c3 = uint32(p1>>32)^c1^k0, uint32(p1), uint32(p0>>32)^c3^k1, uint32(p0)
	return [4]uint32{c0, c1, c2, c3}
}

// Philox4x32_10x2 stores Philox4x32_10 of two counters under one key in a and
// b, computed as two interleaved chains so that their multiplies overlap.
func Philox4x32_10x2(ctrA, ctrB [4]uint32, key [2]uint32, a, b *[4]uint32) {
	a0, a1, a2, a3 := ctrA[0], ctrA[1], ctrA[2], ctrA[3]
	b0, b1, b2, b3 := ctrB[0], ctrB[1], ctrB[2], ctrB[3]
	k0, k1 := key[0], key[1]
	var p0, p1, q0, q1 uint64
	p0, p1, q0, q1 = philoxM0*uint64(a0), philoxM1*uint64(a2), philoxM0*uint64(b0), philoxM1*uint64(b2)
	a0, a1, a2, a3 = uint32(p1>>32)^a1^k0, uint32(p1), uint32(p0>>32)^a3^k1, uint32(p0)
	b0, b1, b2, b3 = uint32(q1>>32)^b1^k0, uint32(q1), uint32(q0>>32)^b3^k1, uint32(q0)
	k0, k1 = k0+philoxW0, k1+philoxW1
	p0, p1, q0, q1 = philoxM0*uint64(a0), philoxM1*uint64(a2), philoxM0*uint64(b0), philoxM1*uint64(b2)
	a0, a1, a2, a3 = uint32(p1>>32)^a1^k0, uint32(p1), uint32(p0>>32)^a3^k1, uint32(p0)
	b0, b1, b2, b3 = uint32(q1>>32)^b1^k0, uint32(q1), uint32(q0>>32)^b3^k1, uint32(q0)
	k0, k1 = k0+philoxW0, k1+philoxW1
	p0, p1, q0, q1 = philoxM0*uint64(a0), philoxM1*uint64(a2), philoxM0*uint64(b0), philoxM1*uint64(b2)
	a0, a1, a2, a3 = uint32(p1>>32)^a1^k0, uint32(p1), uint32(p0>>32)^a3^k1, uint32(p0)
	b0, b1, b2, b3 = uint32(q1>>32)^b1^k0, uint32(q1), uint32(q0>>32)^b3^k1, uint32(q0)
	k0, k1 = k0+philoxW0, k1+philoxW1
	p0, p1, q0, q1 = philoxM0*uint64(a0), philoxM1*uint64(a2), philoxM0*uint64(b0), philoxM1*uint64(b2)
	a0, a1, a2, a3 = uint32(p1>>32)^a1^k0, uint32(p1), uint32(p0>>32)^a3^k1, uint32(p0)
	b0, b1, b2, b3 = uint32(q1>>32)^b1^k0, uint32(q1), uint32(q0>>32)^b3^k1, uint32(q0)
	k0, k1 = k0+philoxW0, k1+philoxW1
	p0, p1, q0, q1 = philoxM0*uint64(a0), philoxM1*uint64(a2), philoxM0*uint64(b0), philoxM1*uint64(b2)
	a0, a1, a2, a3 = uint32(p1>>32)^a1^k0, uint32(p1), uint32(p0>>32)^a3^k1, uint32(p0)
	b0, b1, b2, b3 = uint32(q1>>32)^b1^k0, uint32(q1), uint32(q0>>32)^b3^k1, uint32(q0)
	k0, k1 = k0+philoxW0, k1+philoxW1
	p0, p1, q0, q1 = philoxM0*uint64(a0), philoxM1*uint64(a2), philoxM0*uint64(b0), philoxM1*uint64(b2)
	a0, a1, a2, a3 = uint32(p1>>32)^a1^k0, uint32(p1), uint32(p0>>32)^a3^k1, uint32(p0)
	b0, b1, b2, b3 = uint32(q1>>32)^b1^k0, uint32(q1), uint32(q0>>32)^b3^k1, uint32(q0)
	k0, k1 = k0+philoxW0, k1+philoxW1
	p0, p1, q0, q1 = philoxM0*uint64(a0), philoxM1*uint64(a2), philoxM0*uint64(b0), philoxM1*uint64(b2)
	a0, a1, a2, a3 = uint32(p1>>32)^a1^k0, uint32(p1), uint32(p0>>32)^a3^k1, uint32(p0)
	b0, b1, b2, b3 = uint32(q1>>32)^b1^k0, uint32(q1), uint32(q0>>32)^b3^k1, uint32(q0)
	k0, k1 = k0+philoxW0, k1+philoxW1
	p0, p1, q0, q1 = philoxM0*uint64(a0), philoxM1*uint64(a2), philoxM0*uint64(b0), philoxM1*uint64(b2)
	a0, a1, a2, a3 = uint32(p1>>32)^a1^k0, uint32(p1), uint32(p0>>32)^a3^k1, uint32(p0)
	b0, b1, b2, b3 = uint32(q1>>32)^b1^k0, uint32(q1), uint32(q0>>32)^b3^k1, uint32(q0)
	k0, k1 = k0+philoxW0, k1+philoxW1
	p0, p1, q0, q1 = philoxM0*uint64(a0), philoxM1*uint64(a2), philoxM0*uint64(b0), philoxM1*uint64(b2)
	a0, a1, a2, a3 = uint32(p1>>32)^a1^k0, uint32(p1), uint32(p0>>32)^a3^k1, uint32(p0)
	b0, b1, b2, b3 = uint32(q1>>32)^b1^k0, uint32(q1), uint32(q0>>32)^b3^k1, uint32(q0)
	k0, k1 = k0+philoxW0, k1+philoxW1
	p0, p1, q0, q1 = philoxM0*uint64(a0), philoxM1*uint64(a2), philoxM0*uint64(b0), philoxM1*uint64(b2)
	a0, a1, a2, a3 = uint32(p1>>32)^a1^k0, uint32(p1), uint32(p0>>32)^a3^k1, uint32(p0)
	b0, b1, b2, b3 = uint32(q1>>32)^b1^k0, uint32(q1), uint32(q0>>32)^b3^k1, uint32(q0)
	*a = [4]uint32{a0, a1, a2, a3}
	*b = [4]uint32{b0, b1, b2, b3}
}
