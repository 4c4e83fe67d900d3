"""``manage.py emit_event TYPE --payload JSON``: the host clock bridge's last step alone (docs/host-clock.md; docs/design.md §10).

Signs a ``factory.event/v1`` envelope with ``FACTORY_EVENTS_SECRET`` and POSTs it to
``FACTORY_SERVE_URL``'s ``/events``, with ``source: "bridge"``. ``--event-id`` makes a
retry converge on one event (the default is a fresh ``emit:<uuid>`` per call);
``--subject`` defaults to the payload's ``repo``, else the type. Exit codes and the
one-line reasons are ``bridge run``'s: 0 admitted or duplicate, 1 bad arguments or no
secret, 2 serve unreachable, 3 signature refused, 4 event refused.
"""

import json
import sys
import uuid

from django.conf import settings
from django.core.management.base import BaseCommand
from django.utils import timezone

from lib.envelope import make_envelope
from schedules.bridge import EXIT_FAILED, SOURCE, BridgeError, emit_envelope


class Command(BaseCommand):
    help = (
        "POST one signed event to the running serve's /events (the bridge's last step): "
        "exit 0 admitted or duplicate, 1 bad input or no secret, 2 unreachable, 3 signature refused, 4 refused."
    )
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("type", help="a registered event type, e.g. factory.triage.requested")
        parser.add_argument("--payload", default="{}", help='the payload as a JSON object, e.g. \'{"repo": "factory"}\'')
        parser.add_argument("--event-id", help="the eventId (default: emit:<random uuid>); repeat it to converge")
        parser.add_argument("--subject", help="the envelope's subject (default: the payload's repo, else the type)")

    def fail(self, exit_code: int, reason: str) -> None:
        self.stderr.write(f"emit_event: {reason}")
        sys.exit(exit_code)

    def handle(self, *args, **options):
        # The host's clock, not the database's: the bridge is the host's timer and needs no
        # database (docs/host-clock.md); the serve checks its signature's timestamp (±300 s).
        now = timezone.now()
        try:
            payload = json.loads(options["payload"])
        except ValueError as exc:
            self.fail(EXIT_FAILED, f"--payload is not JSON: {exc}")
        if not isinstance(payload, dict):
            self.fail(EXIT_FAILED, "--payload must be a JSON object")
        event_id = options["event_id"] or f"emit:{uuid.uuid4()}"
        repo = payload.get("repo")
        envelope = make_envelope(
            event_id=event_id,
            type=options["type"],
            source=SOURCE,
            subject=options["subject"] or (repo if isinstance(repo, str) and repo else options["type"]),
            occurred_at=now,
            payload=payload,
        )
        try:
            emitted = emit_envelope(envelope, now=now, serve_url=settings.FACTORY_SERVE_URL,
                                    secret=settings.FACTORY_EVENTS_SECRET)
        except BridgeError as exc:
            self.fail(exc.exit_code, exc.detail)
        verb = "duplicate" if emitted.duplicate else "admitted"
        self.stdout.write(f"{verb}: {emitted.event_id}")
