package mxfp8

import (
	"encoding/binary"
	"math"
	"sync"

	"libquant/internal/numeric"
	tr "libquant/internal/transpose"
)

// BF16 fast path. With a BF16 input and a power-of-two factor f, the product
// fl32(x·f) is exact unless it falls below 2^-126 (x has 8 significant bits,
// and f never pushes it past the element max, spec §4.3, §4.4), so it is a
// BF16 value: its top 16 bits are all of it. Below 2^-126 the low bits may be
// lost, but every element format encodes such a value as a signed zero either
// way; a NaN keeps a NaN top half. So
//
//	encode(fl32(x·f)) == table[bits(fl32(x·f)) >> 16]
//
// where table is the codec itself evaluated once on every BF16 pattern. The
// codec stays the only definition of the rounding; TestBF16TableMatchesCodec
// checks the identity for every BF16 input and every E8M0 factor.

// bf16Table returns the lazily built table of encode over all BF16 patterns.
func bf16Table(encode func(float32) uint8) func() *[1 << 16]uint8 {
	return sync.OnceValue(func() *[1 << 16]uint8 {
		t := new([1 << 16]uint8)
		for b := range t {
			t[b] = encode(math.Float32frombits(uint32(b) << 16))
		}
		return t
	})
}

var (
	e4m3BF16 = bf16Table(numeric.EncodeE4M3)
	e5m2BF16 = bf16Table(numeric.EncodeE5M2)
	e2m1BF16 = bf16Table(numeric.EncodeE2M1)
)

func (el *element) bf16Codes() *[1 << 16]uint8 {
	switch el.kind {
	case e5m2.kind:
		return e5m2BF16()
	case e2m1.kind:
		return e2m1BF16()
	}
	return e4m3BF16()
}

// scaledBF16 is the top half of fl32(x·f) for the BF16 pattern h.
func scaledBF16(h uint16, f float32) uint16 {
	return uint16(math.Float32bits(float32(math.Float32frombits(uint32(h)<<16)*f)) >> 16)
}

// The loops below are kept out of line (go:noinline): inlined into bandBF16
// they lose their registers to its many live values and spill the loop state.

// maxAbsBF16 folds |src[j]| into am[j] (magnitude patterns, NaN skipped).
//
//go:noinline
func maxAbsBF16(am []uint32, src []uint16) {
	src = src[:len(am)]
	for j, h := range src {
		am[j] = max(am[j], magnitude16(h))
	}
}

// blockMaxBF16 sets am[b] to the magnitude pattern max of src's block b.
//
//go:noinline
func blockMaxBF16(am []uint32, src []uint16) {
	for b := range am {
		blk := src[b*BlockLen : (b+1)*BlockLen : (b+1)*BlockLen]
		var m0, m1 uint32 // two chains: the max is a loop-carried dependency
		for j := 0; j < BlockLen; j += 2 {
			m0 = max(m0, magnitude16(blk[j]))
			m1 = max(m1, magnitude16(blk[j+1]))
		}
		am[b] = max(m0, m1)
	}
}

// encodeBlocksBF16 writes dst[j] = tab[fl32(src[j]·f[j/32])].
//
//go:noinline
func encodeBlocksBF16(dst []byte, src []uint16, f []float32, tab *[1 << 16]uint8) {
	for b, fb := range f {
		blk := src[b*BlockLen : (b+1)*BlockLen : (b+1)*BlockLen]
		d := dst[b*BlockLen : (b+1)*BlockLen : (b+1)*BlockLen]
		for j, h := range blk {
			d[j] = tab[scaledBF16(h, fb)]
		}
	}
}

// packBlocksBF16 is encodeBlocksBF16 for E2M1, packing pairs (even index low).
//
//go:noinline
func packBlocksBF16(dst []byte, src []uint16, f []float32, tab *[1 << 16]uint8) {
	for b, fb := range f {
		blk := src[b*BlockLen : (b+1)*BlockLen : (b+1)*BlockLen]
		d := dst[b*BlockLen/2 : (b+1)*BlockLen/2 : (b+1)*BlockLen/2]
		for p := range d {
			d[p] = numeric.PackE2M1(tab[scaledBF16(blk[2*p], fb)], tab[scaledBF16(blk[2*p+1], fb)])
		}
	}
}

// rowBF16 quantizes one row chunk of whole 1×32 blocks: exps[b] gets block
// b's scale byte and dst the codes (one per element, or packed E2M1 pairs).
// am and f are scratch of len(exps).
func (s *Spec) rowBF16(dst, exps []byte, src []uint16, tab *[1 << 16]uint8, am []uint32, f []float32) {
	blockMaxBF16(am, src)
	for b, a := range am {
		e := s.exponent(math.Float32frombits(a << 16))
		exps[b] = e
		f[b] = numeric.E8M0Reciprocal(e)
	}
	if s.el.packed {
		packBlocksBF16(dst, src, f, tab)
	} else {
		encodeBlocksBF16(dst, src, f, tab)
	}
}

// encodeBF16Vec writes dst[j] = tab[fl32(src[j]·f[j])].
//
//go:noinline
func encodeBF16Vec(dst []byte, src []uint16, f []float32, tab *[1 << 16]uint8) {
	dst, f = dst[:len(src)], f[:len(src)]
	for j, h := range src {
		dst[j] = tab[scaledBF16(h, f[j])]
	}
}

