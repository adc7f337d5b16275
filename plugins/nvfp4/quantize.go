package nvfp4

import (
	"encoding/binary"
	"math"
	"sync"

	"libquant/host"
	"libquant/internal/numeric"
	"libquant/internal/parallel"
	"libquant/internal/swizzle"
)

// kernels are NVFP4's CPU kernels. They work on tiles of 16 rows × up to
// tileW columns, in parallel over tiles; every tile is self-contained (its
// blocks, scales and random bits depend only on their own position), so the
// bytes never depend on GOMAXPROCS or on the order tiles run in.
type kernels struct{}

var (
	_ host.Kernels              = kernels{}
	_ host.TileDequantizer      = kernels{}
	_ host.ScaleSwizzler        = kernels{}
	_ host.TransformDequantizer = kernels{}
)

// tileW is the width of a tile in elements: 16 rows of tileW BF16 values are
// 4 KiB, which stays in L1 while both directions read it.
const tileW = 128

// scaleLayout addresses a direction's E4M3 scale_inv buffer, compact row-major
// [pad128(rows), cols] or GEMM-swizzled (spec §4.7, §5.3).
type scaleLayout struct {
	buf      []byte
	rows     int // pad128(stored rows)
	cols     int // pad4(stored cols / 16)
	swizzled bool
}

func newScaleLayout(st *host.Storage, spec *Spec, rows, cols int64) (scaleLayout, error) {
	pr, pc := scaleShape(rows, cols)
	buf := st.MustBuffer(host.BufScaleInv).Bytes8()
	if int64(len(buf)) != pr*pc {
		return scaleLayout{}, host.Errorf(host.ErrInvalidArgument, "nvfp4: scale_inv buffer has %d bytes, want %d×%d", len(buf), pr, pc)
	}
	return scaleLayout{buf: buf, rows: int(pr), cols: int(pc), swizzled: spec.p.GEMMSwizzledScales}, nil
}

func (l *scaleLayout) at(i, j int) int {
	if l.swizzled {
		return swizzle.Index(i, j, l.cols)
	}
	return i*l.cols + j
}

// zeroPadding zeroes every scale outside the valid [rows, blocks] region
// (padding rows and columns; spec §5.3, §13 item 12), in either layout.
func (l *scaleLayout) zeroPadding(rows, blocks int) {
	for i := 0; i < l.rows; i++ {
		j0 := blocks
		if i >= rows {
			j0 = 0
		}
		for j := j0; j < l.cols; j++ {
			l.buf[l.at(i, j)] = 0
		}
	}
}

// dirOut is one direction's output of a quantize.
type dirOut struct {
	on           bool
	dir          host.Direction
	data         []byte
	rowBytes     int // stored cols / 2
	blocksPerRow int // stored cols / 16
	scales       scaleLayout
	g            globalScale
	// keyCols is the stored row length of the logical tensor X, which keys
	// the stochastic-rounding bits (stochastic.go; spec §14 item 3): equal to
	// blocksPerRow·16 unless this is the padded copy X₀ of a ragged tensor.
	keyCols int
	// am, when set, holds every block's amax as a BF16 magnitude pattern, bit
	// 15 set when the block holds a NaN (row-major over [stored rows,
	// blocksPerRow]): the first pass's result, which the quantize pass reuses.
	am []uint16
}

func newDirOut(st *host.Storage, spec *Spec, dir host.Direction, m, k int64) (dirOut, error) {
	rows, cols := storedDims(m, k, dir)
	d := dirOut{on: true, dir: dir, rowBytes: int(cols / 2), blocksPerRow: int(cols / BlockSize), keyCols: int(cols)}
	d.data = st.MustBuffer(host.BufData).Bytes8()
	if int64(len(d.data)) != rows*cols/2 {
		return d, host.Errorf(host.ErrInvalidArgument, "nvfp4: %s data buffer has %d bytes, want %d", dir, len(d.data), rows*cols/2)
	}
	var err error
	d.scales, err = newScaleLayout(st, spec, rows, cols)
	return d, err
}

// job is one quantize pass over a [m, k] input.
type job struct {
	in   host.Tensor
	src  []uint16 // the input's bits when it is BF16
	m, k int
	row  dirOut
	col  dirOut
	twoD bool
	// tileAm is am for 16×16 tiles ([M/16, K/16]), when the first pass made it.
	tileAm []uint16
	sr     bool
	srs    srStream
	// keyK is the logical K of X, which keys the bits of 16×16 tensors (their
	// rowwise blocks; spec §14 item 3): k unless this is a padded X₀.
	keyK int
}

