"""The shape every read command shares: newest first, ``--limit``, ``--json`` (docs/design.md §10)."""

import argparse
import json

from django.core.management.base import BaseCommand

from lib.text_table import format_table

from .local_times import add_local_argument, localized_output

MAX_LIMIT = 100_000


def limit_value(text: str) -> int:
    """``--limit``: an integer from 1 to MAX_LIMIT in ASCII digits (argparse reports anything else,
    exit 2). Not ``int()`` alone, which reads ``1_0`` as 10, `` 5`` as 5 and ``١٢`` as 12."""
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number")
    if len(text) > len(str(MAX_LIMIT)) or not 1 <= int(text) <= MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"{text[:40]} is not between 1 and {MAX_LIMIT}")
    return int(text)


class ListingCommand(BaseCommand):
    """Subclasses give ``queryset(options)``, ``item(row)`` and the text ``columns``: pairs of
    a header in words and the item's key (dotted for a nested one) whose value fills it."""

    columns: tuple[tuple[str, str], ...] = ()
    default_limit = 50
    # Reading the tables needs no registry: a typo in the overlay must not lock an
    # operator out of them (the running service keeps its last good registry).
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument(
            "--limit", type=limit_value, default=self.default_limit,
            help=f"at most N rows, 1 to {MAX_LIMIT} (default {self.default_limit})",
        )
        parser.add_argument("--json", action="store_true", help="print one JSON array")
        add_local_argument(parser)

    def queryset(self, options):
        raise NotImplementedError

    def item(self, row) -> dict:
        raise NotImplementedError

    def handle(self, *args, **options):
        with localized_output(self, options):
            self.write_listing(options)

    def write_listing(self, options: dict) -> None:
        """The rows ``options`` ask for: ``--json`` items, or a table (``(none)`` for no row)."""
        rows = list(self.queryset(options)[: options["limit"]])
        items = [self.item(row) for row in rows]
        if options["json"]:
            self.stdout.write(json.dumps(items, indent=2, ensure_ascii=False))
            return
        if not items:
            self.stdout.write("(none)")
            return
        cells = [[self.text_cell(row, item, key) for _, key in self.columns] for row, item in zip(rows, items, strict=True)]
        self.stdout.write(format_table([header for header, _ in self.columns], cells))

    def text_cell(self, row, item: dict, key: str) -> str:
        """The text of column ``key`` for ``row`` (a model instance) and its JSON ``item``;
        subclasses answer keys of their own from the row (a duration, say)."""
        return self.cell(item, key)

    @staticmethod
    def cell(item: dict, column: str) -> str:
        value = item
        for part in column.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value is None:
            return "-"
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
