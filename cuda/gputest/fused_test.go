package gputest

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/host"
	"libquant/host/hosttest"
	"libquant/internal/numeric"
	"libquant/internal/testutil"
)

// fusedTerm is the fused Hopper GEMM's error beyond FP32 accumulation
// (cuda/gemm_fused.cu, README "Fused Hopper GEMM"): the FP8 tensor core adds
// the products of one K block aligned to the largest one and truncated to 13
// fraction bits, and truncates their sum S' to 13 fraction bits of its own
// magnitude (measured: build/fused_check probe, its 1term, chainC and
// cancelling rows), so each block sum is off by less than
// n_b·2^-13·max|p| + 2^-13·|S'| ≤ 2^-13·(n_b·(1 + 2^-13)·max|p| + Σ|p|) with
// n_b ≤ 32 products per wgmma (NVFP4's 16-blocks run as k32 wgmmas with half
// the operand zero). The FP32 roundings of the promotion (one per block) and
// of alpha are inside the γ_{K+8} term of gemmRef.check.
func fusedTerm(ra, rb []float64, block int) float64 {
	t := 0.0
	for b0 := 0; b0 < len(ra); b0 += block {
		mx, sum := 0.0, 0.0
		for p := b0; p < min(b0+block, len(ra)); p++ {
			x := math.Abs(ra[p] * rb[p])
			mx, sum = math.Max(mx, x), sum+x
		}
		t += math.Ldexp(32*(1+math.Ldexp(1, -13))*mx+sum, -13)
	}
	return t
}

