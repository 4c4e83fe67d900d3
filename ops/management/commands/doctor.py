"""``manage.py doctor``: the ``/status`` document; exit 1 when any anomaly stands (docs/design.md §10, §11).

Meant for a cron job or a monitor: the slot loop not turning, a stopped loop, a pile-up
of proposals or an invalid registry on disk each make it exit 1. It runs even when the
registry does not validate (system checks are skipped), since saying so is its job.

What it prints depends on who reads it: on a terminal, the document in words
(``ops.doctor_text``: ``ok`` or ``N anomalies``, then a line per anomaly); anywhere else —
a pipe, a file, a monitor — the JSON document, exactly as ``GET /status``. ``--json`` and
``--text`` choose either whatever the output is. The exit status is the same for both.
"""

import json
import sys

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import DatabaseError

from ops.doctor import collect_status
from ops.doctor_text import doctor_lines
from runtime import clock
from runtime.management.local_times import add_local_argument, localized_output

EXIT_ANOMALY = 1


class Command(BaseCommand):
    help = (
        "Print the runtime's status (as GET /status): in words on a terminal, else the JSON document; "
        "exit 1 when there is any anomaly."
    )
    requires_system_checks = []

    def add_arguments(self, parser):
        shape = parser.add_mutually_exclusive_group()
        shape.add_argument("--json", action="store_true", help="print the JSON document, even on a terminal")
        shape.add_argument("--text", action="store_true", help="print the summary in words, even when not on a terminal")
        add_local_argument(parser)

    def handle(self, *args, **options):
        now = None
        try:
            now = clock.database_now()
            document = collect_status(now=now)
        except DatabaseError as exc:
            # An unmigrated or unreachable database is itself the anomaly to page about.
            document = {
                "ok": False,
                "anomalies": ["databaseUnavailable"],
                "detail": f"{exc.__class__.__name__}: {exc}; is the database reachable and migrated (manage.py migrate)?",
            }
        as_text = options["text"] or (not options["json"] and self.stdout.isatty())
        with localized_output(self, {"local": options["local"], "json": not as_text}):
            if as_text:
                self.stdout.write("\n".join(doctor_lines(document, now)))
            else:
                self.stdout.write(json.dumps({"version": settings.PRODUCT_VERSION, **document}, indent=2))
        if not document["ok"]:
            sys.exit(EXIT_ANOMALY)