func (kernels) Amax(r *host.AmaxRequest) error {
	s, err := specOf(r.Spec)
	if err != nil {
		return err
	}
	if err := checkDims(r.M, r.K); err != nil {
		return err
	}
	out := r.Out.Float32s()
	colRHT := r.Want.Has(host.Columnwise) && s.rht
	if colRHT && r.Input.DType != host.BFloat16 {
		return rhtDTypeError(r.Input.DType)
	}
	if r.Want.Has(host.Rowwise) || (r.Want.Has(host.Columnwise) && !colRHT) {
		a := host.AmaxCPU(r.Input)
		if r.Want.Has(host.Rowwise) {
			out[0] = a
		}
		if r.Want.Has(host.Columnwise) {
			out[1] = a
		}
	}
	if colRHT {
		// Over X₀'s zero-padded 16-row groups (spec §14 item 2).
		x0, m0, release, err := paddedRows(r.Input, r.M, r.K)
		if err != nil {
			return err
		}
		defer release()
		signs := rhtSigns(s.mask)
		out[1] = rhtTransform(x0.Uint16s(), int(m0), int(r.K), &signs, nil, nil)
	}
	return nil
}

func specOf(s host.Spec) (*Spec, error) {
	sp, ok := s.(*Spec)
	if !ok {
		return nil, host.Errorf(host.ErrInvalidArgument, "nvfp4: spec of format %q is not an nvfp4 spec", s.Params().Format)
	}
	return sp, nil
}

func rhtDTypeError(dt host.DType) error {
	return host.Errorf(host.ErrInvalidArgument, "input: dtype %s not supported with config.rht: the random Hadamard transform of nvfp4's columnwise copy needs bfloat16 input (spec §5.5)", dt)
}

// Quantize writes the requested directions (spec §5.2-§5.6). Global amaxes
// (§5.4): rowwise = amax(x); columnwise = amax(x), or with the RHT the amax of
// the BF16-rounded transform of xᵀ (TE takes it with max.xorsign.abs.bf16x2 on
// the BF16 MMA outputs, hadamard_transform.cu). AmaxIn replaces both.
//
// With the RHT the transform of xᵀ is written once, as BF16 [K, M], to a
// pooled scratch buffer (TE's unfused path does the same, §5.5); its amax
// comes with it, and the columnwise copy quantizes its rows.
func (kernels) Quantize(r *host.QuantizeRequest) error {
	s, err := specOf(r.Spec)
	if err != nil {
		return err
	}
	if err := checkDims(r.M, r.K); err != nil {
		return err
	}
	if !aligned(r.M, r.K) {
		return quantizeRagged(s, r)
	}
	return quantizeBlocks(s, r, r.M, r.K)
}

