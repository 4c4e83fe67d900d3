"""The command adapter: a closed argv template run without a shell (docs/design.md §8).

The command gets a minimal environment, its own process group (killed whole on
time-out), and its stdout and stderr captured to the run directory up to a size cap.
"""

import contextlib
import os
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from django.conf import settings

from lib.processes import kill_process_group
from runtime.registry.model import fill_argv

from .base import CommandOutcome, Execution

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
POLL_SECONDS = 0.2


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


def _copy_capped(stream, path: Path, cap: int, tail: deque | None) -> None:
    """Copy a pipe to ``path`` up to ``cap`` bytes (noting the truncation), keeping a tail."""
    written = 0
    truncated = False
    with path.open("wb") as out:
        for chunk in iter(lambda: stream.read1(65536), b""):
            if tail is not None:
                tail.extend(chunk)
            room = cap - written
            if room > 0:
                out.write(chunk[:room])
                written += min(room, len(chunk))
            truncated = truncated or len(chunk) > room
        if truncated:
            out.write(f"\n[output truncated at {cap} bytes]\n".encode())
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
) -> CommandOutcome:
    """Run ``argv`` (as it is: ``run_argv`` fills a plan's placeholders) in ``run_dir`` and wait for it.

    ``stdin_data`` is written to the command's stdin (then closed) by a thread, so a
    command that does not read it cannot block the wait; without it stdin is empty.

    ``while_waiting`` is called about every 0.2 s (the worker renews its lease there);
    when it returns False the command is killed and the outcome is ``aborted``. On
    time-out the whole process group gets SIGTERM, then SIGKILL after 5 s. Whatever the
    command left behind in its process group is killed when it exits.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    stdout_path = run_dir / capture_name
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL if stdin_data is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=run_dir,
            env=minimal_environment(run_id, run_dir),
            start_new_session=True,
        )
    except OSError as exc:
        return CommandOutcome(None, False, "", "", not_found=f"{argv[0]}: {exc.strerror or exc}")
    tail: deque = deque(maxlen=TAIL_BYTES)
    readers = [
        threading.Thread(target=_copy_capped, args=(process.stdout, stdout_path, stdout_cap, tail), daemon=True),
        threading.Thread(target=_copy_capped, args=(process.stderr, run_dir / "stderr.log", stdout_cap, None), daemon=True),
    ]
    if stdin_data is not None:
        readers.append(threading.Thread(target=_feed, args=(process.stdin, stdin_data), daemon=True))
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + timeout_seconds
    timed_out = aborted = False
    while process.poll() is None:
        if time.monotonic() >= deadline:
            timed_out = True
            break
        if not while_waiting():
            aborted = True
            break
        time.sleep(POLL_SECONDS)
    kill_process_group(process, grace_seconds=KILL_GRACE_SECONDS)
    for reader in readers:
        reader.join(timeout=KILL_GRACE_SECONDS)
    return CommandOutcome(
        exit_code=None if timed_out or aborted else process.returncode,
        timed_out=timed_out,
        aborted=aborted,
        stdout_tail=bytes(tail).decode("utf-8", errors="replace"),
        stdout_path=str(stdout_path),
    )


def run_argv(plan: dict, run_id: int, run_dir: Path) -> list[str]:
    """The argv a plan runs: its ``argvTemplate`` filled in one pass with its ``argvValues`` and
    the run's ``{runId}``/``{runDir}`` (docs/design.md §8). A plan made before plans kept their
    template has only ``argv``, whose run-time placeholders are filled the same way."""
    run_time = {"runId": str(run_id), "runDir": str(run_dir)}
    if plan.get("argvTemplate") is None:
        return fill_argv(plan["argv"], run_time)
    return fill_argv(plan["argvTemplate"], {**plan["argvValues"], **run_time})


def execute_command(execution: Execution) -> CommandOutcome:
    """The ``command`` adapter: run the plan's argv (docs/design.md §8)."""
    return run_command(
        run_argv(execution.run.plan, execution.run.pk, execution.run_dir),
        run_id=execution.run.pk, run_dir=execution.run_dir,
        capture_name=execution.capture_name, timeout_seconds=execution.timeout_seconds,
        stdout_cap=execution.stdout_cap, while_waiting=execution.while_waiting,
    )
