"""Where the public traces and model profiles live (``../shared/data`` of the checkout).

The data are not copied into the repository (see ``../shared/data/README.md``). Resolution
order: the ``YARN_ARBITER_DATA`` environment variable, then ``shared/data`` beside the
checkout, then ``/work/shared/data``. A missing data directory is an error that says where it
looked; nothing silently falls back to synthetic data.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DataNotFound", "data_root"]

_REPO = Path(__file__).resolve().parents[1]


class DataNotFound(FileNotFoundError):
    """The shared data directory is not where it was looked for."""


def data_root() -> Path:
    """The directory holding ``philly/``, ``pollux/``, ``gavel/``, ... (see module docstring)."""
    env = os.environ.get("YARN_ARBITER_DATA")
    candidates = [Path(env)] if env else []
    candidates += [_REPO.parent / "shared" / "data", Path("/work/shared/data")]
    for path in candidates:
        if (path / "pollux").is_dir():
            return path
    raise DataNotFound(
        "shared data directory not found; looked in "
        + ", ".join(str(p) for p in candidates)
        + " (set YARN_ARBITER_DATA to the folder holding philly/, pollux/, gavel/ ...)"
    )
