package host

// DelayedScaling is the state of a delayed-scaling spec (spec §2): an FP32 scale
// and an amax history whose row 0 stages the current step's amax. Both live in
// C memory so that callers can view them as DLTensors.
type DelayedScaling interface {
	State
	// Scale is the FP32 [1] scale the next quantize uses.
	Scale() Tensor
	// AmaxHistory is the FP32 [L] history; element 0 is this step's amax so far.
	AmaxHistory() Tensor
	// Update runs the amax/scale update of spec §2.4. reduced, when non-nil, is the
	// step's amax after the caller reduced it across processes.
	Update(reduced *float32) error
}

// DelayedState returns the delayed-scaling state of a quantizer's direction.
func (q *Quantizer) DelayedState(d Direction) (DelayedScaling, error) {
	ds, ok := q.states[d].(DelayedScaling)
	if !ok {
		return nil, Errorf(ErrState, "quantizer: the %s spec (%s) does not use delayed scaling", d, q.specs[d].Params().Format)
	}
	return ds, nil
}

// DelayedStates returns q's delayed-scaling states: the rowwise one, then the
// columnwise one when it is a state of its own (a hybrid's second). Empty when
// q does not use delayed scaling.
func (q *Quantizer) DelayedStates() []DelayedScaling {
	var out []DelayedScaling
	for d, st := range q.states {
		if d == 1 && st == q.states[0] {
			continue
		}
		if ds, ok := st.(DelayedScaling); ok {
			out = append(out, ds)
		}
	}
	return out
}