// TestGemmFusedMatchesCPU: the pairs the fused Hopper kernel covers (MXFP8
// E4M3/E5M2, MXFP4, NVFP4 1×16 and 16×16, compact and swizzled scales) at
// shapes and transposes where the default dispatch takes it (few rows: the
// decode shape) or falls back (columnwise MXFP8 is not K-major), D in
// FP32/BF16/FP16, alone and with a bias (the FP32-sums epilogue), within the
// fused bound; and, on an sm_90 GPU, a GEMM whose default result differs from
// the exact one (Exact set), which shows that the fused kernel ran.
func TestGemmFusedMatchesCPU(t *testing.T) {
	needGPU(t)
	byName := gemmOperandsByName()
	pairs := []struct {
		a, b  string
		block int
	}{
		{"mxfp8", "mxfp8", 32}, {"mxfp8 e5m2 swizzled", "mxfp8", 32}, {"mxfp4", "mxfp4", 32}, {"mxfp4", "mxfp8", 32},
		{"nvfp4", "nvfp4", 16}, {"nvfp4 16x16 swizzled", "nvfp4", 16},
		// NVFP4 with MX: the decode kernel at its shapes (per-16 block sums),
		// the exact path at the others.
		{"mxfp8", "nvfp4", 16}, {"nvfp4", "mxfp4", 16},
	}
	// {16,200,320}, {7,300,256}, {40,200,320}, {64,24,128}, {300,40,160}: the
	// decode kernel (few rows of one operand, K % 32 == 0; 40 rows: four row
	// tiles of A, the last partial; the last two with the operands swapped);
	// {5,130,77}, {20,4100,336}: K % 32 != 0, where the decode kernel does not
	// run: the tile kernel for the MXFP8 pairs at K % 16 == 0 (their codes by
	// TMA) against 4100 rows, the BF16 path elsewhere (qfused::beats_expansion:
	// the tile kernel at fewer rows of the large operand loses to it, and its
	// cp.async and E2M1 paths, which lost too, are gone). (Every pair takes the
	// fused kernels by default only where min(M, N) <= 64, the BF16 path
	// beyond: cuda/gemm.cu fused_faster.)
	shapes := [][3]int64{{16, 200, 320}, {7, 300, 256}, {40, 200, 320}, {64, 24, 128}, {5, 130, 77}, {300, 40, 160}, {20, 4100, 336}}
	for pi, pr := range pairs {
		t.Run(pr.a+" x "+pr.b, func(t *testing.T) {
			worst := 0.0
			for si, sh := range shapes {
				m, n, k := sh[0], sh[1], sh[2]
				for tr := 0; tr < 4; tr++ {
					ta, tb := tr&1 != 0, tr&2 != 0
					ar, ac, br, bc := operandShapes(m, n, k, ta, tb)
					seed := uint64(7000 + pi*100 + si*4 + tr)
					a := makeGemmSide(t, byName[pr.a], ar, ac, seed)
					b := makeGemmSide(t, byName[pr.b], br, bc, seed+50)
					for _, out := range []host.DType{host.Float32, host.BFloat16, host.Float16} {
						what := fmt.Sprintf("%v transA=%v transB=%v d=%s", sh, ta, tb, out)
						worst = math.Max(worst, runGPUGemm(t, what, a, b, ta, tb, out, gemmEpilogue{alpha: 1, fusedBlock: pr.block}, seed))
					}
					w := runGPUGemm(t, fmt.Sprintf("%v transA=%v transB=%v bias", sh, ta, tb), a, b, ta, tb, host.Float32,
						gemmEpilogue{alpha: -0.5, bias: host.BFloat16, fusedBlock: pr.block}, seed)
					worst = math.Max(worst, w)
				}
			}
			t.Logf("largest |gpu-exact| / bound: %.3g", worst)
		})
	}
	t.Run("fused kernel runs", func(t *testing.T) {
		sup, err := host.QueryGemmSupport(gpu, "mxfp8", "mxfp8")
		require.NoError(t, err)
		if sup.Level != host.GemmNative {
			t.Skipf("SKIP: mxfp8 x mxfp8 is %s on this GPU (%s): the fused kernel needs sm_90", sup.Level, sup.Reason)
		}
		const m, n, k = 16, 256, 1024
		a := makeGemmSide(t, byName["mxfp8"], m, k, 1)
		b := makeGemmSide(t, byName["mxfp8"], n, k, 2)
		differ := differsFromExact(t, a, b, m, n)
		require.Positive(t, differ, "the default GEMM equals the exact one everywhere: the fused kernel did not run")
		t.Logf("%d of %d elements differ from the exact path (13-bit block sums)", differ, m*n)
	})
	// Where the decode kernel does not take an MXFP8 GEMM (K % 32 != 0), the
	// default runs the tile kernel only with the codes by TMA (K % 16 == 0),
	// and only against a large operand of 8192 rows or more, or 4096 or more
	// against at most 32: through cp.async (since deleted) it was 3-10 times
	// as slow as the BF16 path, and by TMA 0.43-0.79x at 1024-2048 rows
	// (RESULTS "K not a multiple of 32", call 9). With the tile kernel the 13-bit block sums
	// make some element differ from the exact path; with the BF16 path none.
	t.Run("tile kernel only by TMA", func(t *testing.T) {
		sup, err := host.QueryGemmSupport(gpu, "mxfp8", "mxfp8")
		require.NoError(t, err)
		if sup.Level != host.GemmNative {
			t.Skipf("SKIP: mxfp8 x mxfp8 is %s on this GPU (%s): the fused kernel needs sm_90", sup.Level, sup.Reason)
		}
		for _, c := range []struct {
			m, n, k int64
			tile    bool
		}{
			{16, 4100, 80, true}, {16, 4100, 336, true}, {8200, 40, 80, true}, // by TMA, enough rows
			{16, 4100, 77, false}, {16, 4100, 200, false}, // K % 16 != 0: TMA cannot load the codes
			{16, 2048, 80, false}, {40, 4100, 80, false}, {64, 4096, 336, false}, // by TMA, too few rows
		} {
			m, n := c.m, c.n
			a := makeGemmSide(t, byName["mxfp8"], m, c.k, 11)
			b := makeGemmSide(t, byName["mxfp8"], n, c.k, 12)
			differ := differsFromExact(t, a, b, m, n)
			if c.tile {
				require.Positive(t, differ, "%dx%dx%d: the default equals the exact path everywhere: the tile kernel did not run", m, n, c.k)
			} else {
				require.Zero(t, differ, "%dx%dx%d: the default differs from the exact path: a fused kernel ran where the BF16 path is faster", m, n, c.k)
			}
			t.Logf("%dx%dx%d: %d of %d elements differ from the exact path", m, n, c.k, differ, m*n)
		}
	})
}

