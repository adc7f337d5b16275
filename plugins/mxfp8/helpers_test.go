package mxfp8

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/host"
	"libquant/host/hosttest"
)

var cpu = host.Device{Type: host.CPU}

// newInput makes a CPU tensor of dtype dt and shape [m, k] holding vals
// (rounded to dt) and returns it with the exact values it holds.
func newInput(t testing.TB, dt host.DType, m, k int, vals []float32) (host.Tensor, []float32) {
	t.Helper()
	return hosttest.Input(t, dt, vals, int64(m), int64(k))
}

// guarded is direction dir of a tensor in guarded caller-style buffers
// (hosttest.Guarded), with accessors for the MX buffers.
type guarded struct{ *hosttest.Guarded }

func newGuarded(t testing.TB, spec host.Spec, dir host.Direction, m, k int) *guarded {
	t.Helper()
	return &guarded{hosttest.NewGuarded(t, spec, dir, m, k)}
}

func (g *guarded) data() []byte   { return g.St.MustBuffer(host.BufData).Bytes8() }
func (g *guarded) scales() []byte { return g.St.MustBuffer(host.BufScaleInv).Bytes8() }

func pad(n, to int) int { return (n + to - 1) / to * to }

// ceil is ⌈n/d⌉.
func ceil(n, d int) int { return (n + d - 1) / d }

// refSwizzle is the swizzled position of compact scale (i, j) the way spec §4.7
// describes it: reshape [R/128, 4, 32, C/4, 4], permute to [R/128, C/4, 32, 4, 4].
func refSwizzle(i, j, padJ int) int {
	ib, i4, i32 := i/128, (i%128)/32, i%32
	jb, j4 := j/4, j%4
	return (((ib*(padJ/4)+jb)*32+i32)*4+i4)*4 + j4
}

// specScaleIndex is where scale (i, j) lives in the buffer, from spec §4.6,
// §4.7 and the MXFP4 layout decision: i is the row (rowwise) or the column k
// (columnwise), j the block along the other dim.
func specScaleIndex(format string, dir host.Direction, m, k, i, j int, swizzled bool) int {
	if dir == host.DirRowwise {
		if swizzled {
			return refSwizzle(i, j, pad(ceil(k, 32), 4))
		}
		return i*pad(ceil(k, 32), 4) + j
	}
	switch {
	case swizzled:
		return refSwizzle(i, j, pad(ceil(m, 32), 4))
	case format == NameMXFP8: // [pad4(⌈M/32⌉), pad128(K)], scale (block b, column k) at b*stride + k
		return j*pad(k, 128) + i
	}
	return i*pad(ceil(m, 32), 4) + j // mxfp4: [pad128(K), pad4(⌈M/32⌉)]
}

// codeAt reads the element code of logical (r, c) from a direction's data.
func codeAt(format string, dir host.Direction, data []byte, m, k, r, c int) uint8 {
	if format == NameMXFP8 {
		return data[r*k+c] // both directions [M, K] (spec §4.5)
	}
	if dir == host.DirRowwise {
		return data[r*ceil(k, 2)+c/2] >> (4 * (c % 2)) & 0xF // [M, ⌈K/2⌉], even index low (spec §1.5, §14)
	}
	return data[c*ceil(m, 2)+r/2] >> (4 * (r % 2)) & 0xF // transposed [K, ⌈M/2⌉]
}

// checkAgainstRef compares a quantized direction with the reference: every
// scale and code, and zero in every padded scale position.
func checkAgainstRef(t *testing.T, g *guarded, want refMX, format string, dir host.Direction, m, k int, swizzled bool, x []float32) {
	t.Helper()
	scales := g.scales()
	valid := make([]bool, len(scales))
	var bad []string
	for i := range want.scales {
		for j, e := range want.scales[i] {
			idx := specScaleIndex(format, dir, m, k, i, j, swizzled)
			valid[idx] = true
			if scales[idx] != e && len(bad) < 10 {
				bad = append(bad, fmt.Sprintf("scale (%d,%d): got %#02x want %#02x", i, j, scales[idx], e))
			}
		}
	}
	for idx, ok := range valid {
		if !ok && scales[idx] != 0 && len(bad) < 10 {
			bad = append(bad, fmt.Sprintf("padded scale byte %d is %#02x, want 0", idx, scales[idx]))
		}
	}
	data := g.data()
	for r := 0; r < m; r++ {
		for c := 0; c < k; c++ {
			if got := codeAt(format, dir, data, m, k, r, c); got != want.codes[r][c] && len(bad) < 10 {
				bad = append(bad, fmt.Sprintf("code (%d,%d) of x=%g (%#08x): got %#02x want %#02x", r, c, x[r*k+c], math.Float32bits(x[r*k+c]), got, want.codes[r][c]))
			}
		}
	}
	require.Empty(t, bad)
	g.CheckGuards(t, "")
}

// randomBlocks fills an [m, k] matrix with values whose magnitudes vary by
// block (a random exponent per 32×32 tile, spread over the whole FP32 range)
// and within blocks, with random signs and some zeros.
func randomBlocks(rng *rand.Rand, m, k int) []float32 {
	x := make([]float32, m*k)
	exps := map[[2]int]int{}
	for r := 0; r < m; r++ {
		for c := 0; c < k; c++ {
			key := [2]int{r / 32, c / 32}
			e, ok := exps[key]
			if !ok {
				e = rng.IntN(250) - 140
				exps[key] = e
			}
			v := float32(math.Ldexp(1+rng.Float64(), e-rng.IntN(12)))
			switch rng.IntN(16) {
			case 0:
				v = 0
			case 1, 2, 3, 4, 5, 6, 7:
				v = -v
			}
			x[r*k+c] = v
		}
	}
	return x
}

func transpose(x []float32, m, k int) []float32 {
	y := make([]float32, len(x))
	for r := 0; r < m; r++ {
		for c := 0; c < k; c++ {
			y[c*m+r] = x[r*k+c]
		}
	}
	return y
}
