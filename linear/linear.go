package linear

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"libquant/host"
)

// BackwardOverride selects how a linear layer's backward pass runs (spec §9).
type BackwardOverride int32

const (
	// BackwardQuantized (TE's None): backward quantizes grad_output and
	// multiplies it with the saved quantized input and weight.
	BackwardQuantized BackwardOverride = 0
	// BackwardHighPrecision: the forward saves the original input and weight
	// and backward multiplies them with the unquantized grad_output (§9.4).
	BackwardHighPrecision BackwardOverride = 1
	// BackwardDequantized: the forward saves the rowwise forward-quantized
	// input and weight and backward multiplies their dequantized values with
	// the unquantized grad_output (§9.5).
	BackwardDequantized BackwardOverride = 2
)

func (o BackwardOverride) String() string {
	switch o {
	case BackwardQuantized:
		return "none"
	case BackwardHighPrecision:
		return "high_precision"
	case BackwardDequantized:
		return "dequantized"
	}
	return fmt.Sprintf("backward_override(%d)", int32(o))
}

// Tensor indexes the quantizer roles of a linear layer (spec §8.2).
type Tensor int

const (
	Input Tensor = iota
	Weight
	GradOutput
)

var tensorTypes = [3]string{"input", "weight", "grad_output"}

func (t Tensor) String() string { return tensorTypes[t] }

// TensorOf maps a role's tensor_type to its Tensor.
func TensorOf(tensorType string) (Tensor, error) {
	for i, s := range tensorTypes {
		if s == tensorType {
			return Tensor(i), nil
		}
	}
	return 0, host.Errorf(host.ErrInvalidArgument, "tensor_type: %q is not a linear layer's (input, weight or grad_output)", tensorType)
}

// Layer is the quantization state of one linear or grouped linear layer, as
// TransformerEngine's module keeps it: a quantizer per role and GEMM (their
// delayed-scaling state lives across steps) and the quantized weight of each
// GEMM, a persistent tensor re-quantized in place when the caller says the
// weight changed (WeightUpdated), whose usages never shrink (spec §10).
//
// Forward computes Y = X·Wᵀ + b (per group of rows for a grouped layer) and
// returns a Context holding what the backward pass needs; the layer
// itself holds no per-step activations.
type Layer struct {
	mu         sync.Mutex
	grouped    bool
	quantizers [3][]*host.Quantizer // [Tensor][gemm]
	weights    []weightCache
	released   bool
}

// weightCache is a GEMM's quantized weight and what it was quantized from.
type weightCache struct {
	t     *sharedQTensor
	src   host.Tensor // pointer, dtype, shape and device of the weight (no ownership)
	stale bool
}

// sharedQTensor is a quantized tensor referenced by a layer and by the
// contexts that saved it for backward; the last reference frees it.
type sharedQTensor struct {
	t    *host.QTensor
	refs atomic.Int32
	// borrowed: the caller's tensor (ForwardArgs.WeightQ), never freed here
	borrowed bool
	// stream: the last stream that read or wrote t; the free is ordered on it
	stream atomic.Uintptr
}

func newShared(t *host.QTensor) *sharedQTensor {
	s := &sharedQTensor{t: t}
	s.refs.Store(1)
	return s
}

func (s *sharedQTensor) retain() *sharedQTensor { s.refs.Add(1); return s }

// use records that work on stream reads or writes the tensor.
func (s *sharedQTensor) use(stream uintptr) { s.stream.Store(stream) }

func (s *sharedQTensor) release() {
	if s.refs.Add(-1) == 0 && !s.borrowed {
		s.t.FreeOn(s.stream.Load())
	}
}

func moduleType(grouped bool) string {
	if grouped {
		return "grouped_linear"
	}
	return "linear"
}

