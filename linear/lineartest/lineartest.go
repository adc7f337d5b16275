// Package lineartest holds what the linear-layer tests of every device share:
// the recipes and backward modes they run, and the float64 reference a
// step's output and gradients are checked against, with the error bound of
// the device that computed them (the CPU's, or a GPU's wider one where its
// GEMM kernels accumulate differently).
package lineartest

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/host"
	"libquant/host/hosttest"
	tu "libquant/internal/testutil"
	"libquant/linear"
)

// Recipe is one recipe the linear tests run.
type Recipe struct {
	Name    string
	Make    func(t *testing.T) host.Recipe
	Delayed bool
}

// Preset makes a built-in recipe (released when the test ends).
func Preset(cfg host.RecipeConfig) func(t *testing.T) host.Recipe {
	return func(t *testing.T) host.Recipe {
		t.Helper()
		r, err := host.NewPresetRecipe(cfg)
		require.NoError(t, err)
		t.Cleanup(r.Release)
		return r
	}
}

// Rules makes a rule-table recipe (released when the test ends).
func Rules(rules func(t *testing.T) []host.Rule) func(t *testing.T) host.Recipe {
	return func(t *testing.T) host.Recipe {
		t.Helper()
		r, err := host.NewRuleRecipe(rules(t))
		require.NoError(t, err)
		t.Cleanup(r.Release)
		return r
	}
}

// ByTensorType is a rule table giving each tensor type of a linear layer
// its quantizer.
func ByTensorType(input, weight, grad *host.Quantizer) []host.Rule {
	return []host.Rule{
		{Pattern: host.Role{TensorType: "input"}, Quantizer: input},
		{Pattern: host.Role{TensorType: "weight"}, Quantizer: weight},
		{Pattern: host.Role{TensorType: "grad_output"}, Quantizer: grad},
	}
}

// Recipes: the built-in recipes, a hybrid custom recipe (TE's
// mxfp8_fwd_nvfp4_bwd_factory as a rule table, with NVFP4's per-role
// settings), identity everywhere, and FP8 delayed scaling.
func Recipes() []Recipe {
	return []Recipe{
		{Name: "fp8_current", Make: Preset(host.RecipeConfig{Kind: host.RecipeFP8Current})},
		{Name: "fp8_block", Make: Preset(host.RecipeConfig{Kind: host.RecipeFP8Block})},
		{Name: "mxfp8", Make: Preset(host.RecipeConfig{Kind: host.RecipeMXFP8})},
		{Name: "nvfp4", Make: Preset(host.RecipeConfig{Kind: host.RecipeNVFP4, Seed: 5})},
		{Name: "mxfp8_fwd_nvfp4_bwd", Make: Rules(func(t *testing.T) []host.Rule {
			return ByTensorType(
				hosttest.NewHybrid(t, host.Params{Format: "mxfp8"}, host.Params{Format: "nvfp4", RHT: host.RHTDefault}, host.SourceOriginal),
				hosttest.NewHybrid(t, host.Params{Format: "mxfp8"}, host.Params{Format: "nvfp4"}, host.SourceRowwiseDequantized),
				hosttest.NewQuantizer(t, host.Params{Format: "nvfp4", RHT: host.RHTDefault, StochasticRounding: true, Seed: 9}, 0))
		})},
		{Name: "identity", Make: Rules(func(t *testing.T) []host.Rule {
			id := hosttest.NewQuantizer(t, host.Params{Format: "identity"}, 0)
			return ByTensorType(id, id, id)
		})},
		{Name: "fp8_delayed", Delayed: true, Make: Preset(host.RecipeConfig{Kind: host.RecipeFP8Delayed, AmaxHistoryLen: 4})},
	}
}

// Mode is a backward mode and the gradients a step asks for.
type Mode struct {
	Name  string
	Flags linear.Flags
}

// BothGrads asks for grad_input and grad_weight.
var BothGrads = linear.Flags{InputRequiresGrad: true, WeightRequiresGrad: true}

// Modes are the backward modes every recipe runs in (FP8 delayed scaling
// only the first: spec §9.2).
func Modes() []Mode {
	return []Mode{
		{Name: "none", Flags: BothGrads},
		{Name: "none_save_original_input", Flags: WithFlags(BothGrads, linear.BackwardQuantized, true)},
		{Name: "high_precision", Flags: WithFlags(BothGrads, linear.BackwardHighPrecision, false)},
		{Name: "dequantized", Flags: WithFlags(BothGrads, linear.BackwardDequantized, false)},
	}
}

