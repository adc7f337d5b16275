package rpc

import (
	"debug/elf"
)

// nativeEntry is the symbol every native plugin exports (quant_plugin.h).
const nativeEntry = "quant_plugin_get"

// IsExecutable reports whether path is an executable plugin rather than a
// native one, by its ELF header: an ET_EXEC file, or an ET_DYN file with a
// PT_INTERP program header (a position-independent executable), that does not
// export quant_plugin_get. A shared library that exports it is native, and so
// is anything else (the native loader reports what is wrong with it), so that
// a file is never run unless it is an executable.
func IsExecutable(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	switch f.Type {
	case elf.ET_EXEC:
	case elf.ET_DYN:
		interp := false
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				interp = true
			}
		}
		if !interp {
			return false
		}
	default:
		return false
	}
	syms, _ := f.DynamicSymbols()
	for _, s := range syms {
		if s.Name == nativeEntry && s.Section != elf.SHN_UNDEF {
			return false
		}
	}
	return true
}