// New builds a layer whose quantizers come from r, one per role and
// GEMM: module_type "linear" (or "grouped_linear" when grouped), tensor_type
// "input", "weight" and "grad_output", and name. A plain layer has one GEMM;
// a grouped one numGEMMs ≥ 1 (numGEMMs must be 1 when not grouped).
func New(r host.Recipe, name string, grouped bool, numGEMMs int) (*Layer, error) {
	if r == nil {
		return nil, host.Errorf(host.ErrInvalidArgument, "recipe: is NULL")
	}
	if err := checkNumGEMMs(grouped, numGEMMs); err != nil {
		return nil, err
	}
	var qs [3][]*host.Quantizer
	l := &Layer{grouped: grouped, weights: make([]weightCache, numGEMMs)}
	for t := range qs {
		role := host.Role{ModuleType: moduleType(grouped), TensorType: tensorTypes[t], Name: name}
		for g := 0; g < numGEMMs; g++ {
			q, err := r.Quantizer(role)
			if err != nil {
				l.quantizers = qs
				l.Release()
				return nil, fmt.Errorf("recipe: %w", err)
			}
			qs[t] = append(qs[t], q)
		}
	}
	l.quantizers = qs
	return l, nil
}

// NewWithQuantizers builds a layer over the caller's quantizers, one
// per GEMM for each role (the layer keeps its own references, so the caller
// can read and update their delayed-scaling state through its own).
func NewWithQuantizers(grouped bool, input, weight, gradOutput []*host.Quantizer) (*Layer, error) {
	n := len(input)
	if err := checkNumGEMMs(grouped, n); err != nil {
		return nil, err
	}
	l := &Layer{grouped: grouped, weights: make([]weightCache, n)}
	for t, qs := range [3][]*host.Quantizer{input, weight, gradOutput} {
		if len(qs) != n {
			return nil, host.Errorf(host.ErrInvalidArgument, "%s_quantizers: %d given, want one per GEMM (%d)", tensorTypes[t], len(qs), n)
		}
		for g, q := range qs {
			if q == nil {
				return nil, host.Errorf(host.ErrInvalidArgument, "%s_quantizers[%d]: is NULL", tensorTypes[t], g)
			}
		}
	}
	for t, qs := range [3][]*host.Quantizer{input, weight, gradOutput} {
		for _, q := range qs {
			q.Retain()
		}
		l.quantizers[t] = append([]*host.Quantizer(nil), qs...)
	}
	return l, nil
}

func checkNumGEMMs(grouped bool, n int) error {
	switch {
	case grouped && (n < 1 || n > 1<<16):
		return host.Errorf(host.ErrInvalidArgument, "num_gemms: %d (want 1..65536 for a grouped layer)", n)
	case !grouped && n != 1:
		return host.Errorf(host.ErrInvalidArgument, "num_gemms: %d for a plain linear layer (it has one GEMM)", n)
	}
	return nil
}

// Grouped reports whether the layer is a grouped linear layer.
func (l *Layer) Grouped() bool { return l.grouped }

// NumGEMMs is the number of GEMMs (groups) of the layer.
func (l *Layer) NumGEMMs() int { return len(l.weights) }

// Release drops the layer's quantizers and quantized weights. Contexts of
// earlier forwards keep what they reference and stay usable.
func (l *Layer) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return
	}
	l.released = true
	for _, qs := range l.quantizers {
		for _, q := range qs {
			q.Release()
		}
	}
	for i := range l.weights {
		if l.weights[i].t != nil {
			l.weights[i].t.release()
			l.weights[i].t = nil
		}
	}
}

func (l *Layer) checkGEMM(g int) error {
	if g < 0 || g >= len(l.weights) {
		return host.Errorf(host.ErrInvalidArgument, "gemm: %d out of range (the layer has %d)", g, len(l.weights))
	}
	return nil
}

// Quantizer returns a new reference to the layer's quantizer of a role and
// GEMM (Release it); it shares the layer's state.
func (l *Layer) Quantizer(t Tensor, g int) (*host.Quantizer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkLive(); err != nil {
		return nil, err
	}
	if t < Input || t > GradOutput {
		return nil, host.Errorf(host.ErrInvalidArgument, "tensor: %d is not input, weight or grad_output", int(t))
	}
	if err := l.checkGEMM(g); err != nil {
		return nil, err
	}
	q := l.quantizers[t][g]
	q.Retain()
	return q, nil
}