// PartialModes ask for one gradient: a frozen weight (quantized and
// dequantized backward) and an input that needs no gradient.
func PartialModes() []Mode {
	return []Mode{
		{Name: "none_frozen_weight", Flags: linear.Flags{InputRequiresGrad: true}},
		{Name: "none_input_needs_no_grad", Flags: linear.Flags{WeightRequiresGrad: true}},
		{Name: "dequantized_frozen_weight", Flags: WithFlags(linear.Flags{InputRequiresGrad: true}, linear.BackwardDequantized, false)},
	}
}

// WithFlags is f with the override and save_original_input set.
func WithFlags(f linear.Flags, o linear.BackwardOverride, saveOriginal bool) linear.Flags {
	f.BackwardOverride, f.SaveOriginalInput = o, saveOriginal
	return f
}

// Case is one step of a plain linear layer, as CPU tensors: X [..., K] (M
// rows in its 2-D view), W [N, K], the bias B [N] (zero Ptr: none) and dY
// [..., N]; Train says whether backward ran.
type Case struct {
	X, W, B, DY host.Tensor
	M, K, N     int
	Flags       linear.Flags
	Train       bool
}

// Outputs are a step's results, as CPU tensors (zero Ptr: not computed).
type Outputs struct {
	Y, DX, DW, DB host.Tensor
}

// Bounds says whose arithmetic the outputs come from.
type Bounds struct {
	// GPU: a GPU computed them. Its GEMMs of quantized operands may run
	// on FP8 tensor cores (native FP8, FP8 block scaling, the fused Hopper
	// MX/NVFP4 kernel) whose accumulation is wider than FP32's, so their
	// bound adds the widest of those kernels' terms (WideTerm); the bias
	// gradient is a GEMM with FP32 accumulation (ColumnSumsGEMM).
	GPU bool
	// Other, when set, is the same step on the CPU: every output must also
	// lie within twice the bound of it (both lie within the bound of the
	// exact result, the CPU's bound being the narrower).
	Other *Outputs
}

// WideTerm bounds, for one element, what a GPU GEMM of quantized operands
// adds to the FP32-accumulation bound, for whichever kernel the dispatch
// picks; ra and rb are the contracted row and column, exactly the values the
// GEMM reads:
//   - FP8 tensor cores (cuBLASLt's native FP8 and FP8 block scaling) add the
//     exact products in an accumulator of about 14 significant bits between
//     promotions to FP32 (DeepSeek-V3 report §3.3.2; cuda/gputest's
//     gemmRef): modelled as rounding with u = 2^-13, γ_K(2^-13)·Σ|ab|
//     (Higham §3.1);
//   - the fused Hopper kernel truncates each k32 wgmma's products to 13
//     fraction bits of its largest product and their sum to 13 fraction bits
//     of its own magnitude: per block of 16 (NVFP4's; MX's 32-blocks give a
//     smaller term) less than 2^-13·(32·(1 + 2^-13)·max|p| + Σ|p|)
//     (cuda/gputest fused_test).
//
// Both terms are below 1% of Σ|ab| at the tests' K, so a wrong scale,
// layout, transpose or operand still fails.
func WideTerm(ra, rb []float64) float64 {
	var sa, fused float64
	for b0 := 0; b0 < len(ra); b0 += 16 {
		mx, sb := 0.0, 0.0
		for p := b0; p < min(b0+16, len(ra)); p++ {
			x := math.Abs(ra[p] * rb[p])
			sb += x
			mx = math.Max(mx, x)
		}
		sa += sb
		fused += math.Ldexp(32*(1+math.Ldexp(1, -13))*mx+sb, -13)
	}
	nu := float64(len(ra)) * math.Ldexp(1, -13)
	return max(nu/(1-nu)*sa, fused)
}

// OpRows returns op(X) of a rows×cols matrix as row-major float64 (Xᵀ when
// trans).
func OpRows(v []float32, rows, cols int, trans bool) []float64 {
	out := make([]float64, rows*cols)
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			if trans {
				out[j*rows+i] = float64(v[i*cols+j])
			} else {
				out[i*cols+j] = float64(v[i*cols+j])
			}
		}
	}
	return out
}

