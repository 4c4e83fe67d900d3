"""``manage.py proposals [--status S] [--limit N] [--json]``: proposals, newest first."""

from runtime.listing import ProposalItems
from runtime.management.listing_command import ListingCommand
from runtime.models import Proposal, ProposalStatus


class Command(ListingCommand):
    help = "List proposals, newest first."
    columns = (
        ("id", "id"), ("status", "status"), ("definition", "definition"), ("loop", "loop"), ("event", "eventId"),
        ("created", "createdAt"), ("actor", "actor"), ("decided by", "decidedBy"), ("preview", "preview.summary"),
    )

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--status", choices=ProposalStatus.values, help="only proposals in this status")

    def queryset(self, options):
        proposals = Proposal.objects.select_related("event", "decided_by", "preview__requested_by").order_by("-id")
        return proposals.filter(status=options["status"]) if options["status"] else proposals

    def handle(self, *args, **options):
        self.items = ProposalItems()
        super().handle(*args, **options)

    def item(self, row):
        return self.items(row)
