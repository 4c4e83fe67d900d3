"""``manage.py slot_loop``: the one-second loop alone — ticks, planning (docs/design.md §5, §7).

``runserve`` starts it as a child process; ``--once`` runs one iteration and exits. It
exits 1 when its tick thread failed (``ops.slot_loop.run_tick_emitter``).
"""

import gc

from django.core.management.base import BaseCommand

from lib.processes import stop_on_signals
from ops.process_rows import FORGET_SECONDS, keep_row
from ops.slot_loop import run_slot_loop
from runtime.registry import store


class Command(BaseCommand):
    help = "Run the slot loop: admit due ticks, plan admitted events, once a second."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="run one iteration and exit")

    def handle(self, *args, **options):
        stop = stop_on_signals()
        # The registry before anything touches the database: under runserve this waits for
        # the supervisor's shared registry, its go-ahead (runtime.registry.store).
        store.current()
        if stop.is_set():  # stopped, or its supervisor gone, while it waited: nothing to undo
            return
        # Everything alive now (Django, the registry: 100,000 objects at 10,000 loops) lives
        # as long as the process: out of the collector's sight, a full collection during a
        # burst walks what the burst made (it walked all of them: 50 ms in a 0.8 s burst).
        gc.freeze()
        # A long-running process keeps a row: host, pid, clock offset (§11), deleted when it stops.
        row = None if options["once"] else keep_row("slot-loop", stop)
        if not run_slot_loop(stop=stop, once=options["once"]):
            raise SystemExit(1)
        if row is not None:
            row.join(FORGET_SECONDS)
