"""What the benchmarks that start ``runserve`` processes share: their environment, free
loopback ports, start in a process group of their own, and a bounded stop.

Not a test. Each ``runserve`` leads its own process group (``start_new_session``), so a
stop reaches its gunicorn, slot loop and run workers too, and dies with the benchmark
(``lib.processes.die_with_parent``) even when the benchmark is killed.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import bench_env

MANAGE = str(bench_env.BASE_DIR / "manage.py")
#: How long a stopped ``runserve`` group gets after SIGTERM before SIGKILL, in seconds.
STOP_GRACE_SECONDS = 30


def free_port() -> int:
    """A loopback port nobody listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def runtime_env(root: Path, database_url: str, registry_dir: Path, config_dir: Path) -> dict[str, str]:
    """The environment of a ``runserve`` on ``database_url`` with that registry and config:
    this process's environment less its FACTORY_/DJANGO_/DATABASE_ settings."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("FACTORY_", "DJANGO_", "DATABASE_"))},
        "DATABASE_URL": database_url,
        "DJANGO_SECRET_KEY": "serve-bench-secret-key",
        "FACTORY_REGISTRY_DIR": str(registry_dir),
        "FACTORY_CONFIG_DIR": str(config_dir),
        "FACTORY_RUNS_DIR": str(root / "runs"),
        "FACTORY_OPERATOR_PASSWORD": "bench-operator-pass",
        "FACTORY_LOG_LEVEL": bench_env.LOG_LEVEL,
    }


def watched_reaper_registry(root: Path, loops: int, every: str, prefix: str) -> tuple[Path, Path]:
    """A copy of the kernel registry whose ``schedules.json`` holds ``loops`` enabled watched
    copies of ``reaper`` every ``every`` (``"1m"``, ``"5s"``), named ``<prefix>-00000``…, and
    an empty config directory: each tick is planned into a proposal."""
    registry_dir, config_dir = root / "registry", root / "config"
    shutil.copytree(bench_env.BASE_DIR / "registry", registry_dir)
    config_dir.mkdir()
    schedules = json.loads((registry_dir / "schedules.json").read_text())
    template = {**schedules["reaper"], "every": every, "enabled": True}
    (registry_dir / "schedules.json").write_text(json.dumps({f"{prefix}-{i:05d}": template for i in range(loops)}))
    return registry_dir, config_dir


def prepare_runtime(root: Path, database_url: str | None, registry_dir: Path, config_dir: Path) -> tuple[dict, str]:
    """Make the bench's database (``bench_env.prepare_database``), set this process's Django up
    on it and that registry, and close its connection before any ``runserve`` starts.
    Returns the ``runserve`` environment (``runtime_env``) and the database's version."""
    url = bench_env.prepare_database(database_url, root)
    env = runtime_env(root, url, registry_dir, config_dir)
    bench_env.setup_django({k: v for k, v in env.items() if k.startswith(("FACTORY_", "DATABASE_"))})
    from django.db import connection

    version = bench_env.database_version()
    connection.close()
    return env, version


def _own_group_dying_with_parent() -> None:
    # Popen has already called setsid() when it runs this.
    from lib.processes import die_with_parent

    die_with_parent()


def start_runserve(
    env: dict[str, str], *, port: int, log, run_workers: int = 1, http_workers: int = 1
) -> subprocess.Popen:
    """``manage.py runserve`` on ``127.0.0.1:port``, output to ``log``, in its own process group."""
    argv = [
        sys.executable,
        MANAGE,
        "runserve",
        "--bind",
        f"127.0.0.1:{port}",
        "--http-workers",
        str(http_workers),
        "--run-workers",
        str(run_workers),
    ]
    return subprocess.Popen(
        argv,
        env=env,
        cwd=bench_env.BASE_DIR,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_own_group_dying_with_parent,
    )


def stop_all(processes: list[subprocess.Popen], grace_seconds: float = STOP_GRACE_SECONDS) -> None:
    """SIGTERM every process's group at once, then SIGKILL the groups still alive after
    ``grace_seconds``; returns when every process has exited."""
    from lib.processes import kill_process_group

    for process in processes:
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
    deadline = time.monotonic() + grace_seconds
    for process in processes:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            kill_process_group(process, grace_seconds=5)


def wait_until(condition, *, timeout: float, what: str, processes: list[subprocess.Popen], every: float = 0.2):
    """Poll ``condition()`` until it returns a true value (returned), or raise SystemExit when
    ``timeout`` seconds pass or one of ``processes`` exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for process in processes:
            if process.poll() is not None:
                raise SystemExit(
                    f"runserve (pid {process.pid}) exited with {process.returncode} while waiting for {what}"
                )
        value = condition()
        if value:
            return value
        time.sleep(every)
    raise SystemExit(f"no {what} within {timeout:g} s")
