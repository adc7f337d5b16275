package mxfp8

import (
	"math"
	"runtime"

	"libquant/host"
	"libquant/internal/numeric"
	"libquant/internal/parallel"
)

// kernels are the CPU kernels of both MX formats.
type kernels struct{}

var (
	_ host.Kernels         = kernels{}
	_ host.ScaleSwizzler   = kernels{}
	_ host.TileDequantizer = kernels{}
)

// tileCols is the width of the input tiles the quantizer stages in FP32: a
// 32-row band × 128 columns is 16 KiB, read once for both directions.
const tileCols = 128

// Amax writes max |x| of the input (NaN ignored, as host.AmaxCPU does) into the
// wanted slots. MX quantization uses per-block amaxes only; the global one is
// reported so that a hybrid quantizer whose other side needs it still works.
func (kernels) Amax(r *host.AmaxRequest) error {
	return host.TensorAmaxCPU(r)
}

// dirOut is one direction's output buffers.
type dirOut struct {
	data   []byte
	scales []byte
	l      scaleLayout
}

func newDirOut(s *Spec, st *host.Storage, dir host.Direction, m, k int64) *dirOut {
	if st == nil {
		return nil
	}
	return &dirOut{
		data:   st.MustBuffer(host.BufData).Bytes8(),
		scales: st.MustBuffer(host.BufScaleInv).Bytes8(),
		l:      scaleLayoutOf(s, dir, m, k),
	}
}

// Quantize writes the requested directions in one pass over the input. BF16
// inputs go by 32-row bands read in place (bandBF16); other dtypes by 32-row ×
// 128-column tiles loaded once into FP32 (tile). Either way each work item
// covers whole blocks of both directions — rowwise 1×32, columnwise 32×1 —
// and is computed on its own, so the bytes never depend on GOMAXPROCS. Per
// block (spec §4.3, §4.4):
//
//	amax = max |x|  (NaN elements skipped, as TE's fmaxf reduction does)
//	e    = s.exponent(amax)
//	q_i  = encode(fl32(x_i · 2^(127−e)))     2^(127−e) = exp2f_rcp(e), NaN for e = 0xFF
//
// The input is never modified; AmaxIn is not used (block formats have no
// global amax).
func (kernels) Quantize(r *host.QuantizeRequest) error {
	s := r.Spec.(*Spec)
	if err := s.checkDims(r.M, r.K); err != nil {
		return err
	}
	if !aligned(r.M, r.K) {
		return quantizeRagged(s, r)
	}
	row := newDirOut(s, r.Out[host.DirRowwise], host.DirRowwise, r.M, r.K)
	col := newDirOut(s, r.Out[host.DirColumnwise], host.DirColumnwise, r.M, r.K)
	for _, d := range []*dirOut{row, col} {
		if d != nil {
			d.l.zeroPadding(d.scales)
		}
	}
	if (row == nil && col == nil) || r.M == 0 || r.K == 0 {
		return nil
	}
	job := quantizeJob{s: s, in: r.Input, m: int(r.M), k: int(r.K), row: row, col: col}
	tilesPerBand := (job.k + tileCols - 1) / tileCols
	if r.Input.DType == host.BFloat16 {
		in, tab := r.Input.Uint16s(), s.el.bf16Codes()
		job.chunk = chunkWidth(job.m/BlockLen, job.k, bandCols)
		chunks := (job.k + job.chunk - 1) / job.chunk
		parallel.For(job.m/BlockLen*chunks, 1, func(lo, hi int) {
			sc := bandScratchPool.Get().(*bandScratch)
			defer bandScratchPool.Put(sc)
			for t := lo; t < hi; t++ {
				job.bandBF16(t/chunks, t%chunks, in, tab, sc)
			}
		})
		return nil
	}
	parallel.For(job.m/BlockLen*tilesPerBand, 1, func(lo, hi int) {
		buf := make([]float32, BlockLen*tileCols)
		for t := lo; t < hi; t++ {
			job.tile(t/tilesPerBand, t%tilesPerBand, buf)
		}
	})
	return nil
}

