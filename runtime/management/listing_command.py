"""The shape every read command shares: newest first, ``--limit``, ``--json`` (docs/design.md §10)."""

import argparse
import json

from django.core.management.base import BaseCommand

from lib.text_table import format_table

MAX_LIMIT = 100_000


def limit_value(text: str) -> int:
    """``--limit``: an integer from 1 to MAX_LIMIT (argparse reports anything else, exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"{value} is not between 1 and {MAX_LIMIT}")
    return value


class ListingCommand(BaseCommand):
    """Subclasses give ``queryset(options)``, ``item(row)`` and the text ``columns``."""

    columns: tuple[str, ...] = ()
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

    def queryset(self, options):
        raise NotImplementedError

    def item(self, row) -> dict:
        raise NotImplementedError

    def handle(self, *args, **options):
        items = [self.item(row) for row in self.queryset(options)[: options["limit"]]]
        if options["json"]:
            self.stdout.write(json.dumps(items, indent=2, ensure_ascii=False))
            return
        if not items:
            self.stdout.write("(none)")
            return
        rows = [[self.cell(item, column) for column in self.columns] for item in items]
        self.stdout.write(format_table(list(self.columns), rows))

    @staticmethod
    def cell(item: dict, column: str) -> str:
        value = item
        for part in column.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value is None:
            return "-"
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
