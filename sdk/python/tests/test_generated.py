"""The committed generated code is what generate.py makes from the proto today,
the package states one version, and mypy --strict passes on it."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from harness import SDK

import rdq


def test_generated_code_is_current(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(SDK / "generate.py"), str(tmp_path)], check=True, capture_output=True)
    want = {p.relative_to(tmp_path): p.read_bytes() for p in (tmp_path / "rdq" / "v1").rglob("*") if p.is_file()}
    got_dir = SDK / "src"
    got = {
        p.relative_to(got_dir): p.read_bytes()
        for p in (got_dir / "rdq" / "v1").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert sorted(got) == sorted(want)
    stale = [str(p) for p in want if got[p] != want[p]]
    assert not stale, f"{stale} are stale: run .venv/bin/python generate.py in sdk/python and commit the result"


def test_version_is_pyprojects() -> None:
    assert rdq.__version__ == tomllib.loads((SDK / "pyproject.toml").read_text())["project"]["version"]