// differsFromExact runs D = A·Bᵀ (FP32 D, alpha 1) by the default dispatch
// and by the exact path and counts the elements where the two differ: a
// fused kernel's 13-bit block sums make some differ for random MXFP8
// operands, the BF16 path none.
func differsFromExact(t *testing.T, a, b gemmSide, m, n int64) int {
	t.Helper()
	run := func(exact bool) []float32 {
		d := toGPU(t, input(t, host.Float32, "normal", m, n, 3))
		gb := b.gpu
		gb.Trans = true
		require.NoError(t, host.Gemm(&host.GemmArgs{A: a.gpu, B: gb, Alpha: 1, D: d, Exact: exact}))
		out := make([]float32, m*n)
		host.LoadFloat32(toCPU(t, d), 0, out)
		return out
	}
	fast, exact := run(false), run(true)
	differ := 0
	for i := range fast {
		if fast[i] != exact[i] {
			differ++
		}
	}
	return differ
}

// TestGemmFusedEpilogueBits: the fused kernels' epilogue (cuda/gemm_fused.cuh
// store_d: alpha and a bias applied in the kernel, D in FP32, BF16 or FP16)
// against its definition, bit for bit. With D0 the GEMM's FP32 result without
// a bias, fl32(alpha_eff·Σ), the same GEMM with a bias b gives fl32(D0 + b[j])
// in FP32 D, that value rounded once more in BF16 and FP16 D (epilogue_kernel's
// order, host/gemm_cpu.go cpuEpilogue), and without a bias BF16 and FP16 D are
// D0 rounded. The kernels are deterministic (rank 0 of a split-K cluster adds
// the others' sums in rank order), so Σ is the same in every run. alpha = 0.7
// is not a power of two: alpha·Σ rounds, and a product contracted with the
// bias into one fma would show in some element. The shapes take each fused
// kernel where the pair runs on it, with and without the swapped operands
// (D written transposed, where the bias index is the kernel's row): the
// decode kernel ({16, 200, 320}; {300, 40, 160} swapped), decode_wg_kernel
// (MXFP8 and MXFP4 weights at {1, 7000, 2176} and {8, 8000, 1152}, split K
// over a cluster), the tile kernel (MXFP8 at K % 32 != 0, its codes by TMA,
// against 4100 rows: {5, 4100, 80} swapped, {4100, 20, 80} not; the E2M1
// pairs take the BF16 path there). Every MXFP8 × MXFP8 GEMM here must also differ from the
// exact path somewhere (the tensor core's 13-bit block sums), which shows that
// the fused kernels ran at these shapes; FP4 block sums are often exact, so
// the other pairs' counts are only logged.
func TestGemmFusedEpilogueBits(t *testing.T) {
	needGPU(t)
	sup, err := host.QueryGemmSupport(gpu, "mxfp8", "mxfp8")
	require.NoError(t, err)
	if sup.Level != host.GemmNative {
		t.Skipf("SKIP: mxfp8 x mxfp8 is %s on this GPU (%s): the fused kernels need sm_90", sup.Level, sup.Reason)
	}
	byName := gemmOperandsByName()
	decode := [][3]int64{{16, 200, 320}, {300, 40, 160}}
	tile := [][3]int64{{5, 4100, 80}, {4100, 20, 80}}
	wg := [][3]int64{{1, 7000, 2176}, {8, 8000, 1152}}
	cases := []struct {
		a, b   string
		shapes [][3]int64
	}{
		{"mxfp8", "mxfp8", append(append(append([][3]int64{}, decode...), tile...), wg...)},
		{"mxfp4", "mxfp4", append(append([][3]int64{}, decode...), wg...)},
		{"mxfp8", "mxfp4", wg},
		{"nvfp4", "nvfp4", decode},
		{"mxfp8", "nvfp4", decode},
	}
	const alpha = float32(0.7)
	for ci, c := range cases {
		t.Run(c.a+" x "+c.b, func(t *testing.T) {
			for si, sh := range c.shapes {
				m, n, k := sh[0], sh[1], sh[2]
				seed := uint64(9100 + 10*ci + si)
				a := makeGemmSide(t, byName[c.a], m, k, seed)
				b := makeGemmSide(t, byName[c.b], n, k, seed+50)
				what := fmt.Sprintf("%v", sh)
				run := func(out host.DType, bias *host.Tensor, exact bool) host.Tensor {
					d := poisoned(t, out, []int64{m, n}, 0xA5)
					ga, gb := a.gpu, b.gpu
					gb.Trans = true
					require.NoError(t, host.Gemm(&host.GemmArgs{A: ga, B: gb, Alpha: alpha, D: d, Bias: bias, Exact: exact}), "%s: gemm", what)
					return toCPU(t, d)
				}
				f32 := func(x host.Tensor) []float32 {
					v := make([]float32, m*n)
					host.LoadFloat32(x, 0, v)
					return v
				}
				d0 := f32(run(host.Float32, nil, false))
				ex := f32(run(host.Float32, nil, true))
				differ := 0
				for i := range d0 {
					if d0[i] != ex[i] {
						differ++
					}
				}
				if c.a == "mxfp8" && c.b == "mxfp8" {
					require.Positive(t, differ, "%s: the default GEMM equals the exact one everywhere: the fused kernel did not run", what)
				}
				t.Logf("%s: %d of %d elements differ from the exact path", what, differ, m*n)
				// want: D0 (+ bias) in FP32, then its bytes in D's type.
				want := func(bias []float32, out host.DType) []byte {
					buf := make([]byte, 0, m*n*4)
					for i := int64(0); i < m; i++ {
						for j := int64(0); j < n; j++ {
							x := d0[i*n+j]
							if bias != nil {
								x += bias[j]
							}
							switch out {
							case host.Float32:
								buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(x))
							case host.BFloat16:
								buf = binary.LittleEndian.AppendUint16(buf, numeric.Float32ToBF16(x))
							default:
								buf = binary.LittleEndian.AppendUint16(buf, numeric.Float32ToFP16(x))
							}
						}
					}
					return buf
				}
				for _, out := range []host.DType{host.BFloat16, host.Float16} {
					requireSameBytesAs(t, fmt.Sprintf("%s: D in %s without a bias", what, out), "FP32 D rounded here", "epilogue", want(nil, out), run(out, nil, false).Bytes8())
				}
				for bi, bdt := range []host.DType{host.Float32, host.BFloat16, host.Float16} {
					bias := input(t, bdt, "normal", 1, n, seed+uint64(100*bi))
					bias.Shape = []int64{n}
					bv := make([]float32, n)
					host.LoadFloat32(bias, 0, bv)
					gbias := toGPU(t, bias)
					for _, out := range []host.DType{host.Float32, host.BFloat16, host.Float16} {
						requireSameBytesAs(t, fmt.Sprintf("%s: D in %s, bias in %s", what, out, bdt), "FP32 D rounded here", "epilogue", want(bv, out), run(out, &gbias, false).Bytes8())
					}
				}
			}
		})
	}
}

