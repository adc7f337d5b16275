package rpc

import (
	"sort"
	"sync"
)

// arenaAlign is the alignment of every region (a cache line, and enough for
// any element type).
const arenaAlign = 64

// allocator hands out regions of the shared arena: first fit over a sorted
// free list, neighbours merged on free. Regions live for one call.
type allocator struct {
	mu   sync.Mutex
	free []span // sorted by off, disjoint, never adjacent
	size int64
}

type span struct{ off, n int64 }

func newAllocator(size int64) *allocator {
	return &allocator{free: []span{{0, size}}, size: size}
}

// alloc returns the offset of n bytes, or false when no free span is large
// enough.
func (a *allocator) alloc(n int64) (int64, bool) {
	n = max((n+arenaAlign-1)&^(arenaAlign-1), arenaAlign)
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, s := range a.free {
		if s.n >= n {
			if s.n == n {
				a.free = append(a.free[:i], a.free[i+1:]...)
			} else {
				a.free[i] = span{s.off + n, s.n - n}
			}
			return s.off, true
		}
	}
	return 0, false
}

// release returns the region of n bytes at off.
func (a *allocator) release(off, n int64) {
	n = max((n+arenaAlign-1)&^(arenaAlign-1), arenaAlign)
	a.mu.Lock()
	defer a.mu.Unlock()
	i := sort.Search(len(a.free), func(i int) bool { return a.free[i].off > off })
	a.free = append(a.free, span{})
	copy(a.free[i+1:], a.free[i:])
	a.free[i] = span{off, n}
	// Merge with the next, then with the previous.
	if i+1 < len(a.free) && a.free[i].off+a.free[i].n == a.free[i+1].off {
		a.free[i].n += a.free[i+1].n
		a.free = append(a.free[:i+1], a.free[i+2:]...)
	}
	if i > 0 && a.free[i-1].off+a.free[i-1].n == a.free[i].off {
		a.free[i-1].n += a.free[i].n
		a.free = append(a.free[:i], a.free[i+1:]...)
	}
}
