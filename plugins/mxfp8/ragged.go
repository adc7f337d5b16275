package mxfp8

import (
	"libquant/host"
	"libquant/host/ragged"
)

// Shapes that are not whole 32-element blocks (spec §14). The bytes are
// defined as those of X₀, X zero-padded at the bottom and on the right to
// multiples of 32, with the padding dropped. The CPU kernels compute exactly
// that: quantizeRagged pads the input, runs the whole-block kernels on X₀ and
// crops. The scale buffers of X and X₀ have the same shape (both count
// ⌈M/32⌉, ⌈K/32⌉ blocks, spec §14 item 4), so the kernels write them in
// place; only the padding scales of the ragged tensor (rows i ≥ the valid
// count, which X₀ filled with the zero blocks' scale 0, and the 16-row tails
// nothing covers) are zeroed again. A kernel for another device writes the
// same buffers:
//
//	data:   [M, K] codes (mxfp8, both directions) or packed E2M1 [M, ⌈K/2⌉]
//	        rowwise / [K, ⌈M/2⌉] columnwise (mxfp4), contiguous rows, the high
//	        nibble of each row's last byte 0 when the row has an odd count;
//	scales: as Layout, every byte outside the valid (i < ni, j < nj) region 0.

// paddedDims are the dims of X₀.
func paddedDims(m, k int64) (int64, int64) {
	return ragged.Ceil(m, BlockLen), ragged.Ceil(k, BlockLen)
}

// oddRows reports whether dir's data rows hold an odd number of packed codes.
func (s *Spec) oddRows(m, k int64, dir host.Direction) bool {
	n := k
	if dir == host.DirColumnwise {
		n = m
	}
	return s.el.packed && n%2 == 1
}

// quantizeRagged quantizes a ragged [M, K] input through X₀ (spec §14 item 1).
func quantizeRagged(s *Spec, r *host.QuantizeRequest) error {
	m0, k0 := paddedDims(r.M, r.K)
	x0, err := ragged.Pad(r.Input, r.M, r.K, m0, k0)
	if err != nil {
		return err
	}
	defer host.FreeTensor(x0, 0)
	pr := *r
	pr.Input, pr.M, pr.K = x0, m0, k0
	for d, st := range r.Out {
		if st == nil {
			continue
		}
		p, err := ragged.WithData(st, s.dataShape(m0, k0, host.Direction(d)))
		if err != nil {
			return err
		}
		defer ragged.FreeData(p)
		pr.Out[d] = p
	}
	if err := (kernels{}).Quantize(&pr); err != nil {
		return err
	}
	for d, st := range r.Out {
		if st == nil {
			continue
		}
		dir := host.Direction(d)
		ds, ps := s.dataShape(r.M, r.K, dir), s.dataShape(m0, k0, dir)
		ragged.Crop(st.MustBuffer(host.BufData).Bytes8(), int(ds[1]), pr.Out[d].MustBuffer(host.BufData).Bytes8(), int(ps[1]), int(ds[0]), s.oddRows(r.M, r.K, dir))
		scaleLayoutOf(s, dir, r.M, r.K).zeroPadding(st.MustBuffer(host.BufScaleInv).Bytes8())
	}
	return nil
}

// dequantizeRagged dequantizes a ragged tensor: its data goes back into X₀'s
// layout (zeros in the padding), the whole-block kernel dequantizes that, and
// the [M, K] part is kept (spec §14 item 4).
func dequantizeRagged(s *Spec, r *host.DequantizeRequest) error {
	m0, k0 := paddedDims(r.M, r.K)
	ds, ps := s.dataShape(r.M, r.K, r.Dir), s.dataShape(m0, k0, r.Dir)
	p, err := ragged.WithData(r.Storage, ps)
	if err != nil {
		return err
	}
	defer ragged.FreeData(p)
	ragged.Expand(p.MustBuffer(host.BufData).Bytes8(), int(ps[1]), r.Storage.MustBuffer(host.BufData).Bytes8(), int(ds[1]), int(ds[0]), s.oddRows(r.M, r.K, r.Dir))
	out, err := host.AllocTensor(host.Device{Type: host.CPU}, r.Out.DType, []int64{m0, k0}, 0)
	if err != nil {
		return err
	}
	defer host.FreeTensor(out, 0)
	pr := *r
	pr.Storage, pr.M, pr.K, pr.Out = p, m0, k0, out
	if err := (kernels{}).Dequantize(&pr); err != nil {
		return err
	}
	es := int(r.Out.DType.Size())
	ragged.Crop(r.Out.Bytes8(), int(r.K)*es, out.Bytes8(), int(k0)*es, int(r.M), false)
	return nil
}
