// Package cmem allocates tensor buffers on the C heap, so that memory libquant
// hands to C callers is never Go memory (the cgo pointer rules) and never moves.
package cmem

/*
#include <stdlib.h>
#include <string.h>
*/
import "C"

import (
	"errors"
	"unsafe"
)

// Alignment of every buffer: one cache line, enough for any vector load.
const Alignment = 64

// ErrOutOfMemory is returned when the C allocator fails.
var ErrOutOfMemory = errors.New("out of memory")

// Alloc returns n zeroed bytes aligned to Alignment. n == 0 gives a valid
// one-line allocation so that a zero-size buffer still has a distinct pointer.
func Alloc(n int64) (unsafe.Pointer, error) {
	if n < 0 {
		return nil, errors.New("cmem: negative size")
	}
	size := (n + Alignment - 1) &^ (Alignment - 1)
	if size == 0 {
		size = Alignment
	}
	p := C.aligned_alloc(C.size_t(Alignment), C.size_t(size))
	if p == nil {
		return nil, ErrOutOfMemory
	}
	C.memset(p, 0, C.size_t(size))
	return p, nil
}

// Free releases memory from Alloc; nil is a no-op.
func Free(p unsafe.Pointer) {
	if p != nil {
		C.free(p)
	}
}
