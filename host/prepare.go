package host

// A quantize repeated on inputs of one layout (a training step's activations,
// a decode step's tokens) spends most of its host time re-checking what did
// not change: the input's dtype, shape and strides, dst's layout, the
// quantizer's specs and kernels (issue #15: host time per call). PrepareInto
// does that work once and hands the caller a PreparedQuantize; a kernel
// provider that can (the native plugins) also builds the kernel call itself,
// so that a later run only patches the input's address and the stream.

// PreparedKernel is a kernel call built once by a KernelPreparer, run many
// times by the C ABI (capi) with a new input address and stream. Close frees
// it; the caller guarantees no run is in flight.
type PreparedKernel interface {
	Close()
}

// KernelPreparer is implemented by kernels that can build a quantize call
// once for repeated runs. PrepareQuantize returns nil (and no error) where
// the call needs host work on every run (a delayed-scaling state kept on the
// host, scratch lent by a caller's allocator), so that the run goes through
// QuantizeIntoUsage instead.
type KernelPreparer interface {
	PrepareQuantize(r *QuantizeRequest) (PreparedKernel, error)
}

// PreparedQuantize is QuantizeIntoUsage(in, opts, dst, usage) ready to repeat:
// dst is pinned (pin) until Close, so that nothing replaces, drops, frees or
// re-lays-out the storages the prepared kernel call writes.
type PreparedQuantize struct {
	dst *QTensor
	// Kernel is the prepared kernel call, or nil: then every run is a
	// QuantizeIntoUsage of the same arguments.
	Kernel PreparedKernel
}

// PrepareInto runs QuantizeIntoUsage(in, opts, dst, usage) once (so that dst
// holds the storages the runs write) and prepares its repetition. A plain
// quantizer whose kernels implement KernelPreparer gets a prepared kernel
// call (the one call QuantizeIntoUsage makes, spec §8.3's plain case); a
// hybrid quantizer, whose quantize is two kernel calls, gets none.
func (q *Quantizer) PrepareInto(in Tensor, opts QuantizeOptions, dst *QTensor, usage Usage) (*PreparedQuantize, error) {
	if err := q.QuantizeIntoUsage(in, opts, dst, usage); err != nil {
		return nil, err
	}
	dst.mu.Lock()
	defer dst.mu.Unlock()
	p := &PreparedQuantize{dst: dst}
	if !q.hybrid {
		specs := q.specsFor(in.DType)
		out := dst.dirs
		if sharesStorage(specs[DirRowwise]) {
			out[DirColumnwise] = nil // plain's one call for a shared storage
		}
		kern, err := q.kernels(DirRowwise, specs[DirRowwise], in.Device)
		if err != nil {
			return nil, err
		}
		if kp, ok := kern.(KernelPreparer); ok {
			r := q.request(DirRowwise, specs[DirRowwise], in, dst.m, dst.k, out, opts)
			if p.Kernel, err = kp.PrepareQuantize(&r); err != nil {
				return nil, err
			}
		}
	}
	dst.pins++
	return p, nil
}

// Close unpins dst and frees the prepared kernel call. The caller guarantees
// that no run is in flight.
func (p *PreparedQuantize) Close() {
	if p.Kernel != nil {
		p.Kernel.Close()
		p.Kernel = nil
	}
	p.dst.mu.Lock()
	p.dst.pins--
	p.dst.mu.Unlock()
}

// Pinned reports whether prepared quantizes write into t (PrepareInto): then
// its storages stay as they are until every one is closed.
func (t *QTensor) Pinned() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.pins > 0
}

// errPinned is what a change to a pinned tensor's storages returns.
func errPinned(what string) error {
	return Errorf(ErrState, "%s: a quantize plan writes into this tensor's buffers; free the plan first", what)
}
