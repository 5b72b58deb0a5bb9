"""The suite's version, as every command's ``--version`` prints it."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version

__all__ = ["version", "version_line"]


def version() -> str:
    """The installed ``yarn-arbiter`` distribution's version."""
    try:
        return _dist_version("yarn-arbiter")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0.1.0+source"


def version_line(prog: str) -> str:
    """``prog``'s ``--version`` line: the program, the suite's version and Python's."""
    import platform

    return f"{prog} {version()} (yarn-arbiter suite; Python {platform.python_version()})"
