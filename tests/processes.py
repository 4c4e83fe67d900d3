"""Real runtime processes for restart and crash tests: a database of their own, bounded waits."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from datetime import UTC, datetime
from pathlib import Path

import psycopg
from django.db import connection

from .conftest import PROJECT_DIR

MANAGE = str(PROJECT_DIR / "manage.py")


def free_port() -> int:
    """A loopback port nobody listens on now, from this xdist worker's share of them.

    The kernel hands out free ports at random, and a port is free again from the moment
    this socket closes until a server binds it: two workers must never be handed the
    same one meanwhile, so worker ``i`` of ``n`` takes only ports with ``port // 2 % n == i``.
    """
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port // 2 % workers == worker:
            return port


class ProcessRuntime:
    """An isolated runtime on disk: registry copy, config dir, runs dir and its own database.

    The database is a SQLite file, or a fresh PostgreSQL database when the suite runs
    on PostgreSQL (never the test database, which the processes could not see).
    """

    def __init__(self, root: Path):
        self.root = root
        self.registry_dir = root / "registry"
        self.config_dir = root / "config"
        shutil.copytree(PROJECT_DIR / "registry", self.registry_dir)
        self.config_dir.mkdir()
        self.processes: list[subprocess.Popen] = []
        self.pg_admin_url = None
        if connection.vendor == "postgresql":
            params = connection.get_connection_params()
            self.pg_admin_url = f"postgresql://{params.get('user') or 'postgres'}@{params.get('host') or '127.0.0.1'}:{params.get('port') or 5432}/{connection.settings_dict['NAME']}"
            self.db_name = f"factory_proc_{uuid.uuid4().hex[:10]}"
            with psycopg.connect(self.pg_admin_url, autocommit=True) as admin:
                admin.execute(f'CREATE DATABASE "{self.db_name}"')
            database_url = self.pg_admin_url.rsplit("/", 1)[0] + f"/{self.db_name}"
        else:
            database_url = f"sqlite:///{root / 'factory.sqlite3'}"
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("FACTORY_", "DJANGO_", "DATABASE_"))},
            "DATABASE_URL": database_url,
            "DJANGO_SECRET_KEY": "process-test-secret-key-" + uuid.uuid4().hex,
            "FACTORY_REGISTRY_DIR": str(self.registry_dir),
            "FACTORY_CONFIG_DIR": str(self.config_dir),
            "FACTORY_RUNS_DIR": str(root / "runs"),
            "FACTORY_OPERATOR_PASSWORD": "operator-pass-123",
            "FACTORY_LOG_LEVEL": "WARNING",
        }
        self.manage("migrate", "--no-input", "-v", "0")

    def close(self) -> None:
        """Kill whatever the test left running, close its pipes, drop its database."""
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.communicate()
        if self.pg_admin_url:
            with psycopg.connect(self.pg_admin_url, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{self.db_name}" WITH (FORCE)')

    def manage(self, *args, check=True, timeout=60, **env) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, MANAGE, *args], env={**self.env, **env}, cwd=PROJECT_DIR,
            capture_output=True, text=True, timeout=timeout, check=check,
        )

    def start(self, *args, **env) -> subprocess.Popen:
        process = subprocess.Popen(
            [sys.executable, MANAGE, *args], env={**self.env, **env}, cwd=PROJECT_DIR,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        self.processes.append(process)
        return process

    def listing(self, command: str, *args) -> list[dict]:
        return json.loads(self.manage(command, "--json", "--limit", "1000", *args).stdout)

    def terminate_connections(self, times: int = 2, every: float = 1.5) -> int:
        """End every server process of this runtime's PostgreSQL database ``times`` times,
        ``every`` seconds apart (the first after ``every``), as a server restart would; returns
        how many were ended."""
        ended = 0
        with psycopg.connect(self.pg_admin_url, autocommit=True) as admin:
            for _ in range(times):
                time.sleep(every)
                ended += len(admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                    [self.db_name],
                ).fetchall())
        return ended

    def write_config(self, name: str, text: str) -> None:
        (self.config_dir / name).write_text(text)

    def update_registry(self, relative: str, change) -> None:
        path = self.registry_dir / relative
        data = json.loads(path.read_text()) if path.exists() else {}
        data = change(data) or data
        path.write_text(json.dumps(data, indent=2))


def wait_for(predicate, *, timeout: float, what: str, interval: float = 0.3):
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def wait_serving(runtime: ProcessRuntime, port: int, *, timeout: float = 40) -> None:
    """Wait until a just-started runserve answers HTTP on ``port`` and its slot loop has turned."""
    started = datetime.now(UTC).replace(microsecond=0)

    def turned() -> bool:
        document = json.loads(runtime.manage("doctor", check=False).stdout)
        last = (document.get("loop") or {}).get("lastIterationAt")
        return bool(last) and datetime.fromisoformat(last.replace("Z", "+00:00")) >= started

    wait_for(lambda: answers_http(port, timeout=2), timeout=timeout, what=f"HTTP on port {port}")
    wait_for(turned, timeout=timeout, what="the slot loop's first iteration")


def stop(process: subprocess.Popen, sig=signal.SIGTERM, timeout: float = 30) -> tuple[int, str]:
    """Signal a process and wait for it; returns its exit code and output."""
    if process.poll() is None:
        process.send_signal(sig)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        raise AssertionError(f"process {process.args} did not stop within {timeout}s:\n{output}") from None
    return process.returncode, output


def command_line(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_text().replace("\0", " ")
    except OSError:
        return ""


#: The intake secrets of the ``server`` fixture's runtime.
EVENTS_SECRET = "events-process-secret"
GITHUB_SECRET = "github-process-secret"
START_TIMEOUT_SECONDS = 40
STOP_TIMEOUT_SECONDS = 30


def send(url: str, body: bytes, headers: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def wait_until_listening(port: int, process: subprocess.Popen, log: Path | None = None) -> None:
    """Wait until runserve's gunicorn answers HTTP on ``port`` (any status); fail with the
    process's output (from ``log`` when it writes to a file) if it exits first. A connection
    alone says nothing: the supervisor listens from its start and gunicorn accepts once it
    has loaded the application (lib.listen_address)."""
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text() if log else process.communicate()[0]
        if answers_http(port):
            return
        time.sleep(0.2)
    raise AssertionError(f"runserve did not answer HTTP on port {port} within {START_TIMEOUT_SECONDS}s")


def answers_http(port: int, *, timeout: float = 1.0) -> bool:
    """Whether a ``GET /status`` on ``port`` gets an HTTP answer (any status) within ``timeout`` seconds."""
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=timeout)
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
    return True
