package main

/*
#include "capi.h"
*/
import "C"

import (
	"unsafe"

	"libquant/host"
)

func gemmOperand(name string, o C.quant_gemm_operand) (host.GemmOperand, error) {
	op := host.GemmOperand{Trans: o.trans != 0}
	switch {
	case o.qtensor != nil && o.tensor != nil:
		return op, invalid("%s: both qtensor and tensor are set; set one", name)
	case o.qtensor != nil:
		e, err := getQTensorPtr(unsafe.Pointer(o.qtensor), name+".qtensor")
		if err != nil {
			return op, err
		}
		op.Q = e.t
	case o.tensor != nil:
		t, err := tensorFromDL(name+".tensor", unsafe.Pointer(o.tensor))
		if err != nil {
			return op, err
		}
		op.Dense = &t
	default:
		return op, invalid("%s: neither qtensor nor tensor is set", name)
	}
	return op, nil
}

//export quant_gemm
func quant_gemm(args *C.capi_const_gemm_args) C.quant_status {
	return call("quant_gemm", func() error {
		var a C.quant_gemm_args
		if err := readStruct("args", unsafe.Pointer(args), unsafe.Pointer(&a), unsafe.Sizeof(a), unsafe.Offsetof(a.exact)); err != nil {
			return err
		}
		g := host.GemmArgs{Alpha: 1, Beta: 1, Accumulate: a.accumulate != 0, Stream: uintptr(a.stream), Exact: a.exact != 0}
		var err error
		if g.A, err = gemmOperand("a", a.a); err != nil {
			return err
		}
		if g.B, err = gemmOperand("b", a.b); err != nil {
			return err
		}
		if a.alpha != nil {
			g.Alpha = float32(*a.alpha)
		}
		if a.c != nil {
			c, err := tensorFromDL("c", unsafe.Pointer(a.c))
			if err != nil {
				return err
			}
			g.C = &c
			if a.beta != nil {
				g.Beta = float32(*a.beta)
			}
		} else if a.beta != nil {
			return invalid("beta: set but c is NULL (beta scales c)")
		}
		if a.bias != nil {
			b, err := tensorFromDL("bias", unsafe.Pointer(a.bias))
			if err != nil {
				return err
			}
			g.Bias = &b
		}
		if g.D, err = tensorFromDL("d", unsafe.Pointer(a.d)); err != nil {
			return err
		}
		return host.Gemm(&g)
	})
}

func fillSupport(e *C.quant_gemm_support_entry, s host.GemmSupport) {
	var v C.quant_gemm_support_entry
	copyName(v.format_a[:], s.A)
	copyName(v.format_b[:], s.B)
	v.level = C.int32_t(s.Level)
	copyName(v.reason[:], s.Reason)
	*e = v
}

//export quant_gemm_support
func quant_gemm_support(device C.DLDevice, formatA *C.capi_const_char, formatB *C.capi_const_char, entry *C.quant_gemm_support_entry) C.quant_status {
	return call("quant_gemm_support", func() error {
		dev, err := deviceFromDL("device", device)
		if err != nil {
			return err
		}
		if formatA == nil {
			return invalid("format_a: is NULL")
		}
		if formatB == nil {
			return invalid("format_b: is NULL")
		}
		if entry == nil {
			return invalid("entry: is NULL")
		}
		s, err := host.QueryGemmSupport(dev, C.GoString(formatA), C.GoString(formatB))
		if err != nil {
			return err
		}
		fillSupport(entry, s)
		return nil
	})
}

//export quant_gemm_support_table
func quant_gemm_support_table(device C.DLDevice, entries *C.quant_gemm_support_entry, capacity C.size_t, count *C.size_t) C.quant_status {
	return call("quant_gemm_support_table", func() error {
		dev, err := deviceFromDL("device", device)
		if err != nil {
			return err
		}
		if err := countArg(count); err != nil {
			return err
		}
		table, err := host.GemmSupportTable(dev)
		if err != nil {
			return err
		}
		out, err := outputArray(entries, capacity, count, len(table), "table", "entries")
		if err != nil {
			return err
		}
		for i := range out {
			fillSupport(&out[i], table[i])
		}
		return nil
	})
}
