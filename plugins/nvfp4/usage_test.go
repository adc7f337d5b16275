package nvfp4

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/host"
	"libquant/internal/numeric"
)

// TestUpdateUsage: a 16×16 tensor derives its columnwise copy from rowwise data
// with the bytes a direct quantize gives (spec §5.3); 1×16 can only drop (§7.4).
func TestUpdateUsage(t *testing.T) {
	for _, sh := range [][2]int{{48, 80}, {45, 77}, {1, 1}, {17, 33}} { // aligned and ragged (spec §14)
		testUpdateUsage(t, sh[0], sh[1])
	}
}

func testUpdateUsage(t *testing.T, m, k int) {
	in := newInput(t, host.BFloat16, gaussian(m, k, 9))
	for _, p := range []host.Params{
		{Format: Name, BlockDims: 2},
		{Format: Name, BlockDims: 2, GEMMSwizzledScales: true},
		{Format: Name, BlockDims: 2, StochasticRounding: true, Seed: 3, Offset: 4},
	} {
		direct := quantize(t, p, host.BothUsages, in.t, nil)
		qt := quantize(t, p, host.Rowwise, in.t, nil)
		require.NoError(t, qt.UpdateUsage(host.BothUsages, 0))
		require.Equal(t, host.BothUsages, qt.Usage())
		requireSameDirection(t, stored(t, direct, host.DirColumnwise), stored(t, qt, host.DirColumnwise), "derived columnwise")
		requireSameDirection(t, stored(t, direct, host.DirRowwise), stored(t, qt, host.DirRowwise), "rowwise kept")
		require.NoError(t, qt.UpdateUsage(host.Columnwise, 0), "dropping rowwise")
		require.Equal(t, host.Columnwise, qt.Usage())
		err := qt.UpdateUsage(host.Rowwise, 0)
		require.ErrorIs(t, err, host.ErrState, "rowwise cannot come back from columnwise")
	}
	for _, p := range []host.Params{{Format: Name}, {Format: Name, RHT: host.RHTDefault}} {
		qt := quantize(t, p, host.Rowwise, in.t, nil)
		err := qt.UpdateUsage(host.BothUsages, 0)
		require.ErrorIs(t, err, host.ErrState)
		require.Contains(t, err.Error(), "cannot derive columnwise")
		require.Equal(t, host.Rowwise, qt.Usage(), "unchanged on error")
		both := quantize(t, p, host.BothUsages, in.t, nil)
		require.NoError(t, both.UpdateUsage(host.Rowwise, 0), "1×16 can drop")
		require.Equal(t, host.Rowwise, both.Usage())
	}
}

// TestSwizzleRoundTrip: converting to the GEMM layout gives the bytes a
// swizzled quantize writes, and converting back gives the compact ones.
func TestSwizzleRoundTrip(t *testing.T) {
	for _, sh := range [][2]int{{144, 80}, {129, 47}} { // aligned and ragged (spec §14)
		testSwizzleRoundTrip(t, sh[0], sh[1])
	}
}

func testSwizzleRoundTrip(t *testing.T, m, k int) {
	in := newInput(t, host.BFloat16, gaussian(m, k, 10))
	for _, p := range []host.Params{{Format: Name}, {Format: Name, BlockDims: 2}, {Format: Name, RHT: host.RHTDefault}} {
		compact := quantize(t, p, host.BothUsages, in.t, nil)
		ps := p
		ps.GEMMSwizzledScales = true
		swizzled := quantize(t, ps, host.BothUsages, in.t, nil)
		qt := quantize(t, p, host.BothUsages, in.t, nil)
		require.NoError(t, qt.SetGEMMSwizzledScales(true, 0))
		for _, d := range []host.Direction{host.DirRowwise, host.DirColumnwise} {
			st, _ := qt.Storage(d)
			require.True(t, st.Spec.Params().GEMMSwizzledScales)
			requireSameDirection(t, stored(t, swizzled, d), stored(t, qt, d), d.String()+" swizzled")
		}
		// Dequantize reads the swizzled layout.
		require.Equal(t, dequantized(t, compact, host.DirRowwise, false), dequantized(t, qt, host.DirRowwise, false))
		require.Equal(t, dequantized(t, compact, host.DirColumnwise, false), dequantized(t, qt, host.DirColumnwise, false))
		require.NoError(t, qt.SetGEMMSwizzledScales(false, 0))
		for _, d := range []host.Direction{host.DirRowwise, host.DirColumnwise} {
			requireSameDirection(t, stored(t, compact, d), stored(t, qt, d), d.String()+" back to compact")
		}
	}
}

