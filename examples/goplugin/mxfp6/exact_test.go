package mxfp6

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/internal/numeric"
	"libquant/internal/ratref"
	"libquant/pluginsdk"
)

// The exact reference of OCP MX v1.0 FP6 quantization, written from the spec
// with big.Rat and sharing no code with the kernels or internal/numeric:
//
//   - §5.3.2: E2M3 (bias 1) and E3M2 (bias 3) value grids, every code finite
//     (ratref.E2M3, ratref.E3M2 enumerate them exactly);
//   - §6.3: X = 2^(floor(log2 amax) − emax_elem), emax_elem 2 (E2M3), 4 (E3M2);
//     P_i = quantize(V_i / X), round to nearest even, values beyond the max
//     clamped to ±max. The shared exponent is clamped to E8M0's range (§5.4);
//   - RCEIL (spec §4.3, TE's MXFP8 rule carried to FP6): X = 2^ceil(log2
//     fl32(amax · fl32(1/max))), so nothing clips; 0 → 2^-127, Inf → 2^127,
//     NaN → the NaN scale;
//   - §5.4: a NaN scale (0xFF) decodes every element of its block as NaN;
//     here an Inf amax under FLOOR gives it, and its elements encode as +max
//     (NaN has no FP6 code: libquant's choice, as for E2M1);
//   - spec §14: a partial block is quantized as if zero-padded.
type refFormat struct {
	grid *ratref.Format
	max  float32
	emax int
	memo map[uint32]uint8
}

var (
	refE2M3 = refFormat{ratref.E2M3, 7.5, 2, map[uint32]uint8{}}
	refE3M2 = refFormat{ratref.E3M2, 28, 4, map[uint32]uint8{}}
)

// refScale is the E8M0 byte of a block amax (NaN elements skipped).
func refScale(f refFormat, floor bool, amax float32) uint8 {
	if floor {
		if math.IsInf(float64(amax), 0) {
			return 0xFF
		}
		if amax == 0 {
			return 0
		}
		_, exp := math.Frexp(float64(amax)) // amax = frac·2^exp, frac in [0.5, 1)
		return uint8(min(max(exp-1-f.emax+127, 0), 254))
	}
	if math.IsInf(float64(amax), 0) {
		return 0xFE
	}
	rcp := ratref.Float32(new(big.Rat).SetFrac64(1, 1).Quo(big.NewRat(1, 1), ratref.Rat(f.max)))
	v := ratref.Mul32(amax, rcp)
	if v == 0 {
		return 0
	}
	frac, exp := math.Frexp(float64(v))
	k := exp // 2^exp > v ≥ 2^(exp-1)
	if frac == 0.5 {
		k = exp - 1
	}
	return uint8(min(max(k+127, 0), 254))
}

// refCodes quantizes one block (values along a line, any length ≤ 32).
func refCodes(f refFormat, floor bool, x []float32) ([]uint8, uint8) {
	var amax float32
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); a > amax { // NaN compares false
			amax = a
		}
	}
	e := refScale(f, floor, amax)
	var mul float32 // 2^(127-e), exact; NaN for the NaN scale
	if e == 0xFF {
		mul = float32(math.NaN())
	} else {
		mul = ratref.Float32(new(big.Rat).SetFloat64(math.Ldexp(1, 127-int(e))))
	}
	codes := make([]uint8, len(x))
	for i, v := range x {
		codes[i] = f.encode(mul32(v, mul))
	}
	return codes, e
}

// mul32 is fl32(a·b) for b a power of two 2^n (|n| ≤ 127) or NaN: the
// float64 product is exact (a has 24 significant bits, and 2^n·a lies far inside
// float64's exponent range), so converting it to float32 rounds once, to
// nearest even, as IEEE's float32 multiply does. (ratref.Mul32 gives the same
// through big.Rat, too slowly for millions of elements.)
func mul32(a, b float32) float32 { return float32(float64(a) * float64(b)) }

// encode memoizes the grid's exact rounding by float32 pattern: the inputs
// repeat (BF16 values times powers of two), and big.Rat is slow.
func (f refFormat) encode(v float32) uint8 {
	b := math.Float32bits(v)
	if c, ok := f.memo[b]; ok {
		return c
	}
	c := f.grid.Encode(float64(v))
	f.memo[b] = c
	return c
}

