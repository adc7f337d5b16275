package pluginsdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"libquant/pluginsdk/wire"
)

// handshakeVersion is ProtocolVersion as text (TestHandshakeVersion checks
// they agree). It is a string variable so that libquant's tests can build a
// plugin with -ldflags "-X libquant/pluginsdk.handshakeVersion=99" and check
// that a host refuses another version.
var handshakeVersion = "1"

// Serve runs the plugin until libquant stops it, then exits the process. It
// never returns. Started by hand (without libquant), it prints that it is a
// plugin and exits with status 1.
//
// The process also exits when its host is gone, however it ended (SIGKILL
// included): libquant holds the only write end of a pipe whose read end is
// the plugin's fd 4, and the read returns when the kernel closes it. The
// parent pid is polled as a second signal. Linux's Pdeathsig is not used: it
// fires when the host's spawning thread exits, which Go's threads do.
func Serve(info Info, formats ...Format) {
	if os.Getenv(wire.MagicCookieKey) != wire.MagicCookieValue {
		fmt.Fprintf(os.Stderr, "%s is a libquant format plugin: load it with quant_plugin_load or LIBQUANT_PLUGIN_PATH\n", os.Args[0])
		os.Exit(1)
	}
	var version uint
	if _, err := fmt.Sscan(handshakeVersion, &version); err != nil {
		fmt.Fprintf(os.Stderr, "pluginsdk: bad handshake version %q\n", handshakeVersion)
		os.Exit(1)
	}
	watchParent()
	srv, err := newServer(info, formats)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pluginsdk: %v\n", err)
		os.Exit(1)
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: plugin.HandshakeConfig{
			ProtocolVersion:  version,
			MagicCookieKey:   wire.MagicCookieKey,
			MagicCookieValue: wire.MagicCookieValue,
		},
		Plugins:    plugin.PluginSet{wire.PluginName: &grpcPlugin{srv: srv}},
		GRPCServer: plugin.DefaultGRPCServer,
		Logger:     hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: os.Stderr}),
	})
	os.Exit(0)
}

// watchParent ends the process when the host is gone (see Serve).
func watchParent() {
	ppid := os.Getppid()
	pipe := os.NewFile(wire.WatchdogFD, "libquant-watchdog")
	go func() {
		var b [1]byte
		if pipe != nil {
			_, _ = pipe.Read(b[:]) // returns only at EOF: the host is gone
			fmt.Fprintln(os.Stderr, "pluginsdk: the host closed the watchdog pipe; exiting")
			os.Exit(3)
		}
	}()
	go func() {
		for range time.Tick(250 * time.Millisecond) {
			if os.Getppid() != ppid {
				fmt.Fprintln(os.Stderr, "pluginsdk: the host process is gone; exiting")
				os.Exit(3)
			}
		}
	}()
}

type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	srv *server
}

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	s.RegisterService(&wire.ServiceDesc, p.srv)
	return nil
}

func (p *grpcPlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errors.New("pluginsdk: a plugin has no client side")
}

// server implements wire.Server over the plugin's formats.
type server struct {
	info    Info
	formats map[string]Format
	names   []string
	arena   []byte

	mu    sync.Mutex
	specs map[string]Spec // by the JSON of their params
}

func newServer(info Info, formats []Format) (*server, error) {
	if info.Name == "" {
		return nil, errors.New("Info.Name is empty")
	}
	s := &server{info: info, formats: map[string]Format{}, specs: map[string]Spec{}}
	for _, f := range formats {
		if _, ok := s.formats[f.Name()]; ok || f.Name() == "" {
			return nil, fmt.Errorf("format name %q is empty or given twice", f.Name())
		}
		s.formats[f.Name()] = f
		s.names = append(s.names, f.Name())
	}
	if st, err := os.NewFile(wire.ArenaFD, "arena").Stat(); err == nil && st.Size() > 0 {
		mem, err := wire.Map(wire.ArenaFD, st.Size())
		if err != nil {
			return nil, err
		}
		s.arena = mem
	} else {
		return nil, fmt.Errorf("no shared arena at fd %d (start the plugin through libquant)", wire.ArenaFD)
	}
	return s, nil
}

// toStatus turns a plugin error into a gRPC status the host maps back.
func toStatus(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrInvalidArgument):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, ErrUnsupported):
		return status.Error(codes.Unimplemented, err.Error())
	}
	return status.Error(codes.Unknown, err.Error())
}

// guard runs a kernel, turning a panic into an error that names it.
func guard(what string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s panicked: %v\n%s", what, r, debug.Stack())
		}
	}()
	return f()
}

func (s *server) spec(p Params) (Spec, error) {
	key, _ := json.Marshal(p)
	s.mu.Lock()
	sp, ok := s.specs[string(key)]
	s.mu.Unlock()
	if ok {
		return sp, nil
	}
	f, ok := s.formats[p.Format]
	if !ok {
		return nil, fmt.Errorf("format %q is not served by plugin %s (it serves %v): %w", p.Format, s.info.Name, s.names, ErrUnsupported)
	}
	err := guard(p.Format+" NewSpec", func() (err error) { sp, err = f.NewSpec(p); return })
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.specs[string(key)] = sp
	s.mu.Unlock()
	return sp, nil
}

