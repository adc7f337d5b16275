package native

/*
#cgo CFLAGS: -I${SRCDIR}/../include
#include <stdlib.h>
#include <string.h>
#include "quant_plugin.h"
*/
import "C"

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"libquant/host"
)

// ABIVersion is the native plugin ABI this host speaks (include/quant_plugin.h).
const ABIVersion = uint32(C.QUANT_PLUGIN_ABI_VERSION)

// MinABIVersion is the oldest plugin ABI this host still loads.
const MinABIVersion = uint32(C.QUANT_PLUGIN_ABI_MIN_VERSION)

// PathEnv lists plugins to load at start, separated like PATH: each entry
// is a plugin file, or a folder whose libquant_*.so files are loaded, and
// whose ExecPattern files go to LoadDefault's other (executable plugins).
const PathEnv = "LIBQUANT_PLUGIN_PATH"

// ExecPattern names the files of a LIBQUANT_PLUGIN_PATH folder that are
// offered as executable plugins (quant.h: only those an ELF check recognises
// and LIBQUANT_PLUGIN_MANIFEST lists are run).
const ExecPattern = "libquant-plugin-*"

// Origin says how a plugin came to be loaded.
type Origin int32

const (
	Explicit Origin = 0 // quant_plugin_load / Load
	Env      Origin = 1 // LIBQUANT_PLUGIN_PATH
	Auto     Origin = 2 // libquant_cuda.so next to libquant.so
)

func (o Origin) String() string {
	switch o {
	case Explicit:
		return "explicit"
	case Env:
		return PathEnv
	case Auto:
		return "automatic"
	}
	return fmt.Sprintf("origin(%d)", int32(o))
}

// Ops are the operations a plugin kernel set provides.
type Ops uint32

const (
	OpAmax          Ops = 1
	OpQuantize      Ops = 2
	OpDequantize    Ops = 4
	OpDerive        Ops = 8
	OpSwizzleScales Ops = 16
	OpGEMM          Ops = 32
)

// KernelInfo describes one kernel set of a plugin.
type KernelInfo struct {
	Format        string
	Device        host.DeviceType
	Ops           Ops
	DefinesFormat bool // the plugin defines this format itself
}

// Info describes a plugin load: a loaded plugin (Err nil) or a failed
// automatic or LIBQUANT_PLUGIN_PATH load, kept so that the reason can be read
// later.
type Info struct {
	Path       string
	Name       string // empty when the plugin failed before saying
	Version    string
	ABIVersion uint32 // 0 when unknown
	Origin     Origin
	Err        error
	Formats    []string // formats it defines
	Kernels    []KernelInfo
	Memory     []host.DeviceType // device types whose memory it manages
	Skipped    []string          // kernel sets left out, and why
}

// plugin is a loaded plugin: its table lives in C memory forever (a
// plugin is never unloaded, so the pointers in it stay valid).
type plugin struct {
	info   Info
	real   string // resolved path, to load each file once
	digest string // SHA-256 (lower-case hex) of the file when it was loaded
	handle uintptr
	table  *C.quant_plugin_table
}

var plugins = struct {
	sync.Mutex
	list []*plugin
	// searched notes where automatic loading looked, for device-unavailable messages.
	searched []string
}{}

// Plugins lists every loaded plugin and every failed automatic or
// LIBQUANT_PLUGIN_PATH load, in load order.
func Plugins() []Info {
	plugins.Lock()
	defer plugins.Unlock()
	out := make([]Info, len(plugins.list))
	for i, p := range plugins.list {
		out[i] = p.info
	}
	return out
}

// Load loads a native plugin and registers its formats, kernels and
// allocators. Loading a file that is already loaded returns its info again.
// On failure nothing is registered, the host keeps working, and the error (of
// kind ErrPlugin) says why; failures of automatic and LIBQUANT_PLUGIN_PATH
// loads are also kept in Plugins().
func Load(path string, origin Origin) (Info, error) {
	return LoadDigest(path, origin, "")
}

