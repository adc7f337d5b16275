package nvfp4

import (
	"libquant/host"
	"libquant/internal/numeric"
)

// Stochastic rounding's random bits (spec §5.6), defined so that they depend on
// (seed, offset, direction, element) only, never on threads or tiling: a CUDA
// kernel that follows this reproduces the CPU bytes.
//
// A direction stores [rows, cols] elements (rowwise [M, K]; columnwise the
// transpose [K, M]) in 1×16 blocks; block b = r·(cols/16) + c/16 holds the
// elements (r, c..c+15) of stored row r. Each block draws one Philox4x32-10
// output:
//
//	key     = (uint32(seed), uint32(seed >> 32))
//	counter = (uint32(b), uint32(b >> 32) | dir << 31, uint32(offset), uint32(offset >> 32))
//	          dir = 0 rowwise, 1 columnwise
//	w       = Philox4x32_10(counter, key)
//
// and element j (0..15) of the block takes the byte rbits = w[j/4] >> (8·(j%4))
// & 0xFF — 32 bits for 4 elements, byte i to element i, as TE's cvt.rs
// emulation consumes them. b < 2^59 for any tensor, so the direction bit
// never collides with a block index.
//
// 16×16 (2-D) scaling quantizes each element once: both directions hold the
// same codes, drawn with the rowwise (dir 0) bits of the element's rowwise
// block, so the columnwise copy equals the one update_usage derives.
//
// TE's own bits come from curand Philox with a per-thread subsequence and are
// tied to its kernel tiling (§13 item 13); they match these in distribution,
// not bit for bit.
type srStream struct {
	key [2]uint32
	off [2]uint32
}

func newSRStream(p host.Params) srStream {
	return srStream{
		key: [2]uint32{uint32(p.Seed), uint32(p.Seed >> 32)},
		off: [2]uint32{uint32(p.Offset), uint32(p.Offset >> 32)},
	}
}

// SRBlockBits returns the four random words of block b of direction dir under
// (seed, offset): the documented scheme above, for other implementations to
// check against.
func SRBlockBits(seed, offset uint64, dir host.Direction, b uint64) [4]uint32 {
	s := newSRStream(host.Params{Seed: seed, Offset: offset})
	return s.block(dir, b)
}

func (s *srStream) block(dir host.Direction, b uint64) [4]uint32 {
	return numeric.Philox4x32_10([4]uint32{uint32(b), uint32(b>>32) | uint32(dir)<<31, s.off[0], s.off[1]}, s.key)
}

// fill draws the words of the n blocks first, first+stride, ... of direction
// dir into w, two Philox chains at a time: the same words block gives.
func (s *srStream) fill(dir host.Direction, first, stride uint64, n int, w *tileWords) {
	hi := uint32(dir) << 31
	i := 0
	for ; i+1 < n; i += 2 {
		a, b := first+uint64(i)*stride, first+uint64(i+1)*stride
		numeric.Philox4x32_10x2(
			[4]uint32{uint32(a), uint32(a>>32) | hi, s.off[0], s.off[1]},
			[4]uint32{uint32(b), uint32(b>>32) | hi, s.off[0], s.off[1]}, s.key, &w[i], &w[i+1])
	}
	if i < n {
		w[i] = s.block(dir, first+uint64(i)*stride)
	}
}
