package gputest

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
	_ "libquant/plugins/identity"
)

// The linear layers on the GPU (issue #11 item 3): every recipe and backward
// mode, plain and grouped, checked against lineartest's float64 reference
// (the one linear/'s CPU tests use) within the GPU's bounds and against the
// same step on the CPU; the weight cache across train/infer alternation;
// delayed scaling with its state on the device.

const linK, linN = 128, 64

// linearIn is one step's inputs, as CPU tensors: X [..., K], a weight
// [N, K] and bias [N] per GEMM (no biases: nil), dY (X's leading dims, N),
// the row splits of a grouped layer (nil: plain).
type linearIn struct {
	x, dy  host.Tensor
	ws, bs []host.Tensor
	splits []int64
	flags  linear.Flags
	train  bool
	outDT  host.DType
}

// linearOut is a step's results, copied back to the CPU.
type linearOut struct {
	y, dx   host.Tensor
	dw, db  []host.Tensor
	ctxInfo linear.ContextInfo
}

func newLinearIn(t *testing.T, rng *rand.Rand, shape []int64, groups int, bias bool) *linearIn {
	t.Helper()
	out := append(slices.Clone(shape[:len(shape)-1]), linN)
	in := &linearIn{x: hosttest.RandTensor(t, rng, host.BFloat16, 1, shape...), dy: hosttest.RandTensor(t, rng, host.BFloat16, 0.01, out...), outDT: host.Float32}
	for g := 0; g < groups; g++ {
		in.ws = append(in.ws, hosttest.RandTensor(t, rng, host.Float32, 0.05, linN, linK))
		if bias {
			in.bs = append(in.bs, hosttest.RandTensor(t, rng, host.Float32, 0.5, linN))
		}
	}
	return in
}

// runLinear runs one step of l on dev: the inputs are copied there, the
// outputs (poisoned with NaN bytes on the GPU, so that what the layer does
// not write shows) are copied back.
func runLinear(t *testing.T, l *linear.Layer, dev host.Device, in *linearIn) linearOut {
	t.Helper()
	on := func(c host.Tensor) host.Tensor {
		if dev == cpu {
			return c
		}
		return toGPU(t, c)
	}
	alloc := func(dt host.DType, shape ...int64) host.Tensor {
		if dev == cpu {
			return hosttest.Tensor(t, dt, shape...)
		}
		return poisoned(t, dt, shape, 0xff)
	}
	back := func(x host.Tensor) host.Tensor {
		if dev == cpu || x.Ptr == nil {
			return x
		}
		return toCPU(t, x)
	}
	outShape := append(slices.Clone(in.x.Shape[:len(in.x.Shape)-1]), linN)
	fa := &linear.ForwardArgs{Input: on(in.x), Output: alloc(in.outDT, outShape...), Flags: in.flags, MSplits: in.splits}
	for _, w := range in.ws {
		fa.Weights = append(fa.Weights, on(w))
	}
	for _, b := range in.bs {
		fa.Biases = append(fa.Biases, on(b))
	}
	ctx, err := l.Forward(fa, in.train)
	require.NoError(t, err)
	var out linearOut
	if in.train {
		defer ctx.Release()
		out.ctxInfo = ctx.Info()
		ba := &linear.BackwardArgs{GradOutput: on(in.dy)}
		var dx host.Tensor
		if in.flags.InputRequiresGrad {
			dx = alloc(in.outDT, in.x.Shape...)
			ba.GradInput = &dx
		}
		for range in.ws {
			if in.flags.WeightRequiresGrad {
				ba.GradWeights = append(ba.GradWeights, alloc(in.outDT, linN, linK))
			}
			if in.bs != nil {
				ba.GradBiases = append(ba.GradBiases, alloc(in.outDT, linN))
			}
		}
		require.NoError(t, ctx.Backward(ba))
		out.dx = back(dx)
		for _, x := range ba.GradWeights {
			out.dw = append(out.dw, back(x))
		}
		for _, x := range ba.GradBiases {
			out.db = append(out.db, back(x))
		}
	}
	out.y = back(fa.Output)
	return out
}