type quantizeJob struct {
	s        *Spec
	in       host.Tensor
	m, k     int
	row, col *dirOut
	chunk    int // columns per BF16 work item
}

// chunkWidth is the column width of the BF16 work items: whole bands up to
// limit columns, split further (at multiples of 256 columns, so on block
// boundaries) when there are fewer than two bands per worker, so that short
// tensors (decode batches) still use every core. Blocks and columns are
// computed independently, so the split never changes a byte.
func chunkWidth(bands, k, limit int) int {
	w := min(k, limit)
	if want := 2 * runtime.GOMAXPROCS(0); bands < want {
		per := (want + bands - 1) / bands
		w = min(w, max(256, (k/per+255)/256*256))
	}
	return w
}

// tile quantizes rows [32·band, +32) × columns [128·ct, +128) (fewer at the right edge).
func (q *quantizeJob) tile(band, ct int, buf []float32) {
	r0, c0 := band*BlockLen, ct*tileCols
	w := min(tileCols, q.k-c0)
	x := buf[:BlockLen*w]
	for i := 0; i < BlockLen; i++ {
		host.LoadFloat32(q.in, int64((r0+i)*q.k+c0), x[i*w:(i+1)*w])
	}
	if q.row != nil {
		q.rowwise(x, r0, c0, w)
	}
	if q.col != nil {
		q.columnwise(x, r0, c0, w)
	}
}

// blockAmax is max |x| over x, compared as magnitude bit patterns (they order
// like the values). NaN is skipped, as TE's kernels reduce the block amax with
// fmaxf/__hmax2 (spec §4.3): a NaN element encodes to NaN on its own and the
// rest of its block keeps a finite scale. (torchao and OCP MX instead give the
// whole block the NaN scale 0xFF.)
func blockAmax(x []float32) float32 {
	var m uint32
	for _, v := range x {
		m = max(m, magnitude32(math.Float32bits(v))) // branch-free: the order is data-dependent
	}
	return math.Float32frombits(m)
}

// magnitude32 is the bit pattern of |x| for float32 bits b, or 0 for a NaN
// (branch-free: all ones masks it away when the pattern is above +Inf).
func magnitude32(b uint32) uint32 {
	a := b & 0x7FFFFFFF
	return a &^ uint32(int32(0x7F800000-a)>>31)
}

// magnitude16 is the same for BF16 bits.
func magnitude16(h uint16) uint32 {
	a := uint32(h & 0x7FFF)
	return a &^ uint32(int32(0x7F80-a)>>31)
}

// encodeScaled writes dst[i] = encode(fl32(src[i]·f)). The switch is per
// block, so the codec is called directly rather than through a func value.
func (el *element) encodeScaled(dst []byte, src []float32, f float32) {
	dst = dst[:len(src)]
	switch el.kind {
	case host.ElementE4M3:
		for i, v := range src {
			dst[i] = numeric.EncodeE4M3(float32(v * f))
		}
	case host.ElementE5M2:
		for i, v := range src {
			dst[i] = numeric.EncodeE5M2(float32(v * f))
		}
	default:
		panic("mxfp8: encodeScaled of " + el.kind.String())
	}
}

// encodeScaledVec writes dst[i] = encode(fl32(src[i]·f[i])).
func (el *element) encodeScaledVec(dst []byte, src, f []float32) {
	dst, f = dst[:len(src)], f[:len(src)]
	switch el.kind {
	case host.ElementE4M3:
		for i, v := range src {
			dst[i] = numeric.EncodeE4M3(float32(v * f[i]))
		}
	case host.ElementE5M2:
		for i, v := range src {
			dst[i] = numeric.EncodeE5M2(float32(v * f[i]))
		}
	default:
		panic("mxfp8: encodeScaledVec of " + el.kind.String())
	}
}

