//go:build capitest

package main

// Compiles examples/c/test_threads.c into the capi test binary (build tag
// capitest, never in libquant.so): its pthreads call the exports in-process,
// so `go test -race -tags capitest ./capi` runs the C ABI's Go side under the
// race detector with many C threads. (Go's race runtime cannot start inside a
// C-hosted c-shared or c-archive library on our CI kernel: ThreadSanitizer
// fails to map its shadow memory.)

/*
#cgo CFLAGS: -I${SRCDIR}/../include -I${SRCDIR}/../examples/c
#cgo LDFLAGS: -lpthread -lm
#define main capi_test_threads_main
#include "../examples/c/test_threads.c"
*/
import "C"

func runCThreadsTest() int { return int(C.capi_test_threads_main()) }
