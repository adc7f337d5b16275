package linear_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/host"
	"libquant/host/hosttest"
	"libquant/linear"
)

// TestLinearTrainInferAlternation runs TE's training-loop stages
// [train, infer]*2 and [infer, train]*2 (spec §10) on one layer whose
// quantized weight persists across steps, and checks every output and
// gradient against a fresh computation (a new layer, so fresh quantizers and
// a fresh quantized weight) on the same tensors. The optimizer changes the
// weight in place after each training step and says so (WeightUpdated);
// inference steps leave it alone. The cached weight keeps its buffers (it is
// re-quantized in place) and its usages never shrink.
func TestLinearTrainInferAlternation(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	for _, lr := range linearRecipes() {
		if lr.Delayed {
			continue // a fresh delayed-scaling quantizer has another history; TestLinearDelayedScaling covers it
		}
		for _, stages := range [][]string{{"train", "infer", "train", "infer"}, {"infer", "train", "infer", "train"}} {
			t.Run(fmt.Sprintf("%s/%s_first", lr.Name, stages[0]), func(t *testing.T) {
				r := lr.Make(t)
				l := newLinear(t, r, false, 1)
				w := hosttest.RandTensor(t, rng, host.Float32, 0.05, linN, linK) // the parameter, updated in place
				b := hosttest.RandTensor(t, rng, host.Float32, 0.5, linN)
				var addrs []uintptr
				var usage host.Usage
				for step, stage := range stages {
					io := newLinearIO(t, rng, true)
					io.w, io.b = w, b
					train := stage == "train"
					flags := linear.Flags{}
					if train {
						flags = bothGrads
					}
					fresh := *io
					io.step(t, l, flags, train)
					fresh.step(t, newLinear(t, r, false, 1), flags, train)
					require.Equal(t, fresh.bytes(), io.bytes(), "step %d (%s): outputs and gradients differ from a fresh computation", step, stage)

					wq, ok, err := l.Weight(0)
					require.NoError(t, err)
					require.True(t, ok)
					require.True(t, wq.Persistent())
					require.True(t, wq.Usage().Has(usage), "step %d (%s): the quantized weight's usage shrank from %s to %s", step, stage, usage, wq.Usage())
					usage = wq.Usage()
					if train {
						require.True(t, usage.Has(host.BothUsages), "step %d: training needs both directions", step)
					}
					a := ptrs(wq)
					if addrs != nil && len(a) == len(addrs) {
						require.Equal(t, addrs, a, "step %d (%s): the quantized weight moved instead of being re-quantized in place", step, stage)
					}
					addrs = a
					if train { // the optimizer step
						host.StoreFloat32(w, 0, hosttest.Values(hosttest.RandTensor(t, rng, host.Float32, 0.05, linN, linK)))
						require.NoError(t, l.WeightUpdated(-1))
					}
				}
			})
		}
	}
}

func ptrs(q *host.QTensor) []uintptr {
	var out []uintptr
	for _, p := range hosttest.BufferAddrs(q) {
		out = append(out, uintptr(p))
	}
	return out
}

