// Command faulty is a test plugin for rpc's fault tests: format "faulty"
// holds FP32 values unchanged, and its config.seed picks a fault for Quantize:
// 1 crashes the process (a panic outside the handler), 2 hangs, 3 exits with
// status 7 mid-call, 4 sleeps 2 s then works.
package main

import (
	"errors"
	"os"
	"time"

	"libquant/pluginsdk"
)

type format struct{}

func (format) Name() string { return "faulty" }

func (format) NewSpec(p pluginsdk.Params) (pluginsdk.Spec, error) { return &spec{p}, nil }

type spec struct{ p pluginsdk.Params }

func (s *spec) Params() pluginsdk.Params { return s.p }

func (s *spec) Layout(m, k int64, dir pluginsdk.Direction) ([]pluginsdk.BufferSpec, error) {
	return []pluginsdk.BufferSpec{{Kind: pluginsdk.BufData, DType: pluginsdk.Float32, Shape: []int64{m, k}}}, nil
}

func (s *spec) Derivable(from, to pluginsdk.Direction) bool { return false }

func (s *spec) Amax(r *pluginsdk.AmaxRequest) error { return errors.New("faulty: no amax") }

func (s *spec) Quantize(r *pluginsdk.QuantizeRequest) error {
	switch s.p.Seed {
	case 1:
		go func() { panic("faulty: injected crash") }()
		select {}
	case 2:
		select {}
	case 3:
		os.Exit(7)
	case 4:
		time.Sleep(2 * time.Second)
	}
	for _, st := range r.Out {
		if st != nil {
			copy(st.Buffers[0].Tensor.Data, r.Input.Data)
		}
	}
	return nil
}

func (s *spec) Dequantize(r *pluginsdk.DequantizeRequest) error {
	copy(r.Out.Data, r.Storage.Buffers[0].Tensor.Data)
	return nil
}

func (s *spec) Derive(r *pluginsdk.DeriveRequest) error { return errors.New("faulty: no derive") }

func main() { pluginsdk.Serve(pluginsdk.Info{Name: "faulty", Version: "0"}, format{}) }
