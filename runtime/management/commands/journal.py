"""``manage.py journal [--limit N] [--json]``: the journal, newest first."""

from runtime.listing import journal_item
from runtime.management.listing_command import ListingCommand
from runtime.models import JournalEntry


class Command(ListingCommand):
    help = "List journal entries, newest first."
    columns = ("id", "at", "action", "actor", "actorName", "eventId", "proposalId", "runId")
    default_limit = 100

    def queryset(self, options):
        return JournalEntry.objects.select_related("event").order_by("-id")

    def item(self, row):
        return journal_item(row)
