package host

import "sync/atomic"

// ColumnwiseSource is where a hybrid quantizer's columnwise input comes from (spec §8.3).
type ColumnwiseSource int32

const (
	SourceOriginal           ColumnwiseSource = 0
	SourceRowwiseDequantized ColumnwiseSource = 1
)

// Quantizer turns high-precision tensors into quantized ones: a spec per
// direction (the same one for a plain quantizer, two for a hybrid), usage flags
// and the specs' state.
type Quantizer struct {
	specs  [2]Spec
	states [2]State
	// usage is read on every quantize: an atomic, not a lock (issue #15).
	usage  atomic.Uint32
	hybrid bool
	// inputSpecs is whether a spec depends on the input's dtype (InputSpec),
	// fixed at construction like specs: specsFor resolves only then.
	inputSpecs bool
	source     ColumnwiseSource
	subs       [2]*Quantizer // a hybrid's sub-quantizers, which own the states
	refs       atomic.Int32
	// resolved caches each direction's kernels (Quantizer.kernels).
	resolved [2]atomic.Pointer[resolvedKernels]
}

// NewQuantizer builds a plain quantizer for p with the given usage (0 means both
// directions).
func NewQuantizer(p Params, usage Usage) (*Quantizer, error) {
	spec, err := NewSpec(p)
	if err != nil {
		return nil, err
	}
	if err := checkUsage(usage); err != nil {
		return nil, err
	}
	if usage == 0 {
		usage = BothUsages
	}
	st, err := spec.NewState()
	if err != nil {
		return nil, err
	}
	q := &Quantizer{specs: [2]Spec{spec, spec}, states: [2]State{st, st}}
	q.init(usage)
	return q, nil
}

// NewHybridQuantizer combines two distinct quantizers: row's spec makes the
// rowwise direction and col's the columnwise one (spec §8.3). The hybrid keeps
// both alive and shares their state; its own usage starts as both directions.
func NewHybridQuantizer(row, col *Quantizer, source ColumnwiseSource) (*Quantizer, error) {
	switch {
	case row == nil:
		return nil, Errorf(ErrInvalidArgument, "rowwise: quantizer is NULL")
	case col == nil:
		return nil, Errorf(ErrInvalidArgument, "columnwise: quantizer is NULL")
	case row == col:
		return nil, Errorf(ErrInvalidArgument, "columnwise: must be a different quantizer object than rowwise")
	case row.hybrid || col.hybrid:
		return nil, Errorf(ErrInvalidArgument, "a hybrid quantizer cannot nest another hybrid")
	case source != SourceOriginal && source != SourceRowwiseDequantized:
		return nil, Errorf(ErrInvalidArgument, "columnwise_source: %d is not original (0) or rowwise_dequantized (1)", source)
	}
	row.Retain()
	col.Retain()
	q := &Quantizer{
		specs:  [2]Spec{row.specs[DirRowwise], col.specs[DirColumnwise]},
		states: [2]State{row.states[DirRowwise], col.states[DirColumnwise]},
		hybrid: true, source: source,
		subs: [2]*Quantizer{row, col},
	}
	q.init(BothUsages)
	return q, nil
}

// Clone returns a new quantizer with q's specs, usage and columnwise source and
// fresh state of its own (a new delayed-scaling history): what a recipe hands
// out for each role from one template.
func (q *Quantizer) Clone() (*Quantizer, error) {
	if q.hybrid {
		row, err := q.subs[DirRowwise].Clone()
		if err != nil {
			return nil, err
		}
		defer row.Release()
		col, err := q.subs[DirColumnwise].Clone()
		if err != nil {
			return nil, err
		}
		defer col.Release()
		h, err := NewHybridQuantizer(row, col, q.source)
		if err != nil {
			return nil, err
		}
		h.usage.Store(uint32(q.Usage()))
		return h, nil
	}
	st, err := q.specs[DirRowwise].NewState()
	if err != nil {
		return nil, err
	}
	c := &Quantizer{specs: q.specs, states: [2]State{st, st}}
	c.init(q.Usage())
	return c, nil
}

// init sets what a new quantizer derives from its specs, its usage and its
// first reference.
func (q *Quantizer) init(usage Usage) {
	for _, s := range q.specs {
		if _, ok := s.(InputSpec); ok {
			q.inputSpecs = true
		}
	}
	q.usage.Store(uint32(usage))
	q.refs.Store(1)
}

// ColumnwiseSource is a hybrid's columnwise source (SourceOriginal otherwise).
func (q *Quantizer) ColumnwiseSource() ColumnwiseSource { return q.source }

func checkUsage(u Usage) error {
	if u&^BothUsages != 0 {
		return Errorf(ErrInvalidArgument, "usage: %#x has bits other than rowwise (1) and columnwise (2)", uint32(u))
	}
	return nil
}

// Retain adds a reference to q, which the holder drops with Release.
func (q *Quantizer) Retain() { q.refs.Add(1) }

// Release drops a reference; the last one frees the state.
func (q *Quantizer) Release() {
	if q.refs.Add(-1) != 0 {
		return
	}
	if q.hybrid {
		q.subs[0].Release()
		q.subs[1].Release()
		return
	}
	if q.states[0] != nil {
		q.states[0].Free()
	}
}

// SetUsage sets the directions the next quantize produces (spec §7.4 set_usage).
func (q *Quantizer) SetUsage(u Usage) error {
	if err := checkUsage(u); err != nil {
		return err
	}
	if u == 0 {
		return Errorf(ErrInvalidArgument, "usage: must name at least one direction")
	}
	q.usage.Store(uint32(u))
	return nil
}

