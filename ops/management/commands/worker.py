"""``manage.py worker``: a standalone run worker (docs/design.md §8, §10).

Claims queued runs under a lease and executes them; SIGTERM or Ctrl-C lets the
current run finish within ``FACTORY_STOP_GRACE_SECONDS``, then kills its command and
records the attempt as interrupted. ``--once`` works until the queue is empty, then exits.
"""

from django.core.management.base import BaseCommand

from lib.processes import stop_on_signals
from ops.process_rows import FORGET_SECONDS, keep_row
from ops.worker import run_worker


class Command(BaseCommand):
    help = "Run queued runs: claim with a lease, execute through the adapter, record the outcome."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="exit when the queue is empty")

    def handle(self, *args, **options):
        stop = stop_on_signals()
        # A long-running process keeps a row: host, pid, clock offset (§11), deleted when it stops.
        row = None if options["once"] else keep_row("worker", stop)
        run_worker(stop=stop, once=options["once"])
        if row is not None:
            row.join(FORGET_SECONDS)
