"""The command adapter: a closed argv template run without a shell (docs/design.md §8).

The command gets a minimal environment, its own process group under a shim that
kills it whole on time-out, on abort and when the worker dies (``lib/command_shim.py``),
and its stdout and stderr captured to the run directory up to a size cap.
"""

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from django.conf import settings

from lib import command_shim
from runtime.registry.model import fill_argv

from .base import CommandOutcome, Execution, describe_os_error, preparing_run_dir

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
#: How long the shim may take beyond the grace to reap the last descendants and exit.
SHIM_EXIT_SECONDS = 5
POLL_SECONDS = 0.2
#: The first wait on a command; each next one doubles, up to ``POLL_SECONDS``.
FIRST_POLL_SECONDS = 0.005


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


def _copy_capped(stream, out, path: Path, cap: int, tail: deque | None, errors: list[str]) -> None:
    """Copy a pipe to ``out`` (the open file ``path``) up to ``cap`` bytes (noting the
    truncation), keeping a tail, and close both.

    A write that fails (a full disk) is noted in ``errors`` and the pipe is still read to
    its end — discarded, the tail kept — so the command is never blocked on a full pipe."""
    written = 0
    truncated = False
    failed = False

    def write(data: bytes) -> None:
        nonlocal failed
        try:
            out.write(data)
        except OSError as exc:
            failed = True
            errors.append(describe_os_error(path, exc))

    try:
        for chunk in iter(lambda: stream.read1(65536), b""):
            if tail is not None:
                tail.extend(chunk)
            room = cap - written
            if room > 0 and not failed:
                write(chunk[:room])
                written += min(room, len(chunk))
            truncated = truncated or len(chunk) > room
        if truncated and not failed:
            write(f"\n[output truncated at {cap} bytes]\n".encode())
    finally:
        try:
            out.close()
        except OSError as exc:  # the last buffered bytes, on a full disk
            if not failed:
                errors.append(describe_os_error(path, exc))
        stream.close()


def _feed(stream, data: bytes) -> None:
    """Write ``data`` to a command's stdin and close it; a command that exits unread is fine."""
    try:
        stream.write(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            stream.close()


#: The shims of the commands this process is running now (``terminate_running_commands``).
_running: set[subprocess.Popen] = set()
_running_lock = threading.Lock()


def terminate_running_commands() -> int:
    """SIGTERM the shim of every command this process is running, so each kills its command
    (TERM, KILL after the grace), whatever the thread waiting for it is doing. The lease
    watchdog calls it when a renewal hangs past the lease (docs/design.md §8). Returns how many."""
    with _running_lock:
        shims = [process for process in _running if process.poll() is None]
    for process in shims:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
    return len(shims)


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

    The command runs under ``lib/command_shim.py``, in a session of its own: it dies with
    this process whatever ends it (an exception, a signal, SIGKILL — the shim's
    parent-death signal), and whatever it leaves behind, double-forked descendants
    included, is killed when it exits (docs/design.md §8).

    ``while_waiting`` is called about every 0.2 s (the worker renews its lease there);
    when it returns False the command is killed and the outcome is ``aborted``. On
    time-out, abort or any exit from here, the command's process group and descendants
    get SIGTERM, then SIGKILL after ``KILL_GRACE_SECONDS``.

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
        status_read, status_write = os.pipe()
    except BaseException:
        _close_captures(captures)
        raise
    try:
        process = subprocess.Popen(
            [
                sys.executable, "-I", command_shim.__file__, "--parent", str(os.getpid()),
                "--grace", str(KILL_GRACE_SECONDS), "--status-fd", str(status_write),
                *(["--nice", str(nice)] if nice else []), "--", *argv,
            ],
            stdin=subprocess.DEVNULL if stdin_data is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=run_dir,
            env=minimal_environment(run_id, run_dir),
            start_new_session=True,
            pass_fds=(status_write,),
        )
    except OSError as exc:
        os.close(status_read)
        _close_captures(captures)
        return CommandOutcome(None, False, "", "", not_found=f"{sys.executable}: {exc.strerror or exc}")
    except BaseException:
        os.close(status_read)
        _close_captures(captures)
        raise
    finally:
        os.close(status_write)
    status = _ShimStatus(status_read)
    with _running_lock:
        _running.add(process)
    try:
        return _wait(process, status, captures, stdin_data, timeout_seconds, stdout_cap, while_waiting)
    finally:
        _stop_shim(process, status)
        with _running_lock:
            _running.discard(process)


class _ShimStatus:
    """The shim's status lines (``pid N``, ``error TEXT``, ``exit CODE``), read by a thread."""

    def __init__(self, fd: int):
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, args=(fd,), daemon=True)
        self.reader.start()

    def _read(self, fd: int) -> None:
        with os.fdopen(fd, "r", encoding="utf-8", errors="replace") as stream:
            for line in stream:
                self.lines.append(line.rstrip("\n"))

    def value(self, word: str) -> str | None:
        return next((line[len(word) + 1:] for line in self.lines if line.startswith(word + " ")), None)


