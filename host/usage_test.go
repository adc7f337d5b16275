package host_test

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/host"
	"libquant/host/hosttest"
)

func sortedConfigNames(cfgs map[string]host.Params) []string {
	var names []string
	for n := range cfgs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// TestQuantizeIntoInPlace re-quantizes new values into an existing tensor (a
// weight updated every step): the buffers keep their addresses and hold the
// bytes a fresh quantize of the new values makes.
func TestQuantizeIntoInPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	cfgs := formatConfigs(t)
	for _, name := range sortedConfigNames(cfgs) {
		t.Run(name, func(t *testing.T) {
			q := hosttest.NewQuantizer(t, cfgs[name], host.BothUsages)
			dst := hosttest.Quantize(t, q, hosttest.RandTensor(t, rng, host.BFloat16, 1, 64, 128))
			addrs := hosttest.BufferAddrs(dst)
			for step := 0; step < 3; step++ {
				x := hosttest.RandTensor(t, rng, host.BFloat16, 1+float64(step), 64, 128)
				require.NoError(t, q.QuantizeInto(x, host.QuantizeOptions{}, dst))
				require.Equal(t, addrs, hosttest.BufferAddrs(dst), "buffers moved")
				fresh := hosttest.Quantize(t, hosttest.NewQuantizer(t, cfgs[name], host.BothUsages), x)
				for _, d := range []host.Direction{host.DirRowwise, host.DirColumnwise} {
					require.Equal(t, storageBytes(t, fresh, d), storageBytes(t, dst, d), "step %d %s bytes", step, d)
				}
			}
		})
	}
}

// TestPersistentTrainInferAlternation alternates training steps (the weight
// quantizer asks for both directions) and inference steps (rowwise only) on
// one persistent weight, updating the weight every step, as TE's
// test_linear_training_loop does (spec §10): the columnwise data must never
// be stale, i.e. after every step both directions hold the bytes a fresh
// quantize of the current weight makes. A temporary tensor, by contrast, drops
// the columnwise data on inference steps, and a dgrad GEMM on it then fails
// naming it. Halfway the recipe changes (another configuration of the
// quantizer), and the persistent tensor keeps both directions across it.
func TestPersistentTrainInferAlternation(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	cfgs := formatConfigs(t)
	names := sortedConfigNames(cfgs)
	for i, name := range names {
		next := names[(i+1)%len(names)]
		t.Run(fmt.Sprintf("%s_then_%s", name, next), func(t *testing.T) {
			const n, k = 64, 128
			stages := []string{"train", "infer", "infer", "train", "infer", "train", "infer"}
			w := hosttest.RandTensor(t, rng, host.BFloat16, 0.1, n, k)
			q := hosttest.NewQuantizer(t, cfgs[name], host.Rowwise)
			persistent, err := q.Quantize(w, host.QuantizeOptions{Persistent: true})
			require.NoError(t, err)
			defer persistent.Free()
			temp := hosttest.Quantize(t, q, w)
			trained := false
			for step, stage := range stages {
				p := cfgs[name]
				if step >= len(stages)/2 {
					p = cfgs[next] // a recipe change
				}
				q := hosttest.NewQuantizer(t, p, host.Rowwise)
				if stage == "train" {
					require.NoError(t, q.SetUsage(host.BothUsages))
					trained = true
				}
				w = hosttest.RandTensor(t, rng, host.BFloat16, 0.1, n, k) // the optimizer step
				require.NoError(t, q.QuantizeInto(w, host.QuantizeOptions{}, persistent))
				require.NoError(t, q.QuantizeInto(w, host.QuantizeOptions{}, temp))

				want := host.Rowwise
				if trained {
					want = host.BothUsages
				}
				require.Equal(t, want, persistent.Usage(), "step %d (%s): persistent usage", step, stage)
				fresh := hosttest.Quantize(t, hosttest.NewQuantizer(t, p, host.BothUsages), w)
				for _, d := range []host.Direction{host.DirRowwise, host.DirColumnwise} {
					if want.Has(d.Usage()) {
						require.Equal(t, storageBytes(t, fresh, d), storageBytes(t, persistent, d), "step %d (%s): %s data is stale", step, stage, d)
					}
				}

				// A temporary ends with the quantizer's usage, except that one
				// shared buffer (identity) serves both directions.
				tempUsage := q.Usage()
				if ss, ok := q.Spec(host.DirRowwise).(host.SharedStorage); ok && ss.SharesStorage() {
					tempUsage = host.BothUsages
				}
				require.Equal(t, tempUsage, temp.Usage(), "step %d (%s): temporary usage", step, stage)
				dy := hosttest.RandTensor(t, rng, host.Float32, 1, 8, n)
				dx := hosttest.Tensor(t, host.Float32, 8, k)
				err := host.Gemm(&host.GemmArgs{A: host.GemmOperand{Dense: &dy}, B: host.GemmOperand{Q: temp}, Alpha: 1, D: dx})
				if !tempUsage.Has(host.Columnwise) {
					require.ErrorIs(t, err, host.ErrState)
					require.ErrorContains(t, err, "b: ")
					require.ErrorContains(t, err, "columnwise")
				} else {
					require.NoError(t, err)
				}
				require.NoError(t, host.Gemm(&host.GemmArgs{A: host.GemmOperand{Dense: &dy}, B: host.GemmOperand{Q: persistent}, Alpha: 1, D: dx}),
					"step %d (%s): dgrad on the persistent weight", step, stage)
			}
		})
	}
}

