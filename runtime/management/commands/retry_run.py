"""``manage.py retry_run ID --as USERNAME``: give an interrupted run one new attempt (docs/design.md §8, §10).

Recorded as ``run_retried`` by ``actor: "operator"`` with that user, the OS user and
``via: "cli"``; exit 2 when refused (no permission, no such run, not interrupted).
"""

from runtime.clock import database_now
from runtime.management.run_decision_command import RunDecisionCommand
from runtime.services.interrupted import retry_run


class Command(RunDecisionCommand):
    help = "Queue an interrupted run again for one new attempt, as an operator."

    def handle(self, *args, **options):
        user = self.operator(options["username"])
        run = self.decide(lambda: retry_run(
            options["run_id"], user=user, now=database_now(), via="cli", os_user=self.os_user()
        ))
        self.stdout.write(
            f"retried run {run.pk} as {user.get_username()}: queued for attempt {run.attempt + 1}/{run.max_attempts}"
        )