// quantizeBlocks is Quantize of whole blocks; keyM and keyK are the dims of the
// tensor whose flat indices key the stochastic-rounding bits: r's own, or
// the logical X when r quantizes its padded copy X₀ (spec §14 item 3).
func quantizeBlocks(s *Spec, r *host.QuantizeRequest, keyM, keyK int64) error {
	var err error
	m, k := int(r.M), int(r.K)
	rowSt, colSt := r.Out[host.DirRowwise], r.Out[host.DirColumnwise]
	j := &job{in: r.Input, m: m, k: k, twoD: s.TwoD(), sr: s.p.StochasticRounding, srs: newSRStream(s.p), keyK: int(keyK)}
	if r.Input.DType == host.BFloat16 {
		j.src = r.Input.Uint16s()
	}
	rht := colSt != nil && s.rht
	if rht && r.Input.DType != host.BFloat16 {
		return rhtDTypeError(r.Input.DType)
	}
	if rowSt != nil {
		if j.row, err = newDirOut(rowSt, s, host.DirRowwise, r.M, r.K); err != nil {
			return err
		}
		j.row.keyCols = int(keyK)
	}
	var col dirOut
	if colSt != nil {
		if col, err = newDirOut(colSt, s, host.DirColumnwise, r.M, r.K); err != nil {
			return err
		}
		col.keyCols = int(keyM)
	}
	// t quantizes the transposed, transformed copy as the rows of a [K, M] input.
	t := &job{}
	var rhtAmax float32
	if rht {
		scratch, am := getScratch(m*k), getScratch(m*k/BlockSize)
		defer putScratch(scratch)
		defer putScratch(am)
		signs := rhtSigns(s.mask)
		rhtAmax = rhtTransform(j.src, m, k, &signs, *scratch, *am)
		*t = job{in: host.Tensor{DType: host.BFloat16, Shape: []int64{r.K, r.M}}, src: *scratch, m: k, k: m,
			row: col, sr: j.sr, srs: j.srs}
		t.row.am = *am
	} else {
		j.col = col
	}
	// BF16 input: a first pass records every block's amax, and with them the
	// global amax, for the quantize pass.
	var plainAmax float32
	plain := j.row.on || j.col.on
	if plain && j.src != nil {
		if j.twoD {
			buf := getScratch(m / BlockSize * (k / BlockSize))
			defer putScratch(buf)
			j.tileAm = *buf
		} else {
			if j.row.on {
				buf := getScratch(m * k / BlockSize)
				defer putScratch(buf)
				j.row.am = *buf
			}
		}
		plainAmax = j.blockMaxima()
	} else if plain {
		plainAmax = host.AmaxCPU(j.in)
	}
	rowAmax, colAmax, err := amaxes(r.AmaxIn, j, rht, rhtAmax, plainAmax)
	if err != nil {
		return err
	}
	for _, d := range []*dirOut{&j.row, &j.col, &t.row} {
		if !d.on {
			continue
		}
		a := rowAmax
		if d.dir == host.DirColumnwise {
			a = colAmax
		}
		d.g = newGlobalScale(a)
		r.Out[d.dir].MustBuffer(host.BufAmax).Float32s()[0] = a
		rows, _ := storedDims(r.M, r.K, d.dir)
		d.scales.zeroPadding(int(rows), d.blocksPerRow)
	}
	j.run()
	t.run()
	return nil
}

// run quantizes every tile of the job, in parallel.
func (j *job) run() {
	if !j.row.on && !j.col.on {
		return
	}
	bands, tiles := j.m/BlockSize, (j.k+tileW-1)/tileW
	parallel.For(bands*tiles, 1, func(lo, hi int) {
		cc := getCodeCache()
		defer putCodeCache(cc)
		for t := lo; t < hi; t++ {
			if j.twoD {
				j.tile2D(t/tiles, t%tiles*tileW, cc)
			} else {
				j.tile1D(t/tiles, t%tiles*tileW, cc)
			}
		}
	})
}

// amaxes returns the global amax of each direction (spec §5.4): AmaxIn when
// given, else amax(x) (plainAmax), and for a transformed columnwise copy
// rhtAmax.
func amaxes(in *host.Tensor, j *job, rht bool, rhtAmax, plainAmax float32) (row, col float32, err error) {
	colOn := j.col.on || rht
	if in != nil {
		a := in.Float32s()
		for i, name := range []string{"rowwise", "columnwise"} {
			if a[i] < 0 {
				return 0, 0, host.Errorf(host.ErrInvalidArgument, "options.amax: %s amax %g is negative", name, a[i])
			}
		}
		row, col = a[0], a[1]
		if j.twoD {
			// One quantize gives both directions of a 16×16 tensor the same
			// codes, so they must share one amax (spec §5.3, §5.4).
			if j.row.on && colOn && math.Float32bits(row) != math.Float32bits(col) {
				return 0, 0, host.Errorf(host.ErrInvalidArgument, "options.amax: 16×16 (block_dims 2) nvfp4 uses one amax for both directions; got rowwise %g, columnwise %g", row, col)
			}
			if !j.row.on {
				row = col
			}
			col = row
		}
		return row, col, nil
	}
	row, col = plainAmax, plainAmax
	if rht {
		col = rhtAmax
	}
	return row, col, nil
}

// scratchPool recycles the BF16 buffers of transformed columnwise copies, so
// that repeated quantizes do not allocate.
var scratchPool sync.Pool

func getScratch(n int) *[]uint16 {
	if p, ok := scratchPool.Get().(*[]uint16); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	b := make([]uint16, n)
	return &b
}

func putScratch(p *[]uint16) { scratchPool.Put(p) }

// loadTile reads rows r0..r0+15, columns c0..c0+w-1 of the input into tile
// (row stride tileW) as float32 (exact for every input dtype).
func loadTile(in host.Tensor, k, r0, c0, w int, tile *[BlockSize * tileW]float32) {
	for i := 0; i < BlockSize; i++ {
		host.LoadFloat32(in, int64((r0+i)*k+c0), tile[i*tileW:i*tileW+w])
	}
}

