"""``manage.py runs [--status S] [--limit N] [--json]``: runs, newest first."""

from lib.instants import format_instant
from runtime.admin.common import seconds_text
from runtime.listing import reason_words, run_item
from runtime.management.listing_command import ListingCommand
from runtime.models import Run, RunStatus


class Command(ListingCommand):
    help = "List runs, newest first."
    columns = (
        ("id", "id"), ("status", "status"), ("definition", "definition"), ("loop", "loop"), ("attempt", "attempt"),
        ("outcome", "outcome"), ("reason", "reason"), ("actor", "actor"), ("approved by", "approvedBy"),
        ("queued", "queuedAt"), ("started", "started"), ("took", "took"),
    )

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--status", choices=RunStatus.values, help="only runs in this status")

    def queryset(self, options):
        runs = Run.objects.select_related("event", "approved_by").order_by("-id")
        return runs.filter(status=options["status"]) if options["status"] else runs

    def item(self, row):
        return run_item(row)

    def text_cell(self, row, item: dict, key: str) -> str:
        # Started and took are the text's alone: the JSON item keeps its keys (docs/design.md §10).
        if key == "started":
            return format_instant(row.started_at) if row.started_at else "-"
        if key == "took":
            return seconds_text((row.finished_at - row.started_at).total_seconds()) if row.started_at and row.finished_at else "-"
        return super().text_cell(row, item, key)

    @staticmethod
    def cell(item: dict, column: str) -> str:
        # An earlier attempt's reason says so: "attempt 1: timeout" beside a queued or running run.
        if column == "reason" and item["reason"]:
            return reason_words(item["status"], item["reason"], item["attempt"])
        return ListingCommand.cell(item, column)
