package rpc_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/host"
	"libquant/host/hosttest"
	"libquant/rpc"
)

// The README's complete plugin builds in a module of its own (as a third
// party's would, requiring libquant), loads, and quantizes as it says: int8
// codes RNE(x / (amax/127)) and the FP32 scale amax/127 per row.
func TestReadmePlugin(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(readme), "<!-- pluginsdk example -->\n```go\n")
	require.True(t, ok, "README has no pluginsdk example")
	src, _, ok := strings.Cut(rest, "```\n<!-- end pluginsdk example -->")
	require.True(t, ok)
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644))
	mod := "module example.com/rowint8\n\ngo 1.26\n\nrequire libquant v0.0.0\n\nreplace libquant => " + root + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))
	exe := filepath.Join(dir, "rowint8")
	build := exec.Command("go", "build", "-mod=mod", "-o", exe, ".")
	build.Dir = dir
	// Everything it needs is in the module cache already (libquant's own
	// dependencies): no network.
	build.Env = append(os.Environ(), "GOPROXY=off", "GOWORK=off", "GOFLAGS=")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	info, err := rpc.Load(exe, rpc.Options{SHA256: digest(t, exe)})
	require.NoError(t, err)
	require.Equal(t, []string{"rowint8"}, info.Formats)
	vals := []float32{1, -2, 0.5, 127, 3, 0, 0, 0, 0, 0, -0.25, 0.125, 1e-3, 0.2, -0.1}
	x, _ := hosttest.Input(t, host.Float32, vals, 3, 5)
	q := hosttest.NewQuantizer(t, host.Params{Format: "rowint8"}, host.Rowwise)
	qt := hosttest.Quantize(t, q, x)
	st, _ := qt.Storage(host.DirRowwise)
	codes, scales := st.Buffers[0].Tensor.Bytes8(), st.Buffers[1].Tensor.Float32s()
	require.Equal(t, []float32{1, 0, 0.25 / 127}, scales)
	want := []int8{1, -2, 0, 127, 3, 0, 0, 0, 0, 0, -127, 64, 1, 102, -51}
	for i, c := range want {
		require.Equal(t, c, int8(codes[i]), "code %d", i)
	}
	// Dequantize runs in the plugin too: code · scale.
	for i, v := range hosttest.Dequantize(t, qt, host.DirRowwise) {
		require.Equal(t, float32(want[i])*scales[i/5], v, "value %d", i)
	}
}
