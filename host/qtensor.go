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
func (t *QTensor) Free() {
	t.mu.Lock()
	defer t.mu.Unlock()
	freeDirs(t.dirs, 0)
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
// present, else columnwise (spec §8.3).
func (t *QTensor) Dequantize(dir Direction, out Tensor, stream uintptr) error {
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
	return k.Dequantize(&DequantizeRequest{Spec: st.Spec, Storage: st, Dir: dir, M: t.m, K: t.k, Out: out, Stream: stream})
}

// Layout describes the buffers a quantizer would produce for shape, per
// direction in its usage, rowwise first.
type Layout struct {
	Dir Direction
	BufferSpec
}