// refPack packs codes bit by bit in DLPack's little bit-endian order.
func refPack(codes []uint8) []byte {
	out := make([]byte, (len(codes)+3)/4*3)
	for i, c := range codes {
		for b := 0; b < 6; b++ {
			if c>>b&1 != 0 {
				bit := 6*i + b
				out[bit/8] |= 1 << (bit % 8)
			}
		}
	}
	return out
}

// refQuantize returns the data and scale bytes of direction dir of x [m, k].
func refQuantize(f refFormat, floor bool, x []float32, m, k int, dir pluginsdk.Direction) (data, scales []byte) {
	lines, n := m, k
	at := func(l, i int) float32 { return x[l*k+i] }
	if dir == pluginsdk.Columnwise {
		lines, n = k, m
		at = func(l, i int) float32 { return x[i*k+l] }
	}
	for l := 0; l < lines; l++ {
		var lineCodes []uint8
		for j := 0; j < n; j += 32 {
			blk := make([]float32, min(32, n-j))
			for i := range blk {
				blk[i] = at(l, j+i)
			}
			c, e := refCodes(f, floor, blk)
			lineCodes = append(lineCodes, c...)
			scales = append(scales, e)
		}
		data = append(data, refPack(lineCodes)...)
	}
	return data, scales
}

// quantize runs the plugin's kernel in process on FP32 or BF16 input.
func quantize(t *testing.T, p pluginsdk.Params, in pluginsdk.Tensor, m, k int64) [2]*pluginsdk.Storage {
	sp, err := Format{}.NewSpec(p)
	require.NoError(t, err)
	var out [2]*pluginsdk.Storage
	for d := pluginsdk.Rowwise; d <= pluginsdk.Columnwise; d++ {
		layout, err := sp.Layout(m, k, d)
		require.NoError(t, err)
		st := &pluginsdk.Storage{Dir: d}
		for _, b := range layout {
			buf := make([]byte, b.Bytes())
			for i := range buf {
				buf[i] = 0xA5 // every byte must be written
			}
			st.Buffers = append(st.Buffers, pluginsdk.Buffer{BufferSpec: b, Tensor: pluginsdk.Tensor{DType: b.DType, Shape: b.Shape, Data: buf}})
		}
		out[d] = st
	}
	require.NoError(t, sp.Quantize(&pluginsdk.QuantizeRequest{Input: in, M: m, K: k, Out: out}))
	return out
}

func f32Tensor(x []float32, m, k int64) pluginsdk.Tensor {
	b := make([]byte, 4*len(x))
	t := pluginsdk.Tensor{DType: pluginsdk.Float32, Shape: []int64{m, k}, Data: b}
	copy(t.Float32s(), x)
	return t
}

var variants = []struct {
	name  string
	p     pluginsdk.Params
	ref   refFormat
	floor bool
}{
	{"e2m3_rceil", pluginsdk.Params{Format: Name}, refE2M3, false},
	{"e2m3_floor", pluginsdk.Params{Format: Name, ScaleRounding: pluginsdk.ScaleFLOOR}, refE2M3, true},
	{"e3m2_rceil", pluginsdk.Params{Format: Name, Element: pluginsdk.ElementE3M2}, refE3M2, false},
	{"e3m2_floor", pluginsdk.Params{Format: Name, Element: pluginsdk.ElementE3M2, ScaleRounding: pluginsdk.ScaleFLOOR}, refE3M2, true},
}

func checkExact(t *testing.T, x []float32, in pluginsdk.Tensor, m, k int) {
	for _, v := range variants {
		out := quantize(t, v.p, in, int64(m), int64(k))
		for d := pluginsdk.Rowwise; d <= pluginsdk.Columnwise; d++ {
			data, scales := refQuantize(v.ref, v.floor, x, m, k, d)
			require.Equal(t, len(scales), len(out[d].Buffers[1].Tensor.Data), "%s %s scale count of [%d, %d]", v.name, d, m, k)
			require.Zero(t, firstDiff(scales, out[d].Buffers[1].Tensor.Data)+1, "%s %s scales of [%d, %d]", v.name, d, m, k)
			got := out[d].Buffers[0].Tensor.Data
			if i := firstDiff(data, got); i >= 0 {
				t.Fatalf("%s %s data of [%d, %d]: byte %d is %#x, want %#x", v.name, d, m, k, i, got[i], data[i])
			}
		}
	}
}

