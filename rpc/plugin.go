package rpc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"libquant/host"
	"libquant/pluginsdk/wire"
)

// Defaults of Options.
const (
	DefaultCallTimeout = 60 * time.Second
	DefaultArenaBytes  = 16 << 30 // virtual: memfd pages exist once touched
)

// Options of one load.
type Options struct {
	// SHA256 is the plugin file's expected digest (64 hex digits). Empty: the
	// LIBQUANT_PLUGIN_MANIFEST line for the file; a plugin listed in neither is
	// refused.
	SHA256 string
	// CallTimeout bounds every call into the plugin; a call past it stops the
	// plugin. 0 means DefaultCallTimeout.
	CallTimeout time.Duration
	// ArenaBytes is the size of the shared arena, which bounds the bytes of
	// the calls in flight at once. 0 means DefaultArenaBytes.
	ArenaBytes int64
	Origin     Origin
	// Manifest is the manifest file to look the digest up in; empty means
	// the LIBQUANT_PLUGIN_MANIFEST variable (capi reads it with C's getenv,
	// which sees what a C caller setenv()s after Go started).
	Manifest string
}

// Origin says how a plugin came to be loaded (quant.h's quant_plugin_origin).
type Origin int32

const (
	Explicit Origin = 0 // quant_plugin_load
	Env      Origin = 1 // LIBQUANT_PLUGIN_PATH
)

// Info describes an executable plugin: loaded, stopped, or failed to load.
type Info struct {
	Path     string
	Name     string
	Version  string
	Protocol int // the handshake version it speaks (0 if unknown)
	Origin   Origin
	Formats  []string
	Pid      int
	// Err is why it failed to load, or why it stopped (crashed, hung, exited,
	// Shutdown); nil while it runs.
	Err error
}

// plugin is one started plugin process.
type plugin struct {
	info Info
	real string
	opts Options
	// digest is the SHA-256 (lower-case hex) the binary was checked against
	// when it started: the digest of the file that runs.
	digest string
	cmd    *exec.Cmd
	gp     *goplugin.Client
	conn   *grpc.ClientConn
	arena  []byte
	file   *os.File // the memfd
	alloc  *allocator
	// watchdog is the write end of the pipe the child watches; the kernel
	// closes it when this process ends, however it ends.
	watchdog *os.File
	stderr   *tail

	mu   sync.Mutex
	dead error
	live int // storage buffers in the arena (kernels.AllocBuffer)
	// finished: the process is stopped; the arena goes once live is 0.
	finished bool
	calls    sync.WaitGroup
}

var loaded = struct {
	sync.Mutex
	list []*plugin // every load, in order; failed ones keep their error
}{}

func init() { host.RegisterPluginReport(report) }

// report says what executable plugins were loaded, for host's
// device-unavailable messages: they serve CPU tensors only.
func report() string {
	var parts []string
	for _, i := range Plugins() {
		if i.Err != nil {
			parts = append(parts, i.Err.Error())
			continue
		}
		parts = append(parts, fmt.Sprintf("executable plugin %s from %s runs formats %s out of process, on CPU tensors only",
			i.Name, i.Path, strings.Join(i.Formats, ", ")))
	}
	return strings.Join(parts, "; ")
}

// Plugins lists every executable plugin load, in order.
func Plugins() []Info {
	loaded.Lock()
	defer loaded.Unlock()
	out := make([]Info, len(loaded.list))
	for i, p := range loaded.list {
		out[i] = p.snapshot()
	}
	return out
}

func (p *plugin) snapshot() Info {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := p.info
	i.Err = p.dead
	return i
}

func pluginErr(path, format string, args ...any) error {
	return host.Errorf(host.ErrPlugin, "plugin %q: %s", path, fmt.Sprintf(format, args...))
}

// Load starts the executable plugin at path and registers its formats (CPU
// kernels). A plugin already running from the same file is returned as is,
// unless opts.SHA256 names a digest other than the one its binary was checked
// against when it started (refused, ErrPlugin); a stopped one is started
// again and takes its formats back.
func Load(path string, opts Options) (Info, error) {
	if path == "" {
		return Info{}, host.Errorf(host.ErrInvalidArgument, "path: is empty")
	}
	if opts.CallTimeout < 0 || opts.ArenaBytes < 0 {
		return Info{}, host.Errorf(host.ErrInvalidArgument, "options: negative call timeout or arena size")
	}
	if opts.CallTimeout == 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.ArenaBytes == 0 {
		opts.ArenaBytes = DefaultArenaBytes
	}
	loaded.Lock()
	defer loaded.Unlock()
	real := realPath(path)
	for _, q := range loaded.list {
		if q.real == real && q.snapshot().Err == nil && q.gp != nil {
			if err := q.sameDigest(opts.SHA256); err != nil {
				return q.snapshot(), err
			}
			return q.snapshot(), nil
		}
	}
	p := &plugin{info: Info{Path: path, Origin: opts.Origin}, real: real, opts: opts, stderr: &tail{}}
	err := p.start()
	if err == nil {
		err = register(p)
	}
	if err != nil {
		p.stop(err)
		if opts.Origin != Explicit {
			loaded.list = append(loaded.list, p)
		}
		return p.snapshot(), err
	}
	loaded.list = append(loaded.list, p)
	return p.snapshot(), nil
}

