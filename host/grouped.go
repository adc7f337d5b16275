package host

import "fmt"

// GroupedKernels is implemented by kernels that can quantize several tensors
// of one spec in one call (one launch on a GPU: MoE experts, issue #15).
// QuantizeGrouped returns handled == false, having done nothing, when it
// cannot take this group (the caller then quantizes one tensor at a time).
// Every request has the same Spec, State, Stream and directions present.
type GroupedKernels interface {
	QuantizeGrouped(rs []QuantizeRequest) (handled bool, err error)
}

// QuantizeGrouped re-quantizes each ins[i] into dsts[i] with q's usage,
// exactly as QuantizeInto would one after the other (delayed scaling records
// every tensor's amax; the result is the same as in sequence). Where the
// device's kernels take the group and every dst already holds storages laid
// out for q (the usual case: buffers allocated once and reused), the kernels
// get all of them in one call; otherwise the tensors go one at a time.
func (q *Quantizer) QuantizeGrouped(ins []Tensor, dsts []*QTensor, opts QuantizeOptions) error {
	if len(ins) != len(dsts) {
		return Errorf(ErrInvalidArgument, "outputs: %d tensors for %d inputs", len(dsts), len(ins))
	}
	if len(ins) == 0 {
		return Errorf(ErrInvalidArgument, "inputs: none given")
	}
	if opts.AmaxIn != nil {
		return Errorf(ErrInvalidArgument, "options.amax: a grouped quantize computes each tensor's amax itself")
	}
	seen := make(map[*QTensor]int, len(dsts))
	for i, d := range dsts {
		if d == nil {
			return Errorf(ErrInvalidArgument, "outputs[%d]: tensor is NULL", i)
		}
		if j, ok := seen[d]; ok {
			return Errorf(ErrInvalidArgument, "outputs[%d]: the same tensor as outputs[%d]", i, j)
		}
		seen[d] = i
		if err := checkInput(ins[i]); err != nil {
			return fmt.Errorf("inputs[%d]: %w", i, err)
		}
		if ins[i].Device != ins[0].Device || ins[i].DType != ins[0].DType {
			return Errorf(ErrInvalidArgument, "inputs[%d]: %s on %s, but inputs[0] is %s on %s (a group has one dtype and one device)",
				i, ins[i].DType, ins[i].Device, ins[0].DType, ins[0].Device)
		}
	}
	usage := q.Usage()
	if done, err := q.quantizeGroup(ins, dsts, usage, opts); done || err != nil {
		return err
	}
	for i := range ins {
		if err := q.QuantizeIntoUsage(ins[i], opts, dsts[i], usage); err != nil {
			return fmt.Errorf("inputs[%d]: %w", i, err)
		}
	}
	return nil
}

// quantizeGroup is QuantizeGrouped's one-call path: done == false (nothing
// done) when the kernels do not take groups or a dst needs what QuantizeInto
// does besides the kernel call (new storages, a changed layout, a dropped
// direction).
func (q *Quantizer) quantizeGroup(ins []Tensor, dsts []*QTensor, usage Usage, opts QuantizeOptions) (done bool, err error) {
	if q.hybrid {
		return false, nil
	}
	specs := q.specsFor(ins[0].DType)
	if sharesStorage(specs[0]) {
		return false, nil
	}
	kern, err := q.kernels(DirRowwise, specs[0], ins[0].Device)
	if err != nil {
		return false, err
	}
	gk, ok := kern.(GroupedKernels)
	if !ok {
		return false, nil
	}
	for _, d := range dsts {
		d.mu.Lock()
		defer d.mu.Unlock()
	}
	reqs := make([]QuantizeRequest, len(ins))
	var want Usage
	for i, d := range dsts {
		m, k := Flatten2D(ins[i].Shape)
		if m != d.m || k != d.k || ins[i].Device != d.device {
			return false, nil // QuantizeIntoUsage reports it
		}
		u := usage
		if d.persistent {
			u |= d.usageLocked()
		}
		if i == 0 {
			want = u
		} else if u != want {
			return false, nil
		}
		var out [2]*Storage
		for dir := range out {
			st := d.dirs[dir]
			has := u.Has(Direction(dir).Usage())
			if has != (st != nil) || (has && !sameSpec(st.Spec, specs[dir])) {
				return false, nil
			}
			out[dir] = st
		}
		reqs[i] = QuantizeRequest{Spec: specs[0], Input: ins[i], M: m, K: k, Out: out, State: q.states[0], Stream: opts.Stream}
	}
	handled, err := gk.QuantizeGrouped(reqs)
	if !handled || err != nil {
		return handled, err
	}
	for i, d := range dsts {
		d.srcDType = ins[i].DType
	}
	return true, nil
}
