"""gRPC stubs, generated from proto/ by grpc_tools at first import (never hand-edited, never committed)."""

from __future__ import annotations

import importlib
import os
import sys
import tempfile
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent / "proto"
PROTO = PROTO_DIR / "hetsched_runtime.proto"
OUT_DIR = Path(__file__).resolve().parent / "_generated"


def _generate() -> None:
    from grpc_tools import protoc

    OUT_DIR.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=OUT_DIR) as tmp:     # atomic: concurrent importers never see half files
        code = protoc.main(["grpc_tools.protoc", f"-I{PROTO_DIR}", f"--python_out={tmp}", f"--grpc_python_out={tmp}",
                            str(PROTO)])
        if code != 0:
            raise RuntimeError(f"protoc failed ({code}) on {PROTO}")
        for name in ("hetsched_runtime_pb2.py", "hetsched_runtime_pb2_grpc.py"):
            os.replace(Path(tmp) / name, OUT_DIR / name)
    (OUT_DIR / "__init__.py").touch()


def _stale() -> bool:
    target = OUT_DIR / "hetsched_runtime_pb2_grpc.py"
    return not target.exists() or target.stat().st_mtime < PROTO.stat().st_mtime


if _stale():
    _generate()
if str(OUT_DIR) not in sys.path:
    sys.path.insert(0, str(OUT_DIR))   # the generated grpc module imports its pb2 by top-level name
pb2 = importlib.import_module("hetsched_runtime_pb2")
pb2_grpc = importlib.import_module("hetsched_runtime_pb2_grpc")
