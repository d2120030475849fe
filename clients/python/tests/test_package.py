"""The package as pip builds it: py.typed, the pytest11 entry point, the
standard library only, Python 3.9 syntax."""

from __future__ import annotations

import ast
import glob
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from conftest import PACKAGE_DIR

SOURCES = sorted(glob.glob(os.path.join(PACKAGE_DIR, "mailplane", "*.py")))


def test_wheel_builds_and_installs(tmp_path: Path) -> None:
    # Built from a copy, since setuptools leaves build/ and *.egg-info in
    # the source tree; --no-build-isolation: the backend is Debian's
    # python3-setuptools.
    src = tmp_path / "src"
    shutil.copytree(PACKAGE_DIR, src, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache", "build", "*.egg-info"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path / "dist"), str(src)],
        check=True, timeout=300, cwd=tmp_path,
    )
    (wheel,) = glob.glob(str(tmp_path / "dist" / "mailplane-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "mailplane/py.typed" in names and "mailplane/pytest_plugin.py" in names
    assert not [n for n in names if n.startswith("tests/") or n.startswith("examples/")]
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(target), wheel],
                   check=True, timeout=300, cwd=tmp_path)
    probe = (
        "import importlib.metadata as md, mailplane, mailplane.pytest_plugin as p;"
        "eps = [e for e in md.entry_points().get('pytest11', []) if e.value == 'mailplane.pytest_plugin'];"
        "assert eps and eps[0].load() is p and eps[0].name == 'mailplane.pytest_plugin', eps;"
        "print(mailplane.__file__)"
    )
    r = subprocess.run([sys.executable, "-c", probe], env=dict(os.environ, PYTHONPATH=str(target)),
                       capture_output=True, text=True, cwd=tmp_path, check=True, timeout=60)
    assert r.stdout.strip().startswith(str(target))


def test_offline_install_as_the_readme_says(tmp_path: Path) -> None:
    # README's offline install: a venv that sees Debian's python3-setuptools
    # and python3-wheel, pip with no index and no build isolation. A plain
    # venv lacks wheel, and fails as README says.
    src = tmp_path / "src"
    shutil.copytree(PACKAGE_DIR, src, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache", "build", "*.egg-info"))
    offline = ["-m", "pip", "install", "--no-index", "--no-build-isolation", "-q", str(src)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=300, env=env)
    subprocess.run([str(venv / "bin" / "python"), *offline], check=True, timeout=300, cwd=tmp_path, env=env)
    r = subprocess.run([str(venv / "bin" / "python"), "-c", "import mailplane; print(mailplane.__file__)"],
                       capture_output=True, text=True, check=True, timeout=60, cwd=tmp_path, env=env)
    assert r.stdout.strip().startswith(str(venv))

    plain = tmp_path / "plain"
    subprocess.run(["/usr/bin/python3", "-m", "venv", str(plain)], check=True, timeout=300, env=env)
    r = subprocess.run([str(plain / "bin" / "python"), *offline], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert r.returncode != 0 and "invalid command 'bdist_wheel'" in r.stdout + r.stderr, r.stdout + r.stderr


def test_standard_library_only_and_python_39_syntax() -> None:
    allowed_third_party = {"pytest"}  # imported by the pytest plugin only
    stdlib = set(sys.stdlib_module_names)
    for path in SOURCES:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path, feature_version=(3, 9))
        for node in ast.walk(tree):
            mods = []
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                mods = [node.module]
            for m in mods:
                top = m.split(".")[0]
                if top in allowed_third_party:
                    assert path.endswith("pytest_plugin.py"), f"{path} imports {m}"
                else:
                    assert top in stdlib or top == "mailplane", f"{path} imports {m}"
    assert os.path.exists(os.path.join(PACKAGE_DIR, "mailplane", "py.typed"))