func (s *server) tensor(what string, r wire.Region) (Tensor, error) {
	dt := DType(r.DType)
	if dt.Bits() == 0 {
		return Tensor{}, fmt.Errorf("%s: unknown dtype %d: %w", what, r.DType, ErrInvalidArgument)
	}
	if err := wire.CheckRegion(what, r, int64(len(s.arena)), BufferSpec{DType: dt, Shape: r.Shape}.Bytes()); err != nil {
		return Tensor{}, err
	}
	return Tensor{DType: dt, Shape: r.Shape, Data: s.arena[r.Off : r.Off+r.Bytes : r.Off+r.Bytes]}, nil
}

func (s *server) storage(what string, w *wire.Storage) (*Storage, error) {
	if w == nil {
		return nil, nil
	}
	st := &Storage{Dir: Direction(w.Dir)}
	for i, b := range w.Buffers {
		t, err := s.tensor(fmt.Sprintf("%s buffer %d", what, i), b.Region)
		if err != nil {
			return nil, err
		}
		st.Buffers = append(st.Buffers, Buffer{BufferSpec: BufferSpec{Kind: BufferKind(b.Kind), DType: t.DType, Shape: t.Shape}, Tensor: t})
	}
	return st, nil
}

func (s *server) Describe(context.Context, *wire.Empty) (*wire.DescribeResponse, error) {
	return &wire.DescribeResponse{Name: s.info.Name, Version: s.info.Version, Protocol: ProtocolVersion,
		Formats: s.names, Pid: os.Getpid(), ArenaBytes: int64(len(s.arena))}, nil
}

func (s *server) NewSpec(_ context.Context, r *wire.NewSpecRequest) (*wire.NewSpecResponse, error) {
	sp, err := s.spec(r.Params)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &wire.NewSpecResponse{Params: sp.Params()}
	for _, from := range []Direction{Rowwise, Columnwise} {
		for _, to := range []Direction{Rowwise, Columnwise} {
			out.Derivable[from][to] = sp.Derivable(from, to)
		}
	}
	return out, nil
}

func (s *server) Layout(_ context.Context, r *wire.LayoutRequest) (*wire.LayoutResponse, error) {
	sp, err := s.spec(r.Params)
	if err != nil {
		return nil, toStatus(err)
	}
	var bufs []BufferSpec
	if err := guard(r.Params.Format+" Layout", func() (err error) { bufs, err = sp.Layout(r.M, r.K, Direction(r.Dir)); return }); err != nil {
		return nil, toStatus(err)
	}
	out := &wire.LayoutResponse{}
	for _, b := range bufs {
		out.Buffers = append(out.Buffers, wire.BufferSpec{Kind: int32(b.Kind), DType: uint8(b.DType), Shape: b.Shape})
	}
	return out, nil
}

func (s *server) Amax(_ context.Context, r *wire.AmaxRequest) (*wire.Empty, error) {
	return s.run(r.Params, "Amax", func(sp Spec) error {
		in, err := s.tensor("input", r.Input)
		if err != nil {
			return err
		}
		out, err := s.tensor("out", r.Out)
		if err != nil {
			return err
		}
		return sp.Amax(&AmaxRequest{Input: in, M: r.M, K: r.K, Want: Usage(r.Want), Out: out})
	})
}

func (s *server) Quantize(_ context.Context, r *wire.QuantizeRequest) (*wire.Empty, error) {
	return s.run(r.Params, "Quantize", func(sp Spec) error {
		in, err := s.tensor("input", r.Input)
		if err != nil {
			return err
		}
		q := &QuantizeRequest{Input: in, M: r.M, K: r.K}
		for d, w := range r.Out {
			if q.Out[d], err = s.storage(Direction(d).String()+" output", w); err != nil {
				return err
			}
		}
		if r.AmaxIn != nil {
			t, err := s.tensor("amax_in", *r.AmaxIn)
			if err != nil {
				return err
			}
			q.AmaxIn = &t
		}
		return sp.Quantize(q)
	})
}

func (s *server) Dequantize(_ context.Context, r *wire.DequantizeRequest) (*wire.Empty, error) {
	return s.run(r.Params, "Dequantize", func(sp Spec) error {
		st, err := s.storage("storage", &r.Storage)
		if err != nil {
			return err
		}
		out, err := s.tensor("out", r.Out)
		if err != nil {
			return err
		}
		return sp.Dequantize(&DequantizeRequest{Storage: st, Dir: Direction(r.Dir), M: r.M, K: r.K, Out: out})
	})
}

func (s *server) Derive(_ context.Context, r *wire.DeriveRequest) (*wire.Empty, error) {
	return s.run(r.Params, "Derive", func(sp Spec) error {
		from, err := s.storage("from", &r.From)
		if err != nil {
			return err
		}
		to, err := s.storage("to", &r.To)
		if err != nil {
			return err
		}
		return sp.Derive(&DeriveRequest{From: from, To: to, FromDir: Direction(r.FromDir), ToDir: Direction(r.ToDir), M: r.M, K: r.K})
	})
}

func (s *server) run(p Params, op string, f func(Spec) error) (*wire.Empty, error) {
	sp, err := s.spec(p)
	if err != nil {
		return nil, toStatus(err)
	}
	if err := guard(p.Format+" "+op, func() error { return f(sp) }); err != nil {
		return nil, toStatus(err)
	}
	return &wire.Empty{}, nil
}
