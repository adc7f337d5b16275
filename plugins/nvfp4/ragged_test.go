package nvfp4

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/host"
	"libquant/host/hosttest"
)

// raggedDims are the dims spec §14's tests run at (issue #18).
var raggedDims = []int{1, 2, 15, 16, 17, 31, 33, 47, 100, 129}

// raggedShapes is every dim of raggedDims as M with a few K, as K with a few M,
// and some pairs (not the full cross product: each shape runs every option).
func raggedShapes() [][2]int {
	var out [][2]int
	for _, d := range raggedDims {
		out = append(out, [2]int{d, 33}, [2]int{d, 48}, [2]int{17, d}, [2]int{32, d})
	}
	return append(out, [2]int{1, 1}, [2]int{2, 2}, [2]int{47, 100}, [2]int{100, 47}, [2]int{129, 129}, [2]int{31, 15})
}

// raggedValues is an [m, k] matrix of gaussians (per-row magnitudes, a few
// outliers) in which every row's last valid element is twice the row's
// largest, and then every column's last valid element twice the column's
// largest: the partial blocks' amax sits on their last valid element.
func raggedValues(m, k int, seed uint64) [][]float32 {
	x := gaussian(m, k, seed)
	rng := rand.New(rand.NewPCG(seed, 5))
	sign := func() float32 { return float32(1 - 2*rng.IntN(2)) }
	for r := 0; r < m; r++ {
		var a float32
		for _, v := range x[r][:k-1] {
			a = max(a, float32(math.Abs(float64(v))))
		}
		x[r][k-1] = sign() * max(2*a, 0.5)
	}
	for c := 0; c < k; c++ {
		var a float32
		for r := 0; r < m-1; r++ {
			a = max(a, float32(math.Abs(float64(x[r][c]))))
		}
		x[m-1][c] = sign() * max(2*a, 0.5)
	}
	return x
}

func padValues(x [][]float32, m0, k0 int) [][]float32 {
	return matrix(m0, k0, func(r, c int) float32 {
		if r < len(x) && c < len(x[0]) {
			return x[r][c]
		}
		return 0
	})
}

// guardedStorage is direction dir of a tensor in guarded caller-style buffers
// (hosttest.Guarded).
type guardedStorage struct{ *hosttest.Guarded }

func newGuardedStorage(t testing.TB, spec host.Spec, dir host.Direction, m, k int) *guardedStorage {
	t.Helper()
	return &guardedStorage{hosttest.NewGuarded(t, spec, dir, m, k)}
}

func (g *guardedStorage) dir() refDirection {
	return refDirection{
		data:  g.St.MustBuffer(host.BufData).Bytes8(),
		scale: g.St.MustBuffer(host.BufScaleInv).Bytes8(),
		amax:  g.St.MustBuffer(host.BufAmax).Float32s()[0],
	}
}

// cropRef is the rule of spec §14 applied to a reference direction of X₀
// (stored [rows0, cols0]): codes of the first rows × cols elements in rows of
// ⌈cols/2⌉ bytes (high nibble of an odd row's last byte zero), scales of the
// valid rows × ⌈cols/16⌉ blocks at the same place (the scale shapes agree),
// every other scale byte zero.
func cropRef(d refDirection, rows, cols, cols0 int, swizzled bool) refDirection {
	rb := (cols + 1) / 2
	out := refDirection{data: make([]byte, rows*rb), scale: make([]byte, len(d.scale)), amax: d.amax}
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			q := d.data[r*cols0/2+c/2] >> (4 * (c % 2)) & 0xF
			out.data[r*rb+c/2] |= q << (4 * (c % 2))
		}
	}
	pc := ((cols0 / 16) + 3) / 4 * 4
	for r := 0; r < rows; r++ {
		for j := 0; j < (cols+15)/16; j++ {
			idx := r*pc + j
			if swizzled {
				idx = refSwizzleIndex(r, j, pc)
			}
			out.scale[idx] = d.scale[idx]
		}
	}
	return out
}

