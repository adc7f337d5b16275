package mxfp6

import (
	"fmt"
	"math"

	"libquant/internal/numeric"
	"libquant/internal/parallel"
	"libquant/pluginsdk"
)

// loadRow converts n elements of a BF16, FP16 or FP32 tensor from element
// index at into dst (exact: every such value is a float32).
func loadRow(t pluginsdk.Tensor, at int64, dst []float32) {
	switch t.DType {
	case pluginsdk.Float32:
		copy(dst, t.Float32s()[at:])
	case pluginsdk.BFloat16:
		for i, h := range t.Uint16s()[at : at+int64(len(dst))] {
			dst[i] = math.Float32frombits(uint32(h) << 16)
		}
	case pluginsdk.Float16:
		for i, h := range t.Uint16s()[at : at+int64(len(dst))] {
			dst[i] = numeric.FP16ToFloat32(h)
		}
	}
}

func checkInput(what string, t pluginsdk.Tensor, m, k int64) error {
	if t.DType != pluginsdk.Float32 && t.DType != pluginsdk.BFloat16 && t.DType != pluginsdk.Float16 {
		return fmt.Errorf("%s: dtype %d not supported (want float32, bfloat16 or float16): %w", what, t.DType, pluginsdk.ErrUnsupported)
	}
	if int64(len(t.Data)) != m*k*t.DType.Size() {
		return fmt.Errorf("%s: holds %d bytes, [%d, %d] needs %d: %w", what, len(t.Data), m, k, m*k*t.DType.Size(), pluginsdk.ErrInvalidArgument)
	}
	return nil
}

// Amax writes max |x| (NaN ignored) into the wanted slots. MX scales come
// from per-block amaxes; the global one is what a hybrid's other side may need.
func (s *spec) Amax(r *pluginsdk.AmaxRequest) error {
	if err := checkInput("input", r.Input, r.M, r.K); err != nil {
		return err
	}
	var amax float32
	row := make([]float32, r.K)
	for i := int64(0); i < r.M; i++ {
		loadRow(r.Input, i*r.K, row)
		for _, v := range row {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax = a
			}
		}
	}
	out := r.Out.Float32s()
	for d := 0; d < 2; d++ {
		if r.Want&(1<<d) != 0 {
			out[d] = amax
		}
	}
	return nil
}

// dirOut is one direction's output: rows of packed codes and of scales.
type dirOut struct {
	data, scales []byte
	pitch        int64 // bytes per data row
	nb           int64 // scales per row
}

func (s *spec) dirOut(st *pluginsdk.Storage, m, k int64, dir pluginsdk.Direction) (*dirOut, error) {
	if st == nil {
		return nil, nil
	}
	layout, _ := s.Layout(m, k, dir)
	if len(st.Buffers) != len(layout) {
		return nil, fmt.Errorf("%s output: %d buffers, the layout has %d: %w", dir, len(st.Buffers), len(layout), pluginsdk.ErrInvalidArgument)
	}
	for i, b := range layout {
		if st.Buffers[i].Kind != b.Kind || int64(len(st.Buffers[i].Tensor.Data)) != b.Bytes() {
			return nil, fmt.Errorf("%s output: buffer %d is not the layout's %v: %w", dir, i, b, pluginsdk.ErrInvalidArgument)
		}
	}
	return &dirOut{data: st.Buffers[0].Tensor.Data, scales: st.Buffers[1].Tensor.Data, pitch: layout[0].Shape[1] / 4 * 3, nb: layout[1].Shape[1]}, nil
}

