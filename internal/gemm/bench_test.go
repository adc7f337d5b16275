package gemm

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// fastLoad is a dense row-major loader that copies rows, as the FP32 tile
// loaders of the host do.
func (d dense) fastLoad(r0, r1, c0, c1 int, dst []float32, ld int, transposed bool) {
	for r := r0; r < r1; r++ {
		src := d.v[r*d.cols+c0 : r*d.cols+c1]
		if !transposed {
			copy(dst[(r-r0)*ld:], src)
			continue
		}
		for c, v := range src {
			dst[c*ld+(r-r0)] = v
		}
	}
}

// BenchmarkRun measures the engine alone on FP32 operands: the ceiling of the
// quantized GEMMs, which add dequantization to the packing.
func BenchmarkRun(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, kn := range Kernels() {
		for _, n := range []int{1024, 2048} {
			if kn.Name == "go" && n > 1024 {
				continue
			}
			b.Run(fmt.Sprintf("%s/%d", kn.Name, n), func(b *testing.B) {
				a, bb := randDense(rng, n, n), randDense(rng, n, n)
				out := make([]float32, n*n)
				p := &Problem{M: n, N: n, K: n, A: a.fastLoad, B: bb.fastLoad, Acc: out, LdAcc: n,
					Epilogue: func(int, int, int, int, []float32, int) {}}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					RunWith(kn, p)
				}
				b.ReportMetric(2*float64(n)*float64(n)*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