// tile1D quantizes band b (rows 16b..16b+15) × columns c0..c0+tileW-1 in 1×16
// blocks: each row's 16-element runs rowwise, each column's 16-element run
// columnwise (a transformed columnwise copy is a separate job, see Quantize). BF16 input, the common case, is read as
// raw bits; other dtypes are widened to float32 first.
func (j *job) tile1D(b, c0 int, cc *codeCache) {
	if j.in.DType == host.BFloat16 {
		j.tile1DBF16(b, c0, cc)
		return
	}
	var tile [BlockSize * tileW]float32
	var ws tileWords
	w := min(tileW, j.k-c0)
	r0, cb0, nb := b*BlockSize, c0/BlockSize, w/BlockSize
	loadTile(j.in, j.k, r0, c0, w, &tile)
	if j.row.on {
		for i := 0; i < BlockSize; i++ {
			words := j.words(&j.row, r0+i, cb0, 1, nb, &ws)
			for cb := 0; cb < nb; cb++ {
				x := (*[16]float32)(tile[i*tileW+cb*BlockSize:])
				j.block(&j.row, x, blockAmax(x), r0+i, cb0+cb, words.at(cb))
			}
		}
	}
	if j.col.on {
		var v [16]float32
		words := j.words(&j.col, c0, b, j.col.blocksPerRow, w, &ws)
		for c := 0; c < w; c++ {
			for i := range v {
				v[i] = tile[i*tileW+c]
			}
			j.block(&j.col, &v, blockAmax(&v), c0+c, b, words.at(c))
		}
	}
}

// tile1DBF16 is tile1D for BF16 input.
func (j *job) tile1DBF16(b, c0 int, cc *codeCache) {
	var raw [BlockSize * tileW]uint16
	var ws tileWords
	w := min(tileW, j.k-c0)
	r0, cb0, nb := b*BlockSize, c0/BlockSize, w/BlockSize
	if j.row.on { // rows are contiguous in the input: no copy
		for i := 0; i < BlockSize; i++ {
			words := j.words(&j.row, r0+i, cb0, 1, nb, &ws)
			row := j.src[(r0+i)*j.k+c0:]
			for cb := 0; cb < nb; cb++ {
				j.blockBF16(&j.row, (*[16]uint16)(row[cb*BlockSize:]), r0+i, cb0+cb, words.at(cb), cc)
			}
		}
	}
	if j.col.on {
		for i := 0; i < BlockSize; i++ {
			copy(raw[i*tileW:i*tileW+w], j.src[(r0+i)*j.k+c0:])
		}
		var h [16]uint16
		words := j.words(&j.col, c0, b, j.col.blocksPerRow, w, &ws)
		for c := 0; c < w; c++ {
			for i := range h {
				h[i] = raw[i*tileW+c]
			}
			j.blockBF16(&j.col, &h, c0+c, b, words.at(c), cc)
		}
	}
}

// tileWords holds the stochastic-rounding words of up to tileW blocks.
type tileWords [tileW][4]uint32

// wordsOf is a view of tileWords, nil when rounding to nearest.
type wordsOf = *tileWords

func (w wordsOf) at(i int) *[4]uint32 {
	if w == nil {
		return nil
	}
	return &w[i]
}

// words draws the random words of the n blocks (r, cb), (r+step... ) of
// direction d that a tile quantizes: stored row r, block column cb, then every
// rowStride-th block after it (1 along a row; a row of blocks further down a
// column). Nil when rounding to nearest.
func (j *job) words(d *dirOut, r, cb, rowStride, n int, ws *tileWords) wordsOf {
	if !j.sr {
		return nil
	}
	j.srs.fillKeyed(d.dir, uint64(r)*uint64(d.blocksPerRow)+uint64(cb), uint64(rowStride), n, d.blocksPerRow, d.keyCols, ws)
	return ws
}

// blockBF16 is block for 16 BF16 values given as bits.
func (j *job) blockBF16(d *dirOut, h *[16]uint16, r, cb int, words *[4]uint32, cc *codeCache) {
	var m uint16
	var nan bool
	if d.am != nil {
		v := d.am[r*d.blocksPerRow+cb]
		m, nan = v&0x7FFF, v&0x8000 != 0
	} else {
		m, nan = blockMaxBF16(h)
	}
	code := cc.scaleCode(d, m)
	encB := d.g.encB[code]
	d.scales.buf[d.scales.at(r, cb)] = code
	var packed uint64
	switch {
	case words != nil:
		packed = encodeSRBF16(h, encB, words)
	case nan:
		packed = encodeRNBF16(h, encB)
	default:
		packed = encodeRNTable(h, cc.table(d, code))
	}
	binary.LittleEndian.PutUint64(d.data[r*d.rowBytes+cb*8:], packed)
}

