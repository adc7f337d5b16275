"""The README's Python section and examples/python/ run as written."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

from conftest import BUILD, ROOT, clean_env, run

EXAMPLES = sorted((ROOT / "examples" / "python").glob("*.py"))


def readme_python_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text()
    m = re.search(r"^## Python\n(.*?)^## ", text, re.S | re.M)
    assert m, "README.md has no '## Python' section"
    return re.findall(r"^```python\n(.*?)^```", m.group(1), re.S | re.M)


def test_readme_python_snippets_run(tmp_path: Path) -> None:
    blocks = readme_python_blocks()
    assert len(blocks) >= 4
    script = tmp_path / "readme.py"
    script.write_text("\n".join(blocks))
    if shutil.which("go"):  # the Go plugin snippet runs where Go can build it (not on the GPU machine)
        run(["make", "-s", "-C", str(ROOT), "goplugins"])
    env = clean_env(PYTHONPATH=str(ROOT / "python"))
    p = run([sys.executable, str(script)], cwd=str(tmp_path), env=env)
    assert "QUANT_ERROR_INVALID_ARGUMENT: quant_quantizer_create: config.element" in p.stdout
    if (BUILD / "goplugin" / "mxfp6").exists():
        assert "float6_e2m3fn (128, 192)" in p.stdout
        assert "QUANT_ERROR_PLUGIN: quant_quantize:" in p.stdout and "quant_shutdown" in p.stdout


def test_readme_names_what_exists() -> None:
    import libquant

    text = (ROOT / "README.md").read_text()
    sec = re.search(r"^## Python\n(.*?)^## ", text, re.S | re.M)
    assert sec
    for name in set(re.findall(r"`(?:lq\.)?([A-Za-z_]+)\(", sec.group(1))) - {"qfactory"}:  # the user's function
        assert hasattr(libquant, name) or any(hasattr(getattr(libquant, c), name) for c in libquant.__all__
                                              if isinstance(getattr(libquant, c), type)), name


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_example_runs(example: Path) -> None:
    env = clean_env(PYTHONPATH=str(ROOT / "python"))
    p = run([sys.executable, str(example)], cwd="/tmp", env=env)
    assert p.stdout.strip()


def test_examples_cover_the_issue() -> None:
    assert {e.name for e in EXAMPLES} >= {"numpy_quantize.py", "torch_quantize.py", "hybrid_gemm.py",
                                          "capabilities.py"}