// raggedOption is one quantize configuration of the rule tests.
type raggedOption struct {
	name   string
	p      host.Params
	o      refOptions
	dtypes []host.DType
}

func raggedOptions() []raggedOption {
	bf16, both := []host.DType{host.BFloat16}, []host.DType{host.BFloat16, host.Float32}
	rht := func(o refOptions) refOptions { o.rht, o.mask = true, DefaultRHTSignMask; return o }
	return []raggedOption{
		{"1x16", host.Params{}, refOptions{}, both},
		{"16x16", host.Params{BlockDims: 2}, refOptions{twoD: true}, both},
		{"rht", host.Params{RHT: host.RHTDefault}, rht(refOptions{}), bf16},
		{"sr", host.Params{StochasticRounding: true, Seed: 0x1234_5678_9abc, Offset: 77}, refOptions{sr: true, seed: 0x1234_5678_9abc, offset: 77}, both},
		{"rht+sr", host.Params{RHT: host.RHTDefault, StochasticRounding: true, Seed: 5, Offset: 1 << 33}, rht(refOptions{sr: true, seed: 5, offset: 1 << 33}), bf16},
		{"16x16+sr", host.Params{BlockDims: 2, StochasticRounding: true, Seed: 9}, refOptions{twoD: true, sr: true, seed: 9}, bf16},
	}
}

// TestRaggedShapesFollowThePaddedTensor checks spec §14 directly for every
// option (1×16, 16×16, RHT, stochastic rounding, both layouts), input dtype
// and direction (each alone and both together):
//
//   - without stochastic rounding, quantizing X [M, K] gives at every valid
//     element and every block with a valid element the bytes (and amax) of
//     X₀, X zero-padded to multiples of 16 (items 1, 2);
//   - with it, the bytes of the independent reference run on X₀ with random
//     bits keyed by X's flat indices (item 3);
//   - always, the whole buffers equal that reference cropped by the rule:
//     every padding byte zero (item 4), and nothing is written past them.
func TestRaggedShapesFollowThePaddedTensor(t *testing.T) {
	for si, sh := range raggedShapes() {
		m, k := sh[0], sh[1]
		m0, k0 := int(pad(int64(m), 16)), int(pad(int64(k), 16))
		vals := raggedValues(m, k, uint64(si))
		for oi, opt := range raggedOptions() {
			for _, dt := range opt.dtypes {
				swizzled := (si+oi)%2 == 1
				p := opt.p
				p.Format, p.GEMMSwizzledScales = Name, swizzled
				sp, err := host.NewSpec(p)
				require.NoError(t, err)
				in := newInput(t, dt, padValues(vals, m, k)) // rounds its copy to dt
				in0 := newInput(t, dt, padValues(in.vals, m0, k0))
				name := fmt.Sprintf("%dx%d/%s/%s/swizzled=%v", m, k, opt.name, dt, swizzled)

				o := opt.o
				o.swizzled, o.keyM, o.keyK = swizzled, m, k
				refRow, refCol := refQuantize(in0.vals, o)
				want := [2]refDirection{cropRef(refRow, m, k, k0, swizzled), cropRef(refCol, k, m, m0, swizzled)}

				// X₀ itself, for the byte-for-byte rule (without SR its keys
				// are X's anyway: nothing is random).
				var padded [2]refDirection
				if !opt.o.sr {
					g0 := [2]*guardedStorage{newGuardedStorage(t, sp, host.DirRowwise, m0, k0), newGuardedStorage(t, sp, host.DirColumnwise, m0, k0)}
					require.NoError(t, kernels{}.Quantize(&host.QuantizeRequest{Spec: sp, Input: in0.t, M: int64(m0), K: int64(k0),
						Out: [2]*host.Storage{g0[0].St, g0[1].St}}), name)
					padded = [2]refDirection{
						cropRef(g0[0].dir(), m, k, k0, swizzled),
						cropRef(g0[1].dir(), k, m, m0, swizzled),
					}
				}
				for _, dirs := range [][]host.Direction{{host.DirRowwise}, {host.DirColumnwise}, {host.DirRowwise, host.DirColumnwise}} {
					var out [2]*host.Storage
					var got [2]*guardedStorage
					for _, d := range dirs {
						got[d] = newGuardedStorage(t, sp, d, m, k)
						out[d] = got[d].St
					}
					require.NoError(t, kernels{}.Quantize(&host.QuantizeRequest{Spec: sp, Input: in.t, M: int64(m), K: int64(k), Out: out}), name)
					for _, d := range dirs {
						what := fmt.Sprintf("%s %s (alone=%v)", name, d, len(dirs) == 1)
						if !opt.o.sr {
							requireSameDirection(t, padded[d], got[d].dir(), what+" vs X₀")
						}
						requireSameDirection(t, want[d], got[d].dir(), what+" vs reference")
						got[d].CheckGuards(t, what)
					}
				}
			}
		}
	}
}

