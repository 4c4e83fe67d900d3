"""``manage.py notify [--once]``: the notifier (docs/notifications.md).

Raises and clears alerts (doctor anomalies, proposals waiting longer than
``FACTORY_NOTIFY_PROPOSAL_WAIT_SECONDS``) and sends their notifications by e-mail and/or
webhook, retrying with back-off. ``runserve`` starts it when a channel is configured;
``--once`` makes one pass, sends what is due and exits. With no channel configured it says
so and exits 0.
"""

from django.core.management.base import BaseCommand

from lib.processes import stop_on_signals
from ops.notifier import run_notifier
from ops.notify import channels


class Command(BaseCommand):
    help = "Notify by e-mail and/or webhook when an anomaly or a waiting proposal is raised and cleared."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="one pass, send what is due, exit")

    def handle(self, *args, **options):
        if not channels():
            self.stdout.write("notifications are off: set FACTORY_NOTIFY_EMAIL_TO and/or FACTORY_NOTIFY_WEBHOOK_URL")
            return
        run_notifier(stop=stop_on_signals(), once=options["once"])
