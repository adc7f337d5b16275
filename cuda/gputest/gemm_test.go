package gputest

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/require"

	"libquant/host"
	"libquant/host/hosttest"
	"libquant/internal/testutil"
)

// gemmOperand is one operand configuration of the GPU GEMM tests: a
// quantizer (nil: a dense tensor of dtype dense).
type gemmOperand struct {
	name   string
	params *host.Params
	hybrid *[2]host.Params // rowwise, columnwise formats of a hybrid quantizer
	dense  host.DType
}

func gemmOperands() []gemmOperand {
	p := func(x host.Params) *host.Params { return &x }
	return []gemmOperand{
		{name: "bf16", dense: host.BFloat16},
		{name: "fp16", dense: host.Float16},
		{name: "fp32", dense: host.Float32},
		{name: "fp8 e4m3", params: p(host.Params{Format: "fp8"})},
		{name: "fp8 e5m2", params: p(host.Params{Format: "fp8", Element: host.ElementE5M2})},
		{name: "fp8_block 1x128", params: p(host.Params{Format: "fp8_block"})},
		{name: "fp8_block 128x128", params: p(host.Params{Format: "fp8_block", BlockDims: 2})},
		{name: "mxfp8", params: p(host.Params{Format: "mxfp8"})},
		{name: "mxfp8 e5m2 swizzled", params: p(host.Params{Format: "mxfp8", Element: host.ElementE5M2, GEMMSwizzledScales: true})},
		{name: "mxfp4", params: p(host.Params{Format: "mxfp4"})},
		{name: "nvfp4", params: p(host.Params{Format: "nvfp4"})},
		{name: "nvfp4 16x16 swizzled", params: p(host.Params{Format: "nvfp4", BlockDims: 2, GEMMSwizzledScales: true})},
		{name: "hybrid mxfp8|nvfp4", hybrid: &[2]host.Params{{Format: "mxfp8"}, {Format: "nvfp4"}}},
	}
}

// gemmOperandsByName is gemmOperands by name.
func gemmOperandsByName() map[string]gemmOperand {
	m := map[string]gemmOperand{}
	for _, o := range gemmOperands() {
		m[o.name] = o
	}
	return m
}

// gemmSide is one operand made on both devices from one input: the CPU and
// GPU quantized tensors (equal bytes, TestQuantizeMatchesCPU) or dense
// tensors, and the CPU values of each direction (dequantized exactly).
type gemmSide struct {
	cpu, gpu host.GemmOperand
	vals     map[host.Direction][]float32 // the values each direction holds (dense: both the same)
	rows     int64
	cols     int64
	fp8      host.Element // per-tensor FP8 operand: its element (else 0)
	fp8block int32        // fp8_block operand: its block dims, 1 or 2 (else 0)
}

func makeGemmSide(t *testing.T, op gemmOperand, rows, cols int64, seed uint64) gemmSide {
	t.Helper()
	dt := host.BFloat16
	if op.dense != host.DTypeInvalid {
		dt = op.dense
	}
	return makeGemmSideFrom(t, op, input(t, dt, "normal", rows, cols, seed))
}

// makeGemmSideFrom is makeGemmSide of a given 2-D input x (of the dense
// dtype for a dense operand).
func makeGemmSideFrom(t *testing.T, op gemmOperand, x host.Tensor) gemmSide {
	t.Helper()
	rows, cols := x.Shape[0], x.Shape[1]
	s := gemmSide{rows: rows, cols: cols, vals: map[host.Direction][]float32{}}
	if op.params == nil && op.hybrid == nil {
		g := toGPU(t, x)
		s.cpu.Dense, s.gpu.Dense = &x, &g
		v := make([]float32, rows*cols)
		host.LoadFloat32(x, 0, v)
		s.vals[host.DirRowwise], s.vals[host.DirColumnwise] = v, v
		return s
	}
	if op.params != nil && op.params.Format == "fp8_block" {
		s.fp8block = max(op.params.BlockDims, 1)
	}
	if op.params != nil && op.params.Format == "fp8" {
		s.fp8 = host.ElementE4M3
		if op.params.Element == host.ElementE5M2 {
			s.fp8 = host.ElementE5M2
		}
	}
	var q *host.Quantizer
	var err error
	if op.hybrid != nil {
		r, err := host.NewQuantizer(op.hybrid[0], host.BothUsages)
		require.NoError(t, err)
		defer r.Release()
		c, err := host.NewQuantizer(op.hybrid[1], host.BothUsages)
		require.NoError(t, err)
		defer c.Release()
		q, err = host.NewHybridQuantizer(r, c, host.ColumnwiseSource(0))
		require.NoError(t, err)
	} else {
		q, err = host.NewQuantizer(*op.params, host.BothUsages)
		require.NoError(t, err)
	}
	defer q.Release()
	cq, err := q.Quantize(x, host.QuantizeOptions{})
	require.NoError(t, err)
	t.Cleanup(cq.Free)
	gq, err := q.Quantize(toGPU(t, x), host.QuantizeOptions{})
	require.NoError(t, err)
	t.Cleanup(gq.Free)
	require.NoError(t, host.Synchronize(gpu, 0))
	compareTensors(t, op.name+" operand", cq, gq)
	for _, d := range []host.Direction{host.DirRowwise, host.DirColumnwise} {
		out := hosttest.Tensor(t, host.Float32, rows, cols)
		require.NoError(t, cq.Dequantize(d, out, 0))
		s.vals[d] = append([]float32(nil), out.Float32s()...)
	}
	s.cpu.Q, s.gpu.Q = cq, gq
	return s
}

