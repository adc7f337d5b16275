"""Shared fixtures. The package under test is python/libquant of this source tree
(or whatever `import libquant` finds when it is installed); its library is
LIBQUANT_LIBRARY when set, else build/libquant.so of this tree.

CUDA: the torch tests run on every device in DEVICES; "cuda" is there when torch
sees a GPU and libquant has a CUDA plugin loaded, and otherwise the CUDA cases
skip with the reason.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYDIR = ROOT / "python"
if str(PYDIR) not in sys.path:
    sys.path.insert(0, str(PYDIR))

import libquant  # noqa: E402

BUILD = ROOT / "build"


def cuda_skip_reason() -> str | None:
    """Why CUDA tests cannot run here, or None when they can."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA device (torch.cuda.is_available() is False)"
    loaded = [p for p in libquant.plugins() if p.loaded and any(k.device.type == "cuda" for k in p.kernels)]
    if not loaded:
        why = "; ".join("%s: %s" % (p.path, p.message) for p in libquant.plugins() if not p.loaded)
        return "libquant has no CUDA plugin loaded (build/libquant_cuda.so next to libquant.so)%s" % (
            ": " + why if why else "")
    return None


CUDA_SKIP = cuda_skip_reason()
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(CUDA_SKIP is not None, reason=str(CUDA_SKIP)))]


@pytest.fixture(params=DEVICES)
def device(request: Any) -> str:
    """Each torch device the suite runs on: cpu, and cuda where it can."""
    return str(request.param)


def run(cmd: list[str] | str, **kw: Any) -> subprocess.CompletedProcess[str]:
    """Runs a command, failing the test with its output on a non-zero exit."""
    p = subprocess.run(cmd, shell=isinstance(cmd, str), capture_output=True, text=True, **kw)
    if p.returncode != 0:
        pytest.fail("%s exited %d\nstdout:\n%s\nstderr:\n%s" % (cmd, p.returncode, p.stdout[-4000:],
                                                              p.stderr[-4000:]))
    return p


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without LIBQUANT_* and PYTHONPATH, plus extra."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIBQUANT_") and k != "PYTHONPATH"}
    env.update(extra)
    return env
