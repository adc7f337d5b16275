package fp8

import (
	"math"
	"runtime"

	"libquant/host"
	"libquant/internal/numeric"
	"libquant/internal/parallel"
)

// NameBlock is the registry name of FP8 block scaling (DeepSeek style, spec §6).
const NameBlock = "fp8_block"

// BlockLen is the edge of fp8_block's blocks: 1×128 (block_dims 1) or 128×128
// (block_dims 2) (spec §6.1).
const BlockLen = 128

func init() { host.MustRegister(blockFormat{}, blockKernels{}) }

type blockFormat struct{}

func (blockFormat) Name() string { return NameBlock }

func (blockFormat) NewSpec(p host.Params) (host.Spec, error) {
	if err := p.CheckUnused("Element", "BlockDims", "FP32Scales", "AmaxEpsilon"); err != nil {
		return nil, err
	}
	switch p.Element {
	case host.ElementDefault, host.ElementE4M3:
		p.Element = host.ElementE4M3
	case host.ElementE5M2:
		return nil, host.Errorf(host.ErrInvalidArgument, "config.element: e5m2 not supported by fp8_block: FP8 block scaling is E4M3 only, as TransformerEngine asserts (spec §6.1)")
	default:
		return nil, host.Errorf(host.ErrInvalidArgument, "config.element: %s not supported by fp8_block (want e4m3)", p.Element)
	}
	switch p.BlockDims {
	case 0:
		p.BlockDims = 1
	case 1, 2:
	default:
		return nil, host.Errorf(host.ErrInvalidArgument, "config.block_dims: %d is not 1 (1x128 blocks) or 2 (128x128 blocks)", p.BlockDims)
	}
	if !(p.AmaxEpsilon >= 0) || math.IsInf(float64(p.AmaxEpsilon), 0) {
		return nil, host.Errorf(host.ErrInvalidArgument, "config.amax_epsilon: %g must be finite and ≥ 0", p.AmaxEpsilon)
	}
	return &BlockSpec{p: p}, nil
}

// BlockSpec is one direction's FP8 block-scaling spec.
type BlockSpec struct {
	p host.Params
}

func (s *BlockSpec) Params() host.Params { return s.p }

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
func pad4(n int64) int64       { return (n + 3) &^ 3 }

// Layout (spec §6.3, the GEMM-ready format): rowwise data [M, K], columnwise
// data transposed [K, M], E4M3; FP32 scale_inv
//
//	1D rowwise [⌈K/128⌉, pad4(M)] (scale of row m, K-block kb at [kb][m]),
//	   columnwise [⌈M/128⌉, pad4(K)] ([mb][k]);
//	2D rowwise [⌈M/128⌉, pad4(⌈K/128⌉)] ([mb][kb]),
//	   columnwise [⌈K/128⌉, pad4(⌈M/128⌉)] ([kb][mb]).
//
// Any M and K work: the last blocks along each dim may be shorter (ragged).
func (s *BlockSpec) Layout(m, k int64, dir host.Direction) ([]host.BufferSpec, error) {
	data := []int64{m, k}
	if dir == host.DirColumnwise {
		data = []int64{k, m}
	}
	return []host.BufferSpec{
		{Kind: host.BufData, DType: host.E4M3, Shape: data},
		{Kind: host.BufScaleInv, DType: host.Float32, Shape: blockScaleLayoutOf(s, dir, m, k).shape()},
	}, nil
}

// Derivable: 2D columnwise comes from rowwise by transposing the data and the
// scale matrix (the blocks are the same); 1D blocks run one way only (spec §6.3, §7.4).
func (s *BlockSpec) Derivable(from, to host.Direction) bool {
	return s.p.BlockDims == 2 && from == host.DirRowwise && to == host.DirColumnwise
}

func (s *BlockSpec) NewState() (host.State, error) { return nil, nil }

// blockScaleLayout places the scale of block (i, j), i the block index along the
// direction's data rows (M for rowwise, K for columnwise; one per row in 1D)
// and j the block index along its contraction dim, at j*stride+i (1D, stored
// transposed) or i*stride+j (2D).
type blockScaleLayout struct {
	ni, nj int64 // valid blocks
	rows   int64 // buffer rows
	stride int64 // buffer row length, a multiple of 4
	twoD   bool
}

