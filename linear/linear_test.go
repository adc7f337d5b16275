package linear_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/host"
	"libquant/host/hosttest"
	"libquant/linear"
	"libquant/linear/lineartest"
)

// The linear tests' layer: X [2, 32, 128] (M = 64 tokens, K = 128), W [N = 64,
// K], dY [2, 32, 64]. Every dim is a multiple of the largest block any recipe
// needs along it (MXFP8's 32, NVFP4's 16; FP8 block takes any shape).
const linM, linK, linN = 64, 128, 64

var linInShape = []int64{2, 32, linK}
var linOutShape = []int64{2, 32, linN}

// The recipes and modes every device's linear tests run, and the float64
// reference they check against, are lineartest's.
type (
	linearRecipe = lineartest.Recipe
	linearMode   = lineartest.Mode
)

var (
	presetRecipe  = lineartest.Preset
	ruleRecipe    = lineartest.Rules
	byTensorType  = lineartest.ByTensorType
	linearRecipes = lineartest.Recipes
	withFlags     = lineartest.WithFlags
	bothGrads     = lineartest.BothGrads
	modes         = lineartest.Modes()
	opRows        = lineartest.OpRows
	dequantizeAs  = lineartest.DequantizeAs
)

func recipeQuantizer(t *testing.T, r host.Recipe, tensorType string) *host.Quantizer {
	t.Helper()
	return lineartest.RecipeQuantizer(t, r, tensorType)
}

func newLinear(t *testing.T, r host.Recipe, grouped bool, n int) *linear.Layer {
	t.Helper()
	l, err := linear.New(r, "fc1", grouped, n)
	require.NoError(t, err)
	t.Cleanup(l.Release)
	return l
}

// linearIO is one step's tensors: inputs and the outputs a step wrote
// (zero tensors for gradients not requested).
type linearIO struct {
	x, w, b, dy       host.Tensor
	y, dx, dw, db     host.Tensor
	info, infoAfter   linear.ContextInfo
	train, bias       bool
	flags             linear.Flags
	outDType, grdType host.DType
	m                 int     // rows of the 2-D view of X
	inShape, outShape []int64 // X's and Y's shapes
}

func newLinearIO(t *testing.T, rng *rand.Rand, bias bool) *linearIO {
	return newLinearIOShaped(t, rng, bias, linM, linInShape, linOutShape)
}

// newLinearIOShaped is newLinearIO with X [inShape] (m rows in its 2-D view)
// and Y [outShape].
func newLinearIOShaped(t *testing.T, rng *rand.Rand, bias bool, m int, inShape, outShape []int64) *linearIO {
	io := &linearIO{
		x:    hosttest.RandTensor(t, rng, host.BFloat16, 1, inShape...),
		w:    hosttest.RandTensor(t, rng, host.Float32, 0.05, linN, linK),
		dy:   hosttest.RandTensor(t, rng, host.BFloat16, 0.01, outShape...),
		bias: bias, outDType: host.Float32, grdType: host.Float32,
		m: m, inShape: inShape, outShape: outShape,
	}
	if bias {
		io.b = hosttest.RandTensor(t, rng, host.Float32, 0.5, linN)
	}
	return io
}

// step runs a forward (and, when training, a backward requesting every
// gradient the flags allow) on l, into fresh output tensors.
func (io *linearIO) step(t *testing.T, l *linear.Layer, flags linear.Flags, train bool) {
	t.Helper()
	io.flags, io.train = flags, train
	io.y = hosttest.Tensor(t, io.outDType, io.outShape...)
	fa := &linear.ForwardArgs{Input: io.x, Weights: []host.Tensor{io.w}, Output: io.y, Flags: flags}
	if io.bias {
		fa.Biases = []host.Tensor{io.b}
	}
	ctx, err := l.Forward(fa, train)
	require.NoError(t, err)
	if !train {
		require.Nil(t, ctx)
		return
	}
	defer ctx.Release()
	io.info = ctx.Info()
	ba := &linear.BackwardArgs{GradOutput: io.dy}
	if flags.InputRequiresGrad {
		io.dx = hosttest.Tensor(t, io.grdType, io.inShape...)
		ba.GradInput = &io.dx
	}
	if flags.WeightRequiresGrad {
		io.dw = hosttest.Tensor(t, io.grdType, linN, linK)
		ba.GradWeights = []host.Tensor{io.dw}
	}
	if io.bias {
		io.db = hosttest.Tensor(t, io.grdType, linN)
		ba.GradBiases = []host.Tensor{io.db}
	}
	require.NoError(t, ctx.Backward(ba))
	io.infoAfter = ctx.Info()
}

// checkProduct is lineartest.CheckProduct with the CPU's bound.
func checkProduct(t *testing.T, what string, got host.Tensor, a, bt []float64, bias []float32, m, n, k int) {
	t.Helper()
	lineartest.CheckProduct(t, what, got, a, bt, bias, m, n, k, false, nil)
}