// gemmCheck compares a GPU D with the float64 product of the operands'
// dequantized values within host/gemm_test.go's bound (restated there in
// full): every term of D carries at most K+8 FP32 roundings, so
//
//	|D − R| ≤ E + u_out·(|R| + E),  E = γ_{K+8}·(|α|Σ|a||b| + |β c| + |bias| + |d_old|) + (K+8)·2^-149
//
// where R is the exact result. The GPU path meets the same premises: BF16
// expansion is exact (MX and NVFP4 values have at most 6 significant bits
// and the scales' range, FP8 codes are BF16 values), per-tensor factors go
// into alpha in float64 rounded once, and cuBLASLt accumulates in FP32. It
// also checks the GPU D against the CPU quant_gemm's D: both lie within that
// bound of R, so they differ by at most twice it.
//
// The native FP8 paths (FP8 × FP8 but E5M2 × E5M2, M, N, K multiples of 16;
// fp8_block 1x128 × 1x128 or 128x128 with M, N multiples of 16 and K of 128,
// or 512 for 128x128) break one premise: Hopper's FP8 tensor cores add the (exact) products in an
// accumulator of about 14 significant bits between cuBLASLt's promotions to
// FP32 (DeepSeek-V3 technical report §3.3.2; H100 run 2 measured errors of
// 2^-16.5·Σ|ab| at K = 160). Modelling that accumulator as rounding with
// u_acc = 2^-13 (one bit of margin) adds γ_K(u_acc)·|α|Σ|a||b| to E for that
// path (Higham §3.1 with u_acc); the FP32 epilogue terms stay as they are.
// That is looser, but still far below |R| for random data, so a wrong scale,
// layout or transpose still fails.
type gemmRef struct {
	opA, opBt     []float64 // op(A) [m, k], op(B)ᵀ [n, k]
	m, n, k       int
	alpha, beta   float32
	c, bias, dOld []float32
	accumulate    bool
	outDType      host.DType
	accU          float64 // > 0: the products accumulate with this unit roundoff (native FP8)
	fusedBlock    int     // > 0: add fusedTerm over K blocks of this size (fused_test.go)
}

