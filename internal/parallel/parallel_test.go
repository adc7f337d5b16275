package parallel

import (
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestForCoversEveryIndexOnceOnGrainBoundaries(t *testing.T) {
	for _, procs := range []int{1, 2, 7} {
		old := runtime.GOMAXPROCS(procs)
		for _, n := range []int{0, 1, 5, 64, 1000, 4097} {
			hits := make([]int32, n)
			For(n, 32, func(lo, hi int) {
				require.Zero(t, lo%32, "chunk start %d is not on a grain boundary", lo)
				for i := lo; i < hi; i++ {
					atomic.AddInt32(&hits[i], 1)
				}
			})
			for i, h := range hits {
				require.EqualValues(t, 1, h, "procs=%d n=%d index %d", procs, n, i)
			}
		}
		runtime.GOMAXPROCS(old)
	}
}

func TestForCarriesWorkerPanicToCaller(t *testing.T) {
	old := runtime.GOMAXPROCS(4)
	defer runtime.GOMAXPROCS(old)
	require.PanicsWithValue(t, "boom", func() {
		For(1000, 1, func(lo, hi int) {
			if lo <= 500 && 500 < hi {
				panic("boom")
			}
		})
	})
}
