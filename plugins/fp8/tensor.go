package fp8

import (
	"math"
	"sort"
	"sync"
	"unsafe"

	"libquant/host"
	"libquant/internal/cmem"
	"libquant/internal/parallel"
	"libquant/internal/transpose"
)

// Name is the per-tensor FP8 format's registry name.
const Name = "fp8"

// Default delayed-scaling history length (spec §2.1).
const defaultHistoryLen = 1024

// maxHistoryLen bounds the history so that a bad config cannot allocate gigabytes.
const maxHistoryLen = 1 << 20

func init() { host.MustRegister(tensorFormat{}, tensorKernels{}) }

type tensorFormat struct{}

func (tensorFormat) Name() string { return Name }

func (tensorFormat) NewSpec(p host.Params) (host.Spec, error) {
	if p.Element == host.ElementDefault {
		p.Element = host.ElementE4M3
	}
	if p.Element != host.ElementE4M3 && p.Element != host.ElementE5M2 {
		return nil, host.Errorf(host.ErrInvalidArgument, "config.element: %s not supported by fp8 (want e4m3 or e5m2)", p.Element)
	}
	switch p.Scaling {
	case host.ScalingCurrent:
		if err := p.CheckUnused("Element", "Scaling", "ForcePow2Scales", "AmaxEpsilon"); err != nil {
			return nil, err
		}
		if !(p.AmaxEpsilon >= 0) || math.IsInf(float64(p.AmaxEpsilon), 0) {
			return nil, host.Errorf(host.ErrInvalidArgument, "config.amax_epsilon: %g must be finite and ≥ 0", p.AmaxEpsilon)
		}
	case host.ScalingDelayed:
		if err := p.CheckUnused("Element", "Scaling", "AmaxHistoryLen", "AmaxAlgo", "Margin"); err != nil {
			return nil, err
		}
		if p.AmaxHistoryLen == 0 {
			p.AmaxHistoryLen = defaultHistoryLen
		}
		if p.AmaxHistoryLen < 1 || p.AmaxHistoryLen > maxHistoryLen {
			return nil, host.Errorf(host.ErrInvalidArgument, "config.amax_history_len: %d not in 1..%d", p.AmaxHistoryLen, maxHistoryLen)
		}
		if p.AmaxAlgo != host.AmaxMax && p.AmaxAlgo != host.AmaxMostRecent {
			return nil, host.Errorf(host.ErrInvalidArgument, "config.amax_compute_algo: %d is not max (0) or most_recent (1)", p.AmaxAlgo)
		}
		if math.IsNaN(float64(p.Margin)) || math.IsInf(float64(p.Margin), 0) {
			return nil, host.Errorf(host.ErrInvalidArgument, "config.margin: %g must be finite", p.Margin)
		}
	default:
		return nil, host.Errorf(host.ErrInvalidArgument, "config.scaling: %d is not current (0) or delayed (1)", p.Scaling)
	}
	return &TensorSpec{p: p, codec: codecFor(p.Element)}, nil
}

// TensorSpec is a per-tensor FP8 direction spec.
type TensorSpec struct {
	p     host.Params
	codec elementCodec
}

func (s *TensorSpec) Params() host.Params { return s.p }

// Layout: rowwise data [M, K]; columnwise data is the exact transpose [K, M]
// (spec §7.3, Hopper keeps the transposed copy); each direction keeps its own
// FP32 scale_inv [1] and amax [1].
func (s *TensorSpec) Layout(m, k int64, dir host.Direction) ([]host.BufferSpec, error) {
	shape := []int64{m, k}
	if dir == host.DirColumnwise {
		shape = []int64{k, m}
	}
	return []host.BufferSpec{
		{Kind: host.BufData, DType: s.codec.dtype, Shape: shape},
		{Kind: host.BufScaleInv, DType: host.Float32, Shape: []int64{1}},
		{Kind: host.BufAmax, DType: host.Float32, Shape: []int64{1}},
	}, nil
}

