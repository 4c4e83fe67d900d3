"""``manage.py approve ID --as USERNAME [--note TEXT]``: approve a proposal from a shell (docs/design.md §7, §10).

Recorded as ``actor: "operator"`` with that user, the OS user and ``via: "cli"``; says the
run it queued and the older pending proposals of the loop it superseded, as the web does;
exit 2 when refused (no permission, not pending, a run of the loop in flight).
"""


from runtime import clock
from runtime.management.decision_command import DecisionCommand
from runtime.services.approval import approve_proposal, superseded_by


class Command(DecisionCommand):
    help = "Approve a pending proposal as an operator, with an optional note, and queue its run."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--note", default="", help="why, for the journal (at most 2,000 characters)")

    def handle(self, *args, **options):
        user = self.operator(options["username"])
        run = self.decide(lambda: approve_proposal(
            options["proposal_id"], user=user, now=clock.database_now(), note=options["note"], via="cli",
            os_user=self.os_user(),
        ))
        line = f"approved proposal {options['proposal_id']} as {user.get_username()}: run {run.pk} queued"
        superseded = superseded_by(run.proposal)
        if superseded:
            line += f"; superseded pending proposal(s) {', '.join(map(str, superseded))} of loop {run.loop}"
        self.stdout.write(line)
