package nvfp4

import (
	"encoding/binary"

	"libquant/host"
	"libquant/internal/numeric"
	"libquant/internal/parallel"
	"libquant/internal/swizzle"
)

// storageView is a direction's buffers read back for dequantize, derive and
// the GEMM tiles.
type storageView struct {
	data     []byte
	rowBytes int
	scales   scaleLayout
	amax     float32
	rows     int // stored rows
	cols     int // stored cols
}

func viewOf(st *host.Storage, dir host.Direction, m, k int64) (storageView, *Spec, error) {
	s, err := specOf(st.Spec)
	if err != nil {
		return storageView{}, nil, err
	}
	if err := checkDims(m, k); err != nil {
		return storageView{}, nil, err
	}
	rows, cols := storedDims(m, k, dir)
	v := storageView{data: st.MustBuffer(host.BufData).Bytes8(), rowBytes: int(rowBytes(cols)), rows: int(rows), cols: int(cols)}
	if int64(len(v.data)) != rows*rowBytes(cols) {
		return v, nil, host.Errorf(host.ErrInvalidArgument, "nvfp4: %s data buffer has %d bytes, want %d", dir, len(v.data), rows*rowBytes(cols))
	}
	if v.scales, err = newScaleLayout(st, s, rows, cols); err != nil {
		return v, nil, err
	}
	v.amax = st.MustBuffer(host.BufAmax).Float32s()[0]
	return v, s, nil
}

// codes returns the 16 codes of block cb of stored row r, element c in bits 4c.
func (v *storageView) codes(r, cb int) uint64 {
	return binary.LittleEndian.Uint64(v.data[r*v.rowBytes+cb*8:])
}

func (v *storageView) scale(r, cb int) uint8 { return v.scales.buf[v.scales.at(r, cb)] }

func (kernels) Dequantize(r *host.DequantizeRequest) error { return dequantizeAny(r, false) }

// DequantizeUntransformed undoes the RHT of a transformed columnwise copy
// (rhtInverse); other directions dequantize as usual. On a ragged tensor the
// inverse of a partial group sees the dropped outputs as zero (ragged.go).
func (kernels) DequantizeUntransformed(r *host.DequantizeRequest) error {
	return dequantizeAny(r, true)
}

// dequantizeAny dequantizes any shape: whole blocks directly, a ragged
// tensor through its padded layout (spec §14).
func dequantizeAny(r *host.DequantizeRequest, undo bool) error {
	if err := checkDims(r.M, r.K); err != nil {
		return err
	}
	if !aligned(r.M, r.K) {
		return dequantizeRagged(r, undo)
	}
	return dequantize(r, undo)
}

// dequantize writes x = fl32(e2m1 · final_scale) with final_scale =
// DequantScale(S_dec_b_fp8, amax) (spec §5.2), then rounds to the output dtype.
// Columnwise data is stored transposed; values go back to their logical [M, K]
// place. A transformed columnwise copy gives the transformed values unless
// undo is set.
func dequantize(r *host.DequantizeRequest, undo bool) error {
	v, s, err := viewOf(r.Storage, r.Dir, r.M, r.K)
	if err != nil {
		return err
	}
	undo = undo && s.rht && r.Dir == host.DirColumnwise
	signs := rhtSigns(s.mask)
	table := numeric.E2M1Table()
	bands, tiles := v.rows/BlockSize, (v.cols+tileW-1)/tileW
	k := int(r.K)
	parallel.For(bands*tiles, 1, func(lo, hi int) {
		var tile [BlockSize * tileW]float32
		var col [BlockSize]float32
		for t := lo; t < hi; t++ {
			b, c0 := t/tiles, t%tiles*tileW
			w := min(tileW, v.cols-c0)
			for i := 0; i < BlockSize; i++ {
				sr := b*BlockSize + i
				for cb := 0; cb < w/BlockSize; cb++ {
					codes := v.codes(sr, c0/BlockSize+cb)
					final := DequantScale(v.scale(sr, c0/BlockSize+cb), v.amax)
					x := (*[16]float32)(tile[i*tileW+cb*BlockSize:])
					for e := range x {
						x[e] = float32(table[codes>>(4*e)&0xF] * final)
					}
					if undo {
						rhtInverse(x, &signs)
					}
				}
			}
			if r.Dir == host.DirRowwise {
				for i := 0; i < BlockSize; i++ {
					host.StoreFloat32(r.Out, int64((b*BlockSize+i)*k+c0), tile[i*tileW:i*tileW+w])
				}
				continue
			}
			// Stored row kk = 16b+i, stored column m = c0+c is logical (m, kk).
			for c := 0; c < w; c++ {
				for i := range col {
					col[i] = tile[i*tileW+c]
				}
				host.StoreFloat32(r.Out, int64((c0+c)*k+b*BlockSize), col[:])
			}
		}
	})
	return nil
}

