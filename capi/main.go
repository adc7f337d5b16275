// Command capi is libquant's C ABI: built with -buildmode=c-shared into
// libquant.so. It only converts C arguments, calls host, linear and native, and turns errors and
// panics into status codes; include/quant.h is the contract it implements.
package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include -std=c11
#include <stdlib.h>
#include "capi.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"libquant/host"
	_ "libquant/host/cpumem" // CPU tensors on the C heap
	_ "libquant/plugins/fp8"
	_ "libquant/plugins/mxfp8"
	_ "libquant/plugins/nvfp4"
)

func main() {}

// poisoned holds the message of the first internal fault. Once set, every call
// is refused: after a panic the library's state is unknown (STYLE.md, arrow-adbc).
var poisoned atomic.Pointer[string]

func setError(msg string) {
	cs := C.CString(msg)
	C.capi_set_error(cs)
	C.free(unsafe.Pointer(cs))
}

// call runs one export's body: it refuses work once poisoned, recovers panics
// (poisoning the library), and maps errors to status codes with a message that
// starts with the function's name.
func call(name string, body func() error) (status C.quant_status) {
	if p := poisoned.Load(); p != nil {
		setError(fmt.Sprintf("%s: refused: libquant hit an internal error earlier (%s)", name, *p))
		return C.QUANT_ERROR_POISONED
	}
	defer func() {
		if r := recover(); r != nil {
			msg := fmt.Sprintf("%s: internal error: %v", name, r)
			poisoned.CompareAndSwap(nil, &msg)
			C.capi_poison() // plan runs in C (plan.c) refuse too
			setError(msg)
			status = C.QUANT_ERROR_INTERNAL
		}
	}()
	if faultHook != nil {
		faultHook(name)
	}
	loadDefaultPlugins()
	if err := body(); err != nil {
		setError(name + ": " + err.Error())
		return statusOf(err)
	}
	return C.QUANT_OK
}

// faultHook is set only in builds with the faultinject tag (capi/fault.go), to
// test that a panic inside an export is contained.
var faultHook func(name string)

// errInvalidHandle marks handle errors (a capi concern: host has no handles).
var errInvalidHandle = errors.New("invalid handle")

func statusOf(err error) C.quant_status {
	switch {
	case errors.Is(err, errInvalidHandle):
		return C.QUANT_ERROR_INVALID_HANDLE
	case errors.Is(err, host.ErrInvalidArgument):
		return C.QUANT_ERROR_INVALID_ARGUMENT
	case errors.Is(err, host.ErrUnsupported):
		return C.QUANT_ERROR_UNSUPPORTED
	case errors.Is(err, host.ErrDeviceUnavailable):
		return C.QUANT_ERROR_DEVICE_UNAVAILABLE
	case errors.Is(err, host.ErrOutOfMemory):
		return C.QUANT_ERROR_OUT_OF_MEMORY
	case errors.Is(err, host.ErrBufferTooSmall):
		return C.QUANT_ERROR_BUFFER_TOO_SMALL
	case errors.Is(err, host.ErrState):
		return C.QUANT_ERROR_STATE
	case errors.Is(err, host.ErrPlugin):
		return C.QUANT_ERROR_PLUGIN
	}
	return C.QUANT_ERROR_INTERNAL
}

func invalid(format string, args ...any) error {
	return host.Errorf(host.ErrInvalidArgument, format, args...)
}

// indexed runs check on element i of the array argument name, naming it
// name[i] in the error: the name is formatted only when check fails (check
// runs again with it), since formatting it for every element of a group
// took about 20 us of a 64-tensor quant_quantize_grouped call's host time
// (issue #15). check must not depend on its name but in its message; a
// second run that passes (a handle freed in between) keeps the first error.
func indexed[T any](name string, i int, check func(arg string) (T, error)) (T, error) {
	v, err := check(name)
	if err != nil {
		if _, err2 := check(fmt.Sprintf("%s[%d]", name, i)); err2 != nil {
			err = err2
		}
	}
	return v, err
}
