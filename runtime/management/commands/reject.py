"""``manage.py reject ID --as USERNAME [--note TEXT]``: reject a proposal from a shell (docs/design.md §7, §10)."""


from runtime import clock
from runtime.management.decision_command import DecisionCommand
from runtime.services.approval import reject_proposal


class Command(DecisionCommand):
    help = "Reject a pending proposal as an operator, with an optional note."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--note", default="", help="why, for the journal")

    def handle(self, *args, **options):
        user = self.operator(options["username"])
        self.decide(lambda: reject_proposal(
            options["proposal_id"], user=user, now=clock.database_now(), note=options["note"], via="cli", os_user=self.os_user()
        ))
        self.stdout.write(f"rejected proposal {options['proposal_id']} as {user.get_username()}")