def _close_captures(captures) -> None:
    for out, _path in captures:
        with contextlib.suppress(OSError):
            out.close()


def _wait(process, status, captures, stdin_data, timeout_seconds, stdout_cap, while_waiting) -> CommandOutcome:
    tail: deque = deque(maxlen=TAIL_BYTES)
    (stdout_file, stdout_path), (stderr_file, stderr_path) = captures
    errors: list[str] = []
    readers = [
        threading.Thread(target=_copy_capped, args=(process.stdout, stdout_file, stdout_path, stdout_cap, tail, errors),
                         daemon=True),
        threading.Thread(target=_copy_capped, args=(process.stderr, stderr_file, stderr_path, stdout_cap, None, errors),
                         daemon=True),
    ]
    if stdin_data is not None:
        readers.append(threading.Thread(target=_feed, args=(process.stdin, stdin_data), daemon=True))
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + timeout_seconds
    timed_out = aborted = False
    pause = FIRST_POLL_SECONDS
    while process.poll() is None:
        if time.monotonic() >= deadline:
            timed_out = True
            break
        if not while_waiting():
            aborted = True
            break
        # Wait on the command itself, a short while at first: a command that exits at once
        # frees its worker within milliseconds instead of at the next 0.2 s poll, which
        # capped a worker at about 3.5 quick runs a second (docs/performance.md).
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=pause)
        pause = min(pause * 2, POLL_SECONDS)
    _stop_shim(process, status)
    for reader in readers:
        reader.join(timeout=KILL_GRACE_SECONDS)
    error = status.value("error")
    if error is not None and not (timed_out or aborted):
        return CommandOutcome(None, False, "", "", not_found=error, output_error="; ".join(errors))
    # A shim that died before reporting (the OOM killer, say) answers with its own status.
    exit_code = status.value("exit")
    return CommandOutcome(
        exit_code=None if timed_out or aborted else int(exit_code) if exit_code is not None else process.returncode,
        timed_out=timed_out,
        aborted=aborted,
        stdout_tail=bytes(tail).decode("utf-8", errors="replace"),
        stdout_path=str(stdout_path),
        output_error="; ".join(errors),
    )


def run_argv(plan: dict, run_id: int, run_dir: Path) -> list[str]:
    """The argv a plan runs: its ``argvTemplate`` filled in one pass with its ``argvValues`` and
    the run's ``{runId}``/``{runDir}`` (docs/design.md §8). A plan made before plans kept their
    template has only ``argv``, whose run-time placeholders are filled the same way."""
    run_time = {"runId": str(run_id), "runDir": str(run_dir)}
    if plan.get("argvTemplate") is None:
        return fill_argv(plan["argv"], run_time)
    return fill_argv(plan["argvTemplate"], {**plan["argvValues"], **run_time})


def _stop_shim(process: subprocess.Popen, status: _ShimStatus) -> None:
    """End the shim and so the command: SIGTERM, then — should the shim itself not end within
    its grace and a little more — SIGKILL to it and to the command's process group."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=KILL_GRACE_SECONDS + SHIM_EXIT_SECONDS)
        except subprocess.TimeoutExpired:
            command_pid = status.value("pid")
            if command_pid is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(int(command_pid), signal.SIGKILL)
            process.kill()
            process.wait()
    status.reader.join(timeout=SHIM_EXIT_SECONDS)


def execute_command(execution: Execution) -> CommandOutcome:
    """The ``command`` adapter: run the plan's argv (docs/design.md §8)."""
    return run_command(
        run_argv(execution.run.plan, execution.run.pk, execution.run_dir),
        run_id=execution.run.pk, run_dir=execution.run_dir,
        capture_name=execution.capture_name, timeout_seconds=execution.timeout_seconds,
        stdout_cap=execution.stdout_cap, while_waiting=execution.while_waiting,
    )
