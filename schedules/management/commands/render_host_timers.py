"""``manage.py render_host_timers --format launchd|systemd [--out DIR] [--log-dir DIR]`` (docs/host-clock.md; docs/design.md §10).

Renders one launchd plist, or one systemd ``.service`` + ``.timer`` pair, per enabled job
of config/schedule.yaml's ``jobs:`` mapping into ``--out`` (default ``deploy/<format>/``),
each calling ``bridge run JOB`` with absolute paths and logging to ``--log-dir`` (default
``var/log``). Prints one line per file (``wrote``, ``unchanged``, ``stale``); never installs,
loads or deletes anything. Exit 0; 1 when the registry does not load.
"""

import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from runtime.registry import RegistryInvalid, get_registry
from schedules.host_timers import FORMATS, HostPaths, render_host_timers


class Command(BaseCommand):
    help = (
        "Render host timers (launchd plists or systemd units) for the enabled bridge jobs of "
        "config/schedule.yaml into a directory; the operator installs them by hand."
    )
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--format", required=True, choices=FORMATS, help="launchd (macOS) or systemd (Linux)")
        parser.add_argument("--out", type=Path, help="the output directory (default: deploy/<format>/)")
        parser.add_argument("--log-dir", type=Path, help="where the timers append the bridge's output (default: var/log/)")

    def handle(self, *args, **options):
        try:
            registry = get_registry()
        except RegistryInvalid as exc:
            for error in exc.errors:
                self.stderr.write(str(error))
            self.stderr.write(f"render_host_timers: the registry does not load ({len(exc.errors)} error(s)); nothing rendered")
            sys.exit(1)
        fmt = options["format"]
        out_dir = (options["out"] or Path(settings.BASE_DIR) / "deploy" / fmt).absolute()
        paths = HostPaths.for_this_runtime(options["log_dir"])
        try:
            report = render_host_timers(registry.jobs, fmt=fmt, out_dir=out_dir, paths=paths)
        except OSError as exc:
            raise CommandError(f"cannot write to {out_dir}: {exc.strerror or exc}") from None
        for name in report.written:
            self.stdout.write(f"wrote {out_dir / name}")
        for name in report.unchanged:
            self.stdout.write(f"unchanged {out_dir / name}")
        for name, why in report.stale:
            self.stdout.write(f"stale {out_dir / name}: {why}; unload and remove it by hand (docs/host-clock.md)")
        if fmt == "launchd":
            for job in sorted(registry.jobs.values(), key=lambda j: j.name):
                if job.enabled and job.at:
                    self.stdout.write(
                        f"note: launchd fires {job.name} at {job.at} in the Mac's own time zone; "
                        f"the job declares {job.timezone}"
                    )
        if not report.written and not report.unchanged:
            self.stdout.write("no enabled job in config/schedule.yaml: nothing rendered")
        self.stdout.write(f"logs go to {paths.log_dir}; create it before installing (mkdir -p {paths.log_dir})")
