package nvfp4

// An independent, scalar reference of NVFP4 quantization, written from
// shared/spec/formats.md §1.2, §1.5 and §5 step by step. It shares no code with
// the kernels or with internal/numeric: its codecs search value tables built
// from the bit-layout formulas, its float32 roundings are float64 operations
// followed by one explicit float32 conversion (a float64 product or quotient of
// two float32s is exact or innocuously rounded, so this is fl32 of the exact
// result), and its random bits come from its own Philox transcription.

import (
	"math"
	"math/big"
)

// --- codecs -------------------------------------------------------------------

// refE4M3Values[c] is the value of E4M3 code c for c in 0..126 (spec §1.2:
// bias 7, 3 mantissa bits, subnormal step 2^-9, no Inf, 0x7F NaN).
var refE4M3Values = func() (v [127]float64) {
	for c := range v {
		e, m := c>>3, c&7
		if e == 0 {
			v[c] = math.Ldexp(float64(m), -9)
		} else {
			v[c] = math.Ldexp(1+float64(m)/8, e-7)
		}
	}
	return
}()

func refDecodeE4M3(c uint8) float64 {
	if c&0x7F == 0x7F {
		return math.NaN()
	}
	v := refE4M3Values[c&0x7F]
	if c&0x80 != 0 {
		return -v
	}
	return v
}

// refNearest returns the index of the value nearest to a in the ascending list
// vals, ties to the even index, saturating at the ends.
func refNearest(vals []float64, a float64) int {
	best := 0
	for i := 1; i < len(vals); i++ {
		d0, d1 := math.Abs(vals[best]-a), math.Abs(vals[i]-a)
		if d1 < d0 || (d1 == d0 && i%2 == 0) {
			best = i
		}
	}
	return best
}

// refEncodeE4M3 is RNE with satfinite (spec §1.2): NaN → 0x7F, anything at or
// above 448 → ±448, the sign of zero kept.
func refEncodeE4M3(x float64) uint8 {
	if math.IsNaN(x) {
		return 0x7F
	}
	var s uint8
	if math.Signbit(x) {
		s = 0x80
	}
	a := math.Abs(x)
	if a >= 448 {
		return s | 0x7E
	}
	return s | uint8(refNearest(refE4M3Values[:], a))
}

var refE2M1Values = []float64{0, 0.5, 1, 1.5, 2, 3, 4, 6}

// refEncodeE2M1 is RNE with saturation to ±6 (spec §1.5); NaN gives +6 and a
// negative value that rounds to zero keeps its sign (§13 item 3).
func refEncodeE2M1(x float64) uint8 {
	if math.IsNaN(x) {
		return 7
	}
	var s uint8
	if math.Signbit(x) {
		s = 8
	}
	a := math.Abs(x)
	if a >= 6 { // saturate: refNearest's distances stop resolving far above the grid
		return s | 7
	}
	return s | uint8(refNearest(refE2M1Values, a))
}

func refDecodeE2M1(c uint8) float64 {
	v := refE2M1Values[c&7]
	if c&8 != 0 {
		return -v
	}
	return v
}

