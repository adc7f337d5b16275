package host

// DelayedScaling is the state of a delayed-scaling spec (spec §2): an FP32 scale
// and an amax history whose row 0 stages the current step's amax. Both live in
// C memory so that callers can view them as DLTensors; after a quantize on a
// device whose plugin runs the update there, they live in that device's memory
// instead (no stream synchronization per quantize, issue #15), and Fetch
// copies them back into the C views when a caller asks.
type DelayedScaling interface {
	State
	// Fetch makes Scale and AmaxHistory hold the current values: for a state in
	// device memory it copies them back, waiting for the stream of its last
	// quantize or update; otherwise it does nothing. Values written into the
	// views of a state in device memory are not seen by later quantizes.
	Fetch() error
	// Scale is the FP32 [1] scale the next quantize uses (as of the last Fetch
	// for a state in device memory).
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

// DeviceDelayedState is implemented by delayed-scaling states that can live in
// device memory. DeviceBuffers moves the state to dev (a copy ordered on
// stream) if it is not there yet and returns its FP32 scale [1] and history
// [L] there; stream becomes the stream later updates and fetches are ordered
// on. A kernel casts with *scale and max-reduces the amax into history[0] on
// the device (spec §2.3).
type DeviceDelayedState interface {
	DeviceBuffers(dev Device, stream uintptr) (scale, history Tensor, err error)
}

// DelayedUpdateRequest is the spec §2.4 update of a state in device memory:
// Reduced, when not nil, is the step's amax reduced across processes;
// ScaledMax is fl32(fp8_max · 2^-margin).
type DelayedUpdateRequest struct {
	Spec           Spec
	Scale, History Tensor
	Reduced        *float32
	ScaledMax      float32
	Stream         uintptr
}

// DelayedUpdater is implemented by the kernels of devices that can run the
// delayed-scaling update where the state lives.
type DelayedUpdater interface {
	DelayedUpdate(r *DelayedUpdateRequest) error
}

// DelayedGroupUpdater is implemented by kernels that run several updates in
// one call (a plugin's delayed_update_grouped: one launch for a linear
// layer's input and weight states). The requests share a stream and no
// buffer. handled is false when the kernels have none; the caller then
// updates each state alone.
type DelayedGroupUpdater interface {
	DelayedUpdateGrouped(rs []DelayedUpdateRequest) (handled bool, err error)
}

// GroupUpdatable is implemented by delayed-scaling states that can join
// others of their implementation in one grouped update.
type GroupUpdatable interface {
	DelayedScaling
	// UpdateGroup runs Update(reduced[i]) on every state of states (reduced:
	// nil, or one entry per state), in as few kernel calls as the states'
	// devices and streams allow. The result equals updating them in order.
	UpdateGroup(states []DelayedScaling, reduced []*float32) error
}

// UpdateDelayed runs Update(reduced[i]) on each of states (reduced: nil, or
// one entry per state), grouped where the states' implementation can.
func UpdateDelayed(states []DelayedScaling, reduced []*float32) error {
	if reduced != nil && len(reduced) != len(states) {
		return Errorf(ErrInvalidArgument, "reduced: %d amaxes for %d states", len(reduced), len(states))
	}
	if len(states) == 0 {
		return nil
	}
	if g, ok := states[0].(GroupUpdatable); ok {
		return g.UpdateGroup(states, reduced)
	}
	for i, ds := range states {
		var r *float32
		if reduced != nil {
			r = reduced[i]
		}
		if err := ds.Update(r); err != nil {
			return err
		}
	}
	return nil
}
