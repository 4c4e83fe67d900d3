"""``manage.py health``: the heartbeat's report (``ops.health.health_report``) as one line.

Prints one ``factory.command-result/v1`` line, ``HEALTHY`` or ``DEGRADED``; writes nothing
and exits 0 even when degraded: the report is the result. The heartbeat loop itself runs
the same report inside the worker (the builtin ``health``), not this command.
"""

import json

from django.core.management.base import BaseCommand
from django.db import DatabaseError
from django.utils import timezone

from ops.health import health_report
from runtime import clock


class Command(BaseCommand):
    help = "Report the runtime's own health as a factory.command-result/v1 line (read-only)."
    requires_system_checks = []

    def handle(self, *args, **options):
        try:
            now = clock.database_now()
        except DatabaseError:
            # The report itself says the database is unreachable; the instant is then moot.
            now = timezone.now()
        self.stdout.write(json.dumps(health_report(now)))