// blockMaxBF16 is max |x| over 16 BF16 values as a BF16 magnitude pattern, NaN
// ignored, and whether a NaN was there.
func blockMaxBF16(h *[16]uint16) (m uint16, nan bool) {
	// A reduction tree on 32-bit values: short dependency chains, no 16-bit
	// partial-register merges.
	a := func(i int) uint32 { return uint32(h[i]) & 0x7FFF }
	t0, t1 := max(a(0), a(1)), max(a(2), a(3))
	t2, t3 := max(a(4), a(5)), max(a(6), a(7))
	t4, t5 := max(a(8), a(9)), max(a(10), a(11))
	t6, t7 := max(a(12), a(13)), max(a(14), a(15))
	m32 := max(max(t0, t1), max(t2, t3), max(t4, t5), max(t6, t7))
	if m32 <= 0x7F80 {
		return uint16(m32), false
	}
	m = 0
	for _, v := range h {
		if a := v & 0x7FFF; a <= 0x7F80 {
			m = max(m, a)
		}
	}
	return m, true
}

// encodeSRBF16 is encodeSR of 16 BF16 values given as bits (unrolled).
func encodeSRBF16(h *[16]uint16, encB float32, w *[4]uint32) uint64 {
	return uint64(numeric.StochasticRoundE2M1(math.Float32frombits(uint32(h[0])<<16)*encB, uint8(w[0]>>0)))<<0 |
		uint64(numeric.StochasticRoundE2M1(math.Float32frombits(uint32(h[1])<<16)*encB, uint8(w[0]>>8)))<<4 |
		uint64(numeric.StochasticRoundE2M1(math.Float32frombits(uint32(h[2])<<16)*encB, uint8(w[0]>>16)))<<8 |
		uint64(numeric.StochasticRoundE2M1(math.Float32frombits(uint32(h[3])<<16)*encB, uint8(w[0]>>24)))<<12 |
		uint64(numeric.StochasticRoundE2M1(math.Float32frombits(uint32(h[4])<<16)*encB, uint8(w[1]>>0)))<<16 |
		uint64(numeric.StochasticRoundE2M1(math.Float32frombits(uint32(h[5])<<16)*encB, uint8(w[1]>>8)))<<20 |
		uint64(numeric.StochasticRoundE2M1(math.Float32frombits(uint32(h[6])<<16)*encB, uint8(w[1]>>16)))<<24 |
		uint64(numeric.StochasticRoundE2M1(math.Float32frombits(uint32(h[7])<<16)*encB, uint8(w[1]>>24)))<<28 |
		uint64(numeric.StochasticRoundE2M1(math.Float32frombits(uint32(h[8])<<16)*encB, uint8(w[2]>>0)))<<32 |
		uint64(numeric.StochasticRoundE2M1(math.Float32frombits(uint32(h[9])<<16)*encB, uint8(w[2]>>8)))<<36 |
		uint64(numeric.StochasticRoundE2M1(math.Float32frombits(uint32(h[10])<<16)*encB, uint8(w[2]>>16)))<<40 |
		uint64(numeric.StochasticRoundE2M1(math.Float32frombits(uint32(h[11])<<16)*encB, uint8(w[2]>>24)))<<44 |
		uint64(numeric.StochasticRoundE2M1(math.Float32frombits(uint32(h[12])<<16)*encB, uint8(w[3]>>0)))<<48 |
		uint64(numeric.StochasticRoundE2M1(math.Float32frombits(uint32(h[13])<<16)*encB, uint8(w[3]>>8)))<<52 |
		uint64(numeric.StochasticRoundE2M1(math.Float32frombits(uint32(h[14])<<16)*encB, uint8(w[3]>>16)))<<56 |
		uint64(numeric.StochasticRoundE2M1(math.Float32frombits(uint32(h[15])<<16)*encB, uint8(w[3]>>24)))<<60
}

