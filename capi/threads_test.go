//go:build capitest

package main

import "testing"

func TestCThreadsCallingTheABI(t *testing.T) {
	if rc := runCThreadsTest(); rc != 0 {
		t.Fatalf("examples/c/test_threads.c failed (rc %d); its output above names the checks", rc)
	}
}
