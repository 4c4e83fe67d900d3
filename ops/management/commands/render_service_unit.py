"""``manage.py render_service_unit [--out FILE] [--user U] [--env-file F] [--bind H:P] …`` (docs/production.md).

Writes the systemd unit of ``runserve`` (``ops.service_unit``) for this checkout and its
virtualenv's interpreter, default ``deploy/systemd/factory-runserve.service``; prints
``wrote FILE`` or ``unchanged FILE``. Never installs, enables or starts anything.
"""

import re
import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from lib.listen_address import parse_bind
from ops.management.commands.runserve import shutdown_grace_seconds
from ops.service_unit import EXIT_REFUSED, UNIT_NAME, ServiceOptions, service_unit, worker_counts_refusal

DEFAULT_ENV_FILE = "/etc/factory/factory.env"
#: A name systemd takes for ``User=``/``Group=`` (as useradd makes them).
USER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}")


class Command(BaseCommand):
    help = "Write the systemd unit of runserve for this checkout (never installs it)."
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--out", type=Path, help=f"the unit file (default: deploy/systemd/{UNIT_NAME})")
        parser.add_argument("--user", default="factory", help="the service's user (default factory)")
        parser.add_argument("--group", help="the service's group (default: the user's name)")
        parser.add_argument("--env-file", default=DEFAULT_ENV_FILE, help=f"EnvironmentFile (default {DEFAULT_ENV_FILE})")
        parser.add_argument("--bind", default="127.0.0.1:7522", help="runserve --bind (default 127.0.0.1:7522)")
        parser.add_argument("--http-workers", type=int, default=2, help="runserve --http-workers (default 2)")
        parser.add_argument("--run-workers", type=int, default=1, help="runserve --run-workers (default 1)")

    def handle(self, *args, **options):
        if refusal := worker_counts_refusal(options["http_workers"], options["run_workers"]):
            raise CommandError(refusal, returncode=EXIT_REFUSED)
        if not Path(options["env_file"]).is_absolute():
            raise CommandError(f"--env-file must be an absolute path, not {options['env_file']!r}",
                               returncode=EXIT_REFUSED)
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in options["env_file"]):
            raise CommandError(f"--env-file must not hold control characters (a new line would end its line): "
                               f"{options['env_file']!r}", returncode=EXIT_REFUSED)
        for name in ("user", "group"):
            if options[name] is not None and not USER_NAME.fullmatch(options[name]):
                raise CommandError(f"--{name} {options[name]!r} is not a user or group name (letters, digits, _ . -; "
                                   "at most 32)", returncode=EXIT_REFUSED)
        try:
            parse_bind(options["bind"])
        except ValueError as exc:
            raise CommandError(str(exc), returncode=EXIT_REFUSED) from None
        base = Path(settings.BASE_DIR).absolute()
        unit = service_unit(ServiceOptions(
            python=str(Path(sys.executable).absolute()),
            manage=str(base / "manage.py"),
            workdir=str(base),
            env_file=options["env_file"],
            user=options["user"],
            group=options["group"] or options["user"],
            bind=options["bind"],
            http_workers=options["http_workers"],
            run_workers=options["run_workers"],
            stop_wait_seconds=shutdown_grace_seconds(),
        ))
        out = (options["out"] or base / "deploy" / "systemd" / UNIT_NAME).absolute()
        if out.is_file() and out.read_bytes() == unit:
            self.stdout.write(f"unchanged {out}")
            return
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(unit)
        except OSError as exc:
            raise CommandError(f"cannot write {out}: {exc.strerror or exc}") from None
        self.stdout.write(f"wrote {out}")