// packBF16 writes E2M1 pairs: dst[p] = pack(src[2p]·f, src[2p+1]·f), even index low.
//
//go:noinline
func packBF16(dst []byte, src []uint16, f float32, tab *[1 << 16]uint8) {
	src = src[:2*len(dst)]
	for p := range dst {
		dst[p] = numeric.PackE2M1(tab[scaledBF16(src[2*p], f)], tab[scaledBF16(src[2*p+1], f)])
	}
}

// bandCols is the widest column chunk of a BF16 work item. Up to 8192
// columns a 32-row band is one contiguous run of memory (at most 512 KiB, so
// pass 2 finds it in cache).
const bandCols = 8192

// colGroup is how many columns of mxfp4 columnwise codes are staged at once.
const colGroup = 64

// packTransposeE2M1 packs the E2M1 codes of columns j..j+7 of a 32-row band
// (codes[i][j] one code per byte) along the rows, even row in the low nibble
// as numeric.PackE2M1 does (spec §1.5), and writes column j+b's 16 bytes at
// dst[b*stride:]. Eight columns travel together: a row pair's eight packed
// bytes are one uint64 (lo | hi<<4 cannot carry: codes are < 16), and two
// 8×8 byte transposes turn 16 such words into 8 columns of 16 bytes.
func packTransposeE2M1(dst []byte, stride int, codes *[BlockLen][colGroup]byte, j int) {
	var lo, hi [8]uint64
	for p := 0; p < 8; p++ {
		lo[p] = binary.LittleEndian.Uint64(codes[2*p][j:]) | binary.LittleEndian.Uint64(codes[2*p+1][j:])<<4
		hi[p] = binary.LittleEndian.Uint64(codes[16+2*p][j:]) | binary.LittleEndian.Uint64(codes[16+2*p+1][j:])<<4
	}
	tr.Block8x8(&lo)
	tr.Block8x8(&hi)
	for b := 0; b < 8; b++ {
		binary.LittleEndian.PutUint64(dst[b*stride:], lo[b])
		binary.LittleEndian.PutUint64(dst[b*stride+8:], hi[b])
	}
}

// bandScratchPool recycles the per-chunk scratch across calls.
var bandScratchPool = sync.Pool{New: func() any { return new(bandScratch) }}

// bandScratch is a work item's per-column state.
type bandScratch struct {
	amax  [bandCols]uint32
	f     [bandCols]float32
	exps  [bandCols / BlockLen]uint8
	bmax  [bandCols / BlockLen]uint32
	bf    [bandCols / BlockLen]float32
	codes [BlockLen][colGroup]byte
}

// bandBF16 quantizes rows [32·band, +32) × columns [q.chunk·chunk, +q.chunk) of a
// BF16 input, reading it in place. Pass 1 walks the rows in order: rowwise
// blocks are quantized as they come and columnwise amaxes accumulate. Pass 2
// re-reads the band, now in cache, for the columnwise codes. So the input
// streams from memory once, row by row, for either or both directions.
func (q *quantizeJob) bandBF16(band, chunk int, in []uint16, tab *[1 << 16]uint8, sc *bandScratch) {
	r0, c0 := band*BlockLen, chunk*q.chunk
	w := min(q.chunk, q.k-c0)
	s, k := q.s, q.k
	am := sc.amax[:w]
	clear(am)
	for i := 0; i < BlockLen; i++ {
		off := (r0+i)*k + c0
		src := in[off : off+w]
		if d := q.row; d != nil {
			nb := w / BlockLen
			exps := sc.exps[:nb]
			if s.el.packed {
				s.rowBF16(d.data[off/2:(off+w)/2], exps, src, tab, sc.bmax[:nb], sc.bf[:nb])
			} else {
				s.rowBF16(d.data[off:off+w], exps, src, tab, sc.bmax[:nb], sc.bf[:nb])
			}
			for b, e := range exps {
				d.scales[d.l.index(r0+i, c0/BlockLen+b)] = e
			}
		}
		if q.col != nil {
			maxAbsBF16(am, src)
		}
	}
	d := q.col
	if d == nil {
		return
	}
	f := sc.f[:w]
	for j, a := range am {
		e := s.exponent(math.Float32frombits(a << 16))
		d.scales[d.l.index(c0+j, r0/BlockLen)] = e
		f[j] = numeric.E8M0Reciprocal(e)
	}
	if !s.el.packed { // [M, K], not transposed (spec §4.5)
		for i := 0; i < BlockLen; i++ {
			off := (r0+i)*k + c0
			encodeBF16Vec(d.data[off:off+w], in[off:off+w], f, tab)
		}
		return
	}
	// mxfp4: transposed [K, M/2]; column c0+j's 32 codes are 16 consecutive
	// bytes. Codes are made along the band's rows, 64 columns at a time, then
	// packed and transposed 8×8 bytes at a time.
	half := q.m / 2
	for g := 0; g < w; g += colGroup {
		n := min(colGroup, w-g) // a multiple of 32
		for i := 0; i < BlockLen; i++ {
			off := (r0+i)*k + c0 + g
			encodeBF16Vec(sc.codes[i][:n], in[off:off+n], f[g:g+n], tab)
		}
		for j := 0; j < n; j += 8 {
			base := (c0+g+j)*half + r0/2
			packTransposeE2M1(d.data[base:], half, &sc.codes, j)
		}
	}
}
