"""``manage.py events [--type T] [--limit N] [--json]``: admitted events, newest first."""

from runtime.listing import event_item
from runtime.management.listing_command import ListingCommand
from runtime.models import Event


class Command(ListingCommand):
    help = "List admitted events, newest first."
    columns = (
        ("id", "id"), ("event", "eventId"), ("type", "type"), ("door", "door"), ("admitted", "admittedAt"),
        ("planning", "planning.outcome"), ("reason", "planning.reason"),
    )

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--type", help="only events of this type")

    def queryset(self, options):
        events = Event.objects.order_by("-id")
        return events.filter(type=options["type"]) if options["type"] else events

    def item(self, row):
        return event_item(row)