// Derive builds the columnwise copy of a 16×16-scaled tensor from its rowwise
// data without re-quantizing (NVFP4TensorStorage._create_columnwise, spec
// §5.3): the nibbles are transposed, each tile's scale moves to the transposed
// tile, and the amax is copied.
func (kernels) Derive(r *host.DeriveRequest) error {
	s, err := specOf(r.Spec)
	if err != nil {
		return err
	}
	if !s.Derivable(r.FromDir, r.ToDir) {
		return host.Errorf(host.ErrState, "nvfp4: %s data cannot be derived from %s data (only 16×16-scaled columnwise from rowwise)", r.ToDir, r.FromDir)
	}
	if err := checkDims(r.M, r.K); err != nil {
		return err
	}
	if !aligned(r.M, r.K) {
		return deriveRagged(s, r)
	}
	src, _, err := viewOf(r.From, r.FromDir, r.M, r.K)
	if err != nil {
		return err
	}
	dst, _, err := viewOf(r.To, r.ToDir, r.M, r.K)
	if err != nil {
		return err
	}
	dst.scales.zeroPadding(dst.rows, dst.cols/BlockSize)
	r.To.MustBuffer(host.BufAmax).Float32s()[0] = src.amax
	mb, kb := src.rows/BlockSize, src.cols/BlockSize
	parallel.For(mb, 1, func(lo, hi int) {
		for b := lo; b < hi; b++ {
			for t := 0; t < kb; t++ {
				var rows [BlockSize]uint64
				for i := range rows {
					rows[i] = src.codes(b*BlockSize+i, t)
				}
				code := src.scale(b*BlockSize, t)
				transposeNibbles(&rows)
				for jj, p := range rows {
					kk := t*BlockSize + jj
					binary.LittleEndian.PutUint64(dst.data[kk*dst.rowBytes+b*8:], p)
					dst.scales.buf[dst.scales.at(kk, b)] = code
				}
			}
		}
	})
	return nil
}

// SwizzleScales converts a direction's scale_inv between the compact and the
// GEMM-swizzled layout in place (spec §4.7, §5.3): padding stays in place as
// zeros in both.
func (kernels) SwizzleScales(st *host.Storage, dir host.Direction, m, k int64, swizzled bool) error {
	if err := checkDims(m, k); err != nil {
		return err
	}
	rows, cols := storedDims(m, k, dir)
	pr, pc := scaleShape(rows, cols)
	buf := st.MustBuffer(host.BufScaleInv).Bytes8()
	if int64(len(buf)) != pr*pc {
		return host.Errorf(host.ErrInvalidArgument, "nvfp4: %s scale_inv buffer has %d bytes, want %d×%d", dir, len(buf), pr, pc)
	}
	src := append([]byte(nil), buf...)
	if swizzled {
		swizzle.Swizzle(buf, src, int(pr), int(pc))
	} else {
		swizzle.Unswizzle(buf, src, int(pr), int(pc))
	}
	return nil
}

// TensorScale is the per-tensor factor fl32(amax · fl32(1/(6·448))) of a
// direction (spec §5.2); DequantizeTile leaves it out.
func (kernels) TensorScale(st *host.Storage, _ host.Direction) float32 {
	return TensorScale(st.MustBuffer(host.BufAmax).Float32s()[0])
}

// DequantizeTile writes e2m1 · float(S_dec_b_fp8) (exact in float32) for the
// logical tile [r0, r1) × [c0, c1). Multiplied by TensorScale it is the
// dequantized value up to float32 rounding: dequantize rounds
// fl32(fl32(s·amax)·f)·e2m1, this (e2m1·s)·fl32(amax·f). A columnwise copy
// stored with the RHT gives transformed values: a GEMM contracting two such
// operands over M gets the untransformed product, since H·Hᵀ = I (spec §5.5).
func (kernels) DequantizeTile(st *host.Storage, dir host.Direction, m, k, r0, r1, c0, c1 int64, dst []float32, ld int, transposed bool) {
	v, _, err := viewOf(st, dir, m, k)
	if err != nil {
		panic(err) // the GEMM checked the storage when it planned the tiles
	}
	table := numeric.E2M1Table()
	for r := int(r0); r < int(r1); r++ {
		for c := int(c0); c < int(c1); c++ {
			sr, sc := r, c // stored position
			if dir == host.DirColumnwise {
				sr, sc = c, r
			}
			code := v.data[sr*v.rowBytes+sc/2] >> (4 * (sc & 1)) & 0xF
			x := table[code] * numeric.DecodeE4M3(v.scale(sr, sc/BlockSize))
			if transposed {
				dst[(c-int(c0))*ld+(r-int(r0))] = x
			} else {
				dst[(r-int(r0))*ld+(c-int(c0))] = x
			}
		}
	}
}
