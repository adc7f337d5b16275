package host

import (
	"sort"
	"sync"
	"sync/atomic"
)

// BufferKind names the role of a storage buffer.
type BufferKind int32

const (
	BufData     BufferKind = 0 // the quantized elements
	BufScaleInv BufferKind = 1 // the dequantization scales
	BufAmax     BufferKind = 2 // the amax the scales came from (FP32)
)

func (k BufferKind) String() string {
	switch k {
	case BufData:
		return "data"
	case BufScaleInv:
		return "scale_inv"
	case BufAmax:
		return "amax"
	}
	return "buffer"
}

// BufferSpec describes one buffer of a direction's storage.
type BufferSpec struct {
	Kind  BufferKind
	DType DType
	Shape []int64
}

// Bytes is the size of the buffer.
func (b BufferSpec) Bytes() int64 { return Tensor{DType: b.DType, Shape: b.Shape}.Bytes() }

// Format is a plugin's number format. Formats register at init with RegisterFormat.
type Format interface {
	Name() string
	// NewSpec validates p (whose Format is this format's name), fills its defaults
	// and returns the spec of one direction.
	NewSpec(p Params) (Spec, error)
}

// Spec is a format with its parameters: everything needed to lay out and
// interpret one direction's storage.
type Spec interface {
	Params() Params
	// Layout lists the buffers direction dir of a [m, k] tensor holds. It fails with
	// ErrInvalidArgument naming the dim when the format cannot hold that shape.
	Layout(m, k int64, dir Direction) ([]BufferSpec, error)
	// Derivable reports whether a tensor holding only direction from can create
	// direction to without re-quantizing (update_usage, spec §7.4).
	Derivable(from, to Direction) bool
	// NewState returns the mutable state a quantizer keeps for this spec (the
	// delayed-scaling amax history), or nil for stateless formats.
	NewState() (State, error)
}

// State is a quantizer's per-spec mutable state.
type State interface {
	Free()
}

// QuantizeRequest is one quantize call: Input is contiguous with its 2-D view
// [M, K]; Out holds the pre-allocated storage of each direction to write (nil for
// directions not asked for). AmaxIn, when set, is a caller-provided FP32 [2]
// amax (rowwise, columnwise) to use instead of computing it, for callers that
// all-reduce it across processes first.
type QuantizeRequest struct {
	Spec   Spec
	Input  Tensor
	M, K   int64
	Out    [2]*Storage
	AmaxIn *Tensor
	State  State
	Stream uintptr
}

// AmaxRequest asks for the global amax(es) a quantize of Input would use, written
// to Out, an FP32 [2] tensor on the input's device: slot 0 for rowwise, slot 1
// for columnwise. Only the slots of the directions in Want are written.
type AmaxRequest struct {
	Spec   Spec
	Input  Tensor
	M, K   int64
	Want   Usage
	Out    Tensor
	Stream uintptr
}

// DequantizeRequest writes direction Dir of Storage into Out (FP32, BF16 or FP16,
// the logical [M, K] shape).
type DequantizeRequest struct {
	Spec    Spec
	Storage *Storage
	Dir     Direction
	M, K    int64
	Out     Tensor
	Stream  uintptr
}

// DeriveRequest fills storage To (direction ToDir) from storage From without
// re-quantizing, for a spec whose Derivable(from, to) is true.
type DeriveRequest struct {
	Spec           Spec
	From, To       *Storage
	FromDir, ToDir Direction
	M, K           int64
	Stream         uintptr
}

// Kernels are one format's operations on one device type.
type Kernels interface {
	Amax(r *AmaxRequest) error
	Quantize(r *QuantizeRequest) error
	Dequantize(r *DequantizeRequest) error
	Derive(r *DeriveRequest) error
}

// TransformDequantizer is implemented by the kernels of formats that can store a
// direction in a transformed domain (nvfp4's random Hadamard transform of the
// columnwise copy, spec §5.5). Their Dequantize returns the stored, transformed
// values; DequantizeUntransformed maps them back to the input's domain. A
// direction stored without a transform gives what Dequantize gives. Kernels
// that do not implement it store every direction untransformed.
type TransformDequantizer interface {
	DequantizeUntransformed(r *DequantizeRequest) error
}

