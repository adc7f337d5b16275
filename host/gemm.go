package host

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"unsafe"
)

// GemmOperand is one operand of a GEMM: a quantized tensor (Q) or a plain
// FP32/BF16/FP16 tensor (Dense), and whether the GEMM uses its transpose.
type GemmOperand struct {
	Q     *QTensor
	Dense *Tensor
	Trans bool
}

// GemmArgs is one GEMM, row-major:
//
//	D = Alpha·op(A)·op(B) + Beta·C + bias   (+ D's previous contents when Accumulate)
//
// op(X) is X or Xᵀ of X's 2-D view [rows, cols] (spec §11.3 flattening); op(A)
// is [M, K], op(B) [K, N], and D and C have the 2-D view [M, N]. Bias, when
// set, has N elements and is added to every row. Products accumulate in FP32;
// D is FP32, BF16 or FP16. C is optional (Beta is used only with C) and may be
// D itself.
type GemmArgs struct {
	A, B       GemmOperand
	Alpha      float32
	Beta       float32
	C          *Tensor
	Bias       *Tensor
	D          Tensor
	Accumulate bool
	Stream     uintptr
	// Exact asks for the exact path (dequantized operands, FP32
	// accumulation) even where the device has a faster kernel with a wider,
	// documented error bound (the fused Hopper GEMM): results bit-stable
	// across GPUs.
	Exact bool
}

// IdentityFormat is the format name of high-precision values: the identity
// plugin's format, and the name a plain (unquantized) GEMM operand goes by in
// the support table.
const IdentityFormat = "identity"

// GemmInput is a GEMM operand resolved for a kernel: the one direction
// storage the GEMM reads (or a dense tensor), the operand's 2-D view
// [Rows, Cols] before op, and Trans.
type GemmInput struct {
	Storage    *Storage // nil for a dense operand
	Dir        Direction
	Dense      Tensor // the operand when Storage is nil
	Rows, Cols int64
	Trans      bool
}

// Format is the operand's format as the support table names it.
func (in *GemmInput) Format() string {
	if in.Storage == nil {
		return IdentityFormat
	}
	return in.Storage.FormatName()
}

// GemmRequest is a validated GEMM handed to a device's kernel: op(A) is
// [M, K], op(B) [K, N]; the other fields are GemmArgs'.
type GemmRequest struct {
	M, N, K     int64
	A, B        GemmInput
	Alpha, Beta float32
	C, Bias     *Tensor
	D           Tensor
	Accumulate  bool
	Stream      uintptr
	Device      Device
	Exact       bool // GemmArgs.Exact
}

// GemmKernel runs GEMMs on one device type. The CPU one is built in; a GPU
// plugin registers its own with RegisterGemmKernel, and the pairs of formats it
// runs with RegisterGemmSupport.
type GemmKernel interface {
	Gemm(r *GemmRequest) error
}

// GemmSupportLevel says how a device multiplies a pair of formats.
type GemmSupportLevel int32

const (
	GemmUnsupported GemmSupportLevel = 0
	GemmEmulated    GemmSupportLevel = 1 // dequantized to a wider type, then multiplied
	GemmNative      GemmSupportLevel = 2 // the hardware multiplies the format directly
)

func (l GemmSupportLevel) String() string {
	switch l {
	case GemmUnsupported:
		return "unsupported"
	case GemmEmulated:
		return "emulated"
	case GemmNative:
		return "native"
	}
	return fmt.Sprintf("level(%d)", int32(l))
}

// GemmSupport is one entry of the capability table: how operands of formats A
// and B (in that order) multiply on a device, and why.
type GemmSupport struct {
	A, B   string
	Level  GemmSupportLevel
	Reason string
}

type gemmPair struct {
	dev  DeviceType
	a, b string
}

var gemmRegistry = struct {
	sync.RWMutex
	kernels map[DeviceType]GemmKernel
	support map[gemmPair]GemmSupport
}{kernels: map[DeviceType]GemmKernel{}, support: map[gemmPair]GemmSupport{}}

// RegisterGemmKernel sets the GEMM kernel of a device type (a loaded plugin
// may replace an earlier one).
func RegisterGemmKernel(dev DeviceType, k GemmKernel) {
	gemmRegistry.Lock()
	gemmRegistry.kernels[dev] = k
	gemmRegistry.Unlock()
}

// RegisterGemmSupport records how the kernel of a device type runs operands of
// formats a × b. Entries override the built-in rule (on the CPU: every pair
// whose formats can be dequantized tile by tile is emulated); on other devices
// only registered pairs run.
func RegisterGemmSupport(dev DeviceType, a, b string, level GemmSupportLevel, reason string) {
	gemmRegistry.Lock()
	gemmRegistry.support[gemmPair{dev, a, b}] = GemmSupport{A: a, B: b, Level: level, Reason: reason}
	gemmRegistry.Unlock()
}

