package fp8

import (
	"math"
	"sync"

	"libquant/internal/numeric"
	"libquant/internal/transpose"
)

// BF16 fast path of fp8_block with power-of-two scales. A BF16 value times a
// power of two is exact in FP32 unless it falls below 2^-126 (the scale keeps
// |x·scale| ≤ 448, spec §6.2), so fl32(x·scale) is itself a BF16 value and
//
//	EncodeE4M3(fl32(x·scale)) == e4m3BF16()[bits(fl32(x·scale)) >> 16]
//
// (below 2^-126 both give a signed zero; a NaN keeps a NaN top half). The
// table is the codec evaluated on every BF16 pattern, so the codec remains the
// only definition of the rounding. FP32 scales are not powers of two and take
// the general path.
var e4m3BF16 = sync.OnceValue(func() *[1 << 16]uint8 {
	t := new([1 << 16]uint8)
	for b := range t {
		t[b] = numeric.EncodeE4M3(math.Float32frombits(uint32(b) << 16))
	}
	return t
})

// scaledBF16 is the top half of fl32(x·f) for the BF16 pattern h.
func scaledBF16(h uint16, f float32) uint16 {
	return uint16(math.Float32bits(float32(math.Float32frombits(uint32(h)<<16)*f)) >> 16)
}

// absBF16 is |h| as a magnitude pattern, 0 for NaN: TE's block kernels reduce
// with fmaxf, which ignores NaN (spec §6.2). Branch-free.
func absBF16(h uint16) uint32 {
	a := uint32(h & 0x7FFF)
	return a &^ uint32(int32(0x7F80-a)>>31)
}

// The loops below stay out of line (go:noinline): inlined into bandBF16 they
// lose their registers to its many live values and spill the loop state.

// maxAbsBF16 folds |src[j]| into am[j].
//
//go:noinline
func maxAbsBF16(am []uint32, src []uint16) {
	src = src[:len(am)]
	for j, h := range src {
		am[j] = max(am[j], absBF16(h))
	}
}

// blockMaxBF16 sets am[b] to the max |x| pattern of src[128b : 128b+128]
// (the last block may be shorter).
//
//go:noinline
func blockMaxBF16(am []uint32, src []uint16) {
	for b := range am {
		blk := src[b*BlockLen : min((b+1)*BlockLen, len(src))]
		var m0, m1 uint32
		j := 0
		for ; j+1 < len(blk); j += 2 {
			m0 = max(m0, absBF16(blk[j]))
			m1 = max(m1, absBF16(blk[j+1]))
		}
		if j < len(blk) {
			m0 = max(m0, absBF16(blk[j]))
		}
		am[b] = max(m0, m1)
	}
}

