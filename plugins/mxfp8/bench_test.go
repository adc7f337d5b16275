package mxfp8

import (
	"math/rand/v2"
	"testing"

	"libquant/host"
	"libquant/host/hosttest"
)

// benchInput is a 4096×4096 BF16 tensor of normal values.
func benchInput(b *testing.B) host.Tensor {
	const m, k = 4096, 4096
	x := make([]float32, m*k)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	in, _ := newInput(b, host.BFloat16, m, k, x)
	return in
}

var benchUsages = []struct {
	name  string
	usage host.Usage
}{{"rowwise", host.Rowwise}, {"columnwise", host.Columnwise}, {"both", host.BothUsages}}

// BenchmarkQuantize/<format>_<direction>: 4096×4096 BF16 (bench/numpy_mx.py
// parses these names).
func BenchmarkQuantize(b *testing.B) {
	in := benchInput(b)
	for _, f := range []struct {
		name string
		p    host.Params
	}{
		{"mxfp8", host.Params{Format: NameMXFP8}},
		{"mxfp8_floor", host.Params{Format: NameMXFP8, ScaleRounding: host.ScaleFLOOR}},
		{"mxfp4", host.Params{Format: NameMXFP4}},
	} {
		for _, u := range benchUsages {
			b.Run(f.name+"_"+u.name, func(b *testing.B) { hosttest.BenchQuantize(b, in, f.p, u.usage) })
		}
	}
}
