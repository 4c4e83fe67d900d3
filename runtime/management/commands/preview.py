"""``manage.py preview ID --as USERNAME``: ask again for a pending proposal's preview (docs/design.md §8, Previews).

The preview — the mutating command's dry run — waits for a run worker's preview thread;
``proposals --json`` (or the proposal's page) shows what it found. Recorded as
``proposal_preview_requested`` by that user, with the OS user and ``via: "cli"``; exit 2
when refused (no permission, not pending, no preview declared, one already waiting or
running, or asked less than 10 s ago).
"""

from runtime import clock
from runtime.management.decision_command import DecisionCommand
from runtime.registry import store
from runtime.services.previews import request_preview, waiting_previews


class Command(DecisionCommand):
    help = "Ask again for a pending proposal's preview: its mutating command's dry run."

    def handle(self, *args, **options):
        user = self.operator(options["username"])
        self.decide(lambda: request_preview(
            options["proposal_id"], user=user, now=clock.database_now(), registry=store.current(), via="cli",
            os_user=self.os_user(),
        ))
        self.stdout.write(f"preview of proposal {options['proposal_id']} asked for as {user.get_username()}: "
                          f"{waiting_previews()} preview(s) waiting for a worker")