// encodeBlocksBF16 writes dst[j] = tab[fl32(src[j]·f[j/128])].
//
//go:noinline
func encodeBlocksBF16(dst []byte, src []uint16, f []float32, tab *[1 << 16]uint8) {
	dst = dst[:len(src)]
	for b, fb := range f {
		hi := min((b+1)*BlockLen, len(src))
		d := dst[b*BlockLen : hi]
		for j, h := range src[b*BlockLen : hi] {
			d[j] = tab[scaledBF16(h, fb)]
		}
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

// colGroup is how many columns of columnwise codes are staged at once.
const colGroup = 64

// bandColsBF16 is the widest column chunk of a work item: 4096 BF16 columns,
// 8 KiB per row.
const bandColsBF16 = 4096

// blockScratchPool recycles the per-chunk scratch across calls.
var blockScratchPool = sync.Pool{New: func() any { return new(blockScratch) }}

// blockScratch is a work item's per-column and per-block state.
type blockScratch struct {
	amax  [bandColsBF16]uint32
	scale [bandColsBF16]float32
	bmax  [bandColsBF16 / BlockLen]uint32
	bsc   [bandColsBF16 / BlockLen]float32
	codes [BlockLen * colGroup]byte
}

// scaleBits is the scale and scale_inv of an amax pattern (BF16 top half).
func (j *blockJob) scaleBits(a uint32) (scale, scaleInv float32) {
	return j.scale(a << 16)
}

// bandBF16 quantizes rows [128·band, +h) × columns [j.chunk·chunk, +w) of a BF16
// input with power-of-two scales. Pass 1 walks the rows in order: 1D rowwise
// blocks are quantized as they come, while columnwise (1D) or tile (2D) amaxes
// accumulate. Pass 2 re-reads the band, now in cache, for what needed them:
// 2D rowwise codes and every columnwise code, the latter made along the rows
// 64 columns at a time and transposed into the [K, M] columnwise data.
func (j *blockJob) bandBF16(band, chunk int, in []uint16, tab *[1 << 16]uint8, sc *blockScratch) {
	m, k := int(j.m), int(j.k)
	r0, c0 := band*BlockLen, chunk*j.chunk
	h, w := min(BlockLen, m-r0), min(j.chunk, k-c0)
	nb := (w + BlockLen - 1) / BlockLen
	twoD := j.s.p.BlockDims == 2
	am, bm := sc.amax[:w], sc.bmax[:nb]
	clear(am)
	if twoD {
		clear(bm)
	}
	var rowMax [bandColsBF16 / BlockLen]uint32
	for i := 0; i < h; i++ {
		off := (r0+i)*k + c0
		src := in[off : off+w]
		switch {
		case twoD:
			blockMaxBF16(rowMax[:nb], src)
			for b, a := range rowMax[:nb] {
				bm[b] = max(bm[b], a)
			}
		default:
			if d := j.row; d != nil {
				blockMaxBF16(rowMax[:nb], src)
				f := sc.bsc[:nb]
				for b, a := range rowMax[:nb] {
					s, inv := j.scaleBits(a)
					f[b] = s
					d.scales[d.l.index(int64(r0+i), int64(c0/BlockLen+b))] = inv
				}
				encodeBlocksBF16(d.data[off:off+w], src, f, tab)
			}
			if j.col != nil {
				maxAbsBF16(am, src)
			}
		}
	}
	// Per-column scales for pass 2: 1D from the column amaxes, 2D from the tiles.
	f := sc.scale[:w]
	if twoD {
		for b, a := range bm {
			s, inv := j.scaleBits(a)
			sc.bsc[b] = s
			if d := j.row; d != nil {
				d.scales[d.l.index(int64(band), int64(c0/BlockLen+b))] = inv
			}
			if d := j.col; d != nil {
				d.scales[d.l.index(int64(c0/BlockLen+b), int64(band))] = inv
			}
			for c := b * BlockLen; c < min((b+1)*BlockLen, w); c++ {
				f[c] = s
			}
		}
		if d := j.row; d != nil {
			for i := 0; i < h; i++ {
				off := (r0+i)*k + c0
				encodeBlocksBF16(d.data[off:off+w], in[off:off+w], sc.bsc[:nb], tab)
			}
		}
	} else if d := j.col; d != nil {
		for c, a := range am {
			s, inv := j.scaleBits(a)
			f[c] = s
			d.scales[d.l.index(int64(c0+c), int64(band))] = inv
		}
	}
	d := j.col
	if d == nil {
		return
	}
	if twoD && j.row != nil {
		// 2D codes are the same both ways: transpose the rowwise ones just written.
		transpose.Bytes(d.data[c0*m+r0:], m, j.row.data[r0*k+c0:], k, h, w)
		return
	}
	for g := 0; g < w; g += colGroup {
		n := min(colGroup, w-g)
		for i := 0; i < h; i++ {
			off := (r0+i)*k + c0 + g
			encodeBF16Vec(sc.codes[i*colGroup:i*colGroup+n], in[off:off+n], f[g:g+n], tab)
		}
		transpose.Bytes(d.data[(c0+g)*m+r0:], m, sc.codes[:], colGroup, h, n)
	}
}
