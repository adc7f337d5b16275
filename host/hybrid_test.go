package host_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/host"
	"libquant/host/hosttest"
)

// storageBytes copies every buffer of one direction, in layout order.
func storageBytes(t *testing.T, q *host.QTensor, dir host.Direction) [][]byte {
	t.Helper()
	st, ok := q.Storage(dir)
	require.True(t, ok, "tensor has no %s storage", dir)
	var out [][]byte
	for _, b := range st.Buffers {
		out = append(out, append([]byte(nil), b.Tensor.Bytes8()...))
	}
	return out
}

func formatOf(t *testing.T, q *host.QTensor, dir host.Direction) string {
	t.Helper()
	st, ok := q.Storage(dir)
	require.True(t, ok, "tensor has no %s storage", dir)
	return st.FormatName()
}

// hybridScenario is one "forward format, backward format" training setup in
// the shape of TE's quantizer_factory_zoo (spec §8.3): input =
// Hybrid(fwd, bwdInput, original), weight = Hybrid(fwd, bwdWeight,
// rowwise_dequantized), grad_output = grad (plain).
type hybridScenario struct {
	name                           string
	fwd, bwdInput, bwdWeight, grad host.Params
}

func registered(names ...string) (missing []string) {
	for _, n := range names {
		if _, err := host.LookupFormat(n); err != nil {
			missing = append(missing, n)
		}
	}
	return missing
}

