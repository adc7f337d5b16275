"""The ctypes declarations (libquant/_lib.py) against include/quant.h.

A C program, generated from the Python declarations and compiled against the
header, prints sizeof and offsetof/sizeof of every field of every struct and the
value of every enum constant and #define; the test compares them with ctypes'.
A renamed field fails to compile, a moved or resized one changes an offset, an
appended one changes a size. Function signatures are parsed from the header's
prototypes and compared with the declared argtypes/restype. test_moved_field_fails
proves the check catches a moved field by running it on a copy of the header
with two fields swapped."""

from __future__ import annotations

import ctypes as C
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT
from libquant import _lib as L

HEADER = ROOT / "include" / "quant.h"


def c_program() -> str:
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "quant.h"', "int main(void) {"]
    for name, st in L.STRUCTS.items():
        lines.append('  printf("S %s %%zu\\n", sizeof(%s));' % (name, name))
        for f, _ in st._fields_:
            lines.append('  printf("F %s.%s %%zu %%zu\\n", offsetof(%s, %s), sizeof(((%s *)0)->%s));'
                         % (name, f, name, f, name, f))
    for k in L.CONSTANTS:
        lines.append('  printf("E %s %%lld\\n", (long long)(%s));' % (k, k))
    lines += ["  return 0;", "}"]
    return "\n".join(lines) + "\n"