func (g *gemmRef) check(t *testing.T, what string, gotGPU, gotCPU []float32) (worst float64) {
	t.Helper()
	uOut := hosttest.UnitRoundoff(g.outDType)
	gamma := testutil.GammaN(g.k + 8)
	bad := 0
	var first string
	for i := 0; i < g.m; i++ {
		for j := 0; j < g.n; j++ {
			var s, sa float64
			ra, rb := g.opA[i*g.k:(i+1)*g.k], g.opBt[j*g.k:(j+1)*g.k]
			for p, x := range ra {
				x *= rb[p]
				s += x
				sa += math.Abs(x)
			}
			r := float64(g.alpha) * s
			mag := math.Abs(float64(g.alpha)) * sa
			fused := 0.0
			if g.fusedBlock > 0 {
				fused = math.Abs(float64(g.alpha)) * fusedTerm(ra, rb, g.fusedBlock)
			}
			if g.c != nil {
				r += float64(g.beta) * float64(g.c[i*g.n+j])
				mag += math.Abs(float64(g.beta) * float64(g.c[i*g.n+j]))
			}
			if g.bias != nil {
				r += float64(g.bias[j])
				mag += math.Abs(float64(g.bias[j]))
			}
			if g.accumulate {
				r += float64(g.dOld[i*g.n+j])
				mag += math.Abs(float64(g.dOld[i*g.n+j]))
			}
			e := gamma*mag + fused + float64(g.k+8)*math.Ldexp(1, -149)
			if g.accU > 0 {
				nu := float64(g.k) * g.accU
				e += nu / (1 - nu) * math.Abs(float64(g.alpha)) * sa
			}
			bound := e + uOut*(math.Abs(r)+e)
			got := float64(gotGPU[i*g.n+j])
			err := math.Abs(got - r)
			if bound > 0 && err/bound > worst {
				worst = err / bound
			}
			vsCPU := math.Abs(got - float64(gotCPU[i*g.n+j]))
			if !(err <= bound) || !(vsCPU <= 2*bound) {
				bad++
				if first == "" {
					first = fmt.Sprintf("D[%d,%d]: gpu %g, cpu %g, exact %g: |gpu-exact| %g (bound %g), |gpu-cpu| %g (bound %g)",
						i, j, got, gotCPU[i*g.n+j], r, err, bound, vsCPU, 2*bound)
				}
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d elements out of bound; first %s", what, bad, g.m*g.n, first)
	}
	return worst
}

type gemmEpilogue struct {
	name       string
	alpha      float32
	beta       float32
	c          string // "", "same" (C of D's dtype), "f32", "d" (C is D)
	bias       host.DType
	accumulate bool
	// fused: the GPU may take the fused Hopper kernel (default dispatch); its
	// bound adds the tensor core's block-sum error (fused_test.go). Otherwise
	// the GPU GEMM runs with Exact set.
	fusedBlock int
}

// operandShapes: the stored shapes of A and B for op(A) [m, k] and op(B)
// [k, n] under the transposes ta, tb.
func operandShapes(m, n, k int64, ta, tb bool) (ar, ac, br, bc int64) {
	ar, ac, br, bc = m, k, k, n
	if ta {
		ar, ac = k, m
	}
	if tb {
		br, bc = n, k
	}
	return ar, ac, br, bc
}

// runGPUGemm runs one GEMM on the CPU and on the GPU with the same operands
// and epilogue and checks both against the exact result.
func runGPUGemm(t *testing.T, what string, a, b gemmSide, ta, tb bool, out host.DType, ep gemmEpilogue, seed uint64) float64 {
	t.Helper()
	m, ka := a.rows, a.cols
	if ta {
		m, ka = ka, m
	}
	kb, n := b.rows, b.cols
	if tb {
		kb, n = n, kb
	}
	require.Equal(t, ka, kb)
	k := ka
	// The directions host.Gemm reads (TE's rule, spec §7.2).
	dirA, dirB := host.DirRowwise, host.DirColumnwise
	if ta {
		dirA = host.DirColumnwise
	}
	if tb {
		dirB = host.DirRowwise
	}
	av, bv := a.vals[dirA], b.vals[dirB]
	ref := &gemmRef{m: int(m), n: int(n), k: int(k), alpha: ep.alpha, beta: ep.beta, accumulate: ep.accumulate, outDType: out, fusedBlock: ep.fusedBlock}
	if a.fp8 != 0 && b.fp8 != 0 && !(a.fp8 == host.ElementE5M2 && b.fp8 == host.ElementE5M2) && n%16 == 0 && k%16 == 0 {
		ref.accU = math.Ldexp(1, -13) // the native FP8 path (cuda/gemm.cu)
	}
	if a.fp8block == 1 && b.fp8block != 0 && n%16 == 0 && k%128 == 0 && (b.fp8block == 1 || (k/128)%4 == 0) {
		ref.accU = math.Ldexp(1, -13) // FP8 block scaling in cuBLASLt: the same tensor cores
	}
	ref.opA, ref.opBt = make([]float64, m*k), make([]float64, n*k)
	for i := int64(0); i < m; i++ {
		for p := int64(0); p < k; p++ {
			if ta {
				ref.opA[i*k+p] = float64(av[p*a.cols+i])
			} else {
				ref.opA[i*k+p] = float64(av[i*a.cols+p])
			}
		}
	}
	for j := int64(0); j < n; j++ {
		for p := int64(0); p < k; p++ {
			if tb {
				ref.opBt[j*k+p] = float64(bv[j*b.cols+p])
			} else {
				ref.opBt[j*k+p] = float64(bv[p*b.cols+j])
			}
		}
	}
	// D (old contents for accumulate), C and bias, the same on both devices.
	dInit := input(t, out, "normal", m, n, seed+1)
	ref.dOld = make([]float32, m*n)
	host.LoadFloat32(dInit, 0, ref.dOld)
	dCPU := hosttest.Tensor(t, out, m, n)
	copy(dCPU.Bytes8(), dInit.Bytes8())
	dGPU := toGPU(t, dInit)
	argsCPU := &host.GemmArgs{A: a.cpu, B: b.cpu, Alpha: ep.alpha, D: dCPU, Accumulate: ep.accumulate}
	argsGPU := &host.GemmArgs{A: a.gpu, B: b.gpu, Alpha: ep.alpha, D: dGPU, Accumulate: ep.accumulate, Exact: ep.fusedBlock == 0}
	argsCPU.A.Trans, argsCPU.B.Trans, argsGPU.A.Trans, argsGPU.B.Trans = ta, tb, ta, tb
	switch ep.c {
	case "same", "f32":
		dt := out
		if ep.c == "f32" {
			dt = host.Float32
		}
		c := input(t, dt, "normal", m, n, seed+2)
		gc := toGPU(t, c)
		argsCPU.C, argsGPU.C = &c, &gc
		argsCPU.Beta, argsGPU.Beta = ep.beta, ep.beta
		ref.c = make([]float32, m*n)
		host.LoadFloat32(c, 0, ref.c)
	case "d":
		argsCPU.C, argsGPU.C = &argsCPU.D, &argsGPU.D
		argsCPU.Beta, argsGPU.Beta = ep.beta, ep.beta
		ref.c = ref.dOld
	}
	if ep.bias != host.DTypeInvalid {
		bias := input(t, ep.bias, "normal", 1, n, seed+3)
		bias.Shape = []int64{n}
		gb := toGPU(t, bias)
		argsCPU.Bias, argsGPU.Bias = &bias, &gb
		ref.bias = make([]float32, n)
		host.LoadFloat32(bias, 0, ref.bias)
	}
	require.NoError(t, host.Gemm(argsCPU), "%s: cpu", what)
	require.NoError(t, host.Gemm(argsGPU), "%s: gpu", what)
	gotGPU := make([]float32, m*n)
	host.LoadFloat32(toCPU(t, dGPU), 0, gotGPU)
	gotCPU := make([]float32, m*n)
	host.LoadFloat32(dCPU, 0, gotCPU)
	return ref.check(t, what, gotGPU, gotCPU)
}

// TestGemmMatchesCPU: every operand pair (formats, dense dtypes, a hybrid
// tensor) × the four transposes × D in FP32/BF16/FP16, at an aligned shape
// (the native FP8 path needs multiples of 16) and a ragged one (spec §14 item
// 5: M, N, K not multiples of any block), against the exact product and the
// CPU quant_gemm.
func TestGemmMatchesCPU(t *testing.T) {
	needGPU(t)
	ops := gemmOperands()
	// [64, 48, 512]: whole 128-blocks along K for the native FP8 block path.
	shapes := [][3]int64{{64, 48, 160}, {45, 33, 77}, {64, 48, 512}}
	for ai, oa := range ops {
		for bi, ob := range ops {
			t.Run(oa.name+" x "+ob.name, func(t *testing.T) {
				worst := 0.0
				for si, sh := range shapes {
					m, n, k := sh[0], sh[1], sh[2]
					for tr := 0; tr < 4; tr++ {
						ta, tb := tr&1 != 0, tr&2 != 0
						ar, ac, br, bc := operandShapes(m, n, k, ta, tb)
						seed := uint64(ai*1000 + bi*10 + si*4 + tr)
						a := makeGemmSide(t, oa, ar, ac, seed)
						b := makeGemmSide(t, ob, br, bc, seed+500)
						for _, out := range []host.DType{host.Float32, host.BFloat16, host.Float16} {
							what := fmt.Sprintf("%v transA=%v transB=%v d=%s", sh, ta, tb, out)
							w := runGPUGemm(t, what, a, b, ta, tb, out, gemmEpilogue{alpha: 1}, seed)
							worst = math.Max(worst, w)
						}
					}
				}
				t.Logf("largest |gpu-exact| / bound: %.3g", worst)
			})
		}
	}
}

// TestGemmFP8AnyRowsMatchCPU: cuBLASLt's FP8 paths (per-tensor, and block
// scaling with A's codes and scales zero-padded to 16 rows: cuda/gemm.cu
// pad_fp8_block_kernel) at M of 1 to 45 rows, not multiples of 16 (decode
// batches, the linear layer's fprop X·Wᵀ), and at 16 and 32 (no padding),
// against the CPU within the FP8 tensor cores' bound, D in FP32 and BF16,
// with and without a BF16 bias (with BF16 D and no padding, cuBLASLt's
// bias epilogue).
//
// That the FP8 tensor cores ran, and not the BF16/FP32 expansion the same
// shapes took before, shows in one output: rows of A (32, 2^-5, 448, 0, ...)
// and of B (32, 2^-5, 0, bmax, 0, ...), bmax the element's largest value, so
// that every block's amax gives a scale of exactly 1 and every code is exact,
// make D = 1024 + 2^-10 in every element. FP32 accumulation (the expansion)
// keeps the 2^-10 (a sum of 21 significant bits); one FP8 wgmma aligns its
// products to the largest and keeps 13 fraction bits below it (README,
// "Fused Hopper GEMM"; the bound the FP8 rows of runGPUGemm use), so 2^-10
// beside 2^10 is dropped and D = 1024.
func TestGemmFP8AnyRowsMatchCPU(t *testing.T) {
	needGPU(t)
	byName := gemmOperandsByName()
	pairs := [][2]string{{"fp8 e4m3", "fp8 e4m3"}, {"fp8 e4m3", "fp8 e5m2"}, {"fp8_block 1x128", "fp8_block 128x128"},
		{"fp8_block 1x128", "fp8_block 1x128"}}
	const n, k = 256, 512
	for pi, pr := range pairs {
		t.Run(pr[0]+" x "+pr[1], func(t *testing.T) {
			for si, m := range []int64{1, 2, 4, 7, 8, 16, 17, 32, 45} {
				seed := uint64(9500 + 10*pi + si)
				a := makeGemmSide(t, byName[pr[0]], m, k, seed)
				b := makeGemmSide(t, byName[pr[1]], n, k, seed+1)
				for _, ep := range []gemmEpilogue{{alpha: 1}, {alpha: 0.5, bias: host.BFloat16}} {
					for _, out := range []host.DType{host.Float32, host.BFloat16} {
						what := fmt.Sprintf("m=%d d=%s bias=%v", m, out, ep.bias != host.DTypeInvalid)
						runGPUGemm(t, what, a, b, false, true, out, ep, seed)
					}
				}
				// The probe of the path.
				bmax := float32(448)
				if strings.Contains(pr[1], "e5m2") {
					bmax = 57344
				}
				av, bv := make([]float32, m*k), make([]float32, n*k)
				for i := int64(0); i < m; i++ {
					copy(av[i*k:], []float32{32, 1.0 / 32, 448})
				}
				for j := int64(0); j < n; j++ {
					copy(bv[j*k:], []float32{32, 1.0 / 32, 0, bmax})
				}
				xa, _ := hosttest.Input(t, host.BFloat16, av, m, k)
				xb, _ := hosttest.Input(t, host.BFloat16, bv, n, k)
				pa, pb := makeGemmSideFrom(t, byName[pr[0]], xa), makeGemmSideFrom(t, byName[pr[1]], xb)
				d := gpuTensor(t, host.Float32, []int64{m, n})
				ga, gb := pa.gpu, pb.gpu
				gb.Trans = true
				require.NoError(t, host.Gemm(&host.GemmArgs{A: ga, B: gb, Alpha: 1, D: d}))
				got := make([]float32, m*n)
				host.LoadFloat32(toCPU(t, d), 0, got)
				for i, v := range got {
					require.Equal(t, float32(1024), v, "m=%d: D[%d] = %v (1024 + 2^-10 = %v is FP32 accumulation's): the FP8 tensor cores did not run",
						m, i, v, float32(1024+1.0/1024))
				}
			}
		})
	}
}

// TestGemmFP8BlockSplitKMatchesCPU: fp8_block 1x128 activations against
// 128x128 weight blocks at decode shapes whose weight tiles cover at most a
// quarter of the SMs, where the plugin splits K over cuBLASLt's partial sums
// (cuda/gemm.cu split_block_weights): against the CPU within the FP8 tensor
// cores' bound, D in FP32 and BF16, with and without a bias, at M of 1, 7,
// 16 and 45 (padded to 16 or 48 rows).
//
// That K was split shows in one output: A's rows and B's rows hold 448 in
// all of K block 0 (block sum 128·448² = 25690112, above 2^24, where FP32's
// spacing is 2) and, in each later block, a product of 1 beside a 448 that
// meets a 0 (every block's amax 448: scales of exactly 1, exact codes). One
// FP32 accumulator over all of K adds each 1 to 25690112 and rounds it away
// (a tie, to even); split in parts, the parts without block 0 keep their 1s
// and the reduction adds them: D > 25690112.
func TestGemmFP8BlockSplitKMatchesCPU(t *testing.T) {
	needGPU(t)
	byName := gemmOperandsByName()
	for si, sh := range [][3]int64{{16, 1024, 2048}, {1, 2048, 4096}, {7, 1024, 2048}, {45, 1024, 2048}} {
		m, n, k := sh[0], sh[1], sh[2]
		seed := uint64(9700 + si)
		a := makeGemmSide(t, byName["fp8_block 1x128"], m, k, seed)
		b := makeGemmSide(t, byName["fp8_block 128x128"], n, k, seed+1)
		for _, ep := range []gemmEpilogue{{alpha: 1}, {alpha: 0.5, bias: host.BFloat16}} {
			for _, out := range []host.DType{host.Float32, host.BFloat16} {
				what := fmt.Sprintf("%v d=%s bias=%v", sh, out, ep.bias != host.DTypeInvalid)
				runGPUGemm(t, what, a, b, false, true, out, ep, seed)
			}
		}
	}
	const m, n, k = 16, 1024, 2048
	av, bv := make([]float32, m*k), make([]float32, n*k)
	for _, v := range [][]float32{av, bv} {
		for r := 0; r < len(v)/k; r++ {
			row := v[r*k : (r+1)*k]
			for p := 0; p < 128; p++ {
				row[p] = 448
			}
			for blk := 128; blk < k; blk += 128 {
				row[blk] = 1
			}
		}
	}
	for r := 0; r < m; r++ {
		for blk := 128; blk < k; blk += 128 {
			av[r*k+blk+1] = 448
		}
	}
	for r := 0; r < n; r++ {
		for blk := 128; blk < k; blk += 128 {
			bv[r*k+blk+2] = 448
		}
	}
	xa, _ := hosttest.Input(t, host.BFloat16, av, m, k)
	xb, _ := hosttest.Input(t, host.BFloat16, bv, n, k)
	pa, pb := makeGemmSideFrom(t, byName["fp8_block 1x128"], xa), makeGemmSideFrom(t, byName["fp8_block 128x128"], xb)
	d := gpuTensor(t, host.Float32, []int64{m, n})
	gb := pb.gpu
	gb.Trans = true
	require.NoError(t, host.Gemm(&host.GemmArgs{A: pa.gpu, B: gb, Alpha: 1, D: d}))
	got := make([]float32, m*n)
	host.LoadFloat32(toCPU(t, d), 0, got)
	const whole = 128 * 448 * 448
	for i, v := range got {
		require.True(t, v > whole && v <= whole+float32(k/128-1),
			"D[%d] = %v: K was not split (one accumulator gives %v; the exact sum is %v)", i, v, float32(whole), whole+k/128-1)
	}
	t.Logf("D[0] = %v = 25690112 + %v: the 1s of the parts without block 0", got[0], got[0]-whole)
}

// TestGemmContigExpansionMatchesCPU: the contiguous MX/NVFP4 expansion
// (cuda/gemm.cu expand_contig_kernel, units of 8 elements) where its rows are
// aligned for the vector loads but units reach past K (K 71: E2M1 rows of 36
// bytes, the last unit partly inside; K 72: FP8 rows of 72 bytes and a unit
// wholly in the row's padding to 80), and with K long enough (2056: 257
// units a row) that a lane's slots stay in one row and change rows inside a
// warp's task; every kind pair the kernel has an instance for but FP32 out.
func TestGemmContigExpansionMatchesCPU(t *testing.T) {
	needGPU(t)
	byName := gemmOperandsByName()
	pairs := [][2]string{{"mxfp8", "mxfp8"}, {"mxfp4", "mxfp4"}, {"nvfp4", "nvfp4 16x16 swizzled"}, {"mxfp8 e5m2 swizzled", "nvfp4"},
		{"hybrid mxfp8|nvfp4", "mxfp4"}, {"mxfp4", "mxfp8"}}
	for pi, pr := range pairs {
		t.Run(pr[0]+" x "+pr[1], func(t *testing.T) {
			for si, sh := range [][3]int64{{40, 33, 71}, {40, 33, 72}, {40, 33, 2056}} {
				m, n, k := sh[0], sh[1], sh[2]
				seed := uint64(9000 + pi*10 + si)
				a := makeGemmSide(t, byName[pr[0]], m, k, seed)
				b := makeGemmSide(t, byName[pr[1]], n, k, seed+1)
				for _, out := range []host.DType{host.Float32, host.BFloat16} {
					runGPUGemm(t, fmt.Sprintf("%v d=%s", sh, out), a, b, false, true, out, gemmEpilogue{alpha: 1}, seed)
				}
			}
		})
	}
}

// TestGemmPhysExpansionMatchesCPU: MXFP8 operands contracted along their
// physical rows (op(A) = Aᵀ, op(B) = B: the columnwise copies a linear
// layer's dgrad and wgrad read), which cuda/gemm.cu expands in their own
// layout (expand_phys_kernel, units of 8 elements along the physical row)
// and hands to cuBLASLt transposed: rows of 8-byte-aligned codes with compact
// scales (one 8-byte scale load per unit: C 264), ragged rows (C 257 and 33:
// byte loads, a partial last unit), GEMM-swizzled E5M2 scales, a
// lane's slots crossing rows, with the other operand contiguous or also
// physical, FP32 and BF16 out.
func TestGemmPhysExpansionMatchesCPU(t *testing.T) {
	needGPU(t)
	byName := gemmOperandsByName()
	pairs := [][2]string{{"mxfp8", "mxfp8"}, {"mxfp8 e5m2 swizzled", "mxfp8"}, {"mxfp8", "nvfp4"}, {"bf16", "mxfp8 e5m2 swizzled"}}
	for pi, pr := range pairs {
		t.Run(pr[0]+" x "+pr[1], func(t *testing.T) {
			for si, sh := range [][3]int64{{264, 72, 160}, {257, 33, 100}, {33, 264, 1000}} {
				m, n, k := sh[0], sh[1], sh[2]
				for tr, tt := range [][2]bool{{true, false}, {true, true}, {false, false}} {
					ta, tb := tt[0], tt[1]
					ar, ac, br, bc := operandShapes(m, n, k, ta, tb)
					seed := uint64(9500 + pi*100 + si*10 + tr)
					a := makeGemmSide(t, byName[pr[0]], ar, ac, seed)
					b := makeGemmSide(t, byName[pr[1]], br, bc, seed+1)
					for _, out := range []host.DType{host.Float32, host.BFloat16} {
						runGPUGemm(t, fmt.Sprintf("%v transA=%v transB=%v d=%s", sh, ta, tb, out), a, b, ta, tb, out, gemmEpilogue{alpha: 1}, seed)
					}
				}
			}
		})
	}
}

// TestGemmEpilogueMatchesCPU: alpha, beta with C of D's dtype, of another
// dtype and C = D, bias, and accumulate, alone and together, for a few
// operand pairs covering the three GPU paths (native FP8, expansion to
// BF16, dense).
func TestGemmEpilogueMatchesCPU(t *testing.T) {
	needGPU(t)
	byName := gemmOperandsByName()
	pairs := [][2]string{{"fp8 e4m3", "fp8 e4m3"}, {"mxfp8", "nvfp4"}, {"bf16", "bf16"}, {"fp32", "mxfp4"}, {"fp8_block 1x128", "fp8_block 128x128"}}
	eps := []gemmEpilogue{
		{name: "alpha", alpha: -0.75},
		{name: "alpha beta C", alpha: 1.5, beta: 0.5, c: "same"},
		{name: "beta C f32", alpha: 1, beta: -2, c: "f32"},
		{name: "C is D", alpha: 0.5, beta: 0.25, c: "d"},
		{name: "bias", alpha: 1, bias: host.BFloat16},
		{name: "accumulate", alpha: 2, accumulate: true},
		{name: "all", alpha: 0.5, beta: 3, c: "f32", bias: host.Float32, accumulate: true},
		{name: "C is D accumulate bias", alpha: 1, beta: 1, c: "d", bias: host.Float16, accumulate: true},
	}
	for pi, pr := range pairs {
		for _, sh := range [][3]int64{{64, 48, 160}, {45, 33, 77}, {64, 48, 512}} {
			t.Run(fmt.Sprintf("%s x %s %v", pr[0], pr[1], sh), func(t *testing.T) {
				m, n, k := sh[0], sh[1], sh[2]
				a := makeGemmSide(t, byName[pr[0]], m, k, uint64(pi*7))
				b := makeGemmSide(t, byName[pr[1]], n, k, uint64(pi*7+3))
				for ei, ep := range eps {
					for _, out := range []host.DType{host.Float32, host.BFloat16} {
						runGPUGemm(t, ep.name+" d="+out.String(), a, b, false, true, out, ep, uint64(100*pi+ei))
					}
				}
			})
		}
	}
}

// TestGemmSupportTable: the loaded plugin's cuda entries say native or
// emulated, with reasons, for the built-in formats. The table has one entry
// per pair of format names (the host asks without parameters): the level is
// the path of the formats' defaults (fp8 E4M3, fp8_block 1x128), and the
// reason must name the parameters that take another path in cuda/gemm.cu
// (E5M2 x E5M2 has no FP8 tensor-core GEMM; cuBLASLt's block scaling takes A
// 1x128 only, so A 128x128 is expanded to FP32).
func TestGemmSupportTable(t *testing.T) {
	needGPU(t)
	for _, c := range []struct {
		a, b  string
		level host.GemmSupportLevel
		says  []string
	}{
		{"fp8", "fp8", host.GemmNative, []string{"FP8 tensor cores", "E5M2 x E5M2", "BF16"}},
		// The fused kernels (cuda/gemm_fused.cu) make MX and NVFP4 pairs
		// native on sm_90, the GPUs this suite runs on (a mixed pair in the
		// decode kernel only); the reason says where they fall back to the
		// exact BF16 path.
		{"mxfp8", "nvfp4", host.GemmNative, []string{"decode kernel", "BF16"}},
		{"mxfp8", "mxfp8", host.GemmNative, []string{"fused kernels", "K % 32", "BF16"}},
		{"nvfp4", "nvfp4", host.GemmNative, []string{"fused kernels", "K % 32", "BF16"}},
		{"fp8_block", "fp8_block", host.GemmNative, []string{"block scaling", "A 1x128", "A 128x128", "FP32"}},
		{"fp8_block", "mxfp8", host.GemmEmulated, []string{"FP32"}},
		{"fp8", "mxfp8", host.GemmEmulated, []string{"BF16"}},
		{"identity", "nvfp4", host.GemmEmulated, []string{"BF16"}},
		{"identity", "identity", host.GemmNative, []string{"cuBLASLt"}},
	} {
		if _, err := host.LookupFormat(c.a); err != nil {
			continue
		}
		s, err := host.QueryGemmSupport(gpu, c.a, c.b)
		require.NoError(t, err)
		require.Equal(t, c.level, s.Level, "%s x %s: %s", c.a, c.b, s.Reason)
		for _, w := range c.says {
			require.Contains(t, s.Reason, w, "%s x %s", c.a, c.b)
		}
	}
}

// gpuGemmBytes runs D = A·Bᵀ (BF16 D) on the GPU on the default stream and
// returns D's bytes.
func gpuGemmBytes(t *testing.T, a, b gemmSide) []byte {
	t.Helper()
	d := gpuTensor(t, host.BFloat16, []int64{a.rows, b.rows})
	args := &host.GemmArgs{A: a.gpu, B: b.gpu, Alpha: 1, D: d, Exact: true}
	args.B.Trans = true
	require.NoError(t, host.Gemm(args))
	return toCPU(t, d).Bytes8()
}

// TestGemmConcurrentSameShape: goroutines run GEMMs of one shape and format
// pair at once, on different operands: they share one cached cuBLASLt plan
// (cuda/gemm.cu lt_run), whose descriptor carries the FP8 scale pointers of
// the call in flight. Each result must be bit for bit the one the same GEMM
// gives alone (the same plan: the same algorithm, workspace and summation
// order on the same device), which it is not if a call ran with another's
// scale pointers (the operands' scales differ: seeds and magnitudes differ).
// The fp8_block pair runs the block-scaled plan, the mxfp8 x nvfp4 pair the
// expansion and the FP32 epilogue with device factors.
func TestGemmConcurrentSameShape(t *testing.T) {
	needGPU(t)
	byName := gemmOperandsByName()
	const m, n, k = 64, 48, 512
	const goroutines, iters = 8, 25
	for _, pr := range [][2]string{{"fp8 e4m3", "fp8 e4m3"}, {"fp8_block 1x128", "fp8_block 128x128"}, {"mxfp8", "nvfp4"}} {
		t.Run(pr[0]+" x "+pr[1], func(t *testing.T) {
			type job struct {
				a, b  gemmSide
				alone []byte
				d     host.Tensor
			}
			var jobs []job
			for i := 0; i < 4; i++ {
				a := makeGemmSide(t, byName[pr[0]], m, k, uint64(40+i))
				b := makeGemmSide(t, byName[pr[1]], n, k, uint64(60+i))
				runGPUGemm(t, fmt.Sprintf("operands %d alone", i), a, b, false, true, host.BFloat16, gemmEpilogue{alpha: 1}, uint64(i))
				jobs = append(jobs, job{a: a, b: b, alone: gpuGemmBytes(t, a, b)})
			}
			ds := make([]host.Tensor, goroutines)
			for g := range ds {
				ds[g] = gpuTensor(t, host.BFloat16, []int64{m, n})
			}
			errs := make(chan error, goroutines)
			var wg sync.WaitGroup
			for g := 0; g < goroutines; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					runtime.LockOSThread() // a fresh thread: device 0 is current, as for the tensors
					defer runtime.UnlockOSThread()
					j := jobs[g%len(jobs)]
					args := &host.GemmArgs{A: j.a.gpu, B: j.b.gpu, Alpha: 1, D: ds[g], Exact: true}
					args.B.Trans = true
					for it := 0; it < iters; it++ {
						if err := host.Gemm(args); err != nil {
							errs <- err
							return
						}
					}
				}(g)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			for g := range ds {
				requireSameBytesAs(t, fmt.Sprintf("goroutine %d (operands %d)", g, g%len(jobs)), "alone", "concurrent", jobs[g%len(jobs)].alone, toCPU(t, ds[g]).Bytes8())
			}
		})
	}
}

// cudaDriver holds the driver's cuCtxGetCurrent and cuCtxSetCurrent
// (libcuda.so.1, loaded with purego), with which a test takes the calling
// thread's current context away.
type cudaDriver struct {
	getCurrent func(ctx *uintptr) int32
	setCurrent func(ctx uintptr) int32
}

func loadCudaDriver(t *testing.T) *cudaDriver {
	t.Helper()
	lib, err := purego.Dlopen("libcuda.so.1", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		t.Skipf("SKIP: no CUDA driver library (libcuda.so.1) to take a thread's context away with: %v", err)
	}
	for _, name := range []string{"cuCtxGetCurrent", "cuCtxSetCurrent"} {
		if _, err := purego.Dlsym(lib, name); err != nil {
			t.Skipf("SKIP: libcuda.so.1 has no %s: %v", name, err)
		}
	}
	var d cudaDriver
	purego.RegisterLibFunc(&d.getCurrent, lib, "cuCtxGetCurrent")
	purego.RegisterLibFunc(&d.setCurrent, lib, "cuCtxSetCurrent")
	return &d
}

// withoutContext runs f on an OS thread of its own whose current CUDA
// context it first takes away (cuCtxSetCurrent(NULL)), as a thread has none
// that made no CUDA call yet, or only calls that need none (cudaGetDevice):
// a C thread, or a Go goroutine moved to another OS thread. The goroutine
// ends locked to that thread, so Go ends the thread with it and no other
// goroutine runs there.
func withoutContext(drv *cudaDriver, f func() error) error {
	res := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if rc := drv.setCurrent(0); rc != 0 {
			res <- fmt.Errorf("cuCtxSetCurrent(NULL): CUresult %d", rc)
			return
		}
		ctx := new(uintptr)
		if rc := drv.getCurrent(ctx); rc != 0 || *ctx != 0 {
			res <- fmt.Errorf("the thread kept a context after cuCtxSetCurrent(NULL): cuCtxGetCurrent gave %d, context %#x", rc, *ctx)
			return
		}
		res <- f()
	}()
	return <-res
}

