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
// Any shape (spec §14 item 3): element (r, c) of a direction's stored matrix
// with logical row length cols (K rowwise, M columnwise — the flat index of X,
// or of Xᵀ for the transposed columnwise copy) is keyed by its flat index
// f = r·cols + c: it takes byte f%16 (word (f%16)/4, bits 8·(f%4)) of the
// words of block f/16. When cols is a multiple of 16 that is exactly the
// per-block rule above; when it is not, one 1×16 quantization block may
// draw from two consecutive Philox blocks, and no bit depends on how far a
// kernel pads. 16×16 tensors key every element by its rowwise (dir 0) flat
// index r·K + c.
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

// fillKeyed is fill for the blocks of a stored matrix of bpr blocks a row
// whose logical row length is cols (spec §14 item 3): each element's byte
// comes from its flat index in the logical matrix. With cols = 16·bpr it is
// fill. Elements past cols (padding, dropped after quantizing) take byte 0.
func (s *srStream) fillKeyed(dir host.Direction, first, stride uint64, n, bpr, cols int, w *tileWords) {
	if cols == bpr*16 {
		s.fill(dir, first, stride, n, w)
		return
	}
	var cached [2]uint64
	var words [2][4]uint32
	valid := [2]bool{}
	get := func(pb uint64) *[4]uint32 {
		for i := range cached {
			if valid[i] && cached[i] == pb {
				return &words[i]
			}
		}
		i := int(pb & 1)
		cached[i], valid[i], words[i] = pb, true, s.block(dir, pb)
		return &words[i]
	}
	for i := 0; i < n; i++ {
		b := first + uint64(i)*stride
		r, cb := b/uint64(bpr), int(b%uint64(bpr))
		var out [4]uint32
		for e := 0; e < 16; e++ {
			c := cb*16 + e
			if c >= cols {
				break
			}
			f := r*uint64(cols) + uint64(c)
			byt := get(f / 16)[f%16/4] >> (8 * (f % 4)) & 0xFF
			out[e/4] |= byt << (8 * (e % 4))
		}
		w[i] = out
	}
}