// TestLinearWeightCache: without WeightUpdated an in-place change of the
// weight is not seen (the cache is the point); a weight at another address
// is; a context still holding the quantized weight for its backward keeps the
// values it was computed with when the weight is re-quantized (copy on
// write), and it outlives its layer.
func TestLinearWeightCache(t *testing.T) {
	rng := rand.New(rand.NewPCG(73, 74))
	r := presetRecipe(host.RecipeConfig{Kind: host.RecipeNVFP4, Seed: 3})(t)
	l := newLinear(t, r, false, 1)
	io := newLinearIO(t, rng, false)
	io.step(t, l, linear.Flags{}, false)
	before := io.bytes()
	host.StoreFloat32(io.w, 0, hosttest.Values(hosttest.RandTensor(t, rng, host.Float32, 0.05, linN, linK)))
	io.step(t, l, linear.Flags{}, false)
	require.Equal(t, before, io.bytes(), "an unannounced in-place change must not be seen")
	other := *io
	other.w = hosttest.Tensor(t, host.Float32, linN, linK)
	copy(other.w.Bytes8(), io.w.Bytes8())
	other.step(t, l, linear.Flags{}, false)
	require.NotEqual(t, before, other.bytes(), "a weight at another address is quantized anew")

	// Copy on write: ctx1 holds the quantized weight of w1 when w2 arrives.
	w1 := hosttest.Values(io.w)
	ctx1io := *io
	ctx1io.y = hosttest.Tensor(t, host.Float32, linOutShape...)
	ctx1, err := l.Forward(&linear.ForwardArgs{Input: io.x, Weights: []host.Tensor{io.w}, Output: ctx1io.y, Flags: bothGrads}, true)
	require.NoError(t, err)
	wq, _, err := l.Weight(0)
	require.NoError(t, err)
	addrs := ptrs(wq)
	host.StoreFloat32(io.w, 0, hosttest.Values(hosttest.RandTensor(t, rng, host.Float32, 0.05, linN, linK)))
	require.NoError(t, l.WeightUpdated(0))
	io.step(t, l, bothGrads, true)
	wq2, _, err := l.Weight(0)
	require.NoError(t, err)
	require.NotEqual(t, addrs, ptrs(wq2), "a weight a context still holds is not overwritten")
	require.Equal(t, host.BothUsages, wq2.Usage(), "the copy keeps the usages")
	l.Release()
	dx := hosttest.Tensor(t, host.Float32, linInShape...)
	require.NoError(t, ctx1.Backward(&linear.BackwardArgs{GradOutput: io.dy, GradInput: &dx}))
	ctx1.Release()
	// ctx1's dgrad used w1's quantization.
	ref := *io
	ref.w = hosttest.Tensor(t, host.Float32, linN, linK)
	host.StoreFloat32(ref.w, 0, w1)
	ref.step(t, newLinear(t, r, false, 1), linear.Flags{InputRequiresGrad: true}, true)
	require.Equal(t, ref.dx.Bytes8(), dx.Bytes8())
	// The next forward after the context is gone re-quantizes in place again.
	l2 := newLinear(t, r, false, 1)
	io.step(t, l2, bothGrads, true)
	wq3, _, err := l2.Weight(0)
	require.NoError(t, err)
	addrs = ptrs(wq3)
	require.NoError(t, l2.WeightUpdated(-1))
	io.step(t, l2, bothGrads, true)
	require.Equal(t, addrs, ptrs(wq3))
}

// groupedIO is a grouped layer's step: X [M, K] split into GEMMs by splits.
type groupedIO struct {
	splits        []int64
	x, dy         host.Tensor
	w, b, dw, db  []host.Tensor
	y, dx         host.Tensor
	flags         linear.Flags
	infoBackwards linear.ContextInfo
}

func newGroupedIO(t *testing.T, rng *rand.Rand, splits []int64) *groupedIO {
	var m int64
	for _, s := range splits {
		m += s
	}
	io := &groupedIO{splits: splits, x: hosttest.RandTensor(t, rng, host.BFloat16, 1, m, linK), dy: hosttest.RandTensor(t, rng, host.BFloat16, 0.01, m, linN)}
	for range splits {
		io.w = append(io.w, hosttest.RandTensor(t, rng, host.Float32, 0.05, linN, linK))
		io.b = append(io.b, hosttest.RandTensor(t, rng, host.Float32, 0.5, linN))
	}
	return io
}

func (io *groupedIO) step(t *testing.T, l *linear.Layer, flags linear.Flags) {
	t.Helper()
	m, _ := host.Flatten2D(io.x.Shape)
	io.flags = flags
	io.y = hosttest.Tensor(t, host.Float32, m, linN)
	ctx, err := l.Forward(&linear.ForwardArgs{Input: io.x, Weights: io.w, Biases: io.b, MSplits: io.splits, Output: io.y, Flags: flags}, true)
	require.NoError(t, err)
	defer ctx.Release()
	io.dx = hosttest.Tensor(t, host.Float32, m, linK)
	io.dw, io.db = nil, nil
	for range io.splits {
		io.db = append(io.db, hosttest.Tensor(t, host.Float32, linN))
		// Guard values: a zero-row GEMM's gradient must be overwritten with zeros.
		dw := hosttest.Tensor(t, host.Float32, linN, linK)
		for i := range dw.Float32s() {
			dw.Float32s()[i] = float32(math.NaN())
		}
		io.dw = append(io.dw, dw)
	}
	ba := &linear.BackwardArgs{GradOutput: io.dy, GradBiases: io.db}
	if flags.InputRequiresGrad {
		ba.GradInput = &io.dx
	}
	if flags.WeightRequiresGrad {
		ba.GradWeights = io.dw
	}
	require.NoError(t, ctx.Backward(ba))
}