def c_layout(include_dir: Path, tmp: Path) -> dict[str, tuple[int, ...]]:
    src = tmp / "layout.c"
    exe = tmp / "layout"
    src.write_text(c_program())
    subprocess.run(["cc", "-std=c99", "-Wall", "-Werror", "-I", str(include_dir), str(src), "-o", str(exe)],
                   check=True, capture_output=True, text=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    got: dict[str, tuple[int, ...]] = {}
    for line in out.splitlines():
        kind, key, *vals = line.split()
        got[kind + " " + key] = tuple(int(v) for v in vals)
    return got


def py_layout() -> dict[str, tuple[int, ...]]:
    want: dict[str, tuple[int, ...]] = {}
    for name, st in L.STRUCTS.items():
        want["S " + name] = (C.sizeof(st),)
        for f, t in st._fields_:
            want["F %s.%s" % (name, f)] = (getattr(st, f).offset, C.sizeof(t))
    for k, v in L.CONSTANTS.items():
        want["E " + k] = (v,)
    return want


def mismatches(got: dict[str, tuple[int, ...]], want: dict[str, tuple[int, ...]]) -> list[str]:
    return ["%s: C %s, ctypes %s" % (k, got.get(k), want[k]) for k in want if got.get(k) != want[k]]


def test_structs_and_constants_match_header(tmp_path: Path) -> None:
    got = c_layout(HEADER.parent, tmp_path)
    want = py_layout()
    assert len(want) > 250
    assert mismatches(got, want) == []


def test_every_struct_and_define_is_declared() -> None:
    text = HEADER.read_text()
    structs = set(re.findall(r"\}\s*(\w+)\s*;", text))
    assert structs - set(L.STRUCTS) == {"DLDeviceType", "DLDataTypeCode", "quant_status", "quant_element",
                                        "quant_scaling", "quant_amax_algo", "quant_scale_rounding", "quant_rht",
                                        "quant_buffer_kind", "quant_columnwise_source", "quant_gemm_support_level",
                                        "quant_recipe_kind", "quant_fp8_format", "quant_plugin_origin",
                                        "quant_backward_override", "quant_linear_pass", "quant_linear_saved"}
    consts = set(re.findall(r"^\s*(k?DL\w+|QUANT_\w+)\s*=", text, re.M))
    consts |= {d for d in re.findall(r"^#define (QUANT_\w+) ", text, re.M)}
    consts -= {"QUANT_VERSION_MAJOR", "QUANT_VERSION_MINOR", "QUANT_VERSION_PATCH"}
    assert consts == set(L.CONSTANTS)


def test_moved_field_fails(tmp_path: Path) -> None:
    """Proof that the check catches drift: swap two int32 fields of
    quant_quantizer_config in a copy of the header; the comparison must report
    exactly those two fields."""
    inc = tmp_path / "include"
    inc.mkdir()
    text = HEADER.read_text()
    a = "  int32_t element;             /* quant_element */\n"
    b = "  int32_t scaling;             /* quant_scaling */\n"
    assert a + b in text
    (inc / "quant.h").write_text(text.replace(a + b, b + a))
    bad = mismatches(c_layout(inc, tmp_path), py_layout())
    assert sorted(m.split(":")[0] for m in bad) == ["F quant_quantizer_config.element",
                                                     "F quant_quantizer_config.scaling"]


# --- function signatures ----------------------------------------------------

_SCALARS: dict[str, Any] = {
    "quant_status": C.c_int32, "uint32_t": C.c_uint32, "int32_t": C.c_int32, "size_t": C.c_size_t,
    "quant_buffer_kind": C.c_int32, "float": C.c_float, "int64_t": C.c_int64, "void": None,
    "DLDevice": L.DLDevice, "quant_recipe_callback": L.RECIPE_CALLBACK,
}
_HANDLES = {"quant_quantizer", "quant_qtensor", "quant_recipe", "quant_linear", "quant_linear_ctx", "quant_quantize_plan", "void"}


def ctype_of(decl: str) -> Any:
    """The ctypes type a C parameter or return type maps to in _lib.py's conventions:
    handles and void* as c_void_p, char* as c_char_p, T* as POINTER(T), T** of a
    handle as POINTER(c_void_p)."""
    d = re.sub(r"\bconst\b", "", decl).strip()
    d = re.sub(r"\s+\w+$", "", d) if not d.endswith("*") and len(d.split()) > 1 else d
    stars = d.count("*")
    base = d.replace("*", "").strip()
    if base == "char":
        return C.c_char_p if stars == 1 else C.POINTER(C.c_char_p)
    if stars == 0:
        return _SCALARS[base]
    if base in _HANDLES:
        return C.c_void_p if stars == 1 else C.POINTER(C.c_void_p)
    inner = _SCALARS.get(base) or L.STRUCTS[base]
    return C.POINTER(inner)


def header_prototypes(header: Path = HEADER) -> dict[str, tuple[str, list[str]]]:
    text = re.sub(r"/\*.*?\*/", "", header.read_text(), flags=re.S)
    out = {}
    for ret, name, args in re.findall(r"^([A-Za-z_][\w ]*?\**)\s*\b(quant_\w+)\s*\(([^)]*)\)\s*;", text, re.M):
        params = [a.strip() for a in args.split(",") if a.strip() and a.strip() != "void"]
        params = [re.sub(r"\s*\b\w+$", "", p) if not p.endswith("*") else p for p in params]
        params = [re.sub(r"(\*+)\s*\w+$", r"\1", p) for p in params]
        out[name] = (ret.strip(), params)
    return out


def signature_mismatches(header: Path = HEADER) -> list[str]:
    protos = header_prototypes(header)
    bad = ["%s: only in %s" % (n, "header" if n in protos else "ctypes") for n in set(protos) ^ set(L.FUNCTIONS)]
    for name, (ret, params) in protos.items():
        if name not in L.FUNCTIONS:
            continue
        restype, argtypes = L.FUNCTIONS[name]
        try:
            ok = ctype_of(ret) == restype and [ctype_of(p) for p in params] == argtypes
        except KeyError as e:
            ok = False
            params = params + ["unknown C type %s" % e]
        if not ok:
            bad.append("%s(%s)" % (name, ", ".join(params)))
    return bad


def test_function_signatures_match_header() -> None:
    protos = header_prototypes()
    assert len(protos) == len(L.FUNCTIONS) == 58
    assert protos["quant_gemm_support"] == ("quant_status", ["DLDevice", "const char *", "const char *",
                                                             "quant_gemm_support_entry *"])
    assert signature_mismatches() == []
    lib = L.lib()
    for name in protos:
        assert getattr(lib.cdll, name)  # exported by the loaded library


def test_changed_signature_fails(tmp_path: Path) -> None:
    """Proof that the signature check catches drift: a copy of the header with one
    parameter's type changed, and one with a parameter added."""
    text = HEADER.read_text()
    old = "quant_status quant_quantizer_set_usage(quant_quantizer *quantizer, uint32_t usage);"
    assert old in text
    h1 = tmp_path / "h1.h"
    h1.write_text(text.replace(old, old.replace("uint32_t usage", "int32_t usage")))
    assert signature_mismatches(h1) == ["quant_quantizer_set_usage(quant_quantizer *, int32_t)"]
    h2 = tmp_path / "h2.h"
    h2.write_text(text.replace(old, old.replace("uint32_t usage", "uint32_t usage, void *stream")))
    assert signature_mismatches(h2) == ["quant_quantizer_set_usage(quant_quantizer *, uint32_t, void *)"]


def test_cc_available() -> None:
    assert shutil.which("cc"), "the layout test compiles a C program"
