package rpc

import (
	"fmt"
	"sync"

	"libquant/host"
	"libquant/pluginsdk/wire"
)

// slot is where a format finds the plugin serving it; a reload swaps the
// plugin, so host keeps the format it registered once.
type slot struct {
	mu sync.RWMutex
	p  *plugin
}

func (s *slot) get() *plugin {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.p
}

// slots are the formats executable plugins registered, by name.
var slots = map[string]*slot{}

// register makes p's formats available, or points formats an earlier load
// of a plugin registered at p. Called with loaded locked.
func register(p *plugin) error {
	for _, name := range p.info.Formats {
		if s, ok := slots[name]; ok {
			if q := s.get(); q != nil && q.real != p.real && q.deadErr() == nil {
				return pluginErr(p.info.Path, "defines format %q, which plugin %s (%s) serves already", name, q.info.Name, q.info.Path)
			}
			continue
		}
		if _, err := host.LookupFormat(name); err == nil {
			return pluginErr(p.info.Path, "defines format %q, which is already registered", name)
		}
	}
	for _, name := range p.info.Formats {
		s, ok := slots[name]
		if !ok {
			s = &slot{}
			if err := host.RegisterFormat(&format{name: name, slot: s}); err != nil {
				return pluginErr(p.info.Path, "%v", err)
			}
			host.RegisterKernels(name, host.CPU, &kernels{slot: s})
			slots[name] = s
		}
		s.mu.Lock()
		s.p = p
		s.mu.Unlock()
	}
	return nil
}

// format is a plugin's format in host's registry.
type format struct {
	name string
	slot *slot
}

func (f *format) Name() string { return f.name }

func (f *format) NewSpec(p host.Params) (host.Spec, error) {
	pl := f.slot.get()
	r, err := invoke[wire.NewSpecResponse](pl, "NewSpec", &wire.NewSpecRequest{Params: wireParams(p)})
	if err != nil {
		return nil, err
	}
	return &spec{p: hostParams(r.Params), w: r.Params, derivable: r.Derivable, slot: f.slot, layouts: map[layoutKey][]host.BufferSpec{}}, nil
}

type layoutKey struct {
	m, k int64
	dir  host.Direction
}

// spec is a plugin format's spec; layouts are asked once per shape.
type spec struct {
	p         host.Params
	w         wire.Params
	derivable [2][2]bool
	slot      *slot

	mu      sync.Mutex
	layouts map[layoutKey][]host.BufferSpec
}

func (s *spec) Params() host.Params { return s.p }

func (s *spec) Derivable(from, to host.Direction) bool { return s.derivable[from][to] }

func (s *spec) NewState() (host.State, error) { return nil, nil }

func (s *spec) Layout(m, k int64, dir host.Direction) ([]host.BufferSpec, error) {
	key := layoutKey{m, k, dir}
	s.mu.Lock()
	l, ok := s.layouts[key]
	s.mu.Unlock()
	if ok {
		return l, nil
	}
	r, err := invoke[wire.LayoutResponse](s.slot.get(), "Layout", &wire.LayoutRequest{Params: s.w, M: m, K: k, Dir: int32(dir)})
	if err != nil {
		return nil, err
	}
	for i, b := range r.Buffers {
		dt := host.DType(b.DType)
		if dt.Bits() == 0 || host.CheckShape(fmt.Sprintf("layout buffer %d", i), b.Shape, max(dt.Size(), 1)) != nil {
			return nil, pluginErr(s.slot.get().info.Path, "format %s: layout buffer %d has dtype %d, shape %v", s.p.Format, i, b.DType, b.Shape)
		}
		l = append(l, host.BufferSpec{Kind: host.BufferKind(b.Kind), DType: dt, Shape: b.Shape})
	}
	s.mu.Lock()
	s.layouts[key] = l
	s.mu.Unlock()
	return l, nil
}

func wireParams(p host.Params) wire.Params {
	return wire.Params{Format: p.Format, Element: int32(p.Element), Scaling: int32(p.Scaling), ForcePow2Scales: p.ForcePow2Scales,
		AmaxEpsilon: p.AmaxEpsilon, AmaxHistoryLen: p.AmaxHistoryLen, AmaxAlgo: int32(p.AmaxAlgo), Margin: p.Margin,
		BlockDims: p.BlockDims, FP32Scales: p.FP32Scales, ScaleRounding: int32(p.ScaleRounding), GEMMSwizzledScales: p.GEMMSwizzledScales,
		RHT: int32(p.RHT), RHTSignMask: p.RHTSignMask, StochasticRounding: p.StochasticRounding, Seed: p.Seed, Offset: p.Offset,
		HoldDType: uint8(p.HoldDType)}
}

func hostParams(w wire.Params) host.Params {
	return host.Params{Format: w.Format, Element: host.Element(w.Element), Scaling: host.Scaling(w.Scaling), ForcePow2Scales: w.ForcePow2Scales,
		AmaxEpsilon: w.AmaxEpsilon, AmaxHistoryLen: w.AmaxHistoryLen, AmaxAlgo: host.AmaxAlgo(w.AmaxAlgo), Margin: w.Margin,
		BlockDims: w.BlockDims, FP32Scales: w.FP32Scales, ScaleRounding: host.ScaleRounding(w.ScaleRounding), GEMMSwizzledScales: w.GEMMSwizzledScales,
		RHT: host.RHTMode(w.RHT), RHTSignMask: w.RHTSignMask, StochasticRounding: w.StochasticRounding, Seed: w.Seed, Offset: w.Offset,
		HoldDType: host.DType(w.HoldDType)}
}
