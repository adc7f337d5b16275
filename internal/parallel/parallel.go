// Package parallel runs loops over goroutines. Kernels split their work into
// independent chunks (blocks of a tensor) so that results never depend on the
// number of workers.
package parallel

import (
	"runtime"
	"sync"
)

// For calls body(lo, hi) over [0, n) in chunks of at least grain items, on up to
// GOMAXPROCS goroutines, and returns when all calls have. Chunk boundaries are
// multiples of grain, so a caller that makes grain a multiple of its block size
// never splits a block.
func For(n, grain int, body func(lo, hi int)) {
	if n <= 0 {
		return
	}
	if grain < 1 {
		grain = 1
	}
	workers := runtime.GOMAXPROCS(0)
	chunks := (n + grain - 1) / grain
	if workers > chunks {
		workers = chunks
	}
	if workers <= 1 {
		body(0, n)
		return
	}
	// Several chunks per worker balance uneven work without a queue per item.
	per := (chunks + 4*workers - 1) / (4 * workers)
	step := per * grain
	var next int64
	var mu sync.Mutex
	take := func() (int, int, bool) {
		mu.Lock()
		lo := int(next)
		next += int64(step)
		mu.Unlock()
		if lo >= n {
			return 0, 0, false
		}
		return lo, min(lo+step, n), true
	}
	var wg sync.WaitGroup
	var firstPanic any
	var panicOnce sync.Once
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A panic in a worker is carried back to the caller's goroutine, where the
			// C ABI's recover can see it; an unrecovered goroutine panic would kill
			// the caller's process.
			defer func() {
				if r := recover(); r != nil {
					panicOnce.Do(func() { firstPanic = r })
				}
			}()
			for {
				lo, hi, ok := take()
				if !ok {
					return
				}
				body(lo, hi)
			}
		}()
	}
	wg.Wait()
	if firstPanic != nil {
		panic(firstPanic)
	}
}
