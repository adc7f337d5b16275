package native

import (
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"libquant/host"
)

// toyPlugins compiles examples/c/plugin_toy.c into the variants the tests use,
// once per test binary; it skips when no C compiler is installed.
var toyPlugins = struct {
	once sync.Once
	dir  string
	err  error
}{}

func toyPlugin(t *testing.T, variant string) string {
	t.Helper()
	toyPlugins.once.Do(func() {
		cc := os.Getenv("CC")
		if cc == "" {
			cc = "cc"
		}
		if _, err := exec.LookPath(cc); err != nil {
			toyPlugins.err = err
			return
		}
		dir, err := os.MkdirTemp("", "libquant-toy")
		if err != nil {
			toyPlugins.err = err
			return
		}
		toyPlugins.dir = dir
		for name, flags := range map[string][]string{
			"toy": nil, "abi99": {"-DTOY_ABI_VERSION=99"}, "noentry": {"-DTOY_NO_ENTRY"}, "fail": {"-DTOY_FAIL"},
			"abi2": {"-DTOY_ABI_VERSION=2", `-DTOY_FORMAT="toy2_u8"`},
		} {
			args := append([]string{"-std=c99", "-O1", "-fPIC", "-shared", "-I../include"}, flags...)
			args = append(args, "../examples/c/plugin_toy.c", "-lm", "-o", filepath.Join(dir, "libquant_toy_"+name+".so"))
			if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
				toyPlugins.err = errors.New(string(out))
				return
			}
		}
	})
	if toyPlugins.err != nil {
		t.Skipf("SKIP: cannot build the toy plugin (no C compiler?): %v", toyPlugins.err)
	}
	return filepath.Join(toyPlugins.dir, "libquant_toy_"+variant+".so")
}

func TestLoadPluginFailuresLeaveHostWorking(t *testing.T) {
	cases := []struct {
		name, path, want string
	}{
		{"missing file", "/nonexistent/libquant_nothing.so", "cannot open"},
		{"folder", os.TempDir(), "is a folder"},
		{"not a plugin", toyPlugin(t, "noentry"), "does not export quant_plugin_get"},
		{"wrong ABI version", toyPlugin(t, "abi99"), "built for plugin ABI version 99, but this libquant speaks versions 1 to 2"},
		{"plugin refuses", toyPlugin(t, "fail"), "refusing to load"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := len(Plugins())
			_, err := Load(c.path, Explicit)
			require.ErrorIs(t, err, host.ErrPlugin)
			require.ErrorContains(t, err, c.want)
			require.Len(t, Plugins(), before, "an explicit failed load is reported, not listed")
		})
	}
	_, err := Load("", Explicit)
	require.ErrorIs(t, err, host.ErrInvalidArgument)
}

func TestLoadDefaultPluginsKeepsFailures(t *testing.T) {
	bad := toyPlugin(t, "abi99")
	t.Setenv(PathEnv, bad+string(os.PathListSeparator)+"/nonexistent/x.so")
	before := len(Plugins())
	LoadDefault(t.TempDir(), nil)
	list := Plugins()[before:]
	require.Len(t, list, 2)
	require.Equal(t, Env, list[0].Origin)
	require.ErrorContains(t, list[0].Err, "plugin ABI version 99")
	require.Equal(t, uint32(99), list[0].ABIVersion)
	require.ErrorContains(t, list[1].Err, "cannot open")
	require.Contains(t, report(), "libquant_cuda.so does not exist")
}

// TestABI2PluginWithoutGEMMLoads: the toy built for plugin ABI 2 (a table
// with no GEMM) loads as version 2; the default toy, built for ABI 1 and
// refusing any other host version, is asked again in its own version and
// loads as version 1 (TestToyPluginFormatAndKernels).
func TestABI2PluginWithoutGEMMLoads(t *testing.T) {
	info, err := Load(toyPlugin(t, "abi2"), Explicit)
	require.NoError(t, err)
	require.Equal(t, uint32(2), info.ABIVersion)
	require.Equal(t, []string{"toy2_u8"}, info.Formats)
	require.Equal(t, []KernelInfo{{Format: "toy2_u8", Device: host.CPU, Ops: OpAmax | OpQuantize | OpDequantize | OpDerive, DefinesFormat: true}}, info.Kernels)
	q, err := host.NewQuantizer(host.Params{Format: "toy2_u8"}, host.Rowwise)
	require.NoError(t, err)
	defer q.Release()
	x, err := host.AllocTensor(host.Device{Type: host.CPU}, host.Float32, []int64{2, 3}, 0)
	require.NoError(t, err)
	defer host.FreeTensor(x, 0)
	qt, err := q.Quantize(x, host.QuantizeOptions{})
	require.NoError(t, err)
	qt.Free()
}

