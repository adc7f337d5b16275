package host

// SharedStorage is implemented by specs whose one buffer serves both directions
// (identity, spec §8.4): a plain quantizer of such a spec allocates one storage.
type SharedStorage interface {
	SharesStorage() bool
}

func sharesStorage(s Spec) bool {
	ss, ok := s.(SharedStorage)
	return ok && ss.SharesStorage()
}

// InputSpec is implemented by specs whose layout depends on the input's dtype
// (identity that keeps the input's dtype, spec §8.4): ForInput returns the
// spec a quantize of such an input uses, and which its storages keep.
type InputSpec interface {
	ForInput(dt DType) Spec
}

// specsFor resolves q's specs for an input dtype.
func (q *Quantizer) specsFor(dt DType) [2]Spec {
	if !q.inputSpecs {
		return q.specs // no interface assertions per call (issue #15)
	}
	var out [2]Spec
	for d, s := range q.specs {
		if is, ok := s.(InputSpec); ok {
			s = is.ForInput(dt)
		}
		out[d] = s
	}
	return out
}

// Quantize quantizes in into a new tensor with q's current usage.
func (q *Quantizer) Quantize(in Tensor, opts QuantizeOptions) (*QTensor, error) {
	return q.QuantizeUsage(in, opts, q.Usage())
}

// QuantizeUsage is Quantize with an explicit usage instead of q's, so that an
// op sharing q (a linear layer's quantizers, spec §7.4) does not have to
// mutate q's flags around each call.
func (q *Quantizer) QuantizeUsage(in Tensor, opts QuantizeOptions, usage Usage) (*QTensor, error) {
	if err := checkInput(in); err != nil {
		return nil, err
	}
	if err := checkAmaxIn(opts.AmaxIn, in); err != nil {
		return nil, err
	}
	m, k := Flatten2D(in.Shape)
	t := &QTensor{shape: append([]int64(nil), in.Shape...), m: m, k: k, device: in.Device,
		srcDType: in.DType, persistent: opts.Persistent, hybrid: q.hybrid}
	dirs, err := q.run(in, m, k, usage, [2]*Storage{}, opts, &t.req)
	if err != nil {
		return nil, err
	}
	t.dirs = dirs
	return t, nil
}

// QuantizeInto re-quantizes in into dst's buffers (weights updated every step).
// A persistent dst keeps every direction it has, so the union of all usages
// ever asked for stays fresh (spec §10); a temporary one ends up with exactly
// q's usage. Directions whose layout did not change reuse their buffers, so
// caller-owned buffers stay in place.
func (q *Quantizer) QuantizeInto(in Tensor, opts QuantizeOptions, dst *QTensor) error {
	return q.QuantizeIntoUsage(in, opts, dst, q.Usage())
}

// QuantizeIntoUsage is QuantizeInto with an explicit usage instead of q's.
func (q *Quantizer) QuantizeIntoUsage(in Tensor, opts QuantizeOptions, dst *QTensor, usage Usage) error {
	if err := checkInput(in); err != nil {
		return err
	}
	if err := checkAmaxIn(opts.AmaxIn, in); err != nil {
		return err
	}
	if dst == nil {
		return Errorf(ErrInvalidArgument, "dst: tensor is NULL")
	}
	dst.mu.Lock()
	defer dst.mu.Unlock()
	m, k := Flatten2D(in.Shape)
	if m != dst.m || k != dst.k {
		return Errorf(ErrInvalidArgument, "input: shape %v does not match dst's %v", in.Shape, dst.shape)
	}
	if in.Device != dst.device {
		return Errorf(ErrInvalidArgument, "input: on %s but dst is on %s", in.Device, dst.device)
	}
	if opts.Persistent {
		dst.persistent = true
	}
	if dst.persistent {
		usage |= dst.usageLocked()
	}
	specs := q.specsFor(in.DType)
	if dst.pins > 0 {
		// A pinned dst's storages stay as they are: this run must write
		// exactly them, with their specs (PrepareInto).
		shared := dst.dirs[DirRowwise] != nil && dst.dirs[DirRowwise] == dst.dirs[DirColumnwise]
		for d, st := range dst.dirs {
			want := usage.Has(Direction(d).Usage()) || (shared && Direction(d) == DirColumnwise)
			if (st != nil) != want || (st != nil && !sameSpec(st.Spec, specs[d]) && st.Spec.Params() != specs[d].Params()) {
				return errPinned("dst")
			}
		}
	}
	// Storages whose layout changed (a recipe change) cannot be reused; they are
	// replaced if libquant owns them and refused if the caller does.
	reuse := dst.dirs
	for d := range reuse {
		st := reuse[d]
		if st == nil || !usage.Has(Direction(d).Usage()) {
			reuse[d] = nil
			continue
		}
		if sameSpec(st.Spec, specs[d]) {
			// A layout is a function of the spec and [m, k], and both are
			// unchanged: the storage was laid out (or checked) for exactly
			// this, so the re-quantize skips recomputing it (issue #15).
			continue
		}
		want, err := specs[d].Layout(m, k, Direction(d))
		if err != nil {
			return err
		}
		if !sameLayout(want, st.Buffers) {
			for _, b := range st.Buffers {
				if !b.owned {
					return Errorf(ErrState, "dst: the %s buffers are the caller's and the new %s layout differs from their %s one",
						Direction(d), specs[d].Params().Format, st.FormatName())
				}
			}
			reuse[d] = nil
		}
	}
	dirs, err := q.run(in, m, k, usage, reuse, opts, &dst.req)
	if err != nil {
		return err
	}
	// Free what is no longer referenced: replaced storages and, on temporaries,
	// dropped directions.
	for d, old := range dst.dirs {
		if old != nil && old != dirs[0] && old != dirs[1] && (d == 0 || old != dst.dirs[0]) {
			old.Free(opts.Stream)
		}
	}
	dst.dirs = dirs
	dst.hybrid = q.hybrid
	dst.shape = append(dst.shape[:0], in.Shape...)
	dst.srcDType = in.DType
	return nil
}

