package host

import (
	"fmt"
	"sync"
)

// Role names a quantizer slot (spec §8.2, TE's QuantizerRole): the module type
// ("linear", "grouped_linear", "dpa"), the tensor type ("input", "weight",
// "output", "grad_output", "grad_input"; "qkv", "s", "do", "dp" for dpa) and a
// free-form name ("fc1", "qkv_proj", ...).
type Role struct {
	ModuleType, TensorType, Name string
}

func (r Role) String() string {
	return fmt.Sprintf("(module_type %q, tensor_type %q, name %q)", r.ModuleType, r.TensorType, r.Name)
}

// Matches reports whether r matches pattern: every non-empty pattern field
// equals r's.
func (r Role) Matches(pattern Role) bool {
	return (pattern.ModuleType == "" || pattern.ModuleType == r.ModuleType) &&
		(pattern.TensorType == "" || pattern.TensorType == r.TensorType) &&
		(pattern.Name == "" || pattern.Name == r.Name)
}

// Recipe picks the quantizer of each role (spec §8.1). Returning no quantizer
// is an error: identity is the explicit way to keep a role in high precision.
type Recipe interface {
	// Quantizer returns a new quantizer for role, owned by the caller (Release).
	Quantizer(role Role) (*Quantizer, error)
	// Release frees what the recipe holds.
	Release()
}

// RecipeKind selects a built-in recipe.
type RecipeKind int32

const (
	RecipeFP8Delayed RecipeKind = 1 // per-tensor FP8, delayed scaling (spec §2)
	RecipeFP8Current RecipeKind = 2 // per-tensor FP8, current scaling (spec §3)
	RecipeFP8Block   RecipeKind = 3 // FP8 1×128 activations and grads, 128×128 weights (spec §6)
	RecipeMXFP8      RecipeKind = 4 // MXFP8 1×32 / 32×1 (spec §4)
	RecipeNVFP4      RecipeKind = 5 // NVFP4 with per-role RHT, SR and 2-D weights (spec §5.1)
)

func (k RecipeKind) String() string {
	switch k {
	case RecipeFP8Delayed:
		return "fp8_delayed"
	case RecipeFP8Current:
		return "fp8_current"
	case RecipeFP8Block:
		return "fp8_block"
	case RecipeMXFP8:
		return "mxfp8"
	case RecipeNVFP4:
		return "nvfp4"
	}
	return fmt.Sprintf("recipe(%d)", int32(k))
}

// FP8Format is a recipe's FP8 element choice (spec §1.3 Format).
type FP8Format int32

const (
	FP8FormatDefault FP8Format = 0 // HYBRID for the per-tensor recipes, E4M3 for MXFP8 and FP8 block
	FP8FormatE4M3    FP8Format = 1 // E4M3 everywhere
	FP8FormatHybrid  FP8Format = 2 // E4M3 forward, E5M2 backward (grad_output, grad_input)
)

// RecipeConfig configures a built-in recipe; zero fields take TE's defaults.
type RecipeConfig struct {
	Kind      RecipeKind
	FP8Format FP8Format
	// FP8 delayed scaling (spec §2.1).
	Margin         float32
	AmaxHistoryLen int32 // 0: 1024
	AmaxAlgo       AmaxAlgo
	// FP8 current scaling (spec §3.1): power-of-two scales, amax floor.
	ForcePow2Scales bool
	AmaxEpsilon     float32
	// FP8 block scaling (spec §6.1): FP32 scales instead of powers of two.
	FP32Scales bool
	// NVFP4 (spec §5.1, NVTE_NVFP4_DISABLE_*): turn a per-role feature off.
	DisableRHT                bool
	DisableStochasticRounding bool
	Disable2DQuantization     bool
	Seed, Offset              uint64 // stochastic rounding stream
}

// tensorClass is how built-in recipes treat a tensor type.
type tensorClass int

const (
	classActivation tensorClass = iota // forward, not a weight
	classWeight
	classGrad // backward
)

func classOf(role Role) (tensorClass, error) {
	switch role.TensorType {
	case "input", "output", "qkv", "s":
		return classActivation, nil
	case "weight":
		return classWeight, nil
	case "grad_output", "grad_input", "do", "dp":
		return classGrad, nil
	}
	return 0, Errorf(ErrInvalidArgument, "role %s: tensor_type %q is not one a built-in recipe knows (input, weight, output, grad_output, grad_input; qkv, s, do, dp)", role, role.TensorType)
}

type presetRecipe struct{ cfg RecipeConfig }

// NewPresetRecipe builds a built-in recipe. It checks the configuration by
// building the quantizer spec of each tensor class once, so that a format that
// is not registered or a setting it rejects fails here, naming it.
func NewPresetRecipe(cfg RecipeConfig) (Recipe, error) {
	r := &presetRecipe{cfg: cfg}
	if cfg.Kind < RecipeFP8Delayed || cfg.Kind > RecipeNVFP4 {
		return nil, Errorf(ErrInvalidArgument, "config.kind: %d is not a built-in recipe (fp8_delayed 1 .. nvfp4 5)", int32(cfg.Kind))
	}
	switch cfg.FP8Format {
	case FP8FormatDefault, FP8FormatE4M3, FP8FormatHybrid:
	default:
		return nil, Errorf(ErrInvalidArgument, "config.fp8_format: %d is not default (0), e4m3 (1) or hybrid (2)", int32(cfg.FP8Format))
	}
	if cfg.Kind == RecipeNVFP4 && cfg.FP8Format != FP8FormatDefault {
		return nil, Errorf(ErrInvalidArgument, "config.fp8_format: nvfp4 uses E2M1 elements with E4M3 scales (spec §5.1); leave it zero")
	}
	for _, c := range []tensorClass{classActivation, classWeight, classGrad} {
		if _, err := NewSpec(r.params(c)); err != nil {
			return nil, fmt.Errorf("recipe %s: %w", cfg.Kind, err)
		}
	}
	return r, nil
}