// TestRaggedAmaxIsThePaddedTensors: quant_compute_amax on X gives the amaxes
// a quantize of X uses: amax(X) rowwise, and with the RHT the amax of the
// transform of X₀ᵀ over zero-padded 16-row groups (spec §14 item 2), which
// the reference computes on X₀.
func TestRaggedAmaxIsThePaddedTensors(t *testing.T) {
	for _, sh := range [][2]int{{1, 33}, {17, 5}, {45, 64}, {129, 31}} {
		m, k := sh[0], sh[1]
		vals := raggedValues(m, k, 3)
		in := newInput(t, host.BFloat16, vals)
		in0 := newInput(t, host.BFloat16, padValues(in.vals, int(pad(int64(m), 16)), int(pad(int64(k), 16))))
		for _, p := range []host.Params{{Format: Name}, {Format: Name, RHT: host.RHTDefault}} {
			sp, err := host.NewSpec(p)
			require.NoError(t, err)
			out, err := host.AllocTensor(cpu, host.Float32, []int64{2}, 0)
			require.NoError(t, err)
			defer host.FreeTensor(out, 0)
			require.NoError(t, kernels{}.Amax(&host.AmaxRequest{Spec: sp, Input: in.t, M: int64(m), K: int64(k), Want: host.BothUsages, Out: out}))
			row, col := refQuantize(in0.vals, refOptions{rht: p.RHT != host.RHTOff, mask: DefaultRHTSignMask})
			require.Equal(t, row.amax, out.Float32s()[0], "%dx%d rht=%v rowwise", m, k, p.RHT)
			require.Equal(t, col.amax, out.Float32s()[1], "%dx%d rht=%v columnwise", m, k, p.RHT)
			qt := quantize(t, p, host.BothUsages, in.t, nil)
			require.Equal(t, col.amax, stored(t, qt, host.DirColumnwise).amax)
		}
	}
}

