"""Keytab files read without a Kerberos library: which principals a keytab holds, and a keytab
with only some of them. MIT's keytab format, version 0x0502 (``krb5-keytab(5)``: after the
version, length-prefixed entries of realm, name components, name type, timestamp, key version
and key; a negative length is a hole left by a deleted entry).

Used by :mod:`yarn_bridge.kerberos` to say "this keytab has no key for that principal" before
GSSAPI says something vaguer, and by :mod:`yarn_bridge.local_hadoop.kdc` to split MiniKdc's
one keytab into the daemons' and the user's. Pure.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

__all__ = ["keytab_principals", "keytab_subset"]


def _entries(data: bytes) -> Iterable[tuple[str, bytes]]:
    """``(principal, raw record with its length prefix)`` of each entry of a keytab."""
    if len(data) < 2:
        raise ValueError("not a keytab (too short)")
    if data[:2] != b"\x05\x02":
        raise ValueError("not a version 0x0502 keytab")
    pos = 2
    while pos + 4 <= len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        record = data[pos : pos + 4 + abs(size)]
        pos += 4 + abs(size)
        if size <= 0:  # a hole left by a deleted entry
            continue
        body = record[4:]
        if len(body) < size:
            raise ValueError("truncated keytab entry")
        try:
            (n,) = struct.unpack_from(">H", body, 0)
            off = 2
            parts: list[str] = []
            for _ in range(n + 1):  # the realm, then the components
                (length,) = struct.unpack_from(">H", body, off)
                parts.append(body[off + 2 : off + 2 + length].decode())
                off += 2 + length
        except (struct.error, UnicodeDecodeError):
            raise ValueError("malformed keytab entry") from None
        realm, comps = parts[0], parts[1:]
        yield "/".join(comps) + "@" + realm, record


def keytab_principals(data: bytes) -> list[str]:
    """The principals of a keytab, each once, in file order."""
    return list(dict.fromkeys(p for p, _ in _entries(data)))


def keytab_subset(data: bytes, principals: Iterable[str]) -> bytes:
    """A keytab with only the entries (every key type) of ``principals``. ``ValueError`` if one
    of them has no entry."""
    want = set(principals)
    entries = list(_entries(data))
    missing = want - {p for p, _ in entries}
    if missing:
        raise ValueError(f"no keytab entry for {', '.join(sorted(missing))}")
    return b"\x05\x02" + b"".join(rec for p, rec in entries if p in want)
