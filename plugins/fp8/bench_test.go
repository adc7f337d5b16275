package fp8_test

import (
	"testing"

	"libquant/host"
	"libquant/host/hosttest"
	tu "libquant/internal/testutil"
)

// BenchmarkQuantize reports GB/s on the minimum bytes (input read once, every
// output byte written once) for 4096x4096 BF16, per element type and direction.
func BenchmarkQuantize(b *testing.B) {
	const m, k = 4096, 4096
	in, _ := hosttest.Input(b, host.BFloat16, tu.Normal(m*k, 1, 1), m, k)
	for _, c := range []struct {
		name  string
		p     host.Params
		usage host.Usage
	}{
		{"fp8_current_e4m3/rowwise", host.Params{Format: "fp8"}, host.Rowwise},
		{"fp8_current_e4m3/columnwise", host.Params{Format: "fp8"}, host.Columnwise},
		{"fp8_current_e4m3/both", host.Params{Format: "fp8"}, host.BothUsages},
		{"fp8_delayed_e4m3/both", host.Params{Format: "fp8", Scaling: host.ScalingDelayed}, host.BothUsages},
	} {
		b.Run(c.name, func(b *testing.B) { hosttest.BenchQuantize(b, in, c.p, c.usage) })
	}
}