// TestGemmFusedSplitKMatchesCPU: the decode kernel's split K (decode_shape:
// a tile's K groups shared by the CTAs of a thread-block cluster at small
// N, rank 0 adding the others' sums) at K long enough that every rank takes
// groups (TestGemmFusedMatchesCPU's K of at most 1024 leaves them all to
// rank 0), within the fused bound. On 114 to 132 SMs: {16, 200, 4192} and
// {24, 200, 4192} take the fill kWave4 (16 rows of A: four CTAs per tile of
// 16, 32 warps over 33 groups, the last group partial; 24 rows: two per
// tile), {16, 600, 2176} kWave8 (two per tile, 32 warps over 17 groups) and
// {16, 1100, 2176} kWave16 (two per tile of 32, 16 warps), N ragged against
// the tiles in the last two; {48, 200, 4192} and {48, 400, 4192} 48 rows of
// A in kWave2 (four CTAs per tile of 16) and kWave4 (four per tile of 32).
// MXFP8 × MXFP8 at up to 16 rows of A runs decode_wg_kernel instead where
// its CTAs fill the SMs (wd_split); on 132 SMs: {16, 8000, 1152} and {1,
// 7000, 2176} two CTAs of a cluster per tile of 64 weight rows (9 and 17
// k-tiles of 128, so that the two ranks take unequal counts; one row of A:
// the n8 wgmma), {13, 15000, 640} one CTA per tile, two per SM (235 tiles;
// 5 k-tiles in stages of two, the last stage half full); N ragged against the
// tiles of 64; E5M2 codes and swizzled scales on either side. {200, 16,
// 4192} and {400, 48, 4192} are the first and the last decode shapes with
// the operands swapped (N < M): the kernel writes D transposed, reading its
// reduction buffers down their columns (decode_body's row stride of COLS + 2).
// {16, 6000, 1056} and {16, 8000, 1152} are one-wave shapes of the decode
// kernel (one CTA of 64 weight rows per SM, decode_kernel_one) for the pairs
// that do not take decode_wg_kernel: MXFP4 × MXFP4 there runs sixteen warps,
// over 9 groups of 128 (the last a quarter full at K1056), so that seven
// warps have none.
func TestGemmFusedSplitKMatchesCPU(t *testing.T) {
	needGPU(t)
	byName := gemmOperandsByName()
	pairs := []struct {
		a, b  string
		block int
	}{
		{"mxfp8", "mxfp8", 32}, {"mxfp4", "mxfp4", 32}, {"nvfp4", "nvfp4", 16}, {"mxfp8", "nvfp4", 16},
		{"mxfp8 e5m2 swizzled", "mxfp8", 32}, {"mxfp8", "mxfp8 e5m2 swizzled", 32},
	}
	shapes := [][3]int64{{16, 200, 4192}, {24, 200, 4192}, {16, 600, 2176}, {16, 1100, 2176}, {48, 200, 4192}, {48, 400, 4192},
		{1, 7000, 2176}, {16, 8000, 1152}, {13, 15000, 640}, {200, 16, 4192}, {400, 48, 4192}, {16, 6000, 1056}}
	for pi, pr := range pairs {
		t.Run(pr.a+" x "+pr.b, func(t *testing.T) {
			worst := 0.0
			for si, sh := range shapes {
				m, n, k := sh[0], sh[1], sh[2]
				seed := uint64(9000 + pi*100 + si)
				a := makeGemmSide(t, byName[pr.a], m, k, seed) // A [M, K], B [N, K]: both K-major, the decode kernel's layout
				b := makeGemmSide(t, byName[pr.b], n, k, seed+50)
				w := runGPUGemm(t, fmt.Sprintf("%v d=fp32", sh), a, b, false, true, host.Float32, gemmEpilogue{alpha: 1, fusedBlock: pr.block}, seed)
				worst = math.Max(worst, w)
			}
			t.Logf("largest |gpu-exact| / bound: %.3g", worst)
		})
	}
}

