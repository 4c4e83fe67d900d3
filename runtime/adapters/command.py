"""The command adapter: a closed argv template run without a shell (docs/design.md §8).

The command gets a minimal environment, its own process group under a keeper forked by
this process's command spawner, which kills it whole on time-out, on abort and when the
worker dies (``lib/command_spawner.py``), and its stdout and stderr captured to the run
directory up to a size cap.
"""

import contextlib
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from django.conf import settings

from lib.spawner_client import SpawnedCommand, Spawner, SpawnerUnavailable, pump
from runtime.registry.model import fill_argv

from .base import CommandOutcome, Execution, preparing_run_dir
from .capture import Capture

#: Environment a command sees: no secret. Not the Django secret key, not the database URL
#: (with its password), not FACTORY_*_SECRET, FACTORY_API_TOKEN or the operator password.
#: The runtime's own reports that need the database run in the worker instead (the
#: ``builtin`` adapter). A command still runs as the runtime's OS user and can read what
#: that user can — ``.env`` included (docs/design.md §8).
PASSED_ENVIRONMENT = (
    "PATH", "HOME", "LANG", "LC_ALL", "FACTORY_REGISTRY_DIR", "FACTORY_CONFIG_DIR",
    "FACTORY_ROOT", "FACTORY_RUNS_DIR", "FACTORY_LOG_LEVEL",
)
TAIL_BYTES = 64 * 1024
#: After SIGTERM to the process group, how long before SIGKILL.
KILL_GRACE_SECONDS = 5
#: How long a command's keeper may take beyond the grace to reap the last descendants and exit.
KEEPER_EXIT_SECONDS = 5
#: How often ``while_waiting`` is called while a command runs, in seconds. Its exit is noticed
#: at once (its keeper's report wakes the wait), not at the next look.
POLL_SECONDS = 0.2
#: Starts this process's commands: one long-lived process, so that a run costs a fork, not an
#: interpreter's start (docs/design.md §8).
SPAWNER = Spawner()


