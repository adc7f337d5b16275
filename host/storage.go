package host

import (
	"fmt"
	"reflect"
)

// Buffer is one buffer of a storage: its layout entry and the memory holding it.
type Buffer struct {
	BufferSpec
	Tensor Tensor
	owned  bool // allocated by libquant (freed with the storage) or borrowed from the caller
	// release frees an owned buffer that a BufferAllocator gave; nil: FreeTensor.
	release func()
}

// BufferAllocator is implemented by kernels that place the buffers of their
// format's storages in memory of their own: an out-of-process plugin's kernels
// allocate them in the memory they share with the plugin, so that the plugin
// writes and reads them without a copy. AllocBuffer returns false when it
// cannot (the memory is full): the storage then takes ordinary memory.
type BufferAllocator interface {
	AllocBuffer(b BufferSpec, dev Device) (t Tensor, release func(), ok bool)
}

// Storage is one direction of a quantized tensor: a spec and its buffers, in the
// order of the spec's Layout.
type Storage struct {
	Spec    Spec
	Dir     Direction
	Buffers []Buffer
	Device  Device
}

// Buffer returns the buffer of a kind.
func (s *Storage) Buffer(kind BufferKind) (*Buffer, bool) {
	for i := range s.Buffers {
		if s.Buffers[i].Kind == kind {
			return &s.Buffers[i], true
		}
	}
	return nil, false
}

// MustBuffer returns the buffer of a kind that the format's own layout guarantees.
func (s *Storage) MustBuffer(kind BufferKind) Tensor {
	b, ok := s.Buffer(kind)
	if !ok {
		panic(fmt.Sprintf("storage of %s has no %s buffer", s.Spec.Params().Format, kind))
	}
	return b.Tensor
}

// FormatName is the storage's format.
func (s *Storage) FormatName() string { return s.Spec.Params().Format }

// Free releases the buffers libquant allocated.
func (s *Storage) Free(stream uintptr) {
	if s == nil {
		return
	}
	for i := range s.Buffers {
		switch {
		case s.Buffers[i].owned && s.Buffers[i].release != nil:
			s.Buffers[i].release()
			s.Buffers[i].release = nil
		case s.Buffers[i].owned:
			FreeTensor(s.Buffers[i].Tensor, stream)
		}
		s.Buffers[i].Tensor.Ptr = nil
	}
}

// newStorage allocates direction dir of a [m, k] tensor in spec's layout.
func newStorage(spec Spec, dir Direction, m, k int64, dev Device, stream uintptr) (*Storage, error) {
	layout, err := spec.Layout(m, k, dir)
	if err != nil {
		return nil, err
	}
	st := &Storage{Spec: spec, Dir: dir, Device: dev}
	ba, _ := registeredKernels(spec.Params().Format, dev.Type).(BufferAllocator)
	for _, b := range layout {
		if ba != nil {
			if t, release, ok := ba.AllocBuffer(b, dev); ok {
				st.Buffers = append(st.Buffers, Buffer{BufferSpec: b, Tensor: t, owned: true, release: release})
				continue
			}
		}
		t, err := AllocTensor(dev, b.DType, b.Shape, stream)
		if err != nil {
			st.Free(stream)
			return nil, err
		}
		st.Buffers = append(st.Buffers, Buffer{BufferSpec: b, Tensor: t, owned: true})
	}
	return st, nil
}

// sameLayout reports whether two layouts have identical buffers, so that a
// storage can be re-quantized in place under a new spec.
func sameLayout(a []BufferSpec, b []Buffer) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Kind != b[i].Kind || a[i].DType != b[i].DType || !equalShape(a[i].Shape, b[i].Shape) {
			return false
		}
	}
	return true
}

// sameSpec reports whether a and b are the same spec object. Specs are
// pointer types (every format's NewSpec returns one); a spec of another,
// possibly incomparable, type is never taken as the same.
func sameSpec(a, b Spec) bool {
	if a == nil || b == nil {
		return false
	}
	ta := reflect.TypeOf(a)
	if ta.Kind() != reflect.Pointer || ta != reflect.TypeOf(b) {
		return false
	}
	return a == b
}

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
