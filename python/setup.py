"""The wheel is platform-specific (it carries libquant.so) but holds no Python
extension: it is built as a binary distribution (files at the wheel's root, a
platform tag) and tagged py3-none-<platform>.

The platform tag is manylinux_2_Y_<arch> (PEP 600) when every shared library the
wheel carries needs only the system libraries manylinux allows (libc, libm,
libpthread, ... or another library of the wheel) and only GLIBC_x.y symbol
versions, Y being the highest minor version needed: what the libraries' ELF
version references say, read here without external tools. Anything else (the CUDA
plugin needs libcudart/cuBLASLt; a GLIBCXX_ or GLIBC_PRIVATE reference) keeps
linux_<arch>, which promises nothing about other distributions.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.dist import Distribution

# The system libraries every manylinux_2_x policy allows a wheel to need
# (auditwheel's policy list, the libraries of glibc itself).
MANYLINUX_LIBS = frozenset({
    "libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0", "libutil.so.1",
    "libresolv.so.2", "libnsl.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
})

_SHT_DYNAMIC = 6
_SHT_GNU_VERNEED = 0x6FFFFFFE
_DT_NEEDED = 1


def elf_needs(path: Path) -> tuple[list[str], list[str]]:
    """(DT_NEEDED libraries, version names of the version references) of a
    64-bit little-endian ELF shared library."""
    b = Path(path).read_bytes()
    if b[:4] != b"\x7fELF" or b[4] != 2 or b[5] != 1:
        raise ValueError("%s: not a 64-bit little-endian ELF file" % path)
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", b, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize) for i in range(shnum)]

    def string(strtab: int, off: int) -> str:
        start = sections[strtab][4] + off
        return b[start:b.index(b"\0", start)].decode()

    needed: list[str] = []
    versions: list[str] = []
    for _name, typ, _flags, _addr, off, size, link, info, _align, entsize in sections:
        if typ == _SHT_DYNAMIC:
            for i in range(size // (entsize or 16)):
                tag, val = struct.unpack_from("<qQ", b, off + i * 16)
                if tag == _DT_NEEDED:
                    needed.append(string(link, val))
        elif typ == _SHT_GNU_VERNEED:
            p = off
            for _ in range(info):  # sh_info: the number of Elf64_Verneed entries
                _ver, cnt, _file, aux, nxt = struct.unpack_from("<HHIII", b, p)
                a = p + aux
                for _ in range(cnt):
                    _hash, _fl, _other, name, anext = struct.unpack_from("<IHHII", b, a)
                    versions.append(string(link, name))
                    a += anext
                p += nxt
    return needed, versions


def platform_tag(libraries: list[Path], plat: str) -> str:
    """manylinux_2_Y_<arch> where the libraries allow it honestly, else plat
    (setuptools' linux_<arch>)."""
    if not plat.startswith("linux_") or not libraries:
        return plat
    arch = plat[len("linux_"):]
    ours = {p.name for p in libraries}
    glibc = (2, 5)  # manylinux's oldest baseline
    for lib in libraries:
        needed, versions = elf_needs(lib)
        if any(n not in MANYLINUX_LIBS and n not in ours for n in needed):
            return plat
        for v in versions:
            m = re.fullmatch(r"GLIBC_(\d+)\.(\d+)(?:\.\d+)?", v)
            if m is None:
                return plat
            glibc = max(glibc, (int(m.group(1)), int(m.group(2))))
    return "manylinux_%d_%d_%s" % (glibc[0], glibc[1], arch)


class BinaryDistribution(Distribution):
    def has_ext_modules(self) -> bool:
        return True


class PlatformWheel(bdist_wheel):
    def get_tag(self) -> tuple[str, str, str]:
        _, _, plat = super().get_tag()
        native = sorted((Path(__file__).resolve().parent / "libquant" / "_native").glob("*.so"))
        return "py3", "none", platform_tag(native, plat)


if __name__ == "__main__":  # setuptools runs setup.py as __main__; tests import it
    setup(distclass=BinaryDistribution, cmdclass={"bdist_wheel": PlatformWheel})