// CheckProduct checks got ([m, n], read as float32) against
// R = Σ_p a[i,p]·bt[j,p] + bias[j] in float64, where a is op(A) [m, k] and
// bt is op(B)ᵀ [n, k] holding exactly the values the GEMM reads. The bound is
// runGemmCase's (host/gemm_test.go): FP32 accumulation of K products and at
// most 8 more roundings, γ_{K+8}·(Σ|a b| + |bias|) + (K+8)·2⁻¹⁴⁹, plus, when
// wide, WideTerm, plus the rounding to got's dtype, u_out·(|R| + that).
// other, when set, is another device's result that must lie within twice the
// bound of got.
func CheckProduct(t *testing.T, what string, got host.Tensor, a, bt []float64, bias []float32, m, n, k int, wide bool, other *host.Tensor) {
	t.Helper()
	g := hosttest.Values(got)
	require.Len(t, g, m*n, what)
	var o []float32
	if other != nil {
		o = hosttest.Values(*other)
		require.Len(t, o, m*n, what)
	}
	uOut, gamma := hosttest.UnitRoundoff(got.DType), tu.GammaN(k+8)
	for i := 0; i < m; i++ {
		ra := a[i*k : i*k+k]
		for j := 0; j < n; j++ {
			rb := bt[j*k : j*k+k]
			var s, sa float64
			for p, x := range ra {
				x *= rb[p]
				s += x
				sa += math.Abs(x)
			}
			if bias != nil {
				s += float64(bias[j])
				sa += math.Abs(float64(bias[j]))
			}
			e := gamma*sa + float64(k+8)*math.Ldexp(1, -149)
			if wide {
				e += WideTerm(ra, rb)
			}
			bound := e + uOut*(math.Abs(s)+e)
			if err := math.Abs(float64(g[i*n+j]) - s); !(err <= bound) {
				require.Failf(t, what+" out of bound", "[%d,%d] = %g, float64 reference %g: |err| %g > bound %g (K=%d)", i, j, g[i*n+j], s, err, bound, k)
			}
			if o != nil {
				if d := math.Abs(float64(g[i*n+j]) - float64(o[i*n+j])); !(d <= 2*bound) {
					require.Failf(t, what+": devices differ", "[%d,%d] = %g here, %g on the other device: |diff| %g > 2·bound %g (K=%d)", i, j, g[i*n+j], o[i*n+j], d, 2*bound, k)
				}
			}
		}
	}
}

// CheckColumnSums checks the CPU's bias gradient db against the float64
// column sums of dy [m, n]: one float64 sum of m float32 values (error ≤
// m·2⁻⁵³·Σ|dy|), rounded once to FP32 and once to db's dtype (≤ (u32 +
// u_out + u32·u_out)·|R|).
func CheckColumnSums(t *testing.T, db host.Tensor, dy []float32, m, n int) {
	t.Helper()
	g := hosttest.Values(db)
	u32, uOut := math.Ldexp(1, -24), hosttest.UnitRoundoff(db.DType)
	for j := 0; j < n; j++ {
		var s, sa float64
		for i := 0; i < m; i++ {
			s += float64(dy[i*n+j])
			sa += math.Abs(float64(dy[i*n+j]))
		}
		bound := (u32+uOut+u32*uOut)*math.Abs(s) + float64(m)*math.Ldexp(1, -52)*sa
		if err := math.Abs(float64(g[j]) - s); !(err <= bound) {
			require.Failf(t, "grad_bias out of bound", "[%d] = %g, float64 column sum %g: |err| %g > bound %g", j, g[j], s, err, bound)
		}
	}
}

// DequantizeAs dequantizes one direction of q into dtype dt and reads it back.
func DequantizeAs(t *testing.T, q *host.QTensor, dir host.Direction, dt host.DType) []float32 {
	t.Helper()
	out := hosttest.Tensor(t, dt, q.Shape()...)
	require.NoError(t, q.Dequantize(dir, out, 0))
	return hosttest.Values(out)
}

