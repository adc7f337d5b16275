package host

import (
	"errors"
	"fmt"
)

// Sentinel errors callers branch on with errors.Is. Each maps to one status code
// at the C ABI.
var (
	ErrInvalidArgument   = errors.New("invalid argument")
	ErrUnsupported       = errors.New("unsupported")
	ErrDeviceUnavailable = errors.New("device not available")
	ErrOutOfMemory       = errors.New("out of memory")
	ErrBufferTooSmall    = errors.New("buffer too small")
	// ErrState means the object cannot do this in its current state: a direction the
	// operation needs is missing, or a usage cannot be derived.
	ErrState  = errors.New("invalid state")
	ErrPlugin = errors.New("plugin error")
)

type kindError struct {
	kind error
	msg  string
	wrap error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() []error {
	if e.wrap != nil {
		return []error{e.kind, e.wrap}
	}
	return []error{e.kind}
}

// Errorf builds an error of the given kind (one of the sentinels above). The
// message should name the argument and the reason; a %w verb in it also wraps.
func Errorf(kind error, format string, args ...any) error {
	inner := fmt.Errorf(format, args...)
	return &kindError{kind: kind, msg: inner.Error(), wrap: errors.Unwrap(inner)}
}
