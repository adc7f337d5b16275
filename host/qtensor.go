package host

import "sync"

// QTensor is a quantized tensor: a logical shape and up to two direction
// storages. A hybrid tensor is one whose two storages use different formats.
type QTensor struct {
	mu       sync.RWMutex
	shape    []int64
	m, k     int64
	device   Device
	srcDType DType
	dirs     [2]*Storage
	// persistent tensors (weights) never lose a usage when re-quantized in place
	// (spec §10).
	persistent bool
	// hybrid tensors came from a hybrid quantizer: a missing direction cannot be
	// derived from the other one, whose format differs (spec §7.4).
	hybrid bool
	// req is the kernels' request of a quantize into t, used under mu (or
	// before t is published): a pointer the kernels' interface call would
	// otherwise allocate or take from a pool on every call (issue #15).
	req QuantizeRequest
	// pins counts the prepared quantizes (PrepareInto) that write into t's
	// storages: while any is open, nothing replaces, drops or re-lays-out them.
	pins int
}

// Shape returns a copy of the logical shape.
func (t *QTensor) Shape() []int64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return append([]int64(nil), t.shape...)
}

// Dims2D is the flattened [M, K] view.
func (t *QTensor) Dims2D() (m, k int64) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.m, t.k
}

// Device is where the buffers live.
func (t *QTensor) Device() Device { return t.device }

// SourceDType is the dtype of the tensor it was quantized from.
func (t *QTensor) SourceDType() DType { return t.srcDType }

// Persistent reports whether usages are kept across in-place re-quantization.
func (t *QTensor) Persistent() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.persistent
}

// SetPersistent marks the tensor as a persistent one (or not).
func (t *QTensor) SetPersistent(p bool) {
	t.mu.Lock()
	t.persistent = p
	t.mu.Unlock()
}

// Usage is the set of directions present.
func (t *QTensor) Usage() Usage {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.usageLocked()
}

func (t *QTensor) usageLocked() Usage {
	var u Usage
	for d, s := range t.dirs {
		if s != nil {
			u |= Direction(d).Usage()
		}
	}
	return u
}

// Storage returns the storage of a direction.
func (t *QTensor) Storage(d Direction) (*Storage, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	s := t.dirs[d]
	return s, s != nil
}

// Free releases every buffer libquant allocated for the tensor.
func (t *QTensor) Free() { t.FreeOn(0) }

// FreeOn is Free ordered on stream: a device's stream-ordered allocator
// reuses the buffers only after the work queued on stream before it, so pass
// the stream that last used t.
func (t *QTensor) FreeOn(stream uintptr) {
	t.mu.Lock()
	defer t.mu.Unlock()
	freeDirs(t.dirs, stream)
	t.dirs = [2]*Storage{}
}

// freeDirs frees the storages of dirs, once each when both directions share one.
func freeDirs(dirs [2]*Storage, stream uintptr) {
	dirs[DirRowwise].Free(stream)
	if dirs[DirColumnwise] != dirs[DirRowwise] {
		dirs[DirColumnwise].Free(stream)
	}
}

// Dequantize writes direction dir of t into out, which must be FP32, BF16 or FP16
// with t's element count, contiguous, on t's device. dir < 0 picks rowwise when
// present, else columnwise (spec §8.3). Values stored in a transformed domain
// come back transformed; DequantizeWith can undo the transform.
func (t *QTensor) Dequantize(dir Direction, out Tensor, stream uintptr) error {
	return t.DequantizeWith(dir, out, DequantizeOptions{Stream: stream})
}

// DequantizeOptions are the optional inputs of a dequantize.
type DequantizeOptions struct {
	Stream uintptr
	// UndoTransform maps values a format stores in a transformed domain (see
	// TransformDequantizer) back to the input's domain. Without it the stored
	// values come back as they are.
	UndoTransform bool
}

// DequantizeWith is Dequantize with options.
func (t *QTensor) DequantizeWith(dir Direction, out Tensor, opts DequantizeOptions) error {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if dir < 0 {
		dir = DirRowwise
		if t.dirs[DirRowwise] == nil {
			dir = DirColumnwise
		}
	}
	if dir != DirRowwise && dir != DirColumnwise {
		return Errorf(ErrInvalidArgument, "direction: %d is not rowwise or columnwise", dir)
	}
	st := t.dirs[dir]
	if st == nil {
		return Errorf(ErrState, "tensor: has no %s data (usage %s)", dir, t.usageLocked())
	}
	if !out.DType.IsHighPrecision() {
		return Errorf(ErrInvalidArgument, "out: dtype %s not supported (want float32, bfloat16 or float16)", out.DType)
	}
	if out.NumElements() != t.m*t.k {
		return Errorf(ErrInvalidArgument, "out: shape %v has %d elements, tensor %v has %d", out.Shape, out.NumElements(), t.shape, t.m*t.k)
	}
	if out.Device != t.device {
		return Errorf(ErrInvalidArgument, "out: on %s but the tensor is on %s", out.Device, t.device)
	}
	k, err := kernelsFor(st.FormatName(), t.device)
	if err != nil {
		return err
	}
	req := &DequantizeRequest{Spec: st.Spec, Storage: st, Dir: dir, M: t.m, K: t.k, Out: out, Stream: opts.Stream}
	if opts.UndoTransform {
		if td, ok := k.(TransformDequantizer); ok {
			return td.DequantizeUntransformed(req)
		}
		if ts, ok := st.Spec.(TransformedSpec); ok && ts.Transformed(dir) {
			return Errorf(ErrUnsupported, "undo_transform: the %s kernels on %s cannot undo the %s transform of the %s data; dequantize on the CPU",
				st.FormatName(), t.device, st.FormatName(), dir)
		}
	}
	return k.Dequantize(req)
}