func (l *Layer) checkLive() error {
	if l.released {
		return host.Errorf(host.ErrState, "layer: released")
	}
	return nil
}

// WeightUpdated tells the layer that the high-precision weight of GEMM g (all
// of them for g < 0) changed in place: the next forward re-quantizes it into
// the same buffers. A weight passed at another address, dtype or shape is
// re-quantized without being told.
func (l *Layer) WeightUpdated(g int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkLive(); err != nil {
		return err
	}
	if g >= 0 {
		if err := l.checkGEMM(g); err != nil {
			return err
		}
		l.weights[g].stale = true
		return nil
	}
	for i := range l.weights {
		l.weights[i].stale = true
	}
	return nil
}

// Weight returns the quantized weight of GEMM g, or false before the first
// forward that needed it. The tensor belongs to the layer: read it, do not
// free it, and do not keep it past the next forward.
func (l *Layer) Weight(g int) (*host.QTensor, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkLive(); err != nil {
		return nil, false, err
	}
	if err := l.checkGEMM(g); err != nil {
		return nil, false, err
	}
	if c := l.weights[g].t; c != nil {
		return c.t, true, nil
	}
	return nil, false, nil
}

// quantizedWeight returns GEMM g's quantized weight holding at least usage,
// re-quantizing it when it is missing, stale, from another tensor, or lacks a
// direction. The cache is persistent: a re-quantize refreshes every direction
// it holds and adds the new ones, so its usages never shrink (spec §10). It
// happens in place unless a context still holds the old values for its
// backward pass, which then keeps them (copy on write).
func (l *Layer) quantizedWeight(g int, w host.Tensor, usage host.Usage, amax *host.Tensor, stream uintptr) (*sharedQTensor, error) {
	c := &l.weights[g]
	if c.t != nil && !c.stale && sameTensor(c.src, w) && c.t.t.Usage().Has(usage) {
		c.t.use(stream)
		return c.t, nil
	}
	q := l.quantizers[Weight][g]
	opts := host.QuantizeOptions{Stream: stream, Persistent: true, AmaxIn: amax}
	if c.t != nil && c.t.refs.Load() == 1 && slices.Equal(c.src.Shape, w.Shape) {
		c.t.use(stream)
		if err := q.QuantizeIntoUsage(w, opts, c.t.t, usage); err != nil {
			return nil, err
		}
	} else {
		if c.t != nil {
			usage |= c.t.t.Usage()
		}
		t, err := q.QuantizeUsage(w, opts, usage)
		if err != nil {
			return nil, err
		}
		if c.t != nil {
			c.t.release()
		}
		c.t = newShared(t)
		c.t.use(stream)
	}
	c.src = host.Tensor{Ptr: w.Ptr, DType: w.DType, Shape: append([]int64(nil), w.Shape...), Device: w.Device}
	c.stale = false
	return c.t, nil
}

func sameTensor(a, b host.Tensor) bool {
	return a.Ptr == b.Ptr && a.DType == b.DType && a.Device == b.Device && slices.Equal(a.Shape, b.Shape)
}

// Flags are a forward call's training settings.
type Flags struct {
	BackwardOverride BackwardOverride
	// SaveOriginalInput keeps the high-precision input for backward and
	// quantizes it there (columnwise) instead of keeping its columnwise
	// quantized form (spec §9.6). Forced on by high_precision, off by
	// dequantized.
	SaveOriginalInput  bool
	InputRequiresGrad  bool // backward computes grad_input (dgrad)
	WeightRequiresGrad bool // backward computes grad_weight (wgrad)
}

