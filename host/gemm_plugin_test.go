package host

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGemmPluginFormatWithoutTiles: a format a native plugin defines without a
// CPU tile dequantizer (the toy plugin) is unsupported by the CPU GEMM, which
// says so in the support table and in the GEMM's error, naming the format.
func TestGemmPluginFormatWithoutTiles(t *testing.T) {
	_, err := LoadPlugin(toyPlugin(t, "toy"), PluginExplicit)
	require.NoError(t, err)
	cpu := Device{Type: CPU}
	s, err := QueryGemmSupport(cpu, "toy_u8", "toy_u8")
	require.NoError(t, err)
	require.Equal(t, GemmUnsupported, s.Level)
	require.Contains(t, s.Reason, `format "toy_u8" has no CPU tile dequantizer`)

	q, err := NewQuantizer(Params{Format: "toy_u8"}, Rowwise)
	require.NoError(t, err)
	defer q.Release()
	x, err := AllocTensor(cpu, Float32, []int64{4, 8}, 0)
	require.NoError(t, err)
	defer FreeTensor(x, 0)
	qt, err := q.Quantize(x, QuantizeOptions{})
	require.NoError(t, err)
	defer qt.Free()
	d, err := AllocTensor(cpu, Float32, []int64{4, 4}, 0)
	require.NoError(t, err)
	defer FreeTensor(d, 0)
	err = Gemm(&GemmArgs{A: GemmOperand{Q: qt}, B: GemmOperand{Q: qt, Trans: true}, Alpha: 1, D: d})
	require.ErrorIs(t, err, ErrUnsupported)
	require.ErrorContains(t, err, "toy_u8")
	require.ErrorContains(t, err, "tile dequantizer")
}
