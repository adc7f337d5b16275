package gemm

import (
	"runtime"
	"sync"

	"libquant/internal/parallel"
)

// Loader writes the tile rows [r0, r1) × columns [c0, c1) of a logical operand
// matrix into dst: element (r, c) at dst[(r-r0)*ld+(c-c0)], or at
// dst[(c-c0)*ld+(r-r0)] when transposed. It must be safe to call from several
// goroutines at once (it only reads the operand).
type Loader func(r0, r1, c0, c1 int, dst []float32, ld int, transposed bool)

// Epilogue receives the finished FP32 sums of the output tile rows
// [i0, i0+rows) × columns [j0, j0+cols): element (i, j) at tile[(i-i0)*ld+(j-j0)].
// It is called exactly once per output element, from several goroutines at
// once for disjoint tiles, and may overwrite the tile.
type Epilogue func(i0, j0, rows, cols int, tile []float32, ld int)

// Problem is one product S = A·B with A [M, K] and B [K, N] as loaders.
type Problem struct {
	M, N, K int
	A, B    Loader
	// Acc, when not nil, is a row-major M×N FP32 buffer (leading dim LdAcc) in
	// which partial sums over blocks of K may be kept; it may be the output
	// itself. When nil and K spans several blocks, Run allocates one.
	Acc      []float32
	LdAcc    int
	Epilogue Epilogue
}

// Block sizes. KC bounds the packed strips a micro-kernel streams (a B strip of
// KC×NR, 32 KiB for NR = 32, and an A strip of MR×KC stay in L1/L2); MC×KC,
// the packed A block one task works on, fits L2 next to them; KC×NC, the
// packed B panel shared by all tasks, fits L3. KC = 256 measured best of
// 128..512 on a Zen 4 core (1 MiB L2, 32 KiB L1d).
const (
	KC    = 256
	MCMax = 192
	NC    = 4096
)

// serialFlops is the size under which goroutines cost more than they save.
const serialFlops = 1 << 21

// Run computes S = A·B in FP32 with the current micro-kernel and hands every
// output tile to p.Epilogue once. Each output element is a sum over K of FP32
// products accumulated in FP32 (fused multiply-adds in the assembly kernels),
// in blocks of KC: |S − Σ a·b| ≤ γ_K·Σ|a·b|, γ_K = K·u/(1−K·u), u = 2^-24.
func Run(p *Problem) { RunWith(Current(), p) }