// checkAgainstReference checks every output of io against lineartest's
// float64 reference, with the CPU's bounds.
func checkAgainstReference(t *testing.T, r host.Recipe, io *linearIO) {
	t.Helper()
	lineartest.Check(t, r, io.testCase(), io.outputs(), lineartest.Bounds{})
}

func (io *linearIO) testCase() lineartest.Case {
	c := lineartest.Case{X: io.x, W: io.w, DY: io.dy, M: io.m, K: linK, N: linN, Flags: io.flags, Train: io.train}
	if io.bias {
		c.B = io.b
	}
	return c
}

func (io *linearIO) outputs() lineartest.Outputs {
	return lineartest.Outputs{Y: io.y, DX: io.dx, DW: io.dw, DB: io.db}
}

// TestLinearMatchesReference runs every recipe in every backward mode (FP8
// delayed scaling only without override, spec §9.2) and, in the quantized
// mode, with a frozen weight and with an input that needs no gradient, and
// checks the output and every gradient against the float64 reference.
func TestLinearMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	for _, lr := range linearRecipes() {
		// A copy: the appends below must not write into modes' array, which
		// later tests (TestGroupedLinear) read.
		cases := slices.Clone(modes)
		if lr.Delayed {
			cases = cases[:1]
		}
		cases = append(cases, lineartest.PartialModes()...)
		if lr.Delayed {
			cases = cases[:3]
		}
		for _, mode := range cases {
			t.Run(lr.Name+"/"+mode.Name, func(t *testing.T) {
				r := lr.Make(t)
				io := newLinearIO(t, rng, true)
				io.step(t, newLinear(t, r, false, 1), mode.Flags, true)
				checkAgainstReference(t, r, io)
			})
		}
	}
	// 16-bit outputs and gradients: the bound then includes their rounding.
	t.Run("mxfp8/bf16_outputs", func(t *testing.T) {
		r := presetRecipe(host.RecipeConfig{Kind: host.RecipeMXFP8})(t)
		io := newLinearIO(t, rng, true)
		io.outDType, io.grdType = host.BFloat16, host.BFloat16
		io.step(t, newLinear(t, r, false, 1), bothGrads, true)
		checkAgainstReference(t, r, io)
	})
	t.Run("fp8_current/inference", func(t *testing.T) {
		r := presetRecipe(host.RecipeConfig{Kind: host.RecipeFP8Current})(t)
		io := newLinearIO(t, rng, false)
		io.step(t, newLinear(t, r, false, 1), linear.Flags{}, false)
		checkAgainstReference(t, r, io)
	})
}

// TestLinearAnyBatch runs every recipe in every backward mode at batches no
// block divides — one decode token, 7 rows, and 45 rows as a [3, 15, K]
// tensor — and checks the output and every gradient against the float64
// reference (spec §14: MXFP8, MXFP4 and NVFP4 take any M; wgrad contracts
// over the ragged M).
func TestLinearAnyBatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(63, 64))
	for _, sh := range [][]int64{{1, linK}, {7, linK}, {3, 15, linK}} {
		m := int(sh[0])
		if len(sh) == 3 {
			m *= int(sh[1])
		}
		outShape := append(append([]int64(nil), sh[:len(sh)-1]...), linN)
		for _, lr := range linearRecipes() {
			cases := modes
			if lr.Delayed {
				cases = modes[:1]
			}
			for _, mode := range cases {
				t.Run(fmt.Sprintf("m=%d/%s/%s", m, lr.Name, mode.Name), func(t *testing.T) {
					r := lr.Make(t)
					io := newLinearIOShaped(t, rng, true, m, sh, outShape)
					io.step(t, newLinear(t, r, false, 1), mode.Flags, true)
					checkAgainstReference(t, r, io)
				})
			}
		}
	}
}

// linearBytes are the raw bytes of a step's outputs, for bit-identity checks.
func (io *linearIO) bytes() map[string][]byte {
	out := map[string][]byte{"output": append([]byte(nil), io.y.Bytes8()...)}
	for name, x := range map[string]host.Tensor{"grad_input": io.dx, "grad_weight": io.dw, "grad_bias": io.db} {
		if x.Ptr != nil {
			out[name] = append([]byte(nil), x.Bytes8()...)
		}
	}
	return out
}

// TestLinearOverrideIgnoresSaveOriginalInput mirrors TE's
// test_linear_backward_override_dequantized_ignores_save_original_input
// (spec §9.5): with the dequantized override the output and every gradient
// are bit-identical whatever save_original_input says (it is forced off), and
// likewise with high_precision (forced on, §9.4).
func TestLinearOverrideIgnoresSaveOriginalInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(63, 64))
	for _, lr := range linearRecipes() {
		if lr.Delayed {
			continue
		}
		for _, o := range []linear.BackwardOverride{linear.BackwardDequantized, linear.BackwardHighPrecision} {
			t.Run(lr.Name+"/"+o.String(), func(t *testing.T) {
				r := lr.Make(t)
				base := newLinearIO(t, rng, true)
				var got [2]map[string][]byte
				for i, save := range []bool{false, true} {
					io := *base
					io.step(t, newLinear(t, r, false, 1), withFlags(bothGrads, o, save), true)
					require.Equal(t, o == linear.BackwardHighPrecision, io.info.Flags.SaveOriginalInput, "effective save_original_input")
					got[i] = io.bytes()
				}
				require.Len(t, got[0], 4)
				require.Equal(t, got[0], got[1])
			})
		}
	}
}

