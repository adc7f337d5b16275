"""The README's "Training with PyTorch" section and examples/python/train_hybrid.py
run as written, and the names its TransformerEngine table gives exist."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from conftest import ROOT, clean_env, run


def section() -> str:
    text = (ROOT / "README.md").read_text()
    m = re.search(r"^## Training with PyTorch\n(.*?)^## ", text, re.S | re.M)
    assert m, "README.md has no '## Training with PyTorch' section"
    return m.group(1)


def test_readme_training_snippets_run(tmp_path: Path) -> None:
    blocks = re.findall(r"^```python\n(.*?)^```", section(), re.S | re.M)
    assert len(blocks) >= 2
    script = tmp_path / "readme_torch.py"
    script.write_text("\n".join(blocks))
    p = run([sys.executable, str(script)], cwd=str(tmp_path), env=clean_env(PYTHONPATH=str(ROOT / "python")))
    assert p.stdout.strip() == "Linear mxfp8"  # the snippet's printed comment


def test_readme_table_names_exist() -> None:
    import libquant.torch as lqt

    rows = [line for line in section().splitlines() if line.startswith("| ") and "libquant.torch" not in line]
    names = set()
    for row in rows:
        cell = row.split("|")[2]
        names |= set(re.findall(r"`lqt\.([A-Za-z_0-9]+)", cell))
    assert {"Linear", "GroupedLinear", "autocast", "CustomRecipe", "HybridQuantizer", "convert"} <= names
    for n in names:
        assert hasattr(lqt, n), n


def test_train_hybrid_example() -> None:
    p = run([sys.executable, str(ROOT / "examples" / "python" / "train_hybrid.py")], cwd="/tmp",
            env=clean_env(PYTHONPATH=str(ROOT / "python")))
    assert "columnwise nvfp4" in p.stdout and "ratio" in p.stdout