// TestRaggedDequantizeFollowsThePaddedTensor: dequantize of a ragged tensor
// returns [M, K], equal bit for bit to the valid part of X₀'s dequantize in
// every output dtype (spec §14 item 4), for stored values; with the RHT
// undone, whole 16-row groups are exact and a partial group is the inverse
// of its valid outputs (the dropped ones count as zero).
func TestRaggedDequantizeFollowsThePaddedTensor(t *testing.T) {
	for _, sh := range [][2]int{{1, 1}, {45, 77}, {17, 33}, {100, 31}, {129, 2}} {
		m, k := sh[0], sh[1]
		m0, k0 := int(pad(int64(m), 16)), int(pad(int64(k), 16))
		in := newInput(t, host.BFloat16, raggedValues(m, k, 8))
		in0 := newInput(t, host.BFloat16, padValues(in.vals, m0, k0))
		for _, p := range []host.Params{{Format: Name}, {Format: Name, BlockDims: 2, GEMMSwizzledScales: true}, {Format: Name, RHT: host.RHTDefault}} {
			qt := quantize(t, p, host.BothUsages, in.t, nil)
			qt0 := quantize(t, p, host.BothUsages, in0.t, nil)
			for _, dir := range []host.Direction{host.DirRowwise, host.DirColumnwise} {
				for _, dt := range []host.DType{host.Float32, host.BFloat16, host.Float16} {
					got, err := host.AllocTensor(cpu, dt, []int64{int64(m), int64(k)}, 0)
					require.NoError(t, err)
					defer host.FreeTensor(got, 0)
					want, err := host.AllocTensor(cpu, dt, []int64{int64(m0), int64(k0)}, 0)
					require.NoError(t, err)
					defer host.FreeTensor(want, 0)
					require.NoError(t, qt.Dequantize(dir, got, 0))
					require.NoError(t, qt0.Dequantize(dir, want, 0))
					es := int(dt.Size())
					gb, wb := got.Bytes8(), want.Bytes8()
					for r := 0; r < m; r++ {
						require.Equal(t, wb[r*k0*es:(r*k0+k)*es], gb[r*k*es:(r+1)*k*es], "%dx%d %+v %s %s row %d", m, k, p, dir, dt, r)
					}
				}
			}
			if p.RHT == host.RHTOff {
				continue
			}
			// Undone: the rows of whole groups equal X₀'s undone values.
			got := dequantized(t, qt, host.DirColumnwise, true)
			want := dequantized(t, qt0, host.DirColumnwise, true)
			for r := 0; r < m/16*16; r++ {
				for c := 0; c < k; c++ {
					require.Equal(t, math.Float32bits(want[r*k0+c]), math.Float32bits(got[r*k+c]), "%dx%d undone (%d,%d)", m, k, r, c)
				}
			}
		}
	}
}

// TestEmptyShapes: a zero dim (an MoE expert that received no token) is an
// empty tensor, aligned or with a ragged other dim: quantize, amax,
// dequantize and the 16×16 derive work and every scale byte is zero.
func TestEmptyShapes(t *testing.T) {
	for _, sh := range [][]int64{{0, 16}, {16, 0}, {0, 33}, {45, 0}, {0, 0}, {2, 0, 7}} {
		for _, p := range []host.Params{{Format: Name}, {Format: Name, BlockDims: 2}, {Format: Name, RHT: host.RHTDefault, StochasticRounding: true}} {
			q, err := host.NewQuantizer(p, host.BothUsages)
			require.NoError(t, err)
			in, err := host.AllocTensor(cpu, host.BFloat16, sh, 0)
			require.NoError(t, err)
			qt, err := q.Quantize(in, host.QuantizeOptions{})
			require.NoError(t, err, "%v %+v", sh, p)
			for _, dir := range []host.Direction{host.DirRowwise, host.DirColumnwise} {
				st, _ := qt.Storage(dir)
				for _, b := range st.MustBuffer(host.BufScaleInv).Bytes8() {
					require.Zero(t, b)
				}
				require.NoError(t, qt.Dequantize(dir, in, 0))
			}
			amax, err := host.AllocTensor(cpu, host.Float32, []int64{2}, 0)
			require.NoError(t, err)
			require.NoError(t, q.ComputeAmax(in, amax, 0))
			require.Equal(t, []float32{0, 0}, amax.Float32s())
			if p.BlockDims == 2 {
				require.NoError(t, qt.UpdateUsage(host.Rowwise, 0))
				require.NoError(t, qt.UpdateUsage(host.BothUsages, 0))
			}
			qt.Free()
			host.FreeTensor(amax, 0)
			host.FreeTensor(in, 0)
			q.Release()
		}
	}
}
