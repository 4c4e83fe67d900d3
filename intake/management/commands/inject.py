"""``manage.py inject``: admit an envelope, or replay a raw GitHub delivery, with no signature (docs/design.md §10).

- ``inject FILE|-`` admits a ``factory.event/v1`` envelope through the ``inject`` door.
- ``inject --github-event KIND --delivery ID FILE|-`` replays a delivery body (the JSON
  GitHub shows under "Recent Deliveries") through the same translation as ``POST /github``
  (docs/intake.md: replays translate as deliveries do), and admits the result through the ``inject`` door, so the
  journal says the event came from an operator's replay rather than from GitHub.

Exit 0 when admitted or a duplicate (the output says which), 2 when refused or ignored (it says why).
"""

import sys

from django.core.management.base import BaseCommand, CommandError

from intake.door_admission import DoorAdmission
from intake.github import Ignored
from intake.services import receive_github_delivery
from lib.json_text import decode_json
from lib.refusals import Refused
from runtime import clock
from runtime.models import Door
from runtime.registry import RegistryInvalid, get_registry
from runtime.services.admission import admit_event

EXIT_REFUSED = 2


class Command(BaseCommand):
    help = (
        "Admit a factory.event/v1 envelope from FILE (or - for stdin) through the inject door; "
        "with --github-event and --delivery, replay a raw GitHub delivery body through the /github translation."
    )

    # A bad registry is reported as a refusal (exit 2, registry_invalid), not as a
    # system-check failure.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("file", help="path of a JSON envelope or delivery body, or - to read standard input")
        parser.add_argument(
            "--github-event", metavar="KIND",
            help="replay FILE as a GitHub delivery of this kind (the X-GitHub-Event header, e.g. pull_request)",
        )
        parser.add_argument(
            "--delivery", metavar="ID",
            help="the delivery's X-GitHub-Delivery GUID (required with --github-event)",
        )

    def read(self, name: str) -> bytes:
        if name == "-":
            return sys.stdin.buffer.read()
        try:
            with open(name, "rb") as handle:
                return handle.read()
        except OSError as exc:
            raise CommandError(f"cannot read {name}: {exc.strerror}", returncode=EXIT_REFUSED) from None

    def refuse(self, errors: list[dict]) -> None:
        for error in errors:
            self.stderr.write(f"refused: {error['code']}: {error['detail']}")
        sys.exit(EXIT_REFUSED)

    def handle(self, *args, **options):
        if options["delivery"] is not None and options["github_event"] is None:
            raise CommandError("--delivery only makes sense with --github-event", returncode=EXIT_REFUSED)
        try:
            get_registry()
        except RegistryInvalid as exc:
            self.refuse([{"code": "registry_invalid", "detail": str(error)} for error in exc.errors])
        raw = self.read(options["file"])
        try:
            document = decode_json(raw)
        except Refused as exc:
            self.refuse(exc.as_errors())
        now = clock.database_now()
        if options["github_event"] is None:
            try:
                result = admit_event(document, door=Door.INJECT, now=now)
            except Refused as exc:
                self.refuse(exc.as_errors())
        else:
            result = receive_github_delivery(
                options["github_event"], options["delivery"], document, door=Door.INJECT, now=now,
            )
            if isinstance(result, Ignored):
                self.stderr.write(f"ignored: {result.reason}: {result.detail}")
                sys.exit(EXIT_REFUSED)
            if not isinstance(result, DoorAdmission):
                self.refuse(result.errors)
        if result.duplicate:
            self.stdout.write(f"duplicate: {result.event_id} was already admitted; nothing new was admitted")
        else:
            self.stdout.write(f"admitted: {result.event_id}")
