package host

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPluginReports: a device nobody serves names every loader's report, or
// says that no plugin is loaded when no loader has anything to say.
func TestPluginReports(t *testing.T) {
	pluginReports.Lock()
	saved := pluginReports.list
	pluginReports.list = nil
	pluginReports.Unlock()
	t.Cleanup(func() {
		pluginReports.Lock()
		pluginReports.list = saved
		pluginReports.Unlock()
	})
	_, err := AllocTensor(Device{Type: CUDA}, Float32, []int64{2}, 0)
	require.ErrorIs(t, err, ErrDeviceUnavailable)
	require.ErrorContains(t, err, "no plugin is loaded (quant_plugin_load or LIBQUANT_PLUGIN_PATH load one)")

	RegisterPluginReport(func() string { return "" })
	RegisterPluginReport(func() string { return "plugin a loaded from /x/a.so" })
	RegisterPluginReport(func() string { return "/y/libquant_cuda.so does not exist" })
	require.Equal(t, "plugin a loaded from /x/a.so; /y/libquant_cuda.so does not exist", pluginSummary())
	_, err = AllocTensor(Device{Type: CUDA}, Float32, []int64{2}, 0)
	require.ErrorContains(t, err, "(plugin a loaded from /x/a.so; /y/libquant_cuda.so does not exist)")
}
