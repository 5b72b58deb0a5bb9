"""Regenerate the Python stubs of the wire contract: ``python -m protos.generate``.

Stubs are written next to their ``.proto`` files (``protos/yarnarbiter/v1/arbiter_pb2.py``,
``arbiter_pb2_grpc.py``, ``arbiter_pb2.pyi``), importable as ``protos.yarnarbiter.v1``. The
test suite regenerates them into a temporary directory and fails if the checked-in ones are
stale. ``grpcio-tools`` is pinned in the ``test`` extra so the output is reproducible.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository (holds protos/)
PROTOS = sorted(p.relative_to(ROOT) for p in (ROOT / "protos").rglob("*.proto"))
GENERATED_SUFFIXES = ("_pb2.py", "_pb2_grpc.py", "_pb2.pyi")


def generate(out_root: Path) -> list[Path]:
    """Compile every .proto under protos/ into ``out_root`` (same relative layout)."""
    from grpc_tools import protoc  # imported lazily: only needed to regenerate

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp)
        for rel in PROTOS:
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / rel, src / rel)
        args = [
            "grpc_tools.protoc",
            f"-I{src}",
            f"--python_out={out_root}",
            f"--pyi_out={out_root}",
            f"--grpc_python_out={out_root}",
            *(str(rel) for rel in PROTOS),
        ]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed: {' '.join(args)}")
    return [rel.with_name(rel.stem + suffix) for rel in PROTOS for suffix in GENERATED_SUFFIXES]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT, help="output root (default: repo)")
    args = parser.parse_args(argv)
    for path in generate(args.out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