func blockScaleLayoutOf(s *BlockSpec, dir host.Direction, m, k int64) blockScaleLayout {
	rows, cols := m, k // the direction's data is [rows, cols], blocks run along cols
	if dir == host.DirColumnwise {
		rows, cols = k, m
	}
	if s.p.BlockDims == 2 {
		ni, nj := ceilDiv(rows, BlockLen), ceilDiv(cols, BlockLen)
		return blockScaleLayout{ni: ni, nj: nj, rows: ni, stride: pad4(nj), twoD: true}
	}
	nj := ceilDiv(cols, BlockLen)
	return blockScaleLayout{ni: rows, nj: nj, rows: nj, stride: pad4(rows)}
}

func (l blockScaleLayout) shape() []int64 { return []int64{l.rows, l.stride} }

func (l blockScaleLayout) index(i, j int64) int64 {
	if l.twoD {
		return i*l.stride + j
	}
	return j*l.stride + i
}

// zeroPadding clears the padded columns of every buffer row.
func (l blockScaleLayout) zeroPadding(buf []float32) {
	valid := l.ni
	if l.twoD {
		valid = l.nj
	}
	for r := int64(0); r < l.rows; r++ {
		clear(buf[r*l.stride+valid : (r+1)*l.stride])
	}
}

// valueForInf is the scale TE uses when fp8_max/amax overflows: the input
// type's max (compute_scale_from_types, spec §6.2).
func valueForInf(dt host.DType) float32 {
	switch dt {
	case host.BFloat16:
		return math.Float32frombits(0x7F7F0000) // 0x1.FEp127
	case host.Float16:
		return 65504
	}
	return math.MaxFloat32
}

// blockKernels are the CPU kernels of fp8_block.
type blockKernels struct{}

var (
	_ host.Kernels         = blockKernels{}
	_ host.TileDequantizer = blockKernels{}
)

// Amax writes max |x| of the input (NaN ignored) into the wanted slots; block
// scaling itself uses only per-block amaxes.
func (blockKernels) Amax(r *host.AmaxRequest) error { return tensorKernels{}.Amax(r) }

// blockOut is one direction's output buffers.
type blockOut struct {
	data   []byte
	scales []float32
	l      blockScaleLayout
}

func newBlockOut(s *BlockSpec, st *host.Storage, dir host.Direction, m, k int64) *blockOut {
	if st == nil {
		return nil
	}
	return &blockOut{
		data:   st.MustBuffer(host.BufData).Bytes8(),
		scales: st.MustBuffer(host.BufScaleInv).Float32s(),
		l:      blockScaleLayoutOf(s, dir, m, k),
	}
}

// Quantize reads the input once for every requested direction: BF16 inputs
// with power-of-two scales by 128-row bands read in place (bandBF16), others
// by 128×128 tiles loaded into FP32 (tile). Work items cover whole blocks and
// are computed on their own, so the bytes never depend on GOMAXPROCS. Per
// block (spec §6.2, TE's quantize_transpose_{vector,square}_blockwise):
//
//	amax      = max |x| over the block's elements (fmaxf: NaN ignored; a ragged
//	            block has fewer elements)
//	scale     = ScaleFromAmax(amax, 448, pow2 = !fp32_scales, amax_epsilon, max of the input dtype)
//	scale_inv = fl32(1/scale)   (TE's 1D kernel divides in double and rounds
//	            once more to float; for a float divisor that double rounding is
//	            innocuous, 53 ≥ 2·24+2 bits, so the result is the same)
//	q         = RNE_sat_e4m3(fl32(x · scale))
//
// AmaxIn is not used (no global amax).
func (blockKernels) Quantize(r *host.QuantizeRequest) error {
	s := r.Spec.(*BlockSpec)
	row := newBlockOut(s, r.Out[host.DirRowwise], host.DirRowwise, r.M, r.K)
	col := newBlockOut(s, r.Out[host.DirColumnwise], host.DirColumnwise, r.M, r.K)
	for _, d := range []*blockOut{row, col} {
		if d != nil {
			d.l.zeroPadding(d.scales)
		}
	}
	if (row == nil && col == nil) || r.M == 0 || r.K == 0 {
		return nil
	}
	job := blockJob{s: s, in: r.Input, m: r.M, k: r.K, row: row, col: col,
		pow2: !s.p.FP32Scales, eps: s.p.AmaxEpsilon, vfi: valueForInf(r.Input.DType)}
	if r.Input.DType == host.BFloat16 && job.pow2 {
		in, tab := r.Input.Uint16s(), e4m3BF16()
		job.chunk = chunkWidth(int(ceilDiv(r.M, BlockLen)), int(r.K), bandColsBF16)
		chunks := int(ceilDiv(r.K, int64(job.chunk)))
		parallel.For(int(ceilDiv(r.M, BlockLen))*chunks, 1, func(lo, hi int) {
			sc := blockScratchPool.Get().(*blockScratch)
			defer blockScratchPool.Put(sc)
			for t := lo; t < hi; t++ {
				job.bandBF16(t/chunks, t%chunks, in, tab, sc)
			}
		})
		return nil
	}
	tilesPerBand := ceilDiv(r.K, BlockLen)
	parallel.For(int(ceilDiv(r.M, BlockLen)*tilesPerBand), 1, func(lo, hi int) {
		x := make([]float32, BlockLen*BlockLen)
		q := make([]byte, BlockLen*BlockLen)
		for t := int64(lo); t < int64(hi); t++ {
			job.tile(t/tilesPerBand, t%tilesPerBand, x, q)
		}
	})
	return nil
}