// Layout describes the buffers a quantizer would produce for shape, per
// direction in its usage, rowwise first.
type Layout struct {
	Dir Direction
	BufferSpec
}

// UpdateUsage makes t hold exactly the directions in u (spec §7.4
// update_usage): a missing direction is derived from the other where the format
// allows it, an extra one is dropped. Everything is validated first, so on
// error t is unchanged. A persistent tensor never drops a direction (spec §10).
func (t *QTensor) UpdateUsage(u Usage, stream uintptr) error {
	if err := checkUsage(u); err != nil {
		return err
	}
	if u == 0 {
		return Errorf(ErrInvalidArgument, "usage: must name at least one direction")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	have := t.usageLocked()
	if t.pins > 0 && u != have {
		return errPinned("usage")
	}
	if drop := have &^ u; drop != 0 && t.persistent {
		return Errorf(ErrState, "usage: a persistent tensor never drops a direction (it would drop %s)", drop)
	}
	var add []Direction
	for _, d := range []Direction{DirRowwise, DirColumnwise} {
		if u.Has(d.Usage()) && !have.Has(d.Usage()) {
			add = append(add, d)
		}
	}
	if len(add) > 0 && t.dirs[DirRowwise] == t.dirs[DirColumnwise] {
		add = nil // a shared (identity) storage already serves both directions
	}
	type derivation struct {
		kern     Kernels
		from, to Direction
		src      *Storage
	}
	var plan []derivation
	for _, to := range add {
		from := 1 - to
		src := t.dirs[from]
		switch {
		case t.hybrid:
			return Errorf(ErrState, "usage: a hybrid tensor can only drop directions; %s data cannot come from %s data of another format", to, from)
		case !src.Spec.Derivable(from, to):
			return Errorf(ErrState, "usage: format %s cannot derive %s data from %s data; quantize again with that usage", src.FormatName(), to, from)
		}
		kern, err := kernelsFor(src.FormatName(), t.device)
		if err != nil {
			return err
		}
		plan = append(plan, derivation{kern, from, to, src})
	}
	dirs := t.dirs
	for _, p := range plan {
		st, err := newStorage(p.src.Spec, p.to, t.m, t.k, t.device, stream)
		if err != nil {
			return err
		}
		if err := p.kern.Derive(&DeriveRequest{Spec: p.src.Spec, From: p.src, To: st, FromDir: p.from, ToDir: p.to, M: t.m, K: t.k, Stream: stream}); err != nil {
			st.Free(stream)
			return err
		}
		dirs[p.to] = st
	}
	if dirs[DirRowwise] != dirs[DirColumnwise] {
		for _, d := range []Direction{DirRowwise, DirColumnwise} {
			if !u.Has(d.Usage()) && dirs[d] != nil {
				dirs[d].Free(stream)
				dirs[d] = nil
			}
		}
	}
	t.dirs = dirs
	return nil
}

// ScaleSwizzler is implemented by the kernels of formats whose scales have a
// GEMM-swizzled layout besides the compact one (spec §4.6, §4.7, §5.3).
type ScaleSwizzler interface {
	// SwizzleScales rewrites st's scale_inv in place into the swizzled (true) or
	// compact (false) layout; the buffer's shape and size do not change.
	SwizzleScales(st *Storage, dir Direction, m, k int64, swizzled bool) error
}

// SetGEMMSwizzledScales converts every direction's scales to the GEMM-swizzled
// (true) or compact (false) layout; directions already there are left alone.
func (t *QTensor) SetGEMMSwizzledScales(swizzled bool, stream uintptr) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	type step struct {
		st   *Storage
		dir  Direction
		sw   ScaleSwizzler
		spec Spec
	}
	var steps []step
	for d, st := range t.dirs {
		if st == nil || (d == 1 && st == t.dirs[0]) || st.Spec.Params().GEMMSwizzledScales == swizzled {
			continue
		}
		kern, err := kernelsFor(st.FormatName(), t.device)
		if err != nil {
			return err
		}
		sw, ok := kern.(ScaleSwizzler)
		if !ok {
			return Errorf(ErrUnsupported, "tensor: format %s has no GEMM-swizzled scale layout", st.FormatName())
		}
		p := st.Spec.Params()
		p.GEMMSwizzledScales = swizzled
		spec, err := NewSpec(p)
		if err != nil {
			return err
		}
		steps = append(steps, step{st, Direction(d), sw, spec})
	}
	if len(steps) > 0 && t.pins > 0 {
		return errPinned("tensor")
	}
	for _, s := range steps {
		if err := s.sw.SwizzleScales(s.st, s.dir, t.m, t.k, swizzled); err != nil {
			return err
		}
		s.st.Spec = s.spec
	}
	return nil
}

// StorageBytes sums the buffers of the directions in u (a storage serving
// both directions counts once).
func (t *QTensor) StorageBytes(u Usage) int64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var n int64
	for d, st := range t.dirs {
		if st == nil || !u.Has(Direction(d).Usage()) || (d == 1 && st == t.dirs[0] && u.Has(Rowwise)) {
			continue
		}
		for _, b := range st.Buffers {
			n += b.Tensor.Bytes()
		}
	}
	return n
}
