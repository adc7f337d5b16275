package host_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/host"
	"libquant/host/hosttest"
	"libquant/internal/gemm"
	tu "libquant/internal/testutil"
)

// formatConfigs lists the quantizer configurations the GEMM tests use for each
// registered format: named variants for the formats this file knows, and the
// format's defaults for any other, so that every registered format is covered.
func formatConfigs(t *testing.T) map[string]host.Params {
	t.Helper()
	variants := map[string]map[string]host.Params{
		"fp8": {
			"fp8_e4m3":         {Format: "fp8"},
			"fp8_e5m2":         {Format: "fp8", Element: host.ElementE5M2},
			"fp8_e4m3_delayed": {Format: "fp8", Scaling: host.ScalingDelayed, AmaxHistoryLen: 4},
		},
		"identity": {
			"identity":      {Format: "identity"},
			"identity_bf16": {Format: "identity", HoldDType: host.BFloat16},
		},
		"fp8_block": {
			"fp8_block_1d": {Format: "fp8_block", BlockDims: 1},
			"fp8_block_2d": {Format: "fp8_block", BlockDims: 2},
		},
		"mxfp8": {
			"mxfp8_e4m3": {Format: "mxfp8"},
			"mxfp8_e5m2": {Format: "mxfp8", Element: host.ElementE5M2},
		},
		"nvfp4": {
			"nvfp4_1d": {Format: "nvfp4"},
			"nvfp4_2d": {Format: "nvfp4", BlockDims: 2},
		},
	}
	out := map[string]host.Params{}
	for _, f := range host.FormatNames() {
		v, ok := variants[f]
		if !ok {
			v = map[string]host.Params{f: {Format: f}}
		}
		for name, p := range v {
			out[name] = p
		}
	}
	return out
}

// gemmCase is one GEMM to check against the float64 product of the operands'
// dequantized values.
type gemmCase struct {
	a, b           *host.QTensor // quantized operands, or nil for dense
	da, db         *host.Tensor  // dense operands
	transA, transB bool
	alpha, beta    float32
	c, bias        *host.Tensor
	accumulate     bool
	outDType       host.DType
	// dirs, when set, names the direction each quantized operand's reference
	// values come from, instead of the contraction rule.
	dirs *[2]host.Direction
}

// operandValues returns the values of op(X) as the GEMM must see them: the
// dequantized direction the contraction rule picks (spec §7.2), or the dense
// values; rows×cols is X's 2-D view.
func operandValues(t *testing.T, q *host.QTensor, d *host.Tensor, isA, trans bool, dirs *[2]host.Direction) (v []float32, rows, cols int) {
	t.Helper()
	if d != nil {
		r, c := host.Flatten2D(d.Shape)
		return hosttest.Values(*d), int(r), int(c)
	}
	dir := host.DirRowwise
	if isA == trans {
		dir = host.DirColumnwise
	}
	if dirs != nil {
		dir = dirs[1]
		if isA {
			dir = dirs[0]
		}
	}
	r, c := q.Dims2D()
	return hosttest.Dequantize(t, q, dir), int(r), int(c)
}

