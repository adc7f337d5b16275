//go:build amd64 && !noasm

#include "textflag.h"

// The micro-kernels compute one MR×NR tile of C from packed panels (see
// kernelGo, the reference they must equal up to FMA rounding):
//   a: k steps of MR floats (column p of the A strip), b: k steps of NR floats
//   (row p of the B strip), c: row-major with ldc floats per row.
//   acc false: c = Σ_p a_p ⊗ b_p; acc true: c += Σ_p a_p ⊗ b_p.
// Accumulators live in registers for the whole k loop; each step is one
// broadcast of an A element per row and one FMA per vector of B.

// AVX-512, MR=12, NR=32: Z0..Z23 accumulate (row i in Z(2i), Z(2i+1)), Z24/Z25
// hold the B row, Z26 the broadcast A element.
#define ROW512(off, z0, z1) \
	VBROADCASTSS off(AX), Z26; \
	VFMADD231PS  Z24, Z26, z0; \
	VFMADD231PS  Z25, Z26, z1

#define STORE512(z0, z1) \
	VMOVUPS z0, (DI); \
	VMOVUPS z1, 64(DI); \
	ADDQ    DX, DI

#define ADDSTORE512(z0, z1) \
	VADDPS  (DI), z0, z0; \
	VADDPS  64(DI), z1, z1; \
	VMOVUPS z0, (DI); \
	VMOVUPS z1, 64(DI); \
	ADDQ    DX, DI

// func kernel12x32AVX512(k int, a, b, c *float32, ldc int, acc bool)
TEXT ·kernel12x32AVX512(SB), NOSPLIT, $0-41
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), AX
	MOVQ b+16(FP), BX
	MOVQ c+24(FP), DI
	MOVQ ldc+32(FP), DX
	SHLQ $2, DX

	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	VXORPS Z4, Z4, Z4
	VXORPS Z5, Z5, Z5
	VXORPS Z6, Z6, Z6
	VXORPS Z7, Z7, Z7
	VXORPS Z8, Z8, Z8
	VXORPS Z9, Z9, Z9
	VXORPS Z10, Z10, Z10
	VXORPS Z11, Z11, Z11
	VXORPS Z12, Z12, Z12
	VXORPS Z13, Z13, Z13
	VXORPS Z14, Z14, Z14
	VXORPS Z15, Z15, Z15
	VXORPS Z16, Z16, Z16
	VXORPS Z17, Z17, Z17
	VXORPS Z18, Z18, Z18
	VXORPS Z19, Z19, Z19
	VXORPS Z20, Z20, Z20
	VXORPS Z21, Z21, Z21
	VXORPS Z22, Z22, Z22
	VXORPS Z23, Z23, Z23

	TESTQ CX, CX
	JEQ   store512

loop512:
	VMOVUPS (BX), Z24
	VMOVUPS 64(BX), Z25
	ROW512(0, Z0, Z1)
	ROW512(4, Z2, Z3)
	ROW512(8, Z4, Z5)
	ROW512(12, Z6, Z7)
	ROW512(16, Z8, Z9)
	ROW512(20, Z10, Z11)
	ROW512(24, Z12, Z13)
	ROW512(28, Z14, Z15)
	ROW512(32, Z16, Z17)
	ROW512(36, Z18, Z19)
	ROW512(40, Z20, Z21)
	ROW512(44, Z22, Z23)
	ADDQ $48, AX
	ADDQ $128, BX
	DECQ CX
	JNZ  loop512

store512:
	MOVBLZX acc+40(FP), SI
	TESTL   SI, SI
	JNE     add512
	STORE512(Z0, Z1)
	STORE512(Z2, Z3)
	STORE512(Z4, Z5)
	STORE512(Z6, Z7)
	STORE512(Z8, Z9)
	STORE512(Z10, Z11)
	STORE512(Z12, Z13)
	STORE512(Z14, Z15)
	STORE512(Z16, Z17)
	STORE512(Z18, Z19)
	STORE512(Z20, Z21)
	STORE512(Z22, Z23)
	VZEROUPPER
	RET

add512:
	ADDSTORE512(Z0, Z1)
	ADDSTORE512(Z2, Z3)
	ADDSTORE512(Z4, Z5)
	ADDSTORE512(Z6, Z7)
	ADDSTORE512(Z8, Z9)
	ADDSTORE512(Z10, Z11)
	ADDSTORE512(Z12, Z13)
	ADDSTORE512(Z14, Z15)
	ADDSTORE512(Z16, Z17)
	ADDSTORE512(Z18, Z19)
	ADDSTORE512(Z20, Z21)
	ADDSTORE512(Z22, Z23)
	VZEROUPPER
	RET

// AVX2+FMA, MR=6, NR=16: Y0..Y11 accumulate (row i in Y(2i), Y(2i+1)),
// Y12/Y13 hold the B row, Y14 the broadcast A element.
#define ROW256(off, y0, y1) \
	VBROADCASTSS off(AX), Y14; \
	VFMADD231PS  Y12, Y14, y0; \
	VFMADD231PS  Y13, Y14, y1

#define STORE256(y0, y1) \
	VMOVUPS y0, (DI); \
	VMOVUPS y1, 32(DI); \
	ADDQ    DX, DI

#define ADDSTORE256(y0, y1) \
	VADDPS  (DI), y0, y0; \
	VADDPS  32(DI), y1, y1; \
	VMOVUPS y0, (DI); \
	VMOVUPS y1, 32(DI); \
	ADDQ    DX, DI

// func kernel6x16AVX2(k int, a, b, c *float32, ldc int, acc bool)
TEXT ·kernel6x16AVX2(SB), NOSPLIT, $0-41
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), AX
	MOVQ b+16(FP), BX
	MOVQ c+24(FP), DI
	MOVQ ldc+32(FP), DX
	SHLQ $2, DX

	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

	TESTQ CX, CX
	JEQ   store256

loop256:
	VMOVUPS (BX), Y12
	VMOVUPS 32(BX), Y13
	ROW256(0, Y0, Y1)
	ROW256(4, Y2, Y3)
	ROW256(8, Y4, Y5)
	ROW256(12, Y6, Y7)
	ROW256(16, Y8, Y9)
	ROW256(20, Y10, Y11)
	ADDQ $24, AX
	ADDQ $64, BX
	DECQ CX
	JNZ  loop256

store256:
	MOVBLZX acc+40(FP), SI
	TESTL   SI, SI
	JNE     add256
	STORE256(Y0, Y1)
	STORE256(Y2, Y3)
	STORE256(Y4, Y5)
	STORE256(Y6, Y7)
	STORE256(Y8, Y9)
	STORE256(Y10, Y11)
	VZEROUPPER
	RET

add256:
	ADDSTORE256(Y0, Y1)
	ADDSTORE256(Y2, Y3)
	ADDSTORE256(Y4, Y5)
	ADDSTORE256(Y6, Y7)
	ADDSTORE256(Y8, Y9)
	ADDSTORE256(Y10, Y11)
	VZEROUPPER
	RET