// run quantizes in for usage into storages, reusing those in reuse (same layout)
// and allocating the rest. On error it frees what it allocated. It has no
// defer: a function whose defers cannot be open-coded (too many returns) pays
// the runtime's defer machinery on every call (issue #15: host time per call).
func (q *Quantizer) run(in Tensor, m, k int64, usage Usage, reuse [2]*Storage, opts QuantizeOptions, req *QuantizeRequest) ([2]*Storage, error) {
	if usage == 0 {
		return [2]*Storage{}, Errorf(ErrInvalidArgument, "quantizer: usage is empty")
	}
	r := runState{q: q, in: in, m: m, k: k, reuse: reuse, opts: opts, specs: q.specsFor(in.DType), req: req}
	var out [2]*Storage
	var err error
	if q.hybrid {
		out, err = r.hybrid(usage)
	} else {
		out, err = r.plain(usage)
	}
	if err != nil {
		r.undo()
		return [2]*Storage{}, err
	}
	return out, nil
}

// plain is run for a plain quantizer.
func (r *runState) plain(usage Usage) (out [2]*Storage, err error) {
	if sharesStorage(r.specs[0]) {
		s, err := r.storage(DirRowwise)
		if err != nil {
			return out, err
		}
		if err := r.quantize(DirRowwise, r.in, [2]*Storage{s, nil}); err != nil {
			return out, err
		}
		return [2]*Storage{s, s}, nil
	}
	for _, d := range []Direction{DirRowwise, DirColumnwise} {
		if usage.Has(d.Usage()) {
			if out[d], err = r.storage(d); err != nil {
				return out, err
			}
		}
	}
	// Both directions in one call: kernels that can read the input once do.
	return out, r.quantize(DirRowwise, r.in, out)
}

// hybrid is run for a hybrid quantizer (spec §8.3): each side runs its own
// quantizer.
func (r *runState) hybrid(usage Usage) (out [2]*Storage, err error) {
	q, in, m, k, opts := r.q, r.in, r.m, r.k, r.opts
	needRow := usage.Has(Rowwise) || (usage.Has(Columnwise) && q.source == SourceRowwiseDequantized)
	var row *Storage
	if needRow {
		if usage.Has(Rowwise) {
			row, err = r.storage(DirRowwise)
			out[DirRowwise] = row
		} else {
			row, err = newStorage(r.specs[DirRowwise], DirRowwise, m, k, in.Device, opts.Stream)
			if err == nil {
				defer row.Free(opts.Stream)
			}
		}
		if err != nil {
			return out, err
		}
		if err := r.quantize(DirRowwise, in, [2]*Storage{row, nil}); err != nil {
			return out, err
		}
	}
	if usage.Has(Columnwise) {
		src := in
		if q.source == SourceRowwiseDequantized {
			tmp, err := dequantizeRowwise(row, in, m, k, opts.Stream)
			if err != nil {
				return out, err
			}
			defer FreeTensor(tmp, opts.Stream)
			src = tmp
		}
		col, err := r.storage(DirColumnwise)
		if err != nil {
			return out, err
		}
		out[DirColumnwise] = col
		if err := r.quantize(DirColumnwise, src, [2]*Storage{nil, col}); err != nil {
			return out, err
		}
	}
	return out, nil
}

// dequantizeRowwise returns a new tensor of in's dtype and shape [m, k] holding
// the dequantized rowwise storage row: the columnwise source of a
// rowwise_dequantized hybrid (spec §8.3, dequantize(dtype=x.dtype)).
func dequantizeRowwise(row *Storage, in Tensor, m, k int64, stream uintptr) (Tensor, error) {
	kern, err := kernelsFor(row.FormatName(), in.Device)
	if err != nil {
		return Tensor{}, err
	}
	tmp, err := AllocTensor(in.Device, in.DType, []int64{m, k}, stream)
	if err != nil {
		return Tensor{}, err
	}
	if err := kern.Dequantize(&DequantizeRequest{Spec: row.Spec, Storage: row, Dir: DirRowwise, M: m, K: k, Out: tmp, Stream: stream}); err != nil {
		FreeTensor(tmp, stream)
		return Tensor{}, err
	}
	return tmp, nil
}