// refBF16 rounds x to bfloat16 once, to nearest even, by searching the
// ascending non-negative codes; overflow past max + half an ulp gives Inf.
func refBF16(x float64) uint16 {
	if math.IsNaN(x) {
		return 0x7FC0
	}
	var s uint16
	if math.Signbit(x) {
		s = 0x8000
	}
	a := math.Abs(x)
	val := func(c int) float64 { return float64(math.Float32frombits(uint32(c) << 16)) }
	if a >= val(0x7F7F)+math.Ldexp(1, 119) {
		return s | 0x7F80
	}
	lo, hi := 0, 0x7F7F
	for lo < hi { // the largest code whose value ≤ a
		mid := (lo + hi + 1) / 2
		if val(mid) <= a {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if val(lo) == a || lo == 0x7F7F {
		return s | uint16(lo)
	}
	d0, d1 := a-val(lo), val(lo+1)-a
	if d1 < d0 || (d1 == d0 && lo%2 == 1) {
		lo++
	}
	return s | uint16(lo)
}

func refBF16Value(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// --- random Hadamard transform ----------------------------------------------

// refHadamard is the Sylvester matrix H16 built by the Kronecker recursion
// H_2n = [[H, H], [H, -H]].
var refHadamard = func() [16][16]float64 {
	h := [][]float64{{1}}
	for len(h) < 16 {
		n := len(h)
		next := make([][]float64, 2*n)
		for i := range next {
			next[i] = make([]float64, 2*n)
			for j := range next[i] {
				v := h[i%n][j%n]
				if i >= n && j >= n {
					v = -v
				}
				next[i][j] = v
			}
		}
		h = next
	}
	var out [16][16]float64
	for i := range out {
		copy(out[i][:], h[i])
	}
	return out
}()

// refRHT is the direct matrix product out_j = Σ_i x_i·s_i·H16[i][j]/4 (spec §5.5)
// in float64, ascending i, then one rounding to BF16; an exact zero is +0.
func refRHT(x [16]float32, mask uint16) [16]float32 {
	var out [16]float32
	for j := 0; j < 16; j++ {
		acc := 0.0
		for i := 0; i < 16; i++ {
			s := 1.0
			if mask>>i&1 == 1 {
				s = -1
			}
			acc += float64(x[i]) * s * refHadamard[i][j] / 4
		}
		if acc == 0 {
			acc = 0
		}
		out[j] = refBF16Value(refBF16(acc))
	}
	return out
}

// --- random bits ---------------------------------------------------------------

// refPhilox is Philox4x32-10 transcribed from Salmon et al. (SC 2011).
func refPhilox(ctr [4]uint32, key [2]uint32) [4]uint32 {
	for round := 0; round < 10; round++ {
		a := uint64(ctr[0]) * 0xD2511F53
		b := uint64(ctr[2]) * 0xCD9E8D57
		ctr = [4]uint32{uint32(b>>32) ^ ctr[1] ^ key[0], uint32(b), uint32(a>>32) ^ ctr[3] ^ key[1], uint32(a)}
		key[0] += 0x9E3779B9
		key[1] += 0xBB67AE85
	}
	return ctr
}

// refRandomByte is the byte element c of stored row r of a direction with cols
// stored columns draws (stochastic.go's documented scheme).
func refRandomByte(seed, offset uint64, dir int, r, c, cols int) uint8 {
	blk := uint64(r)*uint64(cols/16) + uint64(c/16)
	ctr := [4]uint32{uint32(blk), uint32(blk>>32) | uint32(dir)<<31, uint32(offset), uint32(offset >> 32)}
	w := refPhilox(ctr, [2]uint32{uint32(seed), uint32(seed >> 32)})
	j := c % 16
	return uint8(w[j/4] >> (8 * (j % 4)))
}

// refRandomByteFlat is the byte of element (r, c) of a stored matrix whose
// logical rows hold cols elements, keyed by its flat index f = r·cols + c
// (spec §14 item 3): byte f%16 of Philox block f/16. Padded elements (c ≥
// cols) draw 0.
func refRandomByteFlat(seed, offset uint64, dir int, r, c, cols int) uint8 {
	if c >= cols {
		return 0
	}
	f := uint64(r)*uint64(cols) + uint64(c)
	blk := f / 16
	ctr := [4]uint32{uint32(blk), uint32(blk>>32) | uint32(dir)<<31, uint32(offset), uint32(offset >> 32)}
	w := refPhilox(ctr, [2]uint32{uint32(seed), uint32(seed >> 32)})
	j := f % 16
	return uint8(w[j/4] >> (8 * (j % 4)))
}

// refStochastic is spec §5.6's emulation with exact arithmetic: t is
// fl32(u·step + |x|) computed from the exact sum, floored onto the grid of t's
// region, clamped to 6, signed like x; NaN gives +6.
func refStochastic(x float32, rbits uint8) uint8 {
	if x != x {
		return 7
	}
	a := math.Abs(float64(x))
	step := 2.0
	if a < 2 {
		step = 0.5
	} else if a < 4 {
		step = 1
	}
	exact := new(big.Float).SetPrec(400).SetFloat64(float64(rbits) / 256 * step)
	exact.Add(exact, new(big.Float).SetPrec(400).SetFloat64(a))
	t64, _ := exact.Float32()
	t := float64(t64)
	var q float64
	switch {
	case t < 2:
		q = math.Floor(t*2) / 2
	case t < 4:
		q = math.Floor(t)
	default:
		q = math.Floor(t/2) * 2
	}
	q = math.Min(q, 6)
	if math.Signbit(float64(x)) {
		q = -q
		if q == 0 {
			q = math.Copysign(0, -1)
		}
	}
	return refEncodeE2M1(q)
}

// --- quantize -----------------------------------------------------------------

type refOptions struct {
	twoD     bool
	rht      bool
	mask     uint16
	sr       bool
	seed     uint64
	offset   uint64
	swizzled bool
	amaxIn   *[2]float32
	// keyM, keyK, when set, are the dims of the logical X whose zero-padded
	// copy is being quantized: random bits are keyed by X's flat indices
	// (spec §14 item 3), and padded elements draw byte 0.
	keyM, keyK int
}

// refDirection is one direction's expected buffers.
type refDirection struct {
	data  []byte
	scale []byte
	amax  float32
}

func refF32(x float64) float32 { return float32(x) }

// refSEnc is S_enc of spec §5.2 with the kernel's special cases.
func refSEnc(amax float32) float32 {
	s := refF32(2688 / float64(amax))
	if math.IsNaN(float64(s)) || float64(s) > math.MaxFloat32 {
		s = math.MaxFloat32
	}
	if amax == 0 || s == 0 {
		s = 1
	}
	return s
}

// refAmax is max |x| over xs, NaN ignored.
func refAmax(xs []float32) float32 {
	m := 0.0
	for _, x := range xs {
		if a := math.Abs(float64(x)); a > m {
			m = a
		}
	}
	return float32(m)
}

// refQuantizeBlocks quantizes the stored matrix v ([rows][cols] values) of one
// direction with global amax amax, in blocks of 1×16 (or, for 2-D, with the
// block amax taken over the 16×16 tile given by tileAmax). bits returns the
// stochastic-rounding byte of a stored element.
func refQuantizeBlocks(v [][]float32, amax float32, tileAmax func(r, cb int) float32, sr func(r, c int) uint8, swizzled bool) refDirection {
	rows, cols := len(v), len(v[0])
	sEnc := refSEnc(amax)
	sDec := refF32(1 / float64(sEnc))
	recip6 := refF32(1.0 / 6)
	sEncDiv6 := refF32(float64(sEnc) * float64(recip6))
	pr := (rows + 127) / 128 * 128
	pc := (cols/16 + 3) / 4 * 4
	out := refDirection{data: make([]byte, rows*cols/2), scale: make([]byte, pr*pc), amax: amax}
	for r := 0; r < rows; r++ {
		for cb := 0; cb < cols/16; cb++ {
			blk := v[r][cb*16 : cb*16+16]
			bamax := refAmax(blk)
			if tileAmax != nil {
				bamax = tileAmax(r, cb)
			}
			sDecB := refF32(float64(bamax) * float64(sEncDiv6))
			code := refEncodeE4M3(float64(sDecB))
			encB := refF32(1 / float64(refF32(refDecodeE4M3(code)*float64(sDec))))
			if float64(encB) > math.MaxFloat32 {
				encB = math.MaxFloat32
			}
			idx := r*pc + cb
			if swizzled {
				idx = refSwizzleIndex(r, cb, pc)
			}
			out.scale[idx] = code
			for j, x := range blk {
				y := refF32(float64(x) * float64(encB))
				var q uint8
				if sr != nil {
					q = refStochastic(y, sr(r, cb*16+j))
				} else {
					q = refEncodeE2M1(float64(y))
				}
				c := cb*16 + j
				out.data[r*cols/2+c/2] |= q << (4 * (c % 2))
			}
		}
	}
	return out
}

// refSwizzleIndex is the cuBLAS layout of spec §4.7 written from its reshape
// description: (rows/128, 4, 32, cols/4, 4) permuted to (rows/128, cols/4, 32, 4, 4).
func refSwizzleIndex(i, j, cols int) int {
	rb, r4, r32 := i/128, (i%128)/32, i%32
	cb, c := j/4, j%4
	return (((rb*(cols/4)+cb)*32+r32)*4+r4)*4 + c
}

// refQuantize quantizes the logical [m][k] matrix x (already the float32 value
// of every input element) in both directions.
func refQuantize(x [][]float32, o refOptions) (row, col refDirection) {
	m, k := len(x), len(x[0])
	flat := make([]float32, 0, m*k)
	for _, r := range x {
		flat = append(flat, r...)
	}
	// Columnwise source: xᵀ, transformed per 16-chunk along M with the RHT.
	xt := make([][]float32, k)
	for c := range xt {
		xt[c] = make([]float32, m)
		for r := 0; r < m; r++ {
			xt[c][r] = x[r][c]
		}
		if o.rht {
			for m0 := 0; m0 < m; m0 += 16 {
				var chunk [16]float32
				copy(chunk[:], xt[c][m0:])
				y := refRHT(chunk, o.mask)
				copy(xt[c][m0:], y[:])
			}
		}
	}
	rowAmax := refAmax(flat)
	colAmax := rowAmax
	if o.rht {
		all := make([]float32, 0, m*k)
		for _, r := range xt {
			all = append(all, r...)
		}
		colAmax = refAmax(all)
	}
	if o.amaxIn != nil {
		rowAmax, colAmax = o.amaxIn[0], o.amaxIn[1]
	}
	var rowBits, colBits func(r, c int) uint8
	if o.sr {
		rowBits = func(r, c int) uint8 { return refRandomByte(o.seed, o.offset, 0, r, c, k) }
		colBits = func(r, c int) uint8 { return refRandomByte(o.seed, o.offset, 1, r, c, m) }
		if o.keyK > 0 {
			rowBits = func(r, c int) uint8 { return refRandomByteFlat(o.seed, o.offset, 0, r, c, o.keyK) }
			colBits = func(r, c int) uint8 { return refRandomByteFlat(o.seed, o.offset, 1, r, c, o.keyM) }
		}
	}
	if !o.twoD {
		return refQuantizeBlocks(x, rowAmax, nil, rowBits, o.swizzled), refQuantizeBlocks(xt, colAmax, nil, colBits, o.swizzled)
	}
	// 2-D: one amax per 16×16 tile; the columnwise copy is the transpose of the
	// rowwise codes (and takes the rowwise random bits).
	tile := func(r, c int) float32 { // tile amax of logical element (r, c)
		var vals []float32
		for i := r / 16 * 16; i < r/16*16+16; i++ {
			vals = append(vals, x[i][c/16*16:c/16*16+16]...)
		}
		return refAmax(vals)
	}
	row = refQuantizeBlocks(x, rowAmax, func(r, cb int) float32 { return tile(r, cb*16) }, rowBits, o.swizzled)
	pr, pc := (k+127)/128*128, (m/16+3)/4*4
	col = refDirection{data: make([]byte, k*m/2), scale: make([]byte, pr*pc), amax: row.amax}
	rowPC := (k/16 + 3) / 4 * 4
	for c := 0; c < k; c++ {
		for r := 0; r < m; r++ {
			q := row.data[r*k/2+c/2] >> (4 * (c % 2)) & 0xF
			col.data[c*m/2+r/2] |= q << (4 * (r % 2))
		}
		for mb := 0; mb < m/16; mb++ {
			src := mb*16*rowPC + c/16
			dst := c*pc + mb
			if o.swizzled {
				src = refSwizzleIndex(mb*16, c/16, rowPC)
				dst = refSwizzleIndex(c, mb, pc)
			}
			col.scale[dst] = row.scale[src]
		}
	}
	return row, col
}

// refDequantize is x = fl32(e2m1 · fl32(fl32(float(S_dec_b_fp8)·amax)·fl32(1/2688)))
// (spec §5.2) of one direction, as the stored [rows][cols] matrix.
func refDequantize(d refDirection, rows, cols int, swizzled bool) [][]float32 {
	f := refF32(1.0 / 2688)
	pc := (cols/16 + 3) / 4 * 4
	out := make([][]float32, rows)
	for r := range out {
		out[r] = make([]float32, cols)
		for c := range out[r] {
			idx := r*pc + c/16
			if swizzled {
				idx = refSwizzleIndex(r, c/16, pc)
			}
			final := refF32(float64(refF32(refDecodeE4M3(d.scale[idx])*float64(d.amax))) * float64(f))
			q := d.data[r*cols/2+c/2] >> (4 * (c % 2)) & 0xF
			out[r][c] = refF32(refDecodeE2M1(q) * float64(final))
		}
	}
	return out
}
