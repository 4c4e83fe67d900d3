"""``manage.py runserve``: the production service in one command (docs/design.md §10).

A small supervisor: it starts gunicorn (the inbox and the HTTP doors), the one-second
slot loop and the run workers as child processes — no database handle crosses a
fork — forwards SIGTERM/SIGINT to them, and when any child dies it stops the rest and
exits non-zero, so whatever supervises *it* (systemd, launchd, a terminal) sees the
failure instead of a half-alive runtime.

Start-up order (docs/performance.md, start-up): the slot loop is started first, before
this process runs the system checks, finds the database migrated, ensures the operator
account and loads the registry; the slot loop's own start (Python, Django) overlaps that
work and then waits for the registry this process shares (``runtime.registry.store``),
which is written only once all of it succeeded, so it touches no database this process
refuses. The URLconf's checks (importing every view: about 0.3 s, and only the HTTP side's
concern) follow; one failing stops the slot loop with SIGTERM, after perhaps an
iteration, and refuses to start. Then gunicorn, the run workers and the notifier start from that
registry. The children skip the system checks this process ran with their settings and code.

``--demo`` runs the same runtime on the demo's settings (``demo/demo.env``): its own
SQLite file under ``var/demo/``, the demo config (two repos, the fake adapter's
scripted outcomes) and every agent definition played by the fake adapter
(``docs/demo.md``). It migrates that database, then replaces itself with a plain
``runserve`` in that environment, so nothing of the normal database is touched.
"""

import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import environ
from django.conf import settings
from django.core.checks import Tags
from django.core.checks.registry import registry as check_registry
from django.core.management.base import BaseCommand, CommandError, SystemCheckError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from lib.listen_address import AddressTaken, listen_on
from lib.processes import SUPERVISOR_PID_VARIABLE, ChildExits, die_with_parent
from ops.metrics_intake import (
    MULTIPROCESS_VARIABLE,
    MultiprocessDirInUse,
    prepare_multiprocess_dir,
    release_multiprocess_dir,
)
from ops.notify import channels
from ops.service_unit import EXIT_REFUSED, worker_counts_refusal
from runtime.adapters.command import KEEPER_EXIT_SECONDS, KILL_GRACE_SECONDS
from runtime.management.commands.ensure_operator import ensure_operator
from runtime.registry import get_registry
from runtime.registry.store import SHARED_VARIABLE, store

#: The demo's settings, relative to the project directory (docs/demo.md).
DEMO_ENV_FILE = "demo/demo.env"
DEMO_VAR_DIR = "var/demo"
#: Beyond a worker's stop grace and its command's kill, how long children get before SIGKILL.
SHUTDOWN_SLACK_SECONDS = 10
POLL_SECONDS = 0.2
#: The longest the supervisor waits on its children's pidfds before it looks again anyway.
WATCH_SECONDS = 5.0
#: Threads per gunicorn worker: with the default two workers, 32 requests at once — ten slow
#: clients all landing on one worker still leave it six (docs/design.md §10).
HTTP_THREADS = 16
#: The supervisor runs every system check before a child may start work (``prepare``), with
#: the children's settings and code: a child running them again (about 0.4 s of CPU each)
#: would only compete with the slot loop's start.
CHILD_OPTIONS = ("--skip-checks",)
#: gunicorn's error and access logs in the runtime's one format, request id included (factory_site.logs).
GUNICORN_LOGGER = "factory_site.logs.GunicornLogger"

#: The supervisor's own lines, in the runtime's one format (docs/production.md §9).
logger = logging.getLogger("ops.runserve")


def shutdown_grace_seconds() -> float:
    """How long the supervisor waits for its children after SIGTERM (docs/design.md §8):
    ``FACTORY_STOP_GRACE_SECONDS``, the command's kill grace and its keeper's exit, plus slack."""
    return settings.FACTORY_STOP_GRACE_SECONDS + KILL_GRACE_SECONDS + KEEPER_EXIT_SECONDS + SHUTDOWN_SLACK_SECONDS


