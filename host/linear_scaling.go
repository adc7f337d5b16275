package host

// LinearPass names the forward or backward delayed-scaling state (spec §2.2:
// a module keeps one of each).
type LinearPass int32

const (
	PassForward  LinearPass = 1 // the input and weight quantizers
	PassBackward LinearPass = 2 // the grad_output quantizers
)

// isDelayed reports whether either direction of q uses delayed scaling.
func isDelayed(q *Quantizer) bool {
	for d := range q.states {
		if _, ok := q.states[d].(DelayedScaling); ok {
			return true
		}
	}
	return false
}

func (l *Linear) anyDelayed() (LinearTensor, int, bool) {
	for t, qs := range l.quantizers {
		for g, q := range qs {
			if isDelayed(q) {
				return LinearTensor(t), g, true
			}
		}
	}
	return 0, 0, false
}

// scalingSlots lists the delayed-scaling states of a pass, in the order
// ScalingAmaxes and UpdateScaling use: GEMM by GEMM; within a GEMM the input
// then the weight quantizer (forward) or the grad_output quantizer
// (backward); within a quantizer the rowwise state, then the columnwise one
// when a hybrid has a second.
func (l *Linear) scalingSlots(p LinearPass) ([]DelayedScaling, error) {
	var roles []LinearTensor
	switch p {
	case PassForward:
		roles = []LinearTensor{LinearInput, LinearWeight}
	case PassBackward:
		roles = []LinearTensor{LinearGradOutput}
	default:
		return nil, Errorf(ErrInvalidArgument, "pass: %d is not forward (1) or backward (2)", int32(p))
	}
	var out []DelayedScaling
	for g := range l.weights {
		for _, t := range roles {
			q := l.quantizers[t][g]
			for d, st := range q.states {
				if d == 1 && st == q.states[0] {
					continue
				}
				if ds, ok := st.(DelayedScaling); ok {
					out = append(out, ds)
				}
			}
		}
	}
	return out, nil
}

// ScalingAmaxes returns the amax each delayed-scaling state of the pass has
// staged this step (its history[0]), for a caller to all-reduce (MAX) across
// processes and hand to UpdateScaling. Empty when no quantizer of the pass
// uses delayed scaling.
func (l *Linear) ScalingAmaxes(p LinearPass) ([]float32, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkLive(); err != nil {
		return nil, err
	}
	slots, err := l.scalingSlots(p)
	if err != nil {
		return nil, err
	}
	out := make([]float32, len(slots))
	for i, ds := range slots {
		var a [1]float32
		LoadFloat32(ds.AmaxHistory(), 0, a[:])
		out[i] = a[0]
	}
	return out, nil
}

// UpdateScaling runs the amax-history and scale update (spec §2.4) on every
// delayed-scaling state of the pass: for the forward pass after the forward
// step, for the backward pass at the end of backward. reduced, when not nil,
// holds one amax per slot (ScalingAmaxes' order) reduced across processes.
func (l *Linear) UpdateScaling(p LinearPass, reduced []float32) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkLive(); err != nil {
		return err
	}
	slots, err := l.scalingSlots(p)
	if err != nil {
		return err
	}
	if reduced != nil && len(reduced) != len(slots) {
		return Errorf(ErrInvalidArgument, "reduced_amaxes: %d given, the %s pass has %d delayed-scaling states", len(reduced), passName(p), len(slots))
	}
	for i, r := range reduced {
		if !(r >= 0) {
			return Errorf(ErrInvalidArgument, "reduced_amaxes[%d]: %g must be a non-negative number", i, r)
		}
	}
	for i, ds := range slots {
		var r *float32
		if reduced != nil {
			r = &reduced[i]
		}
		if err := ds.Update(r); err != nil {
			return err
		}
	}
	return nil
}

func passName(p LinearPass) string {
	if p == PassForward {
		return "forward"
	}
	return "backward"
}