// ForwardArgs is one forward call. A plain layer takes one weight and
// no MSplits; a grouped one a weight per GEMM and the row count of each.
type ForwardArgs struct {
	Input   host.Tensor   // [..., K]: FP32, BF16 or FP16
	Weights []host.Tensor // [N, K] each
	Biases  []host.Tensor // nil, or [N] each
	MSplits []int64       // grouped: rows of each GEMM, summing to the input's M
	Output  host.Tensor   // [..., N] (the input's leading dims)
	Flags   Flags
	Stream  uintptr
	// InputAmax and WeightAmax are nil, or one entry per GEMM (nil entries
	// allowed): an FP32 [2] amax (rowwise, columnwise) the input / weight
	// quantizer uses instead of computing it (current scaling reduced
	// across processes, spec §2.3). The weight's is used only when the layer
	// (re-)quantizes the weight.
	InputAmax, WeightAmax []*host.Tensor
	// WeightQ is nil, or one caller-quantized weight [N, K] per GEMM used
	// instead of quantizing Weights (which must then be nil): a parameter
	// held only in quantized form (TransformerEngine's quantized_model_init).
	// The layer does not cache or change it; a context reads it in backward.
	WeightQ []*host.QTensor
}

// BackwardArgs is one backward call; a nil output is not computed.
type BackwardArgs struct {
	GradOutput  host.Tensor   // the output's shape
	GradInput   *host.Tensor  // the input's shape
	GradWeights []host.Tensor // nil, or [N, K] per GEMM
	GradBiases  []host.Tensor // nil, or [N] per GEMM
	Stream      uintptr
	// GradOutputAmax is nil, or one FP32 [2] amax per GEMM (nil entries
	// allowed) the grad_output quantizer uses instead of computing it.
	GradOutputAmax []*host.Tensor
}

// effectiveFlags validates f and applies the overrides (spec §9.4-§9.6).
func (l *Layer) effectiveFlags(f Flags) (Flags, error) {
	switch f.BackwardOverride {
	case BackwardQuantized, BackwardHighPrecision, BackwardDequantized:
	default:
		return f, host.Errorf(host.ErrInvalidArgument, "backward_override: %d is not none (0), high_precision (1) or dequantized (2)", int32(f.BackwardOverride))
	}
	if t, g, ok := l.anyDelayed(); ok {
		if f.BackwardOverride != BackwardQuantized {
			return f, host.Errorf(host.ErrInvalidArgument, "backward_override: %s is not allowed with delayed scaling (the %s quantizer of gemm %d uses it; spec §9.2: TransformerEngine's DelayedScaling rejects every override)",
				f.BackwardOverride, t, g)
		}
		if f.SaveOriginalInput {
			return f, host.Errorf(host.ErrInvalidArgument, "save_original_input: not allowed with delayed scaling (the %s quantizer of gemm %d uses it; spec §9.6): backward would quantize the input with a scale updated after the forward pass",
				t, g)
		}
	}
	switch f.BackwardOverride {
	case BackwardHighPrecision:
		f.SaveOriginalInput = true
	case BackwardDequantized:
		f.SaveOriginalInput = false
	}
	return f, nil
}

// sameDevice checks that a tensor of the call is on the device of the
// call's first tensor (the input, or grad_output in backward): a layer's
// quantize, GEMMs and copies all run on that device, on the call's stream.
func sameDevice(name string, t, dev host.Device, first string) error {
	if t != dev {
		return host.Errorf(host.ErrInvalidArgument, "%s: on %s but %s is on %s (a linear op runs on one device)", name, t, first, dev)
	}
	return nil
}

// checkHP validates a high-precision tensor of a call whose tensors must be
// on dev, where the tensor named first is.
func checkHP(name string, t host.Tensor, dev host.Device, first string) error {
	if !t.DType.IsHighPrecision() {
		return host.Errorf(host.ErrInvalidArgument, "%s: dtype %s not supported (want float32, bfloat16 or float16)", name, t.DType)
	}
	if err := host.CheckShape(name, t.Shape, t.DType.Size()); err != nil {
		return err
	}
	if t.Ptr == nil && t.NumElements() > 0 {
		return host.Errorf(host.ErrInvalidArgument, "%s: data is NULL", name)
	}
	return sameDevice(name, t.Device, dev, first)
}

// quantizerName names a role's quantizer in messages: "input quantizer", or
// "input quantizer of gemm 2" in a grouped layer.
func quantizerName(t Tensor, grouped bool, g int) string {
	if grouped {
		return fmt.Sprintf("%s quantizer of gemm %d", t, g)
	}
	return t.String() + " quantizer"
}