func TestToyPluginFormatAndKernels(t *testing.T) {
	path := toyPlugin(t, "toy")
	info, err := Load(path, Explicit)
	require.NoError(t, err)
	require.Equal(t, "toy", info.Name)
	require.Equal(t, "1.0", info.Version)
	require.Equal(t, uint32(1), info.ABIVersion, "an ABI 1 plugin, asked again in its version")
	require.Equal(t, []string{"toy_u8"}, info.Formats)
	require.Equal(t, []KernelInfo{{Format: "toy_u8", Device: host.CPU, Ops: OpAmax | OpQuantize | OpDequantize | OpDerive, DefinesFormat: true}}, info.Kernels)
	again, err := Load(path, Explicit)
	require.NoError(t, err, "a second load of the same file is a no-op")
	require.Equal(t, info.Name, again.Name)

	q, err := host.NewQuantizer(host.Params{Format: "toy_u8"}, host.Rowwise)
	require.NoError(t, err)
	defer q.Release()
	_, err = host.NewQuantizer(host.Params{Format: "toy_u8", BlockDims: 2}, host.Rowwise)
	require.ErrorIs(t, err, host.ErrInvalidArgument, "the plugin's check is called")
	require.ErrorContains(t, err, "plugin toy:")

	const m, k = 5, 7
	x := make([]float32, m*k)
	for i := range x {
		x[i] = float32(i%11-5) * 0.3
	}
	in := host.Tensor{Ptr: unsafe.Pointer(&x[0]), DType: host.Float32, Shape: []int64{m, k}, Device: host.Device{Type: host.CPU}}
	qt, err := q.Quantize(in, host.QuantizeOptions{})
	runtime.KeepAlive(x)
	require.NoError(t, err)
	defer qt.Free()
	require.NoError(t, qt.UpdateUsage(host.BothUsages, 0), "columnwise derived through the plugin's derive")
	col, _ := qt.Storage(host.DirColumnwise)
	require.Equal(t, []int64{k, m}, col.MustBuffer(host.BufData).Shape)
	row, _ := qt.Storage(host.DirRowwise)
	rd, cd := row.MustBuffer(host.BufData).Bytes8(), col.MustBuffer(host.BufData).Bytes8()
	for i := 0; i < m; i++ {
		for j := 0; j < k; j++ {
			require.Equal(t, rd[i*k+j], cd[j*m+i])
		}
	}
	back := make([]float32, m*k)
	out := host.Tensor{Ptr: unsafe.Pointer(&back[0]), DType: host.Float32, Shape: []int64{m, k}, Device: host.Device{Type: host.CPU}}
	require.NoError(t, qt.Dequantize(host.DirColumnwise, out, 0))
	for i := range x {
		require.InDelta(t, x[i], back[i], 1.5/127*0.5+1e-6, "element %d", i)
	}
	// The plugin's own errors come back with its status.
	bf := make([]uint16, m*k)
	_, err = q.Quantize(host.Tensor{Ptr: unsafe.Pointer(&bf[0]), DType: host.BFloat16, Shape: []int64{m, k}, Device: host.Device{Type: host.CPU}}, host.QuantizeOptions{})
	require.ErrorIs(t, err, host.ErrUnsupported)
	require.ErrorContains(t, err, "toy_u8 takes float32 only")
}

func TestNoCUDAPluginMeansDeviceUnavailable(t *testing.T) {
	if n, _ := host.DeviceCount(host.CUDA); n > 0 {
		t.Skip("SKIP: a CUDA plugin is loaded in this process")
	}
	q, err := host.NewQuantizer(host.Params{Format: "toy_u8"}, host.Rowwise)
	if err != nil {
		t.Skipf("SKIP: toy plugin not loaded: %v", err)
	}
	defer q.Release()
	// A device address the host never dereferences: the call fails before any use.
	var fake [16]byte
	in := host.Tensor{Ptr: unsafe.Pointer(&fake[0]), DType: host.Float32, Shape: []int64{2, 2}, Device: host.Device{Type: host.CUDA}}
	_, err = q.Quantize(in, host.QuantizeOptions{})
	require.ErrorIs(t, err, host.ErrDeviceUnavailable)
	require.ErrorContains(t, err, "device cuda:0 is not available")
}