func firstDiff(a, b []byte) int {
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// Every BF16 pattern, as BF16 input, in two arrangements: (1) 32 consecutive
// patterns per block, so each is scaled by its neighbours' amax; (2) each
// pattern as the amax of its own block, with a fixed set of smaller values
// beside it (halves, quarters, ... down to the FP6 subnormals of that scale).
func TestExactEveryBF16(t *testing.T) {
	if testing.Short() {
		t.Skip("exhaustive")
	}
	const m, k = 2048, 32
	bf := make([]byte, 2*m*k)
	in := pluginsdk.Tensor{DType: pluginsdk.BFloat16, Shape: []int64{m, k}, Data: bf}
	x := make([]float32, m*k)
	for i := range x {
		in.Uint16s()[i] = uint16(i)
		x[i] = math.Float32frombits(uint32(i) << 16)
	}
	checkExact(t, x, in, m, k)

	// Arrangement 2: rows of [v, v·r_1, ..., v·r_31], r_j ∈ (0, 1) fixed
	// ratios whose products with a BF16 stay exact in FP32 (8-bit ratios).
	ratios := make([]float32, 32)
	for j := 1; j < 32; j++ {
		ratios[j] = float32(255-8*j) / 256 / float32(int(1)<<(j%6))
	}
	for half := 0; half < 2; half++ {
		const rows = 32768
		x2 := make([]float32, rows*k)
		for r := 0; r < rows; r++ {
			v := math.Float32frombits(uint32(half*rows+r) << 16)
			x2[r*k] = v
			for j := 1; j < k; j++ {
				x2[r*k+j] = v * ratios[j]
			}
		}
		// The ratios' products are rounded to BF16, so that the BF16 kernel
		// path sees each pattern as its block's amax.
		in2 := pluginsdk.Tensor{DType: pluginsdk.BFloat16, Shape: []int64{rows, k}, Data: make([]byte, 2*rows*k)}
		for i, v := range x2 {
			in2.Uint16s()[i] = numeric.Float32ToBF16(v)
			x2[i] = numeric.BF16ToFloat32(in2.Uint16s()[i])
		}
		checkExact(t, x2, in2, rows, k)
	}
}

// Adversarial blocks: amaxes at and beside every RCEIL and FLOOR boundary
// (max·2^n, 2^n), element values at and beside every rounding midpoint of both
// grids, saturation (FLOOR's clipping of amax mantissas ≥ max/2^emax), FP6
// subnormals, ±0, ±Inf, NaN, FP32 subnormal and near-FLT_MAX amaxes, and an
// all-zero block.
func TestExactAdversarialBlocks(t *testing.T) {
	var blocks [][]float32
	add := func(b ...float32) {
		blk := make([]float32, 32)
		copy(blk, b)
		blocks = append(blocks, blk)
	}
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for _, mx := range []float32{7.5, 28} {
		// Every binade at the bottom of E8M0's range (where FLOOR and RCEIL
		// clamp), then every 7th up to the top.
		for n := -132; n <= 127; n += map[bool]int{true: 1, false: 7}[n < -110] {
			a := float32(math.Ldexp(float64(mx), n))
			for _, amax := range []float32{a, math.Nextafter32(a, 0), math.Nextafter32(a, inf), float32(math.Ldexp(1, n)), float32(math.Ldexp(1.9375, n))} {
				if amax == 0 || math.IsInf(float64(amax), 0) {
					continue
				}
				blk := []float32{amax, -amax}
				// Midpoints between adjacent codes of both grids, at this scale.
				for _, g := range []*ratref.Format{ratref.E2M3, ratref.E3M2} {
					vals := g.Values()
					for i := 1; i < len(vals) && len(blk) < 30; i += 3 {
						lo, _ := vals[i-1].Float64()
						hi, _ := vals[i].Float64()
						mid := float32(math.Ldexp((lo+hi)/2, n-2))
						blk = append(blk, mid, math.Nextafter32(mid, inf))
					}
				}
				add(blk[:min(32, len(blk))]...)
			}
		}
	}
	add()                                     // all zeros
	add(float32(math.Copysign(0, -1)), 0)     // ±0
	add(inf, 1, -2)                           // Inf amax
	add(-inf, 3)                              // -Inf
	add(nan, 1.5, -0.75)                      // NaN skipped by the amax
	add(nan)                                  // only NaN: amax 0
	add(1e-45, -3e-44, 1e-40)                 // FP32 subnormal amax
	add(math.MaxFloat32, 1, -math.MaxFloat32) // RCEIL saturates at 2^127
	add(7.75, 7.5, 7.4, 0.1, 1.0/16, 1.0/32)  // clip and subnormals at scale 1
	add(29, 28, 27, 0.0625, 0.03125, 0.09375) // E3M2 edges
	m := len(blocks)
	x := make([]float32, 0, m*32)
	for _, b := range blocks {
		x = append(x, b...)
	}
	// Rowwise blocks are the rows; the columnwise pass sees the same values
	// across rows, blocks of mixed magnitudes.
	checkExact(t, x, f32Tensor(x, int64(m), 32), m, 32)
}

// Any shape (spec §14): partial blocks in both dims, K not a multiple of 4,
// a single element, empty dims.
func TestExactAnyShape(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 6))
	for _, s := range [][2]int{{1, 1}, {1, 33}, {33, 1}, {3, 5}, {31, 63}, {33, 35}, {64, 70}, {65, 97}, {0, 7}, {7, 0}} {
		m, k := s[0], s[1]
		x := make([]float32, m*k)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(40)-20))
		}
		checkExact(t, x, f32Tensor(x, int64(m), int64(k)), m, k)
	}
}

