package host

import "fmt"

// DType is an element type of a tensor buffer. The set mirrors what DLPack can
// describe; capi converts to and from DLDataType.
type DType uint8

const (
	DTypeInvalid DType = iota
	Float32
	Float16
	BFloat16
	Float64
	Uint8
	Int32
	Int64
	E4M3 // FP8 E4M3 ("fn", no Inf)
	E5M2 // FP8 E5M2
	E8M0 // unsigned power-of-two scale
	// FP6 (OCP MX v1.0 §5.3.2), packed as DLPack packs sub-byte types: element
	// i of a row occupies bits 6i..6i+5 of the row's bytes, little-endian.
	Float6E2M3
	Float6E3M2
)

// Bits returns the size of one element in bits.
func (d DType) Bits() int64 {
	if d == Float6E2M3 || d == Float6E3M2 {
		return 6
	}
	return 8 * d.Size()
}

// Size returns the size of one element in bytes; 0 for the packed sub-byte
// types (Bits says theirs).
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

func (d DType) String() string {
	switch d {
	case Float32:
		return "float32"
	case Float16:
		return "float16"
	case BFloat16:
		return "bfloat16"
	case Float64:
		return "float64"
	case Uint8:
		return "uint8"
	case Int32:
		return "int32"
	case Int64:
		return "int64"
	case E4M3:
		return "float8_e4m3fn"
	case E5M2:
		return "float8_e5m2"
	case E8M0:
		return "float8_e8m0fnu"
	case Float6E2M3:
		return "float6_e2m3fn"
	case Float6E3M2:
		return "float6_e3m2fn"
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// IsHighPrecision reports whether d is an input or output type of quantize and
// dequantize: FP32, BF16 or FP16.
func (d DType) IsHighPrecision() bool { return d == Float32 || d == BFloat16 || d == Float16 }