func indexed(name string, grouped bool, g int) string {
	if grouped {
		return fmt.Sprintf("%s[%d]", name, g)
	}
	return name
}

// outShapeOf is the input's shape with the last dim replaced by n.
func outShapeOf(in []int64, n int64) []int64 {
	s := append([]int64(nil), in...)
	s[len(s)-1] = n
	return s
}

// Forward runs the forward pass (spec §7.2 fprop, §7.4 usages, §9.3): per
// GEMM it quantizes the rows of the input (rowwise; columnwise too when the
// quantized backward needs it for wgrad) and uses the cached quantized weight
// (rowwise; columnwise too when the quantized backward needs it for dgrad),
// and computes Y = X·Wᵀ + b into the output with FP32 accumulation. With
// keep it returns a context holding exactly what the requested gradients
// need; without it nothing is saved and no gradient may be requested.
func (l *Layer) Forward(a *ForwardArgs, keep bool) (ctx *Context, err error) {
	if a == nil {
		return nil, host.Errorf(host.ErrInvalidArgument, "args: is NULL")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkLive(); err != nil {
		return nil, err
	}
	f, err := l.effectiveFlags(a.Flags)
	if err != nil {
		return nil, err
	}
	if !keep && (f.InputRequiresGrad || f.WeightRequiresGrad) {
		return nil, host.Errorf(host.ErrInvalidArgument, "ctx: is NULL but input_requires_grad or weight_requires_grad asks for a backward pass, which needs a context")
	}
	_, k, n, splits, err := l.checkForward(a)
	if err != nil {
		return nil, err
	}
	c := &Context{grouped: l.grouped, flags: f, inShape: append([]int64(nil), a.Input.Shape...),
		outShape: append([]int64(nil), a.Output.Shape...), inDType: a.Input.DType, k: k, n: n,
		splits: splits, hasBias: a.Biases != nil, dev: a.Input.Device, stream: a.Stream}
	defer func() {
		if err != nil {
			c.free()
		}
	}()
	G := len(l.weights)
	override := f.BackwardOverride != BackwardQuantized
	// Usages (spec §7.4): the input's columnwise form is for wgrad, the
	// weight's for dgrad, and only the quantized backward reads them.
	inUsage, wUsage := host.Rowwise, host.Rowwise
	if f.WeightRequiresGrad && !f.SaveOriginalInput && !override {
		inUsage |= host.Columnwise
	}
	if f.InputRequiresGrad && !override {
		wUsage |= host.Columnwise
	}
	if keep && f.WeightRequiresGrad {
		c.xq = make([]*host.QTensor, G)
		switch {
		case f.SaveOriginalInput:
			c.inSaved = SavedOriginal
			if c.xOrig, err = copyTensor(a.Input, a.Stream); err != nil {
				return nil, err
			}
			if a.InputAmax != nil {
				// backward quantizes the input columnwise: with the same amax
				c.xAmax = make([]host.Tensor, G)
				for g, am := range a.InputAmax {
					if am != nil {
						if c.xAmax[g], err = copyTensor(*am, a.Stream); err != nil {
							return nil, err
						}
					}
				}
			}
			if !override {
				for _, q := range l.quantizers[Input] {
					q.Retain()
					c.inQ = append(c.inQ, q)
				}
			}
		default:
			c.inSaved = SavedQuantized
		}
	}
	if keep && f.InputRequiresGrad {
		c.wq = make([]*sharedQTensor, G)
		c.wSaved = SavedLayerWeight
		if f.BackwardOverride == BackwardHighPrecision {
			if a.WeightQ != nil {
				return nil, host.Errorf(host.ErrInvalidArgument, "%s: set with backward_override high_precision, which keeps the original weight for grad_input (the weight was given only quantized)",
					weightQName(l.grouped))
			}
			c.wSaved = SavedOriginal
			c.wOrig = make([]host.Tensor, G)
		}
	}
	if keep && !override && (f.InputRequiresGrad || f.WeightRequiresGrad) {
		for _, q := range l.quantizers[GradOutput] {
			q.Retain()
			c.gradQ = append(c.gradQ, q)
		}
	}
	var row int64
	for g := 0; g < G; g++ {
		rows := splits[g]
		x := rowSlice(a.Input, row, rows, k)
		y := rowSlice(a.Output, row, rows, n)
		row += rows
		if rows == 0 {
			continue // nothing to multiply; backward gives this GEMM zero weight and bias gradients
		}
		xq, err := l.quantizers[Input][g].QuantizeUsage(x, host.QuantizeOptions{Stream: a.Stream, AmaxIn: amaxAt(a.InputAmax, g)}, inUsage)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", quantizerName(Input, l.grouped, g), err)
		}
		var wq *sharedQTensor
		if a.WeightQ != nil {
			wq = &sharedQTensor{t: a.WeightQ[g], borrowed: true}
			wq.refs.Store(1)
		} else if wq, err = l.quantizedWeight(g, a.Weights[g], wUsage, amaxAt(a.WeightAmax, g), a.Stream); err != nil {
			xq.FreeOn(a.Stream)
			return nil, fmt.Errorf("%s: %w", quantizerName(Weight, l.grouped, g), err)
		}
		ga := &host.GemmArgs{A: host.GemmOperand{Q: xq}, B: host.GemmOperand{Q: wq.t, Trans: true}, Alpha: 1, D: y, Stream: a.Stream}
		if a.Biases != nil {
			ga.Bias = &a.Biases[g]
		}
		if err := host.Gemm(ga); err != nil {
			xq.FreeOn(a.Stream)
			return nil, fmt.Errorf("fprop%s: %w", gemmSuffix(l.grouped, g), err)
		}
		if c.inSaved == SavedQuantized {
			// Keep only the direction backward reads (spec §7.4, §9.5): the
			// temporary drops the other one.
			keepDir := host.Columnwise
			if f.BackwardOverride == BackwardDequantized {
				keepDir = host.Rowwise
			}
			if err := xq.UpdateUsage(keepDir, a.Stream); err != nil {
				xq.FreeOn(a.Stream)
				return nil, fmt.Errorf("%s: %w", quantizerName(Input, l.grouped, g), err)
			}
			c.xq[g] = xq
		} else {
			xq.FreeOn(a.Stream)
		}
		switch c.wSaved {
		case SavedLayerWeight:
			c.wq[g] = wq.retain()
		case SavedOriginal:
			if c.wOrig[g], err = copyTensor(a.Weights[g], a.Stream); err != nil {
				return nil, err
			}
		}
	}
	if !keep {
		return nil, nil
	}
	return c, nil
}