// rows is rows [r0, r0+n) of a CPU tensor's 2-D view, as a new CPU tensor.
func rows(t *testing.T, x host.Tensor, r0, n int64) host.Tensor {
	t.Helper()
	if x.Ptr == nil {
		return x
	}
	_, cols := host.Flatten2D(x.Shape)
	s := hosttest.Tensor(t, x.DType, n, cols)
	sz := cols * int64(x.DType.Size())
	copy(s.Bytes8(), x.Bytes8()[r0*sz:(r0+n)*sz])
	return s
}

// checkLinear checks GEMM g's rows [r0, r0+m) of a GPU step against the
// float64 reference, with the GPU's bounds, and against the CPU's step.
func checkLinear(t *testing.T, r host.Recipe, in *linearIn, g int, r0, m int64, gpuOut, cpuOut linearOut) {
	t.Helper()
	c := lineartest.Case{X: rows(t, in.x, r0, m), W: in.ws[g], DY: rows(t, in.dy, r0, m), M: int(m), K: linK, N: linN, Flags: in.flags, Train: in.train}
	pick := func(o linearOut) lineartest.Outputs {
		out := lineartest.Outputs{Y: rows(t, o.y, r0, m), DX: rows(t, o.dx, r0, m)}
		if o.dw != nil {
			out.DW = o.dw[g]
		}
		if o.db != nil {
			out.DB = o.db[g]
		}
		return out
	}
	if in.bs != nil {
		c.B = in.bs[g]
	}
	other := pick(cpuOut)
	lineartest.Check(t, r, c, pick(gpuOut), lineartest.Bounds{GPU: true, Other: &other})
}

// TestLinearMatchesCPU runs a plain linear layer on the GPU in every recipe
// and backward mode (and with one gradient only) at an aligned batch (M 64
// as [2, 32, K]) and at batches no block divides (1, 7, 45 as [3, 15, K]),
// with FP32 and BF16 outputs, and checks every output and gradient against
// the float64 reference and the CPU layer.
func TestLinearMatchesCPU(t *testing.T) {
	needGPU(t)
	rng := rand.New(rand.NewPCG(91, 92))
	for _, sh := range [][]int64{{2, 32, linK}, {1, linK}, {7, linK}, {3, 15, linK}} {
		m, _ := host.Flatten2D(sh)
		for _, lr := range lineartest.Recipes() {
			modes := lineartest.Modes()
			if lr.Delayed {
				modes = modes[:1]
			}
			if m == 64 {
				modes = append(modes, lineartest.PartialModes()...)
				if lr.Delayed {
					modes = modes[:3]
				}
			}
			for _, mode := range modes {
				for _, outDT := range []host.DType{host.Float32, host.BFloat16} {
					if outDT == host.BFloat16 && mode.Name != "none" {
						continue
					}
					t.Run(fmt.Sprintf("m=%d/%s/%s/%s", m, lr.Name, mode.Name, outDT), func(t *testing.T) {
						r := lr.Make(t)
						in := newLinearIn(t, rng, sh, 1, true)
						in.flags, in.train, in.outDT = mode.Flags, true, outDT
						cpuOut := runLinear(t, newLayer(t, r, false, 1), cpu, in)
						gpuOut := runLinear(t, newLayer(t, r, false, 1), gpu, in)
						require.Equal(t, cpuOut.ctxInfo, gpuOut.ctxInfo, "what the contexts saved")
						checkLinear(t, r, in, 0, 0, m, gpuOut, cpuOut)
					})
				}
			}
		}
	}
}

func newLayer(t *testing.T, r host.Recipe, grouped bool, n int) *linear.Layer {
	t.Helper()
	l, err := linear.New(r, "fc1", grouped, n)
	require.NoError(t, err)
	t.Cleanup(l.Release)
	return l
}