type blockJob struct {
	s        *BlockSpec
	in       host.Tensor
	m, k     int64
	row, col *blockOut
	pow2     bool
	eps, vfi float32
	chunk    int // columns per BF16 work item
}

// chunkWidth is the column width of the BF16 work items: whole bands up to
// limit columns, split further (at multiples of 256 columns, so on block
// boundaries) when there are fewer than two bands per worker, so that short
// tensors still use every core. Blocks are computed independently, so the
// split never changes a byte.
func chunkWidth(bands, k, limit int) int {
	w := min(k, limit)
	if want := 2 * runtime.GOMAXPROCS(0); bands < want {
		per := (want + bands - 1) / bands
		w = min(w, max(256, (k/per+255)/256*256))
	}
	return w
}

// amaxOf is fmaxf-reduced |x|: NaN never wins (TE's block kernels use fmaxf).
func amaxOf(x []float32, m uint32) uint32 {
	for _, v := range x {
		if a := math.Float32bits(v) & 0x7FFFFFFF; a > m && a <= 0x7F800000 {
			m = a
		}
	}
	return m
}

func (j *blockJob) scale(amaxBits uint32) (scale, scaleInv float32) {
	scale = ScaleFromAmax(math.Float32frombits(amaxBits), numeric.E4M3Max, j.pow2, j.eps, j.vfi)
	return scale, Reciprocal(scale)
}

// tile quantizes rows [128·band, +h) × columns [128·ct, +w), h, w ≤ 128.
// x holds the tile row-major with row length w; q its codes (2D).
func (j *blockJob) tile(band, ct int64, x []float32, q []byte) {
	r0, c0 := band*BlockLen, ct*BlockLen
	h, w := min(BlockLen, j.m-r0), min(BlockLen, j.k-c0)
	for i := int64(0); i < h; i++ {
		host.LoadFloat32(j.in, (r0+i)*j.k+c0, x[i*w:(i+1)*w])
	}
	x = x[:h*w]
	if j.s.p.BlockDims == 2 {
		scale, scaleInv := j.scale(amaxOf(x, 0))
		for i, v := range x {
			q[i] = numeric.EncodeE4M3(float32(v * scale))
		}
		if d := j.row; d != nil {
			d.scales[d.l.index(band, ct)] = scaleInv
			for i := int64(0); i < h; i++ {
				copy(d.data[(r0+i)*j.k+c0:], q[i*w:(i+1)*w])
			}
		}
		if d := j.col; d != nil {
			d.scales[d.l.index(ct, band)] = scaleInv
			for c := int64(0); c < w; c++ {
				dst := d.data[(c0+c)*j.m+r0 : (c0+c)*j.m+r0+h]
				for i := range dst {
					dst[i] = q[int64(i)*w+c]
				}
			}
		}
		return
	}
	if d := j.row; d != nil { // 1×128: one block per tile row
		for i := int64(0); i < h; i++ {
			xr := x[i*w : (i+1)*w]
			scale, scaleInv := j.scale(amaxOf(xr, 0))
			d.scales[d.l.index(r0+i, ct)] = scaleInv
			dst := d.data[(r0+i)*j.k+c0 : (r0+i)*j.k+c0+w]
			for c, v := range xr {
				dst[c] = numeric.EncodeE4M3(float32(v * scale))
			}
		}
	}
	if d := j.col; d != nil { // 128×1: one block per tile column, written transposed
		var amax [BlockLen]uint32
		for i := int64(0); i < h; i++ {
			for c, v := range x[i*w : (i+1)*w] {
				if a := math.Float32bits(v) & 0x7FFFFFFF; a > amax[c] && a <= 0x7F800000 {
					amax[c] = a
				}
			}
		}
		for c := int64(0); c < w; c++ {
			scale, scaleInv := j.scale(amax[c])
			d.scales[d.l.index(c0+c, band)] = scaleInv
			dst := d.data[(c0+c)*j.m+r0 : (c0+c)*j.m+r0+h]
			for i := range dst {
				dst[i] = numeric.EncodeE4M3(float32(x[int64(i)*w+c] * scale))
			}
		}
	}
}