// TransformedSpec is implemented by specs that may store a direction in a
// transformed domain; host uses it to refuse an undo-transform dequantize on a
// device whose kernels cannot do it, instead of returning transformed values.
type TransformedSpec interface {
	Transformed(dir Direction) bool
}

type kernelKey struct {
	format string
	device DeviceType
}

var registry = struct {
	sync.RWMutex
	formats map[string]Format
	kernels map[kernelKey]Kernels
}{formats: map[string]Format{}, kernels: map[kernelKey]Kernels{}}

// RegisterFormat adds a format; a second format of the same name is an error.
func RegisterFormat(f Format) error {
	registry.Lock()
	defer registry.Unlock()
	if _, ok := registry.formats[f.Name()]; ok {
		return Errorf(ErrInvalidArgument, "format %q is already registered", f.Name())
	}
	registry.formats[f.Name()] = f
	return nil
}

// RegisterKernels sets the kernels of a format on a device type, replacing any
// earlier ones (a loaded plugin may provide faster kernels).
func RegisterKernels(format string, dev DeviceType, k Kernels) {
	registry.Lock()
	defer registry.Unlock()
	registry.kernels[kernelKey{format, dev}] = k
	registryGen.Add(1)
}

// registryGen counts kernel registrations, so that quantizers can keep the
// kernels they resolved until a plugin load replaces them.
var registryGen atomic.Uint64

// resolvedKernels is a quantizer direction's kernels for a device type, as of
// registry generation gen.
type resolvedKernels struct {
	gen    uint64
	format string
	dev    DeviceType
	k      Kernels
}

// kernels returns the kernels of direction d's spec on dev, resolved once per
// quantizer, direction and device type rather than looked up by name on every
// call (issue #15: host time per call).
func (q *Quantizer) kernels(d Direction, spec Spec, dev Device) (Kernels, error) {
	gen := registryGen.Load()
	format := spec.Params().Format
	if c := q.resolved[d].Load(); c != nil && c.gen == gen && c.dev == dev.Type && c.format == format {
		return c.k, nil
	}
	k, err := kernelsFor(format, dev)
	if err != nil {
		return nil, err
	}
	q.resolved[d].Store(&resolvedKernels{gen: gen, format: format, dev: dev.Type, k: k})
	return k, nil
}

// MustRegister registers a built-in format and its CPU kernels, panicking on a
// duplicate name: it runs at init, where a duplicate is a build mistake.
func MustRegister(f Format, cpu Kernels) {
	if err := RegisterFormat(f); err != nil {
		panic(err)
	}
	RegisterKernels(f.Name(), CPU, cpu)
}

// LookupFormat finds a registered format by name.
func LookupFormat(name string) (Format, error) {
	registry.RLock()
	defer registry.RUnlock()
	f, ok := registry.formats[name]
	if !ok {
		return nil, Errorf(ErrUnsupported, "format %q is not registered (have %v)", name, formatNamesLocked())
	}
	return f, nil
}

// FormatNames lists the registered formats, sorted.
func FormatNames() []string {
	registry.RLock()
	defer registry.RUnlock()
	return formatNamesLocked()
}

func formatNamesLocked() []string {
	names := make([]string, 0, len(registry.formats))
	for n := range registry.formats {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// registeredKernels is the kernels of a format on a device type, or nil.
func registeredKernels(format string, dev DeviceType) Kernels {
	registry.RLock()
	defer registry.RUnlock()
	return registry.kernels[kernelKey{format, dev}]
}

// KernelsFor finds the kernels of a format on a device.
func KernelsFor(format string, dev Device) (Kernels, error) { return kernelsFor(format, dev) }

func kernelsFor(format string, dev Device) (Kernels, error) {
	registry.RLock()
	k, ok := registry.kernels[kernelKey{format, dev.Type}]
	registry.RUnlock()
	if ok {
		return k, nil
	}
	if dev.Type != CPU {
		return nil, Errorf(ErrDeviceUnavailable, "device %s is not available for format %q: no loaded plugin provides its kernels there (%s)", dev, format, pluginSummary())
	}
	return nil, Errorf(ErrUnsupported, "format %q has no CPU kernels", format)
}

// NewSpec resolves p.Format and builds its spec.
func NewSpec(p Params) (Spec, error) {
	f, err := LookupFormat(p.Format)
	if err != nil {
		return nil, err
	}
	return f.NewSpec(p)
}
