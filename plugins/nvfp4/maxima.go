package nvfp4

import (
	"sync"

	"libquant/internal/parallel"
)

// blockMaxima is the first pass over BF16 input: it records the amax of every
// rowwise block (j.row.am when set) or 16×16 tile (j.tileAm) — a BF16
// magnitude pattern, bit 15 set when the block holds a NaN — and returns the
// tensor's amax, the maximum over them (spec §5.4; NaN ignored as fmaxf
// does). Every element is read once here and once more by the quantize pass,
// which then only looks its block amax up.
func (j *job) blockMaxima() float32 {
	bands, tiles := j.m/BlockSize, (j.k+tileW-1)/tileW
	bpr := j.k / BlockSize
	var mu sync.Mutex
	var best uint32
	parallel.For(bands*tiles, 1, func(lo, hi int) {
		var local uint32
		for t := lo; t < hi; t++ {
			b, c0 := t/tiles, t%tiles*tileW
			w := min(tileW, j.k-c0)
			r0, cb0, nb := b*BlockSize, c0/BlockSize, w/BlockSize
			if j.twoD {
				for tb := 0; tb < nb; tb++ {
					var m uint32
					var nan uint16
					for i := 0; i < BlockSize; i++ {
						bm, bn := blockMaxBF16((*[16]uint16)(j.src[(r0+i)*j.k+(cb0+tb)*BlockSize:]))
						m = max(m, uint32(bm))
						if bn {
							nan = 0x8000
						}
					}
					j.tileAm[b*bpr+cb0+tb] = uint16(m) | nan
					local = max(local, m)
				}
				continue
			}
			// Row blocks cover every element: their maxima give the global
			// amax, and the rowwise pass reuses them. Columnwise blocks
			// take their amax from the column the quantize pass gathers.
			for i := 0; i < BlockSize; i++ {
				row := j.src[(r0+i)*j.k+c0:]
				for cb := 0; cb < nb; cb++ {
					bm, bn := blockMaxBF16((*[16]uint16)(row[cb*BlockSize:]))
					if j.row.am != nil {
						j.row.am[(r0+i)*bpr+cb0+cb] = bm | nanBit(bn)
					}
					local = max(local, uint32(bm))
				}
			}
		}
		mu.Lock()
		best = max(best, local)
		mu.Unlock()
	})
	return bf16Value(uint16(best))
}

func nanBit(nan bool) uint16 {
	if nan {
		return 0x8000
	}
	return 0
}