// runGemmCase runs the case into a fresh D (filled with dInit when
// accumulating) and checks every element against
//
//	R = alpha·Σ_p op(A)[i,p]·op(B)[p,j] + beta·C + bias[j] + D_old   (float64)
//
// within the bound derived from FP32 arithmetic (u = 2^-24):
//   - the GEMM multiplies tile values t with the tensor factors s folded into
//     alpha; a dequantized value is fl32(t·s) (host.TileDequantizer's
//     contract), so Σ|a b| and Σ|t s_a t' s_b| differ by ≤ (2u+u²)Σ|a b|;
//   - the FP32 sum of K products, in any blocking, fused or not, is within
//     γ_K·Σ|t t'| of the exact sum (Higham, Accuracy and Stability, §3.1);
//   - alpha·s_a·s_b rounds once to FP32, alpha_eff·S once, beta·c once, and
//     each of the ≤ 3 epilogue additions once, so every term carries at most
//     K+6 roundings: |x − R| ≤ γ_{K+8}(|alpha|Σ|a||b| + |beta c| + |bias| +
//     |d_old|) = E (γ_{K+8} ≥ γ_{K+6}·(1+2u+u²) absorbs the dequantize term),
//     plus (K+8)·2^-149 for FP32 underflow;
//   - rounding x to D's dtype adds u_out·|x| ≤ u_out(|R| + E).
func runGemmCase(t *testing.T, gc gemmCase, m, n, k int, dInit []float32) []float32 {
	t.Helper()
	av, _, ac := operandValues(t, gc.a, gc.da, true, gc.transA, gc.dirs)
	bv, _, bc := operandValues(t, gc.b, gc.db, false, gc.transB, gc.dirs)
	// opA[i*k+p] = op(A)[i,p]; opBt[j*k+p] = op(B)[p,j].
	opA, opBt := make([]float64, m*k), make([]float64, n*k)
	for i := 0; i < m; i++ {
		for p := 0; p < k; p++ {
			if gc.transA {
				opA[i*k+p] = float64(av[p*ac+i])
			} else {
				opA[i*k+p] = float64(av[i*ac+p])
			}
		}
	}
	for j := 0; j < n; j++ {
		for p := 0; p < k; p++ {
			if gc.transB {
				opBt[j*k+p] = float64(bv[j*bc+p])
			} else {
				opBt[j*k+p] = float64(bv[p*bc+j])
			}
		}
	}
	d := hosttest.Tensor(t, gc.outDType, int64(m), int64(n))
	if dInit != nil {
		host.StoreFloat32(d, 0, dInit)
	}
	dOld := hosttest.Values(d)
	args := &host.GemmArgs{A: host.GemmOperand{Q: gc.a, Dense: gc.da, Trans: gc.transA},
		B: host.GemmOperand{Q: gc.b, Dense: gc.db, Trans: gc.transB}, Alpha: gc.alpha, Beta: gc.beta,
		C: gc.c, Bias: gc.bias, D: d, Accumulate: gc.accumulate}
	if gc.c != nil && gc.c.Ptr == nil { // C is D itself
		args.C = &d
	}
	cv := dOld
	if gc.c != nil && gc.c.Ptr != nil {
		cv = hosttest.Values(*gc.c)
	}
	var biasv []float32
	if gc.bias != nil {
		biasv = hosttest.Values(*gc.bias)
	}
	require.NoError(t, host.Gemm(args))
	got := hosttest.Values(d)
	uOut := hosttest.UnitRoundoff(gc.outDType)
	gamma := tu.GammaN(k + 8)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s, sa float64
			ra, rb := opA[i*k:i*k+k], opBt[j*k:j*k+k]
			for p, x := range ra {
				x *= rb[p]
				s += x
				if x < 0 { // not math.Abs: under -race its bit cast is checked, 10× slower
					sa -= x
				} else {
					sa += x
				}
			}
			r := float64(gc.alpha) * s
			mag := math.Abs(float64(gc.alpha)) * sa
			if gc.c != nil {
				r += float64(gc.beta) * float64(cv[i*n+j])
				mag += math.Abs(float64(gc.beta) * float64(cv[i*n+j]))
			}
			if biasv != nil {
				r += float64(biasv[j])
				mag += math.Abs(float64(biasv[j]))
			}
			if gc.accumulate {
				r += float64(dOld[i*n+j])
				mag += math.Abs(float64(dOld[i*n+j]))
			}
			e := gamma*mag + float64(k+8)*math.Ldexp(1, -149)
			bound := e + uOut*(math.Abs(r)+e)
			if err := math.Abs(float64(got[i*n+j]) - r); !(err <= bound) {
				require.Failf(t, "GEMM result out of bound", "D[%d,%d] = %g, float64 product of the dequantized operands %g: |err| %g > bound %g (K=%d)",
					i, j, got[i*n+j], r, err, bound, k)
			}
		}
	}
	return got
}

// canHold reports whether a format configuration can hold a tensor of this
// shape quantized from dtype dt (block formats need dims that are multiples
// of their blocks; identity's layout depends on the input's dtype).
func canHold(t *testing.T, p host.Params, dt host.DType, shape ...int64) bool {
	spec, err := host.NewSpec(p)
	require.NoError(t, err)
	if is, ok := spec.(host.InputSpec); ok {
		spec = is.ForInput(dt)
	}
	m, k := host.Flatten2D(shape)
	for _, d := range []host.Direction{host.DirRowwise, host.DirColumnwise} {
		if _, err := spec.Layout(m, k, d); err != nil {
			require.ErrorIs(t, err, host.ErrInvalidArgument)
			return false
		}
	}
	return true
}