func gemmSuffix(grouped bool, g int) string {
	if grouped {
		return fmt.Sprintf(" of gemm %d", g)
	}
	return ""
}

// checkForward validates a forward call's tensors and returns M, K, N and
// the rows of each GEMM.
func (l *Layer) checkForward(a *ForwardArgs) (m, k, n int64, splits []int64, err error) {
	G := len(l.weights)
	dev := a.Input.Device
	if err := checkHP("input", a.Input, dev, "input"); err != nil {
		return 0, 0, 0, nil, err
	}
	m, k = host.Flatten2D(a.Input.Shape)
	for _, am := range []struct {
		name string
		ts   []*host.Tensor
	}{{"input_amax", a.InputAmax}, {"weight_amax", a.WeightAmax}} {
		if err := checkAmaxes(am.name, am.ts, l.grouped, G, dev, "input"); err != nil {
			return 0, 0, 0, nil, err
		}
	}
	if a.WeightQ != nil {
		if n, err = l.checkWeightQ(a, k); err != nil {
			return 0, 0, 0, nil, err
		}
	} else if len(a.Weights) != G {
		return 0, 0, 0, nil, host.Errorf(host.ErrInvalidArgument, "weights: %d given, the layer has %d GEMMs", len(a.Weights), G)
	}
	for g, w := range a.Weights {
		name := indexed("weight", l.grouped, g)
		if err := checkHP(name, w, dev, "input"); err != nil {
			return 0, 0, 0, nil, err
		}
		if len(w.Shape) != 2 {
			return 0, 0, 0, nil, host.Errorf(host.ErrInvalidArgument, "%s: shape %v is not 2-D [out_features, in_features]", name, w.Shape)
		}
		if g == 0 {
			n = w.Shape[0]
		}
		if w.Shape[1] != k {
			return 0, 0, 0, nil, host.Errorf(host.ErrInvalidArgument, "%s: shape %v, want [N, K=%d] (K is the input's last dim)", name, w.Shape, k)
		}
		if w.Shape[0] != n {
			return 0, 0, 0, nil, host.Errorf(host.ErrInvalidArgument, "%s: shape %v, want [N=%d, K] (every GEMM has weight[0]'s N)", name, w.Shape, n)
		}
		if n == 0 || k == 0 {
			return 0, 0, 0, nil, host.Errorf(host.ErrInvalidArgument, "%s: shape %v has an empty dim", name, w.Shape)
		}
	}
	if a.Biases != nil {
		if len(a.Biases) != G {
			return 0, 0, 0, nil, host.Errorf(host.ErrInvalidArgument, "biases: %d given, the layer has %d GEMMs", len(a.Biases), G)
		}
		for g, b := range a.Biases {
			name := indexed("bias", l.grouped, g)
			if err := checkHP(name, b, dev, "input"); err != nil {
				return 0, 0, 0, nil, err
			}
			if len(b.Shape) != 1 || b.Shape[0] != n {
				return 0, 0, 0, nil, host.Errorf(host.ErrInvalidArgument, "%s: shape %v is not [N=%d]", name, b.Shape, n)
			}
		}
	}
	if err := checkHP("output", a.Output, dev, "input"); err != nil {
		return 0, 0, 0, nil, err
	}
	if want := outShapeOf(a.Input.Shape, n); !slices.Equal(a.Output.Shape, want) {
		return 0, 0, 0, nil, host.Errorf(host.ErrInvalidArgument, "output: shape %v, want %v (the input's leading dims, then N)", a.Output.Shape, want)
	}
	if host.Overlaps(a.Output, a.Input) {
		return 0, 0, 0, nil, host.Errorf(host.ErrInvalidArgument, "output: overlaps input")
	}
	for g, w := range a.Weights {
		if host.Overlaps(a.Output, w) {
			return 0, 0, 0, nil, host.Errorf(host.ErrInvalidArgument, "output: overlaps %s", indexed("weight", l.grouped, g))
		}
	}
	for g, b := range a.Biases {
		if host.Overlaps(a.Output, b) {
			return 0, 0, 0, nil, host.Errorf(host.ErrInvalidArgument, "output: overlaps %s", indexed("bias", l.grouped, g))
		}
	}
	if !l.grouped {
		if a.MSplits != nil {
			return 0, 0, 0, nil, host.Errorf(host.ErrInvalidArgument, "m_splits: set for a plain linear layer")
		}
		return m, k, n, []int64{m}, nil
	}
	if len(a.MSplits) != G {
		return 0, 0, 0, nil, host.Errorf(host.ErrInvalidArgument, "m_splits: %d given, the layer has %d GEMMs", len(a.MSplits), G)
	}
	var sum int64
	for g, r := range a.MSplits {
		if r < 0 || r > m {
			return 0, 0, 0, nil, host.Errorf(host.ErrInvalidArgument, "m_splits[%d]: %d rows (want 0..%d)", g, r, m)
		}
		sum += r
	}
	if sum != m {
		return 0, 0, 0, nil, host.Errorf(host.ErrInvalidArgument, "m_splits: the row counts sum to %d, the input has M = %d rows", sum, m)
	}
	return m, k, n, append([]int64(nil), a.MSplits...), nil
}