// TestGemmWithoutContext: GEMMs on the paths that call the driver directly,
// each from a thread without a current CUDA context (withoutContext). Every
// result must be the bytes of the same GEMM on the test's own thread. The
// paths: cuBLASLt (FP8 per tensor and fp8_block, Exact: their only CUDA call
// before cuBLASLt's launch needs no context), which launches in the thread's
// current context and failed there with "execution failed (status 13)"
// (H200, bench/RESULTS.md, "cuBLASLt on a thread without a current
// context"); and the fused kernels' TMA descriptors, which the driver's
// cuTensorMapEncodeTiled refuses on such a thread (CUDA_ERROR_INVALID_CONTEXT):
// the tile kernel (MXFP8 at 20x4100x336, K % 32 != 0) then failed with
// "invalid argument", and decode_wg_kernel (MXFP8 and MXFP4 weights at
// 8x8000x1152) gave way to the decode kernel, whose sums differ in order
// (bench/RESULTS.md, "the TMA descriptors on threads without a CUDA
// context"). cuda/gemm.cu makes the device's primary context current ahead
// of every path. Against the plugin before that change, this test failed in
// the first round of each of the three fused cases (the tile kernel's
// "invalid argument", decode_wg_kernel's cases 906 and 1743 bytes off) and
// passed against the change (H200, bench/RESULTS.md, "the context test
// without a context"). Threads merely new to the process, which an earlier
// form of this test used, had a context at the encode in most runs: that form
// caught the bug in 2 of 5 runs.
func TestGemmWithoutContext(t *testing.T) {
	needGPU(t)
	drv := loadCudaDriver(t)
	byName := gemmOperandsByName()
	const rounds = 4
	fused := true
	if sup, err := host.QueryGemmSupport(gpu, "mxfp8", "mxfp8"); err != nil || sup.Level != host.GemmNative {
		fused = false
		t.Logf("SKIP (fused cases): mxfp8 x mxfp8 is not native on this GPU (%v, %v): the fused kernels need sm_90", sup, err)
	}
	cases := []struct {
		a, b    string
		m, n, k int64
		exact   bool
		fused   bool
	}{
		{"fp8 e4m3", "fp8 e4m3", 64, 48, 512, true, false},
		{"fp8_block 1x128", "fp8_block 128x128", 64, 48, 512, true, false},
		{"mxfp8", "mxfp8", 20, 4100, 336, false, true}, // the tile kernel, its codes by TMA
		{"mxfp8", "mxfp8", 8, 8000, 1152, false, true}, // decode_wg_kernel
		{"mxfp8", "mxfp4", 8, 8000, 1152, false, true}, // decode_wg_kernel, E2M1 weights by TMA
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s x %s %dx%dx%d", c.a, c.b, c.m, c.n, c.k), func(t *testing.T) {
			if c.fused && !fused {
				t.Skip("SKIP: the fused kernels need sm_90")
			}
			a := makeGemmSide(t, byName[c.a], c.m, c.k, 70)
			b := makeGemmSide(t, byName[c.b], c.n, c.k, 71)
			gemm := func(d host.Tensor) error {
				args := &host.GemmArgs{A: a.gpu, B: b.gpu, Alpha: 1, D: d, Exact: c.exact}
				args.B.Trans = true
				return host.Gemm(args)
			}
			d0 := gpuTensor(t, host.BFloat16, []int64{c.m, c.n})
			require.NoError(t, gemm(d0), "on the test's thread")
			want := toCPU(t, d0).Bytes8()
			for r := 0; r < rounds; r++ {
				d := gpuTensor(t, host.BFloat16, []int64{c.m, c.n})
				require.NoError(t, withoutContext(drv, func() error { return gemm(d) }), "round %d", r)
				requireSameBytesAs(t, fmt.Sprintf("round %d", r), "test thread", "no context", want, toCPU(t, d).Bytes8())
			}
		})
	}
}