// sameDigest checks a caller's expected digest against the running binary's,
// as a first load would: a caller who names a digest never gets a plugin
// that was started from other bytes. An empty want is no check.
func (p *plugin) sameDigest(want string) error {
	want = strings.ToLower(strings.TrimSpace(want))
	if want == "" || want == p.digest {
		return nil
	}
	return pluginErr(p.info.Path, "refused: it is already running from a binary whose SHA-256 is %s, but %s was expected (quant_shutdown, then load it again, to run the file as it is now)", p.digest, want)
}

func (p *plugin) start() error {
	path := p.info.Path
	st, err := os.Stat(path)
	if err != nil {
		return pluginErr(path, "cannot open: %v", err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return pluginErr(path, "is not an executable file")
	}
	want := strings.ToLower(strings.TrimSpace(p.opts.SHA256))
	if want == "" {
		if want, err = manifestDigest(p.opts.Manifest, p.real); err != nil {
			return pluginErr(path, "%v", err)
		}
	}
	if want == "" {
		return pluginErr(path, "is not listed: libquant runs an executable plugin only with its SHA-256, from the load options or a line \"<sha256>  <path>\" in the file %s names (sha256sum writes such lines)", ManifestEnv)
	}
	sum, err := hex.DecodeString(want)
	if err != nil || len(sum) != sha256.Size {
		return pluginErr(path, "expected SHA-256 %q is not 64 hex digits", want)
	}
	p.digest = want
	file, mem, err := wire.NewArena(p.opts.ArenaBytes)
	if err != nil {
		return host.Errorf(host.ErrOutOfMemory, "plugin %q: shared arena: %v", path, err)
	}
	p.file, p.arena, p.alloc = file, mem, newAllocator(p.opts.ArenaBytes)
	r, w, err := os.Pipe()
	if err != nil {
		return pluginErr(path, "watchdog pipe: %v", err)
	}
	defer r.Close() // the child has its copy
	p.watchdog = w
	p.cmd = exec.Command(path)
	p.cmd.ExtraFiles = []*os.File{file, r} // fds 3 and 4 (wire.ArenaFD, WatchdogFD)
	p.gp = goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig: goplugin.HandshakeConfig{
			ProtocolVersion:  wire.ProtocolVersion,
			MagicCookieKey:   wire.MagicCookieKey,
			MagicCookieValue: wire.MagicCookieValue,
		},
		Plugins:          goplugin.PluginSet{wire.PluginName: &clientPlugin{}},
		Cmd:              p.cmd,
		SecureConfig:     &goplugin.SecureConfig{Checksum: sum, Hash: sha256.New()},
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		AutoMTLS:         true,
		Stderr:           p.stderr,
		Logger:           hclog.NewNullLogger(),
		StartTimeout:     30 * time.Second,
	})
	proto, err := p.gp.Client()
	if err != nil {
		return p.startErr(err, want)
	}
	raw, err := proto.Dispense(wire.PluginName)
	if err != nil {
		return pluginErr(path, "dispensing %q: %v", wire.PluginName, err)
	}
	p.conn = raw.(*grpc.ClientConn)
	d, err := invoke[wire.DescribeResponse](p, "Describe", &wire.Empty{})
	if err != nil {
		return err
	}
	if d.Name == "" || len(d.Formats) == 0 {
		return pluginErr(path, "describes itself with no name or no formats")
	}
	if d.ArenaBytes != p.opts.ArenaBytes {
		return pluginErr(path, "mapped a %d-byte arena, the host made %d bytes", d.ArenaBytes, p.opts.ArenaBytes)
	}
	p.info.Name, p.info.Version, p.info.Protocol, p.info.Formats, p.info.Pid = d.Name, d.Version, d.Protocol, d.Formats, d.Pid
	return nil
}

// startErr explains why go-plugin could not start the plugin.
func (p *plugin) startErr(err error, want string) error {
	path := p.info.Path
	switch {
	case errors.Is(err, goplugin.ErrChecksumsDoNotMatch) || strings.Contains(err.Error(), "checksum"):
		got, _ := fileDigest(path)
		return pluginErr(path, "refused: its SHA-256 is %s, but %s was expected (the file changed since it was listed)", got, want)
	case strings.Contains(strings.ToLower(err.Error()), "incompatible api version"):
		return pluginErr(path, "handshake failed: %v; this libquant speaks plugin protocol %d: rebuild the plugin against its pluginsdk", err, wire.ProtocolVersion)
	}
	msg := err.Error()
	if t := p.stderr.String(); t != "" {
		msg += "; its stderr ends with: " + t
	}
	return pluginErr(path, "did not start: %s", msg)
}