// LoadDigest is Load with the file's expected SHA-256 (64 hex digits; ""
// checks nothing). A file not loaded yet is refused unless its digest
// matches; a file already loaded is compared by the digest it had when it was
// loaded (the code that runs), not by what the file holds now, and refused
// when that differs.
func LoadDigest(path string, origin Origin, sha string) (Info, error) {
	plugins.Lock()
	defer plugins.Unlock()
	return loadLocked(path, origin, strings.ToLower(strings.TrimSpace(sha)))
}

func loadLocked(path string, origin Origin, want string) (Info, error) {
	if path == "" {
		return Info{}, host.Errorf(host.ErrInvalidArgument, "path: is empty")
	}
	if want != "" {
		if b, err := hex.DecodeString(want); err != nil || len(b) != sha256.Size {
			return Info{}, loadErr(path, "expected SHA-256 %q is not 64 hex digits", want)
		}
	}
	real := path
	if abs, err := filepath.Abs(path); err == nil {
		real = abs
	}
	if r, err := filepath.EvalSymlinks(real); err == nil {
		real = r
	}
	for _, p := range plugins.list {
		if p.real == real && p.info.Err == nil {
			if want != "" && want != p.digest {
				return p.info, loadErr(path, "refused: it is already loaded from a file whose SHA-256 was %s, but %s was expected (a loaded native plugin cannot be replaced; restart the process)", p.digest, want)
			}
			return p.info, nil
		}
	}
	p := &plugin{info: Info{Path: path, Origin: origin}, real: real}
	err := p.load(want)
	if err != nil {
		p.info.Err = err
		if origin != Explicit {
			plugins.list = append(plugins.list, p)
		}
		return p.info, err
	}
	plugins.list = append(plugins.list, p)
	return p.info, nil
}

// loadErr builds an ErrPlugin error about a plugin file.
func loadErr(path, format string, args ...any) error {
	return host.Errorf(host.ErrPlugin, "plugin %q: %s", path, fmt.Sprintf(format, args...))
}

func (p *plugin) load(want string) error {
	path := p.info.Path
	if st, err := os.Stat(path); err != nil {
		return loadErr(path, "cannot open: %v", unwrapPathError(err))
	} else if st.IsDir() {
		return loadErr(path, "is a folder, not a shared library")
	}
	sum, err := fileDigest(path)
	if err != nil {
		return loadErr(path, "reading it: %v", unwrapPathError(err))
	}
	if want != "" && sum != want {
		return loadErr(path, "refused: its SHA-256 is %s, but %s was expected", sum, want)
	}
	p.digest = sum
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return loadErr(path, "dlopen failed: %v", err)
	}
	p.handle = h
	entry, err := purego.Dlsym(h, pluginEntry)
	if err != nil || entry == 0 {
		return loadErr(path, "not a libquant plugin: it does not export %s", pluginEntry)
	}
	table := (*C.quant_plugin_table)(C.calloc(1, C.sizeof_quant_plugin_table))
	perr := (*C.quant_plugin_error)(C.calloc(1, C.sizeof_quant_plugin_error))
	if table == nil || perr == nil {
		C.free(unsafe.Pointer(table))
		C.free(unsafe.Pointer(perr))
		return host.Errorf(host.ErrOutOfMemory, "plugin %q: allocating its table", path)
	}
	defer C.free(unsafe.Pointer(perr))
	get := func(v uint32) int32 {
		C.memset(unsafe.Pointer(table), 0, C.sizeof_quant_plugin_table)
		*perr = C.quant_plugin_error{}
		table.struct_size = C.uint32_t(C.sizeof_quant_plugin_table)
		r1, _, _ := purego.SyscallN(entry, uintptr(v), uintptr(unsafe.Pointer(table)), uintptr(unsafe.Pointer(perr)))
		return int32(r1)
	}
	status := get(ABIVersion)
	// A plugin built for an older ABI that compares versions for equality
	// says its version and fails: it is asked again in its own version
	// (quant_plugin.h, "Versions").
	if v := uint32(table.abi_version); status != 0 && v >= MinABIVersion && v < ABIVersion {
		status = get(v)
	}
	p.info.ABIVersion = uint32(table.abi_version)
	// The version is checked before anything else in the table is read: a
	// plugin of another ABI may lay the rest out differently.
	switch {
	case table.abi_version == 0:
		C.free(unsafe.Pointer(table))
		return loadErr(path, "did not report its plugin ABI version (status %d: %s)", status, errMessage(perr))
	case uint32(table.abi_version) < MinABIVersion || uint32(table.abi_version) > ABIVersion:
		v := table.abi_version
		C.free(unsafe.Pointer(table))
		return loadErr(path, "was built for plugin ABI version %d, but this libquant speaks versions %d to %d: rebuild the plugin against this libquant's quant_plugin.h", v, MinABIVersion, ABIVersion)
	case status != 0:
		C.free(unsafe.Pointer(table))
		return loadErr(path, "%s failed (status %d): %s", pluginEntry, status, errMessage(perr))
	}
	p.table = table
	if err := p.validate(); err != nil {
		return err
	}
	return p.register()
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func errMessage(e *C.quant_plugin_error) string {
	e.message[len(e.message)-1] = 0
	s := C.GoString(&e.message[0])
	if s == "" {
		return "(no message)"
	}
	return s
}

