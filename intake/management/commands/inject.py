"""``manage.py inject FILE|-``: admit an envelope through the same intake, no signature (DESIGN §10).

Exit 0 when admitted or a duplicate (the output says which), 2 when refused (it says why).
"""

import json
import sys

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from intake.admission import AdmissionRefused, admit_event
from runtime.models import Door

EXIT_REFUSED = 2


class Command(BaseCommand):
    help = "Admit a factory.event/v1 envelope from FILE (or - for stdin) through the inject door."

    def add_arguments(self, parser):
        parser.add_argument("file", help="path of a JSON envelope, or - to read standard input")

    def read(self, name: str) -> str:
        if name == "-":
            return sys.stdin.read()
        try:
            with open(name, encoding="utf-8") as handle:
                return handle.read()
        except OSError as exc:
            raise CommandError(f"cannot read {name}: {exc.strerror}", returncode=EXIT_REFUSED) from None

    def refuse(self, errors: list[dict]) -> None:
        for error in errors:
            self.stderr.write(f"refused: {error['code']}: {error['detail']}")
        sys.exit(EXIT_REFUSED)

    def handle(self, *args, **options):
        text = self.read(options["file"])
        try:
            envelope = json.loads(text)
        except json.JSONDecodeError as exc:
            self.refuse([{"code": "invalid_json", "detail": str(exc)}])
        try:
            admission = admit_event(envelope, door=Door.INJECT, now=timezone.now())
        except AdmissionRefused as exc:
            self.refuse(exc.errors)
        if admission.duplicate:
            self.stdout.write(f"duplicate: {admission.event_id} was already admitted; nothing new was admitted")
        else:
            self.stdout.write(f"admitted: {admission.event_id}")
