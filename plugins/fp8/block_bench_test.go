package fp8

import (
	"math/rand/v2"
	"testing"

	"libquant/host"
)

// BenchmarkQuantize/fp8_block_<1d|2d>_<direction>: 4096×4096 BF16, GB/s =
// (input bytes + every output byte) / time (bench/numpy_mx.py parses these names).
func BenchmarkQuantize(b *testing.B) {
	const m, k = 4096, 4096
	x := make([]float32, m*k)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	in, _ := newInput(b, host.BFloat16, m, k, x)
	for _, dims := range []int32{1, 2} {
		for _, u := range []struct {
			name  string
			usage host.Usage
		}{{"rowwise", host.Rowwise}, {"columnwise", host.Columnwise}, {"both", host.BothUsages}} {
			name := map[int32]string{1: "fp8_block_1d_", 2: "fp8_block_2d_"}[dims] + u.name
			b.Run(name, func(b *testing.B) {
				q, err := host.NewQuantizer(host.Params{Format: NameBlock, BlockDims: dims}, u.usage)
				if err != nil {
					b.Fatal(err)
				}
				defer q.Release()
				layout, err := q.Layout(in.Shape)
				if err != nil {
					b.Fatal(err)
				}
				bytes := in.Bytes()
				for _, l := range layout {
					bytes += l.Bytes()
				}
				t, err := q.Quantize(in, host.QuantizeOptions{})
				if err != nil {
					b.Fatal(err)
				}
				defer t.Free()
				b.ResetTimer()
				for b.Loop() {
					if err := q.QuantizeInto(in, host.QuantizeOptions{}, t); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(bytes)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}
