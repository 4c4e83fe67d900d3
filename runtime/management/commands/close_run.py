"""``manage.py close_run ID --as USERNAME [--note TEXT]``: close an interrupted run for good (docs/design.md §8, §10).

The run becomes ``abandoned`` (reason ``closed_by_operator``), recorded as ``run_closed``
by ``actor: "operator"`` with that user, the OS user, ``via: "cli"`` and the note;
exit 2 when refused (no permission, no such run, not interrupted).
"""

from runtime.clock import database_now
from runtime.management.run_decision_command import RunDecisionCommand
from runtime.services.interrupted import close_run


class Command(RunDecisionCommand):
    help = "Close an interrupted run for good (abandoned), as an operator, with an optional note."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--note", default="", help="why, for the journal")

    def handle(self, *args, **options):
        user = self.operator(options["username"])
        self.decide(lambda: close_run(
            options["run_id"], user=user, now=database_now(), note=options["note"], via="cli", os_user=self.os_user()
        ))
        self.stdout.write(f"closed run {options['run_id']} as {user.get_username()}")