// TestGemmFormatPairs multiplies every pair of registered format
// configurations in all four op combinations, at an odd shape where both
// formats can hold it and at a block-aligned one, against the float64 product
// of the dequantized operands.
func TestGemmFormatPairs(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	cfgs := formatConfigs(t)
	type shape struct{ m, n, k int }
	// Odd shapes (every format takes any shape, spec §14: ragged M, N and K,
	// K = 1, a partial last K block), a block-aligned one, and (for
	// same-format pairs: the engine is format-blind) K spanning two K blocks.
	shapes := []shape{{13, 9, 40}, {1, 17, 33}, {45, 7, 129}, {32, 32, 128}, {32, 32, gemm.KC + 32}, {2, 3, 1}}
	for na, pa := range cfgs {
		for nb, pb := range cfgs {
			for _, trans := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
				for si, s := range shapes {
					if si >= 4 && pa.Format != pb.Format {
						continue
					}
					qa := hosttest.NewQuantizer(t, pa, host.BothUsages)
					qb := hosttest.NewQuantizer(t, pb, host.BothUsages)
					sa := []int64{int64(s.m), int64(s.k)}
					if trans[0] {
						sa = []int64{int64(s.k), int64(s.m)}
					}
					sb := []int64{int64(s.k), int64(s.n)}
					if trans[1] {
						sb = []int64{int64(s.n), int64(s.k)}
					}
					if !canHold(t, pa, host.BFloat16, sa...) || !canHold(t, pb, host.Float32, sb...) {
						continue
					}
					name := fmt.Sprintf("%s×%s/%s/%dx%dx%d", na, nb, opsName(trans), s.m, s.n, s.k)
					t.Run(name, func(t *testing.T) {
						a := hosttest.Quantize(t, qa, hosttest.RandTensor(t, rng, host.BFloat16, 1, sa...))
						b := hosttest.Quantize(t, qb, hosttest.RandTensor(t, rng, host.Float32, 0.5, sb...))
						runGemmCase(t, gemmCase{a: a, b: b, transA: trans[0], transB: trans[1], alpha: 0.75, outDType: host.Float32}, s.m, s.n, s.k, nil)
					})
				}
			}
		}
	}
}

func opsName(trans [2]bool) string {
	s := ""
	for _, tr := range trans {
		if tr {
			s += "T"
		} else {
			s += "N"
		}
	}
	return s
}

// TestGemmEpilogue covers the output dtypes, C (also as D itself), beta, bias,
// accumulation and K spanning several blocks, with quantized and dense operands.
func TestGemmEpilogue(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	m, n, k := 37, 45, gemm.KC+70
	qa := hosttest.NewQuantizer(t, host.Params{Format: "fp8"}, host.BothUsages)
	a := hosttest.Quantize(t, qa, hosttest.RandTensor(t, rng, host.BFloat16, 1, int64(m), int64(k)))
	bDense := hosttest.RandTensor(t, rng, host.Float16, 1, int64(n), int64(k))
	for _, out := range []host.DType{host.Float32, host.BFloat16, host.Float16} {
		for _, mode := range []string{"plain", "c", "c=d", "bias", "accumulate", "all"} {
			t.Run(fmt.Sprintf("%s/%s", out, mode), func(t *testing.T) {
				gc := gemmCase{a: a, db: &bDense, transB: true, alpha: 1.5, outDType: out}
				var init []float32
				switch mode {
				case "c", "all":
					c := hosttest.RandTensor(t, rng, host.BFloat16, 2, int64(m), int64(n))
					gc.c, gc.beta = &c, -0.5
				case "c=d":
					gc.c, gc.beta = &host.Tensor{}, 0.25 // runGemmCase passes D as C
				}
				if mode == "c=d" || mode == "accumulate" || mode == "all" {
					init = hosttest.Values(hosttest.RandTensor(t, rng, host.Float32, 3, int64(m), int64(n)))
				}
				if mode == "bias" || mode == "all" {
					b := hosttest.RandTensor(t, rng, host.Float32, 1, int64(n))
					gc.bias = &b
				}
				gc.accumulate = mode == "accumulate" || mode == "all"
				runGemmCase(t, gc, m, n, k, init)
			})
		}
	}
}