// RunWith is Run with an explicit micro-kernel.
func RunWith(kn Kernel, p *Problem) {
	m, n, k := p.M, p.N, p.K
	if m <= 0 || n <= 0 {
		return
	}
	if k <= 0 {
		zeroProduct(kn, p)
		return
	}
	acc, ldAcc := p.Acc, p.LdAcc
	if acc == nil && k > KC {
		acc, ldAcc = make([]float32, m*n), n
	}
	workers := runtime.GOMAXPROCS(0)
	if 2*float64(m)*float64(n)*float64(k) < serialFlops {
		workers = 1
	}
	mr, nr := kn.MR, kn.NR

	// Split M into blocks of whole MR strips, as many as a multiple of the
	// workers so that the last round of tasks is not one worker's alone.
	strips := ceilDiv(m, mr)
	nIc := ceilDiv(m, MCMax)
	if workers > 1 {
		nIc = ceilDiv(nIc, workers) * workers
	}
	nIc = min(nIc, strips)
	mc := ceilDiv(strips, nIc) * mr
	nIc = ceilDiv(m, mc)
	// With fewer row blocks than workers, split the columns too.
	nJ := 1
	if nIc < workers {
		nJ = ceilDiv(workers, nIc)
	}

	bpanel := getBuf(KC * roundUp(min(n, NC), nr))
	defer putBuf(bpanel)
	for jc := 0; jc < n; jc += NC {
		nc := min(NC, n-jc)
		bStrips := ceilDiv(nc, nr)
		for pc := 0; pc < k; pc += KC {
			kc := min(KC, k-pc)
			first, last := pc == 0, pc+kc == k
			// Pack B[pc:pc+kc, jc:jc+nc] into NR-wide strips, zero-padded.
			forEach(workers, bStrips, func(s int) {
				dst := (*bpanel)[s*kc*nr : (s+1)*kc*nr]
				j0 := jc + s*nr
				cols := min(nr, jc+nc-j0)
				if cols < nr {
					clear(dst)
				}
				p.B(pc, pc+kc, j0, j0+cols, dst, nr, false)
			})
			jPer := ceilDiv(bStrips, nJ)
			forEach(workers, nIc*nJ, func(task int) {
				ic := (task / nJ) * mc
				js0 := (task % nJ) * jPer
				js1 := min(js0+jPer, bStrips)
				if ic >= m || js0 >= js1 {
					return
				}
				rows := min(mc, m-ic)
				w := getWork(mc*kc, mr*nr)
				defer putWork(w)
				// Pack A[ic:ic+rows, pc:pc+kc] into MR-tall strips, zero-padded.
				aStrips := ceilDiv(rows, mr)
				for s := 0; s < aStrips; s++ {
					dst := w.a[s*kc*mr : (s+1)*kc*mr]
					i0 := ic + s*mr
					r := min(mr, ic+rows-i0)
					if r < mr {
						clear(dst)
					}
					p.A(i0, i0+r, pc, pc+kc, dst, mr, true)
				}
				for js := js0; js < js1; js++ {
					j0 := jc + js*nr
					cols := min(nr, jc+nc-j0)
					bs := (*bpanel)[js*kc*nr : (js+1)*kc*nr]
					for s := 0; s < aStrips; s++ {
						i0 := ic + s*mr
						r := min(mr, ic+rows-i0)
						as := w.a[s*kc*mr : (s+1)*kc*mr]
						if acc == nil {
							kn.run(kc, as, bs, w.tile, nr, false)
							p.Epilogue(i0, j0, r, cols, w.tile, nr)
							continue
						}
						out := acc[i0*ldAcc+j0:]
						if r == mr && cols == nr {
							kn.run(kc, as, bs, out, ldAcc, !first)
						} else {
							kn.run(kc, as, bs, w.tile, nr, false)
							for i := 0; i < r; i++ {
								src := w.tile[i*nr : i*nr+cols]
								dst := out[i*ldAcc : i*ldAcc+cols]
								if first {
									copy(dst, src)
								} else {
									for j, v := range src {
										dst[j] += v
									}
								}
							}
						}
						if last {
							p.Epilogue(i0, j0, r, cols, out, ldAcc)
						}
					}
				}
			})
		}
	}
}

// zeroProduct hands all-zero tiles to the epilogue (K = 0).
func zeroProduct(kn Kernel, p *Problem) {
	tile := make([]float32, kn.MR*kn.NR)
	for i := 0; i < p.M; i += kn.MR {
		for j := 0; j < p.N; j += kn.NR {
			clear(tile)
			p.Epilogue(i, j, min(kn.MR, p.M-i), min(kn.NR, p.N-j), tile, kn.NR)
		}
	}
}

// forEach calls f(0..n-1), on the workers when there are several.
func forEach(workers, n int, f func(int)) {
	if workers <= 1 || n <= 1 {
		for i := 0; i < n; i++ {
			f(i)
		}
		return
	}
	parallel.For(n, 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			f(i)
		}
	})
}

type work struct{ a, tile []float32 }

var workPool, bufPool sync.Pool

func getWork(na, nt int) *work {
	w, _ := workPool.Get().(*work)
	if w == nil {
		w = &work{}
	}
	if cap(w.a) < na {
		w.a = make([]float32, na)
	}
	if cap(w.tile) < nt {
		w.tile = make([]float32, nt)
	}
	w.a, w.tile = w.a[:na], w.tile[:nt]
	return w
}

func putWork(w *work) { workPool.Put(w) }

func getBuf(n int) *[]float32 {
	b, _ := bufPool.Get().(*[]float32)
	if b == nil || cap(*b) < n {
		s := make([]float32, n)
		return &s
	}
	*b = (*b)[:n]
	return b
}

func putBuf(b *[]float32) { bufPool.Put(b) }

func ceilDiv(a, b int) int { return (a + b - 1) / b }
func roundUp(a, b int) int { return ceilDiv(a, b) * b }
