package nvfp4

import (
	"math"
	"sync"

	"libquant/internal/numeric"
)

// For round-to-nearest of BF16 input, a block's E2M1 codes depend only on each
// element's BF16 bits and the block's enc_b, which is one of 256 values per
// global scale (one per E4M3 scale code). So instead of computing
// EncodeE2M1(fl32(x·enc_b)) per element, a worker builds, the first time a
// scale code occurs, the table of that function over all 2^15 magnitudes and
// then looks codes up: the table holds exactly the function's values, so the
// bytes are the same.
//
// Building a table is cheap: for x ≥ 0 the code is a non-decreasing step
// function of the magnitude bits a (x·enc_b, its float32 rounding and E2M1
// rounding are all monotone), so seven binary searches find where it steps
// and the table is filled between them. NaN magnitudes are never looked up:
// a block holding a NaN takes the direct path (its NaN gives +6 whatever its
// sign, which a sign-OR'd lookup would get wrong).

// codeTable[a] is the E2M1 code of BF16 magnitude a (sign clear) times enc_b.
type codeTable [1 << 15]uint8

// codeCache is one worker's tables, per direction (a tile interleaves both,
// whose global scales may differ) and scale code. A table depends on enc_b
// alone, which keys it.
type codeCache struct {
	built  [2][256]uint64 // 1<<32 | bits of the enc_b tables[d][c] holds; 0 if none
	tables [2][256]*codeTable
	// scales[d][a] memoizes 1 + the E4M3 scale code of a block whose amax is
	// BF16 magnitude a (0: not computed yet) under the global scale whose
	// sEncDiv6 scaleKey[d] holds: a block's scale code depends on nothing else.
	scaleKey [2]uint64
	scales   [2][1 << 15]uint16
}

var codeCaches sync.Pool

func getCodeCache() *codeCache {
	if c, ok := codeCaches.Get().(*codeCache); ok {
		return c
	}
	return new(codeCache)
}

func putCodeCache(c *codeCache) { codeCaches.Put(c) }

// table returns the code table of scale code c of direction d.
func (cc *codeCache) table(d *dirOut, c uint8) *codeTable {
	e := d.g.encB[c]
	key := 1<<32 | uint64(math.Float32bits(e))
	if cc.built[d.dir][c] != key {
		t := cc.tables[d.dir][c]
		if t == nil {
			t = new(codeTable)
			cc.tables[d.dir][c] = t
		}
		t.fill(e)
		cc.built[d.dir][c] = key
	}
	return cc.tables[d.dir][c]
}

// scaleCode is d.g.blockScale's code for a block amax given as a BF16
// magnitude a (a ≤ 0x7F80), memoized.
func (cc *codeCache) scaleCode(d *dirOut, a uint16) uint8 {
	key := 1<<32 | uint64(math.Float32bits(d.g.sEncDiv6))
	memo := &cc.scales[d.dir]
	if cc.scaleKey[d.dir] != key {
		clear(memo[:])
		cc.scaleKey[d.dir] = key
	}
	if v := memo[a&0x7FFF]; v != 0 {
		return uint8(v - 1)
	}
	c, _ := d.g.blockScale(math.Float32frombits(uint32(a) << 16))
	memo[a&0x7FFF] = uint16(c) + 1
	return c
}

// fill sets t[a] = EncodeE2M1(fl32(x(a) · encB)) for every finite or infinite
// magnitude a ≤ 0x7F80, by locating the seven steps of the monotone code.
func (t *codeTable) fill(encB float32) {
	code := func(a int) uint8 { return numeric.EncodeE2M1(math.Float32frombits(uint32(a)<<16) * encB) }
	const top = 0x7F80 // +Inf
	lo := 0
	for k := uint8(1); k <= 7; k++ {
		// The smallest a in [lo, top] whose code reaches k (top+1 if none).
		l, h := lo, top+1
		for l < h {
			mid := (l + h) / 2
			if code(mid) >= k {
				h = mid
			} else {
				l = mid + 1
			}
		}
		for a := lo; a < l; a++ {
			t[a] = k - 1
		}
		lo = l
	}
	for a := lo; a < len(t); a++ {
		t[a] = 7 // saturated, and the NaN magnitudes no lookup reads
	}
}

// encodeRNTable is encodeRNBF16 by table lookup (unrolled). h holds no NaN.
func encodeRNTable(h *[16]uint16, t *codeTable) uint64 {
	c := func(v uint16) uint64 { return uint64(t[v&0x7FFF] | uint8(v>>12)&8) }
	return c(h[0]) | c(h[1])<<4 | c(h[2])<<8 | c(h[3])<<12 | c(h[4])<<16 | c(h[5])<<20 |
		c(h[6])<<24 | c(h[7])<<28 | c(h[8])<<32 | c(h[9])<<36 | c(h[10])<<40 | c(h[11])<<44 |
		c(h[12])<<48 | c(h[13])<<52 | c(h[14])<<56 | c(h[15])<<60
}
