"""Plain-text tables for the command line and the benchmarks: the one table printer (fixed-width
columns, a rule under the header). Outputs whose format is a contract of another tool
(beeline's result tables, :mod:`hive_hooks.output`) keep their own renderer."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["format_table"]


def _printable(cell: str) -> str:
    """``cell`` with every unprintable character (escapes, newlines, ...) as its Python
    escape."""
    if cell.isprintable():
        return cell
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in cell)


def format_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    align: str | Sequence[str] = "<",
    sep: str = "  ",
    min_width: int = 0,
) -> str:
    """``headers`` over a rule of dashes over ``rows``, each column as wide as its widest cell
    (at least ``min_width``) and columns joined by ``sep``. ``align``: ``"<"`` (left) or
    ``">"`` (right), for every column or one per column.

    >>> print(format_table(["app", "GPUs"], [["a", "4"], ["bb", "12"]], align="<>"))
    app  GPUs
    ---  ----
    a       4
    bb     12

    A cell is printed as text, never as terminal control (a name someone registered may hold
    escapes or newlines):

    >>> format_table(["name"], [["evil\\x1b[2J\\nline"]]).splitlines()[2]
    'evil\\\\x1b[2J\\\\nline'
    """
    rows = [[_printable(c) for c in r] for r in rows]
    aligns = [align] * len(headers) if isinstance(align, str) and len(align) == 1 else list(align)
    if len(aligns) != len(headers) or not set(aligns) <= {"<", ">"}:
        raise ValueError(f"align {align!r}: one '<' or '>' for all columns or one per column")
    widths = [max([min_width, len(h), *(len(r[k]) for r in rows)]) for k, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return sep.join(
            c.ljust(w) if a == "<" else c.rjust(w)
            for c, w, a in zip(cells, widths, aligns, strict=True)
        )

    return "\n".join([line(headers), sep.join("-" * w for w in widths), *map(line, rows)])
