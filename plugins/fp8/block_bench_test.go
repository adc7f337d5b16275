package fp8

import (
	"math/rand/v2"
	"testing"

	"libquant/host"
	"libquant/host/hosttest"
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
				hosttest.BenchQuantize(b, in, host.Params{Format: NameBlock, BlockDims: dims}, u.usage)
			})
		}
	}
}
