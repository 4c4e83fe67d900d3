"""The one-way renderer of host timers for the host clock bridge (docs/host-clock.md; docs/design.md §1, §10).

For every **enabled** job of ``Registry.jobs`` it renders either a launchd plist (macOS)
or a systemd ``.service`` + ``.timer`` pair (Linux) whose only act is
``<python> <manage.py> bridge run <job>``, with absolute paths, the project directory as
working directory, and stdout and stderr appended to ``<log dir>/bridge-<job>.log``.
Nothing else: no environment (the bridge reads the secret from the project's ``.env``),
no shell, no keep-alive.

The renderer writes files into one output directory and never installs, loads or edits
anything on the host: installing is the operator's act (docs/host-clock.md). Output is
byte-stable — the same jobs and paths give the same bytes, and a file whose bytes would
not change is not rewritten. A disabled (or removed) job renders nothing; a file it left
in the output directory is reported as stale, never deleted, since it may be installed.
"""

import plistlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from lib.cadence import WEEKDAYS
from runtime.registry import Job

from .bridge import DRY_TIMEOUT_SECONDS, GATE_TIMEOUT_SECONDS, POST_TIMEOUT_SECONDS

FORMATS = ("launchd", "systemd")
LAUNCHD_LABEL_PREFIX = "factory.bridge."
SYSTEMD_UNIT_PREFIX = "factory-bridge-"
#: The bridge's own time-outs plus half a minute for the interpreter and Django to start:
#: systemd stops a oneshot that outlives it, and nothing legitimate takes longer.
SYSTEMD_TIMEOUT_START_SECONDS = GATE_TIMEOUT_SECONDS + DRY_TIMEOUT_SECONDS + POST_TIMEOUT_SECONDS + 30
#: launchd's ``Weekday`` counts from Sunday = 0; systemd writes three-letter English names.
LAUNCHD_WEEKDAY = {day: (index + 1) % 7 for index, day in enumerate(WEEKDAYS)}
SYSTEMD_WEEKDAY = {day: day.capitalize() for day in WEEKDAYS}
STALE_PATTERNS = {
    "launchd": re.compile(r"^" + re.escape(LAUNCHD_LABEL_PREFIX) + r"([a-z0-9][a-z0-9-]*)\.plist$"),
    "systemd": re.compile(r"^" + re.escape(SYSTEMD_UNIT_PREFIX) + r"([a-z0-9][a-z0-9-]*)\.(?:service|timer)$"),
}


@dataclass(frozen=True)
class HostPaths:
    """Absolute paths a rendered timer names: interpreter, ``manage.py``, working and log directories."""

    python: str
    manage: str
    workdir: str
    log_dir: str

    @classmethod
    def for_this_runtime(cls, log_dir: Path | None = None) -> "HostPaths":
        """This runtime's interpreter (the virtualenv's, not resolved through its symlink)
        and project; logs under ``var/log`` unless ``log_dir`` says otherwise."""
        base = Path(settings.BASE_DIR).absolute()
        return cls(
            python=str(Path(sys.executable).absolute()),
            manage=str(base / "manage.py"),
            workdir=str(base),
            log_dir=str((log_dir or base / "var" / "log").absolute()),
        )

    def log_file(self, job: Job) -> str:
        return f"{self.log_dir}/bridge-{job.name}.log"

    def argv(self, job: Job) -> list[str]:
        return [self.python, self.manage, "bridge", "run", job.name]


@dataclass(frozen=True)
class RenderReport:
    """File names written, left unchanged, and stale ``(file name, why)`` in the output directory."""

    written: tuple[str, ...]
    unchanged: tuple[str, ...]
    stale: tuple[tuple[str, str], ...]


def cadence_text(job: Job) -> str:
    if job.every:
        return f"every {job.every}"
    days = f" on {','.join(job.days)}" if job.days else ""
    return f"at {job.at} {job.timezone}{days}"


# --- launchd ---------------------------------------------------------------------------------
def launchd_file_name(job: Job) -> str:
    return f"{LAUNCHD_LABEL_PREFIX}{job.name}.plist"


def launchd_plist(job: Job, paths: HostPaths) -> bytes:
    """An XML plist: ``StartInterval`` (seconds) for ``every``, ``StartCalendarInterval``
    (one dict, or one per weekday) for a calendar time. launchd reads calendar fields in
    the Mac's own time zone; the bridge still computes the slot in the job's zone."""
    document = {
        "Label": f"{LAUNCHD_LABEL_PREFIX}{job.name}",
        "ProgramArguments": paths.argv(job),
        "WorkingDirectory": paths.workdir,
        "StandardOutPath": paths.log_file(job),
        "StandardErrorPath": paths.log_file(job),
    }
    if job.cadence_seconds is not None:
        document["StartInterval"] = job.cadence_seconds
    else:
        hour, minute = (int(part) for part in job.at.split(":"))
        entries = [{"Weekday": LAUNCHD_WEEKDAY[day], "Hour": hour, "Minute": minute} for day in job.days]
        document["StartCalendarInterval"] = entries or {"Hour": hour, "Minute": minute}
    return plistlib.dumps(document, fmt=plistlib.FMT_XML, sort_keys=True)