// RecipeQuantizer is r's quantizer for role tensorType of layer "fc1".
func RecipeQuantizer(t *testing.T, r host.Recipe, tensorType string) *host.Quantizer {
	t.Helper()
	q, err := r.Quantizer(host.Role{ModuleType: "linear", TensorType: tensorType, Name: "fc1"})
	require.NoError(t, err)
	t.Cleanup(q.Release)
	return q
}

// Check checks every output of a step against the float64 reference that
// applies the same quantize/dequantize steps, on the CPU, with fresh
// quantizers of recipe r for the same roles (spec §7.2, §9):
//
//	Y  = deq(Xq.row)·deq(Wq.row)ᵀ + b                       every mode
//	dX = deq(dYq.row)·deq(Wq.col),  dW = deq(dYq.col)ᵀ·deq(Xq.col)   none
//	dX = dY·W,                      dW = dYᵀ·X                 high_precision
//	dX = dY·deqₐ(Wq.row),           dW = dYᵀ·deqₐ(Xq.row)      dequantized
//	db = Σ_rows dY
//
// where deqₐ dequantizes to the input's dtype (the activation dtype). A GPU
// quantizes to the CPU's bytes (cuda/gputest), so the same reference holds
// for its outputs, within its bounds (b).
func Check(t *testing.T, r host.Recipe, c Case, got Outputs, b Bounds) {
	t.Helper()
	var other Outputs
	if b.Other != nil {
		other = *b.Other
	}
	ref := func(x host.Tensor) *host.Tensor {
		if b.Other == nil {
			return nil
		}
		return &x
	}
	xq := hosttest.Quantize(t, RecipeQuantizer(t, r, "input"), c.X)
	wq := hosttest.Quantize(t, RecipeQuantizer(t, r, "weight"), c.W)
	var bias []float32
	if c.B.Ptr != nil {
		bias = hosttest.Values(c.B)
	}
	m, k, n := c.M, c.K, c.N
	CheckProduct(t, "output", got.Y, OpRows(hosttest.Dequantize(t, xq, host.DirRowwise), m, k, false),
		OpRows(hosttest.Dequantize(t, wq, host.DirRowwise), n, k, false), bias, m, n, k, b.GPU, ref(other.Y))
	if !c.Train {
		return
	}
	dyv := hosttest.Values(c.DY)
	if c.B.Ptr != nil {
		if b.GPU {
			// ColumnSumsGEMM: db[1, N] = 1[1, M]·dY[M, N], FP32 accumulation.
			one := make([]float64, m)
			for i := range one {
				one[i] = 1
			}
			CheckProduct(t, "grad_bias", got.DB, one, OpRows(dyv, m, n, true), nil, 1, n, m, false, ref(other.DB))
		} else {
			CheckColumnSums(t, got.DB, dyv, m, n)
		}
	}
	var dyRow, dyCol, wDgrad, xWgrad []float32
	wide := false
	switch c.Flags.BackwardOverride {
	case linear.BackwardQuantized:
		dyq := hosttest.Quantize(t, RecipeQuantizer(t, r, "grad_output"), c.DY)
		dyRow, dyCol = hosttest.Dequantize(t, dyq, host.DirRowwise), hosttest.Dequantize(t, dyq, host.DirColumnwise)
		wDgrad, xWgrad = hosttest.Dequantize(t, wq, host.DirColumnwise), hosttest.Dequantize(t, xq, host.DirColumnwise)
		wide = b.GPU
	case linear.BackwardHighPrecision:
		dyRow, dyCol, wDgrad, xWgrad = dyv, dyv, hosttest.Values(c.W), hosttest.Values(c.X)
	case linear.BackwardDequantized:
		dyRow, dyCol = dyv, dyv
		wDgrad = DequantizeAs(t, wq, host.DirRowwise, c.X.DType)
		xWgrad = DequantizeAs(t, xq, host.DirRowwise, c.X.DType)
	}
	if c.Flags.InputRequiresGrad {
		CheckProduct(t, "grad_input", got.DX, OpRows(dyRow, m, n, false), OpRows(wDgrad, n, k, true), nil, m, k, n, wide, ref(other.DX))
	}
	if c.Flags.WeightRequiresGrad {
		CheckProduct(t, "grad_weight", got.DW, OpRows(dyCol, m, n, true), OpRows(xWgrad, m, k, true), nil, n, k, m, wide, ref(other.DW))
	}
}
