package host_test

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"libquant/host"
	"libquant/host/hosttest"
)

// benchFormats are the formats BenchmarkGemm pairs: each registered format
// with its default configuration, and "dense", a plain FP32 operand.
func benchFormats() []string {
	names := append([]string{"dense"}, host.FormatNames()...)
	sort.Strings(names[1:])
	return names
}

// BenchmarkGemm measures the CPU GEMM D = A·Bᵀ (the fprop layout, both
// operands rowwise) for M = N = K = n, for every pair of formats a ≤ b in
// benchFormats order, and reports GFLOP/s (2·n³ per GEMM). Operands are
// quantized from BF16 N(0,1) values once; D is FP32. bench/numpy_gemm.py
// compares these figures with NumPy's float32 matmul.
func BenchmarkGemm(b *testing.B) {
	formats := benchFormats()
	for _, n := range []int64{1024, 2048} {
		for i, fa := range formats {
			for _, fb := range formats[i:] {
				b.Run(fmt.Sprintf("%sx%s/%d", fa, fb, n), func(b *testing.B) {
					rng := rand.New(rand.NewPCG(41, 42))
					x := hosttest.RandTensor(b, rng, host.BFloat16, 1, n, n)
					w := hosttest.RandTensor(b, rng, host.BFloat16, 1, n, n)
					opA := benchOperand(b, fa, x)
					opB := benchOperand(b, fb, w)
					opB.Trans = true
					d := hosttest.Tensor(b, host.Float32, n, n)
					args := &host.GemmArgs{A: opA, B: opB, Alpha: 1, D: d}
					if err := host.Gemm(args); err != nil {
						b.Fatal(err)
					}
					b.ResetTimer()
					for b.Loop() {
						if err := host.Gemm(args); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(2*float64(n)*float64(n)*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// benchOperand quantizes x rowwise in format f (its defaults), or converts it
// to a plain FP32 tensor for "dense".
func benchOperand(b *testing.B, f string, x host.Tensor) host.GemmOperand {
	if f == "dense" {
		d := hosttest.Tensor(b, host.Float32, x.Shape...)
		host.StoreFloat32(d, 0, hosttest.Values(x))
		return host.GemmOperand{Dense: &d}
	}
	q, err := host.NewQuantizer(host.Params{Format: f}, host.Rowwise)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(q.Release)
	qt, err := q.Quantize(x, host.QuantizeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(qt.Free)
	return host.GemmOperand{Q: qt}
}
