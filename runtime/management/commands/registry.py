"""``manage.py registry check|digest``: validate the registry; print its digest (docs/design.md §4, §10).

Runs even when the registry is bad (it is how an operator learns what is wrong): it
skips the system checks and exits 1 with one line per error.
"""

import json

from django.conf import settings
from django.core.management.base import BaseCommand

from runtime.registry import RegistryInvalid, load_registry


class Command(BaseCommand):
    help = "Validate the registry and overlay (check) or print the registry digest (digest)."
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument(
            "action", choices=["check", "digest"],
            help="check: validate the registry and overlay; digest: print the registry digest",
        )
        parser.add_argument("--json", action="store_true", help="print a JSON document")

    def handle(self, *args, **options):
        try:
            registry = load_registry(settings.FACTORY_REGISTRY_DIR, settings.FACTORY_CONFIG_DIR)
        except RegistryInvalid as exc:
            if options["json"]:
                self.stdout.write(json.dumps({"ok": False, "errors": [e.as_dict() for e in exc.errors]}, indent=2))
            else:
                for error in exc.errors:
                    self.stderr.write(str(error))
                self.stderr.write(f"registry invalid: {len(exc.errors)} error(s)")
            raise SystemExit(1) from None
        if options["action"] == "digest":
            self.stdout.write(json.dumps({"registryDigest": registry.digest}) if options["json"] else registry.digest)
            return
        summary = {
            "ok": True,
            "registryDigest": registry.digest,
            "eventTypes": len(registry.event_types),
            "definitions": len(registry.definitions),
            "edges": len(registry.edges),
            "loops": len(registry.loops),
        }
        if options["json"]:
            self.stdout.write(json.dumps(summary, indent=2))
        else:
            self.stdout.write(
                f"registry ok: {summary['eventTypes']} event types, {summary['definitions']} definitions, "
                f"{summary['edges']} edges, {summary['loops']} loops; digest {registry.digest}"
            )