// Dequantize gives decode(q)·2^(e−127) exactly (FP32 out), for every code
// and scale pair the adversarial and random inputs produce, in both directions.
func TestDequantizeExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const m, k = 37, 45
	x := make([]float32, m*k)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(60)-30))
	}
	for _, v := range variants {
		sp, err := Format{}.NewSpec(v.p)
		require.NoError(t, err)
		out := quantize(t, v.p, f32Tensor(x, m, k), m, k)
		for d := pluginsdk.Rowwise; d <= pluginsdk.Columnwise; d++ {
			got := f32Tensor(make([]float32, m*k), m, k)
			require.NoError(t, sp.Dequantize(&pluginsdk.DequantizeRequest{Storage: out[d], Dir: d, M: m, K: k, Out: got}))
			data, scales := refQuantize(v.ref, v.floor, x, m, k, d)
			lines, n := m, k
			if d == pluginsdk.Columnwise {
				lines, n = k, m
			}
			nb := (n + 31) / 32
			for l := 0; l < lines; l++ {
				for i := 0; i < n; i++ {
					bit := 6 * i
					row := data[l*((n+3)/4*3):]
					w := uint32(row[bit/8]) | uint32(row[bit/8+1])<<8
					if bit/8+2 < len(row) {
						w |= uint32(row[bit/8+2]) << 16
					}
					code := uint8(w >> (bit % 8) & 0x3F)
					val, _ := v.ref.grid.Value(code)
					want := ratref.Float32(new(big.Rat).Mul(val, new(big.Rat).SetFloat64(math.Ldexp(1, int(scales[l*nb+i/32])-127))))
					at := l*k + i
					if d == pluginsdk.Columnwise {
						at = i*k + l
					}
					require.Equal(t, want, got.Float32s()[at], "%s %s (%d, %d)", v.name, d, l, i)
				}
			}
		}
	}
}

func TestNewSpecRejects(t *testing.T) {
	for _, p := range []pluginsdk.Params{
		{Format: Name, Element: pluginsdk.ElementE4M3},
		{Format: Name, ScaleRounding: 7},
		{Format: Name, Seed: 1},
	} {
		_, err := Format{}.NewSpec(p)
		require.ErrorIs(t, err, pluginsdk.ErrInvalidArgument, "%+v", p)
	}
}
