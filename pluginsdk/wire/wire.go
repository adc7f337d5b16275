// Package wire is the protocol between libquant's out-of-process plugin
// loader (rpc/) and the plugin SDK (pluginsdk/): the go-plugin handshake, the
// gRPC service and its codec, the messages, and the shared-memory arena that
// both sides map. Messages carry only parameters, offsets and sizes; tensor
// bytes live in the arena (DESIGN.md, Plugins, RPC).
package wire

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
)

// ProtocolVersion is the go-plugin handshake version. A host refuses a plugin
// built for another version (and the plugin says which it speaks).
const ProtocolVersion = 1

// The go-plugin magic cookie: a plugin started by hand (not by libquant) sees
// it missing and exits with a message instead of waiting on stdin.
const (
	MagicCookieKey   = "LIBQUANT_FORMAT_PLUGIN"
	MagicCookieValue = "d5b1f0a2-libquant-format-plugin"
)

// PluginName is the one go-plugin plugin a format plugin serves.
const PluginName = "format"

// The extra files the host hands the child (exec.Cmd.ExtraFiles[0] is fd 3).
const (
	ArenaFD    = 3 // the memfd of the shared arena, mapped MAP_SHARED by both sides
	WatchdogFD = 4 // the read end of a pipe whose write end only the host holds
)

// ServiceName is the gRPC service of a format plugin.
const ServiceName = "libquant.rpc.v1.Format"

// CodecName is the gRPC content subtype of the service's messages. They are
// plain Go structs encoded as JSON: they hold a few numbers each (the tensors
// are in the arena), so a schema compiler buys nothing here.
const CodecName = "libquant-json"

type jsonCodec struct{}

func (jsonCodec) Marshal(v any) ([]byte, error)      { return json.Marshal(v) }
func (jsonCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
func (jsonCodec) Name() string                       { return CodecName }

func init() { encoding.RegisterCodec(jsonCodec{}) }

// Params mirrors host.Params field by field (the JSON names are quant.h's).
type Params struct {
	Format             string  `json:"format"`
	Element            int32   `json:"element,omitempty"`
	Scaling            int32   `json:"scaling,omitempty"`
	ForcePow2Scales    bool    `json:"force_pow2_scales,omitempty"`
	AmaxEpsilon        float32 `json:"amax_epsilon,omitempty"`
	AmaxHistoryLen     int32   `json:"amax_history_len,omitempty"`
	AmaxAlgo           int32   `json:"amax_compute_algo,omitempty"`
	Margin             float32 `json:"margin,omitempty"`
	BlockDims          int32   `json:"block_dims,omitempty"`
	FP32Scales         bool    `json:"fp32_scales,omitempty"`
	ScaleRounding      int32   `json:"scale_rounding,omitempty"`
	GEMMSwizzledScales bool    `json:"gemm_swizzled_scales,omitempty"`
	RHT                int32   `json:"rht,omitempty"`
	RHTSignMask        uint32  `json:"rht_sign_mask,omitempty"`
	StochasticRounding bool    `json:"stochastic_rounding,omitempty"`
	Seed               uint64  `json:"seed,omitempty"`
	Offset             uint64  `json:"offset,omitempty"`
	HoldDType          uint8   `json:"dtype,omitempty"`
}

// BufferSpec is one buffer of a layout (host.BufferSpec).
type BufferSpec struct {
	Kind  int32   `json:"kind"`
	DType uint8   `json:"dtype"`
	Shape []int64 `json:"shape"`
}

// Region is a tensor in the arena: Bytes bytes at offset Off.
type Region struct {
	Off   int64   `json:"off"`
	Bytes int64   `json:"bytes"`
	DType uint8   `json:"dtype"`
	Shape []int64 `json:"shape"`
}

// Buffer is one buffer of a storage, in the arena.
type Buffer struct {
	Kind   int32  `json:"kind"`
	Region Region `json:"region"`
}

// Storage is one direction's buffers, in the order of its layout.
type Storage struct {
	Dir     int32    `json:"dir"`
	Buffers []Buffer `json:"buffers"`
}

type Empty struct{}

type DescribeResponse struct {
	Name     string   `json:"name"`
	Version  string   `json:"version"`
	Protocol int      `json:"protocol"`
	Formats  []string `json:"formats"`
	Pid      int      `json:"pid"`
	// ArenaBytes is the arena size the plugin mapped.
	ArenaBytes int64 `json:"arena_bytes"`
}

type NewSpecRequest struct {
	Params Params `json:"params"`
}

type NewSpecResponse struct {
	Params Params `json:"params"` // with the format's defaults filled in
	// Derivable[from][to], spec §7.4.
	Derivable [2][2]bool `json:"derivable"`
}

type LayoutRequest struct {
	Params Params `json:"params"`
	M      int64  `json:"m"`
	K      int64  `json:"k"`
	Dir    int32  `json:"dir"`
}

type LayoutResponse struct {
	Buffers []BufferSpec `json:"buffers"`
}

type AmaxRequest struct {
	Params Params `json:"params"`
	Input  Region `json:"input"`
	M      int64  `json:"m"`
	K      int64  `json:"k"`
	Want   uint32 `json:"want"`
	Out    Region `json:"out"`
}

type QuantizeRequest struct {
	Params Params      `json:"params"`
	Input  Region      `json:"input"`
	M      int64       `json:"m"`
	K      int64       `json:"k"`
	Out    [2]*Storage `json:"out"`
	AmaxIn *Region     `json:"amax_in,omitempty"`
}

type DequantizeRequest struct {
	Params  Params  `json:"params"`
	Storage Storage `json:"storage"`
	Dir     int32   `json:"dir"`
	M       int64   `json:"m"`
	K       int64   `json:"k"`
	Out     Region  `json:"out"`
}

type DeriveRequest struct {
	Params  Params  `json:"params"`
	From    Storage `json:"from"`
	To      Storage `json:"to"`
	FromDir int32   `json:"from_dir"`
	ToDir   int32   `json:"to_dir"`
	M       int64   `json:"m"`
	K       int64   `json:"k"`
}

// Server is what a plugin implements (pluginsdk does).
type Server interface {
	Describe(context.Context, *Empty) (*DescribeResponse, error)
	NewSpec(context.Context, *NewSpecRequest) (*NewSpecResponse, error)
	Layout(context.Context, *LayoutRequest) (*LayoutResponse, error)
	Amax(context.Context, *AmaxRequest) (*Empty, error)
	Quantize(context.Context, *QuantizeRequest) (*Empty, error)
	Dequantize(context.Context, *DequantizeRequest) (*Empty, error)
	Derive(context.Context, *DeriveRequest) (*Empty, error)
}

func handler[Req, Resp any](call func(Server, context.Context, *Req) (*Resp, error)) func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
	return func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		req := new(Req)
		if err := dec(req); err != nil {
			return nil, err
		}
		return call(srv.(Server), ctx, req)
	}
}