// TestGemmDense multiplies plain tensors of every high-precision dtype, and
// K = 0 (D = beta·C + bias).
func TestGemmDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, dt := range []host.DType{host.Float32, host.BFloat16, host.Float16} {
		t.Run(dt.String(), func(t *testing.T) {
			a := hosttest.RandTensor(t, rng, dt, 1, 3, 5, 24) // rank 3: the 2-D view is [15, 24]
			b := hosttest.RandTensor(t, rng, host.Float32, 1, 24, 7)
			runGemmCase(t, gemmCase{da: &a, db: &b, alpha: 1, outDType: dt}, 15, 7, 24, nil)
		})
	}
	t.Run("k=0", func(t *testing.T) {
		a := hosttest.Tensor(t, host.Float32, 4, 0)
		b := hosttest.Tensor(t, host.Float32, 0, 6)
		c := hosttest.RandTensor(t, rng, host.Float32, 1, 4, 6)
		bias := hosttest.RandTensor(t, rng, host.Float32, 1, 6)
		runGemmCase(t, gemmCase{da: &a, db: &b, alpha: 1, beta: 2, c: &c, bias: &bias, outDType: host.Float32}, 4, 6, 0, nil)
	})
}

// TestGemmKernels runs one quantized GEMM with every micro-kernel this machine
// has (AVX-512, AVX2, Go), so that each path is checked end to end.
func TestGemmKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	q := hosttest.NewQuantizer(t, host.Params{Format: "fp8"}, host.BothUsages)
	a := hosttest.Quantize(t, q, hosttest.RandTensor(t, rng, host.Float32, 1, 50, 300))
	b := hosttest.Quantize(t, q, hosttest.RandTensor(t, rng, host.Float32, 1, 300, 40))
	for _, kn := range gemm.Kernels() {
		t.Run(kn.Name, func(t *testing.T) {
			restore, err := gemm.Use(kn.Name)
			require.NoError(t, err)
			defer restore()
			runGemmCase(t, gemmCase{a: a, b: b, alpha: 1, outDType: host.Float32}, 50, 40, 300, nil)
		})
	}
}