// NewQTensorFromBuffers assembles a tensor of the given shape over caller-owned
// buffers, one per entry of q.Layout(shape) in that order. The buffers are
// borrowed: freeing the tensor leaves them alone.
func (q *Quantizer) NewQTensorFromBuffers(shape []int64, bufs []Tensor) (*QTensor, error) {
	layout, err := q.Layout(shape)
	if err != nil {
		return nil, err
	}
	if len(bufs) != len(layout) {
		return nil, Errorf(ErrInvalidArgument, "buffers: got %d, the layout for %v with usage %s has %d", len(bufs), shape, q.Usage(), len(layout))
	}
	m, k := Flatten2D(shape)
	t := &QTensor{shape: append([]int64(nil), shape...), m: m, k: k, hybrid: q.hybrid}
	for i, l := range layout {
		b := bufs[i]
		if i == 0 {
			t.device = b.Device
		}
		switch {
		case b.Device != t.device:
			return nil, Errorf(ErrInvalidArgument, "buffers[%d]: on %s but buffers[0] is on %s", i, b.Device, t.device)
		case b.DType != l.DType:
			return nil, Errorf(ErrInvalidArgument, "buffers[%d] (%s %s): dtype %s, want %s", i, l.Dir, l.Kind, b.DType, l.DType)
		case !equalShape(b.Shape, l.Shape):
			return nil, Errorf(ErrInvalidArgument, "buffers[%d] (%s %s): shape %v, want %v", i, l.Dir, l.Kind, b.Shape, l.Shape)
		case b.Ptr == nil && b.Bytes() > 0:
			return nil, Errorf(ErrInvalidArgument, "buffers[%d] (%s %s): data is NULL", i, l.Dir, l.Kind)
		}
		st := t.dirs[l.Dir]
		if st == nil {
			st = &Storage{Spec: q.specs[l.Dir], Dir: l.Dir, Device: b.Device}
			t.dirs[l.Dir] = st
		}
		st.Buffers = append(st.Buffers, Buffer{BufferSpec: l.BufferSpec, Tensor: b})
	}
	if !q.hybrid && sharesStorage(q.specs[0]) && t.dirs[DirRowwise] != nil {
		t.dirs[DirColumnwise] = t.dirs[DirRowwise]
	}
	return t, nil
}

// runState is one run's bookkeeping, in fixed arrays and methods rather than
// closures over growing slices, so that a re-quantize into existing storages
// allocates nothing (issue #15: host time per call).
type runState struct {
	q           *Quantizer
	in          Tensor
	m, k        int64
	reuse       [2]*Storage
	opts        QuantizeOptions
	specs       [2]Spec
	allocated   [2]*Storage
	nalloc      int
	respecified [2]*Storage
	oldSpecs    [2]Spec
	nrespec     int
	// req is the request the kernels get: the destination tensor's, which the
	// run holds exclusively (issue #15: no pool, no allocation per call).
	req *QuantizeRequest
}

func (r *runState) storage(d Direction) (*Storage, error) {
	if st := r.reuse[d]; st != nil {
		r.respecified[r.nrespec], r.oldSpecs[r.nrespec] = st, st.Spec
		r.nrespec++
		st.Spec = r.specs[d]
		return st, nil
	}
	s, err := newStorage(r.specs[d], d, r.m, r.k, r.in.Device, r.opts.Stream)
	if err != nil {
		return nil, err
	}
	r.allocated[r.nalloc] = s
	r.nalloc++
	return s, nil
}

// undo frees what the run allocated; a reused storage keeps describing the
// bytes it still holds.
func (r *runState) undo() {
	for _, s := range r.allocated[:r.nalloc] {
		s.Free(r.opts.Stream)
	}
	for i, st := range r.respecified[:r.nrespec] {
		st.Spec = r.oldSpecs[i]
	}
}

// request is the kernels' request to quantize src ([m, k]) in direction d
// with spec into outs: runState.quantize's, and the one PrepareInto prepares.
func (q *Quantizer) request(d Direction, spec Spec, src Tensor, m, k int64, outs [2]*Storage, opts QuantizeOptions) QuantizeRequest {
	return QuantizeRequest{Spec: spec, Input: src, M: m, K: k, Out: outs, AmaxIn: opts.AmaxIn, State: q.states[d], Stream: opts.Stream}
}

func (r *runState) quantize(d Direction, src Tensor, outs [2]*Storage) error {
	spec := r.specs[d]
	kern, err := r.q.kernels(d, spec, r.in.Device)
	if err != nil {
		return err
	}
	req := r.req
	*req = r.q.request(d, spec, src, r.m, r.k, outs, r.opts)
	err = kern.Quantize(req)
	*req = QuantizeRequest{} // holds no references past the call
	return err
}
