package fp8

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/host"
)

// TestBlockRaggedShapesFollowThePaddedTensor: fp8_block has always taken
// ragged shapes; this checks that it obeys spec §14's rule like the other
// block formats. Quantizing X [M, K] gives, at every valid element and for
// every block with a valid element, the bytes of X₀ (X zero-padded to
// multiples of 128), for both block shapes, both scale types, an amax
// epsilon, each direction and both input dtypes; the last valid row and
// column hold each partial block's largest element. The scale buffers'
// shapes differ between X and X₀ (1D rows are pad4(M), not pad4(M₀)), so
// valid scales are compared by block index, and every other scale of X's
// buffer (pre-filled with garbage) must be zero.
func TestBlockRaggedShapesFollowThePaddedTensor(t *testing.T) {
	dims := []int{1, 2, 15, 16, 17, 31, 33, 47, 100, 129}
	var shapes [][2]int
	for _, d := range dims {
		shapes = append(shapes, [2]int{d, 33}, [2]int{17, d}, [2]int{d, 200})
	}
	shapes = append(shapes, [2]int{129, 129}, [2]int{1, 1}, [2]int{130, 257})
	for si, sh := range shapes {
		m, k := sh[0], sh[1]
		m0, k0 := int(ceilDiv(int64(m), BlockLen)*BlockLen), int(ceilDiv(int64(k), BlockLen)*BlockLen)
		rng := rand.New(rand.NewPCG(uint64(si), 1))
		x := randomMatrix(rng, m, k)
		for r := 0; r < m; r++ { // the last valid row and column dominate their blocks
			x[r*k+k-1] = float32(math.Ldexp(1.5, 60)) * float32(1-2*rng.IntN(2))
		}
		for c := 0; c < k; c++ {
			x[(m-1)*k+c] = float32(math.Ldexp(1.25, 61)) * float32(1-2*rng.IntN(2))
		}
		x0 := make([]float32, m0*k0)
		for r := 0; r < m; r++ {
			copy(x0[r*k0:], x[r*k:(r+1)*k])
		}
		for _, c := range blockCases {
			for _, dt := range []host.DType{host.BFloat16, host.Float32} {
				in, _ := newInput(t, dt, m, k, x)
				in0, _ := newInput(t, dt, m0, k0, x0)
				spec := blockSpec(t, c)
				name := fmt.Sprintf("%dx%d/%s/%s", m, k, c, dt)
				var got, want [2]*guardedStorage
				for d := range got {
					got[d] = newGuardedStorage(t, spec, host.Direction(d), m, k)
					want[d] = newGuardedStorage(t, spec, host.Direction(d), m0, k0)
				}
				require.NoError(t, blockKernels{}.Quantize(&host.QuantizeRequest{Spec: spec, Input: in, M: int64(m), K: int64(k),
					Out: [2]*host.Storage{got[0].St, got[1].St}}))
				require.NoError(t, blockKernels{}.Quantize(&host.QuantizeRequest{Spec: spec, Input: in0, M: int64(m0), K: int64(k0),
					Out: [2]*host.Storage{want[0].St, want[1].St}}))
				for d := range got {
					rows, cols, cols0 := m, k, k0
					if d == int(host.DirColumnwise) {
						rows, cols, cols0 = k, m, m0
					}
					data, data0 := got[d].St.MustBuffer(host.BufData).Bytes8(), want[d].St.MustBuffer(host.BufData).Bytes8()
					require.Len(t, data, rows*cols)
					for r := 0; r < rows; r++ {
						require.Equal(t, data0[r*cols0:r*cols0+cols], data[r*cols:(r+1)*cols], "%s dir %d: data row %d", name, d, r)
					}
					l := blockScaleLayoutOf(spec, host.Direction(d), int64(m), int64(k))
					l0 := blockScaleLayoutOf(spec, host.Direction(d), int64(m0), int64(k0))
					s, s0 := got[d].St.MustBuffer(host.BufScaleInv).Float32s(), want[d].St.MustBuffer(host.BufScaleInv).Float32s()
					for i := int64(0); i < l.ni; i++ {
						for j := int64(0); j < l.nj; j++ {
							require.Equal(t, math.Float32bits(s0[l0.index(i, j)]), math.Float32bits(s[l.index(i, j)]), "%s dir %d: scale (%d,%d)", name, d, i, j)
						}
					}
					valid := map[int64]bool{}
					for i := int64(0); i < l.ni; i++ {
						for j := int64(0); j < l.nj; j++ {
							valid[l.index(i, j)] = true
						}
					}
					for idx, v := range s {
						if !valid[int64(idx)] {
							require.Zero(t, math.Float32bits(v), "%s dir %d: padding scale %d", name, d, idx)
						}
					}
					got[d].CheckGuards(t, "")
				}
			}
		}
	}
}