// encodeRNBF16 is encodeRN of 16 BF16 values given as bits (unrolled: constant
// shifts, no loop).
func encodeRNBF16(h *[16]uint16, encB float32) uint64 {
	return uint64(numeric.EncodeE2M1(math.Float32frombits(uint32(h[0])<<16)*encB))<<0 |
		uint64(numeric.EncodeE2M1(math.Float32frombits(uint32(h[1])<<16)*encB))<<4 |
		uint64(numeric.EncodeE2M1(math.Float32frombits(uint32(h[2])<<16)*encB))<<8 |
		uint64(numeric.EncodeE2M1(math.Float32frombits(uint32(h[3])<<16)*encB))<<12 |
		uint64(numeric.EncodeE2M1(math.Float32frombits(uint32(h[4])<<16)*encB))<<16 |
		uint64(numeric.EncodeE2M1(math.Float32frombits(uint32(h[5])<<16)*encB))<<20 |
		uint64(numeric.EncodeE2M1(math.Float32frombits(uint32(h[6])<<16)*encB))<<24 |
		uint64(numeric.EncodeE2M1(math.Float32frombits(uint32(h[7])<<16)*encB))<<28 |
		uint64(numeric.EncodeE2M1(math.Float32frombits(uint32(h[8])<<16)*encB))<<32 |
		uint64(numeric.EncodeE2M1(math.Float32frombits(uint32(h[9])<<16)*encB))<<36 |
		uint64(numeric.EncodeE2M1(math.Float32frombits(uint32(h[10])<<16)*encB))<<40 |
		uint64(numeric.EncodeE2M1(math.Float32frombits(uint32(h[11])<<16)*encB))<<44 |
		uint64(numeric.EncodeE2M1(math.Float32frombits(uint32(h[12])<<16)*encB))<<48 |
		uint64(numeric.EncodeE2M1(math.Float32frombits(uint32(h[13])<<16)*encB))<<52 |
		uint64(numeric.EncodeE2M1(math.Float32frombits(uint32(h[14])<<16)*encB))<<56 |
		uint64(numeric.EncodeE2M1(math.Float32frombits(uint32(h[15])<<16)*encB))<<60
}

// block quantizes the 1×16 block cb of stored row r of direction d, whose
// amax is bamax, rounding stochastically with words when they are given.
func (j *job) block(d *dirOut, x *[16]float32, bamax float32, r, cb int, words *[4]uint32) {
	code, encB := d.g.blockScale(bamax)
	d.scales.buf[d.scales.at(r, cb)] = code
	var packed uint64
	if words != nil {
		packed = encodeSR(x, encB, words)
	} else {
		packed = encodeRN(x, encB)
	}
	binary.LittleEndian.PutUint64(d.data[r*d.rowBytes+cb*8:], packed)
}

// tile2D quantizes band b × columns c0.. in 16×16 tiles: one amax and scale per
// tile (spec §5.1, §5.3), each element rounded once; rowwise stores the codes
// as they are, columnwise their transpose, and both replicate the tile's scale
// over its 16 stored rows, the 1×16 layout the GEMM reads.
func (j *job) tile2D(b, c0 int, cc *codeCache) {
	var tile [BlockSize * tileW]float32
	var ws tileWords
	w := min(tileW, j.k-c0)
	r0 := b * BlockSize
	bf16 := j.src != nil
	if !bf16 {
		loadTile(j.in, j.k, r0, c0, w, &tile)
	}
	gd := &j.row // both directions share the amax of a 2-D tensor
	if !j.row.on {
		gd = &j.col
	}
	g := &gd.g
	bpr := j.k / BlockSize
	for t := 0; t < w/BlockSize; t++ {
		cb := c0/BlockSize + t
		// The tile's amax and scale.
		var code uint8
		var encB float32
		nan := false
		if bf16 {
			v := j.tileAm[b*bpr+cb]
			nan = v&0x8000 != 0
			code = cc.scaleCode(gd, v&0x7FFF)
			encB = g.encB[code]
		} else {
			var m uint32
			for i := 0; i < BlockSize; i++ {
				m = max(m, amaxBits((*[16]float32)(tile[i*tileW+t*BlockSize:])))
			}
			code, encB = g.blockScale(math.Float32frombits(m))
		}
		// 16×16 tensors round each element once, with the bits of its rowwise
		// block (dir 0), whichever directions are stored.
		var words wordsOf
		if j.sr {
			j.srs.fillKeyed(host.DirRowwise, uint64(r0)*uint64(bpr)+uint64(cb), uint64(bpr), BlockSize, bpr, j.keyK, &ws)
			words = &ws
		}
		var rows [BlockSize]uint64
		for i := 0; i < BlockSize; i++ {
			if bf16 {
				h := (*[16]uint16)(j.src[(r0+i)*j.k+cb*BlockSize:])
				switch {
				case words != nil:
					rows[i] = encodeSRBF16(h, encB, words.at(i))
				case nan:
					rows[i] = encodeRNBF16(h, encB)
				default:
					rows[i] = encodeRNTable(h, cc.table(gd, code))
				}
				continue
			}
			x := (*[16]float32)(tile[i*tileW+t*BlockSize:])
			if words != nil {
				rows[i] = encodeSR(x, encB, words.at(i))
			} else {
				rows[i] = encodeRN(x, encB)
			}
		}
		if j.row.on {
			for i, p := range rows {
				binary.LittleEndian.PutUint64(j.row.data[(r0+i)*j.row.rowBytes+cb*8:], p)
				j.row.scales.buf[j.row.scales.at(r0+i, cb)] = code
			}
		}
		if j.col.on {
			transposeNibbles(&rows)
			for jj, p := range rows {
				k := c0 + t*BlockSize + jj
				binary.LittleEndian.PutUint64(j.col.data[k*j.col.rowBytes+b*8:], p)
				j.col.scales.buf[j.col.scales.at(k, b)] = code
			}
		}
	}
}