// Derivable: the transpose can be built from rowwise data, not the reverse (spec §7.4).
func (s *TensorSpec) Derivable(from, to host.Direction) bool {
	return from == host.DirRowwise && to == host.DirColumnwise
}

func (s *TensorSpec) NewState() (host.State, error) {
	if s.p.Scaling != host.ScalingDelayed {
		return nil, nil
	}
	return newDelayedState(int(s.p.AmaxHistoryLen), s.codec.max, s.p, s)
}

// delayedState holds the scale and amax history in C memory (spec §2.2), or,
// after a quantize on a device whose plugin can run the update there, in that
// device's memory (host.DeviceDelayedState): then quantizes cast with the
// device scale and reduce the amax into the device history on their stream,
// updates run as a kernel on the stream of the last quantize, and Fetch copies
// the state back into the C views only when a caller asks (issue #15). A CPU
// quantize brings the state back to C memory.
type delayedState struct {
	mu      sync.Mutex
	scale   host.Tensor
	history host.Tensor
	fp8Max  float32
	p       host.Params
	spec    host.Spec
	// In device memory: onDev, the device buffers, and the stream of the last
	// quantize or update there.
	onDev          bool
	devScale, devH host.Tensor
	stream         uintptr
}

func newDelayedState(n int, fp8Max float32, p host.Params, spec host.Spec) (*delayedState, error) {
	sp, err := cmem.Alloc(4)
	if err != nil {
		return nil, host.Errorf(host.ErrOutOfMemory, "delayed scaling state: %v", err)
	}
	hp, err := cmem.Alloc(int64(n) * 4)
	if err != nil {
		cmem.Free(sp)
		return nil, host.Errorf(host.ErrOutOfMemory, "delayed scaling history of %d: %v", n, err)
	}
	cpu := host.Device{Type: host.CPU}
	d := &delayedState{
		scale:   host.Tensor{Ptr: sp, DType: host.Float32, Shape: []int64{1}, Device: cpu},
		history: host.Tensor{Ptr: hp, DType: host.Float32, Shape: []int64{int64(n)}, Device: cpu},
		fp8Max:  fp8Max, p: p, spec: spec,
	}
	d.scale.Float32s()[0] = 1 // spec §2.2: scale starts at ones
	return d, nil
}

func (d *delayedState) Free() {
	d.mu.Lock()
	d.freeDeviceLocked()
	d.mu.Unlock()
	cmem.Free(d.scale.Ptr)
	cmem.Free(d.history.Ptr)
}

func (d *delayedState) freeDeviceLocked() {
	if d.onDev {
		host.FreeTensor(d.devScale, d.stream)
		host.FreeTensor(d.devH, d.stream)
		d.onDev = false
	}
}

func (d *delayedState) Scale() host.Tensor       { return d.scale }
func (d *delayedState) AmaxHistory() host.Tensor { return d.history }

// Fetch copies a state in device memory back into the C views.
func (d *delayedState) Fetch() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fetchLocked()
}

func (d *delayedState) fetchLocked() error {
	if !d.onDev {
		return nil
	}
	if err := host.CopyTensor(d.scale, d.devScale, d.stream); err != nil {
		return err
	}
	if err := host.CopyTensor(d.history, d.devH, d.stream); err != nil {
		return err
	}
	return host.Synchronize(d.devScale.Device, d.stream)
}

// toCPULocked brings a state in device memory back to C memory (a CPU
// quantize of the same quantizer).
func (d *delayedState) toCPULocked() error {
	if !d.onDev {
		return nil
	}
	if err := d.fetchLocked(); err != nil {
		return err
	}
	d.freeDeviceLocked()
	return nil
}