// TestHybridTrainingGEMMs runs fprop Y = X·Wᵀ, dgrad dX = dY·W and wgrad
// dW = dYᵀ·X on hybrid operands and checks (1) each direction holds the format
// its side asked for, with the bytes a plain quantizer of that side makes from
// the right source, and (2) each GEMM equals the float64 product of the
// directions spec §7.2 names: fprop X.row × W.row, dgrad dY.row × W.col,
// wgrad dY.col × X.col.
func TestHybridTrainingGEMMs(t *testing.T) {
	scenarios := []hybridScenario{
		// TE's mxfp8_fwd_nvfp4_bwd_factory with NVFP4's per-role settings
		// (spec §5.1): the input's and the grad's columnwise copies in the RHT
		// domain (wgrad reads both there), grads stochastically rounded, the
		// weight's backward side plain 1×16 NVFP4.
		{name: "mxfp8_fwd_nvfp4_bwd",
			fwd:       host.Params{Format: "mxfp8"},
			bwdInput:  host.Params{Format: "nvfp4", RHT: host.RHTDefault},
			bwdWeight: host.Params{Format: "nvfp4"},
			grad:      host.Params{Format: "nvfp4", RHT: host.RHTDefault, StochasticRounding: true, Seed: 7}},
		{name: "fp8_e4m3_fwd_e5m2_bwd",
			fwd:      host.Params{Format: "fp8"},
			bwdInput: host.Params{Format: "fp8", Element: host.ElementE5M2}, bwdWeight: host.Params{Format: "fp8", Element: host.ElementE5M2},
			grad: host.Params{Format: "fp8", Element: host.ElementE5M2}},
		{name: "high_precision_fwd_fp8_bwd",
			fwd:      host.Params{Format: "identity"},
			bwdInput: host.Params{Format: "fp8"}, bwdWeight: host.Params{Format: "fp8"},
			grad: host.Params{Format: "fp8", Element: host.ElementE5M2}},
		{name: "fp8_fwd_high_precision_bwd",
			fwd:      host.Params{Format: "fp8"},
			bwdInput: host.Params{Format: "identity"}, bwdWeight: host.Params{Format: "identity", HoldDType: host.BFloat16},
			grad: host.Params{Format: "identity"}},
	}
	const m, n, k = 64, 96, 128 // tokens, out features, in features
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			if missing := registered(sc.fwd.Format, sc.bwdInput.Format, sc.grad.Format); len(missing) > 0 {
				t.Skipf("formats %v are not registered in this build", missing)
			}
			rng := rand.New(rand.NewPCG(21, 22))
			x := hosttest.RandTensor(t, rng, host.BFloat16, 1, m, k)
			w := hosttest.RandTensor(t, rng, host.BFloat16, 0.05, n, k)
			dy := hosttest.RandTensor(t, rng, host.BFloat16, 0.01, m, n)

			xq := hosttest.Quantize(t, hosttest.NewHybrid(t, sc.fwd, sc.bwdInput, host.SourceOriginal), x)
			wq := hosttest.Quantize(t, hosttest.NewHybrid(t, sc.fwd, sc.bwdWeight, host.SourceRowwiseDequantized), w)
			dyq := hosttest.Quantize(t, hosttest.NewQuantizer(t, sc.grad, host.BothUsages), dy)

			// (1) Formats and bytes of each side.
			require.Equal(t, sc.fwd.Format, formatOf(t, xq, host.DirRowwise))
			require.Equal(t, sc.bwdInput.Format, formatOf(t, xq, host.DirColumnwise))
			require.Equal(t, sc.fwd.Format, formatOf(t, wq, host.DirRowwise))
			require.Equal(t, sc.bwdWeight.Format, formatOf(t, wq, host.DirColumnwise))
			fwdQ := hosttest.NewQuantizer(t, sc.fwd, host.BothUsages)
			require.Equal(t, storageBytes(t, hosttest.Quantize(t, fwdQ, x), host.DirRowwise), storageBytes(t, xq, host.DirRowwise), "X rowwise")
			require.Equal(t, storageBytes(t, hosttest.Quantize(t, hosttest.NewQuantizer(t, sc.bwdInput, host.BothUsages), x), host.DirColumnwise),
				storageBytes(t, xq, host.DirColumnwise), "X columnwise must come from the original X")
			wRow := hosttest.Quantize(t, fwdQ, w)
			require.Equal(t, storageBytes(t, wRow, host.DirRowwise), storageBytes(t, wq, host.DirRowwise), "W rowwise")
			wDeq := hosttest.Tensor(t, host.BFloat16, n, k)
			require.NoError(t, wRow.Dequantize(host.DirRowwise, wDeq, 0))
			require.Equal(t, storageBytes(t, hosttest.Quantize(t, hosttest.NewQuantizer(t, sc.bwdWeight, host.BothUsages), wDeq), host.DirColumnwise),
				storageBytes(t, wq, host.DirColumnwise), "W columnwise must come from the dequantized rowwise W")

			// (2) The three GEMMs, with the directions spelled out.
			row, col := host.DirRowwise, host.DirColumnwise
			t.Run("fprop", func(t *testing.T) {
				runGemmCase(t, gemmCase{a: xq, b: wq, transB: true, alpha: 1, outDType: host.BFloat16, dirs: &[2]host.Direction{row, row}}, m, n, k, nil)
			})
			t.Run("dgrad", func(t *testing.T) {
				runGemmCase(t, gemmCase{a: dyq, b: wq, alpha: 1, outDType: host.BFloat16, dirs: &[2]host.Direction{row, col}}, m, k, n, nil)
			})
			t.Run("wgrad", func(t *testing.T) {
				runGemmCase(t, gemmCase{a: dyq, b: xq, transA: true, alpha: 1, outDType: host.Float32, dirs: &[2]host.Direction{col, col}}, n, k, m, nil)
			})
		})
	}
}

