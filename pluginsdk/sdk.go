// Package pluginsdk writes libquant format plugins in Go that run out of
// process: a plugin is an executable whose main calls Serve with its formats,
// and libquant (quant_plugin_load, LIBQUANT_PLUGIN_PATH) starts it through
// hashicorp/go-plugin, talks gRPC with mutual TLS, and passes tensors through
// shared memory. The contract is the one libquant's built-in formats follow
// (host.Format, host.Spec, host.Kernels): a format checks parameters into a
// spec; a spec lays out a direction's buffers and runs the kernels on CPU
// tensors. The README's "Go format plugins" section shows a whole plugin.
package pluginsdk

import (
	"errors"
	"fmt"
	"unsafe"

	"libquant/pluginsdk/wire"
)

// ProtocolVersion is the handshake version this SDK speaks; libquant refuses
// a plugin of another version with a message naming both.
const ProtocolVersion = wire.ProtocolVersion

// Sentinel errors a plugin wraps (fmt.Errorf("...: %w", ErrInvalidArgument))
// so that the caller gets QUANT_ERROR_INVALID_ARGUMENT or
// QUANT_ERROR_UNSUPPORTED; any other error reaches it as QUANT_ERROR_PLUGIN.
var (
	ErrInvalidArgument = errors.New("invalid argument")
	ErrUnsupported     = errors.New("unsupported")
)

// Direction is rowwise (blocks along the last dim K) or columnwise (along M).
type Direction int32

const (
	Rowwise    Direction = 0
	Columnwise Direction = 1
)

func (d Direction) String() string {
	if d == Rowwise {
		return "rowwise"
	}
	return "columnwise"
}

// Usage is a set of directions (bit 1<<Direction).
type Usage uint32

// DType is a buffer's element type; the values are libquant's (host.DType).
type DType uint8

const (
	Float32  DType = 1
	Float16  DType = 2
	BFloat16 DType = 3
	Float64  DType = 4
	Uint8    DType = 5
	Int32    DType = 6
	Int64    DType = 7
	E4M3     DType = 8
	E5M2     DType = 9
	E8M0     DType = 10
	// FP6 (OCP MX v1.0 §5.3.2), packed as DLPack packs sub-byte types: element
	// i of a row occupies bits 6i..6i+5 of the row's bytes, little-endian (a
	// row's element count times 6 must be a multiple of 8).
	Float6E2M3 DType = 11
	Float6E3M2 DType = 12
)

// Bits is the size of one element in bits (0 for an unknown dtype).
func (d DType) Bits() int64 {
	if d == Float6E2M3 || d == Float6E3M2 {
		return 6
	}
	return 8 * d.Size()
}

// Size is the byte size of one element (0 for an unknown dtype and for the
// packed sub-byte ones: Bits says theirs).
func (d DType) Size() int64 {
	switch d {
	case Float64, Int64:
		return 8
	case Float32, Int32:
		return 4
	case Float16, BFloat16:
		return 2
	case Uint8, E4M3, E5M2, E8M0:
		return 1
	}
	return 0
}

// Element values of Params.Element (quant.h's QUANT_ELEMENT_*).
const (
	ElementDefault int32 = 0
	ElementE4M3    int32 = 1
	ElementE5M2    int32 = 2
	ElementE2M1    int32 = 3
	ElementE2M3    int32 = 4
	ElementE3M2    int32 = 5
)

// ScaleRounding values of Params.ScaleRounding (spec §4.3, §4.4).
const (
	ScaleRCEIL int32 = 0
	ScaleFLOOR int32 = 1
)

// Params are one direction's quantizer parameters (quant_quantizer_config);
// zero fields mean the format's default.
type Params = wire.Params

// BufferKind is a buffer's role.
type BufferKind int32

const (
	BufData     BufferKind = 0
	BufScaleInv BufferKind = 1
	BufAmax     BufferKind = 2
)

// BufferSpec is one buffer of a direction's layout.
type BufferSpec struct {
	Kind  BufferKind
	DType DType
	Shape []int64
}

// Bytes is the buffer's size.
func (b BufferSpec) Bytes() int64 { return (numElements(b.Shape)*b.DType.Bits() + 7) / 8 }

func numElements(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// Tensor is a CPU tensor in the memory shared with libquant: row-major,
// contiguous. Data is valid only during the call that received it.
type Tensor struct {
	DType DType
	Shape []int64
	Data  []byte
}

// Float32s views an FP32 tensor's data.
func (t Tensor) Float32s() []float32 {
	if len(t.Data) < 4 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&t.Data[0])), len(t.Data)/4)
}

// Uint16s views a BF16 or FP16 tensor's data as bit patterns.
func (t Tensor) Uint16s() []uint16 {
	if len(t.Data) < 2 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&t.Data[0])), len(t.Data)/2)
}

// Buffer is one buffer of a storage.
type Buffer struct {
	BufferSpec
	Tensor Tensor
}

// Storage is one direction's buffers, in the order of the spec's Layout.
type Storage struct {
	Dir     Direction
	Buffers []Buffer
}

// Buffer returns the buffer of a kind; the layout guarantees it exists.
func (s *Storage) Buffer(kind BufferKind) Tensor {
	for _, b := range s.Buffers {
		if b.Kind == kind {
			return b.Tensor
		}
	}
	panic(fmt.Sprintf("storage has no buffer of kind %d", kind))
}

// QuantizeRequest quantizes Input (its 2-D view [M, K]) into the directions
// whose Out is non-nil: the usage the caller asked for. Quantize writes every
// byte of those buffers, padding included. AmaxIn, when set, is an FP32 [2]
// amax (rowwise, columnwise) to use instead of computing it.
type QuantizeRequest struct {
	Input  Tensor
	M, K   int64
	Out    [2]*Storage
	AmaxIn *Tensor
}

// AmaxRequest writes into Out (FP32 [2]) the global amax a quantize of Input
// would use, in the slots of the directions in Want.
type AmaxRequest struct {
	Input Tensor
	M, K  int64
	Want  Usage
	Out   Tensor
}

// DequantizeRequest writes direction Dir of Storage into Out (FP32, BF16 or
// FP16, [M, K]).
type DequantizeRequest struct {
	Storage *Storage
	Dir     Direction
	M, K    int64
	Out     Tensor
}

// DeriveRequest fills direction ToDir from FromDir without re-quantizing, for
// specs whose Derivable(FromDir, ToDir) is true (spec §7.4).
type DeriveRequest struct {
	From, To       *Storage
	FromDir, ToDir Direction
	M, K           int64
}

// Format is a named number format.
type Format interface {
	Name() string
	// NewSpec checks p (p.Format is Name()) and fills its defaults; an error
	// wrapping ErrInvalidArgument names the field and the reason.
	NewSpec(p Params) (Spec, error)
}

// Spec is a format with its parameters: layout and CPU kernels.
type Spec interface {
	Params() Params
	// Layout lists the buffers of direction dir of an [m, k] tensor.
	Layout(m, k int64, dir Direction) ([]BufferSpec, error)
	Derivable(from, to Direction) bool
	Amax(r *AmaxRequest) error
	Quantize(r *QuantizeRequest) error
	Dequantize(r *DequantizeRequest) error
	Derive(r *DeriveRequest) error
}

// Info names the plugin.
type Info struct {
	Name    string
	Version string
}
