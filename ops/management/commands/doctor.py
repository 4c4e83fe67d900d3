"""``manage.py doctor``: print the ``/status`` document; exit 1 when any anomaly stands (docs/design.md §10, §11).

Meant for a cron job or a monitor: the slot loop not turning, a stopped loop, a pile-up
of proposals or an invalid registry on disk each make it exit 1. It runs even when the
registry does not validate (system checks are skipped), since saying so is its job.
"""

import json
import sys

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import DatabaseError

from ops.doctor import collect_status
from runtime import clock

EXIT_ANOMALY = 1


class Command(BaseCommand):
    help = "Print the runtime's status document (as GET /status); exit 1 when there is any anomaly."
    requires_system_checks = []

    def handle(self, *args, **options):
        try:
            document = collect_status(now=clock.database_now())
        except DatabaseError as exc:
            # An unmigrated or unreachable database is itself the anomaly to page about.
            document = {
                "ok": False,
                "anomalies": ["databaseUnavailable"],
                "detail": f"{exc.__class__.__name__}: {exc}; is the database reachable and migrated (manage.py migrate)?",
            }
        # As GET /status: the product's version first.
        self.stdout.write(json.dumps({"version": settings.PRODUCT_VERSION, **document}, indent=2))
        if not document["ok"]:
            sys.exit(EXIT_ANOMALY)