// transposeNibbles transposes in place a 16×16 tile of codes held as 16 rows
// of 16 nibbles (element c of a row in bits 4c..4c+3): the recursive block
// swap of Hacker's Delight §7-3 — exchange the off-diagonal 8×8 blocks, then
// the 4×4 blocks inside each quadrant, then 2×2, then single nibbles.
func transposeNibbles(r *[16]uint64) {
	swap := func(i, j int, mask uint64, shift uint) {
		a, b := r[i], r[j]
		r[i] = a&mask | (b&mask)<<shift
		r[j] = b&^mask | (a&^mask)>>shift
	}
	for i := 0; i < 8; i++ {
		swap(i, i+8, 0x00000000FFFFFFFF, 32)
	}
	for i := 0; i < 16; i += 8 {
		for k := i; k < i+4; k++ {
			swap(k, k+4, 0x0000FFFF0000FFFF, 16)
		}
	}
	for i := 0; i < 16; i += 4 {
		swap(i, i+2, 0x00FF00FF00FF00FF, 8)
		swap(i+1, i+3, 0x00FF00FF00FF00FF, 8)
	}
	for i := 0; i < 16; i += 2 {
		swap(i, i+1, 0x0F0F0F0F0F0F0F0F, 4)
	}
}

// amaxBits is the bit pattern of max |x| over a block, NaN ignored (fmaxf, as
// TE's block reduction): magnitudes order like their bit patterns.
func amaxBits(x *[16]float32) uint32 {
	var m0, m1, m2, m3 uint32 // four chains for instruction-level parallelism
	for i := 0; i < 16; i += 4 {
		m0 = max(m0, absNoNaN(x[i]))
		m1 = max(m1, absNoNaN(x[i+1]))
		m2 = max(m2, absNoNaN(x[i+2]))
		m3 = max(m3, absNoNaN(x[i+3]))
	}
	return max(m0, m1, m2, m3)
}

// absNoNaN is the magnitude bit pattern of v, 0 for NaN.
func absNoNaN(v float32) uint32 {
	a := math.Float32bits(v) & 0x7FFFFFFF
	return a &^ uint32(int32(0x7F800000-a)>>31)
}

func blockAmax(x *[16]float32) float32 { return math.Float32frombits(amaxBits(x)) }

// encodeRN is q_i = RNE_sat_e2m1(fl32(x_i · enc_b)) for 16 elements, packed two
// a byte, the even element low (spec §1.5, §5.2); unrolled.
func encodeRN(x *[16]float32, encB float32) uint64 {
	return uint64(numeric.EncodeE2M1(x[0]*encB))<<0 |
		uint64(numeric.EncodeE2M1(x[1]*encB))<<4 |
		uint64(numeric.EncodeE2M1(x[2]*encB))<<8 |
		uint64(numeric.EncodeE2M1(x[3]*encB))<<12 |
		uint64(numeric.EncodeE2M1(x[4]*encB))<<16 |
		uint64(numeric.EncodeE2M1(x[5]*encB))<<20 |
		uint64(numeric.EncodeE2M1(x[6]*encB))<<24 |
		uint64(numeric.EncodeE2M1(x[7]*encB))<<28 |
		uint64(numeric.EncodeE2M1(x[8]*encB))<<32 |
		uint64(numeric.EncodeE2M1(x[9]*encB))<<36 |
		uint64(numeric.EncodeE2M1(x[10]*encB))<<40 |
		uint64(numeric.EncodeE2M1(x[11]*encB))<<44 |
		uint64(numeric.EncodeE2M1(x[12]*encB))<<48 |
		uint64(numeric.EncodeE2M1(x[13]*encB))<<52 |
		uint64(numeric.EncodeE2M1(x[14]*encB))<<56 |
		uint64(numeric.EncodeE2M1(x[15]*encB))<<60
}