// TestGemmErrors checks that bad operand combinations fail with the status
// and a message naming the operand and the problem.
func TestGemmErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	rowOnly := hosttest.NewQuantizer(t, host.Params{Format: "fp8"}, host.Rowwise)
	x := hosttest.Quantize(t, rowOnly, hosttest.RandTensor(t, rng, host.Float32, 1, 8, 16))
	dense := hosttest.RandTensor(t, rng, host.Float32, 1, 16, 4)
	d := hosttest.Tensor(t, host.Float32, 8, 4)
	u8 := hosttest.Tensor(t, host.Uint8, 16, 4)
	gpu := host.Device{Type: host.CUDA}
	gpuT := host.Tensor{Ptr: dense.Ptr, DType: host.Float32, Shape: []int64{16, 4}, Device: gpu}
	aMem := hosttest.Tensor(t, host.Float32, 8, 16)
	gpuA := host.Tensor{Ptr: aMem.Ptr, DType: host.Float32, Shape: []int64{8, 16}, Device: gpu}
	gpuD := host.Tensor{Ptr: d.Ptr, DType: host.Float32, Shape: []int64{8, 4}, Device: gpu}
	bias5 := hosttest.Tensor(t, host.Float32, 5)
	cases := []struct {
		name string
		args host.GemmArgs
		kind error
		msg  []string
	}{
		{"missing columnwise", host.GemmArgs{A: host.GemmOperand{Q: x, Trans: true}, B: host.GemmOperand{Dense: &dense}, D: d},
			host.ErrState, []string{"a:", "columnwise", "holds rowwise data only"}},
		{"no operand", host.GemmArgs{B: host.GemmOperand{Dense: &dense}, D: d}, host.ErrInvalidArgument, []string{"a:", "neither"}},
		{"both", host.GemmArgs{A: host.GemmOperand{Q: x, Dense: &dense}, B: host.GemmOperand{Dense: &dense}, D: d}, host.ErrInvalidArgument, []string{"a:", "both"}},
		{"dims", host.GemmArgs{A: host.GemmOperand{Q: x}, B: host.GemmOperand{Dense: &dense, Trans: true}, D: d}, host.ErrInvalidArgument, []string{"b:", "contraction dims differ"}},
		{"d shape", host.GemmArgs{A: host.GemmOperand{Q: x}, B: host.GemmOperand{Dense: &dense}, D: dense}, host.ErrInvalidArgument, []string{"d:", "[M=8, N=4]"}},
		{"dtype", host.GemmArgs{A: host.GemmOperand{Q: x}, B: host.GemmOperand{Dense: &u8}, D: d}, host.ErrInvalidArgument, []string{"b:", "uint8"}},
		{"bias", host.GemmArgs{A: host.GemmOperand{Q: x}, B: host.GemmOperand{Dense: &dense}, D: d, Bias: &bias5}, host.ErrInvalidArgument, []string{"bias:", "[N=4]"}},
		{"mixed devices", host.GemmArgs{A: host.GemmOperand{Q: x}, B: host.GemmOperand{Dense: &gpuT}, D: d}, host.ErrInvalidArgument, []string{"b:", "cuda:0", "cpu"}},
		{"d device", host.GemmArgs{A: host.GemmOperand{Q: x}, B: host.GemmOperand{Dense: &dense}, D: gpuD}, host.ErrInvalidArgument, []string{"d:", "cuda:0"}},
		{"no gpu kernel", host.GemmArgs{A: host.GemmOperand{Dense: &gpuA}, B: host.GemmOperand{Dense: &gpuT}, D: gpuD}, host.ErrDeviceUnavailable, []string{"cuda:0", "no GEMM kernel"}},
		{"d overlaps b", host.GemmArgs{A: host.GemmOperand{Dense: &dense, Trans: true}, B: host.GemmOperand{Dense: &dense}, D: host.Tensor{Ptr: dense.Ptr, DType: host.Float32, Shape: []int64{4, 4}, Device: hosttest.CPU}},
			host.ErrInvalidArgument, []string{"d:", "overlaps operand a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := host.Gemm(&c.args)
			require.Error(t, err)
			require.ErrorIs(t, err, c.kind)
			for _, s := range c.msg {
				require.Contains(t, err.Error(), s)
			}
		})
	}
}

func TestGemmSupport(t *testing.T) {
	s, err := host.QueryGemmSupport(hosttest.CPU, "fp8", "identity")
	require.NoError(t, err)
	require.Equal(t, host.GemmEmulated, s.Level)
	s, err = host.QueryGemmSupport(host.Device{Type: host.CUDA}, "fp8", "fp8")
	require.NoError(t, err)
	require.Equal(t, host.GemmUnsupported, s.Level)
	require.Contains(t, s.Reason, "no loaded GPU plugin provides one")
	_, err = host.QueryGemmSupport(hosttest.CPU, "fp9", "fp8")
	require.ErrorIs(t, err, host.ErrInvalidArgument)
	require.ErrorContains(t, err, "format_a")

	table, err := host.GemmSupportTable(hosttest.CPU)
	require.NoError(t, err)
	names := host.FormatNames()
	require.Len(t, table, len(names)*len(names))
	for _, e := range table {
		require.Equal(t, host.GemmEmulated, e.Level, "%s × %s on the CPU", e.A, e.B)
	}
}