// packScaled writes the E2M1 codes of fl32(v·f) for pairs of values, the even
// one in the low nibble (spec §1.5): dst[p] = pack(src[2p]·f, src[2p+1]·f).
func packScaled(dst []byte, src []float32, f float32) {
	src = src[:2*len(dst)]
	for p := range dst {
		dst[p] = numeric.PackE2M1(numeric.EncodeE2M1(float32(src[2*p]*f)), numeric.EncodeE2M1(float32(src[2*p+1]*f)))
	}
}

func (q *quantizeJob) rowwise(x []float32, r0, c0, w int) {
	s, d := q.s, q.row
	for i := 0; i < BlockLen; i++ {
		xr := x[i*w : (i+1)*w]
		for b := 0; b*BlockLen < w; b++ {
			blk := xr[b*BlockLen : (b+1)*BlockLen]
			e := s.exponent(blockAmax(blk))
			d.scales[d.l.index(r0+i, c0/BlockLen+b)] = e
			f := numeric.E8M0Reciprocal(e)
			off := (r0+i)*q.k + c0 + b*BlockLen
			if s.el.packed {
				packScaled(d.data[off/2:off/2+BlockLen/2], blk, f)
				continue
			}
			s.el.encodeScaled(d.data[off:off+BlockLen], blk, f)
		}
	}
}

func (q *quantizeJob) columnwise(x []float32, r0, c0, w int) {
	s, d := q.s, q.col
	var amax [tileCols]uint32
	for i := 0; i < BlockLen; i++ {
		am := amax[:w]
		for j, v := range x[i*w : (i+1)*w] {
			am[j] = max(am[j], magnitude32(math.Float32bits(v)))
		}
	}
	var f [tileCols]float32
	for j := 0; j < w; j++ {
		e := s.exponent(math.Float32frombits(amax[j]))
		d.scales[d.l.index(c0+j, r0/BlockLen)] = e
		f[j] = numeric.E8M0Reciprocal(e)
	}
	if s.el.packed {
		// Transposed [K, M/2]: column c0+j's 32 codes are 16 consecutive bytes.
		half := q.m / 2
		var col [BlockLen]float32
		for j := 0; j < w; j++ {
			for i := range col {
				col[i] = x[i*w+j]
			}
			packScaled(d.data[(c0+j)*half+r0/2:(c0+j)*half+r0/2+BlockLen/2], col[:], f[j])
		}
		return
	}
	// Not transposed [M, K] (spec §4.5).
	for i := 0; i < BlockLen; i++ {
		off := (r0+i)*q.k + c0
		s.el.encodeScaledVec(d.data[off:off+w], x[i*w:(i+1)*w], f[:w])
	}
}

// Derive always fails: MX tensors can only drop a usage (spec §7.4).
func (kernels) Derive(r *host.DeriveRequest) error {
	return host.Errorf(host.ErrState, "%s: %s data cannot be derived from %s data (MX blocks run along one direction; spec §7.4)",
		r.Spec.Params().Format, r.ToDir, r.FromDir)
}

// SwizzleScales converts st's scale_inv between the compact layout (spec §4.6)
// and the GEMM-swizzled one (spec §4.7) in place; padded positions become 0, as
// TE's swizzle kernel zero-fills them.
func (kernels) SwizzleScales(st *host.Storage, dir host.Direction, m, k int64, swizzled bool) error {
	s := st.Spec.(*Spec)
	if err := s.checkDims(m, k); err != nil {
		return err
	}
	from := scaleLayoutOf(s, dir, m, k)
	to := from
	to.swizzled = swizzled
	if from == to {
		return nil
	}
	buf := st.MustBuffer(host.BufScaleInv).Bytes8()
	src := append([]byte(nil), buf...)
	for i := 0; i < to.padI; i++ {
		for j := 0; j < to.padJ; j++ {
			var v byte
			if i < from.ni && j < from.nj {
				v = src[from.index(i, j)]
			}
			buf[to.index(i, j)] = v
		}
	}
	return nil
}
