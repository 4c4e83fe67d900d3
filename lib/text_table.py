"""Plain-text tables for the commands' listings: columns padded to their widest cell.

A command run with ``--local`` shows its instants in a reader's zone, which makes them longer
(``2026-12-06T10:25:00+01:00`` for ``2026-12-06T09:25:00Z``): ``cells_shown_as`` makes every
table of the command rewrite its cells so before measuring them, and the columns stay aligned.
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

#: How a cell is shown (``cells_shown_as``); None: as it is.
_shown_as: ContextVar[Callable[[str], str] | None] = ContextVar("text_table_shown_as", default=None)


@contextmanager
def cells_shown_as(rewrite: Callable[[str], str]) -> Iterator[None]:
    """Within the block, every table's cells are shown through ``rewrite``."""
    token = _shown_as.set(rewrite)
    try:
        yield
    finally:
        _shown_as.reset(token)


def format_table(headers: list[str], rows: list[list[str]]) -> str:
    """The header line and one line per row, cells separated by two spaces, trailing blanks cut."""
    rewrite = _shown_as.get()
    if rewrite is not None:
        rows = [[rewrite(cell) for cell in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in [headers, *rows]]
    return "\n".join(lines)