// Quantize writes the requested directions in one pass over 32-row bands, each
// computed on its own (the bytes never depend on the number of workers). Per
// block of 32 (1×32 rowwise, 32×1 columnwise; a partial block at the end as if
// zero-padded, spec §14), OCP MX v1.0 §6.3:
//
//	amax = max |x| over the block (NaN skipped)
//	e    = s.exponent(amax)
//	q_i  = encode(fl32(x_i · 2^(127−e)))     2^(127−e) exact, NaN for e = 0xFF
//
// encode is RNE with saturation (numeric.FP6.Encode). AmaxIn is not used:
// block formats have no global amax.
func (s *spec) Quantize(r *pluginsdk.QuantizeRequest) error {
	if err := checkInput("input", r.Input, r.M, r.K); err != nil {
		return err
	}
	row, err := s.dirOut(r.Out[pluginsdk.Rowwise], r.M, r.K, pluginsdk.Rowwise)
	if err != nil {
		return err
	}
	col, err := s.dirOut(r.Out[pluginsdk.Columnwise], r.M, r.K, pluginsdk.Columnwise)
	if err != nil {
		return err
	}
	m, k := r.M, r.K
	bands := int((m + BlockLen - 1) / BlockLen)
	if r.Input.DType == pluginsdk.BFloat16 {
		// BF16 bands are read in place: no FP32 staging.
		in := r.Input.Uint16s()
		parallel.For(bands, 1, func(lo, hi int) {
			codes := make([]uint8, max(k, BlockLen)+3)
			for b := lo; b < hi; b++ {
				r0 := int64(b) * BlockLen
				rows := min(BlockLen, m-r0)
				if row != nil {
					for i := int64(0); i < rows; i++ {
						quantizeLine(s, in[(r0+i)*k:(r0+i+1)*k], 1, k, row, r0+i, codes)
					}
				}
				if col != nil {
					for c := int64(0); c < k; c++ {
						quantizeColumnBlock(s, in[r0*k+c:], k, rows, col, c, int64(b), codes)
					}
				}
			}
		})
		return nil
	}
	parallel.For(bands, 1, func(lo, hi int) {
		x := make([]float32, BlockLen*k)
		codes := make([]uint8, max(k, BlockLen)+3)
		for b := lo; b < hi; b++ {
			r0 := int64(b) * BlockLen
			rows := min(BlockLen, m-r0)
			for i := int64(0); i < rows; i++ {
				loadRow(r.Input, (r0+i)*k, x[i*k:(i+1)*k])
			}
			if row != nil {
				for i := int64(0); i < rows; i++ {
					quantizeLine(s, x[i*k:(i+1)*k], 1, k, row, r0+i, codes)
				}
			}
			if col != nil {
				for c := int64(0); c < k; c++ {
					quantizeColumnBlock(s, x[c:], k, rows, col, c, int64(b), codes)
				}
			}
		}
	})
	return nil
}

// element is an input element as the kernels read it: FP32 values, or BF16
// bit patterns read in place.
type element interface{ float32 | uint16 }

// quantizeLine quantizes n values x[0], x[stride], ... into data row `line`
// of d: its blocks, its scales and its packed codes (zero past n).
func quantizeLine[T element](s *spec, x []T, stride, n int64, d *dirOut, line int64, codes []uint8) {
	for j := int64(0); j*BlockLen < n; j++ {
		c0 := j * BlockLen
		c1 := min(c0+BlockLen, n)
		d.scales[line*d.nb+j] = block(s, x, stride, c0, c1, codes[c0:c1])
	}
	for i := n; i < (n+3)/4*4; i++ {
		codes[i] = 0
	}
	pack(d.data[line*d.pitch:(line+1)*d.pitch], codes[:(n+3)/4*4])
}

// quantizeColumnBlock quantizes the rows values x[0], x[k], ... of one column
// (a 32×1 block, or a partial one) into columnwise data row c, block b.
func quantizeColumnBlock[T element](s *spec, x []T, k, rows int64, d *dirOut, c, b int64, codes []uint8) {
	cs := codes[:BlockLen]
	d.scales[c*d.nb+b] = block(s, x, k, 0, rows, cs[:rows])
	for i := rows; i < BlockLen; i++ {
		cs[i] = 0
	}
	// A 32-code block is 24 whole bytes; a partial last one may be shorter
	// than its 24 bytes' slot in the row, whose end is the pitch.
	start := c*d.pitch + b*24
	end := min(start+24, (c+1)*d.pitch)
	n := (end - start) / 3 * 4
	pack(d.data[start:end], cs[:n])
}

// block quantizes x[i*stride] for i in [c0, c1) into codes and returns the
// block's scale byte.
func block[T element](s *spec, x []T, stride, c0, c1 int64, codes []uint8) uint8 {
	if xb, ok := any(x).([]uint16); ok {
		return s.blockBF16(xb, stride, c0, c1, codes)
	}
	xf := any(x).([]float32)
	var amax float32
	for i := c0; i < c1; i++ {
		if a := math.Float32frombits(math.Float32bits(xf[i*stride]) & 0x7FFFFFFF); a > amax {
			amax = a
		}
	}
	e := s.exponent(amax)
	scale := numeric.E8M0Reciprocal(e)
	for i := c0; i < c1; i++ {
		codes[i-c0] = s.el.Encode(xf[i*stride] * scale)
	}
	return e
}

