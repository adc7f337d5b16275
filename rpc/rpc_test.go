package rpc_test

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"libquant/examples/goplugin/mxfp6"
	"libquant/host"
	"libquant/host/hosttest"
	"libquant/internal/testutil"
	_ "libquant/plugins/identity"
	_ "libquant/plugins/mxfp8"
	"libquant/pluginsdk"
	"libquant/rpc"
)

// The plugins the tests load, built by TestMain into a temporary folder.
var bin = struct {
	mxfp6, faulty, v99 string
}{}

func TestMain(m *testing.M) {
	if os.Getenv("RPC_TEST_HOST") != "" {
		hostProcess() // the SIGKILL test's host; never returns
	}
	dir, err := os.MkdirTemp("", "rpc-plugins")
	if err != nil {
		panic(err)
	}
	bin.mxfp6 = filepath.Join(dir, "mxfp6")
	bin.faulty = filepath.Join(dir, "faulty")
	bin.v99 = filepath.Join(dir, "faulty_v99")
	for _, b := range [][]string{
		{bin.mxfp6, "libquant/examples/goplugin/mxfp6/cmd/mxfp6"},
		{bin.faulty, "libquant/rpc/testdata/faulty"},
		{bin.v99, "-ldflags=-X libquant/pluginsdk.handshakeVersion=99", "libquant/rpc/testdata/faulty"},
	} {
		args := append([]string{"build", "-o", b[0]}, b[1:]...)
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", b[0], err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	rpc.Shutdown()
	os.RemoveAll(dir)
	os.Exit(code)
}

func digest(t testing.TB, path string) string {
	out, err := exec.Command("sha256sum", path).Output()
	require.NoError(t, err)
	return strings.Fields(string(out))[0]
}

func load(t testing.TB, path string, timeout time.Duration) rpc.Info {
	info, err := rpc.Load(path, rpc.Options{SHA256: digest(t, path), CallTimeout: timeout, ArenaBytes: 1 << 30})
	require.NoError(t, err)
	return info
}

var cpu = host.Device{Type: host.CPU}

func TestDetect(t *testing.T) {
	require.True(t, rpc.IsExecutable(bin.mxfp6))
	require.False(t, rpc.IsExecutable("rpc_test.go"))
	require.False(t, rpc.IsExecutable("/nonexistent"))
}

// The plugin's format is in the registry and quantizes, through the arena, to
// the bytes the same kernels give in process (whose exactness
// examples/goplugin/mxfp6's tests check against the OCP reference), for every
// element and scale rounding, both directions, a ragged shape and BF16 input.
func TestLoadExactBytes(t *testing.T) {
	info := load(t, bin.mxfp6, 0)
	require.Equal(t, "mxfp6", info.Name)
	require.Equal(t, []string{"mxfp6"}, info.Formats)
	require.Equal(t, pluginsdk.ProtocolVersion, info.Protocol)
	require.Contains(t, host.FormatNames(), "mxfp6")
	const m, k = 67, 101
	x, _ := hosttest.Input(t, host.BFloat16, testutil.Normal(m*k, 3, 5), m, k)
	for _, p := range []host.Params{
		{Format: "mxfp6"},
		{Format: "mxfp6", ScaleRounding: host.ScaleFLOOR},
		{Format: "mxfp6", Element: 5},
		{Format: "mxfp6", Element: 5, ScaleRounding: host.ScaleFLOOR},
	} {
		q, err := host.NewQuantizer(p, host.BothUsages)
		require.NoError(t, err)
		qt, err := q.Quantize(x, host.QuantizeOptions{})
		require.NoError(t, err)
		want := inProcess(t, p, x, m, k)
		for d := host.DirRowwise; d <= host.DirColumnwise; d++ {
			st, ok := qt.Storage(d)
			require.True(t, ok)
			for i, b := range st.Buffers {
				require.Equal(t, want[d].Buffers[i].Tensor.Data, b.Tensor.Bytes8(), "%+v %s buffer %d", p, d, i)
			}
			// Dequantize through the plugin equals the in-process one.
			out := hosttest.Tensor(t, host.Float32, m, k)
			require.NoError(t, qt.Dequantize(d, out, 0))
			ref := make([]byte, 4*m*k)
			sp, _ := mxfp6.Format{}.NewSpec(wire(p))
			require.NoError(t, sp.Dequantize(&pluginsdk.DequantizeRequest{Storage: want[d], Dir: pluginsdk.Direction(d), M: m, K: k,
				Out: pluginsdk.Tensor{DType: pluginsdk.Float32, Shape: []int64{m, k}, Data: ref}}))
			require.Equal(t, ref, out.Bytes8())
		}
		qt.Free()
		q.Release()
	}
	// Bad parameters come back as the plugin's invalid-argument error.
	_, err := host.NewQuantizer(host.Params{Format: "mxfp6", Element: host.ElementE4M3}, host.Rowwise)
	require.ErrorIs(t, err, host.ErrInvalidArgument)
	require.ErrorContains(t, err, "config.element")
}

func wire(p host.Params) pluginsdk.Params {
	return pluginsdk.Params{Format: p.Format, Element: int32(p.Element), ScaleRounding: int32(p.ScaleRounding)}
}

func inProcess(t *testing.T, p host.Params, x host.Tensor, m, k int64) [2]*pluginsdk.Storage {
	sp, err := mxfp6.Format{}.NewSpec(wire(p))
	require.NoError(t, err)
	var out [2]*pluginsdk.Storage
	for d := pluginsdk.Rowwise; d <= pluginsdk.Columnwise; d++ {
		l, err := sp.Layout(m, k, d)
		require.NoError(t, err)
		out[d] = &pluginsdk.Storage{Dir: d}
		for _, b := range l {
			out[d].Buffers = append(out[d].Buffers, pluginsdk.Buffer{BufferSpec: b, Tensor: pluginsdk.Tensor{DType: b.DType, Shape: b.Shape, Data: make([]byte, b.Bytes())}})
		}
	}
	in := pluginsdk.Tensor{DType: pluginsdk.DType(x.DType), Shape: x.Shape, Data: x.Bytes8()}
	require.NoError(t, sp.Quantize(&pluginsdk.QuantizeRequest{Input: in, M: m, K: k, Out: out}))
	return out
}

// 16 goroutines quantize different tensors at once; each gets its own bytes.
func TestConcurrentCalls(t *testing.T) {
	load(t, bin.mxfp6, 0)
	q, err := host.NewQuantizer(host.Params{Format: "mxfp6"}, host.BothUsages)
	require.NoError(t, err)
	defer q.Release()
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, k := int64(32+g), int64(64+3*g)
			x, _ := hosttest.Input(t, host.Float32, testutil.Normal(int(m*k), 1, uint64(g)), m, k)
			want := inProcess(t, host.Params{Format: "mxfp6"}, x, m, k)
			for it := 0; it < 10; it++ {
				qt, err := q.Quantize(x, host.QuantizeOptions{})
				if err != nil {
					errs[g] = err
					return
				}
				st, _ := qt.Storage(host.DirColumnwise)
				if string(st.Buffers[0].Tensor.Bytes8()) != string(want[1].Buffers[0].Tensor.Data) {
					errs[g] = fmt.Errorf("goroutine %d: columnwise bytes differ", g)
				}
				qt.Free()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

func quantizeFaulty(t *testing.T, fault uint64) error {
	q, err := host.NewQuantizer(host.Params{Format: "faulty", Seed: fault}, host.Rowwise)
	if err != nil {
		return err
	}
	defer q.Release()
	x, _ := hosttest.Input(t, host.Float32, testutil.Normal(64, 1, 1), 8, 8)
	qt, err := q.Quantize(x, host.QuantizeOptions{})
	if err == nil {
		qt.Free()
	}
	return err
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// A zombie (state Z) has ended; only its parent's wait is missing.
	f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}

// A crash, an exit mid-call, a hang past the deadline and an outside kill
// each give ErrPlugin naming the cause; other formats keep working; loading
// the plugin again brings it back.
func TestFaults(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault uint64
		kill  bool
		want  string
	}{
		{"crash", 1, false, "faulty: injected crash"},
		{"exit", 3, false, "exit status 7"},
		{"hang", 2, false, "did not return within the 1s per-call deadline"},
		{"killed", 0, true, "signal: killed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			info := load(t, bin.faulty, time.Second)
			require.NoError(t, quantizeFaulty(t, 0))
			if c.kill {
				require.NoError(t, syscall.Kill(info.Pid, syscall.SIGKILL))
				time.Sleep(100 * time.Millisecond)
			}
			start := time.Now()
			err := quantizeFaulty(t, c.fault)
			require.ErrorIs(t, err, host.ErrPlugin)
			require.ErrorContains(t, err, c.want)
			require.Less(t, time.Since(start), 10*time.Second)
			// Later calls say it is not running; built-in formats still work.
			err = quantizeFaulty(t, 0)
			require.ErrorIs(t, err, host.ErrPlugin)
			require.ErrorContains(t, err, "load it again")
			q, err := host.NewQuantizer(host.Params{Format: "mxfp8"}, host.Rowwise)
			require.NoError(t, err)
			x, _ := hosttest.Input(t, host.Float32, testutil.Normal(32*32, 1, 1), 32, 32)
			qt, err := q.Quantize(x, host.QuantizeOptions{})
			require.NoError(t, err)
			qt.Free()
			q.Release()
			require.Eventually(t, func() bool { return !alive(info.Pid) }, 5*time.Second, 50*time.Millisecond, "plugin process %d still runs", info.Pid)
			// A reload starts a new process that works.
			again := load(t, bin.faulty, time.Second)
			require.NotEqual(t, info.Pid, again.Pid)
			require.NoError(t, quantizeFaulty(t, 0))
		})
	}
}

// A modified binary and an unlisted one are refused before they run; a plugin
// of another handshake version is refused with both versions named.
func TestRefusals(t *testing.T) {
	tampered := filepath.Join(t.TempDir(), "mxfp6")
	data, err := os.ReadFile(bin.mxfp6)
	require.NoError(t, err)
	want := digest(t, bin.mxfp6)
	data[len(data)/2] ^= 1
	require.NoError(t, os.WriteFile(tampered, data, 0o755))
	_, err = rpc.Load(tampered, rpc.Options{SHA256: want})
	require.ErrorIs(t, err, host.ErrPlugin)
	require.ErrorContains(t, err, "but "+want+" was expected")

	t.Setenv(rpc.ManifestEnv, "")
	_, err = rpc.Load(tampered, rpc.Options{})
	require.ErrorIs(t, err, host.ErrPlugin)
	require.ErrorContains(t, err, "is not listed")

	// Listed in a manifest, relative to it, the good binary loads.
	dir := filepath.Dir(bin.mxfp6)
	manifest := filepath.Join(dir, "plugins.sha256")
	require.NoError(t, os.WriteFile(manifest, []byte(want+"  mxfp6\n"), 0o644))
	t.Setenv(rpc.ManifestEnv, manifest)
	_, err = rpc.Load(bin.mxfp6, rpc.Options{})
	require.NoError(t, err)
	_, err = rpc.Load(tampered, rpc.Options{})
	require.ErrorContains(t, err, "is not listed")

	_, err = rpc.Load(bin.v99, rpc.Options{SHA256: digest(t, bin.v99)})
	require.ErrorIs(t, err, host.ErrPlugin)
	require.ErrorContains(t, err, "handshake")
	require.ErrorContains(t, err, "99")
	require.ErrorContains(t, err, "protocol 1")
}

// CUDA tensors are refused with the reason, before anything is sent.
func TestRefusesCUDA(t *testing.T) {
	load(t, bin.mxfp6, 0)
	q, err := host.NewQuantizer(host.Params{Format: "mxfp6"}, host.Rowwise)
	require.NoError(t, err)
	defer q.Release()
	x, _ := hosttest.Input(t, host.Float32, testutil.Normal(64, 1, 1), 8, 8)
	x.Device = host.Device{Type: host.CUDA}
	_, err = q.Quantize(x, host.QuantizeOptions{})
	require.ErrorIs(t, err, host.ErrDeviceUnavailable)
	require.ErrorContains(t, err, "cuda")
	require.ErrorContains(t, err, "runs formats mxfp6 out of process, on CPU tensors only")
}

// hostProcess is the host of TestHostKilled: it loads the faulty plugin,
// prints its pid, and sits in a call that takes seconds until it is killed.
func hostProcess() {
	info, err := rpc.Load(os.Getenv("RPC_TEST_HOST"), rpc.Options{SHA256: os.Getenv("RPC_TEST_SHA")})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("pid", info.Pid)
	q, err := host.NewQuantizer(host.Params{Format: "faulty", Seed: 2}, host.Rowwise)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	x, _ := host.AllocTensor(cpu, host.Float32, []int64{4, 4}, 0)
	_, _ = q.Quantize(x, host.QuantizeOptions{}) // hangs in the plugin
	os.Exit(0)
}

// The host is killed with SIGKILL during a call: its plugin ends within a few
// seconds (pluginsdk's watchdog), leaving no process behind.
func TestHostKilled(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "RPC_TEST_HOST="+bin.faulty, "RPC_TEST_SHA="+digest(t, bin.faulty))
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "host process output")
	f := strings.Fields(line)
	require.Equal(t, "pid", f[0], line)
	pid, err := strconv.Atoi(f[1])
	require.NoError(t, err)
	require.True(t, alive(pid))
	time.Sleep(300 * time.Millisecond) // the call is in the plugin now
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	require.Eventually(t, func() bool { return !alive(pid) }, 5*time.Second, 50*time.Millisecond, "plugin process %d outlived its host", pid)
}