// QueryGemmSupport says how operands of formats a × b multiply on dev. A plain
// tensor operand counts as format "identity".
func QueryGemmSupport(dev Device, a, b string) (GemmSupport, error) {
	for i, name := range []string{a, b} {
		if _, err := LookupFormat(name); err != nil {
			return GemmSupport{}, Errorf(ErrInvalidArgument, "format_%c: %v", 'a'+i, err)
		}
	}
	if dev.Type != CPU && dev.Type != CUDA {
		return GemmSupport{}, Errorf(ErrInvalidArgument, "device: %s is not a device libquant knows (cpu or cuda)", dev.Type)
	}
	return gemmSupport(dev.Type, a, b), nil
}

// GemmSupportTable lists QueryGemmSupport for every ordered pair of registered
// formats on dev, sorted by format names.
func GemmSupportTable(dev Device) ([]GemmSupport, error) {
	if dev.Type != CPU && dev.Type != CUDA {
		return nil, Errorf(ErrInvalidArgument, "device: %s is not a device libquant knows (cpu or cuda)", dev.Type)
	}
	names := FormatNames()
	out := make([]GemmSupport, 0, len(names)*len(names))
	for _, a := range names {
		for _, b := range names {
			out = append(out, gemmSupport(dev.Type, a, b))
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].A != out[j].A {
			return out[i].A < out[j].A
		}
		return out[i].B < out[j].B
	})
	return out, nil
}

func gemmSupport(dev DeviceType, a, b string) GemmSupport {
	gemmRegistry.RLock()
	s, ok := gemmRegistry.support[gemmPair{dev, a, b}]
	_, haveKernel := gemmRegistry.kernels[dev]
	gemmRegistry.RUnlock()
	if ok {
		return s
	}
	s = GemmSupport{A: a, B: b}
	switch {
	case dev == CPU:
		s.Reason = "dequantized tile by tile to FP32, FP32 accumulation"
		for _, f := range []string{a, b} {
			if f == IdentityFormat {
				continue // the CPU GEMM reads high-precision values itself
			}
			if _, err := cpuTileDequantizer(f); errors.Is(err, errNoTileDequantizer) {
				s.Reason = fmt.Sprintf("dequantized to FP32 (%s whole, by its dequantize kernel), FP32 accumulation", f)
			} else if err != nil {
				s.Reason = err.Error()
				return s
			}
		}
		s.Level = GemmEmulated
	case !haveKernel:
		s.Reason = fmt.Sprintf("no GEMM kernel for %s: no loaded GPU plugin provides one", dev)
	default:
		s.Reason = fmt.Sprintf("the loaded %s GEMM kernel does not run %s × %s", dev, a, b)
	}
	return s
}

// cpuTileDequantizer finds a format's CPU tile dequantizer.
func cpuTileDequantizer(format string) (TileDequantizer, error) {
	k, err := kernelsFor(format, Device{Type: CPU})
	if err != nil {
		return nil, err
	}
	td, ok := k.(TileDequantizer)
	if !ok {
		if _, whole := k.(WholeDequantizer); whole {
			return nil, errNoTileDequantizer
		}
		return nil, Errorf(ErrUnsupported, "format %q has no CPU tile dequantizer", format)
	}
	return td, nil
}

// WholeDequantizer marks CPU kernels without a TileDequantizer whose
// Dequantize the CPU GEMM may run on a whole operand instead, into an FP32
// copy it reads tiles from (an out-of-process plugin's kernels, where a round
// trip per tile would cost more than the copy).
type WholeDequantizer interface {
	DequantizesWhole()
}

// errNoTileDequantizer: the format's kernels are a WholeDequantizer.
var errNoTileDequantizer = errors.New("its operands are dequantized whole")

func gemmKernelFor(dev Device) (GemmKernel, bool) {
	gemmRegistry.RLock()
	defer gemmRegistry.RUnlock()
	k, ok := gemmRegistry.kernels[dev.Type]
	return k, ok
}

