"""Result sets printed the way beeline prints them (``--outputformat``).

Checked against beeline 2.3.10 from the pyspark wheel on the local Spark Thrift Server:

* ``table``: a box of ``+---+`` rules and ``|`` bars; every column is as wide as its longest
  value or name plus one, each cell is padded by one space on both sides, names are centred and
  values left-aligned.
* ``vertical``: one ``name  value`` line per column, a blank line after each row.
* ``csv2`` / ``tsv2`` / ``dsv``: values separated by ``,`` / tab / ``--delimiterForDSV``
  (default ``|``), **unquoted** (beeline's default, ``disable.quoting.for.sv=true``; beeline
  2.3 then writes NUL characters as quotes, a bug fixed in Hive 3, which we do not copy). With
  ``quoting=True`` a value holding the delimiter, a double quote or a line break is quoted
  RFC 4180 style (beeline with ``-Ddisable.quoting.for.sv=false``).
* ``csv`` / ``tsv`` (deprecated in beeline, kept for old scripts): every value in single quotes,
  nothing escaped.
* ``json``: ``{"resultset":[{name: value, ...}, ...]}``; ``jsonfile``: one object per line
  (beeline 3+).

Values are rendered like the Hive JDBC driver's strings: ``NULL`` for null (or the empty string
with ``null_empty``, beeline's ``--nullemptystring``), ``true``/``false``, doubles as Java's
``Double.toString`` (``2.5``, ``1.0E10``), decimals with their scale, dates ``YYYY-MM-DD``,
timestamps as ``java.sql.Timestamp`` (``2024-01-02 03:04:05.0``).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, TextIO

__all__ = ["FORMATS", "STREAMABLE", "format_value", "java_double", "render", "write_result"]

FORMATS = ("table", "vertical", "csv2", "tsv2", "dsv", "csv", "tsv", "json", "jsonfile")
# formats whose rows render one by one (a result in batches prints as the whole would, with the
# header once); "table" needs every row for its column widths and "json" is one document
STREAMABLE = ("vertical", "csv2", "tsv2", "dsv", "csv", "tsv", "jsonfile")
_SEPARATORS = {"csv2": ",", "tsv2": "\t", "csv": ",", "tsv": "\t"}


def java_double(x: float) -> str:
    """Java's ``Double.toString``: plain in [1e-3, 1e7), else ``d.dddE±n``.

    >>> [java_double(v) for v in (2.5, 3.0, 1e10, 1.5e-5, -0.0, 12345678.9)]
    ['2.5', '3.0', '1.0E10', '1.5E-5', '-0.0', '1.23456789E7']
    """
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0 or 1e-3 <= abs(x) < 1e7:
        text = repr(x)
        return text if ("." in text or "e" in text) else text + ".0"
    sign, digits, exponent = Decimal(repr(x)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    mantissa = text[0] + "." + (text[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{len(text) - 1 + exponent}"


def format_value(value: Any, *, null: str = "NULL") -> str:
    """One value as the Hive JDBC driver's string (module docstring)."""
    if value is None:
        return null
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, dt.datetime):  # java.sql.Timestamp: 2024-01-02 03:04:05.0
        frac = f"{value.microsecond:06d}".rstrip("0") or "0"
        return f"{value:%Y-%m-%d %H:%M:%S}.{frac}"
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


def _quote_sv(text: str, sep: str) -> str:
    if sep in text or '"' in text or "\n" in text or "\r" in text:
        return '"' + text.replace('"', '""') + '"'
    return text


def _table(columns: Sequence[str], cells: list[list[str]], header: bool) -> list[str]:
    widths = [max([len(c), *(len(r[k]) for r in cells)]) + 1 for k, c in enumerate(columns)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def centred(text: str, width: int) -> str:
        left = (width - len(text)) // 2
        return " " * left + text + " " * (width - len(text) - left)

    lines = [rule]
    if header:
        lines += ["| " + " | ".join(centred(c, w) for c, w in zip(columns, widths, strict=True))
                  + " |", rule]  # fmt: skip
    lines += ["| " + " | ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) + " |"
              for r in cells]  # fmt: skip
    return [*lines, rule]


def render(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    fmt: str = "table",
    *,
    header: bool = True,
    delimiter: str = "|",
    null_empty: bool = False,
    quoting: bool = False,
) -> str:
    """The result set as text in beeline's ``fmt`` (module docstring), ending with a newline.

    >>> print(render(["a", "b"], [(1, "x"), (22, None)]), end="")
    +-----+-------+
    |  a  |   b   |
    +-----+-------+
    | 1   | x     |
    | 22  | NULL  |
    +-----+-------+
    >>> render(["a", "b"], [(1, "x,y")], "csv2", quoting=True)
    'a,b\\n1,"x,y"\\n'
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown output format {fmt!r} (one of {', '.join(FORMATS)})")
    columns = [str(c) for c in columns]
    if fmt in ("json", "jsonfile"):
        objs = [
            {c: _json_value(v, null_empty) for c, v in zip(columns, r, strict=True)} for r in rows
        ]
        if fmt == "jsonfile":
            return "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objs)
        return json.dumps({"resultset": objs}, ensure_ascii=False) + "\n"
    null = "" if null_empty else "NULL"
    cells = [[format_value(v, null=null) for v in r] for r in rows]
    for r in cells:
        if len(r) != len(columns):
            raise ValueError(f"a row has {len(r)} values for {len(columns)} columns")
    if fmt == "table":
        lines = _table(columns, cells, header)
    elif fmt == "vertical":
        width = max((len(c) for c in columns), default=0) + 1
        lines = []
        for r in cells:
            lines += [f"{c.ljust(width)} {v}" for c, v in zip(columns, r, strict=True)] + [""]
    elif fmt in ("csv", "tsv"):
        sep = _SEPARATORS[fmt]
        body = ([columns] if header else []) + cells
        lines = [sep.join(f"'{v}'" for v in r) for r in body]
    else:
        sep = delimiter if fmt == "dsv" else _SEPARATORS[fmt]
        body = ([columns] if header else []) + cells
        lines = [sep.join(_quote_sv(v, sep) if quoting else v for v in r) for r in body]
    return "".join(line + "\n" for line in lines)


def _json_value(value: Any, null_empty: bool) -> Any:
    if value is None:
        return "" if null_empty else None
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else java_double(value)
    return format_value(value)


def write_result(
    out: TextIO,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    fmt: str = "table",
    **options: Any,
) -> None:
    """:func:`render` to a stream (and flush, so output interleaves with progress lines)."""
    out.write(render(columns, rows, fmt, **options))
    out.flush()
