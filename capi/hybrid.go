package main

/*
#include "capi.h"
*/
import "C"

import (
	"unsafe"

	"libquant/host"
)

//export quant_quantizer_create_hybrid
func quant_quantizer_create_hybrid(rowwise *C.quant_quantizer, columnwise *C.quant_quantizer, columnwiseSource C.int32_t, out **C.quant_quantizer) C.quant_status {
	return call("quant_quantizer_create_hybrid", func() error {
		r, err := getQuantizer(rowwise, "rowwise")
		if err != nil {
			return err
		}
		c, err := getQuantizer(columnwise, "columnwise")
		if err != nil {
			return err
		}
		if out == nil {
			return invalid("out: is NULL")
		}
		q, err := host.NewHybridQuantizer(r.q, c.q, host.ColumnwiseSource(columnwiseSource))
		if err != nil {
			return err
		}
		*out = quantizerHandle(&quantizerEntry{q: q})
		return nil
	})
}

//export quant_qtensor_set_persistent
func quant_qtensor_set_persistent(t *C.quant_qtensor, persistent C.int32_t) C.quant_status {
	return call("quant_qtensor_set_persistent", func() error {
		e, err := getQTensorPtr(unsafe.Pointer(t), "tensor")
		if err != nil {
			return err
		}
		e.t.SetPersistent(persistent != 0)
		return nil
	})
}