// TestGroupedLinearMatchesCPU: a grouped layer on the GPU with ragged and
// empty groups, every recipe, the quantized and the dequantized backward;
// each group's rows against the reference and the CPU, and zero gradients
// for an empty group.
func TestGroupedLinearMatchesCPU(t *testing.T) {
	needGPU(t)
	rng := rand.New(rand.NewPCG(93, 94))
	for _, splits := range [][]int64{{7, 0, 45, 1}, {32, 0, 64, 32}} {
		var m int64
		for _, s := range splits {
			m += s
		}
		for _, lr := range lineartest.Recipes() {
			modes := lineartest.Modes()
			if lr.Delayed {
				modes = modes[:1]
			}
			for _, mode := range modes {
				if mode.Name != "none" && mode.Name != "dequantized" {
					continue
				}
				t.Run(fmt.Sprintf("%v/%s/%s", splits, lr.Name, mode.Name), func(t *testing.T) {
					r := lr.Make(t)
					in := newLinearIn(t, rng, []int64{m, linK}, len(splits), true)
					in.splits, in.flags, in.train = splits, mode.Flags, true
					cpuOut := runLinear(t, newLayer(t, r, true, len(splits)), cpu, in)
					gpuOut := runLinear(t, newLayer(t, r, true, len(splits)), gpu, in)
					var r0 int64
					for g, n := range splits {
						if n == 0 {
							require.Equal(t, make([]float32, linN*linK), hosttest.Values(gpuOut.dw[g]), "gemm %d: zero rows give a zero weight gradient", g)
							require.Equal(t, make([]float32, linN), hosttest.Values(gpuOut.db[g]), "gemm %d: zero rows give a zero bias gradient", g)
							continue
						}
						t.Run(fmt.Sprintf("gemm%d", g), func(t *testing.T) { checkLinear(t, r, in, g, r0, n, gpuOut, cpuOut) })
						r0 += n
					}
				})
			}
		}
	}
}

// TestLinearTrainInferAlternationOnGPU runs TE's training-loop stages (spec
// §10) on one GPU layer whose quantized weight persists, the weight updated
// in place after each training step: every step's output and gradients equal
// those of a freshly built GPU layer on the same tensors bit for bit (the
// same kernels on the same shapes), the cached weight keeps its buffers and
// its usages never shrink.
func TestLinearTrainInferAlternationOnGPU(t *testing.T) {
	needGPU(t)
	rng := rand.New(rand.NewPCG(95, 96))
	for _, lr := range lineartest.Recipes() {
		if lr.Delayed {
			continue // a fresh delayed-scaling quantizer has another history; TestLinearDelayedScalingOnGPU covers it
		}
		for _, stages := range [][]string{{"train", "infer", "train", "infer"}, {"infer", "train", "infer", "train"}} {
			t.Run(fmt.Sprintf("%s/%s_first", lr.Name, stages[0]), func(t *testing.T) {
				r := lr.Make(t)
				l := newLayer(t, r, false, 1)
				w := toGPU(t, hosttest.RandTensor(t, rng, host.Float32, 0.05, linN, linK)) // the parameter, updated in place
				b := toGPU(t, hosttest.RandTensor(t, rng, host.Float32, 0.5, linN))
				var usage host.Usage
				var addrs []uintptr
				for step, stage := range stages {
					train := stage == "train"
					x := toGPU(t, hosttest.RandTensor(t, rng, host.BFloat16, 1, 64, linK))
					dy := toGPU(t, hosttest.RandTensor(t, rng, host.BFloat16, 0.01, 64, linN))
					flags := linear.Flags{}
					if train {
						flags = lineartest.BothGrads
					}
					var got [2]map[string][]byte
					for i, layer := range []*linear.Layer{l, newLayer(t, r, false, 1)} {
						got[i] = stepBytes(t, layer, x, w, b, dy, flags, train)
					}
					require.Equal(t, got[1], got[0], "step %d (%s): outputs and gradients differ from a fresh layer's", step, stage)
					wq, ok, err := l.Weight(0)
					require.NoError(t, err)
					require.True(t, ok)
					require.True(t, wq.Usage().Has(usage), "step %d (%s): the quantized weight's usage shrank from %s to %s", step, stage, usage, wq.Usage())
					usage = wq.Usage()
					var a []uintptr
					for _, p := range hosttest.BufferAddrs(wq) {
						a = append(a, uintptr(p))
					}
					if addrs != nil && len(a) == len(addrs) {
						require.Equal(t, addrs, a, "step %d: the cached weight was re-quantized in place", step)
					}
					addrs = a
					if train {
						require.True(t, usage.Has(host.BothUsages), "step %d: training needs both directions", step)
						// The optimizer's in-place update: w += 0.01·dy-shaped noise.
						upd := toGPU(t, hosttest.RandTensor(t, rng, host.Float32, 0.01, linN, linK))
						require.NoError(t, host.CopyTensor(w, upd, 0))
						require.NoError(t, l.WeightUpdated(0))
					}
				}
			})
		}
	}
}

