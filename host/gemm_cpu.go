package host

import (
	"fmt"

	"libquant/internal/gemm"
)

func init() { RegisterGemmKernel(CPU, cpuGemm{}) }

// cpuGemm is the CPU GEMM: every format pair is emulated. Operands are
// dequantized tile by tile into the packed panels of internal/gemm's blocked
// FP32 product (no full-size dequantized copy), each format's per-tensor
// factors (TileDequantizer.TensorScale) go into alpha, and the epilogue
// applies alpha, beta·C, bias and accumulation and rounds to D's dtype.
// A format whose CPU kernels are a WholeDequantizer (an out-of-process
// plugin's, where a call per tile would cost a round trip each) is
// dequantized whole to FP32 once, through its Dequantize kernel, and the
// tiles are read from that copy.
type cpuGemm struct{}

func (cpuGemm) Gemm(r *GemmRequest) error {
	la, sa, freeA, err := cpuLoader("a", &r.A)
	if err != nil {
		return err
	}
	defer freeA()
	lb, sb, freeB, err := cpuLoader("b", &r.B)
	if err != nil {
		return err
	}
	defer freeB()
	m, n := int(r.M), int(r.N)
	e := &cpuEpilogue{
		// Alpha and both tensor factors multiply in float64 and round once, so
		// that a tiny and a huge scale cannot under- or overflow in between.
		alpha:      float32(float64(r.Alpha) * float64(sa) * float64(sb)),
		beta:       r.Beta,
		c:          r.C,
		d:          r.D,
		n:          n,
		accumulate: r.Accumulate,
	}
	if r.Bias != nil {
		e.bias = make([]float32, n)
		LoadFloat32(*r.Bias, 0, e.bias)
	}
	p := &gemm.Problem{M: m, N: n, K: int(r.K), A: la, B: lb, Epilogue: e.apply}
	// Partial sums over K blocks can live in D itself when D is FP32 and
	// nothing the epilogue reads (old D, C) is there.
	if r.D.DType == Float32 && !r.Accumulate && (r.C == nil || !Overlaps(*r.C, r.D)) {
		p.Acc, p.LdAcc = r.D.Float32s(), n
		e.inPlace = true
	}
	gemm.Run(p)
	return nil
}

// cpuLoader returns the tile loader of op(X), X's per-tensor factor, and what
// frees the loader's memory.
func cpuLoader(name string, in *GemmInput) (gemm.Loader, float32, func(), error) {
	rows, cols := in.Rows, in.Cols
	trans := in.Trans
	dense := func(t Tensor) gemm.Loader {
		return func(r0, r1, c0, c1 int, dst []float32, ld int, transposed bool) {
			if trans {
				r0, r1, c0, c1, transposed = c0, c1, r0, r1, !transposed
			}
			DenseTile(t, cols, int64(r0), int64(r1), int64(c0), int64(c1), dst, ld, transposed)
		}
	}
	if in.Storage == nil {
		return dense(in.Dense), 1, func() {}, nil
	}
	st, dir := in.Storage, in.Dir
	k, err := kernelsFor(st.FormatName(), Device{Type: CPU})
	if err != nil {
		return nil, 0, nil, Errorf(ErrUnsupported, "%s: %v", name, err)
	}
	td, ok := k.(TileDequantizer)
	if _, whole := k.(WholeDequantizer); !ok && whole {
		whole, err := AllocTensor(Device{Type: CPU}, Float32, []int64{rows, cols}, 0)
		if err != nil {
			return nil, 0, nil, err
		}
		free := func() { FreeTensor(whole, 0) }
		if err := k.Dequantize(&DequantizeRequest{Spec: st.Spec, Storage: st, Dir: dir, M: rows, K: cols, Out: whole}); err != nil {
			free()
			return nil, 0, nil, fmt.Errorf("%s: dequantizing %s operand: %w", name, st.FormatName(), err)
		}
		return dense(whole), 1, free, nil
	}
	if !ok {
		return nil, 0, nil, Errorf(ErrUnsupported, "%s: format %q has no CPU tile dequantizer", name, st.FormatName())
	}
	return func(r0, r1, c0, c1 int, dst []float32, ld int, transposed bool) {
		if trans {
			r0, r1, c0, c1, transposed = c0, c1, r0, r1, !transposed
		}
		td.DequantizeTile(st, dir, rows, cols, int64(r0), int64(r1), int64(c0), int64(c1), dst, ld, transposed)
	}, td.TensorScale(st, dir), func() {}, nil
}

// cpuEpilogue turns finished FP32 sums s into D, in FP32:
// x = alpha·s; x += beta·c; x += bias[j]; x += d_old; D = round(x).
type cpuEpilogue struct {
	alpha, beta float32
	c           *Tensor
	bias        []float32
	d           Tensor
	n           int
	accumulate  bool
	inPlace     bool // the sums are already in D (FP32)
}

func (e *cpuEpilogue) apply(i0, j0, rows, cols int, tile []float32, ld int) {
	if e.inPlace && e.alpha == 1 && e.c == nil && e.bias == nil {
		return
	}
	const chunk = 64
	var x, buf [chunk]float32
	for i := 0; i < rows; i++ {
		for jj := 0; jj < cols; jj += chunk {
			w := min(chunk, cols-jj)
			off := int64(i0+i)*int64(e.n) + int64(j0+jj)
			s := tile[i*ld+jj : i*ld+jj+w]
			xs := x[:w]
			for j, v := range s {
				xs[j] = e.alpha * v
			}
			if e.c != nil {
				cs := buf[:w]
				LoadFloat32(*e.c, off, cs)
				for j, v := range cs {
					xs[j] += e.beta * v
				}
			}
			if e.bias != nil {
				for j, v := range e.bias[j0+jj : j0+jj+w] {
					xs[j] += v
				}
			}
			if e.accumulate {
				ds := buf[:w]
				LoadFloat32(e.d, off, ds)
				for j, v := range ds {
					xs[j] += v
				}
			}
			StoreFloat32(e.d, off, xs)
		}
	}
}