func weightQName(grouped bool) string {
	if grouped {
		return "weight_qtensors"
	}
	return "weight_qtensor"
}

// checkWeightQ validates caller-quantized weights (one per GEMM, [N, K],
// on the input's device, with the directions the call reads: rowwise for fprop,
// columnwise too for the quantized backward's dgrad) and returns N.
func (l *Layer) checkWeightQ(a *ForwardArgs, k int64) (n int64, err error) {
	G := len(l.weights)
	name := weightQName(l.grouped)
	if a.Weights != nil {
		return 0, host.Errorf(host.ErrInvalidArgument, "%s: set together with the high-precision weight; give one of them", name)
	}
	if a.WeightAmax != nil {
		return 0, host.Errorf(host.ErrInvalidArgument, "weight_amax: set with %s (the weight is already quantized)", name)
	}
	if len(a.WeightQ) != G {
		return 0, host.Errorf(host.ErrInvalidArgument, "%s: %d given, the layer has %d GEMMs", name, len(a.WeightQ), G)
	}
	need := host.Rowwise
	if a.Flags.InputRequiresGrad && a.Flags.BackwardOverride == BackwardQuantized {
		need |= host.Columnwise
	}
	for g, t := range a.WeightQ {
		iname := indexed(name, l.grouped, g)
		if t == nil {
			return 0, host.Errorf(host.ErrInvalidArgument, "%s: is NULL", iname)
		}
		shape := t.Shape()
		if len(shape) != 2 {
			return 0, host.Errorf(host.ErrInvalidArgument, "%s: shape %v is not 2-D [out_features, in_features]", iname, shape)
		}
		if g == 0 {
			n = shape[0]
		}
		if shape[1] != k || shape[0] != n || n == 0 {
			return 0, host.Errorf(host.ErrInvalidArgument, "%s: shape %v, want [N=%d, K=%d] (K is the input's last dim, N weight 0's)", iname, shape, n, k)
		}
		if err := sameDevice(iname, t.Device(), a.Input.Device, "input"); err != nil {
			return 0, err
		}
		if u := t.Usage(); !u.Has(need) {
			return 0, host.Errorf(host.ErrInvalidArgument, "%s: holds usage %s, this call reads %s (rowwise for the forward GEMM, columnwise for grad_input; quantize persistent weights with both)", iname, u, need)
		}
	}
	return n, nil
}

