package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// dense is a row-major matrix with a Loader.
type dense struct {
	rows, cols int
	v          []float32
}

func randDense(rng *rand.Rand, rows, cols int) dense {
	d := dense{rows, cols, make([]float32, rows*cols)}
	for i := range d.v {
		d.v[i] = float32(rng.NormFloat64())
	}
	return d
}

func (d dense) load(r0, r1, c0, c1 int, dst []float32, ld int, transposed bool) {
	for r := r0; r < r1; r++ {
		for c := c0; c < c1; c++ {
			if transposed {
				dst[(c-c0)*ld+(r-r0)] = d.v[r*d.cols+c]
			} else {
				dst[(r-r0)*ld+(c-c0)] = d.v[r*d.cols+c]
			}
		}
	}
}

// checkProduct compares got (M×N, leading dim ld) with the float64 product
// within the FP32 accumulation bound γ_K·Σ|a||b| (γ_K = K·u/(1−K·u), u = 2^-24;
// the blocked, fused or unfused sum of K products has at most K roundings on
// any path, Higham §3.1), plus K·2^-149 for underflow.
func checkProduct(t *testing.T, a, b dense, got []float32, ld int) {
	t.Helper()
	checkProductPlus(t, a, b, nil, got, ld)
}

// checkProductPlus is checkProduct for got = init + A·B: one more addition,
// so the bound is γ_{K+1}·(Σ|a||b| + |init|).
func checkProductPlus(t *testing.T, a, b dense, init, got []float32, ld int) {
	t.Helper()
	m, k, n := a.rows, a.cols, b.cols
	u := math.Ldexp(1, -24)
	terms := k
	if init != nil {
		terms++
	}
	gamma := float64(terms) * u / (1 - float64(terms)*u)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s, sa float64
			if init != nil {
				s, sa = float64(init[i*ld+j]), math.Abs(float64(init[i*ld+j]))
			}
			for p := 0; p < k; p++ {
				x := float64(a.v[i*k+p]) * float64(b.v[p*n+j])
				s += x
				sa += math.Abs(x)
			}
			bound := gamma*sa + float64(k)*math.Ldexp(1, -149)
			g := float64(got[i*ld+j])
			if math.Abs(g-s) > bound {
				require.Failf(t, "product out of bound", "(%d,%d): got %g want %g, |err| %g > bound %g", i, j, g, s, math.Abs(g-s), bound)
			}
		}
	}
}

func TestKernelsMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, kn := range append(Kernels(), GoKernel(12, 32), GoKernel(6, 16)) {
		t.Run(fmt.Sprintf("%s_%dx%d", kn.Name, kn.MR, kn.NR), func(t *testing.T) {
			for _, k := range []int{0, 1, 7, 64} {
				a := randDense(rng, kn.MR, k)
				b := randDense(rng, k, kn.NR)
				ap := make([]float32, k*kn.MR)
				a.load(0, kn.MR, 0, k, ap, kn.MR, true)
				// c has a guard column and a guard row: ldc = NR+3.
				ldc := kn.NR + 3
				c := make([]float32, (kn.MR+1)*ldc)
				for i := range c {
					c[i] = 1000
				}
				kn.run(k, ap, b.v, c, ldc, false)
				checkProduct(t, a, b, c, ldc)
				for i := 0; i < kn.MR+1; i++ {
					for j := 0; j < ldc; j++ {
						if i == kn.MR || j >= kn.NR {
							require.Equal(t, float32(1000), c[i*ldc+j], "guard (%d,%d) written", i, j)
						}
					}
				}
				// acc: c += product, from random c.
				init := make([]float32, len(c))
				for i := range c {
					c[i] = float32(rng.NormFloat64())
					init[i] = c[i]
				}
				kn.run(k, ap, b.v, c, ldc, true)
				checkProductPlus(t, a, b, init, c, ldc)
			}
		})
	}
}

func TestRunShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	shapes := [][3]int{{1, 1, 1}, {13, 33, 5}, {50, 70, KC + 17}, {37, 200, 2*KC + 1}, {129, 5, 3}, {3, 1, 900}, {7, 9, 0}}
	for _, kn := range append(Kernels(), GoKernel(5, 8)) {
		for _, s := range shapes {
			for _, mode := range []string{"no-acc", "acc"} {
				m, n, k := s[0], s[1], s[2]
				t.Run(fmt.Sprintf("%s/%dx%dx%d/%s", kn.Name, m, n, k, mode), func(t *testing.T) {
					a, b := randDense(rng, m, k), randDense(rng, k, n)
					ld := n + 2
					out := make([]float32, m*ld)
					for i := range out {
						out[i] = -7
					}
					var mu sync.Mutex
					calls := make([]int, m*n)
					p := &Problem{M: m, N: n, K: k, A: a.load, B: b.load,
						Epilogue: func(i0, j0, rows, cols int, tile []float32, ldt int) {
							mu.Lock()
							defer mu.Unlock()
							for i := 0; i < rows; i++ {
								for j := 0; j < cols; j++ {
									calls[(i0+i)*n+j0+j]++
									out[(i0+i)*ld+j0+j] = tile[i*ldt+j]
								}
							}
						}}
					if mode == "acc" {
						p.Acc, p.LdAcc = out, ld
					}
					RunWith(kn, p)
					for i, c := range calls {
						require.Equal(t, 1, c, "epilogue calls for element %d", i)
					}
					checkProduct(t, a, b, out, ld)
					for i := 0; i < m; i++ {
						require.Equal(t, []float32{-7, -7}, out[i*ld+n:i*ld+n+2], "row %d guard columns written", i)
					}
				})
			}
		}
	}
}

func TestUse(t *testing.T) {
	restore, err := Use("go")
	require.NoError(t, err)
	require.Equal(t, "go", Current().Name)
	restore()
	_, err = Use("sse9")
	require.ErrorContains(t, err, "sse9")
}