// The CPU GEMM multiplies plugin-format operands (dequantized whole through
// the plugin) and mixes them with built-in formats: D = A·Bᵀ equals the
// float64 product of the dequantized operands within FP32 accumulation's
// bound, |err| ≤ γ_K·Σ|a||b| with γ_K = K·u/(1−K·u), u = 2^-24 (the sum of K
// FP32 products, each exact here: FP6×E8M0 values times FP6 values fit in 24
// bits), plus one rounding of D (u·|d|).
func TestGemm(t *testing.T) {
	load(t, bin.mxfp6, 0)
	s, err := host.QueryGemmSupport(cpu, "mxfp6", "mxfp8")
	require.NoError(t, err)
	require.Equal(t, host.GemmEmulated, s.Level, s.Reason)
	const m, n, k = 33, 20, 70 // partial blocks in every dim (spec §14)
	xa, _ := hosttest.Input(t, host.Float32, testutil.Normal(m*k, 1, 3), m, k)
	xb, _ := hosttest.Input(t, host.Float32, testutil.Normal(n*k, 1, 4), n, k)
	for _, fb := range []string{"mxfp6", "mxfp8", "identity"} {
		qa := hosttest.Quantize(t, hosttest.NewQuantizer(t, host.Params{Format: "mxfp6", Element: host.ElementE3M2}, host.Rowwise), xa)
		qb := hosttest.Quantize(t, hosttest.NewQuantizer(t, host.Params{Format: fb}, host.Rowwise), xb)
		d := hosttest.Tensor(t, host.Float32, m, n)
		require.NoError(t, host.Gemm(&host.GemmArgs{A: host.GemmOperand{Q: qa}, B: host.GemmOperand{Q: qb, Trans: true}, Alpha: 1, D: d}))
		a := hosttest.Dequantize(t, qa, host.DirRowwise)
		b := hosttest.Dequantize(t, qb, host.DirRowwise)
		u := math.Ldexp(1, -24)
		gamma := k * u / (1 - k*u)
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var exact, mag float64
				for l := 0; l < k; l++ {
					p := float64(a[i*k+l]) * float64(b[j*k+l])
					exact += p
					mag += math.Abs(p)
				}
				got := float64(d.Float32s()[i*n+j])
				require.InDelta(t, exact, got, gamma*mag+u*math.Abs(exact), "%s (%d, %d)", fb, i, j)
			}
		}
	}
}