// TestTileDequantizer: tiles times TensorScale equal dequantize up to the
// float32 roundings that differ: dequantize computes fl32(e2m1·fl32(fl32(s·amax)·f))
// and the tile path (e2m1·s exact)·fl32(amax·f) plus one product: at most 3
// roundings of 2^-24 each on either side, so ≤ 6·2^-24 relative.
func TestTileDequantizer(t *testing.T) {
	for _, sh := range [][2]int{{48, 80}, {45, 77}} { // aligned and ragged (spec §14)
		testTileDequantizer(t, sh[0], sh[1])
	}
}

func testTileDequantizer(t *testing.T, m, k int) {
	in := newInput(t, host.BFloat16, gaussian(m, k, 14))
	var kern host.TileDequantizer = kernels{}
	for _, p := range []host.Params{{Format: Name}, {Format: Name, BlockDims: 2, GEMMSwizzledScales: true}, {Format: Name, RHT: host.RHTDefault}} {
		qt := quantize(t, p, host.BothUsages, in.t, nil)
		for _, d := range []host.Direction{host.DirRowwise, host.DirColumnwise} {
			st, _ := qt.Storage(d)
			full := dequantized(t, qt, d, false)
			scale := kern.TensorScale(st, d)
			require.Equal(t, TensorScale(stored(t, qt, d).amax), scale)
			for _, transposed := range []bool{false, true} {
				r0, r1, c0, c1 := int64(5), int64(37), int64(3), int64(70)
				ld := 80
				dst := make([]float32, 80*80)
				for i := range dst {
					dst[i] = -12345 // guard: untouched outside the tile
				}
				kern.DequantizeTile(st, d, int64(m), int64(k), r0, r1, c0, c1, dst, ld, transposed)
				for r := r0; r < r1; r++ {
					for c := c0; c < c1; c++ {
						idx := int(r-r0)*ld + int(c-c0)
						if transposed {
							idx = int(c-c0)*ld + int(r-r0)
						}
						got := float64(dst[idx]) * float64(scale)
						want := float64(full[int(r)*k+int(c)])
						if want == 0 {
							require.Zero(t, got)
							continue
						}
						require.InEpsilon(t, want, got, 6*math.Ldexp(1, -24), "%s (%d,%d)", d, r, c)
					}
				}
				touched := 0
				for _, v := range dst {
					if v != -12345 {
						touched++
					}
				}
				require.Equal(t, int((r1-r0)*(c1-c0)), touched, "writes only the tile")
			}
		}
	}
}

func TestTransposeNibbles(t *testing.T) {
	var rows [16]uint64
	for i := range rows {
		for c := 0; c < 16; c++ {
			rows[i] |= uint64((i*7+c*3+i*c)&0xF) << (4 * c)
		}
	}
	got := rows
	transposeNibbles(&got)
	for i := 0; i < 16; i++ {
		for c := 0; c < 16; c++ {
			require.Equal(t, rows[c]>>(4*i)&0xF, got[i]>>(4*c)&0xF, "(%d,%d)", i, c)
		}
	}
}

// TestCodeTable: table lookup gives the direct encoding, for factors of every
// kind (the zero-scale FLT_MAX, subnormal-scale huge ones, ordinary, tiny),
// over all 2^15 BF16 magnitudes up to Inf, both signs.
func TestCodeTable(t *testing.T) {
	g := newGlobalScale(1000)
	factors := []float32{math.MaxFloat32, 1, 1.0000001, 0.37, 3e-20, 2.5e30, 1e-45}
	for c := 0; c < 0x7F; c += 9 { // the non-negative codes a block scale can have
		factors = append(factors, g.encB[c])
	}
	var tab codeTable
	var h [16]uint16
	for _, e := range factors {
		tab.fill(e)
		for a := 0; a <= 0x7F80; a += 16 {
			for i := range h {
				h[i] = uint16(min(a+i, 0x7F80)) // no NaN: those blocks never use a table
				if i%3 == 1 {
					h[i] |= 0x8000 // negative
				}
			}
			got := encodeRNTable(&h, &tab)
			for i, v := range h {
				x := math.Float32frombits(uint32(v) << 16)
				require.Equal(t, numeric.EncodeE2M1(x*e), uint8(got>>(4*i)&0xF), "enc_b %g, bf16 %#04x", e, v)
			}
		}
	}
}
