package fakecuda

import (
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/host"
	"libquant/linear"
)

// BenchmarkLinearStepDispatch is the host's share of one linear layer step
// on "CUDA" tensors (forward + backward with both gradients, M 8192, K 4096,
// N 4096, no bias): the quantizes, the three GEMMs, the contexts and the
// allocations, with kernels that launch nothing. Memory is host memory
// (calloc), so allocation and memset costs are not the GPU's.
func BenchmarkLinearStepDispatch(b *testing.B) {
	load(b)
	for _, c := range []struct {
		name string
		kind host.RecipeKind
	}{{"fp8 current", host.RecipeFP8Current}, {"mxfp8", host.RecipeMXFP8}} {
		b.Run(c.name, func(b *testing.B) {
			r, err := host.NewPresetRecipe(host.RecipeConfig{Kind: c.kind})
			require.NoError(b, err)
			l, err := linear.New(r, "", false, 1)
			require.NoError(b, err)
			defer l.Release()
			dev := host.Device{Type: host.CUDA}
			const m, k, n = 8192, 4096, 4096
			alloc := func(shape ...int64) host.Tensor {
				t, err := host.AllocTensor(dev, host.BFloat16, shape, 0)
				require.NoError(b, err)
				b.Cleanup(func() { host.FreeTensor(t, 0) })
				return t
			}
			x, w, y, dy, dx, dw := alloc(m, k), alloc(n, k), alloc(m, n), alloc(m, n), alloc(m, k), alloc(n, k)
			step := func() {
				ctx, err := l.Forward(&linear.ForwardArgs{Input: x, Weights: []host.Tensor{w}, Output: y,
					Flags: linear.Flags{InputRequiresGrad: true, WeightRequiresGrad: true}}, true)
				require.NoError(b, err)
				require.NoError(b, ctx.Backward(&linear.BackwardArgs{GradOutput: dy, GradInput: &dx, GradWeights: []host.Tensor{dw}}))
				ctx.Release()
			}
			step()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				step()
			}
		})
	}
}
