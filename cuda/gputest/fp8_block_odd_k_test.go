package gputest

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/host"
)

// TestFp8Block2DOddKMatchesCPU: fp8_block 128x128 rowwise, alone and as the
// rowwise half of both directions, from 16-bit rows at an odd offset (K not
// a multiple of 8: spec §14), with the rowwise codes 0, 8, 16 and 24 bytes
// past a 32-byte boundary (BlockParams::row_flat: flat_tile_2d's frame, and
// the sector phase a kernel storing whole 32-byte sectors would start from:
// bench/RESULTS.md, 2026-12-03 10:07 section). The shapes reach every K mod 8
// of that kind, a last tile row that is whole (640 rows) or partial, one row,
// and 8191² and 2055×16383 (thousands of tiles, each tile row 64 or 128
// tiles long). The bytes equal the CPU's, and the bytes around the codes'
// buffer keep their poison (row pieces at odd offsets end in byte stores).
func TestFp8Block2DOddKMatchesCPU(t *testing.T) {
	needGPU(t)
	shapes := [][2]int64{{8191, 8191}, {2055, 16383}, {300, 1001}, {129, 4094}, {1000, 2050}, {640, 1028}, {128, 257}, {1, 8197}}
	for _, usage := range []host.Usage{host.Rowwise, host.BothUsages} {
		for _, dt := range []host.DType{host.BFloat16, host.Float16} {
			t.Run(fmt.Sprintf("%s/%s", usage, dt), func(t *testing.T) {
				qc, qg := quantizerPair(t, host.Params{Format: "fp8_block", BlockDims: 2}, usage)
				for si, sh := range shapes {
					if dt == host.Float16 && sh[0]*sh[1] > 1<<24 {
						continue // the largest shapes once, in BF16 (time)
					}
					kind := []string{"normal", "wide", "adversarial"}[si%3]
					x := input(t, dt, kind, sh[0], sh[1], uint64(3000+si))
					cq, err := qc.Quantize(x, host.QuantizeOptions{})
					require.NoError(t, err)
					t.Cleanup(cq.Free)
					off := int64(8 * (si % 4))
					const pad = 64
					gq, wholes := poisonedQTensorAt(t, qg, x.Shape, byte(0x5A+si), off, pad, func(l host.Layout) bool {
						return l.Dir == host.DirRowwise && l.Kind == host.BufData
					})
					require.Len(t, wholes, 1, "the rowwise data buffer in the layout")
					whole := wholes[0]
					n := whole.Shape[0] - off - pad
					xg := toGPU(t, x)
					require.NoError(t, qg.QuantizeInto(xg, host.QuantizeOptions{}, gq))
					require.NoError(t, host.Synchronize(gpu, 0))
					what := fmt.Sprintf("%v %s, codes at +%d", sh, kind, off)
					compareTensors(t, what, cq, gq)
					all := toCPU(t, whole).Bytes8()
					poison := bytes.Repeat([]byte{byte(0x5A + si)}, pad)
					require.Equal(t, poison[:off], all[:off], "%s: bytes before the codes", what)
					require.Equal(t, poison, all[off+n:], "%s: bytes after the codes", what)
				}
			})
		}
	}
}