// TestGroupedLinear runs grouped layers (mixture of experts) with groups of
// zero rows in every mode and checks that each GEMM's output rows and
// gradients are bit-identical to a plain layer run on that group's rows and
// weight (whose results TestLinearMatchesReference checks against the
// float64 reference), that output rows keep the input's order, and that a
// group of zero rows gets zero weight and bias gradients. Groups of any size
// (spec §14: 7, 45 and 1 rows, which no block divides) run in every mode too.
func TestGroupedLinear(t *testing.T) {
	rng := rand.New(rand.NewPCG(75, 76))
	splitsCases := [][]int64{{32, 0, 64, 32}, {7, 0, 45, 1}, {0, 0, 96, 0}, {0, 0, 0, 0}}
	for _, lr := range linearRecipes() {
		ms := modes
		if lr.Delayed {
			ms = modes[:1]
		}
		for _, mode := range ms {
			for i, splits := range splitsCases {
				if i > 1 && mode.Name != "none" {
					continue // the degenerate splits once per recipe
				}
				t.Run(fmt.Sprintf("%s/%s/%v", lr.Name, mode.Name, splits), func(t *testing.T) {
					r := lr.Make(t)
					io := newGroupedIO(t, rng, splits)
					io.step(t, newLinear(t, r, true, len(splits)), mode.Flags)
					var row int64
					for g, rows := range splits {
						sl := func(x host.Tensor, cols int64) []byte {
							sz := x.DType.Size()
							return x.Bytes8()[row*cols*sz : (row+rows)*cols*sz]
						}
						if rows == 0 {
							require.Equal(t, make([]float32, linN*linK), hosttest.Values(io.dw[g]), "gemm %d: zero rows give a zero weight gradient", g)
							require.Equal(t, make([]float32, linN), hosttest.Values(io.db[g]), "gemm %d: zero rows give a zero bias gradient", g)
							continue
						}
						// The same GEMM as a plain layer on its rows.
						p := &linearIO{bias: true, outDType: host.Float32, grdType: host.Float32, w: io.w[g], b: io.b[g]}
						p.x = hosttest.Tensor(t, host.BFloat16, rows, linK)
						copy(p.x.Bytes8(), sl(io.x, linK))
						p.dy = hosttest.Tensor(t, host.BFloat16, rows, linN)
						copy(p.dy.Bytes8(), sl(io.dy, linN))
						plain := newLinear(t, r, false, 1)
						stepPlain(t, plain, p, rows, mode.Flags)
						require.Equal(t, p.y.Bytes8(), sl(io.y, linN), "gemm %d: output rows", g)
						require.Equal(t, p.dx.Bytes8(), sl(io.dx, linK), "gemm %d: grad_input rows", g)
						require.Equal(t, p.dw.Bytes8(), io.dw[g].Bytes8(), "gemm %d: grad_weight", g)
						require.Equal(t, p.db.Bytes8(), io.db[g].Bytes8(), "gemm %d: grad_bias", g)
						row += rows
					}
				})
			}
		}
	}
}

// stepPlain is linearIO.step for a [rows, K] input.
func stepPlain(t *testing.T, l *linear.Layer, io *linearIO, rows int64, flags linear.Flags) {
	t.Helper()
	io.y = hosttest.Tensor(t, host.Float32, rows, linN)
	ctx, err := l.Forward(&linear.ForwardArgs{Input: io.x, Weights: []host.Tensor{io.w}, Biases: []host.Tensor{io.b}, Output: io.y, Flags: flags}, true)
	require.NoError(t, err)
	defer ctx.Release()
	io.dx = hosttest.Tensor(t, host.Float32, rows, linK)
	io.dw = hosttest.Tensor(t, host.Float32, linN, linK)
	io.db = hosttest.Tensor(t, host.Float32, linN)
	require.NoError(t, ctx.Backward(&linear.BackwardArgs{GradOutput: io.dy, GradInput: &io.dx, GradWeights: []host.Tensor{io.dw}, GradBiases: []host.Tensor{io.db}}))
}

