"""Start-up invariants as system checks (docs/design.md §4).

``runtime.E001``: the registry does not validate (one error per problem, naming the
file, the entry and the rule). ``runtime.E002``: time is not UTC-aware.
``runtime.E003``: a ``FACTORY_*`` knob is out of range. ``runtime.E004``: an intake
secret is blank but not empty, or the two intake secrets are the same. ``runtime.W001``: the factory
root does not exist (command definitions would fail at run time). ``runtime.W002``:
``FACTORY_CONFIG_DIR`` does not exist or is not a directory (the runtime would run without
its overlay and repos, and say nothing).
"""

import os
import stat
from pathlib import Path

from django.conf import settings
from django.core.checks import Error, Warning, register

from runtime.registry import RegistryInvalid, store

REGISTRY_TAG = "factory_registry"


@register(REGISTRY_TAG)
def check_registry(app_configs=None, **kwargs):
    store.reset()
    try:
        store.current()
    except RegistryInvalid as exc:
        return [Error(str(err), hint="fix the file and run `manage.py registry check`", id="runtime.E001") for err in exc.errors]
    return []


@register()
def check_time_settings(app_configs=None, **kwargs):
    if settings.USE_TZ is not True or settings.TIME_ZONE != "UTC":
        return [Error("USE_TZ must be True and TIME_ZONE 'UTC': every instant in the runtime is aware UTC", id="runtime.E002")]
    return []


#: Lower bounds of the numeric knobs, and why each exists.
KNOB_MINIMUMS = {
    "FACTORY_CATCHUP_LIMIT": (1, "a catchUp: all loop must be able to fire at least one slot"),
    "FACTORY_PILEUP_THRESHOLD": (0, "a count of pending proposals"),
    "FACTORY_PAUSE_WARN_SECONDS": (60, "a pause is an anomaly only once it has outlived a slot or two, never at once"),
    "FACTORY_BACKLOG_WARN_SECONDS": (60, "a run waits for a free worker a little; a backlog is one that outlived a minute or more"),
    "FACTORY_BACKLOG_WARN_RUNS": (1, "a count of queued runs; 0 would call an idle queue backed up"),
    "FACTORY_LEASE_SECONDS": (2, "workers renew a lease at most once a second; a shorter lease would lapse between renewals"),
    "FACTORY_STOP_GRACE_SECONDS": (0, "how long a stopping worker lets its current run go on"),
    "FACTORY_STDOUT_CAP_BYTES": (1024, "a run's result line must fit in its captured output"),
    "FACTORY_HTTP_READ_SECONDS": (1, "a request must have time to arrive; only slow clients should run out of it"),
    "FACTORY_PREVIEW_QUEUE": (0, "a count of waiting previews (0: previews only when a person asks)"),
    "FACTORY_PREVIEW_MAX_AGE_SECONDS": (1, "the age past which a preview is called stale"),
    "FACTORY_EARN_WINDOW_DAYS": (7, "spec §6: a loop earns auto by being watched for a week; a setting may ask for longer, never less"),
    "FACTORY_EARN_MIN_RUNS": (10, "the fewest runs a person approves before a loop earns auto; a setting may ask for more, never fewer"),
}


@register()
def check_knobs(app_configs=None, **kwargs):
    problems = []
    for name, (minimum, why) in KNOB_MINIMUMS.items():
        value = getattr(settings, name)
        if value < minimum:
            problems.append(Error(f"{name}={value} is below {minimum}: {why}", id="runtime.E003"))
    if not Path(settings.FACTORY_ROOT).is_dir():
        problems.append(Warning(
            f"FACTORY_ROOT {settings.FACTORY_ROOT} is not a directory; command definitions using {{factoryRoot}} will fail",
            id="runtime.W001",
        ))
    return problems


def config_dir_problem(path: Path) -> str | None:
    """What is wrong with ``path`` as the config directory, in words ("does not exist", "is
    not a directory", "cannot be looked at: <reason>"); None when it is a directory."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "does not exist"
    except OSError as exc:
        return f"cannot be looked at: {exc.strerror or exc}"
    return None if stat.S_ISDIR(mode) else "is not a directory"


@register()
def check_config_dir(app_configs=None, **kwargs):
    """``runtime.W002``. A missing directory reads as one with no ``schedule.yaml`` or
    ``repos.yaml``, so a typo in a unit file would silently drop the overlay and every repo:
    a warning, not an error, since the runtime works without them (the kernel's loops run).
    A path that is not a directory is already fatal (``runtime.E001``, ``unreadable_file``
    for each file); the warning then names the setting behind those errors."""
    path = Path(settings.FACTORY_CONFIG_DIR)
    problem = config_dir_problem(path)
    if problem is None:
        return []
    if problem == "does not exist":
        effect = ("the runtime runs without its overlay (schedule.yaml) and its repos (repos.yaml): "
                  "no overlay loops, no repo loops, every GitHub delivery unconfigured_repo")
    else:
        effect = "its schedule.yaml and repos.yaml cannot be read (runtime.E001 names each)"
    return [Warning(
        f"FACTORY_CONFIG_DIR {path} {problem}: {effect}",
        hint="create the directory, or correct FACTORY_CONFIG_DIR in .env or the service's environment",
        id="runtime.W002",
    )]


INTAKE_SECRETS = ("FACTORY_EVENTS_SECRET", "FACTORY_GITHUB_WEBHOOK_SECRET")


@register()
def check_intake_secrets(app_configs=None, **kwargs):
    """docs/intake.md: GitHub signs the raw body with no timestamp, so one secret across both
    schemes would let a capture from the weaker one replay against the stronger."""
    problems = []
    for name in INTAKE_SECRETS:
        value = getattr(settings, name)
        if value and not value.strip():
            problems.append(Error(f"{name} is only whitespace; leave it empty to disable its route", id="runtime.E004"))
    events, github = (getattr(settings, name) for name in INTAKE_SECRETS)
    if events and events == github:
        problems.append(Error(
            "FACTORY_EVENTS_SECRET and FACTORY_GITHUB_WEBHOOK_SECRET are the same; use two different secrets (docs/intake.md)",
            id="runtime.E004",
        ))
    return problems