// Gemm validates a, picks each quantized operand's direction by the
// contraction rule (spec §7.2: op(A) = A contracts A over its last dim →
// rowwise, Aᵀ over its first → columnwise; op(B) = B contracts over its first
// dim → columnwise, Bᵀ → rowwise) and runs the device's kernel.
func Gemm(a *GemmArgs) error {
	if a == nil {
		return Errorf(ErrInvalidArgument, "args: is NULL")
	}
	r := &GemmRequest{Alpha: a.Alpha, Beta: a.Beta, C: a.C, Bias: a.Bias, D: a.D, Accumulate: a.Accumulate, Stream: a.Stream, Exact: a.Exact}
	unlock, err := resolveOperands(a, r)
	if err != nil {
		return err
	}
	defer unlock()
	if err := checkGemmTensors(a, r); err != nil {
		return err
	}
	s := gemmSupport(r.Device.Type, r.A.Format(), r.B.Format())
	k, haveKernel := gemmKernelFor(r.Device)
	if !haveKernel {
		return Errorf(ErrDeviceUnavailable, "gemm of %s × %s on %s: no GEMM kernel for this device: no loaded GPU plugin provides one", r.A.Format(), r.B.Format(), r.Device)
	}
	if s.Level == GemmUnsupported {
		return Errorf(ErrUnsupported, "gemm of %s × %s on %s: %s", r.A.Format(), r.B.Format(), r.Device, s.Reason)
	}
	return k.Gemm(r)
}

// resolveOperands fills r.A, r.B, M, N, K and the device, read-locking the
// quantized operands until unlock is called (once when both are one tensor).
func resolveOperands(a *GemmArgs, r *GemmRequest) (unlock func(), err error) {
	var locked []*QTensor
	unlock = func() {
		for _, t := range locked {
			t.mu.RUnlock()
		}
	}
	defer func() {
		if err != nil {
			unlock()
		}
	}()
	ops := [2]*GemmOperand{&a.A, &a.B}
	ins := [2]*GemmInput{&r.A, &r.B}
	for i, op := range ops {
		name := string(rune('a' + i))
		switch {
		case op.Q == nil && op.Dense == nil:
			return unlock, Errorf(ErrInvalidArgument, "%s: neither a quantized tensor nor a tensor is set", name)
		case op.Q != nil && op.Dense != nil:
			return unlock, Errorf(ErrInvalidArgument, "%s: both a quantized tensor and a tensor are set; pass one", name)
		}
	}
	// Read-lock the quantized operands in address order, so that GEMMs taking
	// two tensors in opposite orders cannot deadlock with writers between them.
	if q0, q1 := a.A.Q, a.B.Q; q0 != nil && q1 != nil && q0 != q1 {
		if uintptr(unsafe.Pointer(q1)) < uintptr(unsafe.Pointer(q0)) {
			q0, q1 = q1, q0
		}
		locked = []*QTensor{q0, q1}
	} else if q0 != nil {
		locked = []*QTensor{q0}
	} else if q1 != nil {
		locked = []*QTensor{q1}
	}
	for _, t := range locked {
		t.mu.RLock()
	}
	var devs [2]Device
	for i, op := range ops {
		name := string(rune('a' + i))
		in := ins[i]
		in.Trans = op.Trans
		switch {
		case op.Dense != nil:
			t := *op.Dense
			if !t.DType.IsHighPrecision() {
				return unlock, Errorf(ErrInvalidArgument, "%s: dtype %s not supported (want float32, bfloat16 or float16, or a quantized tensor)", name, t.DType)
			}
			in.Dense = t
			in.Rows, in.Cols = Flatten2D(t.Shape)
			devs[i] = t.Device
		default:
			t := op.Q
			// Contraction rule: A (op N) and Bᵀ contract over their last dim.
			dir := DirRowwise
			if (i == 0) == op.Trans {
				dir = DirColumnwise
			}
			st := t.dirs[dir]
			if st == nil {
				dim := "last"
				if dir == DirColumnwise {
					dim = "first"
				}
				have := t.usageLocked().String() + " data only"
				if t.usageLocked() == 0 {
					have = "no data"
				}
				return unlock, Errorf(ErrState, "%s: %s needs %s data (the GEMM contracts %s over its %s dim) but the tensor holds %s; quantize it with that usage or update_usage",
					name, opName(name, op.Trans), dir, name, dim, have)
			}
			in.Storage, in.Dir = st, dir
			in.Rows, in.Cols = t.m, t.k
			devs[i] = t.device
		}
	}
	if devs[0] != devs[1] {
		return unlock, Errorf(ErrInvalidArgument, "b: on %s but a is on %s", devs[1], devs[0])
	}
	r.Device = devs[0]
	var ka, kb int64
	r.M, ka = r.A.Rows, r.A.Cols
	if r.A.Trans {
		r.M, ka = ka, r.M
	}
	kb, r.N = r.B.Rows, r.B.Cols
	if r.B.Trans {
		kb, r.N = r.N, kb
	}
	if ka != kb {
		return unlock, Errorf(ErrInvalidArgument, "b: contraction dims differ: %s is [%d, %d] and %s is [%d, %d]",
			opName("a", r.A.Trans), r.M, ka, opName("b", r.B.Trans), kb, r.N)
	}
	r.K = ka
	// A direction stored in the random Hadamard domain (NVFP4's columnwise
	// copy, spec §5.5) is transformed along the dim this GEMM contracts; the
	// transforms cancel only when both operands carry the same one (TE's
	// wgrad, both RHT'd). Anything else would be silently wrong.
	ra, ma := contractionTransform(&r.A)
	rb, mb := contractionTransform(&r.B)
	if ra != rb || ma != mb {
		return unlock, Errorf(ErrUnsupported, "b: the operands' contraction dims are in different domains: a's %s %s data %s, b's %s %s data %s; both need the same random Hadamard transform (quantize them with the same RHT setting) or none",
			r.A.Dir, r.A.Format(), rhtWords(ra, ma), r.B.Dir, r.B.Format(), rhtWords(rb, mb))
	}
	return unlock, nil
}

