package host

// TileDequantizer is implemented by a format's CPU kernels so that the CPU GEMM
// can dequantize operand tiles on the fly instead of whole tensors.
//
// The storage st holds direction dir of a logical [m, k] tensor. A tile is the
// logical rows [r0, r1) and columns [c0, c1). DequantizeTile writes each
// element's value without the per-tensor factor, x / TensorScale(st):
// dst[(r-r0)*ld + (c-c0)] when transposed is false, dst[(c-c0)*ld + (r-r0)]
// when true. Multiplying by TensorScale(st) must give what Dequantize to FP32
// gives, up to that one FP32 rounding. GEMM folds both operands' tensor scales
// into alpha (DESIGN.md, GEMM; spec §5.2).
type TileDequantizer interface {
	TensorScale(st *Storage, dir Direction) float32
	DequantizeTile(st *Storage, dir Direction, m, k, r0, r1, c0, c1 int64, dst []float32, ld int, transposed bool)
}