// wideBlocks is a [rows, cols] BF16 input of normal values whose rows are
// scaled by 2^-e, e = 7·row mod 25, and every odd 16-block along a row by
// another 2^-4. With NVFP4's global scale set by the rows at e = 0, a row's
// E4M3 block scales (about 448·2^-e) run from normal values through values
// below 1 (e ≥ 9; from e = 12 every FP16 code v·s·2^-14 of the row is
// subnormal) and subnormal E4M3 ones (e ≥ 15) to 0 (e ≥ 19: blocks of
// zeros); the odd blocks put a smaller 16-block next to a larger one in every
// 32-block. Whole rows of small scales make an output whose every product
// goes through subnormal codes, so a code flushed to zero shows as an error
// far outside the bound.
func wideBlocks(t *testing.T, rows, cols int64, seed uint64) host.Tensor {
	t.Helper()
	v := testutil.Normal(int(rows*cols), 1, seed)
	for r := int64(0); r < rows; r++ {
		for c := int64(0); c < cols; c++ {
			e := (7*r)%25 + 4*((c/16)%2)
			v[r*cols+c] = float32(math.Ldexp(float64(v[r*cols+c]), -int(e)))
		}
	}
	x, _ := hosttest.Input(t, host.BFloat16, v, rows, cols)
	return x
}

