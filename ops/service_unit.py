"""The systemd unit of ``runserve`` (docs/production.md, "The service").

``service_unit`` renders it from absolute paths and the service's options; the same input
gives the same bytes, so a re-render shows whether anything changed. What it says and why:

- ``Restart=on-failure``: runserve exits non-zero when any of its children dies
  (docs/design.md §10), and systemd starts it again after ``RestartSec``; a clean stop
  (exit 0) stays stopped.
- ``KillMode=mixed``: ``systemctl stop`` sends SIGTERM to runserve alone, which stops its
  children in order and lets a run's command have its grace (``FACTORY_STOP_GRACE_SECONDS``);
  only past ``TimeoutStopSec`` does systemd SIGKILL the whole group.
- ``TimeoutStopSec``: runserve's own wait for its children
  (``runserve.shutdown_grace_seconds``: the stop grace, the command's kill grace, the
  keeper's exit and slack) plus ``STOP_MARGIN_SECONDS``, so systemd never cuts that short.
- ``User``/``Group``, ``WorkingDirectory`` (the checkout) and ``EnvironmentFile`` (the
  production settings, config/production.env.example); ``UMask=0077`` as ``bin/serve``.
- No ``ExecStartPre=migrate``: with several runserves on one database, migrations are an
  operator's step before the start (runserve refuses an unmigrated database).
"""

from dataclasses import dataclass

from schedules.host_timers import systemd_escape

#: Beyond runserve's own wait for its children, before systemd kills the group.
STOP_MARGIN_SECONDS = 5
#: After a failure, before systemd starts runserve again.
RESTART_SECONDS = 5
UNIT_NAME = "factory-runserve.service"
#: The most HTTP or run workers ``runserve`` starts: a slip of the keyboard (``--http-workers
#: 2000``) would fork that many processes, each with its own database connection.
MAX_WORKERS = 256
#: A bad ``--bind``, ``--http-workers`` or ``--run-workers`` exits 2, as argparse's usage errors.
EXIT_REFUSED = 2


def worker_counts_refusal(http_workers: int, run_workers: int) -> str | None:
    """The line refusing ``runserve``'s worker counts, naming the option and its value, or None.
    Pure."""
    for name, value, low in (("--http-workers", http_workers, 1), ("--run-workers", run_workers, 0)):
        if not low <= value <= MAX_WORKERS:
            return f"{name} takes a whole number from {low} to {MAX_WORKERS}, not {value}"
    return None


@dataclass(frozen=True)
class ServiceOptions:
    """What the unit names: paths are absolute; ``stop_wait_seconds`` is runserve's own wait."""

    python: str
    manage: str
    workdir: str
    env_file: str
    user: str
    group: str
    bind: str
    http_workers: int
    run_workers: int
    stop_wait_seconds: float


def service_unit(options: ServiceOptions) -> bytes:
    """The unit file's bytes."""
    argv = [
        options.python, options.manage, "runserve", "--bind", options.bind,
        "--http-workers", str(options.http_workers), "--run-workers", str(options.run_workers),
    ]
    stop_seconds = int(options.stop_wait_seconds + 0.999) + STOP_MARGIN_SECONDS
    text = (
        "# Rendered by `manage.py render_service_unit`; install it by hand (docs/production.md).\n"
        "[Unit]\n"
        "Description=Factory event runtime (runserve: HTTP, slot loop, run workers)\n"
        "After=network-online.target postgresql.service\n"
        "Wants=network-online.target\n"
        "\n[Service]\n"
        "Type=simple\n"
        f"User={options.user}\n"
        f"Group={options.group}\n"
        f"WorkingDirectory={systemd_escape(options.workdir)}\n"
        f"EnvironmentFile={systemd_escape(options.env_file)}\n"
        f"ExecStart={' '.join(systemd_escape(arg) for arg in argv)}\n"
        "Restart=on-failure\n"
        f"RestartSec={RESTART_SECONDS}\n"
        "KillMode=mixed\n"
        "KillSignal=SIGTERM\n"
        f"TimeoutStopSec={stop_seconds}\n"
        "UMask=0077\n"
        "StandardOutput=journal\n"
        "StandardError=journal\n"
        "SyslogIdentifier=factory\n"
        "\n[Install]\n"
        "WantedBy=multi-user.target\n"
    )
    return text.encode()