// quantizedBytes quantizes x with a fresh quantizer of role tensorType at
// usage u and returns the bytes of its buffers (a storage shared by both
// directions counted once).
func quantizedBytes(t *testing.T, r host.Recipe, tensorType string, x host.Tensor, u host.Usage) int64 {
	t.Helper()
	q := recipeQuantizer(t, r, tensorType)
	require.NoError(t, q.SetUsage(u))
	qt := hosttest.Quantize(t, q, x)
	var n int64
	var seen []*host.Storage
	for _, d := range []host.Direction{host.DirRowwise, host.DirColumnwise} {
		st, ok := qt.Storage(d)
		if !ok || (len(seen) > 0 && seen[0] == st) {
			continue
		}
		seen = append(seen, st)
		for _, b := range st.Buffers {
			n += b.Tensor.Bytes()
		}
	}
	return n
}

// TestLinearSavedMemory checks what each mode keeps for backward (spec §7.4,
// §9.4, §9.5), as the context reports it: a tensor is kept only when a
// requested gradient needs it; the quantized backward keeps the input's
// columnwise form and references the layer's quantized weight (its
// columnwise form); save_original_input keeps the input itself;
// high_precision keeps copies of the input and weight; dequantized keeps the
// input's rowwise form and references the weight's rowwise form. Backward
// frees everything.
func TestLinearSavedMemory(t *testing.T) {
	rng := rand.New(rand.NewPCG(65, 66))
	col, row := host.Columnwise, host.Rowwise
	for _, lr := range linearRecipes() {
		if lr.Name == "fp8_delayed" {
			continue
		}
		r := lr.Make(t)
		io := newLinearIO(t, rng, false)
		xBytes, wBytes := io.x.Bytes(), io.w.Bytes()
		qx := func(u host.Usage) int64 { return quantizedBytes(t, r, "input", io.x, u) }
		qw := func(u host.Usage) int64 { return quantizedBytes(t, r, "weight", io.w, u) }
		type want struct {
			in, w           linear.Saved
			inUsage, wUsage host.Usage
			inBytes, wBytes int64
		}
		cases := []struct {
			name  string
			flags linear.Flags
			want  want
		}{
			{"none", bothGrads, want{linear.SavedQuantized, linear.SavedLayerWeight, col, col, qx(col), qw(col)}},
			{"none_frozen_weight", linear.Flags{InputRequiresGrad: true}, want{linear.SavedNone, linear.SavedLayerWeight, 0, col, 0, qw(col)}},
			{"none_input_needs_no_grad", linear.Flags{WeightRequiresGrad: true}, want{linear.SavedQuantized, linear.SavedNone, col, 0, qx(col), 0}},
			{"none_save_original_input", withFlags(bothGrads, linear.BackwardQuantized, true), want{linear.SavedOriginal, linear.SavedLayerWeight, 0, col, xBytes, qw(col)}},
			{"high_precision", withFlags(bothGrads, linear.BackwardHighPrecision, false), want{linear.SavedOriginal, linear.SavedOriginal, 0, 0, xBytes, wBytes}},
			{"high_precision_frozen_weight", withFlags(linear.Flags{InputRequiresGrad: true}, linear.BackwardHighPrecision, false), want{linear.SavedNone, linear.SavedOriginal, 0, 0, 0, wBytes}},
			{"dequantized", withFlags(bothGrads, linear.BackwardDequantized, true), want{linear.SavedQuantized, linear.SavedLayerWeight, row, row, qx(row), qw(row)}},
		}
		for _, c := range cases {
			t.Run(lr.Name+"/"+c.name, func(t *testing.T) {
				step := *io
				step.step(t, newLinear(t, r, false, 1), c.flags, true)
				got := step.info
				// Identity keeps one buffer for both directions.
				w := c.want
				if lr.Name == "identity" && w.inUsage != 0 {
					w.inUsage = host.BothUsages
				}
				require.Equal(t, w, want{got.InputSaved, got.WeightSaved, got.InputUsage, got.WeightUsage, got.InputBytes, got.WeightBytes})
				owned := got.InputBytes
				if got.WeightSaved == linear.SavedOriginal {
					owned += got.WeightBytes
				}
				require.Equal(t, owned, got.OwnedBytes, "owned bytes")
				require.True(t, step.infoAfter.Used)
				require.Equal(t, linear.ContextInfo{NumGEMMs: 1, Used: true, Flags: got.Flags}, step.infoAfter, "backward frees what was saved")
			})
		}
	}
}
