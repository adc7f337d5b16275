package linear

import (
	"fmt"
	"slices"
	"sync"

	"libquant/host"
)

// Saved says what a context keeps of the input or the weight.
type Saved int32

const (
	SavedNone        Saved = 0 // nothing: no requested gradient needs it
	SavedOriginal    Saved = 1 // a copy of the high-precision tensor
	SavedQuantized   Saved = 2 // a quantized tensor of the context's own
	SavedLayerWeight Saved = 3 // a reference to the layer's quantized weight (not a copy)
)

func (s Saved) String() string {
	switch s {
	case SavedNone:
		return "none"
	case SavedOriginal:
		return "original"
	case SavedQuantized:
		return "quantized"
	case SavedLayerWeight:
		return "layer_weight"
	}
	return fmt.Sprintf("saved(%d)", int32(s))
}

// Context holds what one forward call saved for its backward pass.
// Backward runs once; it frees what was saved.
type Context struct {
	mu       sync.Mutex
	grouped  bool
	flags    Flags // effective: overrides applied
	inShape  []int64
	outShape []int64
	inDType  host.DType
	k, n     int64   // in and out features
	splits   []int64 // rows per GEMM
	hasBias  bool
	dev      host.Device // the forward's device: backward runs there too
	// stream: the forward's stream, then backward's; what the context frees
	// is freed ordered on it (after the work that read it)
	stream uintptr

	xOrig   host.Tensor       // SaveOriginalInput: a copy of the input (all groups)
	xAmax   []host.Tensor     // SaveOriginalInput with ForwardArgs.InputAmax: copies, per GEMM (zero: none)
	xq      []*host.QTensor   // per GEMM: the quantized input
	wOrig   []host.Tensor     // high_precision: copies of the weights
	wq      []*sharedQTensor  // per GEMM: the layer's quantized weight
	inQ     []*host.Quantizer // SaveOriginalInput with quantized backward: to quantize xOrig
	gradQ   []*host.Quantizer // quantized backward: for grad_output
	used    bool
	freed   bool
	inSaved Saved
	wSaved  Saved
}

// free releases everything the context holds (idempotent).
func (c *Context) free() {
	host.FreeTensor(c.xOrig, c.stream)
	c.xOrig = host.Tensor{}
	for _, t := range c.xAmax {
		host.FreeTensor(t, c.stream)
	}
	c.xAmax = nil
	for _, t := range c.xq {
		if t != nil {
			t.FreeOn(c.stream)
		}
	}
	c.xq = nil
	for _, t := range c.wOrig {
		host.FreeTensor(t, c.stream)
	}
	c.wOrig = nil
	for _, s := range c.wq {
		if s != nil {
			s.release()
		}
	}
	c.wq = nil
	for _, q := range c.inQ {
		q.Release()
	}
	c.inQ = nil
	for _, q := range c.gradQ {
		q.Release()
	}
	c.gradQ = nil
	c.inSaved, c.wSaved = SavedNone, SavedNone
}

// Release frees what the context saved; a later Backward fails.
func (c *Context) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.free()
	c.freed = true
}

// ContextInfo describes what a context holds.
type ContextInfo struct {
	Grouped  bool
	NumGEMMs int
	Used     bool  // backward ran (the context holds nothing now)
	Flags    Flags // the effective flags, after the override's forcing
	// What is kept of the input and of the weight, and their bytes summed
	// over GEMMs. InputUsage: the directions the saved quantized input
	// holds; WeightUsage: the direction of the layer's quantized weight
	// backward reads.
	InputSaved, WeightSaved Saved
	InputUsage, WeightUsage host.Usage
	InputBytes, WeightBytes int64
	// OwnedBytes is what the context allocated itself (freed by backward or
	// Release); a SavedLayerWeight is shared with the layer and not in it.
	OwnedBytes int64
}