// delayedRef is the spec §2.4 fused update of one delayed-scaling slot.
type delayedRef struct {
	h     []float32
	scale float32
	max   float32 // fp8_max·2^-margin
}

func (d *delayedRef) record(a float32) { d.h[0] = max(d.h[0], a) }

func (d *delayedRef) update(reduced *float32) {
	a0 := d.h[0]
	if reduced != nil && *reduced != 0 {
		a0 = *reduced
	}
	if a0 == 0 {
		return // nothing rolls, the scale stays
	}
	amax := a0
	for _, v := range d.h[1:] {
		amax = max(amax, v)
	}
	copy(d.h, d.h[1:])
	d.h[len(d.h)-1] = a0
	d.h[0] = 0
	if !math.IsInf(float64(amax), 0) && amax > 0 {
		d.scale = d.max / amax
	}
}

// TestLinearDelayedScaling trains a layer with the FP8 delayed-scaling recipe
// (history length 3) for several steps. At every step the forward state is
// updated after the forward pass and the backward state after the backward
// pass (spec §2.4), once with amaxes "reduced across processes" (doubled),
// and the test checks against a reference of the update rule: the staged
// amaxes the layer reports, every history and scale after each update, and
// that each quantize used the scale of its step (the output and grad_input
// against the float64 product of values quantized with the reference scale).
func TestLinearDelayedScaling(t *testing.T) {
	rng := rand.New(rand.NewPCG(77, 78))
	r := presetRecipe(host.RecipeConfig{Kind: host.RecipeFP8Delayed, AmaxHistoryLen: 3})(t)
	l := newLinear(t, r, false, 1)
	const e4m3, e5m2 = 448, 57344
	fwd := []*delayedRef{{h: make([]float32, 3), scale: 1, max: e4m3}, {h: make([]float32, 3), scale: 1, max: e4m3}}
	bwd := []*delayedRef{{h: make([]float32, 3), scale: 1, max: e5m2}}
	quantizers := [][]linear.Tensor{{linear.Input, linear.Weight}, {linear.GradOutput}}
	checkState := func(step int, pass int, refs []*delayedRef) {
		t.Helper()
		for i, tt := range quantizers[pass] {
			q, err := l.Quantizer(tt, 0)
			require.NoError(t, err)
			ds, err := q.DelayedState(host.DirRowwise)
			require.NoError(t, err)
			require.Equal(t, refs[i].h, hosttest.Values(ds.AmaxHistory()), "step %d: %s history", step, tt)
			require.Equal(t, []float32{refs[i].scale}, hosttest.Values(ds.Scale()), "step %d: %s scale", step, tt)
			q.Release()
		}
	}
	// withScale quantizes x as a delayed quantizer whose scale is s does.
	withScale := func(x host.Tensor, elem host.Element, s float32) *host.QTensor {
		q := hosttest.NewQuantizer(t, host.Params{Format: "fp8", Element: elem, Scaling: host.ScalingDelayed, AmaxHistoryLen: 3}, host.BothUsages)
		ds, err := q.DelayedState(host.DirRowwise)
		require.NoError(t, err)
		ds.Scale().Float32s()[0] = s
		return hosttest.Quantize(t, q, x)
	}
	for step := 0; step < 6; step++ {
		sigma := math.Ldexp(1, step%3*2-2) // amaxes that rise and fall
		io := newLinearIO(t, rng, false)
		io.x = hosttest.RandTensor(t, rng, host.BFloat16, sigma, linInShape...)
		io.dy = hosttest.RandTensor(t, rng, host.BFloat16, sigma/64, linOutShape...)
		if step > 0 {
			require.NoError(t, l.WeightUpdated(-1))
		}
		xq := withScale(io.x, host.ElementE4M3, fwd[0].scale)
		wq := withScale(io.w, host.ElementE4M3, fwd[1].scale)
		dyq := withScale(io.dy, host.ElementE5M2, bwd[0].scale)

		io.y = hosttest.Tensor(t, host.Float32, linOutShape...)
		ctx, err := l.Forward(&linear.ForwardArgs{Input: io.x, Weights: []host.Tensor{io.w}, Output: io.y, Flags: bothGrads}, true)
		require.NoError(t, err)
		checkProduct(t, "output", io.y, opRows(hosttest.Dequantize(t, xq, host.DirRowwise), linM, linK, false),
			opRows(hosttest.Dequantize(t, wq, host.DirRowwise), linN, linK, false), nil, linM, linN, linK)
		fwd[0].record(host.AmaxCPU(io.x))
		fwd[1].record(host.AmaxCPU(io.w))
		amaxes, err := l.ScalingAmaxes(linear.PassForward)
		require.NoError(t, err)
		require.Equal(t, []float32{fwd[0].h[0], fwd[1].h[0]}, amaxes, "step %d: staged forward amaxes", step)
		var reduced []float32
		if step == 3 {
			reduced = []float32{2 * amaxes[0], 2 * amaxes[1]}
		}
		require.NoError(t, l.UpdateScaling(linear.PassForward, reduced))
		for i, ref := range fwd {
			var rp *float32
			if reduced != nil {
				rp = &reduced[i]
			}
			ref.update(rp)
		}
		checkState(step, 0, fwd)

		io.dx = hosttest.Tensor(t, host.Float32, linInShape...)
		io.dw = hosttest.Tensor(t, host.Float32, linN, linK)
		require.NoError(t, ctx.Backward(&linear.BackwardArgs{GradOutput: io.dy, GradInput: &io.dx, GradWeights: []host.Tensor{io.dw}}))
		ctx.Release()
		checkProduct(t, "grad_input", io.dx, opRows(hosttest.Dequantize(t, dyq, host.DirRowwise), linM, linN, false),
			opRows(hosttest.Dequantize(t, wq, host.DirColumnwise), linN, linK, true), nil, linM, linK, linN)
		bwd[0].record(host.AmaxCPU(io.dy))
		amaxes, err = l.ScalingAmaxes(linear.PassBackward)
		require.NoError(t, err)
		require.Equal(t, []float32{bwd[0].h[0]}, amaxes, "step %d: staged backward amaxes", step)
		reduced = nil
		if step == 3 {
			reduced = []float32{2 * amaxes[0]}
		}
		require.NoError(t, l.UpdateScaling(linear.PassBackward, reduced))
		var rp *float32
		if reduced != nil {
			rp = &reduced[0]
		}
		bwd[0].update(rp)
		checkState(step, 1, bwd)
	}
	err := l.UpdateScaling(linear.PassForward, []float32{1})
	require.ErrorIs(t, err, host.ErrInvalidArgument)
	require.ErrorContains(t, err, "reduced_amaxes: 1 given, the forward pass has 2")
	_, err = l.ScalingAmaxes(7)
	require.ErrorContains(t, err, "pass")

	// A recipe without delayed scaling has no slots.
	cur := newLinear(t, presetRecipe(host.RecipeConfig{Kind: host.RecipeMXFP8})(t), false, 1)
	amaxes, err := cur.ScalingAmaxes(linear.PassForward)
	require.NoError(t, err)
	require.Empty(t, amaxes)
	require.NoError(t, cur.UpdateScaling(linear.PassBackward, nil))
}

