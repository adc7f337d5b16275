package gputest

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The plugin launches every kernel with programmatic stream serialization
// (cuda/launch.cuh): a kernel may then start before the kernel ahead of it on
// the stream has completed, and is correct only if it runs pdl_wait() before
// touching global memory. A kernel launched with <<<>>> would miss the
// attribute (a lost 1.6 µs, no error); a kernel without pdl_wait() first would
// race with its predecessor (wrong bytes now and then, which no exactness
// test is sure to catch). This test reads the plugin's sources and needs no
// GPU, so CI runs it.

// kernelRules returns one message per violation in one source file's text.
func kernelRules(name, src string) []string {
	code := stripComments(src)
	var bad []string
	lineOf := func(off int) int { return 1 + strings.Count(code[:off], "\n") }
	for _, m := range regexp.MustCompile(`<<<`).FindAllStringIndex(code, -1) {
		bad = append(bad, name+":"+strconv.Itoa(lineOf(m[0]))+": a <<<>>> launch (use launch_kernel)")
	}
	for _, m := range regexp.MustCompile(`\b__global__\b`).FindAllStringIndex(code, -1) {
		// The body starts at the first '{' outside parentheses
		// (__launch_bounds__(...) and the parameter list); a ';' first
		// means a declaration.
		depth, body := 0, -1
	scan:
		for i := m[1]; i < len(code); i++ {
			switch code[i] {
			case '(':
				depth++
			case ')':
				depth--
			case ';':
				if depth == 0 {
					break scan
				}
			case '{':
				if depth == 0 {
					body = i + 1
					break scan
				}
			}
		}
		if body < 0 {
			continue
		}
		if !strings.HasPrefix(strings.TrimLeft(code[body:], " \t\r\n"), "pdl_wait();") {
			bad = append(bad, name+":"+strconv.Itoa(lineOf(m[0]))+": a kernel whose first statement is not pdl_wait();")
		}
	}
	return bad
}

// stripComments blanks // and /* */ comments, keeping the line breaks (string
// literals in the plugin hold no comment markers).
func stripComments(s string) string {
	b := []byte(s)
	for i := 0; i < len(b); i++ {
		switch {
		case b[i] == '/' && i+1 < len(b) && b[i+1] == '/':
			for ; i < len(b) && b[i] != '\n'; i++ {
				b[i] = ' '
			}
		case b[i] == '/' && i+1 < len(b) && b[i+1] == '*':
			for ; i < len(b) && !(b[i] == '*' && i+1 < len(b) && b[i+1] == '/'); i++ {
				if b[i] != '\n' {
					b[i] = ' '
				}
			}
			if i+1 < len(b) {
				b[i], b[i+1] = ' ', ' '
				i++
			}
		}
	}
	return string(b)
}

func TestPluginKernelsWaitForTheirPredecessor(t *testing.T) {
	t.Run("the checker flags what it should", func(t *testing.T) {
		bad := kernelRules("x.cu", `
// a comment may say kern<<<1, 1>>>() and __global__ void f() {}
__global__ void __launch_bounds__(256) good(int a) {
  pdl_wait();
  /* x */
}
template <int N> __global__ void __launch_bounds__(N, (N > 1 ? 2 : 1)) bad(const int *p) {
  int x = p[0];
  pdl_wait();
}
__global__ void declared(int);
void host() { bad<1><<<1, 1, 0, 0>>>(nullptr); }
`)
		require.Equal(t, []string{
			"x.cu:12: a <<<>>> launch (use launch_kernel)",
			"x.cu:7: a kernel whose first statement is not pdl_wait();",
		}, bad)
	})
	// go test runs in this package's folder; a test binary built with
	// go test -c may run from the repository's root (the GPU machine).
	var files []string
	for _, dir := range []string{"..", "cuda"} {
		if _, err := os.Stat(filepath.Join(dir, "launch.cuh")); err != nil {
			continue
		}
		for _, pat := range []string{"*.cu", "*.cuh"} {
			m, err := filepath.Glob(filepath.Join(dir, pat))
			require.NoError(t, err)
			files = append(files, m...)
		}
		break
	}
	if len(files) == 0 {
		t.Skip("SKIP: the plugin's sources (cuda/launch.cuh) are neither in .. nor in ./cuda from here")
	}
	kernels := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		kernels += len(regexp.MustCompile(`\b__global__\b`).FindAllString(stripComments(string(src)), -1))
		for _, msg := range kernelRules(filepath.Base(f), string(src)) {
			t.Error(msg)
		}
	}
	t.Logf("%d files, %d kernels", len(files), kernels)
	require.Greater(t, kernels, 30, "the plugin's kernels were not found")
}
