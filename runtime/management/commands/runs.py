"""``manage.py runs [--status S] [--limit N] [--json]``: runs, newest first."""

from runtime.listing import reason_words, run_item
from runtime.management.listing_command import ListingCommand
from runtime.models import Run, RunStatus


class Command(ListingCommand):
    help = "List runs, newest first."
    columns = ("id", "status", "definition", "loop", "attempt", "outcome", "reason", "actor", "approvedBy")

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--status", choices=RunStatus.values, help="only runs in this status")

    def queryset(self, options):
        runs = Run.objects.select_related("event", "approved_by").order_by("-id")
        return runs.filter(status=options["status"]) if options["status"] else runs

    def item(self, row):
        return run_item(row)

    @staticmethod
    def cell(item: dict, column: str) -> str:
        # An earlier attempt's reason says so: "attempt 1: timeout" beside a queued or running run.
        if column == "reason" and item["reason"]:
            return reason_words(item["status"], item["reason"], item["attempt"])
        return ListingCommand.cell(item, column)