// TestLinearErrors checks that bad calls fail with the right kind and a
// message naming the argument, and change nothing.
func TestLinearErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(79, 80))
	delayed := presetRecipe(host.RecipeConfig{Kind: host.RecipeFP8Delayed})(t)
	current := presetRecipe(host.RecipeConfig{Kind: host.RecipeFP8Current})(t)
	io := newLinearIO(t, rng, true)
	y := hosttest.Tensor(t, host.Float32, linOutShape...)
	args := func(mod func(a *linear.ForwardArgs)) *linear.ForwardArgs {
		a := &linear.ForwardArgs{Input: io.x, Weights: []host.Tensor{io.w}, Biases: []host.Tensor{io.b}, Output: y, Flags: bothGrads}
		if mod != nil {
			mod(a)
		}
		return a
	}
	cuda := host.Device{Type: host.CUDA}
	forward := []struct {
		name   string
		recipe host.Recipe
		keep   bool
		args   *linear.ForwardArgs
		kind   error
		msg    string
	}{
		{"override with delayed", delayed, true, args(func(a *linear.ForwardArgs) { a.Flags.BackwardOverride = linear.BackwardDequantized }),
			host.ErrInvalidArgument, "backward_override: dequantized is not allowed with delayed scaling"},
		{"high_precision with delayed", delayed, true, args(func(a *linear.ForwardArgs) { a.Flags.BackwardOverride = linear.BackwardHighPrecision }),
			host.ErrInvalidArgument, "backward_override: high_precision"},
		{"save_original_input with delayed", delayed, true, args(func(a *linear.ForwardArgs) { a.Flags.SaveOriginalInput = true }),
			host.ErrInvalidArgument, "save_original_input: not allowed with delayed scaling"},
		{"bad override", current, true, args(func(a *linear.ForwardArgs) { a.Flags.BackwardOverride = 3 }), host.ErrInvalidArgument, "backward_override: 3"},
		{"grads without a context", current, false, args(nil), host.ErrInvalidArgument, "ctx: is NULL"},
		{"input dtype", current, true, args(func(a *linear.ForwardArgs) { a.Input.DType = host.Int32 }), host.ErrInvalidArgument, "input: dtype int32"},
		{"weight device", current, true, args(func(a *linear.ForwardArgs) { a.Weights[0].Device = cuda }), host.ErrInvalidArgument, "weight: on cuda:0 but input is on cpu"},
		{"output device", current, true, args(func(a *linear.ForwardArgs) { a.Output.Device = cuda }), host.ErrInvalidArgument, "output: on cuda:0 but input is on cpu"},
		{"on a device no plugin serves", current, true, args(func(a *linear.ForwardArgs) {
			for _, t := range []*host.Tensor{&a.Input, &a.Weights[0], &a.Biases[0], &a.Output} {
				t.Device = cuda
			}
		}), host.ErrDeviceUnavailable, "cuda:0"},
		{"weight rank", current, true, args(func(a *linear.ForwardArgs) { a.Weights[0].Shape = []int64{linN, 2, linK / 2} }), host.ErrInvalidArgument, "weight: shape [64 2 64] is not 2-D"},
		{"weight K", current, true, args(func(a *linear.ForwardArgs) { a.Weights[0].Shape = []int64{2 * linN, linK / 2} }), host.ErrInvalidArgument, "weight: shape [128 64], want [N, K=128]"},
		{"two weights", current, true, args(func(a *linear.ForwardArgs) { a.Weights = append(a.Weights, io.w) }), host.ErrInvalidArgument, "weights: 2 given"},
		{"bias shape", current, true, args(func(a *linear.ForwardArgs) { a.Biases[0].Shape = []int64{linN / 2} }), host.ErrInvalidArgument, "bias: shape [32] is not [N=64]"},
		{"output shape", current, true, args(func(a *linear.ForwardArgs) { a.Output.Shape = []int64{linM, linN} }), host.ErrInvalidArgument, "output: shape [64 64], want [2 32 64]"},
		{"output overlaps input", current, true, args(func(a *linear.ForwardArgs) { a.Output.Ptr = a.Input.Ptr; a.Output.DType = host.BFloat16 }), host.ErrInvalidArgument, "output: overlaps input"},
		{"m_splits on a plain layer", current, true, args(func(a *linear.ForwardArgs) { a.MSplits = []int64{linM} }), host.ErrInvalidArgument, "m_splits: set for a plain linear layer"},
	}
	for _, c := range forward {
		t.Run("forward/"+c.name, func(t *testing.T) {
			l := newLinear(t, c.recipe, false, 1)
			ctx, err := l.Forward(c.args, c.keep)
			require.Nil(t, ctx)
			require.ErrorIs(t, err, c.kind)
			require.ErrorContains(t, err, c.msg)
			_, ok, err := l.Weight(0)
			require.NoError(t, err)
			require.False(t, ok, "a failed forward quantizes no weight")
		})
	}

	t.Run("grouped", func(t *testing.T) {
		l := newLinear(t, current, true, 2)
		x := hosttest.RandTensor(t, rng, host.BFloat16, 1, linM, linK)
		out := hosttest.Tensor(t, host.Float32, linM, linN)
		for _, c := range []struct {
			splits []int64
			msg    string
		}{{nil, "m_splits: 0 given, the layer has 2"}, {[]int64{32, 16}, "m_splits: the row counts sum to 48, the input has M = 64"}, {[]int64{-1, 65}, "m_splits[0]: -1 rows"}} {
			_, err := l.Forward(&linear.ForwardArgs{Input: x, Weights: []host.Tensor{io.w, io.w}, MSplits: c.splits, Output: out}, true)
			require.ErrorIs(t, err, host.ErrInvalidArgument)
			require.ErrorContains(t, err, c.msg)
		}
		_, err := linear.New(current, "x", true, 0)
		require.ErrorContains(t, err, "num_gemms: 0")
		_, err = linear.New(current, "x", false, 2)
		require.ErrorContains(t, err, "num_gemms: 2 for a plain linear layer")
		require.ErrorContains(t, l.WeightUpdated(2), "gemm: 2 out of range")
		_, err = l.Quantizer(linear.GradOutput, 5)
		require.ErrorContains(t, err, "gemm: 5")
	})

	t.Run("recipe without a role", func(t *testing.T) {
		rr, err := host.NewRuleRecipe([]host.Rule{{Pattern: host.Role{TensorType: "input"}, Quantizer: hosttest.NewQuantizer(t, host.Params{Format: "fp8"}, 0)}})
		require.NoError(t, err)
		defer rr.Release()
		_, err = linear.New(rr, "fc2", false, 1)
		require.ErrorContains(t, err, `recipe: role (module_type "linear", tensor_type "weight", name "fc2"): no rule`)
	})

	t.Run("backward", func(t *testing.T) {
		l := newLinear(t, current, false, 1)
		fresh := func(flags linear.Flags) *linear.Context {
			ctx, err := l.Forward(args(func(a *linear.ForwardArgs) { a.Flags = flags }), true)
			require.NoError(t, err)
			t.Cleanup(ctx.Release)
			return ctx
		}
		dx := hosttest.Tensor(t, host.Float32, linInShape...)
		dw := hosttest.Tensor(t, host.Float32, linN, linK)
		db := hosttest.Tensor(t, host.Float32, linN)
		dwWrong := hosttest.Tensor(t, host.Float32, linK, linN)
		cases := []struct {
			name  string
			flags linear.Flags
			args  linear.BackwardArgs
			kind  error
			msg   string
		}{
			{"nothing requested", bothGrads, linear.BackwardArgs{GradOutput: io.dy}, host.ErrInvalidArgument, "request at least one gradient"},
			{"grad_weight of a frozen weight", linear.Flags{InputRequiresGrad: true}, linear.BackwardArgs{GradOutput: io.dy, GradWeights: []host.Tensor{dw}}, host.ErrState, "grad_weight: requested, but the forward pass ran with weight_requires_grad 0"},
			{"grad_input not prepared", linear.Flags{WeightRequiresGrad: true}, linear.BackwardArgs{GradOutput: io.dy, GradInput: &dx}, host.ErrState, "grad_input: requested, but the forward pass ran with input_requires_grad 0"},
			{"grad_weight shape", bothGrads, linear.BackwardArgs{GradOutput: io.dy, GradWeights: []host.Tensor{dwWrong}}, host.ErrInvalidArgument, "grad_weight: shape [128 64], want the weight's [N=64, K=128]"},
			{"grad_output shape", bothGrads, linear.BackwardArgs{GradOutput: io.x, GradBiases: []host.Tensor{db}}, host.ErrInvalidArgument, "grad_output: shape [2 32 128], the forward's output was [2 32 64]"},
			{"grad_input overlaps grad_weight", bothGrads, linear.BackwardArgs{GradOutput: io.dy, GradInput: &dx, GradWeights: []host.Tensor{{Ptr: dx.Ptr, DType: host.Float32, Shape: []int64{linN, linK}, Device: hosttest.CPU}}}, host.ErrInvalidArgument, "grad_weight: overlaps grad_input"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ctx := fresh(c.flags)
				err := ctx.Backward(&c.args)
				require.ErrorIs(t, err, c.kind)
				require.ErrorContains(t, err, c.msg)
				require.False(t, ctx.Info().Used, "a rejected backward leaves the context usable")
			})
		}
		noBias, err := l.Forward(args(func(a *linear.ForwardArgs) { a.Biases = nil }), true)
		require.NoError(t, err)
		defer noBias.Release()
		err = noBias.Backward(&linear.BackwardArgs{GradOutput: io.dy, GradBiases: []host.Tensor{db}})
		require.ErrorIs(t, err, host.ErrState)
		require.ErrorContains(t, err, "grad_bias: requested, but the forward pass had no bias")

		ctx := fresh(bothGrads)
		require.NoError(t, ctx.Backward(&linear.BackwardArgs{GradOutput: io.dy, GradInput: &dx}))
		err = ctx.Backward(&linear.BackwardArgs{GradOutput: io.dy, GradInput: &dx})
		require.ErrorIs(t, err, host.ErrState)
		require.ErrorContains(t, err, "backward already ran")
		ctx = fresh(bothGrads)
		ctx.Release()
		err = ctx.Backward(&linear.BackwardArgs{GradOutput: io.dy, GradInput: &dx})
		require.ErrorIs(t, err, host.ErrState)
		require.ErrorContains(t, err, "ctx: released")
	})
}

