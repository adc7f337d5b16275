"""Packaging, from other directories and fresh environments:

- `make wheel` gives a platform wheel carrying libquant.so (and libquant_cuda.so
  when built); installed into a new venv it imports from /tmp with no
  environment variable and loads its own copy of the library.
- `pip install -e ./python` in a new venv finds build/libquant.so of this tree;
  LIBQUANT_LIBRARY overrides both.
- `make install PREFIX=...` installs the library, headers and libquant.pc, and
  examples/c/demo.c builds with `pkg-config --cflags --libs libquant` and runs.

The fresh venvs install numpy and ml_dtypes (the package's dependencies) from
PyPI, through pip's cache after the first run.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from conftest import BUILD, ROOT, clean_env, run

pytestmark = pytest.mark.skipif(
    shutil.which("go") is None,
    reason="packaging tests build libquant.so (make lib needs Go) and fresh venvs (need PyPI)")

IMPORT = "import libquant, sys; print(libquant.version()); print(libquant.library_path())"


def fresh_venv(path: Path) -> Path:
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    return path / "bin" / "python"


def version() -> str:
    text = (ROOT / "include" / "quant.h").read_text()
    parts = [line.split()[2] for line in text.splitlines()
             if line.startswith(("#define QUANT_VERSION_MAJOR", "#define QUANT_VERSION_MINOR",
                                 "#define QUANT_VERSION_PATCH"))]
    return ".".join(parts)


@pytest.fixture(scope="module")
def wheel() -> Path:
    run(["make", "-s", "-C", str(ROOT), "wheel", "PYTHON3=" + sys.executable], env=clean_env())
    wheels = sorted((BUILD / "dist").glob("libquant-*.whl"), key=lambda p: p.stat().st_mtime)
    assert wheels
    return wheels[-1]


def test_wheel_is_platform_and_carries_the_library(wheel: Path) -> None:
    assert re.match(r"libquant-%s-py3-none-(many)?linux_" % re.escape(version()), wheel.name), wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    assert "libquant/_native/libquant.so" in names
    assert "libquant/py.typed" in names
    assert ("libquant/_native/libquant_cuda.so" in names) == (BUILD / "libquant_cuda.so").is_file()
    assert not any(n.startswith("tests/") for n in names)


def test_wheel_installs_and_imports_from_tmp(wheel: Path, tmp_path: Path) -> None:
    py = fresh_venv(tmp_path / "venv")
    run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)], env=clean_env())
    out = run([str(py), "-c", IMPORT], cwd="/tmp", env=clean_env()).stdout.split()
    assert out[0] == version()
    assert out[1].startswith(str(tmp_path / "venv")) and out[1].endswith("libquant/_native/libquant.so")
    # LIBQUANT_LIBRARY overrides the wheel's copy
    alt = tmp_path / "alt" / "libquant.so"
    alt.parent.mkdir()
    shutil.copy(BUILD / "libquant.so", alt)
    out = run([str(py), "-c", IMPORT], cwd="/tmp", env=clean_env(LIBQUANT_LIBRARY=str(alt))).stdout.split()
    assert out[1] == str(alt)
    # a missing explicit library is an error, not a silent fallback
    p = run([str(py), "-c", "import libquant\ntry:\n libquant.version()\nexcept OSError as e: print(e)"],
            cwd="/tmp", env=clean_env(LIBQUANT_LIBRARY=str(tmp_path / "nope.so")))
    assert "LIBQUANT_LIBRARY=" in p.stdout and "no such file" in p.stdout
    # the installed package quantizes
    code = ("import numpy as np, libquant as lq\n"
            "qt = lq.Quantizer('mxfp8').quantize(np.ones((32, 32), np.float32))\n"
            "print(qt.rowwise.data.numpy().dtype, lq.gemm_support_table()[0].level)")
    assert run([str(py), "-c", code], cwd="/tmp", env=clean_env()).stdout.split() == ["float8_e4m3fn", "emulated"]


def test_editable_install_finds_the_source_build(tmp_path: Path) -> None:
    py = fresh_venv(tmp_path / "venv")
    run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-e", str(ROOT / "python")],
        env=clean_env())
    out = run([str(py), "-c", IMPORT], cwd="/tmp", env=clean_env()).stdout.split()
    assert out == [version(), str(BUILD / "libquant.so")]


def test_make_install_and_pkg_config_build(tmp_path: Path) -> None:
    if shutil.which("pkg-config") is None:
        pytest.fail("pkg-config is missing: `make test-python` installs Debian's pkg-config")
    prefix = tmp_path / "prefix"
    run(["make", "-s", "-C", str(ROOT), "install", "PREFIX=" + str(prefix)], env=clean_env())
    for f in ("lib/libquant.so", "include/quant.h", "include/quant_plugin.h", "lib/pkgconfig/libquant.pc"):
        assert (prefix / f).is_file(), f
    assert (prefix / "lib/libquant_cuda.so").is_file() == (BUILD / "libquant_cuda.so").is_file()
    env = clean_env(PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    flags = run(["pkg-config", "--cflags", "--libs", "libquant"], env=env).stdout.split()
    assert "-I" + str(prefix / "include") in flags and "-lquant" in flags
    assert run(["pkg-config", "--modversion", "libquant"], env=env).stdout.strip() == version()
    exe = tmp_path / "demo"
    # demo_data.h (the demo's input rows) lives next to demo.c; the library comes from the prefix
    run("cc -std=c99 -O2 %s -I%s $(pkg-config --cflags --libs libquant) -lm -o %s"
        % (ROOT / "examples/c/demo.c", ROOT / "examples/c", exe), env=env)
    p = run([str(exe)], cwd="/tmp", env=clean_env())
    assert "fp8" in p.stdout
    ldd = run(["ldd", str(exe)]).stdout
    assert str(prefix / "lib" / "libquant.so") in ldd


# manylinux (PEP 600): a wheel may need only these system libraries (auditwheel's
# policy for every manylinux_2_x) and GLIBC_x.y symbol versions up to 2.x. Anything
# else (libcudart, libstdc++'s GLIBCXX_ versions, GLIBC_PRIVATE) keeps linux_<arch>.
MANYLINUX_LIBS = {"libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0", "libutil.so.1",
                  "libresolv.so.2", "libnsl.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}


def objdump_tag(sos: list[Path], arch: str) -> str:
    """The platform tag the libraries allow, read with binutils' objdump (an
    implementation independent of setup.py's ELF reader): NEEDED entries and the
    "Version References" of `objdump -p`, cross-checked with `objdump -T`."""
    if shutil.which("objdump") is None:
        pytest.skip("objdump (binutils) is not installed")
    ours = {p.name for p in sos}
    glibc = (2, 5)
    foreign = False
    for so in sos:
        p = run(["objdump", "-p", str(so)]).stdout
        needed = re.findall(r"^\s*NEEDED\s+(\S+)", p, re.M)
        refs = p.split("Version References:")[1] if "Version References:" in p else ""
        versions = re.findall(r"^\s+0x[0-9a-f]+ 0x[0-9a-f]+ \d+ (\S+)$", refs, re.M)
        foreign |= any(n not in MANYLINUX_LIBS and n not in ours for n in needed)
        foreign |= any(not re.fullmatch(r"GLIBC_[0-9.]+", v) for v in versions)
        used = [tuple(int(x) for x in v.split("_")[1].split(".")[:2]) for v in versions if v.startswith("GLIBC_")]
        # the undefined symbols' versions (objdump -T) are the references' versions
        t = run(["objdump", "-T", str(so)]).stdout
        und = set(re.findall(r"\*UND\*\s+\S+\s+(?:\(?)(GLIBC_[0-9.]+)\)?\s", t))
        assert und <= set(versions), (so, und - set(versions))
        glibc = max([glibc, *used])  # type: ignore[list-item]
    if foreign:
        return "linux_" + arch
    return "manylinux_%d_%d_%s" % (glibc[0], glibc[1], arch)


def test_wheel_tag_matches_the_glibc_symbol_versions(wheel: Path, tmp_path: Path) -> None:
    """The wheel claims manylinux_2_Y exactly when its libraries need nothing past
    GLIBC_2.Y from the allowed system libraries (objdump -T / -p of each .so)."""
    zf = zipfile.ZipFile(wheel)
    sos = []
    for n in zf.namelist():
        if n.endswith(".so"):
            sos.append(Path(zf.extract(n, tmp_path)))
    assert sos
    tag = wheel.name[: -len(".whl")].split("-")[-1]
    assert tag.endswith("_x86_64") or tag.endswith("_aarch64"), tag
    arch = "x86_64" if tag.endswith("_x86_64") else "aarch64"
    assert tag == objdump_tag(sos, arch)


def test_wheel_tag_falls_back_for_a_foreign_dependency(tmp_path: Path) -> None:
    """setup.py's ELF reader: a library that needs a non-system library (here
    libquant.so, not in the set) keeps linux_<arch>; libquant.so alone gets the
    manylinux tag objdump allows."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("libquant_setup", ROOT / "python" / "setup.py")
    assert spec is not None and spec.loader is not None
    setup_py = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup_py)  # not __main__: setup() does not run
    lib = BUILD / "libquant.so"
    dep = tmp_path / "libdep.so"
    src = tmp_path / "dep.c"
    src.write_text("int quant_abi_version(void);\nint dep(void) { return (int)quant_abi_version(); }\n")
    run(["cc", "-shared", "-fPIC", str(src), "-L" + str(BUILD), "-lquant", "-o", str(dep)])
    assert "libquant.so" in setup_py.elf_needs(dep)[0]
    assert setup_py.platform_tag([dep], "linux_x86_64") == "linux_x86_64"
    assert setup_py.platform_tag([lib], "linux_x86_64") == objdump_tag([lib], "x86_64")
    assert setup_py.platform_tag([lib, dep], "linux_x86_64") == objdump_tag([lib, dep], "x86_64")
