package gemm

import (
	"fmt"
	"sync"
	"unsafe"
)

// Kernel is a micro-kernel: it computes one MR×NR tile of the product from a
// packed A strip (k steps of MR values) and a packed B strip (k steps of NR
// values). See kernelGo for the exact loop every kernel implements.
type Kernel struct {
	Name   string
	MR, NR int
	fn     func(k int, a, b, c *float32, ldc int, acc bool)
}

// run checks the slices cover what the kernel touches, then calls it.
func (kn Kernel) run(k int, a, b, c []float32, ldc int, acc bool) {
	if k < 0 || len(a) < k*kn.MR || len(b) < k*kn.NR || ldc < kn.NR || len(c) < (kn.MR-1)*ldc+kn.NR {
		panic(fmt.Sprintf("gemm: %s kernel: k=%d with len(a)=%d len(b)=%d len(c)=%d ldc=%d", kn.Name, k, len(a), len(b), len(c), ldc))
	}
	var pa, pb *float32
	if k > 0 {
		pa, pb = &a[0], &b[0]
	}
	kn.fn(k, pa, pb, &c[0], ldc, acc)
}

// GoKernel is the portable micro-kernel of any shape. Its loop is the
// reference the assembly kernels equal (they fuse the multiply-add; this one
// rounds the product and the sum separately, which the Go compiler on amd64
// does not fuse):
//
//	for i < mr, j < nr: s = 0; for p < k: s += a[p*mr+i]*b[p*nr+j]
//	                    c[i*ldc+j] = s            (acc false)
//	                    c[i*ldc+j] += s           (acc true)
func GoKernel(mr, nr int) Kernel {
	return Kernel{Name: "go", MR: mr, NR: nr, fn: func(k int, a, b, c *float32, ldc int, acc bool) {
		kernelGo(mr, nr, k, a, b, c, ldc, acc)
	}}
}

func kernelGo(mr, nr, k int, pa, pb, pc *float32, ldc int, acc bool) {
	var s [16 * 64]float32
	if mr*nr > len(s) {
		panic("gemm: go kernel tile too large")
	}
	sum := s[:mr*nr]
	if k > 0 {
		a := unsafe.Slice(pa, k*mr)
		b := unsafe.Slice(pb, k*nr)
		for p := 0; p < k; p++ {
			bp := b[p*nr : p*nr+nr]
			for i, ai := range a[p*mr : p*mr+mr] {
				row := sum[i*nr : i*nr+nr]
				for j, bj := range bp {
					row[j] += ai * bj
				}
			}
		}
	}
	c := unsafe.Slice(pc, (mr-1)*ldc+nr)
	for i := 0; i < mr; i++ {
		dst := c[i*ldc : i*ldc+nr]
		src := sum[i*nr : i*nr+nr]
		if acc {
			for j, v := range src {
				dst[j] += v
			}
		} else {
			copy(dst, src)
		}
	}
}

// Kernels lists the micro-kernels this CPU and build can run, fastest first;
// the portable Go kernel is always last.
func Kernels() []Kernel {
	return append(asmKernels(), GoKernel(4, 16))
}

var current = struct {
	sync.RWMutex
	k Kernel
}{k: Kernels()[0]}

// Current is the micro-kernel Run uses.
func Current() Kernel {
	current.RLock()
	defer current.RUnlock()
	return current.k
}

// Use makes Run use the named kernel ("avx512", "avx2" or "go") and returns a
// function that restores the previous one; tests and benchmarks use it to
// cover every path the machine has.
func Use(name string) (restore func(), err error) {
	for _, k := range Kernels() {
		if k.Name == name {
			current.Lock()
			prev := current.k
			current.k = k
			current.Unlock()
			return func() {
				current.Lock()
				current.k = prev
				current.Unlock()
			}, nil
		}
	}
	return nil, fmt.Errorf("gemm: kernel %q is not available on this CPU/build", name)
}
