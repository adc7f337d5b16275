package rpc_test

import (
	"fmt"
	"testing"

	"libquant/examples/goplugin/mxfp6"
	"libquant/host"
	"libquant/host/hosttest"
	"libquant/internal/testutil"
	"libquant/pluginsdk"
	"libquant/rpc"
)

// BenchmarkQuantize/<shape>/<case>_<usage>: BF16 input of normal values,
// GB/s = (input bytes + output bytes) / time as in bench/RESULTS.md:
//
//	plugin_mxfp6: mxfp6 through the executable plugin (arena copies, gRPC)
//	inproc_mxfp6: the same kernel called in this process (no transport)
//	mxfp8:        the built-in MXFP8 format, in process
//
// The shape 1x32 (mxfp8: 32x32, its smallest) measures the per-call overhead.
func BenchmarkQuantize(b *testing.B) {
	if _, err := rpc.Load(bin.mxfp6, rpc.Options{SHA256: digest(b, bin.mxfp6)}); err != nil {
		b.Fatal(err)
	}
	for _, s := range [][2]int64{{1, 32}, {256, 256}, {4096, 4096}} {
		m, k := s[0], s[1]
		in, _ := hosttest.Input(b, host.BFloat16, testutil.Normal(int(m*k), 1, 7), m, k)
		in8 := in
		if m < 32 {
			in8, _ = hosttest.Input(b, host.BFloat16, testutil.Normal(32*32, 1, 7), 32, 32)
		}
		for _, u := range []struct {
			name  string
			usage host.Usage
		}{{"rowwise", host.Rowwise}, {"both", host.BothUsages}} {
			name := fmt.Sprintf("%dx%d/", m, k)
			b.Run(name+"plugin_mxfp6_"+u.name, func(b *testing.B) {
				hosttest.BenchQuantize(b, in, host.Params{Format: "mxfp6"}, u.usage)
			})
			b.Run(name+"inproc_mxfp6_"+u.name, func(b *testing.B) { benchInProcess(b, in, m, k, u.usage) })
			b.Run(name+"mxfp8_"+u.name, func(b *testing.B) {
				hosttest.BenchQuantize(b, in8, host.Params{Format: "mxfp8"}, u.usage)
			})
		}
	}
}

func benchInProcess(b *testing.B, in host.Tensor, m, k int64, usage host.Usage) {
	sp, err := mxfp6.Format{}.NewSpec(pluginsdk.Params{Format: "mxfp6"})
	if err != nil {
		b.Fatal(err)
	}
	r := &pluginsdk.QuantizeRequest{Input: pluginsdk.Tensor{DType: pluginsdk.BFloat16, Shape: in.Shape, Data: in.Bytes8()}, M: m, K: k}
	bytes := in.Bytes()
	for d := pluginsdk.Rowwise; d <= pluginsdk.Columnwise; d++ {
		if usage&(1<<d) == 0 {
			continue
		}
		l, _ := sp.Layout(m, k, d)
		st := &pluginsdk.Storage{Dir: d}
		for _, buf := range l {
			st.Buffers = append(st.Buffers, pluginsdk.Buffer{BufferSpec: buf, Tensor: pluginsdk.Tensor{DType: buf.DType, Shape: buf.Shape, Data: make([]byte, buf.Bytes())}})
			bytes += buf.Bytes()
		}
		r.Out[d] = st
	}
	b.SetBytes(bytes)
	b.ResetTimer()
	for b.Loop() {
		if err := sp.Quantize(r); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(bytes)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}