// TestGemmHadamardDomains: NVFP4 stores the columnwise copies of inputs and
// grads in the random Hadamard domain (spec §5.5). wgrad dYᵀ·X reads both in
// it, where the transforms cancel; a GEMM whose operands' contraction dims
// are in different domains fails naming them, and one that reads only rowwise
// data is not affected.
func TestGemmHadamardDomains(t *testing.T) {
	if missing := registered("nvfp4"); len(missing) > 0 {
		t.Skipf("formats %v are not registered in this build", missing)
	}
	rng := rand.New(rand.NewPCG(25, 26))
	rht := hosttest.NewQuantizer(t, host.Params{Format: "nvfp4", RHT: host.RHTDefault}, host.BothUsages)
	plain := hosttest.NewQuantizer(t, host.Params{Format: "nvfp4"}, host.BothUsages)
	x := hosttest.RandTensor(t, rng, host.BFloat16, 1, 64, 32)
	dy := hosttest.RandTensor(t, rng, host.BFloat16, 1, 64, 48)
	w := hosttest.RandTensor(t, rng, host.BFloat16, 1, 48, 32)
	xr, dyr, xp, wp := hosttest.Quantize(t, rht, x), hosttest.Quantize(t, rht, dy), hosttest.Quantize(t, plain, x), hosttest.Quantize(t, plain, w)
	runGemmCase(t, gemmCase{a: dyr, b: xr, transA: true, alpha: 1, outDType: host.Float32}, 48, 32, 64, nil) // wgrad
	runGemmCase(t, gemmCase{a: dyr, b: wp, alpha: 1, outDType: host.Float32}, 64, 32, 48, nil)               // dgrad: dY rowwise
	// Ragged M (spec §14 item 2): wgrad contracts the stored transforms of
	// X₀'s zero-padded groups, padded outputs dropped; the GEMM is exact to
	// those stored values like any other.
	xs := hosttest.RandTensor(t, rng, host.BFloat16, 1, 45, 32)
	dys := hosttest.RandTensor(t, rng, host.BFloat16, 1, 45, 17)
	runGemmCase(t, gemmCase{a: hosttest.Quantize(t, rht, dys), b: hosttest.Quantize(t, rht, xs), transA: true, alpha: 1, outDType: host.Float32}, 17, 32, 45, nil)
	d := hosttest.Tensor(t, host.Float32, 48, 32)
	err := host.Gemm(&host.GemmArgs{A: host.GemmOperand{Q: dyr, Trans: true}, B: host.GemmOperand{Q: xp}, Alpha: 1, D: d})
	require.ErrorIs(t, err, host.ErrUnsupported)
	require.ErrorContains(t, err, "random Hadamard")
	require.ErrorContains(t, err, "untransformed")
	dense := hosttest.RandTensor(t, rng, host.Float32, 1, 64, 32)
	err = host.Gemm(&host.GemmArgs{A: host.GemmOperand{Q: dyr, Trans: true}, B: host.GemmOperand{Dense: &dense}, Alpha: 1, D: d})
	require.ErrorIs(t, err, host.ErrUnsupported)
}

// TestGemmConcurrent runs GEMMs on shared operands from several goroutines,
// half of them taking the two tensors in the other order, while two more
// re-quantize both in place: under -race this checks the operand locking (a
// GEMM reads a consistent tensor, a re-quantize waits, and the read locks are
// taken in one order so that no GEMM pair deadlocks with the writers).
func TestGemmConcurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	q := hosttest.NewQuantizer(t, host.Params{Format: "fp8"}, host.BothUsages)
	a := hosttest.Quantize(t, q, hosttest.RandTensor(t, rng, host.Float32, 1, 40, 64))
	w := hosttest.Quantize(t, q, hosttest.RandTensor(t, rng, host.Float32, 1, 24, 64))
	nextW := hosttest.RandTensor(t, rng, host.Float32, 1, 24, 64)
	nextA := hosttest.RandTensor(t, rng, host.Float32, 1, 40, 64)
	done := make(chan error, 10)
	for g := 0; g < 8; g++ {
		// Half the GEMMs take the two tensors in the opposite order.
		x, y, d := a, w, hosttest.Tensor(t, host.Float32, 40, 24)
		if g%2 == 1 {
			x, y, d = w, a, hosttest.Tensor(t, host.Float32, 24, 40)
		}
		go func() {
			var err error
			for i := 0; i < 20 && err == nil; i++ {
				err = host.Gemm(&host.GemmArgs{A: host.GemmOperand{Q: x}, B: host.GemmOperand{Q: y, Trans: true}, Alpha: 1, D: d})
			}
			done <- err
		}()
	}
	for _, wr := range []struct {
		in  host.Tensor
		dst *host.QTensor
	}{{nextW, w}, {nextA, a}} {
		go func() {
			var err error
			for i := 0; i < 20 && err == nil; i++ {
				err = q.QuantizeInto(wr.in, host.QuantizeOptions{}, wr.dst)
			}
			done <- err
		}()
	}
	for i := 0; i < 10; i++ {
		require.NoError(t, <-done)
	}
}
