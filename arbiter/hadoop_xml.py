"""Hadoop's ``*-site.xml`` as Hadoop's own ``Configuration`` reads it.

What an operator's files rely on, and what this module gives every reader in the suite (the
arbiter's configuration, :mod:`arbiter.config`; the YARN bridge reading ``yarn-site.xml``):

* ``<property><name>/<value>[/<final>]</property>``; a ``<final>true</final>`` property cannot
  be overridden by a later source (Hadoop logs and ignores the attempt; so does
  :func:`arbiter.config.load_config`);
* variable expansion as ``Configuration.substituteVars``: ``${name}`` is another property of
  the same file, ``${env.NAME}`` an environment variable, ``${env.NAME:-default}`` one with a
  default; expansion repeats (at most 20 levels, Hadoop's limit) and an unknown variable is left
  as written, as Hadoop leaves it;
* units as ``Configuration.getTimeDuration`` and ``getStorageSize``/``getLongBytes``:
  ``500ms``, ``30s``, ``5m``, ``2h``, ``1d`` (also ``ns``, ``us``); ``64k``, ``4m``, ``1g``
  (binary: k = 1024; also ``kb``, ``MiB``, ...).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SiteProperty", "expand", "parse_duration", "parse_size", "read_site_xml"]

MAX_SUBST = 20  # Hadoop's Configuration.MAX_SUBST
_VAR = re.compile(r"\$\{([^${}]+)\}")


@dataclass(frozen=True)
class SiteProperty:
    value: str
    final: bool = False


def read_site_xml(path: str | Path) -> dict[str, SiteProperty]:
    """The properties of one ``*-site.xml`` (not yet expanded). Raises ``ValueError`` naming
    the file for malformed XML or a property without a name."""
    path = Path(path)
    try:
        root = ET.fromstring(path.read_text())
    except ET.ParseError as exc:
        raise ValueError(f"{path}: not valid XML: {exc}") from None
    out: dict[str, SiteProperty] = {}
    for prop in root.iter("property"):
        name, value = prop.findtext("name"), prop.findtext("value")
        if name is None or not name.strip() or value is None:
            raise ValueError(f"{path}: every <property> needs <name> and <value>")
        final = (prop.findtext("final") or "").strip().lower() == "true"
        key = name.strip()
        if key in out and out[key].final:
            continue  # a final value stays (Hadoop: "attempt to override final parameter")
        out[key] = SiteProperty(value.strip(), final)
    return out


def expand(text: str, props: Mapping[str, str], environ: Mapping[str, str]) -> str:
    """``text`` with its ``${...}`` variables expanded (module docstring).

    >>> expand("${yarn.resourcemanager.hostname}:8088",
    ...        {"yarn.resourcemanager.hostname": "rm1.example"}, {})
    'rm1.example:8088'
    >>> expand("${env.STATE:-/var/lib}/x ${env.HOME} ${nope}", {}, {"HOME": "/home/y"})
    '/var/lib/x /home/y ${nope}'
    """
    for _ in range(MAX_SUBST):
        changed = False

        def one(m: re.Match[str]) -> str:
            nonlocal changed
            name = m.group(1)
            if name.startswith("env."):
                var, _, default = name[4:].partition(":-")
                value = environ.get(var) or (default if ":-" in name else None)
            else:
                value = props.get(name)
            if value is None:
                return m.group(0)
            changed = True
            return value

        new = _VAR.sub(one, text)
        if not changed or new == text:
            return new
        text = new
    raise ValueError(f"variable expansion of {text!r} goes deeper than {MAX_SUBST} levels")


_DURATION = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_SIZE = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


def parse_duration(text: str) -> float:
    """Seconds in ``text``: a plain number (seconds) or a number with a unit.

    >>> [parse_duration(x) for x in ("30", "1.5", "500ms", "5m", "2h", "1d")]
    [30.0, 1.5, 0.5, 300.0, 7200.0, 86400.0]
    """
    m = re.fullmatch(r"\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|inf)\s*([a-zA-Z]*)\s*", text)
    if m is None or m.group(2).lower() not in {**_DURATION, "": 1.0}:
        raise ValueError(f"not a duration: {text!r} (a number of seconds, or with ms, s, m, h, d)")
    return float(m.group(1)) * (_DURATION.get(m.group(2).lower(), 1.0))


def parse_size(text: str) -> int:
    """Bytes in ``text``: a plain integer or a number with a binary unit.

    >>> [parse_size(x) for x in ("1024", "64k", "4m", "4MB", "4MiB", "1g")]
    [1024, 65536, 4194304, 4194304, 4194304, 1073741824]
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    unit = (m.group(2).lower() if m else "").removesuffix("ib").removesuffix("b")
    if m is None or unit not in _SIZE:
        raise ValueError(f"not a size: {text!r} (bytes, or with k, m, g, t)")
    return int(float(m.group(1)) * _SIZE[unit])