// stepBytes runs one step on GPU tensors and returns its outputs' bytes.
func stepBytes(t *testing.T, l *linear.Layer, x, w, b, dy host.Tensor, flags linear.Flags, train bool) map[string][]byte {
	t.Helper()
	y := poisoned(t, host.Float32, []int64{64, linN}, 0xff)
	ctx, err := l.Forward(&linear.ForwardArgs{Input: x, Weights: []host.Tensor{w}, Biases: []host.Tensor{b}, Output: y, Flags: flags}, train)
	require.NoError(t, err)
	out := map[string][]byte{"output": toCPU(t, y).Bytes8()}
	if !train {
		return out
	}
	defer ctx.Release()
	dx := poisoned(t, host.Float32, []int64{64, linK}, 0xff)
	dw := poisoned(t, host.Float32, []int64{linN, linK}, 0xff)
	db := poisoned(t, host.Float32, []int64{linN}, 0xff)
	require.NoError(t, ctx.Backward(&linear.BackwardArgs{GradOutput: dy, GradInput: &dx, GradWeights: []host.Tensor{dw}, GradBiases: []host.Tensor{db}}))
	out["grad_input"], out["grad_weight"], out["grad_bias"] = toCPU(t, dx).Bytes8(), toCPU(t, dw).Bytes8(), toCPU(t, db).Bytes8()
	return out
}

// TestLinearOverridesIgnoreSaveOriginalInputOnGPU: with the dequantized
// override the output and every gradient are bit-identical whatever
// save_original_input says (spec §9.5), and likewise with high_precision
// (§9.4), on the GPU.
func TestLinearOverridesIgnoreSaveOriginalInputOnGPU(t *testing.T) {
	needGPU(t)
	rng := rand.New(rand.NewPCG(97, 98))
	for _, lr := range lineartest.Recipes() {
		if lr.Delayed {
			continue
		}
		for _, o := range []linear.BackwardOverride{linear.BackwardDequantized, linear.BackwardHighPrecision} {
			t.Run(lr.Name+"/"+o.String(), func(t *testing.T) {
				r := lr.Make(t)
				x := toGPU(t, hosttest.RandTensor(t, rng, host.BFloat16, 1, 64, linK))
				w := toGPU(t, hosttest.RandTensor(t, rng, host.Float32, 0.05, linN, linK))
				b := toGPU(t, hosttest.RandTensor(t, rng, host.Float32, 0.5, linN))
				dy := toGPU(t, hosttest.RandTensor(t, rng, host.BFloat16, 0.01, 64, linN))
				var got [2]map[string][]byte
				for i, save := range []bool{false, true} {
					got[i] = stepBytes(t, newLayer(t, r, false, 1), x, w, b, dy, lineartest.WithFlags(lineartest.BothGrads, o, save), true)
				}
				require.Equal(t, got[0], got[1])
			})
		}
	}
}