// ServiceDesc registers a Server with a grpc.Server, without generated code.
var ServiceDesc = grpc.ServiceDesc{
	ServiceName: ServiceName,
	HandlerType: (*Server)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Describe", Handler: handler(Server.Describe)},
		{MethodName: "NewSpec", Handler: handler(Server.NewSpec)},
		{MethodName: "Layout", Handler: handler(Server.Layout)},
		{MethodName: "Amax", Handler: handler(Server.Amax)},
		{MethodName: "Quantize", Handler: handler(Server.Quantize)},
		{MethodName: "Dequantize", Handler: handler(Server.Dequantize)},
		{MethodName: "Derive", Handler: handler(Server.Derive)},
	},
}

// Invoke calls method on the plugin behind conn with the JSON codec.
func Invoke[Resp any](ctx context.Context, conn *grpc.ClientConn, method string, req any) (*Resp, error) {
	resp := new(Resp)
	if err := conn.Invoke(ctx, "/"+ServiceName+"/"+method, req, resp, grpc.CallContentSubtype(CodecName)); err != nil {
		return nil, err
	}
	return resp, nil
}

// CheckRegion validates a region against an arena of size n: in bounds and as
// large as its dtype and shape say (elemBits bits per element).
func CheckRegion(what string, r Region, n int64, bytes int64) error {
	if r.Off < 0 || r.Bytes < 0 || r.Off > n || r.Bytes > n-r.Off {
		return fmt.Errorf("%s: region [%d, +%d) is outside the %d-byte arena", what, r.Off, r.Bytes, n)
	}
	if r.Bytes != bytes {
		return fmt.Errorf("%s: region holds %d bytes, its dtype and shape %v need %d", what, r.Bytes, r.Shape, bytes)
	}
	return nil
}