// Info reports what the context holds.
func (c *Context) Info() ContextInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	G := len(c.splits)
	info := ContextInfo{Grouped: c.grouped, NumGEMMs: G, Used: c.used, Flags: c.flags,
		InputSaved: c.inSaved, WeightSaved: c.wSaved}
	switch c.inSaved {
	case SavedOriginal:
		info.InputBytes = c.xOrig.Bytes()
		info.OwnedBytes += info.InputBytes
	case SavedQuantized:
		for _, t := range c.xq {
			if t != nil {
				info.InputUsage = t.Usage()
				info.InputBytes += t.StorageBytes(t.Usage())
			}
		}
		info.OwnedBytes += info.InputBytes
	}
	switch c.wSaved {
	case SavedOriginal:
		for _, t := range c.wOrig {
			info.WeightBytes += t.Bytes()
		}
		info.OwnedBytes += info.WeightBytes
	case SavedLayerWeight:
		info.WeightUsage = host.Columnwise
		if c.flags.BackwardOverride == BackwardDequantized {
			info.WeightUsage = host.Rowwise
		}
		for _, s := range c.wq {
			if s != nil {
				info.WeightBytes += s.t.StorageBytes(info.WeightUsage)
			}
		}
	}
	return info
}

// Backward computes the requested gradients from the saved tensors (spec
// §7.2, §9): dgrad dX = dY·W, wgrad dW = dYᵀ·X, dbias = column sums of dY,
// per GEMM. The quantized backward quantizes dY with the grad_output
// quantizer (rowwise for dgrad, columnwise for wgrad) and reads W and X
// columnwise; high_precision multiplies the original tensors; dequantized
// multiplies the rowwise forward-quantized ones, dequantized to the input's
// dtype. It runs once, and frees what the context saved.
func (c *Context) Backward(a *BackwardArgs) error {
	if a == nil {
		return host.Errorf(host.ErrInvalidArgument, "args: is NULL")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.freed:
		return host.Errorf(host.ErrState, "ctx: released")
	case c.used:
		return host.Errorf(host.ErrState, "ctx: backward already ran on this context (it frees what it saved); run forward again")
	}
	if err := c.checkBackward(a); err != nil {
		return err
	}
	c.used = true
	c.stream = a.Stream
	for _, s := range c.wq {
		if s != nil {
			s.use(a.Stream)
		}
	}
	defer c.free()
	f := c.flags
	var row int64
	for g, rows := range c.splits {
		dy := rowSlice(a.GradOutput, row, rows, c.n)
		var dx host.Tensor
		if a.GradInput != nil {
			dx = rowSlice(*a.GradInput, row, rows, c.k)
		}
		row0 := row
		row += rows
		if a.GradBiases != nil {
			if err := columnSums(dy, a.GradBiases[g], a.Stream); err != nil {
				return fmt.Errorf("%s: %w", indexed("grad_bias", c.grouped, g), err)
			}
		}
		if rows == 0 {
			if a.GradWeights != nil {
				if err := host.MemsetTensor(a.GradWeights[g], 0, a.Stream); err != nil {
					return err
				}
			}
			continue
		}
		var err error
		switch f.BackwardOverride {
		case BackwardQuantized:
			err = c.backwardQuantized(a, g, row0, dy, dx)
		case BackwardHighPrecision:
			err = c.backwardDense(a, g, row0, dy, dx, c.wOrig, func() (host.Tensor, func(), error) {
				return rowSlice(c.xOrig, row0, rows, c.k), func() {}, nil
			})
		case BackwardDequantized:
			err = c.backwardDequantized(a, g, row0, dy, dx)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *Context) checkBackward(a *BackwardArgs) error {
	G := len(c.splits)
	if a.GradInput == nil && a.GradWeights == nil && a.GradBiases == nil {
		return host.Errorf(host.ErrInvalidArgument, "grad_input, grad_weight and grad_bias: all NULL; request at least one gradient")
	}
	const first = "the forward's input"
	if err := checkHP("grad_output", a.GradOutput, c.dev, first); err != nil {
		return err
	}
	if err := checkAmaxes("grad_output_amax", a.GradOutputAmax, c.grouped, G, c.dev, first); err != nil {
		return err
	}
	if !slices.Equal(a.GradOutput.Shape, c.outShape) {
		return host.Errorf(host.ErrInvalidArgument, "grad_output: shape %v, the forward's output was %v", a.GradOutput.Shape, c.outShape)
	}
	outs := []struct {
		name string
		t    host.Tensor
	}{}
	if a.GradInput != nil {
		if !c.flags.InputRequiresGrad {
			return host.Errorf(host.ErrState, "grad_input: requested, but the forward pass ran with input_requires_grad 0 and kept nothing for dgrad")
		}
		if err := checkHP("grad_input", *a.GradInput, c.dev, first); err != nil {
			return err
		}
		if !slices.Equal(a.GradInput.Shape, c.inShape) {
			return host.Errorf(host.ErrInvalidArgument, "grad_input: shape %v, the forward's input was %v", a.GradInput.Shape, c.inShape)
		}
		outs = append(outs, struct {
			name string
			t    host.Tensor
		}{"grad_input", *a.GradInput})
	}
	wname, bname := "grad_weight", "grad_bias"
	if c.grouped {
		wname, bname = "grad_weights", "grad_biases"
	}
	if a.GradWeights != nil {
		if !c.flags.WeightRequiresGrad {
			return host.Errorf(host.ErrState, "%s: requested, but the forward pass ran with weight_requires_grad 0 (a frozen weight) and kept nothing for wgrad", wname)
		}
		if len(a.GradWeights) != G {
			return host.Errorf(host.ErrInvalidArgument, "%s: %d given, the layer has %d GEMMs", wname, len(a.GradWeights), G)
		}
		for g, t := range a.GradWeights {
			name := indexed(wname, c.grouped, g)
			if err := checkHP(name, t, c.dev, first); err != nil {
				return err
			}
			if len(t.Shape) != 2 || t.Shape[0] != c.n || t.Shape[1] != c.k {
				return host.Errorf(host.ErrInvalidArgument, "%s: shape %v, want the weight's [N=%d, K=%d]", name, t.Shape, c.n, c.k)
			}
			outs = append(outs, struct {
				name string
				t    host.Tensor
			}{name, t})
		}
	}
	if a.GradBiases != nil {
		if !c.hasBias {
			return host.Errorf(host.ErrState, "%s: requested, but the forward pass had no bias", bname)
		}
		if len(a.GradBiases) != G {
			return host.Errorf(host.ErrInvalidArgument, "%s: %d given, the layer has %d GEMMs", bname, len(a.GradBiases), G)
		}
		for g, t := range a.GradBiases {
			name := indexed(bname, c.grouped, g)
			if err := checkHP(name, t, c.dev, first); err != nil {
				return err
			}
			if len(t.Shape) != 1 || t.Shape[0] != c.n {
				return host.Errorf(host.ErrInvalidArgument, "%s: shape %v is not [N=%d]", name, t.Shape, c.n)
			}
			outs = append(outs, struct {
				name string
				t    host.Tensor
			}{name, t})
		}
	}
	for i, o := range outs {
		if host.Overlaps(o.t, a.GradOutput) {
			return host.Errorf(host.ErrInvalidArgument, "%s: overlaps grad_output", o.name)
		}
		for _, p := range outs[:i] {
			if host.Overlaps(o.t, p.t) {
				return host.Errorf(host.ErrInvalidArgument, "%s: overlaps %s", o.name, p.name)
			}
		}
	}
	return nil
}

// backwardQuantized is GEMM g's quantized backward (spec §7.2): dY is
// quantized rowwise for dgrad (dY.row × W.col) and columnwise for wgrad
// (dY.col × X.col).
func (c *Context) backwardQuantized(a *BackwardArgs, g int, row0 int64, dy, dx host.Tensor) error {
	var usage host.Usage
	if a.GradInput != nil {
		usage |= host.Rowwise
	}
	if a.GradWeights != nil {
		usage |= host.Columnwise
	}
	if usage == 0 {
		return nil // only dbias, from the unquantized dY
	}
	dyq, err := c.gradQ[g].QuantizeUsage(dy, host.QuantizeOptions{Stream: a.Stream, AmaxIn: amaxAt(a.GradOutputAmax, g)}, usage)
	if err != nil {
		return fmt.Errorf("%s: %w", quantizerName(GradOutput, c.grouped, g), err)
	}
	defer dyq.FreeOn(a.Stream)
	if a.GradInput != nil {
		if err := host.Gemm(&host.GemmArgs{A: host.GemmOperand{Q: dyq}, B: host.GemmOperand{Q: c.wq[g].t}, Alpha: 1, D: dx, Stream: a.Stream}); err != nil {
			return fmt.Errorf("dgrad%s: %w", gemmSuffix(c.grouped, g), err)
		}
	}
	if a.GradWeights != nil {
		xq := c.xq[g]
		if c.inSaved == SavedOriginal {
			// save_original_input (spec §9.6): quantize the input now, only
			// the columnwise form wgrad reads.
			x := rowSlice(c.xOrig, row0, c.splits[g], c.k)
			opts := host.QuantizeOptions{Stream: a.Stream}
			if c.xAmax != nil && c.xAmax[g].Ptr != nil {
				opts.AmaxIn = &c.xAmax[g] // the forward's amax (reduced across processes)
			}
			if xq, err = c.inQ[g].QuantizeUsage(x, opts, host.Columnwise); err != nil {
				return fmt.Errorf("%s: %w", quantizerName(Input, c.grouped, g), err)
			}
			defer xq.FreeOn(a.Stream)
		}
		if err := host.Gemm(&host.GemmArgs{A: host.GemmOperand{Q: dyq, Trans: true}, B: host.GemmOperand{Q: xq}, Alpha: 1, D: a.GradWeights[g], Stream: a.Stream}); err != nil {
			return fmt.Errorf("wgrad%s: %w", gemmSuffix(c.grouped, g), err)
		}
	}
	return nil
}

// backwardDense runs dgrad and wgrad on the unquantized dY and dense W
// (weights[g]) and X (from input).
func (c *Context) backwardDense(a *BackwardArgs, g int, row0 int64, dy, dx host.Tensor, weights []host.Tensor, input func() (host.Tensor, func(), error)) error {
	if a.GradInput != nil {
		if err := host.Gemm(&host.GemmArgs{A: host.GemmOperand{Dense: &dy}, B: host.GemmOperand{Dense: &weights[g]}, Alpha: 1, D: dx, Stream: a.Stream}); err != nil {
			return fmt.Errorf("dgrad%s: %w", gemmSuffix(c.grouped, g), err)
		}
	}
	if a.GradWeights != nil {
		x, done, err := input()
		if err != nil {
			return err
		}
		defer done()
		if err := host.Gemm(&host.GemmArgs{A: host.GemmOperand{Dense: &dy, Trans: true}, B: host.GemmOperand{Dense: &x}, Alpha: 1, D: a.GradWeights[g], Stream: a.Stream}); err != nil {
			return fmt.Errorf("wgrad%s: %w", gemmSuffix(c.grouped, g), err)
		}
	}
	return nil
}

// backwardDequantized dequantizes the saved rowwise forms to the input's
// dtype (spec §9.5) and runs the dense backward on them.
func (c *Context) backwardDequantized(a *BackwardArgs, g int, row0 int64, dy, dx host.Tensor) error {
	var weights []host.Tensor
	if a.GradInput != nil {
		w, err := dequantizeRowwiseCopy(c.wq[g].t, c.inDType, a.Stream)
		if err != nil {
			return fmt.Errorf("dequantizing the saved %s: %w", indexed("weight", c.grouped, g), err)
		}
		defer host.FreeTensor(w, a.Stream)
		weights = make([]host.Tensor, len(c.splits))
		weights[g] = w
	}
	return c.backwardDense(a, g, row0, dy, dx, weights, func() (host.Tensor, func(), error) {
		x, err := dequantizeRowwiseCopy(c.xq[g], c.inDType, a.Stream)
		if err != nil {
			return host.Tensor{}, nil, fmt.Errorf("dequantizing the saved %s: %w", indexed("input", c.grouped, g), err)
		}
		return x, func() { host.FreeTensor(x, a.Stream) }, nil
	})
}

// dequantizeRowwiseCopy dequantizes t's rowwise data into a new [M, K]
// tensor of dtype dt.
func dequantizeRowwiseCopy(t *host.QTensor, dt host.DType, stream uintptr) (host.Tensor, error) {
	m, k := t.Dims2D()
	out, err := host.AllocTensor(t.Device(), dt, []int64{m, k}, stream)
	if err != nil {
		return host.Tensor{}, err
	}
	if err := t.Dequantize(host.DirRowwise, out, stream); err != nil {
		host.FreeTensor(out, stream)
		return host.Tensor{}, err
	}
	return out, nil
}

// columnSums writes the column sums of the 2-D tensor dy into out (the bias
// gradient). On the CPU it sums in float64 and rounds once to FP32 and then
// to out's dtype. On a device it is the GEMM out[1, N] = 1[1, M]·dy[M, N]
// (exact products, FP32 accumulation, then out's dtype), ordered on stream.
func columnSums(dy, out host.Tensor, stream uintptr) error {
	rows, cols := host.Flatten2D(dy.Shape)
	if dy.Device.Type != host.CPU {
		if rows == 0 {
			return host.MemsetTensor(out, 0, stream)
		}
		ones, err := onesOn(dy.Device, dy.DType, rows, stream)
		if err != nil {
			return err
		}
		return host.Gemm(&host.GemmArgs{A: host.GemmOperand{Dense: &ones}, B: host.GemmOperand{Dense: &dy}, Alpha: 1,
			D: host.Tensor{Ptr: out.Ptr, DType: out.DType, Shape: []int64{1, cols}, Device: out.Device}, Stream: stream})
	}
	sums := make([]float64, cols)
	buf := make([]float32, cols)
	for r := int64(0); r < rows; r++ {
		host.LoadFloat32(dy, r*cols, buf)
		for j, v := range buf {
			sums[j] += float64(v)
		}
	}
	for j, s := range sums {
		buf[j] = float32(s)
	}
	host.StoreFloat32(out, 0, buf)
	return nil
}

// ones holds, per device and dtype, a vector of ones on the device for the
// bias-gradient GEMM. It only grows (doubling); a replaced vector is kept,
// since work queued on some stream may still read it.
var ones struct {
	sync.Mutex
	m    map[onesKey]host.Tensor
	kept []host.Tensor
}

type onesKey struct {
	dev host.Device
	dt  host.DType
}

// onesOn returns a [1, n] tensor of ones of dtype dt on dev. Growing it
// fills it from the CPU and waits for stream once, so that every stream may
// read it (a stream-ordered allocation is another stream's only after a
// synchronisation); steady state does neither.
func onesOn(dev host.Device, dt host.DType, n int64, stream uintptr) (host.Tensor, error) {
	ones.Lock()
	defer ones.Unlock()
	k := onesKey{dev, dt}
	t, ok := ones.m[k]
	if !ok || t.Shape[1] < n {
		size := max(n, 4096)
		if ok {
			size = max(size, 2*t.Shape[1])
		}
		cpu, err := host.AllocTensor(host.Device{Type: host.CPU}, dt, []int64{1, size}, 0)
		if err != nil {
			return host.Tensor{}, err
		}
		defer host.FreeTensor(cpu, 0)
		one := make([]float32, size)
		for i := range one {
			one[i] = 1
		}
		host.StoreFloat32(cpu, 0, one)
		d, err := host.AllocOwnTensor(dev, dt, []int64{1, size}, stream) // kept for good: never a caller's pool
		if err != nil {
			return host.Tensor{}, err
		}
		if err := host.CopyTensor(d, cpu, stream); err == nil {
			err = host.Synchronize(dev, stream)
		}
		if err != nil {
			host.FreeTensor(d, stream)
			return host.Tensor{}, err
		}
		if ok {
			ones.kept = append(ones.kept, t)
		}
		if ones.m == nil {
			ones.m = map[onesKey]host.Tensor{}
		}
		ones.m[k], t = d, d
	}
	t.Shape = []int64{1, n}
	return t, nil
}
