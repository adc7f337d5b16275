package host_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// layerRules says, for each package of the lower layers, which libquant
// packages it may depend on (directly or not) and whether anything it depends
// on may use cgo. host is the pure-Go engine: no cgo, nothing above it
// (README's layout table; doc.go of each package).
var layerRules = []struct {
	pkg     string
	allowed []string // prefixes of the libquant packages it may reach
	cgo     bool     // whether a dependency (or the package) may use cgo
	modules bool     // whether it may use modules outside the standard library
}{
	{"libquant/host", []string{"libquant/host", "libquant/internal/"}, false, false},
	{"libquant/linear", []string{"libquant/linear", "libquant/host", "libquant/internal/"}, false, false},
	{"libquant/host/hosttest", []string{"libquant/host", "libquant/internal/"}, true, true},
	{"libquant/linear/lineartest", []string{"libquant/linear", "libquant/host", "libquant/internal/"}, true, true},
	{"libquant/host/cpumem", []string{"libquant/host", "libquant/internal/"}, true, false},
	{"libquant/internal/...", []string{"libquant/internal/"}, true, false},
}

// TestLayers fails when host depends on cgo ("C", runtime/cgo) or on a
// package of a higher layer (linear, native, capi, plugins, ...), or when a
// lower package reaches above its layer.
func TestLayers(t *testing.T) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if p, err := exec.LookPath("go"); err == nil {
		goTool = p
	}
	for _, r := range layerRules {
		t.Run(r.pkg, func(t *testing.T) {
			out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}} {{len .CgoFiles}}", r.pkg).CombinedOutput()
			require.NoError(t, err, "go list: %s", out)
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			require.NotEmpty(t, lines)
			for _, line := range lines {
				f := strings.Fields(line)
				require.Len(t, f, 3, "go list line %q", line)
				path, std, cgoFiles := f[0], f[1] == "true", f[2] != "0"
				if !r.cgo {
					require.False(t, path == "C" || path == "runtime/cgo" || cgoFiles, "%s depends on cgo through %s", r.pkg, path)
				}
				if std {
					continue
				}
				if !strings.HasPrefix(path, "libquant/") {
					require.True(t, r.modules, "%s depends on %s, outside libquant and the standard library", r.pkg, path)
					continue
				}
				ok := false
				for _, a := range r.allowed {
					ok = ok || path == a || strings.HasPrefix(path, strings.TrimSuffix(a, "/")+"/")
				}
				require.True(t, ok, "%s depends on %s, which is above its layer (it may use %v)", r.pkg, path, r.allowed)
			}
		})
	}
}