// TestLinearDelayedScalingOnGPU trains one layer with FP8 delayed scaling on
// the GPU and one on the CPU for several steps, updating the forward state
// after forward and the backward state after backward (spec §2.4), once with
// "reduced" amaxes: the staged amaxes, every scale and history, and the
// cached quantized weight are bit-identical to the CPU's at every step (the
// state lives on the device in between), and each step's outputs match the
// float64 reference quantized with that step's scales, and the CPU's.
func TestLinearDelayedScalingOnGPU(t *testing.T) {
	needGPU(t)
	rng := rand.New(rand.NewPCG(99, 100))
	r := lineartest.Preset(host.RecipeConfig{Kind: host.RecipeFP8Delayed, AmaxHistoryLen: 3})(t)
	lc, lg := newLayer(t, r, false, 1), newLayer(t, r, false, 1)
	w := hosttest.RandTensor(t, rng, host.Float32, 0.05, linN, linK)
	roles := []linear.Tensor{linear.Input, linear.Weight, linear.GradOutput}
	for step := 0; step < 5; step++ {
		in := newLinearIn(t, rng, []int64{64, linK}, 1, true)
		in.ws[0] = w
		in.flags, in.train = lineartest.BothGrads, true
		// The GPU layer sees a new copy of w each step: tell both layers
		// to re-quantize it, with the step's weight scale.
		require.NoError(t, lc.WeightUpdated(0))
		require.NoError(t, lg.WeightUpdated(0))
		cpuOut := runLinear(t, lc, cpu, in)
		gpuOut := runLinear(t, lg, gpu, in)
		// The reference: quantizers of the roles' formats holding the
		// scales this step used (the CPU layer's, before the update).
		var ref [3]*host.Quantizer
		for i, tt := range roles {
			q, err := lc.Quantizer(tt, 0)
			require.NoError(t, err)
			el := host.ElementE4M3
			if tt == linear.GradOutput {
				el = host.ElementE5M2
			}
			ref[i] = hosttest.NewQuantizer(t, host.Params{Format: "fp8", Element: el, Scaling: host.ScalingDelayed, AmaxHistoryLen: 3}, host.BothUsages)
			ds, err := ref[i].DelayedState(host.DirRowwise)
			require.NoError(t, err)
			used, err := q.DelayedState(host.DirRowwise)
			require.NoError(t, err)
			copy(ds.Scale().Bytes8(), used.Scale().Bytes8())
			q.Release()
		}
		rr := fixedRecipe{"input": ref[0], "weight": ref[1], "grad_output": ref[2]}
		t.Run(fmt.Sprintf("step%d", step), func(t *testing.T) { checkLinear(t, rr, in, 0, 0, 64, gpuOut, cpuOut) })
		for _, p := range []linear.Pass{linear.PassForward, linear.PassBackward} {
			ac, err := lc.ScalingAmaxes(p)
			require.NoError(t, err)
			ag, err := lg.ScalingAmaxes(p)
			require.NoError(t, err)
			require.Equal(t, ac, ag, "step %d: staged amaxes of pass %d", step, p)
			var reduced []float32
			if step == 3 {
				for _, a := range ac {
					reduced = append(reduced, 2*a)
				}
			}
			require.NoError(t, lc.UpdateScaling(p, reduced))
			require.NoError(t, lg.UpdateScaling(p, reduced))
		}
		for _, tt := range roles {
			qc, err := lc.Quantizer(tt, 0)
			require.NoError(t, err)
			qg, err := lg.Quantizer(tt, 0)
			require.NoError(t, err)
			dc, dg := qc.DelayedStates(), qg.DelayedStates()
			require.Len(t, dg, len(dc))
			for i := range dc {
				require.NoError(t, dg[i].Fetch())
				require.Equal(t, dc[i].Scale().Bytes8(), dg[i].Scale().Bytes8(), "step %d: %s scale", step, tt)
				require.Equal(t, dc[i].AmaxHistory().Bytes8(), dg[i].AmaxHistory().Bytes8(), "step %d: %s history", step, tt)
			}
			qc.Release()
			qg.Release()
		}
		wc, _, err := lc.Weight(0)
		require.NoError(t, err)
		wg, _, err := lg.Weight(0)
		require.NoError(t, err)
		compareTensors(t, fmt.Sprintf("step %d: cached weight", step), wc, wg)
	}
}

// fixedRecipe gives every role of a tensor type the same quantizer, not a
// copy (a rule recipe's copies start with a fresh delayed-scaling state).
type fixedRecipe map[string]*host.Quantizer

func (f fixedRecipe) Quantizer(r host.Role) (*host.Quantizer, error) {
	q := f[r.TensorType]
	q.Retain()
	return q, nil
}

func (fixedRecipe) Release() {}