// DeviceBuffers moves the state to dev on first use (host.DeviceDelayedState).
func (d *delayedState) DeviceBuffers(dev host.Device, stream uintptr) (scale, history host.Tensor, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.onDev && d.devScale.Device != dev {
		if err := d.toCPULocked(); err != nil {
			return scale, history, err
		}
	}
	if !d.onDev {
		if d.devScale, err = host.AllocTensor(dev, host.Float32, []int64{1}, stream); err != nil {
			return scale, history, err
		}
		if d.devH, err = host.AllocTensor(dev, host.Float32, d.history.Shape, stream); err != nil {
			host.FreeTensor(d.devScale, stream)
			return scale, history, err
		}
		if err = host.CopyTensor(d.devScale, d.scale, stream); err == nil {
			err = host.CopyTensor(d.devH, d.history, stream)
		}
		if err == nil {
			// The copies read C memory that a later CPU-side write must not race.
			err = host.Synchronize(dev, stream)
		}
		if err != nil {
			host.FreeTensor(d.devScale, stream)
			host.FreeTensor(d.devH, stream)
			return scale, history, err
		}
		d.onDev = true
	}
	d.stream = stream
	return d.devScale, d.devH, nil
}

// currentScale reads the scale under the lock.
func (d *delayedState) currentScale() float32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.scale.Float32s()[0]
}

// CastScale and RecordAmax let device kernels run delayed scaling
// (host.DelayedCast): they cast with the scale and stage the amax they computed.
func (d *delayedState) CastScale() float32   { return d.currentScale() }
func (d *delayedState) RecordAmax(a float32) { d.record(a) }

// record max-reduces a quantize's amax into the staging slot h[0] (the atomic
// max of spec §2.3; NaN is ignored as fmaxf does).
func (d *delayedState) record(amax float32) {
	d.mu.Lock()
	h := d.history.Float32s()
	if amax > h[0] {
		h[0] = amax
	}
	d.mu.Unlock()
}

// scaledMax is fl32(fp8_max · 2^-margin) (spec §2.4).
func (d *delayedState) scaledMax() float32 {
	return d.fp8Max * float32(math.Pow(2, -float64(d.p.Margin)))
}

// Update is the fused delayed-scaling update (spec §2.4, delayed_scaling.cu):
// a0 = the reduced amax if non-zero, else h[0]; when a0 == 0 nothing changes;
// otherwise the history rolls (h'[i] = h[i+1], h'[L-1] = a0, h'[0] = 0), amax is
// max(h[1..L-1], a0) for "max" or a0 for "most_recent", and the scale becomes
// fl32(fp8_max·2^-margin)/amax when amax is finite and positive (+Inf → FLT_MAX).
// A state in device memory is updated there, on the stream of its last quantize.
func (d *delayedState) Update(reduced *float32) error {
	if err := checkReduced(reduced, -1); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.updateLocked(reduced)
}

// checkReduced refuses a negative or NaN reduced amax; i ≥ 0 names its
// index in a group (formatted only on failure: a layer's update calls this
// per state every step).
func checkReduced(reduced *float32, i int) error {
	if reduced == nil || (*reduced >= 0 && !math.IsNaN(float64(*reduced))) {
		return nil
	}
	if i < 0 {
		return host.Errorf(host.ErrInvalidArgument, "reduced_amax: %g must be ≥ 0", *reduced)
	}
	return host.Errorf(host.ErrInvalidArgument, "reduced_amax[%d]: %g must be ≥ 0", i, *reduced)
}

// deviceUpdate is the request that updates a state in device memory.
func (d *delayedState) deviceUpdate(reduced *float32) host.DelayedUpdateRequest {
	return host.DelayedUpdateRequest{Spec: d.spec, Scale: d.devScale, History: d.devH, Reduced: reduced, ScaledMax: d.scaledMax(), Stream: d.stream}
}

