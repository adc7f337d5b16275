package linear

import "libquant/host"

// Pass names the forward or backward delayed-scaling state (spec §2.2:
// a module keeps one of each).
type Pass int32

const (
	PassForward  Pass = 1 // the input and weight quantizers
	PassBackward Pass = 2 // the grad_output quantizers
)

// isDelayed reports whether either direction of q uses delayed scaling.
func isDelayed(q *host.Quantizer) bool {
	return len(q.DelayedStates()) > 0
}

func (l *Layer) anyDelayed() (Tensor, int, bool) {
	for t, qs := range l.quantizers {
		for g, q := range qs {
			if isDelayed(q) {
				return Tensor(t), g, true
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
func (l *Layer) scalingSlots(p Pass) ([]host.DelayedScaling, error) {
	var roles []Tensor
	switch p {
	case PassForward:
		roles = []Tensor{Input, Weight}
	case PassBackward:
		roles = []Tensor{GradOutput}
	default:
		return nil, host.Errorf(host.ErrInvalidArgument, "pass: %d is not forward (1) or backward (2)", int32(p))
	}
	var out []host.DelayedScaling
	for g := range l.weights {
		for _, t := range roles {
			q := l.quantizers[t][g]
			out = append(out, q.DelayedStates()...)
		}
	}
	return out, nil
}

// ScalingAmaxes returns the amax each delayed-scaling state of the pass has
// staged this step (its history[0]), for a caller to all-reduce (MAX) across
// processes and hand to UpdateScaling. Empty when no quantizer of the pass
// uses delayed scaling.
func (l *Layer) ScalingAmaxes(p Pass) ([]float32, error) {
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
		if err := ds.Fetch(); err != nil {
			return nil, err
		}
		var a [1]float32
		host.LoadFloat32(ds.AmaxHistory(), 0, a[:])
		out[i] = a[0]
	}
	return out, nil
}

// UpdateScaling runs the amax-history and scale update (spec §2.4) on every
// delayed-scaling state of the pass: for the forward pass after the forward
// step, for the backward pass at the end of backward. reduced, when not nil,
// holds one amax per slot (ScalingAmaxes' order) reduced across processes.
func (l *Layer) UpdateScaling(p Pass, reduced []float32) error {
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
		return host.Errorf(host.ErrInvalidArgument, "reduced_amaxes: %d given, the %s pass has %d delayed-scaling states", len(reduced), passName(p), len(slots))
	}
	for i, r := range reduced {
		if !(r >= 0) {
			return host.Errorf(host.ErrInvalidArgument, "reduced_amaxes[%d]: %g must be a non-negative number", i, r)
		}
	}
	var rs []*float32
	if reduced != nil {
		rs = make([]*float32, len(reduced))
		for i := range reduced {
			rs[i] = &reduced[i]
		}
	}
	// One kernel call for the pass's states where they share a device and a
	// stream (host.UpdateDelayed).
	return host.UpdateDelayed(slots, rs)
}

func passName(p Pass) string {
	if p == PassForward {
		return "forward"
	}
	return "backward"
}
