package gputest

import (
	"fmt"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"libquant/host"
)

// countingAllocator is a caller allocator (host.SetCallerAllocator, the C
// ABI's quant_set_device_allocator) over the plugin's own memory, counting
// what goes through it.
type countingAllocator struct {
	mu            sync.Mutex
	live          map[unsafe.Pointer]host.Tensor
	allocs, frees int
	largest       int64
}

func (c *countingAllocator) Alloc(dev host.Device, n int64, stream uintptr) (unsafe.Pointer, error) {
	t, err := host.AllocOwnTensor(dev, host.Uint8, []int64{n}, stream)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live[t.Ptr] = t
	c.allocs++
	c.largest = max(c.largest, n)
	return t.Ptr, nil
}

func (c *countingAllocator) Free(dev host.Device, p unsafe.Pointer, stream uintptr) {
	c.mu.Lock()
	t, ok := c.live[p]
	delete(c.live, p)
	c.frees++
	c.mu.Unlock()
	if !ok {
		panic("countingAllocator: a free of a buffer it did not allocate")
	}
	host.FreeTensor(t, stream) // the plugin's: AllocOwnTensor's
}

// TestGemmWithLentWorkspace: while a caller allocator is set, the host lends
// each GEMM a workspace from it and the plugin allocates nothing itself
// (cuda/gemm.cu takes its scratch and cuBLASLt's workspace from the loan).
// The results are the same bytes as without (the same kernels on the same
// data), for the native FP8 paths, the BF16 expansion of MX and NVFP4, a
// mixed pair and the fused kernel's shape; every buffer is given back.
func TestGemmWithLentWorkspace(t *testing.T) {
	needGPU(t)
	byName := gemmOperandsByName()
	cases := []struct {
		a, b    string
		m, n, k int64
	}{
		{"fp8 e4m3", "fp8 e4m3", 64, 48, 512},
		{"fp8_block 1x128", "fp8_block 128x128", 64, 48, 512},
		{"mxfp8", "mxfp8", 300, 200, 320},
		{"nvfp4", "nvfp4", 300, 200, 320},
		{"mxfp8", "nvfp4", 45, 33, 77},
		{"mxfp8", "mxfp8", 16, 200, 320},
	}
	for _, c := range cases {
		t.Run(c.a+" x "+c.b, func(t *testing.T) {
			a := makeGemmSide(t, byName[c.a], c.m, c.k, 11)
			b := makeGemmSide(t, byName[c.b], c.n, c.k, 12)
			// D of both runs made before the caller allocator is set: only
			// what the GEMM itself needs goes through it.
			ds := [2]host.Tensor{poisoned(t, host.BFloat16, []int64{c.m, c.n}, 0xff), poisoned(t, host.BFloat16, []int64{c.m, c.n}, 0xff)}
			run := func(d host.Tensor) {
				require.NoError(t, host.Gemm(&host.GemmArgs{A: a.gpu, B: host.GemmOperand{Q: b.gpu.Q, Dense: b.gpu.Dense, Trans: true}, Alpha: 1, D: d}))
			}
			run(ds[0])
			ca := &countingAllocator{live: map[unsafe.Pointer]host.Tensor{}}
			require.NoError(t, host.SetCallerAllocator(host.CUDA, ca))
			run(ds[1])
			require.NoError(t, host.SetCallerAllocator(host.CUDA, nil))
			want, got := toCPU(t, ds[0]).Bytes8(), toCPU(t, ds[1]).Bytes8()
			require.NoError(t, host.Synchronize(gpu, 0))
			require.Equal(t, want, got, "D with the lent workspace")
			require.Positive(t, ca.allocs)
			require.GreaterOrEqual(t, ca.largest, int64(32<<20), "the loan covers cuBLASLt's 32 MiB workspace")
			require.Equal(t, ca.allocs, ca.frees, "every buffer went back")
			require.Empty(t, ca.live)
		})
	}
}

// TestRHTQuantizeWithLentWorkspace: while a caller allocator is set, the host
// lends an NVFP4 quantize with the RHT on a columnwise copy the room for the
// transformed input (quant_plugin_rht_workspace: 2 bytes per element of whole
// 16-row groups, 256-byte aligned; a single quantize goes as a group of one),
// single and grouped, and the bytes still equal the CPU's: one loan per call,
// the group's holding every item's room, every one given back.
func TestRHTQuantizeWithLentWorkspace(t *testing.T) {
	needGPU(t)
	shapes := [][2]int64{{45, 77}, {47, 129}, {256, 512}, {1, 256}}
	rhtBytes := func(m, k int64) int64 { return ((m+15)/16*16*k*2 + 255) / 256 * 256 }
	var group int64
	for _, sh := range shapes {
		group += rhtBytes(sh[0], sh[1])
	}
	for _, p := range []host.Params{
		{Format: "nvfp4", RHT: host.RHTDefault},
		{Format: "nvfp4", RHT: host.RHTDefault, StochasticRounding: true, Seed: 5},
	} {
		for _, usage := range []host.Usage{host.BothUsages, host.Columnwise} {
			t.Run(fmt.Sprintf("sr=%v/%s", p.StochasticRounding, usage), func(t *testing.T) {
				qc, qg := quantizerPair(t, p, usage)
				ins, cqs := cpuReferences(t, qc, host.BFloat16, []string{"normal", "adversarial", "wide", "normal"}, shapes)
				single := make([]*host.QTensor, len(shapes))
				grouped := make([]*host.QTensor, len(shapes))
				for i := range shapes {
					single[i] = poisonedQTensor(t, qg, ins[i].Shape, byte(0x5A+i))
					grouped[i] = poisonedQTensor(t, qg, ins[i].Shape, byte(0x5A+i))
				}
				// Every buffer above was made before the caller allocator is
				// set: only the loans go through it.
				ca := &countingAllocator{live: map[unsafe.Pointer]host.Tensor{}}
				require.NoError(t, host.SetCallerAllocator(host.CUDA, ca))
				for i := range shapes {
					require.NoError(t, qg.QuantizeInto(ins[i], host.QuantizeOptions{}, single[i]))
				}
				singles := ca.allocs
				require.NoError(t, qg.QuantizeGrouped(ins, grouped, host.QuantizeOptions{}))
				require.NoError(t, host.SetCallerAllocator(host.CUDA, nil))
				require.NoError(t, host.Synchronize(gpu, 0))
				for i, sh := range shapes {
					compareTensors(t, fmt.Sprintf("single %v", sh), cqs[i], single[i])
					compareTensors(t, fmt.Sprintf("grouped %v", sh), cqs[i], grouped[i])
				}
				require.Equal(t, len(shapes), singles, "one loan per single quantize")
				require.Equal(t, len(shapes)+1, ca.allocs, "one loan for the group")
				require.Equal(t, group, ca.largest, "the group's loan: every item's room")
				require.Equal(t, ca.allocs, ca.frees, "every buffer went back")
				require.Empty(t, ca.live)
			})
		}
	}
}
