"""Hadoop's timestamps of application timeouts: ``expiryTime`` in ``GET
/ws/v1/cluster/apps/{id}/timeouts`` answers and in the ``PUT /ws/v1/cluster/apps/{id}/timeout``
body (ISO 8601, ``yyyy-MM-dd'T'HH:mm:ss.SSSZ``). Pure functions, no I/O."""

from __future__ import annotations

import re
from datetime import UTC, datetime

__all__ = ["format_expiry", "parse_expiry"]

_ISO = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)(Z|[+-]\d\d:?\d\d)?$")


def parse_expiry(text: str) -> datetime:
    """Hadoop's ISO 8601 (``2016-12-05T22:51:00.104+0530``; also ``+05:30``, ``Z``)."""
    m = _ISO.match(text.strip())
    if not m:
        raise ValueError(f"not an ISO 8601 time: {text!r}")
    stamp, zone = m.group(1), m.group(2) or "Z"
    if zone == "Z":
        zone = "+0000"
    zone = zone.replace(":", "")
    fmt = "%Y-%m-%dT%H:%M:%S.%f%z" if "." in stamp else "%Y-%m-%dT%H:%M:%S%z"
    return datetime.strptime(stamp + zone, fmt)


def format_expiry(when: datetime | float) -> str:
    """A datetime (naive = UTC) or epoch seconds -> Hadoop's ``yyyy-MM-dd'T'HH:mm:ss.SSSZ``."""
    if not isinstance(when, datetime):
        when = datetime.fromtimestamp(float(when), UTC)
    elif when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (
        when.strftime("%Y-%m-%dT%H:%M:%S.")
        + f"{when.microsecond // 1000:03d}"
        + (when.strftime("%z"))
    )
