package rpc

import (
	"fmt"
	"sync"
	"unsafe"

	"libquant/host"
	"libquant/internal/parallel"
	"libquant/pluginsdk/wire"
)

// kernels run a plugin format's operations in the plugin process. Each call
// stages its tensors in the shared arena (one copy in, one copy out: host
// tensors are the caller's memory), sends offsets and sizes, and copies the
// outputs back.
type kernels struct{ slot *slot }

var (
	_ host.Kernels          = (*kernels)(nil)
	_ host.WholeDequantizer = (*kernels)(nil)
	_ host.BufferAllocator  = (*kernels)(nil)
)

// AllocBuffer places a storage buffer of the plugin's format in the arena,
// where the plugin writes and reads it in place: quantize outputs and
// dequantize inputs then cross without a copy. It stays valid after the
// plugin stops (the arena is unmapped when its last buffer is released).
func (k *kernels) AllocBuffer(b host.BufferSpec, dev host.Device) (host.Tensor, func(), bool) {
	if dev.Type != host.CPU {
		return host.Tensor{}, nil, false
	}
	p := k.slot.get()
	n := b.Bytes()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead != nil || p.arena == nil {
		return host.Tensor{}, nil, false
	}
	off, ok := p.alloc.alloc(n)
	if !ok {
		return host.Tensor{}, nil, false
	}
	p.live++
	t := host.Tensor{Ptr: unsafe.Pointer(&p.arena[off]), DType: b.DType, Shape: append([]int64(nil), b.Shape...), Device: dev}
	var once sync.Once
	return t, func() {
		once.Do(func() {
			p.alloc.release(off, n)
			p.mu.Lock()
			p.live--
			p.unmapIfUnused()
			p.mu.Unlock()
		})
	}, true
}

// inArena returns t's offset when t lies in the arena of c's plugin.
func (c *call) inArena(t host.Tensor, n int64) (int64, bool) {
	if n == 0 || len(c.p.arena) == 0 {
		return 0, false
	}
	base := uintptr(unsafe.Pointer(&c.p.arena[0]))
	ptr := uintptr(t.Ptr)
	if ptr < base || ptr-base > uintptr(len(c.p.arena)) || uintptr(n) > uintptr(len(c.p.arena))-(ptr-base) {
		return 0, false
	}
	return int64(ptr - base), true
}

// DequantizesWhole: the CPU GEMM dequantizes a plugin format's operand in one
// call, not a call per tile.
func (*kernels) DequantizesWhole() {}

// call is one operation's arena regions; done releases them.
type call struct {
	p    *plugin
	regs []wire.Region
	outs []func()
}

// begin starts a call on the plugin serving the slot, or says why it cannot.
func (k *kernels) begin() (*call, error) {
	p := k.slot.get()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead != nil {
		return nil, pluginErr(p.info.Path, "plugin %s is not running (%v); load it again to restart it", p.info.Name, p.dead)
	}
	p.calls.Add(1)
	return &call{p: p}, nil
}

func (c *call) done() {
	for _, r := range c.regs {
		c.p.alloc.release(r.Off, r.Bytes)
	}
	c.p.calls.Done()
}

// region stages t in the arena: copied in when in is true, copied back out by
// finish when out is true.
func (c *call) region(what string, t host.Tensor, in, out bool) (wire.Region, error) {
	if t.Device.Type != host.CPU {
		return wire.Region{}, host.Errorf(host.ErrUnsupported, "%s: is on %s, but format plugin %s runs in another process and takes CPU tensors only (copy the tensor to the CPU first)", what, t.Device, c.p.info.Name)
	}
	n := t.Bytes()
	if off, ok := c.inArena(t, n); ok {
		// A storage buffer AllocBuffer placed here: used in place.
		return wire.Region{Off: off, Bytes: n, DType: uint8(t.DType), Shape: t.Shape}, nil
	}
	off, ok := c.p.alloc.alloc(n)
	if !ok {
		return wire.Region{}, host.Errorf(host.ErrOutOfMemory, "%s: %d bytes do not fit in the free space of plugin %s's %d-byte shared arena", what, n, c.p.info.Name, c.p.opts.ArenaBytes)
	}
	r := wire.Region{Off: off, Bytes: n, DType: uint8(t.DType), Shape: t.Shape}
	c.regs = append(c.regs, r)
	if in && n > 0 {
		copyParallel(c.p.arena[off:off+n], t.Bytes8())
	}
	if out && n > 0 {
		c.outs = append(c.outs, func() { copyParallel(t.Bytes8(), c.p.arena[off:off+n]) })
	}
	return r, nil
}