// encodeSR is the stochastic-rounding counterpart of encodeRN: element i takes
// byte i%4 of word i/4 (spec §5.6; stochastic.go); unrolled.
func encodeSR(x *[16]float32, encB float32, w *[4]uint32) uint64 {
	return uint64(numeric.StochasticRoundE2M1(x[0]*encB, uint8(w[0]>>0)))<<0 |
		uint64(numeric.StochasticRoundE2M1(x[1]*encB, uint8(w[0]>>8)))<<4 |
		uint64(numeric.StochasticRoundE2M1(x[2]*encB, uint8(w[0]>>16)))<<8 |
		uint64(numeric.StochasticRoundE2M1(x[3]*encB, uint8(w[0]>>24)))<<12 |
		uint64(numeric.StochasticRoundE2M1(x[4]*encB, uint8(w[1]>>0)))<<16 |
		uint64(numeric.StochasticRoundE2M1(x[5]*encB, uint8(w[1]>>8)))<<20 |
		uint64(numeric.StochasticRoundE2M1(x[6]*encB, uint8(w[1]>>16)))<<24 |
		uint64(numeric.StochasticRoundE2M1(x[7]*encB, uint8(w[1]>>24)))<<28 |
		uint64(numeric.StochasticRoundE2M1(x[8]*encB, uint8(w[2]>>0)))<<32 |
		uint64(numeric.StochasticRoundE2M1(x[9]*encB, uint8(w[2]>>8)))<<36 |
		uint64(numeric.StochasticRoundE2M1(x[10]*encB, uint8(w[2]>>16)))<<40 |
		uint64(numeric.StochasticRoundE2M1(x[11]*encB, uint8(w[2]>>24)))<<44 |
		uint64(numeric.StochasticRoundE2M1(x[12]*encB, uint8(w[3]>>0)))<<48 |
		uint64(numeric.StochasticRoundE2M1(x[13]*encB, uint8(w[3]>>8)))<<52 |
		uint64(numeric.StochasticRoundE2M1(x[14]*encB, uint8(w[3]>>16)))<<56 |
		uint64(numeric.StochasticRoundE2M1(x[15]*encB, uint8(w[3]>>24)))<<60
}

// rhtTransform computes the transform of every 16-element chunk of xᵀ (the
// columns of the BF16 input src [m, k], 16 rows at a time) and returns the
// amax of its BF16 values (spec §5.4), NaN ignored. With dst non-nil it stores
// the BF16 bits there as [k, m], the columnwise copy's stored layout, and with
// am non-nil each chunk's amax there as blockMaxima does.
func rhtTransform(src []uint16, m, k int, signs *[16]float64, dst, am []uint16) float32 {
	bands, tiles := m/BlockSize, (k+tileW-1)/tileW
	var mu sync.Mutex
	var best uint16
	parallel.For(bands*tiles, 1, func(lo, hi int) {
		var raw [BlockSize * tileW]uint16
		var h, tmp [16]uint16
		var m0 uint16
		for t := lo; t < hi; t++ {
			b, c0 := t/tiles, t%tiles*tileW
			w := min(tileW, k-c0)
			r0 := b * BlockSize
			for i := 0; i < BlockSize; i++ {
				copy(raw[i*tileW:i*tileW+w], src[(r0+i)*k+c0:])
			}
			for c := 0; c < w; c++ {
				for i := range h {
					h[i] = raw[i*tileW+c]
				}
				out := &tmp
				if dst != nil {
					out = (*[16]uint16)(dst[(c0+c)*m+r0:])
				}
				rhtChunk(&h, signs, out)
				bm, bn := blockMaxBF16(out)
				m0 = max(m0, bm)
				if am != nil {
					am[(c0+c)*(m/BlockSize)+b] = bm | nanBit(bn)
				}
			}
		}
		mu.Lock()
		best = max(best, m0)
		mu.Unlock()
	})
	return bf16Value(best)
}

func bf16Value(h uint16) float32 { return numeric.BF16ToFloat32(h) }