// UpdateGroup (host.GroupUpdatable): the states in device memory that share
// a device and a stream go to their kernels in one call where the kernels
// take a group (a linear layer's forward: the input's and the weight's
// states, one launch instead of two); the others are updated one by one.
// The states are distinct and their buffers their own, so the order does
// not matter. States of another implementation, or one state twice, are
// updated in order one by one.
func (d *delayedState) UpdateGroup(states []host.DelayedScaling, reduced []*float32) error {
	red := func(i int) *float32 {
		if reduced == nil {
			return nil
		}
		return reduced[i]
	}
	own := make([]*delayedState, len(states))
	seen := make(map[*delayedState]bool, len(states))
	each := false
	for i, s := range states {
		if err := checkReduced(red(i), i); err != nil {
			return err
		}
		ds, ok := s.(*delayedState)
		if !ok || seen[ds] {
			each = true
		}
		own[i], seen[ds] = ds, true
	}
	if each {
		for i, s := range states {
			if err := s.Update(red(i)); err != nil {
				return err
			}
		}
		return nil
	}
	// Every state's lock, in one order (their addresses) whatever the
	// caller's, for the whole update.
	locked := append([]*delayedState(nil), own...)
	sort.Slice(locked, func(i, j int) bool { return uintptr(unsafe.Pointer(locked[i])) < uintptr(unsafe.Pointer(locked[j])) })
	for _, ds := range locked {
		ds.mu.Lock()
	}
	defer func() {
		for _, ds := range locked {
			ds.mu.Unlock()
		}
	}()
	type where struct {
		dev    host.Device
		stream uintptr
	}
	var order []where
	groups := map[where][]int{}
	for i, ds := range own {
		if !ds.onDev {
			if err := ds.updateLocked(red(i)); err != nil {
				return err
			}
			continue
		}
		w := where{ds.devScale.Device, ds.stream}
		if _, ok := groups[w]; !ok {
			order = append(order, w)
		}
		groups[w] = append(groups[w], i)
	}
	for _, w := range order {
		idx := groups[w]
		if len(idx) > 1 {
			k, err := host.KernelsFor(Name, w.dev)
			if err != nil {
				return err
			}
			if g, ok := k.(host.DelayedGroupUpdater); ok {
				rs := make([]host.DelayedUpdateRequest, len(idx))
				for j, i := range idx {
					rs[j] = own[i].deviceUpdate(red(i))
				}
				handled, err := g.DelayedUpdateGrouped(rs)
				if err != nil {
					return err
				}
				if handled {
					continue
				}
			}
		}
		for _, i := range idx {
			if err := own[i].updateLocked(red(i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *delayedState) updateLocked(reduced *float32) error {
	if d.onDev {
		k, err := host.KernelsFor(Name, d.devScale.Device)
		if err != nil {
			return err
		}
		u, ok := k.(host.DelayedUpdater)
		if !ok {
			return host.Errorf(host.ErrUnsupported, "delayed scaling: the kernels of %s on %s cannot update a state there", Name, d.devScale.Device)
		}
		r := d.deviceUpdate(reduced)
		return u.DelayedUpdate(&r)
	}
	h := d.history.Float32s()
	n := len(h)
	a0 := h[0]
	if reduced != nil && *reduced != 0 {
		a0 = *reduced
	}
	var amax float32
	if a0 != 0 {
		for i := 0; i < n; i++ {
			a := a0
			if i < n-1 {
				a = h[i+1]
			}
			if i > 0 {
				h[i] = a
			} else {
				h[0] = 0
			}
			if a > amax { // fmaxf: a NaN entry is ignored
				amax = a
			}
		}
		if d.p.AmaxAlgo == host.AmaxMostRecent {
			amax = a0
		}
	}
	scaledMax := d.scaledMax()
	s := &d.scale.Float32s()[0]
	scale := *s
	if !math.IsInf(float64(amax), 0) && amax > 0 {
		scale = scaledMax / amax
	}
	if math.IsInf(float64(scale), 0) {
		scale = math.MaxFloat32
	}
	*s = scale
	return nil
}

// tensorKernels are the CPU kernels of per-tensor FP8.
type tensorKernels struct{}

func (tensorKernels) Amax(r *host.AmaxRequest) error {
	return host.TensorAmaxCPU(r)
}

// Quantize casts with one scale for both directions: q = RNE_sat(fl32(x·scale)),
// scale_inv = 1/scale at cast time (spec §2.3, §3.2).
func (tensorKernels) Quantize(r *host.QuantizeRequest) error {
	s := r.Spec.(*TensorSpec)
	var scale, amax float32
	switch st := r.State.(type) {
	case *delayedState:
		st.mu.Lock()
		err := st.toCPULocked()
		st.mu.Unlock()
		if err != nil {
			return err
		}
		scale = st.currentScale()
		amax = host.AmaxCPU(r.Input)
		st.record(amax)
	default:
		slot := 0
		if r.Out[host.DirRowwise] == nil {
			slot = 1
		}
		if r.AmaxIn != nil {
			amax = r.AmaxIn.Float32s()[slot]
		} else {
			amax = host.AmaxCPU(r.Input)
		}
		scale = ScaleFromAmax(amax, s.codec.max, s.p.ForcePow2Scales, s.p.AmaxEpsilon, math.MaxFloat32)
	}
	scaleInv := Reciprocal(scale)
	var row, col []byte
	for d, st := range r.Out {
		if st == nil {
			continue
		}
		st.MustBuffer(host.BufScaleInv).Float32s()[0] = scaleInv
		st.MustBuffer(host.BufAmax).Float32s()[0] = amax
		if d == int(host.DirRowwise) {
			row = st.MustBuffer(host.BufData).Bytes8()
		} else {
			col = st.MustBuffer(host.BufData).Bytes8()
		}
	}
	castTiles(r.Input, r.M, r.K, scale, s.codec.encode, row, col)
	return nil
}

// tile is the edge of the square tiles the cast walks, so that the transposed
// writes of a tile stay in cache.
const tile = 64

// lutMinElements is the tensor size from which a 16-bit input is cast through a
// 64K-entry table: building it costs 65536 encodes, repaid many times over.
const lutMinElements = 1 << 18

// castLUT maps every BF16 or FP16 bit pattern h to encode(fl32(float(h)·scale)):
// the cast of a 16-bit input depends on nothing else, so the table is exact by
// construction.
func castLUT(dt host.DType, scale float32, encode func(float32) uint8) *[1 << 16]byte {
	lut := new([1 << 16]byte)
	const chunk = 1 << 12
	parallel.For(1<<16, chunk, func(lo, hi int) {
		var x [chunk]float32
		var h [chunk]uint16
		for c := lo; c < hi; c += chunk {
			for i := range h {
				h[i] = uint16(c + i)
			}
			host.LoadFloat32(host.Tensor{Ptr: unsafe.Pointer(&h[0]), DType: dt, Shape: []int64{chunk}}, 0, x[:])
			for i, v := range x {
				lut[c+i] = encode(float32(v * scale))
			}
		}
	})
	return lut
}

// castTiles writes q = encode(fl32(x·scale)) into row ([m,k]) and/or col (its
// transpose [k,m]), parallel over row bands of one tile.
func castTiles(in host.Tensor, m, k int64, scale float32, encode func(float32) uint8, row, col []byte) {
	var lut *[1 << 16]byte
	var src16 []uint16
	if in.DType != host.Float32 && m*k >= lutMinElements {
		lut = castLUT(in.DType, scale, encode)
		src16 = in.Uint16s()
	}
	if col == nil && lut != nil {
		// Rowwise only: a straight pass, no tiles needed.
		parallel.For(int(m*k), 1<<16, func(lo, hi int) {
			dst, src := row[lo:hi], src16[lo:hi]
			for j := range dst {
				dst[j] = lut[src[j]]
			}
		})
		return
	}
	bands := int((m + tile - 1) / tile)
	parallel.For(bands, 1, func(lo, hi int) {
		var buf [tile]float32
		var q [tile * tile]byte
		for b := lo; b < hi; b++ {
			r0 := int64(b) * tile
			rows := min(tile, m-r0)
			for c0 := int64(0); c0 < k; c0 += tile {
				cols := min(tile, k-c0)
				for i := int64(0); i < rows; i++ {
					qq := q[i*tile : i*tile+cols]
					if lut != nil {
						for j, h := range src16[(r0+i)*k+c0 : (r0+i)*k+c0+cols] {
							qq[j] = lut[h]
						}
					} else {
						x := buf[:cols]
						host.LoadFloat32(in, (r0+i)*k+c0, x)
						for j, v := range x {
							qq[j] = encode(float32(v * scale))
						}
					}
					if row != nil {
						copy(row[(r0+i)*k+c0:], qq)
					}
				}
				if col != nil {
					transpose.Bytes(col[c0*m+r0:], int(m), q[:], tile, int(rows), int(cols))
				}
			}
		}
	})
}

// Dequantize: x = fl32(decode(q)·scale_inv), then rounded to the output dtype.
func (tensorKernels) Dequantize(r *host.DequantizeRequest) error {
	s := r.Spec.(*TensorSpec)
	data := r.Storage.MustBuffer(host.BufData).Bytes8()
	scaleInv := r.Storage.MustBuffer(host.BufScaleInv).Float32s()[0]
	table := s.codec.table
	m, k := r.M, r.K
	parallel.For(int(m), 16, func(lo, hi int) {
		row := make([]float32, k)
		for i := int64(lo); i < int64(hi); i++ {
			if r.Dir == host.DirRowwise {
				for j, c := range data[i*k : (i+1)*k] {
					row[j] = float32(table[c] * scaleInv)
				}
			} else {
				for j := int64(0); j < k; j++ {
					row[j] = float32(table[data[j*m+i]] * scaleInv)
				}
			}
			host.StoreFloat32(r.Out, i*k, row)
		}
	})
	return nil
}

// Derive builds the columnwise transpose from rowwise data (exact: the scale is shared).
func (tensorKernels) Derive(r *host.DeriveRequest) error {
	if r.FromDir != host.DirRowwise || r.ToDir != host.DirColumnwise {
		return host.Errorf(host.ErrState, "fp8: %s data cannot be derived from %s data", r.ToDir, r.FromDir)
	}
	src := r.From.MustBuffer(host.BufData).Bytes8()
	dst := r.To.MustBuffer(host.BufData).Bytes8()
	transposeBytes(src, dst, r.M, r.K)
	copy(r.To.MustBuffer(host.BufScaleInv).Bytes8(), r.From.MustBuffer(host.BufScaleInv).Bytes8())
	copy(r.To.MustBuffer(host.BufAmax).Bytes8(), r.From.MustBuffer(host.BufAmax).Bytes8())
	return nil
}

// transposeBytes writes dst[j*m+i] = src[i*k+j], one band of tile rows per
// work item.
func transposeBytes(src, dst []byte, m, k int64) {
	bands := int((m + tile - 1) / tile)
	parallel.For(bands, 1, func(lo, hi int) {
		for b := lo; b < hi; b++ {
			r0 := int64(b) * tile
			transpose.Bytes(dst[r0:], int(m), src[r0*k:], int(k), int(min(tile, m-r0)), int(k))
		}
	})
}

// TensorScale is the per-tensor scale_inv: the GEMM folds it into alpha.
func (tensorKernels) TensorScale(st *host.Storage, _ host.Direction) float32 {
	return st.MustBuffer(host.BufScaleInv).Float32s()[0]
}

// DequantizeTile writes decoded FP8 values (exact) of a logical tile; rowwise
// data is [m, k], columnwise the transpose [k, m].
func (tensorKernels) DequantizeTile(st *host.Storage, dir host.Direction, m, k, r0, r1, c0, c1 int64, dst []float32, ld int, transposed bool) {
	s := st.Spec.(*TensorSpec)
	table := s.codec.table
	data := st.MustBuffer(host.BufData).Bytes8()
	for r := r0; r < r1; r++ {
		for c := c0; c < c1; c++ {
			var code byte
			if dir == host.DirRowwise {
				code = data[r*k+c]
			} else {
				code = data[c*m+r]
			}
			if transposed {
				dst[int(c-c0)*ld+int(r-r0)] = table[code]
			} else {
				dst[int(r-r0)*ld+int(c-c0)] = table[code]
			}
		}
	}
}

var _ host.TileDequantizer = tensorKernels{}
