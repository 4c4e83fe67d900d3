"""Fault drill: a run's command never outlives its worker, and no two attempts of a run overlap.

    .venv/bin/python drills/worker_faults.py [--seconds 30] [--only NAME …]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python drills/worker_faults.py

Each scenario runs the runtime's real processes on a database of their own (a SQLite
file, or a fresh PostgreSQL database when ``DATABASE_URL`` names a PostgreSQL server) with
``FACTORY_LEASE_SECONDS=10`` and ``FACTORY_STOP_GRACE_SECONDS=5``, queues one run of a
probe that sleeps ``--seconds`` and logs each attempt's start and end with its pid
(``tests/attempts.py``), breaks something 8 s into it, and prints what it saw:

- ``sigterm``: SIGTERM to the worker of a mutating run → its command killed after the
  grace, the run ``interrupted``; an operator's ``retry_run`` then runs it to its end.
- ``sigkill-worker``: SIGKILL to the worker of a non-mutating run → the command dies
  with it; a second worker takes the run back once its lease expired past the margin.
- ``sigkill-worker-mutating``: the same for a mutating run → ``interrupted`` (lease_expired).
- ``sigkill-supervisor``: SIGKILL to ``runserve`` → its worker stops, kills the command
  after the grace, the mutating run is ``interrupted``.
- ``pg-terminate`` (PostgreSQL only): the worker's connections terminated every 5 s → the
  run goes on and succeeds in one attempt.

Each line ends ``overlaps: none; lost: none`` when all is well; the exit status is 1
when any scenario saw an overlap, a lost attempt (one that never logged its end), a
command alive after its worker, or a run in the wrong state.
"""

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "factory_site.settings")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402

from tests.attempts import alive, attempts, install_probe, overlaps, queue_probe  # noqa: E402
from tests.processes import ProcessRuntime, free_port, wait_for  # noqa: E402

ENV = {"FACTORY_LEASE_SECONDS": "10", "FACTORY_STOP_GRACE_SECONDS": "5"}
BREAK_AFTER_SECONDS = 8
#: A command must be gone this long after its worker (or, for a stop, after the grace).
GONE_WITHIN_SECONDS = 3


class Drill:
    def __init__(self, runtime: ProcessRuntime, *, mutating: bool, seconds: float):
        self.runtime = runtime
        self.log = install_probe(runtime, mutating=mutating, seconds=seconds, max_attempts=3)
        self.run_id = queue_probe(runtime)
        self.problems: list[str] = []
        self.notes: list[str] = []

    def run(self) -> dict:
        return next(r for r in self.runtime.listing("runs") if r["id"] == self.run_id)

    def first_attempt(self) -> dict:
        found = wait_for(lambda: attempts(self.log), timeout=60, what="the first attempt")[0]
        time.sleep(BREAK_AFTER_SECONDS)
        return found

    def expect_gone(self, pid: int, since: float, within: float) -> None:
        try:
            wait_for(lambda: not alive(pid), timeout=within + 30, what=f"command {pid} to die")
        except AssertionError:
            self.problems.append(f"command {pid} still alive")
            return
        after = time.monotonic() - since
        self.notes.append(f"command gone {after:.1f}s after the fault")
        if after > within:
            self.problems.append(f"command {pid} outlived its worker by {after:.1f}s (limit {within}s)")

    def expect_run(self, status: str, *, timeout: float, **fields) -> None:
        try:
            run = wait_for(lambda: self.run()["status"] == status and self.run(), timeout=timeout, what=f"run {status}",
                           interval=1)
        except AssertionError:
            run = self.run()
            self.problems.append(f"run is {run['status']} ({run['reason']}), expected {status}")
            return
        self.notes.append(f"run {status} attempt {run['attempt']}" + (f" ({run['reason']})" if run["reason"] else ""))
        for name, value in fields.items():
            if run[name] != value:
                self.problems.append(f"run {name} is {run[name]!r}, expected {value!r}")

    def report(self, name: str) -> bool:
        found = attempts(self.log)
        lost = [a["pid"] for a in found if a["end"] is None]
        overlapping = overlaps(found)
        print(
            f"{name}: attempts {len(found)} (pids {', '.join(str(a['pid']) for a in found)}); "
            f"{'; '.join(self.notes)}; overlaps: {overlapping or 'none'}; lost: {lost or 'none'}"
            + (f"; PROBLEMS: {'; '.join(self.problems)}" if self.problems else ""),
            flush=True,
        )
        return not (lost or overlapping or self.problems)