// clientPlugin hands back the gRPC connection; the calls go through
// wire.Invoke.
type clientPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
}

func (clientPlugin) GRPCServer(*goplugin.GRPCBroker, *grpc.Server) error {
	return errors.New("the host does not serve plugins")
}

func (clientPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return c, nil
}

// deadErr is the error a call gets once the plugin stopped.
func (p *plugin) deadErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead == nil {
		return nil
	}
	return pluginErr(p.info.Path, "plugin %s is not running (%v); load it again to restart it", p.info.Name, p.dead)
}

// stop ends the process (gracefully, then by force) and releases the arena,
// once; reason is kept for deadErr and the plugin list. Calls still in flight
// are waited for: they fail as the process goes away.
func (p *plugin) stop(reason error) {
	if p.markDead(reason) {
		p.finish()
	}
}

// markDead records why the plugin stopped; it reports whether this was the
// first reason, whose caller must then call finish. New calls fail from here.
func (p *plugin) markDead(reason error) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead != nil {
		return false
	}
	p.dead = reason
	return true
}

func (p *plugin) finish() {
	if p.gp != nil {
		p.gp.Kill()
	}
	p.calls.Wait()
	if p.watchdog != nil {
		p.watchdog.Close()
	}
	if p.file != nil {
		p.file.Close() // the mapping keeps the memory
	}
	p.mu.Lock()
	p.finished = true
	p.unmapIfUnused()
	p.mu.Unlock()
}

// unmapIfUnused unmaps the arena once the plugin is finished and no storage
// buffer lives in it any more (storages outlive their plugin: their bytes
// stay readable). Called with mu held.
func (p *plugin) unmapIfUnused() {
	if p.finished && p.live == 0 && p.arena != nil {
		_ = wire.Unmap(p.arena)
		p.arena = nil
	}
}

// invoke calls method with the per-call deadline and turns every failure into
// a host error: the plugin's own errors keep their kind; a deadline, a crash
// or an exit stop the plugin and say so.
func invoke[Resp any](p *plugin, method string, req any) (*Resp, error) {
	if err := p.deadErr(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.CallTimeout)
	defer cancel()
	resp, err := wire.Invoke[Resp](ctx, p.conn, method, req)
	if err == nil {
		return resp, nil
	}
	st, _ := status.FromError(err)
	name := p.info.Name
	if name == "" {
		name = p.info.Path
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		reason := host.Errorf(host.ErrPlugin, "%s did not return within the %v per-call deadline; the plugin process was stopped", method, p.opts.CallTimeout)
		if p.markDead(reason) {
			go p.finish() // it waits for the calls in flight, this one included
		}
		return nil, pluginErr(p.info.Path, "plugin %s: %v", name, reason)
	case st.Code() == codes.InvalidArgument:
		return nil, host.Errorf(host.ErrInvalidArgument, "%s (plugin %s)", st.Message(), name)
	case st.Code() == codes.Unimplemented:
		return nil, host.Errorf(host.ErrUnsupported, "%s (plugin %s)", st.Message(), name)
	case st.Code() == codes.Unknown:
		return nil, pluginErr(p.info.Path, "plugin %s: %s failed: %s", name, method, st.Message())
	}
	// The transport failed: the process crashed, exited or was killed.
	reason := host.Errorf(host.ErrPlugin, "the plugin process ended during %s (%s)%s", method, p.exitStatus(), p.stderrNote())
	if p.markDead(reason) {
		go p.finish()
	} else if err := p.deadErr(); err != nil {
		return nil, err // another call saw it first: give its reason
	}
	return nil, pluginErr(p.info.Path, "plugin %s: %v", name, reason)
}

// exitStatus waits briefly for the process to be reaped and says how it ended.
func (p *plugin) exitStatus() string {
	for i := 0; i < 200 && !p.gp.Exited(); i++ { // up to 2 s: go-plugin reaps it after its stderr is read
		time.Sleep(10 * time.Millisecond)
	}
	if ps := p.cmd.ProcessState; p.gp.Exited() && ps != nil {
		return ps.String()
	}
	return "connection lost"
}

func (p *plugin) stderrNote() string {
	if t := p.stderr.String(); t != "" {
		return "; its stderr ends with: " + t
	}
	return ""
}

// Shutdown stops every running plugin (quant_shutdown). Their formats stay
// registered; calls on them fail until the plugin is loaded again.
func Shutdown() {
	loaded.Lock()
	list := append([]*plugin(nil), loaded.list...)
	loaded.Unlock()
	var wg sync.WaitGroup
	for _, p := range list {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.stop(host.Errorf(host.ErrPlugin, "stopped by quant_shutdown"))
		}()
	}
	wg.Wait()
}

// tail keeps the last bytes a plugin wrote to stderr, for error messages.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailBytes = 2048

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > tailBytes {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-tailBytes:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