// HadamardSpec is implemented by specs that can store their columnwise copy
// in the random Hadamard domain (NVFP4, spec §5.5): the 16-point transform
// with the given sign mask, applied along the tensor's first dim, which is the
// dim a GEMM contracts when it reads that copy. Their dequantized values (and
// tiles) are the transformed ones.
type HadamardSpec interface {
	RHT() (on bool, signMask uint16)
}

func contractionTransform(in *GemmInput) (bool, uint16) {
	if in.Storage == nil || in.Dir != DirColumnwise {
		return false, 0
	}
	if h, ok := in.Storage.Spec.(HadamardSpec); ok {
		if on, mask := h.RHT(); on {
			return true, mask
		}
	}
	return false, 0
}

func rhtWords(on bool, mask uint16) string {
	if !on {
		return "untransformed"
	}
	return fmt.Sprintf("RHT-transformed (sign mask %#04x)", mask)
}

func opName(x string, trans bool) string {
	if trans {
		return "op(" + x + ") = " + x + "ᵀ"
	}
	return "op(" + x + ") = " + x
}

// checkGemmTensors validates D, C and bias against the resolved dims.
func checkGemmTensors(a *GemmArgs, r *GemmRequest) error {
	check := func(name string, t Tensor) error {
		if !t.DType.IsHighPrecision() {
			return Errorf(ErrInvalidArgument, "%s: dtype %s not supported (want float32, bfloat16 or float16)", name, t.DType)
		}
		if t.Device != r.Device {
			return Errorf(ErrInvalidArgument, "%s: on %s but the operands are on %s", name, t.Device, r.Device)
		}
		return nil
	}
	if err := check("d", r.D); err != nil {
		return err
	}
	if m, n := Flatten2D(r.D.Shape); m != r.M || n != r.N {
		return Errorf(ErrInvalidArgument, "d: shape %v (2-D view [%d, %d]) is not the product's [M=%d, N=%d]", r.D.Shape, m, n, r.M, r.N)
	}
	if r.C != nil {
		if err := check("c", *r.C); err != nil {
			return err
		}
		if m, n := Flatten2D(r.C.Shape); m != r.M || n != r.N {
			return Errorf(ErrInvalidArgument, "c: shape %v (2-D view [%d, %d]) is not the product's [M=%d, N=%d]", r.C.Shape, m, n, r.M, r.N)
		}
		if Overlaps(*r.C, r.D) && !(r.C.Ptr == r.D.Ptr && r.C.DType == r.D.DType) {
			return Errorf(ErrInvalidArgument, "c: overlaps d without being d itself")
		}
	}
	if r.Bias != nil {
		if err := check("bias", *r.Bias); err != nil {
			return err
		}
		if len(r.Bias.Shape) != 1 || r.Bias.Shape[0] != r.N {
			return Errorf(ErrInvalidArgument, "bias: shape %v is not [N=%d]", r.Bias.Shape, r.N)
		}
		if Overlaps(*r.Bias, r.D) {
			return Errorf(ErrInvalidArgument, "bias: overlaps d")
		}
	}
	for i, in := range []*GemmInput{&r.A, &r.B} {
		name := string(rune('a' + i))
		if in.Storage == nil {
			if Overlaps(in.Dense, r.D) {
				return Errorf(ErrInvalidArgument, "d: overlaps operand %s", name)
			}
			continue
		}
		for _, b := range in.Storage.Buffers {
			if Overlaps(b.Tensor, r.D) {
				return Errorf(ErrInvalidArgument, "d: overlaps the %s %s buffer of operand %s", in.Dir, b.Kind, name)
			}
		}
	}
	return nil
}
