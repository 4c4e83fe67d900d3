"""``manage.py bridge run JOB``: the host clock bridge, as a host timer calls it (docs/host-clock.md; docs/design.md §10).

Gate command, dry command, then a signed ``POST /events`` to ``FACTORY_SERVE_URL`` with
eventId ``bridge:<job>:<slot>`` (``schedules.bridge``). Prints one line: the eventId
admitted, the duplicate, or the gate's reason to skip. Exit 0 for those three; otherwise
one line on stderr and ``EXIT_FAILED`` (1: unknown or disabled job, invalid registry, gate
or dry command failure, no secret), ``EXIT_UNREACHABLE`` (2), ``EXIT_SIGNATURE_REFUSED``
(3) or ``EXIT_EVENT_REFUSED`` (4). It needs no database: only the registry files and the
running serve.
"""

import sys

from django.conf import settings
from django.core.management.base import BaseCommand
from django.utils import timezone

from runtime.registry import RegistryInvalid, get_registry
from schedules.bridge import EXIT_FAILED, BridgeError, run_job


class Command(BaseCommand):
    help = (
        "Run one host-clock bridge job: its gate command, its dry command, then a signed POST /events "
        "to FACTORY_SERVE_URL. Exit 0 admitted, duplicate or gated; 1 job or command failure, "
        "2 serve unreachable, 3 signature refused, 4 event refused."
    )
    requires_system_checks = []

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        run = sub.add_parser("run", help="run one job of config/schedule.yaml's jobs: mapping")
        run.add_argument("job", help="the job's name")

    def fail(self, exit_code: int, reason: str) -> None:
        self.stderr.write(f"bridge: {reason}")
        sys.exit(exit_code)

    def handle(self, *args, **options):
        # The host's clock, not the database's: the bridge is the host's timer and needs no
        # database (docs/host-clock.md); the serve checks its signature's timestamp (±300 s).
        now = timezone.now()
        try:
            registry = get_registry()
        except RegistryInvalid as exc:
            self.fail(EXIT_FAILED, f"the registry does not load ({len(exc.errors)} error(s); first: {exc.errors[0]})")
        job = registry.jobs.get(options["job"])
        if job is None:
            known = ", ".join(sorted(registry.jobs)) or "none"
            self.fail(EXIT_FAILED, f"no job {options['job']!r} in config/schedule.yaml (jobs: {known})")
        try:
            outcome = run_job(job, now=now, serve_url=settings.FACTORY_SERVE_URL, secret=settings.FACTORY_EVENTS_SECRET)
        except BridgeError as exc:
            self.fail(exc.exit_code, exc.detail)
        if outcome.skipped:
            self.stdout.write(f"skipped: {job.name}: the gate says nothing to do: {outcome.gate_reason}")
        elif outcome.emitted.duplicate:
            self.stdout.write(f"duplicate: {outcome.emitted.event_id} was already admitted")
        else:
            self.stdout.write(f"admitted: {outcome.emitted.event_id}")