// Every field of Params must cross the plugin ABI: a field added to Params
// without a C counterpart fails here.
func TestParamsRoundTripThroughC(t *testing.T) {
	p := host.Params{Format: "fp8", Element: host.ElementE5M2, Scaling: host.ScalingDelayed, ForcePow2Scales: true, AmaxEpsilon: 0.5,
		AmaxHistoryLen: 7, AmaxAlgo: host.AmaxMostRecent, Margin: 2, BlockDims: 2, FP32Scales: true, ScaleRounding: host.ScaleFLOOR,
		GEMMSwizzledScales: true, RHT: host.RHTCustomMask, RHTSignMask: 0xBEEF, StochasticRounding: true, Seed: math.MaxUint64 - 3,
		Offset: 12345678901, HoldDType: host.BFloat16}
	v := reflect.ValueOf(p)
	for i := 0; i < v.NumField(); i++ {
		require.False(t, v.Field(i).IsZero(), "set Params.%s in this test (and map it in paramsToC/paramsFromC)", v.Type().Field(i).Name)
	}
	got := roundTripParams(t, p)
	require.Equal(t, p, got)
}

func roundTripParams(t *testing.T, p host.Params) host.Params {
	t.Helper()
	got, err := paramsRoundTrip(p)
	require.NoError(t, err)
	return got
}

// A caller who names a digest gets it checked even when the file is already
// loaded: against the digest the file had when it was loaded (the code that
// runs), not against what the file holds now.
func TestReloadChecksDigest(t *testing.T) {
	path := toyPlugin(t, "toy")
	sum, err := fileDigest(path)
	require.NoError(t, err)
	info, err := LoadDigest(path, Explicit, strings.ToUpper(sum))
	require.NoError(t, err)
	// The no-op stays for no digest and for the right one.
	_, err = Load(path, Explicit)
	require.NoError(t, err)
	_, err = LoadDigest(path, Explicit, sum)
	require.NoError(t, err)

	// The file is replaced while its old code stays loaded.
	other, err := os.ReadFile(toyPlugin(t, "abi99"))
	require.NoError(t, err)
	orig, err := os.ReadFile(path)
	require.NoError(t, err)
	replace := func(data []byte) {
		tmp := path + ".new"
		require.NoError(t, os.WriteFile(tmp, data, 0o755))
		require.NoError(t, os.Rename(tmp, path))
	}
	replace(other)
	t.Cleanup(func() { replace(orig) })
	now, err := fileDigest(path)
	require.NoError(t, err)
	require.NotEqual(t, sum, now)
	_, err = LoadDigest(path, Explicit, now)
	require.ErrorIs(t, err, host.ErrPlugin)
	require.ErrorContains(t, err, "already loaded from a file whose SHA-256 was "+sum+", but "+now+" was expected")
	again, err := LoadDigest(path, Explicit, sum)
	require.NoError(t, err)
	require.Equal(t, info.Name, again.Name)
	_, err = LoadDigest(path, Explicit, "abc")
	require.ErrorIs(t, err, host.ErrPlugin)
	require.ErrorContains(t, err, "not 64 hex digits")

	// A first load checks the file itself.
	_, err = LoadDigest(toyPlugin(t, "fail"), Explicit, sum)
	require.ErrorIs(t, err, host.ErrPlugin)
	require.ErrorContains(t, err, "its SHA-256 is")
	require.ErrorContains(t, err, "but "+sum+" was expected")
}

// A LIBQUANT_PLUGIN_PATH folder's libquant-plugin-* files are offered to the
// executable loader only: one it does not take is skipped, never dlopened,
// and the report names it.
func TestLoadDefaultFolderOffersExecutables(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"libquant-plugin-a", "libquant-plugin-b", "libquant_x.txt", "plugin-c"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("not ELF"), 0o755))
	}
	t.Setenv(PathEnv, dir)
	t.Setenv("LIBQUANT_PLUGIN_AUTOLOAD", "0")
	before := len(Plugins())
	var offered []string
	LoadDefault("", func(entry string) bool {
		offered = append(offered, entry)
		return filepath.Base(entry) == "libquant-plugin-a"
	})
	require.Equal(t, []string{dir, filepath.Join(dir, "libquant-plugin-a"), filepath.Join(dir, "libquant-plugin-b")}, offered)
	require.Len(t, Plugins(), before, "nothing was dlopened")
	require.Contains(t, report(), PathEnv+" folder "+dir+" (0 libquant_*.so files, 2 libquant-plugin-* files); skipped libquant-plugin-b: not executable plugins")
}
