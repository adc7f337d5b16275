package nvfp4

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"libquant/host"
)

// benchCases are the NVFP4 quantize configurations bench/numpy_nvfp4.py
// mirrors, by name.
var benchCases = []struct {
	name  string
	p     host.Params
	usage host.Usage
}{
	{"rowwise", host.Params{}, host.Rowwise},
	{"columnwise", host.Params{}, host.Columnwise},
	{"both", host.Params{}, host.BothUsages},
	{"rowwise_sr", host.Params{StochasticRounding: true, Seed: 1}, host.Rowwise},
	{"columnwise_rht", host.Params{RHT: host.RHTDefault}, host.Columnwise},
	{"columnwise_rht_sr", host.Params{RHT: host.RHTDefault, StochasticRounding: true, Seed: 1}, host.Columnwise},
	{"both_rht", host.Params{RHT: host.RHTDefault}, host.BothUsages},
	{"both_rht_sr", host.Params{RHT: host.RHTDefault, StochasticRounding: true, Seed: 1}, host.BothUsages},
	{"both_2d", host.Params{BlockDims: 2}, host.BothUsages},
}

// BenchmarkQuantize quantizes a 4096×4096 BF16 tensor into reused buffers and
// reports GB/s: the input read once plus every output byte written once.
func BenchmarkQuantize(b *testing.B) {
	const m, k = 4096, 4096
	in := newInput(b, host.BFloat16, gaussian(m, k, 1))
	for _, c := range benchCases {
		b.Run(c.name, func(b *testing.B) {
			p := c.p
			p.Format = Name
			q, err := host.NewQuantizer(p, c.usage)
			require.NoError(b, err)
			defer q.Release()
			qt, err := q.Quantize(in.t, host.QuantizeOptions{})
			require.NoError(b, err)
			defer qt.Free()
			layout, err := q.Layout([]int64{m, k})
			require.NoError(b, err)
			bytes := in.t.Bytes()
			for _, l := range layout {
				bytes += l.Bytes()
			}
			b.ReportAllocs()
			cpu0 := cpuTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := q.QuantizeInto(in.t, host.QuantizeOptions{}, qt); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(bytes)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			// CPU time of the process (all threads) per op: on a shared machine
			// it moves less than wall time when other work competes for the cores.
			b.ReportMetric((cpuTime()-cpu0).Seconds()*1e3/float64(b.N), "cpu-ms/op")
		})
	}
}

// TestDumpForNumPy writes the bytes of every benchmark case for
// bench/numpy_nvfp4.py's cross-check: it reads BF16 bits from
// $NVFP4_DUMP_DIR/in.bf16 (shape $NVFP4_DUMP_SHAPE, "MxK") and writes
// <case>.<direction> = data ‖ scale_inv ‖ amax. Skipped unless the script runs it.
func TestDumpForNumPy(t *testing.T) {
	dir := os.Getenv("NVFP4_DUMP_DIR")
	if dir == "" {
		t.Skip("run by bench/numpy_nvfp4.py (NVFP4_DUMP_DIR unset)")
	}
	var m, k int
	_, err := fmt.Sscanf(os.Getenv("NVFP4_DUMP_SHAPE"), "%dx%d", &m, &k)
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(dir, "in.bf16"))
	require.NoError(t, err)
	require.Len(t, raw, 2*m*k)
	in, err := host.AllocTensor(cpu, host.BFloat16, []int64{int64(m), int64(k)}, 0)
	require.NoError(t, err)
	defer host.FreeTensor(in, 0)
	copy(in.Bytes8(), raw)
	for _, c := range benchCases {
		p := c.p
		p.Format = Name
		qt := quantize(t, p, c.usage, in, nil)
		for _, d := range []host.Direction{host.DirRowwise, host.DirColumnwise} {
			st, ok := qt.Storage(d)
			if !ok {
				continue
			}
			var out []byte
			for _, kind := range []host.BufferKind{host.BufData, host.BufScaleInv, host.BufAmax} {
				out = append(out, st.MustBuffer(kind).Bytes8()...)
			}
			require.NoError(t, os.WriteFile(filepath.Join(dir, c.name+"."+d.String()), out, 0o644))
		}
	}
}

// cpuTime is the user+system CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