// maxTableEntries bounds the table's counts, so that garbage is caught.
const maxTableEntries = 4096

func (p *plugin) formats() []C.quant_plugin_format {
	if p.table.num_formats == 0 {
		return nil
	}
	return unsafe.Slice(p.table.formats, int(p.table.num_formats))
}

func (p *plugin) kernels() []C.quant_plugin_kernels {
	if p.table.num_kernels == 0 {
		return nil
	}
	return unsafe.Slice(p.table.kernels, int(p.table.num_kernels))
}

func (p *plugin) memories() []C.quant_plugin_memory {
	if p.table.num_memory == 0 {
		return nil
	}
	return unsafe.Slice(p.table.memory, int(p.table.num_memory))
}

// validate checks the table before anything is registered, so that a bad
// plugin leaves the host as it was.
func (p *plugin) validate() error {
	t := p.table
	path := p.info.Path
	if t.name == nil || C.GoString(t.name) == "" {
		return loadErr(path, "its table has no name")
	}
	p.info.Name = C.GoString(t.name)
	if t.version != nil {
		p.info.Version = C.GoString(t.version)
	}
	name := p.info.Name
	for _, c := range []struct {
		what string
		n    C.uint32_t
		ptr  unsafe.Pointer
	}{
		{"formats", t.num_formats, unsafe.Pointer(t.formats)},
		{"kernels", t.num_kernels, unsafe.Pointer(t.kernels)},
		{"memory", t.num_memory, unsafe.Pointer(t.memory)},
	} {
		if c.n > maxTableEntries {
			return loadErr(path, "plugin %s: num_%s %d is implausible", name, c.what, c.n)
		}
		if c.n > 0 && c.ptr == nil {
			return loadErr(path, "plugin %s: num_%s is %d but %s is NULL", name, c.what, c.n, c.what)
		}
	}
	defined := map[string]bool{}
	for i, f := range p.formats() {
		if f.name == nil || C.GoString(f.name) == "" {
			return loadErr(path, "plugin %s: formats[%d] has no name", name, i)
		}
		fn := C.GoString(f.name)
		if len(fn) >= C.QUANT_PLUGIN_FORMAT_LEN {
			return loadErr(path, "plugin %s: format name %q is longer than %d bytes", name, fn, C.QUANT_PLUGIN_FORMAT_LEN-1)
		}
		if f.layout == nil {
			return loadErr(path, "plugin %s: format %q has no layout function", name, fn)
		}
		if defined[fn] {
			return loadErr(path, "plugin %s: defines format %q twice", name, fn)
		}
		if _, err := host.LookupFormat(fn); err == nil {
			return loadErr(path, "plugin %s: defines format %q, which is already registered", name, fn)
		}
		defined[fn] = true
		p.info.Formats = append(p.info.Formats, fn)
	}
	type kernelKey struct {
		format string
		dev    host.DeviceType
	}
	gemmDev := map[host.DeviceType]bool{}
	if p.info.ABIVersion >= 2 {
		if p.table.num_gemm > maxTableEntries || (p.table.num_gemm > 0 && p.table.gemm == nil) {
			return loadErr(path, "plugin %s: num_gemm %d with gemm %p is not a table", name, p.table.num_gemm, p.table.gemm)
		}
		for i, g := range p.gemms() {
			dev := host.DeviceType(g.device_type)
			switch {
			case dev != host.CUDA:
				return loadErr(path, "plugin %s: gemm[%d] is for device type %d; plugins provide GEMMs for cuda only", name, i, g.device_type)
			case g.gemm == nil || g.support == nil:
				return loadErr(path, "plugin %s: gemm[%d] (%s) lacks gemm or support", name, i, dev)
			case gemmDev[dev]:
				return loadErr(path, "plugin %s: two gemm tables for %s", name, dev)
			}
			gemmDev[dev] = true
		}
	}
	seen := map[kernelKey]bool{}
	for i, k := range p.kernels() {
		if k.format == nil {
			return loadErr(path, "plugin %s: kernels[%d] has no format", name, i)
		}
		fn := C.GoString(k.format)
		dev := host.DeviceType(k.device_type)
		if dev != host.CPU && dev != host.CUDA {
			return loadErr(path, "plugin %s: kernels[%d] (%s) are for device type %d, which libquant does not know", name, i, fn, k.device_type)
		}
		if k.quantize == nil {
			return loadErr(path, "plugin %s: kernels[%d] (%s on %s) have no quantize function", name, i, fn, dev)
		}
		if _, err := host.LookupFormat(fn); err != nil && !defined[fn] {
			// A plugin may serve formats this build lacks (a newer plugin, a
			// host built without a format): those kernels are left out, not fatal.
			p.info.Skipped = append(p.info.Skipped, fmt.Sprintf("kernels for format %q on %s: the format is not registered", fn, dev))
			continue
		}
		key := kernelKey{fn, dev}
		if seen[key] {
			return loadErr(path, "plugin %s: two kernel sets for format %q on %s", name, fn, dev)
		}
		seen[key] = true
		var ops Ops
		for _, o := range []struct {
			set bool
			op  Ops
		}{{k.amax != nil, OpAmax}, {k.quantize != nil, OpQuantize}, {k.dequantize != nil, OpDequantize},
			{k.derive != nil, OpDerive}, {k.swizzle_scales != nil, OpSwizzleScales}, {gemmDev[dev], OpGEMM}} {
			if o.set {
				ops |= o.op
			}
		}
		p.info.Kernels = append(p.info.Kernels, KernelInfo{Format: fn, Device: dev, Ops: ops, DefinesFormat: defined[fn]})
	}
	memSeen := map[host.DeviceType]bool{}
	for i, m := range p.memories() {
		dev := host.DeviceType(m.device_type)
		switch {
		case dev == host.CPU:
			return loadErr(path, "plugin %s: memory[%d] is for the cpu, whose memory libquant manages itself", name, i)
		case dev != host.CUDA:
			return loadErr(path, "plugin %s: memory[%d] is for device type %d, which libquant does not know", name, i, m.device_type)
		case m.alloc == nil || m.free == nil || m.copy == nil || m.memset == nil || m.synchronize == nil || m.device_count == nil:
			return loadErr(path, "plugin %s: memory[%d] (%s) lacks one of device_count, alloc, free, copy, memset, synchronize", name, i, dev)
		case memSeen[dev]:
			return loadErr(path, "plugin %s: two memory tables for %s", name, dev)
		}
		memSeen[dev] = true
		p.info.Memory = append(p.info.Memory, dev)
	}
	return nil
}

