package mxfp8

import (
	"libquant/host"
	"libquant/internal/numeric"
	"libquant/internal/parallel"
)

// Dequantize writes x = fl32(2^(e−127) · float(q)) (spec §4.3, TE's
// dequantize_mxfp8), rounded to the output dtype, parallel over 32-row bands.
// A NaN scale (0xFF) gives NaN for its whole block.
func (kernels) Dequantize(r *host.DequantizeRequest) error {
	s := r.Spec.(*Spec)
	if err := s.checkDims(r.M, r.K); err != nil {
		return err
	}
	if !aligned(r.M, r.K) {
		return dequantizeRagged(s, r)
	}
	m, k := int(r.M), int(r.K)
	data := r.Storage.MustBuffer(host.BufData).Bytes8()
	scales := r.Storage.MustBuffer(host.BufScaleInv).Bytes8()
	l := scaleLayoutOf(s, r.Dir, r.M, r.K)
	table := s.el.decode
	packed := s.el.packed
	colwise := r.Dir == host.DirColumnwise
	parallel.For(m/BlockLen, 1, func(lo, hi int) {
		row := make([]float32, k)
		var colScale []float32
		if colwise {
			colScale = make([]float32, k)
		}
		for band := lo; band < hi; band++ {
			if colwise {
				for c := range colScale {
					colScale[c] = numeric.DecodeE8M0(scales[l.index(c, band)])
				}
			}
			for rr := band * BlockLen; rr < (band+1)*BlockLen; rr++ {
				switch {
				case !colwise && !packed:
					src := data[rr*k : (rr+1)*k]
					for b := 0; b < k/BlockLen; b++ {
						sc := numeric.DecodeE8M0(scales[l.index(rr, b)])
						for j := b * BlockLen; j < (b+1)*BlockLen; j++ {
							row[j] = float32(sc * table[src[j]])
						}
					}
				case !colwise && packed:
					src := data[rr*k/2 : (rr+1)*k/2]
					for b := 0; b < k/BlockLen; b++ {
						sc := numeric.DecodeE8M0(scales[l.index(rr, b)])
						for p := b * BlockLen / 2; p < (b+1)*BlockLen/2; p++ {
							row[2*p] = float32(sc * table[src[p]&0xF])
							row[2*p+1] = float32(sc * table[src[p]>>4])
						}
					}
				case colwise && !packed:
					src := data[rr*k : (rr+1)*k]
					for c, code := range src {
						row[c] = float32(colScale[c] * table[code])
					}
				default: // columnwise mxfp4: transposed [K, M/2]
					half, shift := m/2, uint(rr&1)*4
					for c := range row {
						row[c] = float32(colScale[c] * table[(data[c*half+rr/2]>>shift)&0xF])
					}
				}
				host.StoreFloat32(r.Out, int64(rr*k), row)
			}
		}
	})
	return nil
}

// TensorScale is 1: MX formats have no per-tensor factor; the tile values
// include the block scales.
func (kernels) TensorScale(*host.Storage, host.Direction) float32 { return 1 }

// DequantizeTile writes fl32(2^(e−127) · float(q)) for the logical tile rows
// [r0, r1) × columns [c0, c1), element by element: the same value Dequantize
// gives in FP32. Any [m, k] (spec §14): only valid elements are read.
func (kernels) DequantizeTile(st *host.Storage, dir host.Direction, m, k, r0, r1, c0, c1 int64, dst []float32, ld int, transposed bool) {
	s := st.Spec.(*Spec)
	data := st.MustBuffer(host.BufData).Bytes8()
	scales := st.MustBuffer(host.BufScaleInv).Bytes8()
	l := scaleLayoutOf(s, dir, m, k)
	table := s.el.decode
	stepR, stepC := ld, 1
	if transposed {
		stepR, stepC = 1, ld
	}
	// Packed rows hold ⌈n/2⌉ bytes (spec §14 item 4).
	K, rowBytes, half := int(k), int((k+1)/2), int((m+1)/2)
	for r := int(r0); r < int(r1); r++ {
		o := (r - int(r0)) * stepR
		for c := int(c0); c < int(c1); c++ {
			var sb, code byte
			if dir == host.DirRowwise {
				sb = scales[l.index(r, c/BlockLen)]
			} else {
				sb = scales[l.index(c, r/BlockLen)]
			}
			switch {
			case !s.el.packed:
				code = data[r*K+c]
			case dir == host.DirRowwise:
				code = data[r*rowBytes+c/2] >> (4 * (c & 1)) & 0xF
			default:
				code = data[c*half+r/2] >> (4 * (r & 1)) & 0xF
			}
			dst[o+(c-int(c0))*stepC] = float32(numeric.DecodeE8M0(sb) * table[code])
		}
	}
}
