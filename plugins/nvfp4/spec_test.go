package nvfp4

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/host"
	"libquant/internal/numeric"
)

func TestNewSpecValidates(t *testing.T) {
	tests := []struct {
		name    string
		p       host.Params
		wantErr string // substring naming the field; "" for success
	}{
		{"defaults", host.Params{}, ""},
		{"e2m1", host.Params{Element: host.ElementE2M1}, ""},
		{"e4m3 element", host.Params{Element: host.ElementE4M3}, "config.element"},
		{"block_dims 2", host.Params{BlockDims: 2}, ""},
		{"block_dims 3", host.Params{BlockDims: 3}, "config.block_dims"},
		{"block_dims -1", host.Params{BlockDims: -1}, "config.block_dims"},
		{"rht default", host.Params{RHT: host.RHTDefault}, ""},
		{"rht custom", host.Params{RHT: host.RHTCustomMask, RHTSignMask: 0xFFFF}, ""},
		{"rht bad mode", host.Params{RHT: 3}, "config.rht"},
		{"mask above 16 bits", host.Params{RHT: host.RHTCustomMask, RHTSignMask: 0x10000}, "config.rht_sign_mask"},
		{"mask with default rht", host.Params{RHT: host.RHTDefault, RHTSignMask: 1}, "config.rht_sign_mask"},
		{"mask with rht off", host.Params{RHTSignMask: 1}, "config.rht_sign_mask"},
		{"rht with 16x16", host.Params{RHT: host.RHTDefault, BlockDims: 2}, "config.rht"},
		{"sr with seed and offset", host.Params{StochasticRounding: true, Seed: 1, Offset: 2}, ""},
		{"seed without sr", host.Params{Seed: 1}, "config.seed"},
		{"offset without sr", host.Params{Offset: 1}, "config.offset"},
		{"fp8 field", host.Params{AmaxHistoryLen: 4}, "config.amax_history_len"},
		{"scaling field", host.Params{Scaling: host.ScalingDelayed}, "config.scaling"},
		{"fp32_scales", host.Params{FP32Scales: true}, "config.fp32_scales"},
		{"identity dtype", host.Params{HoldDType: host.Float32}, "config.dtype"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.p
			p.Format = Name
			s, err := host.NewSpec(p)
			if tt.wantErr == "" {
				require.NoError(t, err)
				require.Equal(t, host.ElementE2M1, s.Params().Element)
				require.Contains(t, []int32{1, 2}, s.Params().BlockDims)
				return
			}
			require.Error(t, err)
			require.True(t, errors.Is(err, host.ErrInvalidArgument), "%v", err)
			require.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestLayout(t *testing.T) {
	s, err := host.NewSpec(host.Params{Format: Name})
	require.NoError(t, err)
	row, err := s.Layout(144, 80, host.DirRowwise)
	require.NoError(t, err)
	require.Equal(t, []host.BufferSpec{
		{Kind: host.BufData, DType: host.Uint8, Shape: []int64{144, 40}},
		{Kind: host.BufScaleInv, DType: host.E4M3, Shape: []int64{256, 8}},
		{Kind: host.BufAmax, DType: host.Float32, Shape: []int64{1}},
	}, row)
	col, err := s.Layout(144, 80, host.DirColumnwise)
	require.NoError(t, err)
	require.Equal(t, []host.BufferSpec{
		{Kind: host.BufData, DType: host.Uint8, Shape: []int64{80, 72}},
		{Kind: host.BufScaleInv, DType: host.E4M3, Shape: []int64{128, 12}},
		{Kind: host.BufAmax, DType: host.Float32, Shape: []int64{1}},
	}, col)
	// Any shape (spec §14 item 4): ⌈cols/2⌉ bytes a row, partial blocks count.
	for _, c := range []struct {
		m, k     int64
		row, col [2][]int64 // data, scale_inv
	}{
		{24, 40, [2][]int64{{24, 20}, {128, 4}}, [2][]int64{{40, 12}, {128, 4}}},
		{1, 1, [2][]int64{{1, 1}, {128, 4}}, [2][]int64{{1, 1}, {128, 4}}},
		{45, 4097, [2][]int64{{45, 2049}, {128, 260}}, [2][]int64{{4097, 23}, {4224, 4}}},
	} {
		for d, want := range [][2][]int64{c.row, c.col} {
			l, err := s.Layout(c.m, c.k, host.Direction(d))
			require.NoError(t, err)
			require.Equal(t, want[0], l[0].Shape, "%dx%d dir %d data", c.m, c.k, d)
			require.Equal(t, want[1], l[1].Shape, "%dx%d dir %d scale_inv", c.m, c.k, d)
		}
	}
	for _, sh := range []struct {
		m, k int64
		msg  string
	}{{-1, 32, "M = -1"}, {32, -16, "K = -16"}} {
		_, err := s.Layout(sh.m, sh.k, host.DirRowwise)
		require.ErrorIs(t, err, host.ErrInvalidArgument)
		require.Contains(t, err.Error(), sh.msg)
		require.Contains(t, err.Error(), "negative")
	}
}

func TestRejectsBadShapesAndDTypes(t *testing.T) {
	q, err := host.NewQuantizer(host.Params{Format: Name, RHT: host.RHTDefault}, host.BothUsages)
	require.NoError(t, err)
	defer q.Release()
	in32 := newInput(t, host.Float32, gaussian(32, 32, 1))
	_, err = q.Quantize(in32.t, host.QuantizeOptions{})
	require.ErrorIs(t, err, host.ErrInvalidArgument)
	require.Contains(t, err.Error(), "bfloat16")
	require.Contains(t, err.Error(), "config.rht")
	// Rowwise alone applies no transform, so any input dtype works.
	require.NoError(t, q.SetUsage(host.Rowwise))
	qt, err := q.Quantize(in32.t, host.QuantizeOptions{})
	require.NoError(t, err)
	qt.Free()
	// Shapes whose 2-D view is not made of 16×16 blocks quantize too (spec §14).
	for _, shape := range [][]int64{{3, 8, 32}, {32, 24}, {16}} {
		ten, err := host.AllocTensor(cpu, host.BFloat16, shape, 0)
		require.NoError(t, err)
		qt, err := q.Quantize(ten, host.QuantizeOptions{})
		host.FreeTensor(ten, 0)
		require.NoError(t, err, "shape %v", shape)
		qt.Free()
	}
	// A 3-D tensor whose flattened view is fine quantizes.
	ten, err := host.AllocTensor(cpu, host.BFloat16, []int64{2, 8, 32}, 0)
	require.NoError(t, err)
	defer host.FreeTensor(ten, 0)
	qt, err = q.Quantize(ten, host.QuantizeOptions{})
	require.NoError(t, err)
	qt.Free()
}

func TestAmaxInMustBeValid(t *testing.T) {
	in := newInput(t, host.BFloat16, gaussian(32, 32, 1))
	for _, c := range []struct {
		p    host.Params
		amax [2]float32
		msg  string
	}{
		{host.Params{Format: Name}, [2]float32{-1, 1}, "rowwise amax -1 is negative"},
		{host.Params{Format: Name}, [2]float32{1, -2}, "columnwise amax -2 is negative"},
		{host.Params{Format: Name, BlockDims: 2}, [2]float32{1, 2}, "one amax for both directions"},
	} {
		q, err := host.NewQuantizer(c.p, host.BothUsages)
		require.NoError(t, err)
		a, err := host.AllocTensor(cpu, host.Float32, []int64{2}, 0)
		require.NoError(t, err)
		copy(a.Float32s(), c.amax[:])
		_, err = q.Quantize(in.t, host.QuantizeOptions{AmaxIn: &a})
		require.ErrorIs(t, err, host.ErrInvalidArgument)
		require.Contains(t, err.Error(), "options.amax")
		require.Contains(t, err.Error(), c.msg)
		host.FreeTensor(a, 0)
		q.Release()
	}
}

// TestTieGoldenVector checks the codes of spec §1.5's ties directly: with enc_b
// = 1 (see ties) the block's codes are the table's.
func TestTieGoldenVector(t *testing.T) {
	in := newInput(t, host.BFloat16, ties(32, 32))
	qt := quantize(t, host.Params{Format: Name}, host.Rowwise, in.t, nil)
	d := stored(t, qt, host.DirRowwise)
	require.Equal(t, float32(42), d.amax)
	require.Equal(t, uint8(0x68), d.scale[0], "block scale 64 = 2^6 (E4M3 0x68)")
	// 6, .25, -.75, 1.25, -1.75, 2.5, -3.5, 5, -6, -.25, .75, -1.25, 1.75, -2.5, 3.5, -5
	want := []uint8{7, 0, 0xA, 2, 0xC, 4, 0xE, 6, 0xF, 8, 2, 0xA, 4, 0xC, 6, 0xE}
	for i, c := range want {
		require.Equal(t, c, d.data[i/2]>>(4*(i%2))&0xF, "element %d", i)
	}
}

func TestScaleConstantsAndSpecialCases(t *testing.T) {
	require.Equal(t, uint32(0x3E2AAAAB), math.Float32bits(recip6), "fl32(1/6) of spec §5.2")
	// The constants are one rounding of the exact value; TE rounds double
	// quotients to float, which gives the same bits here.
	require.Equal(t, float32(1.0/6.0), recip6)
	require.Equal(t, float32(float64(1)/float64(2688)), dequantFactor)
	require.Equal(t, float32(float64(1)/(6*6*448*448)), gemmFactor)
	tests := []struct {
		amax, want float32
	}{
		{0, 1},
		{inf, 1},                 // 2688/inf = 0
		{nan, math.MaxFloat32},   // fminf(NaN, FLT_MAX)
		{1e-40, math.MaxFloat32}, // 2688/1e-40 overflows
		{2688, 1},                //
		{42, 64},                 //
		{math.MaxFloat32, 2688 / math.MaxFloat32}, // tiny but non-zero
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, GlobalEncodeScale(tt.amax), "amax %g", tt.amax)
	}
	require.Equal(t, float32(1.0/64), GlobalDecodeScale(64))
	// S_dec of FLT_MAX is a float32 subnormal, rounded once.
	require.Equal(t, float32(1/float64(math.MaxFloat32)), GlobalDecodeScale(math.MaxFloat32))
	require.NotZero(t, GlobalDecodeScale(math.MaxFloat32))
	// A zero block scale gives enc_b = FLT_MAX (1/0 clamped).
	g := newGlobalScale(100)
	code, encB := g.blockScale(0)
	require.Equal(t, uint8(0), code)
	require.Equal(t, float32(math.MaxFloat32), encB)
	code, _ = g.blockScale(inf)
	require.Equal(t, uint8(0x7E), code, "an Inf block amax saturates to 448")
}

func TestGEMMAlphaAndTensorScale(t *testing.T) {
	// alpha = fl32(fl32(fl32(alphaIn·amaxA)·amaxB)·fl32(1/(6·6·448·448))), left to right.
	for _, c := range [][3]float32{{1, 1, 1}, {0.5, 3.25, 1e3}, {2, 1e-20, 7e25}, {1, 2688, 2688}} {
		want := float32(float64(float32(float64(float32(float64(c[0])*float64(c[1])))*float64(c[2]))) * float64(gemmFactor))
		require.Equal(t, want, GEMMAlpha(c[0], c[1], c[2]))
		// The tile path's factors multiply to the same alpha: each of the three
		// products and the two constants round once (relative error ≤ 2^-24
		// each), so they differ by at most 6·2^-24 relative.
		tile := float64(c[0]) * float64(TensorScale(c[1])) * float64(TensorScale(c[2]))
		require.InEpsilon(t, float64(want), tile, 6*math.Ldexp(1, -24), "%v", c)
	}
	require.Equal(t, float32(float32(5)*dequantFactor), TensorScale(5))
}

func TestRoleParams(t *testing.T) {
	for _, c := range []struct {
		role string
		want host.Params
	}{
		{"input", host.Params{Format: Name, RHT: host.RHTDefault}},
		{"weight", host.Params{Format: Name, BlockDims: 2}},
		{"grad_output", host.Params{Format: Name, RHT: host.RHTDefault, StochasticRounding: true}},
	} {
		p, err := RoleParams(c.role)
		require.NoError(t, err)
		require.Equal(t, c.want, p, c.role)
		_, err = host.NewSpec(p)
		require.NoError(t, err, "%s defaults are a valid spec", c.role)
	}
	_, err := RoleParams("output")
	require.ErrorIs(t, err, host.ErrInvalidArgument)
	require.Contains(t, err.Error(), "tensor_type")
}

func TestSRBlockBitsScheme(t *testing.T) {
	// The exported scheme equals the reference's transcription of it.
	for _, c := range []struct {
		seed, offset uint64
		dir          host.Direction
		blk          uint64
	}{{0, 0, host.DirRowwise, 0}, {0xDEADBEEFCAFEF00D, 1 << 33, host.DirColumnwise, 12345678901}, {7, 9, host.DirRowwise, 3}} {
		w := SRBlockBits(c.seed, c.offset, c.dir, c.blk)
		ctr := [4]uint32{uint32(c.blk), uint32(c.blk>>32) | uint32(c.dir)<<31, uint32(c.offset), uint32(c.offset >> 32)}
		require.Equal(t, refPhilox(ctr, [2]uint32{uint32(c.seed), uint32(c.seed >> 32)}), w)
	}
	require.Equal(t, numeric.Philox4x32_10([4]uint32{}, [2]uint32{}), SRBlockBits(0, 0, host.DirRowwise, 0))
	require.NotEqual(t, SRBlockBits(1, 0, host.DirRowwise, 5), SRBlockBits(1, 0, host.DirColumnwise, 5), "directions draw different bits")
}