// TestGemmFusedNVFP4WideScalesMatchCPU: the decode kernel's NVFP4 paths with
// block scales over the whole E4M3 range (wideBlocks), within the fused bound
// per 16-block. Against NVFP4 and FP8 activations the weight's E4M3 scale
// goes into its FP16 codes: NVFP4 × NVFP4 as b·sb·2^-14 (and the
// activation's as a·sa·2^-14, at 8 or more tiles a warp), which is subnormal
// FP16 wherever the code times its scale is below 1; MXFP8 × NVFP4 as b·sb
// (normal). A 32-block's two 16-block sums then chain in the mma, so a block
// of large products next to one of small products is what this tests:
// random normal data keeps every scale near 448 and every FP16 code normal.
// Shapes: one CTA of 64 weight rows per SM ({16, 8000, 1152}, {1, 7000,
// 2176}: 8 tiles a warp, the chained form), a tile's K over a cluster ({16,
// 1100, 2176}) and two tiles a warp ({16, 200, 320}), where NVFP4 × NVFP4
// keeps exact 16-block sums, four row tiles of A ({40, 200, 320}), and the
// operands swapped ({300, 40, 160}).
func TestGemmFusedNVFP4WideScalesMatchCPU(t *testing.T) {
	needGPU(t)
	byName := gemmOperandsByName()
	shapes := [][3]int64{{16, 8000, 1152}, {1, 7000, 2176}, {16, 1100, 2176}, {16, 200, 320}, {40, 200, 320}, {300, 40, 160}}
	for pi, pr := range []struct{ a, b string }{{"nvfp4", "nvfp4"}, {"nvfp4 16x16 swizzled", "nvfp4"}, {"mxfp8", "nvfp4"}} {
		t.Run(pr.a+" x "+pr.b, func(t *testing.T) {
			worst := 0.0
			for si, sh := range shapes {
				m, n, k := sh[0], sh[1], sh[2]
				seed := uint64(9400 + pi*100 + si)
				a := makeGemmSideFrom(t, byName[pr.a], wideBlocks(t, m, k, seed))
				b := makeGemmSideFrom(t, byName[pr.b], wideBlocks(t, n, k, seed+50))
				w := runGPUGemm(t, fmt.Sprintf("%v d=fp32", sh), a, b, false, true, host.Float32, gemmEpilogue{alpha: 1, fusedBlock: 16}, seed)
				worst = math.Max(worst, w)
			}
			t.Logf("largest |gpu-exact| / bound: %.3g", worst)
		})
	}
}