def sigterm(runtime, seconds):
    drill = Drill(runtime, mutating=True, seconds=seconds)
    worker = runtime.start("worker", **ENV)
    attempt = drill.first_attempt()
    worker.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    drill.expect_gone(attempt["pid"], signalled, float(ENV["FACTORY_STOP_GRACE_SECONDS"]) + GONE_WITHIN_SECONDS)
    worker.communicate(timeout=60)
    drill.expect_run("interrupted", timeout=10, reason="worker_stopped")
    runtime.manage("retry_run", str(drill.run_id), "--as", "operator")
    runtime.start("worker", **ENV)
    drill.expect_run("succeeded", timeout=seconds + 30, attempt=2)
    return drill


def sigkill_worker(runtime, seconds, *, mutating=False):
    drill = Drill(runtime, mutating=mutating, seconds=seconds)
    worker = runtime.start("worker", **ENV)
    attempt = drill.first_attempt()
    worker.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    worker.wait(timeout=10)
    drill.expect_gone(attempt["pid"], killed, GONE_WITHIN_SECONDS)
    runtime.start("worker", **ENV)
    if mutating:
        drill.expect_run("interrupted", timeout=60, reason="lease_expired")
    else:
        drill.expect_run("succeeded", timeout=seconds + 60, attempt=2)
    return drill


def sigkill_supervisor(runtime, seconds):
    drill = Drill(runtime, mutating=True, seconds=seconds)
    serve = runtime.start("runserve", "--bind", f"127.0.0.1:{free_port()}", "--http-workers", "1", **ENV)
    attempt = drill.first_attempt()
    serve.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    serve.wait(timeout=10)
    drill.expect_gone(attempt["pid"], killed, float(ENV["FACTORY_STOP_GRACE_SECONDS"]) + GONE_WITHIN_SECONDS)
    drill.expect_run("interrupted", timeout=30, reason="worker_stopped")
    return drill


def pg_terminate(runtime, seconds):
    import psycopg

    drill = Drill(runtime, mutating=True, seconds=seconds)
    runtime.start("worker", **ENV)
    drill.first_attempt()
    terminated = 0
    with psycopg.connect(runtime.pg_admin_url, autocommit=True) as admin:
        while drill.run()["status"] == "running":
            terminated += len(admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                [runtime.db_name],
            ).fetchall())
            time.sleep(5)
    drill.notes.append(f"{terminated} connections terminated")
    drill.expect_run("succeeded", timeout=30, attempt=1)
    return drill


SCENARIOS = {
    "sigterm": sigterm,
    "sigkill-worker": sigkill_worker,
    "sigkill-worker-mutating": lambda runtime, seconds: sigkill_worker(runtime, seconds, mutating=True),
    "sigkill-supervisor": sigkill_supervisor,
    "pg-terminate": pg_terminate,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30, help="how long each attempt of the probe runs (default 30)")
    parser.add_argument("--only", nargs="*", choices=sorted(SCENARIOS), help="run only these scenarios")
    options = parser.parse_args()
    names = options.only or [n for n in SCENARIOS if n != "pg-terminate" or connection.vendor == "postgresql"]
    print(f"database: {connection.vendor}; lease {ENV['FACTORY_LEASE_SECONDS']}s, stop grace "
          f"{ENV['FACTORY_STOP_GRACE_SECONDS']}s, attempts of {options.seconds:g}s", flush=True)
    ok = True
    for name in names:
        with tempfile.TemporaryDirectory(prefix=f"drill-{name}-") as directory:
            runtime = ProcessRuntime(Path(directory) / "proc")
            try:
                ok = SCENARIOS[name](runtime, options.seconds).report(name) and ok
            except AssertionError as exc:
                print(f"{name}: FAILED: {exc}", flush=True)
                ok = False
            finally:
                runtime.close()
    print("all scenarios: " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
