"""The wheel's shape: typed, with the generated stubs and the license."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from harness import SDK


def test_wheel_holds_the_package_its_types_and_license(tmp_path: Path) -> None:
    # Built from a copy: setuptools writes its build files beside the sources.
    tree = tmp_path / "sdk"
    shutil.copytree(SDK / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(SDK / name, tree / name)
    wheels = tmp_path / "wheels"
    pip = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        str(tree),
        "--no-deps",
        "--no-build-isolation",
        "-q",
        "-w",
        str(wheels),
    ]
    subprocess.run(pip, check=True, cwd=tree)
    [wheel] = wheels.glob("rdq-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for want in (
        "rdq/__init__.py",
        "rdq/py.typed",
        "rdq/v1/rdq_pb2.pyi",
        "rdq/v1/rdq_pb2_grpc.pyi",
        "rdq/v1/handler_pb2.py",
    ):
        assert want in names, f"the wheel lacks {want}"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert not [n for n in names if n.startswith(("tests/", "examples/"))]