// TestGemmFusedE2M1WeightsMatchCPU: decode_wg_kernel's W4 path, E2M1 weights
// (MXFP4) against 1..8 FP8 rows of A (MXFP8, E4M3 or E5M2, compact or
// swizzled scales on either side) or 1..8 E2M1 rows (MXFP4, which the
// producer widens to E4M3 as it writes them), within the fused bound. The consumers
// widen the weight in registers and the producer writes A's k-tiles with
// their K permuted inside each 32-block to match, so a wrong fragment or
// permutation shows as sums far outside the bound (RESULTS "E2M1 weights
// widened in registers", call 1: a wrong fragment layout put 64972 of 65536
// outputs outside it). On 114 to 132 SMs the shapes take it (wd_split, then
// two CTAs of a cluster per tile of 64 weight rows): {1, 7000, 2176} (17
// k-tiles: the ranks take unequal counts), {8, 8000, 1152}, {5, 15000, 640}
// (more tiles than SMs), {7, 8200, 4128} (the last k-tile one 32-block: the
// weight's TMA box and A's units past K are zeros, the scales past K 1.0),
// {1, 8200, 12800} (one row of A at a K where more rows take the decode
// kernel); N ragged against the tiles of 64, M against the wgmma's 8. The
// swapped pairs (A the weight: 8000 rows against 8 or 3) are normalized to the same
// view, D written transposed. The decode kernel runs {16, 8000, 1152} and
// {4, 8200, 12800}, beside them. Rows of A scaled by 2^±100 take the FP64
// promotion.
func TestGemmFusedE2M1WeightsMatchCPU(t *testing.T) {
	needGPU(t)
	byName := gemmOperandsByName()
	byName["mxfp4 swizzled"] = gemmOperand{name: "mxfp4 swizzled", params: &host.Params{Format: "mxfp4", GEMMSwizzledScales: true}}
	shapes := [][3]int64{{1, 7000, 2176}, {8, 8000, 1152}, {5, 15000, 640}, {7, 8200, 4128}, {1, 8200, 12800}, {16, 8000, 1152}, {4, 8200, 12800}}
	cases := []struct {
		a, b   string
		shapes [][3]int64
	}{
		{"mxfp8", "mxfp4", shapes},
		{"mxfp8 e5m2 swizzled", "mxfp4", shapes},
		{"mxfp8", "mxfp4 swizzled", shapes},
		{"mxfp4", "mxfp8", [][3]int64{{8000, 8, 1152}}},
		{"mxfp4", "mxfp4", shapes},
		{"mxfp4 swizzled", "mxfp4", [][3]int64{{1, 7000, 2176}, {7, 8200, 4128}, {8000, 3, 1152}}},
	}
	for ci, c := range cases {
		t.Run(c.a+" x "+c.b, func(t *testing.T) {
			worst := 0.0
			for si, sh := range c.shapes {
				m, n, k := sh[0], sh[1], sh[2]
				seed := uint64(9700 + ci*100 + si)
				a := makeGemmSide(t, byName[c.a], m, k, seed)
				b := makeGemmSide(t, byName[c.b], n, k, seed+50)
				for _, out := range []host.DType{host.Float32, host.BFloat16} {
					w := runGPUGemm(t, fmt.Sprintf("%v d=%v", sh, out), a, b, false, true, out, gemmEpilogue{alpha: 1, fusedBlock: 32}, seed)
					worst = math.Max(worst, w)
				}
			}
			t.Logf("largest |gpu-exact| / bound: %.3g", worst)
		})
	}
	// Rows of A scaled by 2^±100: their E8M0 scales leave the fast range
	// ([64, 191]), so the warps promote in FP64 (the slow path), which random
	// data never takes. The products stay normal FP32 numbers.
	for _, c := range []string{"mxfp8", "mxfp4"} {
		for _, e := range []int{100, -100} {
			t.Run(fmt.Sprintf("%s x mxfp4, A times 2^%d", c, e), func(t *testing.T) {
				for si, sh := range [][3]int64{{1, 7000, 2176}, {7, 8200, 4128}} {
					m, n, k := sh[0], sh[1], sh[2]
					v := testutil.Normal(int(m*k), 1, uint64(9900+si))
					for i := range v {
						v[i] = float32(math.Ldexp(float64(v[i]), e))
					}
					x, _ := hosttest.Input(t, host.BFloat16, v, m, k)
					a := makeGemmSideFrom(t, byName[c], x)
					b := makeGemmSide(t, byName["mxfp4"], n, k, uint64(9950+si))
					w := runGPUGemm(t, fmt.Sprintf("%v d=fp32", sh), a, b, false, true, host.Float32, gemmEpilogue{alpha: 1, fusedBlock: 32}, uint64(si))
					t.Logf("%v: largest |gpu-exact| / bound: %.3g", sh, w)
				}
			})
		}
	}
}
