// Package rpc loads libquant format plugins that run out of process: Go
// executables built with pluginsdk, started through hashicorp/go-plugin
// (versioned handshake, gRPC with AutoMTLS, SHA-256 SecureConfig). Their
// formats register into host like built-in ones; their kernels run in the
// child on tensors that cross through a shared memfd arena, never inside gRPC
// messages. A plugin that crashes, hangs past the per-call deadline or exits
// gives ErrPlugin with the reason, and can be loaded again; none outlives its
// host (pluginsdk's watchdog). DESIGN.md, Plugins, RPC.
package rpc