// Usage returns the current usage flags.
func (q *Quantizer) Usage() Usage {
	return Usage(q.usage.Load())
}

// Spec returns the spec of a direction.
func (q *Quantizer) Spec(d Direction) Spec { return q.specs[d] }

// State returns the state of a direction's spec (nil when stateless).
func (q *Quantizer) State(d Direction) State { return q.states[d] }

// IsHybrid reports whether the two directions come from different quantizers.
func (q *Quantizer) IsHybrid() bool { return q.hybrid }

// Layout lists the buffers a quantize of shape would produce with the current
// usage, rowwise first.
func (q *Quantizer) Layout(shape []int64) ([]Layout, error) {
	return q.LayoutUsage(shape, q.Usage())
}

// LayoutUsage is Layout for an explicit usage instead of q's (the layout of
// QuantizeUsage), leaving q's usage alone.
func (q *Quantizer) LayoutUsage(shape []int64, usage Usage) ([]Layout, error) {
	if err := CheckShape("shape", shape, 0); err != nil {
		return nil, err
	}
	if err := checkUsage(usage); err != nil {
		return nil, err
	}
	m, k := Flatten2D(shape)
	if !q.hybrid && sharesStorage(q.specs[0]) {
		usage = Rowwise // one storage serves both directions
	}
	var out []Layout
	for _, d := range []Direction{DirRowwise, DirColumnwise} {
		if !usage.Has(d.Usage()) {
			continue
		}
		bufs, err := q.specs[d].Layout(m, k, d)
		if err != nil {
			return nil, err
		}
		for _, b := range bufs {
			out = append(out, Layout{Dir: d, BufferSpec: b})
		}
	}
	return out, nil
}

// QuantizeOptions are the optional inputs of a quantize.
type QuantizeOptions struct {
	Stream uintptr
	// AmaxIn is a caller-provided FP32 [2] amax (rowwise, columnwise), e.g. after
	// an all-reduce; nil computes it from the input.
	AmaxIn *Tensor
	// Persistent marks the result as a persistent tensor (spec §10).
	Persistent bool
}

func checkInput(in Tensor) error {
	if !in.DType.IsHighPrecision() {
		return Errorf(ErrInvalidArgument, "input: dtype %s not supported (want float32, bfloat16 or float16)", in.DType)
	}
	return CheckShape("input", in.Shape, in.DType.Size())
}

func checkAmaxIn(a *Tensor, in Tensor) error {
	if a == nil {
		return nil
	}
	if a.DType != Float32 || a.NumElements() != 2 {
		return Errorf(ErrInvalidArgument, "amax: want float32 with 2 elements (rowwise, columnwise), got %s %v", a.DType, a.Shape)
	}
	if a.Device != in.Device {
		return Errorf(ErrInvalidArgument, "amax: on %s but the input is on %s", a.Device, in.Device)
	}
	return nil
}

// ComputeAmax writes the global amaxes a quantize of in would use into out, an
// FP32 [2] tensor on in's device (rowwise, columnwise), so that callers can
// all-reduce them before the cast.
func (q *Quantizer) ComputeAmax(in Tensor, out Tensor, stream uintptr) error {
	if err := checkInput(in); err != nil {
		return err
	}
	if out.DType != Float32 || out.NumElements() != 2 {
		return Errorf(ErrInvalidArgument, "amax: want float32 with 2 elements (rowwise, columnwise), got %s %v", out.DType, out.Shape)
	}
	if out.Device != in.Device {
		return Errorf(ErrInvalidArgument, "amax: on %s but the input is on %s", out.Device, in.Device)
	}
	m, k := Flatten2D(in.Shape)
	if !q.hybrid {
		return q.amax(DirRowwise, in, m, k, BothUsages, out, stream)
	}
	if err := q.amax(DirRowwise, in, m, k, Rowwise, out, stream); err != nil {
		return err
	}
	if q.source != SourceRowwiseDequantized {
		return q.amax(DirColumnwise, in, m, k, Columnwise, out, stream)
	}
	// The columnwise side quantizes dequantize(rowwise(x)), not x (spec §8.3),
	// so its amax is that tensor's: quantize rowwise into a scratch storage
	// first. (A delayed-scaling rowwise state records the amax it would record
	// at the quantize anyway; the record is a max, so twice is once.)
	spec := q.specsFor(in.DType)[DirRowwise]
	row, err := newStorage(spec, DirRowwise, m, k, in.Device, stream)
	if err != nil {
		return err
	}
	defer row.Free(stream)
	kern, err := kernelsFor(spec.Params().Format, in.Device)
	if err != nil {
		return err
	}
	if err := kern.Quantize(&QuantizeRequest{Spec: spec, Input: in, M: m, K: k, Out: [2]*Storage{row, nil}, State: q.states[DirRowwise], Stream: stream}); err != nil {
		return err
	}
	src, err := dequantizeRowwise(row, in, m, k, stream)
	if err != nil {
		return err
	}
	defer FreeTensor(src, stream)
	return q.amax(DirColumnwise, src, m, k, Columnwise, out, stream)
}

func (q *Quantizer) amax(d Direction, in Tensor, m, k int64, want Usage, out Tensor, stream uintptr) error {
	kern, err := kernelsFor(q.specs[d].Params().Format, in.Device)
	if err != nil {
		return err
	}
	return kern.Amax(&AmaxRequest{Spec: q.specs[d], Input: in, M: m, K: k, Want: want, Out: out, Stream: stream})
}