class Command(BaseCommand):
    help = "Serve the runtime: HTTP (gunicorn), the slot loop and run workers, supervised together."
    # Run by ``prepare`` (``run_checks``), once the slot loop is started: its start overlaps them.
    requires_system_checks = []

    def get_version(self) -> str:
        """``runserve --version``: the product's version (factory_site.__version__), not Django's."""
        return settings.PRODUCT_VERSION

    def add_arguments(self, parser):
        parser.add_argument("--bind", default="127.0.0.1:7522", help="HOST:PORT for HTTP (default 127.0.0.1:7522)")
        parser.add_argument("--http-workers", type=int, default=2, help="gunicorn worker processes, 1 to 256 (default 2)")
        parser.add_argument("--run-workers", type=int, default=1, help="run worker processes, 0 (none) to 256 (default 1)")
        parser.add_argument("--no-loop", action="store_true", help="do not start the slot loop (ticks, planning)")
        parser.add_argument(
            "--demo", action="store_true",
            help=f"the demo walkthrough (docs/demo.md): settings from {DEMO_ENV_FILE}, its own SQLite file "
                 f"under {DEMO_VAR_DIR}/, two demo repos, agents played by the fake adapter",
        )

    def handle(self, *args, **options):
        if refusal := worker_counts_refusal(options["http_workers"], options["run_workers"]):
            raise CommandError(f"{refusal}; nothing was started", returncode=EXIT_REFUSED)
        if options["demo"]:
            self.exec_demo(options)
        self.stopping = False
        # Handlers go in before any child exists, and before the address listens: a SIGTERM
        # during start-up must stop the children, never kill the supervisor and orphan them,
        # and whoever sees the address listening may stop it so.
        signal.signal(signal.SIGTERM, self.request_stop)
        signal.signal(signal.SIGINT, self.request_stop)
        try:
            # Listening from here on: gunicorn accepts on this socket once it is up (lib.listen_address).
            self.listener = listen_on(options["bind"])
        except AddressTaken as exc:
            raise CommandError(f"{exc}; nothing was started") from None
        except ValueError as exc:  # the address given cannot be read or bound here
            raise CommandError(f"{exc}; nothing was started", returncode=EXIT_REFUSED) from None
        # Every child starts from the registry this process loads (runtime.registry.store).
        self.shared_dir = Path(tempfile.mkdtemp(prefix="factory-registry-"))
        self.env = {
            **os.environ, SUPERVISOR_PID_VARIABLE: str(os.getpid()),
            SHARED_VARIABLE: str(self.shared_dir / "registry.pickle"),
        }
        children = {}
        try:
            if not options["no_loop"]:
                # Started before this process's checks and registry load, which its own start
                # overlaps: it waits for the shared registry before it touches the database.
                children["slot-loop"] = self.spawn([sys.executable, self.manage, "slot_loop", *CHILD_OPTIONS], self.env)
            self.prepare(skip_checks=options.get("skip_checks", False))
            children |= self.start_children(options)
        except BaseException:
            self.abort(children, started=(self.shared_dir / "registry.pickle").exists())
            raise
        finally:
            self.listener.close()  # gunicorn holds it now (or nobody: the start failed)
        if self.stopping:  # a stop signal came during the start: it is stopped, not served
            raise SystemExit(self.supervise(children))
        logger.info(
            "serving on http://%s/ (the dashboard: /dashboard/; pending proposals: "
            "/admin/runtime/proposal/?status__exact=pending); Ctrl-C stops", options["bind"],
            extra={"action": "runtime_serving", "bind": options["bind"]},
        )
        raise SystemExit(self.supervise(children))

    def abort(self, children: dict[str, subprocess.Popen], *, started: bool) -> None:
        """Stop the children of a start-up that failed, then remove the shared directory. Once
        the registry is shared (``started``) the slot loop may be working: SIGTERM lets it
        stop as usual. Before, it is killed: it may not have its signal handlers yet, and
        one that found the directory gone would load the files itself and start."""
        for child in children.values():
            if started:
                child.send_signal(signal.SIGTERM)
            else:
                child.kill()
        for name, child in children.items():
            try:
                child.wait(timeout=shutdown_grace_seconds())
            except subprocess.TimeoutExpired:
                logger.warning("child %s did not stop; killing it", name, extra={"action": "child_killed", "child": name})
                child.kill()
                child.wait()
        shutil.rmtree(self.shared_dir, ignore_errors=True)

    def prepare(self, *, skip_checks: bool) -> None:
        """What the children wait for: the system checks (a bad registry refuses to start), the
        database migrated, the operator account, then the registry written for them (``share``);
        then the URLconf's checks, before any other child starts (``start_children``)."""
        if not skip_checks:
            self.run_checks(urls=False)
        self.refuse_unmigrated()
        # A warning: a password made up here is shown this once, whatever the log level.
        ensure_operator(lambda line: logger.warning("%s", line, extra={"action": "operator_created"}))
        registry = get_registry()
        enabled = sum(1 for loop in registry.loops.values() if loop.enabled)
        logger.info("registry %s: %s loops (%s enabled)", registry.digest[:12], len(registry.loops), enabled,
                    extra={"action": "registry_loaded", "registry": registry.digest, "loops": len(registry.loops),
                           "enabled": enabled})
        connection.close()
        store.share(self.shared_dir / "registry.pickle")
        if not skip_checks:
            # They import every view (about 0.3 s of CPU) and concern only the HTTP side,
            # which starts after them: the slot loop need not wait for them.
            self.run_checks(urls=True)

    def run_checks(self, *, urls: bool) -> None:
        """The system checks ``manage.py check`` runs: with ``urls`` those tagged ``urls``, else
        every other. Warnings are written to stderr; an error refuses to start (exit 1)."""
        messages = [
            message for check in check_registry.get_checks() if (Tags.urls in check.tags) is urls
            for message in check(app_configs=None, databases=None) if not message.is_silenced()
        ]
        for message in messages:
            if not message.is_serious():
                logger.warning("%s", message, extra={"action": "system_check", "check": message.id})
        serious = [str(message) for message in messages if message.is_serious()]
        if serious:
            raise SystemCheckError("System check identified some issues:\n" + "\n".join(serious))

    def request_stop(self, signum, frame) -> None:
        self.stopping = True

    def exec_demo(self, options) -> None:
        """Migrate the demo database, then become ``runserve`` with the demo's settings; never returns."""
        base = settings.BASE_DIR
        environ.Env.read_env(str(base / DEMO_ENV_FILE), overwrite=True)
        env = dict(os.environ)
        (base / DEMO_VAR_DIR).mkdir(parents=True, exist_ok=True)
        manage = str(base / "manage.py")
        logger.info("demo: settings from %s, database and runs under %s/ (docs/demo.md)", DEMO_ENV_FILE, DEMO_VAR_DIR,
                    extra={"action": "demo_started"})
        migrated = subprocess.run([sys.executable, manage, "migrate", "--no-input", "-v", "0"], cwd=base, env=env)
        if migrated.returncode != 0:
            raise CommandError(f"demo: migrating the demo database failed (exit {migrated.returncode})")
        argv = [
            sys.executable, manage, "runserve", "--bind", options["bind"],
            "--http-workers", str(options["http_workers"]), "--run-workers", str(options["run_workers"]),
        ]
        if options["no_loop"]:
            argv.append("--no-loop")
        self.stdout.flush()
        os.chdir(base)
        os.execve(sys.executable, argv, env)

    def refuse_unmigrated(self) -> None:
        executor = MigrationExecutor(connection)
        if executor.migration_plan(executor.loader.graph.leaf_nodes()):
            raise CommandError("the database has unapplied migrations: run `manage.py migrate` first (bin/serve does)")

    @property
    def manage(self) -> str:
        return str(settings.BASE_DIR / "manage.py")

    def spawn(self, argv: list[str], env: dict[str, str], pass_fds: tuple[int, ...] = ()) -> subprocess.Popen:
        return subprocess.Popen(argv, cwd=settings.BASE_DIR, env=env, preexec_fn=die_with_parent, pass_fds=pass_fds)

    def start_children(self, options) -> dict[str, subprocess.Popen]:
        """Every child but the slot loop (``handle`` starts it first)."""
        commands = {
            "http": [
                sys.executable, "-m", "factory_site.gunicorn_run", "factory_site.wsgi:application",
                # The supervisor's listening socket (``handle``), passed as this child's fd.
                "--bind", f"fd://{self.listener.fileno()}",
                "--workers", str(options["http_workers"]),
                # gthread with a read deadline per request and JSON error answers
                # (docs/design.md §10): a slow client holds one thread for at most
                # FACTORY_HTTP_READ_SECONDS, and there are threads to spare for it.
                "--worker-class", "factory_site.http_worker.ReadDeadlineThreadWorker",
                "--threads", str(HTTP_THREADS),
                # Load the app (and the registry) in the master: a worker forked later
                # inherits a good registry to keep when the files on disk are bad.
                "--preload",
                "--graceful-timeout", "10",
                "--access-logfile", "-",
                "--logger-class", GUNICORN_LOGGER,
                # gunicorn's own lines (its error log) at the runtime's level, FACTORY_LOG_LEVEL.
                "--log-level", logging.getLevelName(logging.getLogger().getEffectiveLevel()).lower(),
                # One control socket per user would clash between two runtimes on one host.
                "--no-control-socket",
            ],
        }
        for index in range(options["run_workers"]):
            commands[f"worker-{index + 1}"] = [sys.executable, self.manage, "worker", *CHILD_OPTIONS]
        if channels():  # notifications are off unless configured (docs/notifications.md)
            commands["notifier"] = [sys.executable, self.manage, "notify", *CHILD_OPTIONS]
        # The HTTP workers add up their intake counters in files (ops.metrics_intake).
        try:
            self.metrics_dir = prepare_multiprocess_dir(settings.FACTORY_METRICS_DIR, options["bind"])
        except MultiprocessDirInUse as exc:
            raise CommandError(f"{exc}; stopping") from None
        envs = {name: self.env for name in commands} | {"http": {**self.env, MULTIPROCESS_VARIABLE: str(self.metrics_dir)}}
        fds = {"http": (self.listener.fileno(),)}
        return {name: self.spawn(argv, envs[name], fds.get(name, ())) for name, argv in commands.items()}

    def supervise(self, children: dict[str, subprocess.Popen]) -> int:
        """Until a stop signal or a child's exit: then stop every child. Waits on the children's
        pidfds and the signal wake-up pipe (``lib.processes.ChildExits``), so an idle runtime's
        supervisor does not wake up; polls every ``POLL_SECONDS`` where pidfds are missing."""
        exit_code = 0
        try:
            exits = ChildExits([child.pid for child in children.values()])
        except (AttributeError, OSError, ValueError):
            exits = None
        try:
            while not self.stopping:
                dead = {name: child.returncode for name, child in children.items() if child.poll() is not None}
                if dead:
                    for name, code in dead.items():
                        logger.error("child %s exited with status %s; stopping the runtime", name, code,
                                     extra={"action": "child_exited", "child": name, "status": code})
                    exit_code = 1
                    break
                if exits is not None:
                    exits.wait(WATCH_SECONDS)
                else:
                    time.sleep(POLL_SECONDS)
        finally:
            if exits is not None:
                exits.close()
        self.stop_children(children)
        return exit_code

    def stop_children(self, children: dict[str, subprocess.Popen]) -> None:
        """SIGTERM every child, then wait ``shutdown_grace_seconds()``: longer than a worker
        lets its current run go on and then kills its command, so no worker is cut short
        (and its command's keeper kills the command even if it were)."""
        for child in children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        grace = shutdown_grace_seconds()
        deadline = time.monotonic() + grace
        for name, child in children.items():
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                logger.warning("child %s did not stop in %gs; killing it", name, grace,
                               extra={"action": "child_killed", "child": name})
                child.kill()
                child.wait()
        # The intake counters die with this runserve (the next one starts from 0 anyway).
        release_multiprocess_dir(self.metrics_dir)
        shutil.rmtree(self.shared_dir, ignore_errors=True)
        logger.info("runtime stopped", extra={"action": "runtime_stopped"})