// TestHybridQuantizer covers the hybrid constructor's checks, the usage flags
// deciding which sides run, update_usage (drop only) and ComputeAmax.
func TestHybridQuantizer(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	a := hosttest.NewQuantizer(t, host.Params{Format: "fp8"}, 0)
	b := hosttest.NewQuantizer(t, host.Params{Format: "identity"}, 0)
	_, err := host.NewHybridQuantizer(a, a, host.SourceOriginal)
	require.ErrorContains(t, err, "different quantizer")
	_, err = host.NewHybridQuantizer(a, nil, host.SourceOriginal)
	require.ErrorContains(t, err, "columnwise")
	_, err = host.NewHybridQuantizer(a, b, 7)
	require.ErrorContains(t, err, "columnwise_source")
	h, err := host.NewHybridQuantizer(a, b, host.SourceRowwiseDequantized)
	require.NoError(t, err)
	defer h.Release()
	_, err = host.NewHybridQuantizer(h, b, host.SourceOriginal)
	require.ErrorContains(t, err, "nest")

	x := hosttest.RandTensor(t, rng, host.Float32, 1, 16, 32)
	for _, u := range []host.Usage{host.Rowwise, host.Columnwise, host.BothUsages} {
		require.NoError(t, h.SetUsage(u))
		q := hosttest.Quantize(t, h, x)
		require.Equal(t, u, q.Usage())
	}
	require.NoError(t, h.SetUsage(host.BothUsages))
	q := hosttest.Quantize(t, h, x)
	err = q.UpdateUsage(host.Rowwise, 0)
	require.NoError(t, err, "a hybrid can drop a direction")
	err = q.UpdateUsage(host.BothUsages, 0)
	require.ErrorIs(t, err, host.ErrState)
	require.ErrorContains(t, err, "hybrid")
	require.Equal(t, host.Rowwise, q.Usage(), "a failed update_usage changes nothing")

	// ComputeAmax: the columnwise side of a rowwise_dequantized hybrid sees
	// hosttest.Dequantize(rowwise(x)), here x rounded to BF16, whose amax differs from x's.
	bf16 := hosttest.NewQuantizer(t, host.Params{Format: "identity", HoldDType: host.BFloat16}, 0)
	h2, err := host.NewHybridQuantizer(bf16, a, host.SourceRowwiseDequantized)
	require.NoError(t, err)
	defer h2.Release()
	amax := hosttest.Tensor(t, host.Float32, 2)
	require.NoError(t, h2.ComputeAmax(x, amax, 0))
	deq := hosttest.Dequantize(t, hosttest.Quantize(t, bf16, x), host.DirRowwise)
	var want float32
	for _, v := range deq {
		want = max(want, abs32(v))
	}
	var wantRow float32
	for _, v := range hosttest.Values(x) {
		wantRow = max(wantRow, abs32(v))
	}
	require.NotEqual(t, wantRow, want, "the test needs an input whose BF16 rounding changes its amax")
	require.Equal(t, []float32{wantRow, want}, hosttest.Values(amax))
}

func abs32(v float32) float32 {
	if v < 0 {
		return -v
	}
	return v
}

// TestIdentityFormat: identity keeps the input's dtype unless config.dtype
// sets one (its layout is then unknown until a quantize), casts with RNE to a
// narrower dtype, and serves both directions from one buffer.
func TestIdentityFormat(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 30))
	keep := hosttest.NewQuantizer(t, host.Params{Format: "identity"}, 0)
	_, err := keep.Layout([]int64{4, 8})
	require.ErrorIs(t, err, host.ErrInvalidArgument)
	require.ErrorContains(t, err, "config.dtype")
	bf := hosttest.NewQuantizer(t, host.Params{Format: "identity", HoldDType: host.BFloat16}, 0)
	l, err := bf.Layout([]int64{2, 4, 8})
	require.NoError(t, err)
	require.Len(t, l, 1, "one buffer for both directions")
	require.Equal(t, host.BFloat16, l[0].DType)
	require.Equal(t, []int64{8, 8}, l[0].Shape)
	_, err = host.NewQuantizer(host.Params{Format: "identity", HoldDType: host.E4M3}, 0)
	require.ErrorContains(t, err, "config.dtype")
	_, err = host.NewQuantizer(host.Params{Format: "identity", Margin: 1}, 0)
	require.ErrorContains(t, err, "config.margin")

	x := hosttest.RandTensor(t, rng, host.Float32, 1, 8, 8)
	q := hosttest.Quantize(t, keep, x)
	require.Equal(t, hosttest.Values(x), hosttest.Dequantize(t, q, host.DirColumnwise), "kept FP32 exactly")
	st, _ := q.Storage(host.DirRowwise)
	require.Equal(t, host.Float32, st.MustBuffer(host.BufData).DType)
	b := hosttest.Quantize(t, bf, x)
	rounded := hosttest.Tensor(t, host.BFloat16, 8, 8)
	host.StoreFloat32(rounded, 0, hosttest.Values(x)) // RNE to BF16
	require.Equal(t, hosttest.Values(rounded), hosttest.Dequantize(t, b, host.DirRowwise))
	require.Equal(t, host.BothUsages, b.Usage())
}
