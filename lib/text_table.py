"""Plain-text tables for the commands' listings: columns padded to their widest cell."""


def format_table(headers: list[str], rows: list[list[str]]) -> str:
    """The header line and one line per row, cells separated by two spaces, trailing blanks cut."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in [headers, *rows]]
    return "\n".join(lines)
