"""``manage.py runserve``: the production service in one command (DESIGN §10).

A small supervisor: it starts gunicorn (the inbox and the HTTP doors), the one-second
slot loop and the run workers as child processes — no database handle crosses a
fork — forwards SIGTERM/SIGINT to them, and when any child dies it stops the rest and
exits non-zero, so whatever supervises *it* (systemd, launchd, a terminal) sees the
failure instead of a half-alive runtime.
"""

import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from runtime.management.commands.ensure_operator import ensure_operator
from runtime.registry import get_registry

#: How long children get to finish their current item after SIGTERM before SIGKILL.
SHUTDOWN_GRACE_SECONDS = 20
POLL_SECONDS = 0.2


class Command(BaseCommand):
    help = "Serve the runtime: HTTP (gunicorn), the slot loop and run workers, supervised together."

    def add_arguments(self, parser):
        parser.add_argument("--bind", default="127.0.0.1:7522", help="HOST:PORT for HTTP (default 127.0.0.1:7522)")
        parser.add_argument("--http-workers", type=int, default=2, help="gunicorn worker processes (default 2)")
        parser.add_argument("--run-workers", type=int, default=1, help="run worker processes; 0 for none (default 1)")
        parser.add_argument("--no-loop", action="store_true", help="do not start the slot loop (ticks, planning)")

    def handle(self, *args, **options):
        if options["http_workers"] < 1 or options["run_workers"] < 0:
            raise CommandError("--http-workers must be at least 1 and --run-workers at least 0")
        self.refuse_unmigrated()
        ensure_operator(self.stdout.write)
        registry = get_registry()
        self.stdout.write(
            f"registry {registry.digest[:12]}: {len(registry.loops)} loops "
            f"({sum(1 for loop in registry.loops.values() if loop.enabled)} enabled)"
        )
        connection.close()
        children = self.start_children(options)
        self.stdout.write(f"serving on http://{options['bind']}/ (inbox: /admin/); Ctrl-C stops")
        raise SystemExit(self.supervise(children))

    def refuse_unmigrated(self) -> None:
        executor = MigrationExecutor(connection)
        if executor.migration_plan(executor.loader.graph.leaf_nodes()):
            raise CommandError("the database has unapplied migrations: run `manage.py migrate` first (bin/serve does)")

    def start_children(self, options) -> dict[str, subprocess.Popen]:
        manage = str(settings.BASE_DIR / "manage.py")
        commands = {
            "http": [
                sys.executable, "-m", "gunicorn", "factory_site.wsgi:application",
                "--bind", options["bind"],
                "--workers", str(options["http_workers"]),
                "--graceful-timeout", "10",
                "--access-logfile", "-",
                # One control socket per user would clash between two runtimes on one host.
                "--no-control-socket",
            ],
        }
        if not options["no_loop"]:
            commands["slot-loop"] = [sys.executable, manage, "slot_loop"]
        for index in range(options["run_workers"]):
            commands[f"worker-{index + 1}"] = [sys.executable, manage, "worker"]
        return {name: subprocess.Popen(argv, cwd=settings.BASE_DIR) for name, argv in commands.items()}

    def supervise(self, children: dict[str, subprocess.Popen]) -> int:
        stopping = False

        def request_stop(signum, frame):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)
        exit_code = 0
        while not stopping:
            dead = {name: child.returncode for name, child in children.items() if child.poll() is not None}
            if dead:
                for name, code in dead.items():
                    self.stderr.write(f"child {name} exited with status {code}; stopping the runtime")
                exit_code = 1
                break
            time.sleep(POLL_SECONDS)
        self.stop_children(children)
        return exit_code

    def stop_children(self, children: dict[str, subprocess.Popen]) -> None:
        for child in children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + SHUTDOWN_GRACE_SECONDS
        for name, child in children.items():
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.stderr.write(f"child {name} did not stop in {SHUTDOWN_GRACE_SECONDS}s; killing it")
                child.kill()
                child.wait()
        self.stdout.write("runtime stopped")

