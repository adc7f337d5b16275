package host_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/host"
	"libquant/host/hosttest"
	"libquant/plugins/nvfp4"
)

// The GEMM's Hadamard-domain check relies on the NVFP4 spec reporting its RHT.
var _ host.HadamardSpec = (*nvfp4.Spec)(nil)

// TestNVFP4RecipeMatchesPlugin reconciles the built-in NVFP4 recipe's per-role
// parameters (host/recipe.go, spec §5.1) with the ones the NVFP4 plugin
// publishes for the recipe layer (nvfp4.RoleParams).
func TestNVFP4RecipeMatchesPlugin(t *testing.T) {
	r, err := host.NewPresetRecipe(host.RecipeConfig{Kind: host.RecipeNVFP4})
	require.NoError(t, err)
	defer r.Release()
	for _, tt := range []string{"input", "weight", "grad_output"} {
		want, err := nvfp4.RoleParams(tt)
		require.NoError(t, err)
		q, err := r.Quantizer(host.Role{ModuleType: "linear", TensorType: tt})
		require.NoError(t, err)
		got := q.Spec(host.DirRowwise).Params()
		q.Release()
		wantSpec, err := host.NewSpec(want)
		require.NoError(t, err)
		require.Equal(t, wantSpec.Params(), got, "tensor_type %s", tt)
	}
}

// TestQuantizeIntoFailureKeepsSpecs: a re-quantize into reused buffers that
// fails (NVFP4's RHT needs BF16 input) leaves the tensor describing the bytes
// it still holds with the spec that made them.
func TestQuantizeIntoFailureKeepsSpecs(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	plain := hosttest.NewQuantizer(t, host.Params{Format: "nvfp4"}, host.BothUsages)
	rht := hosttest.NewQuantizer(t, host.Params{Format: "nvfp4", RHT: host.RHTDefault}, host.BothUsages)
	x := hosttest.RandTensor(t, rng, host.BFloat16, 1, 32, 64)
	dst := hosttest.Quantize(t, plain, x)
	err := rht.QuantizeInto(hosttest.RandTensor(t, rng, host.Float32, 1, 32, 64), host.QuantizeOptions{}, dst)
	require.Error(t, err)
	for _, d := range []host.Direction{host.DirRowwise, host.DirColumnwise} {
		st, ok := dst.Storage(d)
		require.True(t, ok)
		on, _ := st.Spec.(host.HadamardSpec).RHT()
		require.False(t, on, "%s storage took the failed quantizer's spec", d)
	}
}