// TestGemmPlanEviction: more distinct shapes than the plan cache keeps
// (cuda/gemm.cu kMaxPlans = 1024), then the first shapes again, whose plans
// were dropped and are made anew: every result within the bound of the exact
// product and next to the CPU's.
func TestGemmPlanEviction(t *testing.T) {
	needGPU(t)
	bf16 := gemmOperand{name: "bf16", dense: host.BFloat16}
	const n, k = 16, 32
	b := makeGemmSide(t, bf16, n, k, 7)
	run := func(m int64) {
		a := makeGemmSide(t, bf16, m, k, uint64(m))
		runGPUGemm(t, fmt.Sprintf("m=%d", m), a, b, false, true, host.Float32, gemmEpilogue{alpha: 1}, uint64(m))
	}
	for m := int64(1); m <= 1040; m++ {
		run(m)
	}
	for m := int64(1); m <= 16; m++ {
		run(m)
	}
}

// TestGemmExtremeScalesMatchCPU: operands whose 32-blocks along K span the
// whole E8M0 range, so that the exact path's expansion (cuda/gemm.cu
// expand16_fp4, expand16_contig, op_value) meets block scales of 2^-127 and
// 2^-126 (BF16 subnormal values, formed in FP32), of 2^120, and ordinary
// ones. Block kb of A has magnitudes about 2^ea[kb] and of B 2^eb[kb], with
// ea + eb = -7 for every block, so every product is a normal FP32 number of
// one magnitude, the bound of gemmRef holds as for ordinary data, and a block
// expanded wrongly moves D by far more than the bound. Both transposes of A (its contiguous
// and its strided reading) and every D dtype, against the exact product and
// the CPU.
func TestGemmExtremeScalesMatchCPU(t *testing.T) {
	needGPU(t)
	byName := gemmOperandsByName()
	ea := []int{-127, -126, -125, 0, 60, 120, -100, 10}
	eb := make([]int, len(ea))
	for i, e := range ea {
		eb[i] = -7 - e // every block's products about 2^-7: a wrong block shows above the bound
	}
	const m, n, k = 64, 48, 256
	// x [rows, cols] whose contraction index (cols, or rows when kAlongRows)
	// p lies in block p/32 of exponent e[p/32].
	make := func(rows, cols int64, kAlongRows bool, e []int, seed uint64) host.Tensor {
		v := testutil.Normal(int(rows*cols), 1.5, seed)
		for i := range v {
			p := int64(i) % cols
			if kAlongRows {
				p = int64(i) / cols
			}
			v[i] = float32(float64(v[i]) * math.Ldexp(1, e[p/32]))
		}
		x, _ := hosttest.Input(t, host.BFloat16, v, rows, cols)
		return x
	}
	// MX formats only: NVFP4 (one FP32 scale per tensor, E4M3 per block)
	// cannot represent this input (H100 run 2: the dequantized operands, and
	// so the CPU's and the GPU's D alike, hold NaN), and its E4M3 block
	// scales never make subnormal products (TestGemmMatchesCPU covers them).
	for _, pr := range [][2]string{{"mxfp4", "mxfp4"}, {"mxfp8", "mxfp8"}, {"mxfp8 e5m2 swizzled", "mxfp4"}} {
		t.Run(pr[0]+" x "+pr[1], func(t *testing.T) {
			for _, ta := range []bool{false, true} {
				ar, ac := int64(m), int64(k)
				if ta {
					ar, ac = k, m
				}
				a := makeGemmSideFrom(t, byName[pr[0]], make(ar, ac, ta, ea, 11))
				b := makeGemmSideFrom(t, byName[pr[1]], make(n, k, false, eb, 12))
				for _, out := range []host.DType{host.Float32, host.BFloat16, host.Float16} {
					runGPUGemm(t, fmt.Sprintf("transA=%v d=%s", ta, out), a, b, ta, true, out, gemmEpilogue{alpha: 1}, 5)
				}
			}
		})
	}
}
