package host_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/host"
	"libquant/host/hosttest"
)

var (
	roleInput  = host.Role{ModuleType: "linear", TensorType: "input", Name: "fc1"}
	roleWeight = host.Role{ModuleType: "linear", TensorType: "weight", Name: "fc1"}
	roleGrad   = host.Role{ModuleType: "linear", TensorType: "grad_output", Name: "fc1"}
	roleOutput = host.Role{ModuleType: "linear", TensorType: "output", Name: "fc1"}
	roleGradIn = host.Role{ModuleType: "linear", TensorType: "grad_input", Name: "fc1"}
)

func recipeParams(t *testing.T, r host.Recipe, role host.Role) host.Params {
	t.Helper()
	q, err := r.Quantizer(role)
	require.NoError(t, err, "role %s", role)
	defer q.Release()
	require.False(t, q.IsHybrid())
	return q.Spec(host.DirRowwise).Params()
}

// TestPresetRecipes checks each built-in recipe's per-role quantizers against
// TE's recipe defaults (spec §2.1, §3.1, §4.1, §5.1, §6.1). A recipe whose
// format is not registered in this build must fail naming the format.
func TestPresetRecipes(t *testing.T) {
	type want struct {
		role host.Role
		p    host.Params
	}
	nvfp4Act := host.Params{Format: "nvfp4", RHT: host.RHTDefault}
	cases := []struct {
		name  string
		cfg   host.RecipeConfig
		wants []want
	}{
		{"fp8_delayed", host.RecipeConfig{Kind: host.RecipeFP8Delayed, AmaxHistoryLen: 16, Margin: 1}, []want{
			{roleInput, host.Params{Format: "fp8", Element: host.ElementE4M3, Scaling: host.ScalingDelayed, AmaxHistoryLen: 16, Margin: 1}},
			{roleWeight, host.Params{Format: "fp8", Element: host.ElementE4M3, Scaling: host.ScalingDelayed, AmaxHistoryLen: 16, Margin: 1}},
			{roleOutput, host.Params{Format: "fp8", Element: host.ElementE4M3, Scaling: host.ScalingDelayed, AmaxHistoryLen: 16, Margin: 1}},
			{roleGrad, host.Params{Format: "fp8", Element: host.ElementE5M2, Scaling: host.ScalingDelayed, AmaxHistoryLen: 16, Margin: 1}},
			{roleGradIn, host.Params{Format: "fp8", Element: host.ElementE5M2, Scaling: host.ScalingDelayed, AmaxHistoryLen: 16, Margin: 1}},
		}},
		{"fp8_current_e4m3", host.RecipeConfig{Kind: host.RecipeFP8Current, FP8Format: host.FP8FormatE4M3, ForcePow2Scales: true}, []want{
			{roleInput, host.Params{Format: "fp8", Element: host.ElementE4M3, ForcePow2Scales: true}},
			{roleGrad, host.Params{Format: "fp8", Element: host.ElementE4M3, ForcePow2Scales: true}},
		}},
		{"fp8_current", host.RecipeConfig{Kind: host.RecipeFP8Current}, []want{
			{roleWeight, host.Params{Format: "fp8", Element: host.ElementE4M3}},
			{roleGrad, host.Params{Format: "fp8", Element: host.ElementE5M2}},
		}},
		{"fp8_block", host.RecipeConfig{Kind: host.RecipeFP8Block}, []want{
			{roleInput, host.Params{Format: "fp8_block", Element: host.ElementE4M3, BlockDims: 1}},
			{roleWeight, host.Params{Format: "fp8_block", Element: host.ElementE4M3, BlockDims: 2}},
			{roleGrad, host.Params{Format: "fp8_block", Element: host.ElementE4M3, BlockDims: 1}},
		}},
		{"mxfp8", host.RecipeConfig{Kind: host.RecipeMXFP8}, []want{
			{roleInput, host.Params{Format: "mxfp8", Element: host.ElementE4M3}},
			{roleGrad, host.Params{Format: "mxfp8", Element: host.ElementE4M3}},
		}},
		{"mxfp8_hybrid", host.RecipeConfig{Kind: host.RecipeMXFP8, FP8Format: host.FP8FormatHybrid}, []want{
			{roleWeight, host.Params{Format: "mxfp8", Element: host.ElementE4M3}},
			{roleGrad, host.Params{Format: "mxfp8", Element: host.ElementE5M2}},
		}},
		{"nvfp4", host.RecipeConfig{Kind: host.RecipeNVFP4, Seed: 7}, []want{
			{roleInput, nvfp4Act},
			{roleOutput, nvfp4Act},
			{roleWeight, host.Params{Format: "nvfp4", BlockDims: 2}},
			{roleGrad, host.Params{Format: "nvfp4", RHT: host.RHTDefault, StochasticRounding: true, Seed: 7}},
		}},
		{"nvfp4_disabled", host.RecipeConfig{Kind: host.RecipeNVFP4, DisableRHT: true, DisableStochasticRounding: true, Disable2DQuantization: true}, []want{
			{roleInput, host.Params{Format: "nvfp4"}},
			{roleWeight, host.Params{Format: "nvfp4"}},
			{roleGrad, host.Params{Format: "nvfp4"}},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := host.NewPresetRecipe(c.cfg)
			if format := c.wants[0].p.Format; len(registered(format)) > 0 {
				require.ErrorIs(t, err, host.ErrUnsupported)
				require.ErrorContains(t, err, format)
				t.Skipf("format %s is not registered in this build", format)
			}
			require.NoError(t, err)
			defer r.Release()
			for _, w := range c.wants {
				got := recipeParams(t, r, w.role)
				// Compare the fields the recipe sets; the format fills its own
				// defaults (block_dims 0 means 1-D blocks).
				require.Equal(t, w.p.Format, got.Format, "role %s", w.role)
				if w.p.Element != host.ElementDefault {
					require.Equal(t, w.p.Element, got.Element, "role %s element", w.role)
				}
				require.Equal(t, w.p.Scaling, got.Scaling, "role %s scaling", w.role)
				require.Equal(t, max(w.p.BlockDims, 1), max(got.BlockDims, 1), "role %s block_dims", w.role)
				require.Equal(t, w.p.RHT, got.RHT, "role %s rht", w.role)
				require.Equal(t, w.p.StochasticRounding, got.StochasticRounding, "role %s stochastic rounding", w.role)
				require.Equal(t, w.p.Seed, got.Seed, "role %s seed", w.role)
				require.Equal(t, w.p.ForcePow2Scales, got.ForcePow2Scales, "role %s pow2", w.role)
				require.Equal(t, w.p.Margin, got.Margin, "role %s margin", w.role)
			}
			_, err = r.Quantizer(host.Role{ModuleType: "linear", TensorType: "bias"})
			require.ErrorIs(t, err, host.ErrInvalidArgument)
			require.ErrorContains(t, err, `tensor_type "bias"`)
		})
	}
	_, err := host.NewPresetRecipe(host.RecipeConfig{Kind: 9})
	require.ErrorContains(t, err, "config.kind")
	_, err = host.NewPresetRecipe(host.RecipeConfig{Kind: host.RecipeNVFP4, FP8Format: host.FP8FormatHybrid})
	require.ErrorContains(t, err, "config.fp8_format")
}