// checkAmaxes validates per-GEMM amax overrides: nil, or G entries, each nil
// or an FP32 tensor of 2 elements on dev (quant_quantize_options.amax).
func checkAmaxes(name string, ts []*host.Tensor, grouped bool, G int, dev host.Device, first string) error {
	if ts == nil {
		return nil
	}
	if len(ts) != G {
		return host.Errorf(host.ErrInvalidArgument, "%s: %d given, the layer has %d GEMMs", name, len(ts), G)
	}
	for g, t := range ts {
		if t == nil {
			continue
		}
		iname := indexed(name, grouped, g)
		if t.DType != host.Float32 || t.NumElements() != 2 {
			return host.Errorf(host.ErrInvalidArgument, "%s: %s %v, want float32 with 2 elements (rowwise, columnwise amax)", iname, t.DType, t.Shape)
		}
		if t.Ptr == nil {
			return host.Errorf(host.ErrInvalidArgument, "%s: data is NULL", iname)
		}
		if err := sameDevice(iname, t.Device, dev, first); err != nil {
			return err
		}
	}
	return nil
}

func amaxAt(ts []*host.Tensor, g int) *host.Tensor {
	if ts == nil {
		return nil
	}
	return ts[g]
}

// rowSlice is rows [r0, r0+rows) of a row-major tensor with cols columns, as
// a 2-D tensor.
func rowSlice(t host.Tensor, r0, rows, cols int64) host.Tensor {
	s := host.Tensor{DType: t.DType, Shape: []int64{rows, cols}, Device: t.Device}
	if rows > 0 {
		s.Ptr = t.At(r0 * cols)
	}
	return s
}

// copyTensor returns a new tensor on t's device holding t's bytes (a copy
// ordered on stream).
func copyTensor(t host.Tensor, stream uintptr) (host.Tensor, error) {
	c, err := host.AllocTensor(t.Device, t.DType, t.Shape, stream)
	if err != nil {
		return host.Tensor{}, err
	}
	if err := host.CopyTensor(c, t, stream); err != nil {
		host.FreeTensor(c, stream)
		return host.Tensor{}, err
	}
	return c, nil
}