// blockScaleInv returns the scale_inv of logical element (r, c) of a direction.
func blockScaleInv(l blockScaleLayout, scales []float32, dir host.Direction, r, c int64) float32 {
	if dir == host.DirColumnwise {
		r, c = c, r
	}
	i := r
	if l.twoD {
		i = r / BlockLen
	}
	return scales[l.index(i, c/BlockLen)]
}

// Dequantize writes x = fl32(decode(q) · scale_inv), rounded to the output dtype.
func (blockKernels) Dequantize(r *host.DequantizeRequest) error {
	s := r.Spec.(*BlockSpec)
	data := r.Storage.MustBuffer(host.BufData).Bytes8()
	scales := r.Storage.MustBuffer(host.BufScaleInv).Float32s()
	l := blockScaleLayoutOf(s, r.Dir, r.M, r.K)
	table := numeric.E4M3Table()
	m, k := r.M, r.K
	parallel.For(int(m), 16, func(lo, hi int) {
		row := make([]float32, k)
		for i := int64(lo); i < int64(hi); i++ {
			if r.Dir == host.DirRowwise {
				src := data[i*k : (i+1)*k]
				for c0 := int64(0); c0 < k; c0 += BlockLen {
					si := blockScaleInv(l, scales, r.Dir, i, c0)
					for c := c0; c < min(c0+BlockLen, k); c++ {
						row[c] = float32(table[src[c]] * si)
					}
				}
			} else {
				for c := int64(0); c < k; c++ {
					row[c] = float32(table[data[c*m+i]] * blockScaleInv(l, scales, r.Dir, i, c))
				}
			}
			host.StoreFloat32(r.Out, i*k, row)
		}
	})
	return nil
}

// Derive builds 2D columnwise data from rowwise data: the transpose of the
// codes and of the scale matrix (spec §6.3 _create_columnwise).
func (blockKernels) Derive(r *host.DeriveRequest) error {
	s := r.Spec.(*BlockSpec)
	if !s.Derivable(r.FromDir, r.ToDir) {
		return host.Errorf(host.ErrState, "fp8_block: %s data cannot be derived from %s data with %d-D blocks (spec §7.4: only 2-D blocks give columnwise from rowwise)",
			r.ToDir, r.FromDir, s.p.BlockDims)
	}
	transposeBytes(r.From.MustBuffer(host.BufData).Bytes8(), r.To.MustBuffer(host.BufData).Bytes8(), r.M, r.K)
	from := blockScaleLayoutOf(s, r.FromDir, r.M, r.K)
	to := blockScaleLayoutOf(s, r.ToDir, r.M, r.K)
	src := r.From.MustBuffer(host.BufScaleInv).Float32s()
	dst := r.To.MustBuffer(host.BufScaleInv).Float32s()
	to.zeroPadding(dst)
	for mb := int64(0); mb < from.ni; mb++ {
		for kb := int64(0); kb < from.nj; kb++ {
			dst[to.index(kb, mb)] = src[from.index(mb, kb)]
		}
	}
	return nil
}

// TensorScale is 1: the tile values include the block scales.
func (blockKernels) TensorScale(*host.Storage, host.Direction) float32 { return 1 }

// DequantizeTile writes fl32(decode(q) · scale_inv) of the logical tile, the
// value Dequantize gives in FP32.
func (blockKernels) DequantizeTile(st *host.Storage, dir host.Direction, m, k, r0, r1, c0, c1 int64, dst []float32, ld int, transposed bool) {
	s := st.Spec.(*BlockSpec)
	data := st.MustBuffer(host.BufData).Bytes8()
	scales := st.MustBuffer(host.BufScaleInv).Float32s()
	l := blockScaleLayoutOf(s, dir, m, k)
	table := numeric.E4M3Table()
	stepR, stepC := int64(ld), int64(1)
	if transposed {
		stepR, stepC = 1, int64(ld)
	}
	for r := r0; r < r1; r++ {
		for c := c0; c < c1; c++ {
			code := data[r*k+c]
			if dir == host.DirColumnwise {
				code = data[c*m+r]
			}
			dst[(r-r0)*stepR+(c-c0)*stepC] = float32(table[code] * blockScaleInv(l, scales, dir, r, c))
		}
	}
}
