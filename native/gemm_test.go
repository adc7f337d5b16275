package native

import (
	"testing"

	"github.com/stretchr/testify/require"

	"libquant/host"
)

// TestGemmPluginFormatWithoutTiles: a format a native plugin defines without a
// CPU tile dequantizer (the toy plugin) is unsupported by the CPU GEMM, which
// says so in the support table and in the GEMM's error, naming the format.
func TestGemmPluginFormatWithoutTiles(t *testing.T) {
	_, err := Load(toyPlugin(t, "toy"), Explicit)
	require.NoError(t, err)
	cpu := host.Device{Type: host.CPU}
	s, err := host.QueryGemmSupport(cpu, "toy_u8", "toy_u8")
	require.NoError(t, err)
	require.Equal(t, host.GemmUnsupported, s.Level)
	require.Contains(t, s.Reason, `format "toy_u8" has no CPU tile dequantizer`)

	q, err := host.NewQuantizer(host.Params{Format: "toy_u8"}, host.Rowwise)
	require.NoError(t, err)
	defer q.Release()
	x, err := host.AllocTensor(cpu, host.Float32, []int64{4, 8}, 0)
	require.NoError(t, err)
	defer host.FreeTensor(x, 0)
	qt, err := q.Quantize(x, host.QuantizeOptions{})
	require.NoError(t, err)
	defer qt.Free()
	d, err := host.AllocTensor(cpu, host.Float32, []int64{4, 4}, 0)
	require.NoError(t, err)
	defer host.FreeTensor(d, 0)
	err = host.Gemm(&host.GemmArgs{A: host.GemmOperand{Q: qt}, B: host.GemmOperand{Q: qt, Trans: true}, Alpha: 1, D: d})
	require.ErrorIs(t, err, host.ErrUnsupported)
	require.ErrorContains(t, err, "toy_u8")
	require.ErrorContains(t, err, "tile dequantizer")
}