// TestLinearConcurrent runs forward and backward passes of one layer from
// several goroutines while another keeps marking the weight updated (so the
// cached weight is re-quantized in place, or copied while contexts hold it)
// and reads the layer's state. The weight's values do not change, so every
// pass must give the bytes of a fresh layer's; under -race this checks the
// layer's and contexts' locking and the shared weight's reference counting.
func TestLinearConcurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(81, 82))
	r := presetRecipe(host.RecipeConfig{Kind: host.RecipeNVFP4, Seed: 4})(t)
	base := newLinearIO(t, rng, true)
	want := *base
	want.step(t, newLinear(t, r, false, 1), bothGrads, true)
	l := newLinear(t, r, false, 1)
	const workers, iters = 4, 6
	ios := make([][]*linearIO, workers)
	for w := range ios {
		for i := 0; i < iters; i++ {
			io := *base
			io.y = hosttest.Tensor(t, host.Float32, linOutShape...)
			io.dx = hosttest.Tensor(t, host.Float32, linInShape...)
			io.dw = hosttest.Tensor(t, host.Float32, linN, linK)
			io.db = hosttest.Tensor(t, host.Float32, linN)
			ios[w] = append(ios[w], &io)
		}
	}
	errs := make(chan error, workers+1)
	done := make(chan struct{})
	for w := 0; w < workers; w++ {
		go func(steps []*linearIO) {
			for _, io := range steps {
				ctx, err := l.Forward(&linear.ForwardArgs{Input: io.x, Weights: []host.Tensor{io.w}, Biases: []host.Tensor{io.b}, Output: io.y, Flags: bothGrads}, true)
				if err != nil {
					errs <- err
					return
				}
				_ = ctx.Info()
				err = ctx.Backward(&linear.BackwardArgs{GradOutput: io.dy, GradInput: &io.dx, GradWeights: []host.Tensor{io.dw}, GradBiases: []host.Tensor{io.db}})
				ctx.Release()
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}(ios[w])
	}
	go func() {
		for {
			select {
			case <-done:
				errs <- nil
				return
			default:
			}
			if err := l.WeightUpdated(-1); err != nil {
				errs <- err
				return
			}
			if wq, ok, err := l.Weight(0); err != nil {
				errs <- err
				return
			} else if ok {
				_ = wq.Usage()
			}
			if _, err := l.ScalingAmaxes(linear.PassForward); err != nil {
				errs <- err
				return
			}
		}
	}()
	for w := 0; w < workers; w++ {
		require.NoError(t, <-errs)
	}
	close(done)
	require.NoError(t, <-errs)
	for w := range ios {
		for i, io := range ios[w] {
			require.Equal(t, want.bytes(), io.bytes(), "worker %d, step %d", w, i)
		}
	}
}
