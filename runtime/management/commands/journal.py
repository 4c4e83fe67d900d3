"""``manage.py journal [--limit N] [--correlation ID] [--json]``: the journal, newest first, or one chain's story."""

from runtime.listing import journal_item
from runtime.management.listing_command import ListingCommand
from runtime.models import JournalEntry


class Command(ListingCommand):
    help = (
        "List journal entries, newest first; with --correlation ID, the whole story of one chain "
        "(its events, plans, approvals with actors, runs and outcomes) oldest first."
    )
    columns = (
        ("id", "id"), ("at", "at"), ("action", "action"), ("actor", "actor"), ("actor name", "actorName"),
        ("event", "eventId"), ("proposal", "proposalId"), ("run", "runId"), ("detail", "detail"),
    )
    default_limit = 100

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument(
            "--correlation", metavar="ID",
            help="only the entries of events with this correlationId, in the order they happened",
        )

    def queryset(self, options):
        entries = JournalEntry.objects.select_related("event")
        if options["correlation"] is not None:
            return entries.filter(event__correlation_id=options["correlation"]).order_by("id")
        return entries.order_by("-id")

    def item(self, row):
        return journal_item(row)

    @staticmethod
    def cell(item: dict, column: str) -> str:
        if column == "detail":
            return story_detail(item["data"])
        return ListingCommand.cell(item, column)


#: The data fields that tell a story line at a glance, in the order they are shown.
DETAIL_FIELDS = ("type", "definition", "outcome", "reason", "eventIds", "via", "note", "approval")


def story_detail(data: dict) -> str:
    """A short ``key=value`` summary of an entry's data for the text listing."""
    parts = []
    for name in DETAIL_FIELDS:
        value = data.get(name)
        if value not in (None, "", []):
            parts.append(f"{name}={','.join(map(str, value)) if isinstance(value, list) else value}")
    return " ".join(parts) or "-"
