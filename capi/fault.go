//go:build faultinject

package main

/*
#include <stdlib.h>
*/
import "C"

// In faultinject builds (build/fault/libquant.so, used by examples/c/fault_test.c
// only), the export named by LIBQUANT_FAULT_PANIC panics inside its protected
// body, as an internal bug would. The variable is read through libc because Go
// copies the environment at load time and would miss a later setenv.
func init() {
	key := C.CString("LIBQUANT_FAULT_PANIC")
	faultHook = func(name string) {
		if v := C.getenv(key); v != nil && C.GoString(v) == name {
			panic("injected fault in " + name)
		}
	}
}