// register makes the plugin's formats, kernels and memory available.
func (p *plugin) register() error {
	for i := range p.formats() {
		f := &p.formats()[i]
		if err := host.RegisterFormat(&format{plugin: p, f: f, name: C.GoString(f.name)}); err != nil {
			return loadErr(p.info.Path, "plugin %s: %v", p.info.Name, err)
		}
	}
	for i := range p.memories() {
		m := &p.memories()[i]
		host.RegisterAllocator(host.DeviceType(m.device_type), &memory{plugin: p, m: m})
	}
	for i := range p.kernels() {
		k := &p.kernels()[i]
		if _, err := host.LookupFormat(C.GoString(k.format)); err != nil {
			continue // skipped in validate
		}
		var kern host.Kernels = &kernels{plugin: p, k: k}
		if k.swizzle_scales != nil {
			kern = &swizzlingKernels{kernels{plugin: p, k: k}}
		}
		host.RegisterKernels(C.GoString(k.format), host.DeviceType(k.device_type), kern)
	}
	p.registerGemm()
	return nil
}

// LoadDefault loads the plugins of LIBQUANT_PLUGIN_PATH, then
// libquant_cuda.so from libDir (the folder of libquant.so; "" skips it) unless
// LIBQUANT_PLUGIN_AUTOLOAD=0. Entries for which other (may be nil) returns
// true were handled by another loader (executable plugins, rpc) and are
// skipped; the ExecPattern files of a folder entry are offered to other only,
// and those it does not take are skipped (noted in report). Failures are kept in Plugins(), never returned: the host keeps
// working without the plugin.
func LoadDefault(libDir string, other func(entry string) bool) {
	plugins.Lock()
	defer plugins.Unlock()
	for _, entry := range filepath.SplitList(os.Getenv(PathEnv)) {
		if entry == "" || (other != nil && other(entry)) {
			continue
		}
		st, err := os.Stat(entry)
		if err == nil && st.IsDir() {
			files, _ := filepath.Glob(filepath.Join(entry, "libquant_*.so"))
			for _, f := range files {
				_, _ = loadLocked(f, Env, "")
			}
			// Executable plugins are found by their own pattern and go only
			// to other (which runs one only with a digest from the
			// manifest); a matching file other does not take is skipped,
			// never dlopened.
			execs, _ := filepath.Glob(filepath.Join(entry, ExecPattern))
			var skipped []string
			for _, f := range execs {
				if other == nil || !other(f) {
					skipped = append(skipped, filepath.Base(f))
				}
			}
			note := fmt.Sprintf("%s folder %s (%d libquant_*.so files, %d %s files)", PathEnv, entry, len(files), len(execs), ExecPattern)
			if len(skipped) > 0 {
				note += fmt.Sprintf("; skipped %s: not executable plugins", strings.Join(skipped, ", "))
			}
			plugins.searched = append(plugins.searched, note)
			continue
		}
		_, _ = loadLocked(entry, Env, "")
	}
	if libDir == "" {
		return
	}
	if os.Getenv("LIBQUANT_PLUGIN_AUTOLOAD") == "0" {
		plugins.searched = append(plugins.searched, "automatic loading is off (LIBQUANT_PLUGIN_AUTOLOAD=0)")
		return
	}
	cuda := filepath.Join(libDir, "libquant_cuda.so")
	if _, err := os.Stat(cuda); err != nil {
		plugins.searched = append(plugins.searched, cuda+" does not exist")
		return
	}
	_, _ = loadLocked(cuda, Auto, "")
}

func init() { host.RegisterPluginReport(report) }

// report says what plugin loading did, for host's device-unavailable messages
// ("" when nothing was loaded or searched: host then says that no plugin is).
func report() string {
	plugins.Lock()
	defer plugins.Unlock()
	var parts []string
	for _, p := range plugins.list {
		if p.info.Err != nil {
			parts = append(parts, p.info.Err.Error())
		} else {
			parts = append(parts, fmt.Sprintf("plugin %s loaded from %s", p.info.Name, p.info.Path))
		}
	}
	parts = append(parts, plugins.searched...)
	return strings.Join(parts, "; ")
}

// pluginEntry is QUANT_PLUGIN_ENTRY, the symbol every plugin exports.
const pluginEntry = "quant_plugin_get"

// fileDigest is the hex SHA-256 of a file.
func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
