"""Regenerates src/rdq/v1 from ../../proto with the pinned grpcio-tools and mypy-protobuf.

.venv/bin/python generate.py            # writes src/
.venv/bin/python generate.py OUT_DIR    # writes OUT_DIR/rdq/v1 (tests/test_generated.py)
"""

from __future__ import annotations

import sys
from pathlib import Path

from google.api import annotations_pb2
from grpc_tools import protoc

HERE = Path(__file__).resolve().parent
PROTO = HERE.parent.parent / "proto"
FILES = ["rdq/v1/rdq.proto", "rdq/v1/handler.proto"]


def generate(out: Path) -> None:
    """Writes the messages, the gRPC stubs and their typing stubs under out/rdq/v1."""
    (out / "rdq" / "v1").mkdir(parents=True, exist_ok=True)
    bindir = Path(sys.executable).parent
    include = Path(protoc.__file__).parent / "_proto"
    # The googleapis protos of the REST annotations, from the pinned
    # googleapis-common-protos, whose annotations_pb2 rdq_pb2 imports.
    googleapis = Path(annotations_pb2.__file__).parent.parent.parent
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO}",
        f"-I{include}",
        f"-I{googleapis}",
        f"--plugin=protoc-gen-mypy={bindir / 'protoc-gen-mypy'}",
        f"--plugin=protoc-gen-mypy_grpc={bindir / 'protoc-gen-mypy_grpc'}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        f"--mypy_out={out}",
        f"--mypy_grpc_out={out}",
        *FILES,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    init = out / "rdq" / "v1" / "__init__.py"
    if not init.exists():
        init.write_text("")


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "src")