# --- systemd ---------------------------------------------------------------------------------
def systemd_escape(value: str) -> str:
    """A value for a unit file: ``%`` doubled (specifiers), quoted when it holds whitespace,
    quotes or backslashes (ExecStart's argument splitting)."""
    value = value.replace("%", "%%")
    if re.search(r'[\s"\'\\]', value):
        value = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return value


def systemd_unit_name(job: Job, suffix: str) -> str:
    return f"{SYSTEMD_UNIT_PREFIX}{job.name}.{suffix}"


def systemd_units(job: Job, paths: HostPaths) -> dict[str, bytes]:
    """The ``.service`` (a oneshot running the bridge) and its ``.timer``: monotonic
    ``OnActiveSec``/``OnUnitActiveSec`` for ``every`` (as launchd's StartInterval), or
    ``OnCalendar`` in the job's zone with ``Persistent=true`` for a calendar time."""
    header = (
        "# Rendered by `manage.py render_host_timers --format systemd` from the jobs: mapping of\n"
        "# config/schedule.yaml. The runtime never installs or edits it (docs/host-clock.md).\n"
    )
    log = systemd_escape(paths.log_file(job))
    service = (
        f"{header}[Unit]\n"
        f"Description=Factory host clock bridge: job {job.name} admits {job.event_type}\n"
        "\n[Service]\n"
        "Type=oneshot\n"
        f"WorkingDirectory={systemd_escape(paths.workdir)}\n"
        f"ExecStart={' '.join(systemd_escape(arg) for arg in paths.argv(job))}\n"
        f"StandardOutput=append:{log}\n"
        f"StandardError=append:{log}\n"
        f"TimeoutStartSec={SYSTEMD_TIMEOUT_START_SECONDS}\n"
    )
    if job.cadence_seconds is not None:
        when = f"OnActiveSec={job.cadence_seconds}s\nOnUnitActiveSec={job.cadence_seconds}s\n"
    else:
        days = ",".join(SYSTEMD_WEEKDAY[day] for day in job.days)
        when = f"OnCalendar={days + ' ' if days else ''}*-*-* {job.at}:00 {job.timezone}\nPersistent=true\n"
    timer = (
        f"{header}[Unit]\n"
        f"Description=Factory host clock bridge timer: job {job.name} {cadence_text(job)}\n"
        "\n[Timer]\n"
        f"{when}"
        f"Unit={systemd_unit_name(job, 'service')}\n"
        "\n[Install]\n"
        "WantedBy=timers.target\n"
    )
    return {systemd_unit_name(job, "service"): service.encode(), systemd_unit_name(job, "timer"): timer.encode()}


# --- rendering -------------------------------------------------------------------------------
def rendered_files(jobs: dict[str, Job], fmt: str, paths: HostPaths) -> dict[str, bytes]:
    """File name → bytes for every enabled job, in ``fmt`` (``launchd`` or ``systemd``)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    files: dict[str, bytes] = {}
    for job in sorted(jobs.values(), key=lambda j: j.name):
        if not job.enabled:
            continue
        if fmt == "launchd":
            files[launchd_file_name(job)] = launchd_plist(job, paths)
        else:
            files.update(systemd_units(job, paths))
    return files


def render_host_timers(jobs: dict[str, Job], *, fmt: str, out_dir: Path, paths: HostPaths) -> RenderReport:
    """Write the timers of ``jobs`` into ``out_dir`` (created if missing) and report.

    A file whose bytes are already right is left alone (``unchanged``). A file of the
    format's naming pattern that no enabled job renders is ``stale``: reported with the
    reason (the job is disabled, or not in config/schedule.yaml), never deleted.
    """
    files = rendered_files(jobs, fmt, paths)
    out_dir.mkdir(parents=True, exist_ok=True)
    written, unchanged = [], []
    for name, content in files.items():
        path = out_dir / name
        if path.is_file() and path.read_bytes() == content:
            unchanged.append(name)
            continue
        path.write_bytes(content)
        written.append(name)
    stale = []
    for path in sorted(out_dir.iterdir()):
        match = STALE_PATTERNS[fmt].fullmatch(path.name)
        if match is None or path.name in files:
            continue
        job = jobs.get(match.group(1))
        why = f"job {match.group(1)} is disabled" if job is not None else f"job {match.group(1)} is not in config/schedule.yaml"
        stale.append((path.name, why))
    return RenderReport(tuple(written), tuple(unchanged), tuple(stale))
