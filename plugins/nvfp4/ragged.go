package nvfp4

import (
	"libquant/host"
	"libquant/host/ragged"
)

// Shapes that are not whole 16-element blocks (spec §14). The bytes are those
// of X₀, X zero-padded at the bottom and on the right to multiples of 16,
// with the padding dropped; the CPU kernels compute exactly that by
// quantizing X₀ with the whole-block kernels and cropping. What that means,
// for a kernel on another device (cuda/nvfp4.cu) that must write the same
// buffers:
//
//   - Data [rows, ⌈cols/2⌉] per direction ([M, ⌈K/2⌉] rowwise, [K, ⌈M/2⌉]
//     columnwise), contiguous rows; an odd cols leaves the high nibble of each
//     row's last byte 0.
//   - Scales [pad128(rows), pad4(⌈cols/16⌉)] (compact or swizzled); a partial
//     block's scale is that of its valid elements (zeros never raise an
//     amax); every byte outside rows × ⌈cols/16⌉ is 0 — including the stored
//     rows past the valid ones that a 16×16 tile covers (X₀'s tile scale is
//     replicated over all 16 of its rows; only valid rows keep it).
//   - Global amaxes: rowwise amax(X); columnwise amax(X), or with the RHT the
//     amax of the BF16 transform of X₀ᵀ, whose 16-row groups are taken
//     zero-padded: a partial last group's transform fills all 16 outputs, and
//     the padded ones (dropped from the data) still count in the amax and in
//     their block's amax (spec §14 item 2).
//   - Stochastic rounding: element (r, c) of a direction's stored matrix
//     draws the byte of its flat index in the logical stored matrix, r·cols +
//     c with the logical cols (stochastic.go; spec §14 item 3).
//
// Dequantize returns [M, K]. Undoing the RHT of a ragged columnwise copy
// (DequantizeUntransformed) is exact only on whole groups: the transform
// outputs of a partial group's padded rows are dropped (spec §14 item 2), so
// the inverse sees them as zero.

// paddedDims are the dims of X₀.
func paddedDims(m, k int64) (int64, int64) {
	return ragged.Ceil(m, BlockSize), ragged.Ceil(k, BlockSize)
}

// quantizeRagged quantizes a ragged [M, K] input through X₀ (spec §14).
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
		rows0, cols0 := storedDims(m0, k0, host.Direction(d))
		p, err := ragged.WithData(st, []int64{rows0, cols0 / 2})
		if err != nil {
			return err
		}
		defer ragged.FreeData(p)
		pr.Out[d] = p
	}
	if err := quantizeBlocks(s, &pr, r.M, r.K); err != nil {
		return err
	}
	for d, st := range r.Out {
		if st == nil {
			continue
		}
		if err := cropDir(s, st, pr.Out[d], host.Direction(d), r.M, r.K); err != nil {
			return err
		}
	}
	return nil
}

// cropDir copies direction dir of padded (X₀'s layout) into st (X's) and
// zeroes st's scale padding.
func cropDir(s *Spec, st, padded *host.Storage, dir host.Direction, m, k int64) error {
	m0, k0 := paddedDims(m, k)
	rows, cols := storedDims(m, k, dir)
	_, cols0 := storedDims(m0, k0, dir)
	ragged.Crop(st.MustBuffer(host.BufData).Bytes8(), int(rowBytes(cols)), padded.MustBuffer(host.BufData).Bytes8(), int(cols0/2), int(rows), cols%2 == 1)
	l, err := newScaleLayout(st, s, rows, cols)
	if err != nil {
		return err
	}
	l.zeroPadding(int(rows), int(ragged.Div(cols, BlockSize)))
	return nil
}

// expandDir returns a storage in X₀'s layout holding st's codes, zero in the
// padding, and sharing st's scale and amax buffers (same shapes).
func expandDir(st *host.Storage, dir host.Direction, m, k int64) (*host.Storage, error) {
	m0, k0 := paddedDims(m, k)
	rows, cols := storedDims(m, k, dir)
	rows0, cols0 := storedDims(m0, k0, dir)
	p, err := ragged.WithData(st, []int64{rows0, cols0 / 2})
	if err != nil {
		return nil, err
	}
	ragged.Expand(p.MustBuffer(host.BufData).Bytes8(), int(cols0/2), st.MustBuffer(host.BufData).Bytes8(), int(rowBytes(cols)), int(rows), cols%2 == 1)
	return p, nil
}

// dequantizeRagged dequantizes X₀'s layout of a ragged tensor and keeps the
// [M, K] part.
func dequantizeRagged(r *host.DequantizeRequest, undo bool) error {
	m0, k0 := paddedDims(r.M, r.K)
	p, err := expandDir(r.Storage, r.Dir, r.M, r.K)
	if err != nil {
		return err
	}
	defer ragged.FreeData(p)
	out, err := host.AllocTensor(host.Device{Type: host.CPU}, r.Out.DType, []int64{m0, k0}, 0)
	if err != nil {
		return err
	}
	defer host.FreeTensor(out, 0)
	pr := *r
	pr.Storage, pr.M, pr.K, pr.Out = p, m0, k0, out
	if err := dequantize(&pr, undo); err != nil {
		return err
	}
	es := int(r.Out.DType.Size())
	ragged.Crop(r.Out.Bytes8(), int(r.K)*es, out.Bytes8(), int(k0)*es, int(r.M), false)
	return nil
}

// deriveRagged derives through X₀'s layout: the transposed tiles of X₀ hold
// the transposed valid codes, and the crop drops the rest.
func deriveRagged(s *Spec, r *host.DeriveRequest) error {
	m0, k0 := paddedDims(r.M, r.K)
	from, err := expandDir(r.From, r.FromDir, r.M, r.K)
	if err != nil {
		return err
	}
	defer ragged.FreeData(from)
	rows0, cols0 := storedDims(m0, k0, r.ToDir)
	to, err := ragged.WithData(r.To, []int64{rows0, cols0 / 2})
	if err != nil {
		return err
	}
	defer ragged.FreeData(to)
	pr := *r
	pr.From, pr.To, pr.M, pr.K = from, to, m0, k0
	if err := (kernels{}).Derive(&pr); err != nil {
		return err
	}
	return cropDir(s, r.To, to, r.ToDir, r.M, r.K)
}

// paddedRows returns the BF16 input with its rows zero-padded to a multiple of
// 16 (the RHT's groups, spec §14 item 2) and a release func.
func paddedRows(in host.Tensor, m, k int64) (host.Tensor, int64, func(), error) {
	if m%BlockSize == 0 {
		return in, m, func() {}, nil
	}
	m0 := ragged.Ceil(m, BlockSize)
	x0, err := ragged.Pad(in, m, k, m0, k)
	if err != nil {
		return host.Tensor{}, 0, nil, err
	}
	return x0, m0, func() { host.FreeTensor(x0, 0) }, nil
}