// TestUpdateUsage: fp8 derives its transpose exactly; a persistent tensor
// never drops; dropping and asking for nothing are handled; identity's one
// buffer keeps serving both directions.
func TestUpdateUsage(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 36))
	x := hosttest.RandTensor(t, rng, host.Float32, 1, 24, 40)
	q := hosttest.NewQuantizer(t, host.Params{Format: "fp8"}, host.Rowwise)
	qt := hosttest.Quantize(t, q, x)
	require.Equal(t, host.Rowwise, qt.Usage())
	require.NoError(t, qt.UpdateUsage(host.BothUsages, 0))
	fresh := hosttest.Quantize(t, hosttest.NewQuantizer(t, host.Params{Format: "fp8"}, host.BothUsages), x)
	require.Equal(t, storageBytes(t, fresh, host.DirColumnwise), storageBytes(t, qt, host.DirColumnwise), "derived transpose")
	require.NoError(t, qt.UpdateUsage(host.Columnwise, 0))
	require.Equal(t, host.Columnwise, qt.Usage())
	err := qt.UpdateUsage(host.BothUsages, 0)
	require.ErrorIs(t, err, host.ErrState, "fp8 cannot rebuild rowwise data from the transpose")
	require.ErrorContains(t, err, "cannot derive rowwise")
	require.ErrorContains(t, qt.UpdateUsage(0, 0), "usage")
	require.ErrorContains(t, qt.UpdateUsage(4, 0), "usage")

	qt.SetPersistent(true)
	require.NoError(t, qt.UpdateUsage(host.Columnwise, 0))
	err = hosttest.Quantize(t, q, x).UpdateUsage(host.Rowwise, 0)
	require.NoError(t, err)
	p := hosttest.Quantize(t, hosttest.NewQuantizer(t, host.Params{Format: "fp8"}, host.BothUsages), x)
	p.SetPersistent(true)
	err = p.UpdateUsage(host.Rowwise, 0)
	require.ErrorIs(t, err, host.ErrState)
	require.ErrorContains(t, err, "persistent")
	require.Equal(t, host.BothUsages, p.Usage())

	id := hosttest.Quantize(t, hosttest.NewQuantizer(t, host.Params{Format: "identity"}, host.Rowwise), x)
	require.Equal(t, host.BothUsages, id.Usage(), "identity's buffer serves both directions")
	require.NoError(t, id.UpdateUsage(host.Rowwise, 0))
	require.Equal(t, hosttest.Values(x), hosttest.Dequantize(t, id, host.DirColumnwise))
}
