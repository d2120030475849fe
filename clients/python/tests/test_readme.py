"""The README's 10-line evaluator is run as written, and the copy in the
repository's README.md is the same."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from conftest import PACKAGE_DIR, REPO


def python_block_after(path: str, heading: str) -> str:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    start = text.index(heading)
    m = re.compile(r"```python\n(.*?)```", re.S).search(text, start)
    assert m is not None, f"no python block after {heading!r} in {path}"
    return m.group(1)


def test_readme_example_runs() -> None:
    example = python_block_after(os.path.join(PACKAGE_DIR, "README.md"), "## An evaluator in 10 lines")
    assert example == python_block_after(os.path.join(REPO, "README.md"), "## Python")
    assert len(example.strip().splitlines()) <= 10
    env = dict(os.environ, PYTHONPATH=PACKAGE_DIR)
    r = subprocess.run([sys.executable, "-c", example], cwd=PACKAGE_DIR, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