// A caller who names a digest gets it checked even when the plugin already
// runs: against the digest its binary was checked against when it started,
// not against what the file holds now.
func TestReloadChecksDigest(t *testing.T) {
	rpc.Shutdown() // no other copy of faulty serves its formats
	t.Cleanup(rpc.Shutdown)
	path := filepath.Join(t.TempDir(), "faulty")
	data, err := os.ReadFile(bin.faulty)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o755))
	sum := digest(t, path)
	info, err := rpc.Load(path, rpc.Options{SHA256: sum})
	require.NoError(t, err)
	// The no-op stays for no digest and for the right one, in any case.
	for _, d := range []string{"", sum, strings.ToUpper(sum)} {
		again, err := rpc.Load(path, rpc.Options{SHA256: d})
		require.NoError(t, err)
		require.Equal(t, info.Pid, again.Pid)
	}

	// The file is replaced (renamed over) while the old binary runs.
	other, err := os.ReadFile(bin.v99)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path+".new", other, 0o755))
	require.NoError(t, os.Rename(path+".new", path))
	now := digest(t, path)
	require.NotEqual(t, sum, now)
	_, err = rpc.Load(path, rpc.Options{SHA256: now})
	require.ErrorIs(t, err, host.ErrPlugin)
	require.ErrorContains(t, err, "already running from a binary whose SHA-256 is "+sum+", but "+now+" was expected")
	again, err := rpc.Load(path, rpc.Options{SHA256: sum})
	require.NoError(t, err)
	require.Equal(t, info.Pid, again.Pid, "a refused reload leaves the running plugin alone")
}