// params is the quantizer configuration of a tensor class.
func (r *presetRecipe) params(c tensorClass) Params {
	cfg := r.cfg
	elem := ElementE4M3
	hybrid := cfg.FP8Format == FP8FormatHybrid ||
		(cfg.FP8Format == FP8FormatDefault && (cfg.Kind == RecipeFP8Delayed || cfg.Kind == RecipeFP8Current))
	if c == classGrad && hybrid {
		elem = ElementE5M2
	}
	switch cfg.Kind {
	case RecipeFP8Delayed:
		return Params{Format: "fp8", Element: elem, Scaling: ScalingDelayed, Margin: cfg.Margin,
			AmaxHistoryLen: cfg.AmaxHistoryLen, AmaxAlgo: cfg.AmaxAlgo}
	case RecipeFP8Current:
		return Params{Format: "fp8", Element: elem, ForcePow2Scales: cfg.ForcePow2Scales, AmaxEpsilon: cfg.AmaxEpsilon}
	case RecipeFP8Block:
		dims := int32(1) // x_block_scaling_dim, grad_block_scaling_dim
		if c == classWeight {
			dims = 2 // w_block_scaling_dim
		}
		return Params{Format: "fp8_block", Element: elem, BlockDims: dims, FP32Scales: cfg.FP32Scales, AmaxEpsilon: cfg.AmaxEpsilon}
	case RecipeMXFP8:
		return Params{Format: "mxfp8", Element: elem}
	}
	// NVFP4 (spec §5.1): inputs RHT; weights 16×16 blocks; grads RHT and
	// stochastic rounding.
	p := Params{Format: "nvfp4"}
	if c != classWeight && !cfg.DisableRHT {
		p.RHT = RHTDefault
	}
	if c == classWeight && !cfg.Disable2DQuantization {
		p.BlockDims = 2
	}
	if c == classGrad && !cfg.DisableStochasticRounding {
		p.StochasticRounding = true
		p.Seed, p.Offset = cfg.Seed, cfg.Offset
	}
	return p
}

func (r *presetRecipe) Quantizer(role Role) (*Quantizer, error) {
	c, err := classOf(role)
	if err != nil {
		return nil, err
	}
	q, err := NewQuantizer(r.params(c), BothUsages)
	if err != nil {
		return nil, fmt.Errorf("role %s: %w", role, err)
	}
	return q, nil
}

func (r *presetRecipe) Release() {}

// funcRecipe is a custom recipe backed by a factory function (spec §8.1 qfactory).
type funcRecipe struct {
	f       func(Role) (*Quantizer, error)
	release func()
}

// NewFuncRecipe wraps a factory: f returns a new quantizer for a role (owned by
// the caller of Quantizer), or an error. release, if not nil, runs on Release.
func NewFuncRecipe(f func(Role) (*Quantizer, error), release func()) (Recipe, error) {
	if f == nil {
		return nil, Errorf(ErrInvalidArgument, "factory: is NULL")
	}
	return &funcRecipe{f: f, release: release}, nil
}

func (r *funcRecipe) Quantizer(role Role) (*Quantizer, error) {
	q, err := r.f(role)
	if err != nil {
		return nil, err
	}
	if q == nil {
		return nil, Errorf(ErrInvalidArgument, "role %s: the recipe's factory returned no quantizer; return an identity quantizer to keep a role in high precision", role)
	}
	return q, nil
}

func (r *funcRecipe) Release() {
	if r.release != nil {
		r.release()
	}
}

// Rule maps the roles matching Pattern (empty fields match anything) to a
// quantizer template.
type Rule struct {
	Pattern   Role
	Quantizer *Quantizer
}

type ruleRecipe struct {
	once  sync.Once
	rules []Rule
}

// NewRuleRecipe builds a declarative recipe: the first rule whose pattern
// matches a role gives it a clone of the rule's quantizer (same specs and
// usage, its own state); no match is an error naming the role. The recipe
// keeps its own reference to each template.
func NewRuleRecipe(rules []Rule) (Recipe, error) {
	if len(rules) == 0 {
		return nil, Errorf(ErrInvalidArgument, "rules: the table is empty")
	}
	for i, r := range rules {
		if r.Quantizer == nil {
			return nil, Errorf(ErrInvalidArgument, "rules[%d].quantizer: is NULL; use an identity quantizer to keep matching roles in high precision", i)
		}
	}
	rr := &ruleRecipe{rules: append([]Rule(nil), rules...)}
	for _, r := range rr.rules {
		r.Quantizer.Retain()
	}
	return rr, nil
}

func (r *ruleRecipe) Quantizer(role Role) (*Quantizer, error) {
	for _, rule := range r.rules {
		if role.Matches(rule.Pattern) {
			return rule.Quantizer.Clone()
		}
	}
	return nil, Errorf(ErrInvalidArgument, "role %s: no rule of the recipe's %d matches it", role, len(r.rules))
}

func (r *ruleRecipe) Release() {
	r.once.Do(func() {
		for _, rule := range r.rules {
			rule.Quantizer.Release()
		}
	})
}