// copyParallel copies src into dst (the same length) in 1 MiB chunks over
// the cores: one core's memcpy does not reach the memory bandwidth.
func copyParallel(dst, src []byte) {
	const chunk = 1 << 20
	parallel.For((len(src)+chunk-1)/chunk, 1, func(lo, hi int) {
		copy(dst[lo*chunk:min(hi*chunk, len(dst))], src[lo*chunk:min(hi*chunk, len(src))])
	})
}

func (c *call) storage(what string, st *host.Storage, in, out bool) (*wire.Storage, error) {
	if st == nil {
		return nil, nil
	}
	w := &wire.Storage{Dir: int32(st.Dir)}
	for i, b := range st.Buffers {
		r, err := c.region(fmt.Sprintf("%s %s buffer", what, b.Kind), b.Tensor, in, out)
		if err != nil {
			return nil, fmt.Errorf("%w (buffer %d)", err, i)
		}
		w.Buffers = append(w.Buffers, wire.Buffer{Kind: int32(b.Kind), Region: r})
	}
	return w, nil
}

// run sends the request and, when it succeeds, copies the outputs back.
func (c *call) run(method string, req any) error {
	if _, err := invoke[wire.Empty](c.p, method, req); err != nil {
		return err
	}
	for _, f := range c.outs {
		f()
	}
	return nil
}

func wspec(s host.Spec) wire.Params { return s.(*spec).w }

func (k *kernels) Amax(r *host.AmaxRequest) error {
	c, err := k.begin()
	if err != nil {
		return err
	}
	defer c.done()
	in, err := c.region("input", r.Input, true, false)
	if err != nil {
		return err
	}
	// The slots not wanted keep their bytes: they travel both ways.
	out, err := c.region("amax out", r.Out, true, true)
	if err != nil {
		return err
	}
	return c.run("Amax", &wire.AmaxRequest{Params: wspec(r.Spec), Input: in, M: r.M, K: r.K, Want: uint32(r.Want), Out: out})
}

func (k *kernels) Quantize(r *host.QuantizeRequest) error {
	c, err := k.begin()
	if err != nil {
		return err
	}
	defer c.done()
	req := &wire.QuantizeRequest{Params: wspec(r.Spec), M: r.M, K: r.K}
	if req.Input, err = c.region("input", r.Input, true, false); err != nil {
		return err
	}
	for d, st := range r.Out {
		if req.Out[d], err = c.storage(host.Direction(d).String()+" output", st, false, true); err != nil {
			return err
		}
	}
	if r.AmaxIn != nil {
		a, err := c.region("amax_in", *r.AmaxIn, true, false)
		if err != nil {
			return err
		}
		req.AmaxIn = &a
	}
	return c.run("Quantize", req)
}

func (k *kernels) Dequantize(r *host.DequantizeRequest) error {
	c, err := k.begin()
	if err != nil {
		return err
	}
	defer c.done()
	st, err := c.storage("storage", r.Storage, true, false)
	if err != nil {
		return err
	}
	out, err := c.region("out", r.Out, false, true)
	if err != nil {
		return err
	}
	return c.run("Dequantize", &wire.DequantizeRequest{Params: wspec(r.Spec), Storage: *st, Dir: int32(r.Dir), M: r.M, K: r.K, Out: out})
}

func (k *kernels) Derive(r *host.DeriveRequest) error {
	c, err := k.begin()
	if err != nil {
		return err
	}
	defer c.done()
	from, err := c.storage("from", r.From, true, false)
	if err != nil {
		return err
	}
	to, err := c.storage("to", r.To, true, true)
	if err != nil {
		return err
	}
	return c.run("Derive", &wire.DeriveRequest{Params: wspec(r.Spec), From: *from, To: *to, FromDir: int32(r.FromDir), ToDir: int32(r.ToDir), M: r.M, K: r.K})
}
