package main

/*
#include <stdlib.h>
#include "capi.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"libquant/host"
)

// recipeEntry is what a quant_recipe handle holds.
type recipeEntry struct{ r host.Recipe }

func getRecipePtr(p unsafe.Pointer, arg string) (*recipeEntry, error) {
	return getEntry[recipeEntry](p, arg, "recipe")
}

func recipeHandle(e *recipeEntry) *C.quant_recipe {
	return C.capi_recipe_handle(C.uintptr_t(newHandle(e)))
}

func goString(p *C.char) string {
	if p == nil {
		return ""
	}
	return C.GoString(p)
}

func roleFromC(r *C.quant_role) host.Role {
	return host.Role{ModuleType: goString(r.module_type), TensorType: goString(r.tensor_type), Name: goString(r.name)}
}

//export quant_recipe_create
func quant_recipe_create(config *C.capi_const_recipe_config, out **C.quant_recipe) C.quant_status {
	return call("quant_recipe_create", func() error {
		var c C.quant_recipe_config
		minSize := unsafe.Offsetof(c.kind) + unsafe.Sizeof(c.kind)
		if err := readStruct("config", unsafe.Pointer(config), unsafe.Pointer(&c), unsafe.Sizeof(c), minSize); err != nil {
			return err
		}
		if out == nil {
			return invalid("out: is NULL")
		}
		r, err := host.NewPresetRecipe(host.RecipeConfig{
			Kind:                      host.RecipeKind(c.kind),
			FP8Format:                 host.FP8Format(c.fp8_format),
			Margin:                    float32(c.margin),
			AmaxHistoryLen:            int32(c.amax_history_len),
			AmaxAlgo:                  host.AmaxAlgo(c.amax_compute_algo),
			ForcePow2Scales:           c.force_pow2_scales != 0,
			AmaxEpsilon:               float32(c.amax_epsilon),
			FP32Scales:                c.fp32_scales != 0,
			DisableRHT:                c.disable_rht != 0,
			DisableStochasticRounding: c.disable_stochastic_rounding != 0,
			Disable2DQuantization:     c.disable_2d_quantization != 0,
			Seed:                      uint64(c.seed),
			Offset:                    uint64(c.offset),
		})
		if err != nil {
			return err
		}
		*out = recipeHandle(&recipeEntry{r: r})
		return nil
	})
}

// callbackFactory calls a C factory for a role. The C role it passes lives in
// C memory for the call; the quantizer handle the callback returns is
// consumed: its quantizer moves to the caller of quant_recipe_quantizer.
func callbackFactory(cb C.quant_recipe_callback, userData unsafe.Pointer) func(host.Role) (*host.Quantizer, error) {
	return func(role host.Role) (*host.Quantizer, error) {
		cr := (*C.quant_role)(C.calloc(1, C.size_t(unsafe.Sizeof(C.quant_role{}))))
		if cr == nil {
			return nil, host.Errorf(host.ErrOutOfMemory, "role: allocating its C copy")
		}
		defer C.free(unsafe.Pointer(cr))
		cr.module_type = C.CString(role.ModuleType)
		cr.tensor_type = C.CString(role.TensorType)
		cr.name = C.CString(role.Name)
		defer C.free(unsafe.Pointer(cr.module_type))
		defer C.free(unsafe.Pointer(cr.tensor_type))
		defer C.free(unsafe.Pointer(cr.name))
		out := (**C.quant_quantizer)(C.calloc(1, C.size_t(unsafe.Sizeof(uintptr(0)))))
		if out == nil {
			return nil, host.Errorf(host.ErrOutOfMemory, "callback: allocating its out slot")
		}
		defer C.free(unsafe.Pointer(out))
		if s := C.capi_call_recipe_callback(cb, userData, cr, out); s != C.QUANT_OK {
			return nil, host.Errorf(kindOfStatus(s), "callback: returned %s for role %s: %s",
				C.GoString(C.quant_status_string(s)), role, C.GoString(C.quant_last_error()))
		}
		if *out == nil {
			return nil, nil // host names the role and points to identity
		}
		e, err := takeEntry[quantizerEntry](unsafe.Pointer(*out), "callback's quantizer", "quantizer")
		if err != nil {
			return nil, fmt.Errorf("role %s: %w", role, err)
		}
		e.shapes.free()
		return e.q, nil
	}
}

//export quant_recipe_create_callback
func quant_recipe_create_callback(callback C.quant_recipe_callback, userData unsafe.Pointer, out **C.quant_recipe) C.quant_status {
	return call("quant_recipe_create_callback", func() error {
		if callback == nil {
			return invalid("callback: is NULL")
		}
		if out == nil {
			return invalid("out: is NULL")
		}
		r, err := host.NewFuncRecipe(callbackFactory(callback, userData), nil)
		if err != nil {
			return err
		}
		*out = recipeHandle(&recipeEntry{r: r})
		return nil
	})
}

//export quant_recipe_create_rules
func quant_recipe_create_rules(rules *C.capi_const_recipe_rule, count C.size_t, out **C.quant_recipe) C.quant_status {
	return call("quant_recipe_create_rules", func() error {
		if rules == nil {
			return invalid("rules: is NULL")
		}
		if count == 0 || count > 1<<16 {
			return invalid("count: %d rules (want 1..65536)", count)
		}
		if out == nil {
			return invalid("out: is NULL")
		}
		cr := unsafe.Slice((*C.quant_recipe_rule)(unsafe.Pointer(rules)), int(count))
		hr := make([]host.Rule, len(cr))
		for i := range cr {
			if cr[i].quantizer == nil {
				return invalid("rules[%d].quantizer: is NULL; use an identity quantizer to keep matching roles in high precision", i)
			}
			e, err := getQuantizerPtr(unsafe.Pointer(cr[i].quantizer), fmt.Sprintf("rules[%d].quantizer", i))
			if err != nil {
				return err
			}
			hr[i] = host.Rule{Pattern: roleFromC(&cr[i].pattern), Quantizer: e.q}
		}
		r, err := host.NewRuleRecipe(hr)
		if err != nil {
			return err
		}
		*out = recipeHandle(&recipeEntry{r: r})
		return nil
	})
}

//export quant_recipe_free
func quant_recipe_free(recipe *C.quant_recipe) C.quant_status {
	return call("quant_recipe_free", func() error {
		if recipe == nil {
			return nil
		}
		e, err := takeEntry[recipeEntry](unsafe.Pointer(recipe), "recipe", "recipe")
		if err != nil {
			return err
		}
		e.r.Release()
		return nil
	})
}

//export quant_recipe_quantizer
func quant_recipe_quantizer(recipe *C.quant_recipe, role *C.capi_const_role, out **C.quant_quantizer) C.quant_status {
	return call("quant_recipe_quantizer", func() error {
		e, err := getRecipePtr(unsafe.Pointer(recipe), "recipe")
		if err != nil {
			return err
		}
		if role == nil {
			return invalid("role: is NULL")
		}
		if out == nil {
			return invalid("out: is NULL")
		}
		q, err := e.r.Quantizer(roleFromC((*C.quant_role)(unsafe.Pointer(role))))
		if err != nil {
			return err
		}
		*out = quantizerHandle(&quantizerEntry{q: q})
		return nil
	})
}

// kindOfStatus maps a status a callback returned back to its error kind, so
// that the caller sees the callback's own status; statuses that are not
// plain errors become QUANT_ERROR_PLUGIN.
func kindOfStatus(s C.quant_status) error {
	switch s {
	case C.QUANT_ERROR_INVALID_ARGUMENT:
		return host.ErrInvalidArgument
	case C.QUANT_ERROR_INVALID_HANDLE:
		return errInvalidHandle
	case C.QUANT_ERROR_UNSUPPORTED:
		return host.ErrUnsupported
	case C.QUANT_ERROR_DEVICE_UNAVAILABLE:
		return host.ErrDeviceUnavailable
	case C.QUANT_ERROR_OUT_OF_MEMORY:
		return host.ErrOutOfMemory
	case C.QUANT_ERROR_BUFFER_TOO_SMALL:
		return host.ErrBufferTooSmall
	case C.QUANT_ERROR_STATE:
		return host.ErrState
	}
	return host.ErrPlugin
}