def command_environment() -> dict[str, str]:
    """The environment every command the runtime starts gets: ``PASSED_ENVIRONMENT``
    (never a secret), ``TZ=UTC``, ``FACTORY_ROOT``. Runs and the bridge's gates share it."""
    env = {name: os.environ[name] for name in PASSED_ENVIRONMENT if name in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(TZ="UTC", FACTORY_ROOT=str(settings.FACTORY_ROOT), PYTHONUNBUFFERED="1")
    return env


def minimal_environment(run_id: int, run_dir: Path) -> dict[str, str]:
    """``command_environment`` plus the run's ``FACTORY_RUN_ID`` and ``FACTORY_RUN_DIR``."""
    return {**command_environment(), "FACTORY_RUN_ID": str(run_id), "FACTORY_RUN_DIR": str(run_dir)}


def _feed(stream, data: bytes) -> None:
    """Write ``data`` to a command's stdin and close it; a command that exits unread is fine."""
    try:
        stream.write(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            stream.close()


#: The commands this process is running now (``terminate_running_commands``).
_running: set[SpawnedCommand] = set()
_running_lock = threading.Lock()


def terminate_running_commands() -> int:
    """SIGTERM the keeper of every command this process is running, so each kills its command
    (TERM, KILL after the grace), whatever the thread waiting for it is doing. The lease
    watchdog calls it when a renewal hangs past the lease (docs/design.md §8). Returns how many."""
    with _running_lock:
        running = [command for command in _running if not command.finished]
    for command in running:
        command.stop()
    return len(running)


def run_command(
    argv: list[str],
    *,
    run_id: int,
    run_dir: Path,
    capture_name: str,
    timeout_seconds: int,
    stdout_cap: int,
    while_waiting: Callable[[], bool] = lambda: True,
    stdin_data: bytes | None = None,
    nice: int = 0,
) -> CommandOutcome:
    """Run ``argv`` (as it is: ``run_argv`` fills a plan's placeholders) in ``run_dir`` and wait for it.

    ``stdin_data`` is written to the command's stdin (then closed) by a thread, so a
    command that does not read it cannot block the wait; without it stdin is empty.
    ``nice`` (0–19) lowers the command's CPU priority: previews run at ``PREVIEW_NICE``.

    The command is started by this process's spawner (``SPAWNER``), under a keeper, in a
    session of its own: it dies with this process whatever ends it (an exception, a signal,
    SIGKILL), and whatever it leaves behind, double-forked descendants included, is killed
    when it exits (docs/design.md §8). Its exit is noticed as its keeper reports it.

    ``while_waiting`` is called about every 0.2 s (the worker renews its lease there);
    when it returns False the command is killed and the outcome is ``aborted``. On
    time-out, abort or any exit from here, the command's process group and descendants
    get SIGTERM, then SIGKILL after ``KILL_GRACE_SECONDS``. When the spawner dies while the
    command runs, its keeper kills the command and the outcome says ``spawner_lost``; the
    next command starts a new spawner.

    Raises ``RunDirUnwritable`` before the command starts when ``run_dir`` or its capture
    files cannot be created (a read-only or missing runs directory). A capture file that
    cannot be written later (a full disk) does not stop the command: its output is read
    to the end and the outcome's ``output_error`` says which file and why.
    """
    stdout_path = run_dir / capture_name
    stderr_path = run_dir / "stderr.log"
    with preparing_run_dir(run_dir), contextlib.ExitStack() as opening:
        run_dir.mkdir(parents=True, exist_ok=True)
        stdout_file = stdout_path.open("wb")
        opening.callback(stdout_file.close)
        stderr_file = stderr_path.open("wb")
        opening.pop_all()  # both open: from here the reader threads close them
    captures = [(stdout_file, stdout_path), (stderr_file, stderr_path)]
    try:
        pipes = _Pipes(with_stdin=stdin_data is not None)
    except BaseException:
        _close_captures(captures)
        raise
    try:
        command = SPAWNER.spawn(argv, env=minimal_environment(run_id, run_dir), cwd=run_dir, nice=nice,
                                grace=KILL_GRACE_SECONDS, stdio=pipes.theirs)
    except (OSError, SpawnerUnavailable) as exc:
        pipes.close_ours()
        _close_captures(captures)
        if isinstance(exc, SpawnerUnavailable):
            return CommandOutcome(None, False, "", "", spawner_lost=str(exc))
        return CommandOutcome(None, False, "", "", not_found=f"{sys.executable}: {exc.strerror or exc}")
    except BaseException:
        pipes.close_ours()
        _close_captures(captures)
        raise
    finally:
        pipes.close_theirs()
    with _running_lock:
        _running.add(command)
    try:
        return _wait(command, pipes, captures, stdin_data, timeout_seconds, stdout_cap, while_waiting)
    finally:
        _end(command)
        with _running_lock:
            _running.discard(command)


class _Pipes:
    """The command's stdout and stderr pipes (and stdin's when it is fed): the spawner gets
    ``theirs``, closed here once sent; ours are read by ``pump`` (``stdout``, ``stderr``:
    descriptors) and written by a feeder thread (``stdin``: a file)."""

    def __init__(self, *, with_stdin: bool):
        opened: list[int] = []
        try:
            stdin = os.pipe() if with_stdin else (os.open(os.devnull, os.O_RDONLY), None)
            opened.extend(fd for fd in stdin if fd is not None)
            stdout = os.pipe()
            opened.extend(stdout)
            stderr = os.pipe()
            opened.extend(stderr)
        except BaseException:
            for fd in opened:
                os.close(fd)
            raise
        self.theirs = (stdin[0], stdout[1], stderr[1])
        self.stdout, self.stderr = stdout[0], stderr[0]
        self.stdin = os.fdopen(stdin[1], "wb") if stdin[1] is not None else None

    def close_theirs(self) -> None:
        for fd in self.theirs:
            os.close(fd)

    def close_ours(self) -> None:
        os.close(self.stdout)
        os.close(self.stderr)
        if self.stdin is not None:
            self.stdin.close()


def _close_captures(captures) -> None:
    for out, _path in captures:
        with contextlib.suppress(OSError):
            out.close()


def _wait(command, pipes, captures, stdin_data, timeout_seconds, stdout_cap, while_waiting) -> CommandOutcome:
    tail: deque = deque(maxlen=TAIL_BYTES)
    (stdout_file, stdout_path), (stderr_file, stderr_path) = captures
    errors: list[str] = []
    outputs = [
        Capture(pipes.stdout, stdout_file, stdout_path, stdout_cap, tail, errors),
        Capture(pipes.stderr, stderr_file, stderr_path, stdout_cap, None, errors),
    ]
    feeder = None
    if pipes.stdin is not None:
        feeder = threading.Thread(target=_feed, args=(pipes.stdin, stdin_data), daemon=True)
        feeder.start()
    deadline = time.monotonic() + timeout_seconds
    timed_out = aborted = False
    try:
        while not command.finished:
            moment = time.monotonic()
            if moment >= deadline:
                timed_out = True
                break
            if not while_waiting():
                aborted = True
                break
            pump(command, outputs, min(POLL_SECONDS, deadline - moment))
        _end(command, outputs)
        pump(command, outputs, KILL_GRACE_SECONDS, drain=True)
    finally:
        for output in outputs:
            output.close()
        if feeder is not None:
            feeder.join(timeout=KILL_GRACE_SECONDS)
    if timed_out or aborted:
        return CommandOutcome(None, timed_out, bytes(tail).decode("utf-8", errors="replace"), str(stdout_path),
                              aborted=aborted, output_error="; ".join(errors))
    error = command.value("error")
    if error is not None:
        return CommandOutcome(None, False, "", "", not_found=error, output_error="; ".join(errors))
    if command.lost:
        return CommandOutcome(None, False, "", "", spawner_lost=_lost(command), output_error="; ".join(errors))
    return CommandOutcome(
        exit_code=int(command.value("exit")),
        timed_out=False,
        stdout_tail=bytes(tail).decode("utf-8", errors="replace"),
        stdout_path=str(stdout_path),
        output_error="; ".join(errors),
    )


def _lost(command: SpawnedCommand) -> str:
    """Why the spawner's death ended ``command``, for the run's journal."""
    started = "its command was killed" if command.value("pid") is not None else "its command never started"
    return f"the command spawner (pid {SPAWNER.pid}) died; {started}"


def run_argv(plan: dict, run_id: int, run_dir: Path) -> list[str]:
    """The argv a plan runs: its ``argvTemplate`` filled in one pass with its ``argvValues`` and
    the run's ``{runId}``/``{runDir}`` (docs/design.md §8). A plan made before plans kept their
    template has only ``argv``, whose run-time placeholders are filled the same way."""
    run_time = {"runId": str(run_id), "runDir": str(run_dir)}
    if plan.get("argvTemplate") is None:
        return fill_argv(plan["argv"], run_time)
    return fill_argv(plan["argvTemplate"], {**plan["argvValues"], **run_time})


def _end(command: SpawnedCommand, outputs: list[Capture] = ()) -> None:
    """End the command: its keeper gets SIGTERM and ends it (TERM, KILL after the grace), its
    ``outputs`` read meanwhile; should the keeper itself not end within its grace and a little
    more, SIGKILL to it and to the command's process group."""
    if not command.finished:
        command.stop()
        pump(command, outputs, KILL_GRACE_SECONDS + KEEPER_EXIT_SECONDS)
        if not command.finished:
            command.kill()
            pump(command, outputs, KEEPER_EXIT_SECONDS)
    command.close()


def execute_command(execution: Execution) -> CommandOutcome:
    """The ``command`` adapter: run the plan's argv (docs/design.md §8)."""
    return run_command(
        run_argv(execution.run.plan, execution.run.pk, execution.run_dir),
        run_id=execution.run.pk, run_dir=execution.run_dir,
        capture_name=execution.capture_name, timeout_seconds=execution.timeout_seconds,
        stdout_cap=execution.stdout_cap, while_waiting=execution.while_waiting,
    )