// blockBF16 is block on BF16 bit patterns. BF16 magnitudes order like their
// bits, so the amax is an integer max (NaN patterns, above 0x7F80, skipped).
// A normal x times the power of two 2^(127−e) is exact in FP32 unless it falls
// below FP32's normal range, where every FP6 code is ±0 anyway; so its code
// depends only on its sign, mantissa and scaled exponent E−e: one lookup in
// s.bf16 (built from Encode). Zeros, subnormals, Inf, NaN and the NaN scale
// take Encode itself.
func (s *spec) blockBF16(x []uint16, stride, c0, c1 int64, codes []uint8) uint8 {
	// A contiguous block is read in place; a strided one (columnwise) is
	// gathered first, so that both loops below run over a plain slice.
	var buf [BlockLen]uint16
	xs := x[c0:c1]
	if stride != 1 {
		xs = buf[:c1-c0]
		for i := range xs {
			xs[i] = x[(c0+int64(i))*stride]
		}
	}
	var amax uint16
	for _, h := range xs {
		a := h & 0x7FFF
		if a > 0x7F80 {
			a = 0
		}
		amax = max(amax, a)
	}
	e := s.exponent(math.Float32frombits(uint32(amax) << 16))
	scale := numeric.E8M0Reciprocal(e)
	t := s.bf16
	codes = codes[:len(xs)]
	for i, h := range xs {
		ex := int(h >> 7 & 0xFF)
		if ex == 0 || ex == 0xFF || e == numeric.E8M0NaN {
			codes[i] = s.el.Encode(math.Float32frombits(uint32(h)<<16) * scale)
			continue
		}
		d := min(max(ex-int(e), t.lo), t.hi) - t.lo
		codes[i] = t.codes[(int(h>>15)*t.n+d)<<7|int(h&0x7F)]
	}
	return e
}

// bf16Table holds the FP6 code of ±2^d·(1 + m/128) for d in [lo, hi] and the
// 7-bit BF16 mantissa m: below lo every value rounds to ±0, from hi on every
// value saturates, so clamping d to [lo, hi] gives the same code.
type bf16Table struct {
	lo, hi, n int
	codes     []uint8 // [sign][d-lo][m]
}

func newBF16Table(el *numeric.FP6) *bf16Table {
	emin := 1 - el.Bias
	_, maxExp := math.Frexp(float64(el.Max)) // Max = f·2^maxExp, f in [0.5, 1)
	// 2^lo·2 ≤ half the smallest subnormal 2^(emin−man): rounds to 0. 2^hi
	// exceeds the max: saturates.
	t := &bf16Table{lo: emin - int(el.ManBits) - 2, hi: maxExp}
	t.n = t.hi - t.lo + 1
	t.codes = make([]uint8, 2*t.n*128)
	for sign := 0; sign < 2; sign++ {
		for d := t.lo; d <= t.hi; d++ {
			for m := 0; m < 128; m++ {
				v := float32(math.Ldexp(1+float64(m)/128, d))
				if sign == 1 {
					v = -v
				}
				t.codes[(sign*t.n+d-t.lo)<<7|m] = el.Encode(v)
			}
		}
	}
	return t
}

// pack packs codes (a multiple of 4) into dst.
func pack(dst []byte, codes []uint8) {
	for g := 0; g*4 < len(codes); g++ {
		c := codes[4*g : 4*g+4]
		dst[3*g], dst[3*g+1], dst[3*g+2] = numeric.PackFP6(c[0], c[1], c[2], c[3])
	}
}

// Dequantize writes fl32(decode(q) · 2^(e−127)) (the product is exact unless
// it falls below FP32's normal range) rounded to the output dtype (RNE).
func (s *spec) Dequantize(r *pluginsdk.DequantizeRequest) error {
	m, k := r.M, r.K
	if err := checkInput("out", r.Out, m, k); err != nil {
		return err
	}
	d, err := s.dirOut(r.Storage, m, k, r.Dir)
	if err != nil {
		return err
	}
	tab := s.el.Table()
	lines, n := m, k
	if r.Dir == pluginsdk.Columnwise {
		lines, n = k, m
	}
	parallel.For(int(lines), 16, func(lo, hi int) {
		vals := make([]float32, (n+3)/4*4)
		for l := int64(lo); l < int64(hi); l++ {
			p := d.data[l*d.pitch : (l+1)*d.pitch]
			for g := int64(0); g*4 < n; g++ {
				c0, c1, c2, c3 := numeric.UnpackFP6(p[3*g], p[3*g+1], p[3*g+2])
				sc := numeric.DecodeE8M0(d.scales[l*d.nb+g*4/BlockLen])
				vals[4*g], vals[4*g+1], vals[4*g+2], vals[4*g+3] = tab[c0]*sc, tab[c1]*sc, tab[c2]*sc, tab[c3]*sc
			}
			for i := int64(0); i < n; i++ {
				at := l*n + i // rowwise: (l, i)
				if r.Dir == pluginsdk.Columnwise {
					at = i*k + l // columnwise line l is column l
				}
				store(r.Out, at, vals[i])
			}
		}
	})
	return nil
}

func store(t pluginsdk.Tensor, at int64, v float32) {
	switch t.DType {
	case pluginsdk.Float32:
		t.Float32s()[at] = v
	case pluginsdk.BFloat16:
		t.Uint16s()[at] = numeric.Float32ToBF16(v)
	case pluginsdk.Float16:
		t.Uint16s()[at] = numeric.Float32ToFP16(v)
	}
}
