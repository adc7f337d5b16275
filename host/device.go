package host

import (
	"strings"
	"sync"
)

// DelayedCast is implemented by delayed-scaling states so that kernels which
// compute the amax somewhere the state cannot see (a device) can read the scale
// to cast with and then stage the amax they computed (spec §2.3).
type DelayedCast interface {
	CastScale() float32
	RecordAmax(amax float32)
}

// DeviceMemory is implemented by the allocators of device types whose memory
// the host cannot touch directly (a GPU plugin's). Every operation is ordered on
// stream; Synchronize waits for it.
type DeviceMemory interface {
	Allocator
	// Copy copies src into dst (the same byte size); either may be on the CPU.
	Copy(dst, src Tensor, stream uintptr) error
	Memset(t Tensor, value byte, stream uintptr) error
	Synchronize(dev Device, stream uintptr) error
	DeviceCount() (int, error)
}

func deviceMemoryFor(dev Device) (DeviceMemory, error) {
	a, err := allocatorFor(dev)
	if err != nil {
		return nil, err
	}
	m, ok := a.(DeviceMemory)
	if !ok {
		return nil, Errorf(ErrUnsupported, "the allocator of %s cannot copy", dev)
	}
	return m, nil
}

// CopyTensor copies src into dst (same dtype and element count) between any
// two devices libquant can reach, ordered on stream. CPU-to-CPU copies finish
// before it returns; others may still run until Synchronize.
func CopyTensor(dst, src Tensor, stream uintptr) error {
	if dst.Bytes() != src.Bytes() {
		return Errorf(ErrInvalidArgument, "copy: dst has %d bytes, src %d", dst.Bytes(), src.Bytes())
	}
	if dst.Bytes() == 0 {
		return nil
	}
	if dst.Device.Type == CPU && src.Device.Type == CPU {
		copy(dst.Bytes8(), src.Bytes8())
		return nil
	}
	if dst.Device.Type != CPU && src.Device.Type != CPU && dst.Device != src.Device {
		return Errorf(ErrUnsupported, "copy: from %s to %s: peer copies are not supported", src.Device, dst.Device)
	}
	dev := dst.Device
	if dev.Type == CPU {
		dev = src.Device
	}
	m, err := deviceMemoryFor(dev)
	if err != nil {
		return err
	}
	return m.Copy(dst, src, stream)
}

// MemsetTensor sets every byte of t to value, ordered on stream.
func MemsetTensor(t Tensor, value byte, stream uintptr) error {
	if t.Bytes() == 0 {
		return nil
	}
	if t.Device.Type == CPU {
		b := t.Bytes8()
		for i := range b {
			b[i] = value
		}
		return nil
	}
	m, err := deviceMemoryFor(t.Device)
	if err != nil {
		return err
	}
	return m.Memset(t, value, stream)
}

// Synchronize waits for the work ordered on stream of dev (nothing on the CPU).
func Synchronize(dev Device, stream uintptr) error {
	if dev.Type == CPU {
		return nil
	}
	m, err := deviceMemoryFor(dev)
	if err != nil {
		return err
	}
	return m.Synchronize(dev, stream)
}

// DeviceCount is the number of devices of a type (1 for the CPU, 0 when no
// plugin serves the type).
func DeviceCount(t DeviceType) (int, error) {
	if t == CPU {
		return 1, nil
	}
	m, err := deviceMemoryFor(Device{Type: t})
	if err != nil {
		return 0, nil
	}
	return m.DeviceCount()
}

// pluginReports are the plugin loaders' accounts of what they loaded and where
// they looked (RegisterPluginReport), for device-unavailable messages.
var pluginReports struct {
	sync.Mutex
	list []func() string
}

// RegisterPluginReport adds a plugin loader's report: report says what the
// loader loaded, what failed and where it looked ("" when it has nothing to
// say). A device or kernel that is not available names every report in its
// error, so that the user learns why no plugin serves it.
func RegisterPluginReport(report func() string) {
	pluginReports.Lock()
	defer pluginReports.Unlock()
	pluginReports.list = append(pluginReports.list, report)
}

// pluginSummary joins the loaders' reports, for device-unavailable messages.
func pluginSummary() string {
	pluginReports.Lock()
	list := append([]func() string(nil), pluginReports.list...)
	pluginReports.Unlock()
	var parts []string
	for _, r := range list {
		if s := r(); s != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return "no plugin is loaded (quant_plugin_load or LIBQUANT_PLUGIN_PATH load one)"
	}
	return strings.Join(parts, "; ")
}