// TestRuleRecipe: the first matching rule wins, empty fields match anything,
// each lookup gets a clone with its own state, and no match names the role.
func TestRuleRecipe(t *testing.T) {
	fc2W := hosttest.NewQuantizer(t, host.Params{Format: "identity"}, host.Rowwise)
	delayed := hosttest.NewQuantizer(t, host.Params{Format: "fp8", Scaling: host.ScalingDelayed, AmaxHistoryLen: 8}, 0)
	grad := hosttest.NewQuantizer(t, host.Params{Format: "fp8", Element: host.ElementE5M2}, 0)
	hyb := hosttest.NewHybrid(t, host.Params{Format: "fp8"}, host.Params{Format: "identity"}, host.SourceRowwiseDequantized)
	r, err := host.NewRuleRecipe([]host.Rule{
		{Pattern: host.Role{TensorType: "weight", Name: "fc2"}, Quantizer: fc2W},
		{Pattern: host.Role{TensorType: "grad_output"}, Quantizer: grad},
		{Pattern: host.Role{ModuleType: "linear", TensorType: "input"}, Quantizer: hyb},
		{Pattern: host.Role{ModuleType: "linear"}, Quantizer: delayed},
	})
	require.NoError(t, err)
	defer r.Release()
	get := func(role host.Role) *host.Quantizer {
		q, err := r.Quantizer(role)
		require.NoError(t, err, "role %s", role)
		t.Cleanup(q.Release)
		return q
	}
	require.Equal(t, "identity", get(host.Role{ModuleType: "linear", TensorType: "weight", Name: "fc2"}).Spec(host.DirRowwise).Params().Format)
	require.Equal(t, host.Rowwise, get(host.Role{ModuleType: "linear", TensorType: "weight", Name: "fc2"}).Usage(), "the clone keeps the template's usage")
	require.Equal(t, host.ElementE5M2, get(host.Role{ModuleType: "dpa", TensorType: "grad_output"}).Spec(host.DirRowwise).Params().Element)
	h := get(roleInput)
	require.True(t, h.IsHybrid())
	require.Equal(t, host.SourceRowwiseDequantized, h.ColumnwiseSource())
	require.Equal(t, "identity", h.Spec(host.DirColumnwise).Params().Format)
	w1, w2 := get(roleWeight), get(host.Role{ModuleType: "linear", TensorType: "weight", Name: "fc3"})
	s1, err := w1.DelayedState(host.DirRowwise)
	require.NoError(t, err)
	s2, err := w2.DelayedState(host.DirRowwise)
	require.NoError(t, err)
	require.NotEqual(t, s1.Scale().Ptr, s2.Scale().Ptr, "each role's clone has its own delayed-scaling state")

	_, err = r.Quantizer(host.Role{ModuleType: "dpa", TensorType: "qkv", Name: "attn"})
	require.ErrorIs(t, err, host.ErrInvalidArgument)
	require.ErrorContains(t, err, `module_type "dpa", tensor_type "qkv", name "attn"`)

	_, err = host.NewRuleRecipe(nil)
	require.ErrorContains(t, err, "rules")
	_, err = host.NewRuleRecipe([]host.Rule{{Pattern: host.Role{}, Quantizer: nil}})
	require.ErrorContains(t, err, "rules[0].quantizer")
}

// TestFuncRecipe: a factory's quantizer is handed out; nil and errors are
// reported naming the role.
func TestFuncRecipe(t *testing.T) {
	released := false
	r, err := host.NewFuncRecipe(func(role host.Role) (*host.Quantizer, error) {
		switch role.TensorType {
		case "weight":
			return host.NewQuantizer(host.Params{Format: "fp8"}, 0)
		case "input":
			return nil, nil
		}
		return nil, errors.New("no such role here")
	}, func() { released = true })
	require.NoError(t, err)
	q, err := r.Quantizer(roleWeight)
	require.NoError(t, err)
	q.Release()
	_, err = r.Quantizer(roleInput)
	require.ErrorIs(t, err, host.ErrInvalidArgument)
	require.ErrorContains(t, err, `tensor_type "input"`)
	require.ErrorContains(t, err, "identity")
	_, err = r.Quantizer(roleGrad)
	require.ErrorContains(t, err, "no such role")
	r.Release()
	require.True(t, released)
	_, err = host.NewFuncRecipe(nil, nil)
	require.ErrorContains(t, err, "factory")
}
