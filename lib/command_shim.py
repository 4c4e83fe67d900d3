"""The command shim: a run's command never outlives the worker that started it (docs/design.md §8).

``run_command`` does not start a command itself; it starts this file as a small process
(``python -I lib/command_shim.py --parent PID --grace S --status-fd FD [--nice N] -- ARGV…``) that

- on Linux asks the kernel for SIGTERM when its parent (the worker thread that started
  it) dies — SIGKILL included — and makes itself a *child subreaper*, so descendants
  that double-fork out of the command's process group are re-parented to it, not to init;
- starts the command in a session of its own (stdin, stdout and stderr inherited), ``N``
  steps nicer than the worker when ``--nice`` asks (a preview: it must not take CPU from ticks);
- writes ``pid <command pid>`` (or ``error <argv0>: <reason>`` when it cannot start it)
  and finally ``exit <code>`` (negative: killed by that signal) to the status descriptor;
- on SIGTERM, SIGINT, SIGHUP or its parent's death sends SIGTERM to the command's
  process group and to every descendant it reaped, SIGKILL to all that are left after
  ``grace`` seconds, and exits once none is left; when the command exits by itself,
  whatever it left behind gets the same treatment before the exit is reported.

Elsewhere than Linux there is no parent-death signal and no subreaper: the shim polls
its parent pid instead, and a descendant that left the command's process group escapes.
Only the standard library is imported: the shim starts in well under a tenth of a second.
"""

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
POLL_SECONDS = 0.05
#: After SIGKILL, how long to wait for the last descendants (a process in uninterruptible sleep).
KILL_WAIT_SECONDS = 10.0
LINUX = sys.platform.startswith("linux")

_stop_requested = False


def _prctl(option: int, value: int) -> None:
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def _request_stop(signum, frame) -> None:
    global _stop_requested
    _stop_requested = True


def _command_preexec() -> None:
    """In the command, before exec: SIGKILL if the shim itself is ever killed outright."""
    if LINUX:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _children() -> list[int]:
    """The shim's live children, the command's re-parented descendants included (Linux /proc)."""
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == me and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def _signal_all(command_pid: int, sig: int, signalled: set[int] | None) -> None:
    """Send ``sig`` to the command's process group (its pgid is its pid: a session of its
    own) and to each child of the shim and its group — once each when ``signalled``
    tracks who already got it; never to the shim's own group."""
    own_group = os.getpgrp()
    if signalled is None or 0 not in signalled:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(command_pid, sig)
        if signalled is not None:
            signalled.add(0)  # 0 is never a pid: it stands for the command's group
    for pid in _children() if LINUX else []:
        if signalled is not None and pid in signalled:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            group = os.getpgid(pid)
            if group not in (own_group, command_pid):
                os.killpg(group, sig)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
        if signalled is not None:
            signalled.add(pid)


def _reap(command_pid: int) -> tuple[bool, int | None]:
    """Reap every exited child; returns (no child is left, the command's exit code if reaped now)."""
    code = None
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True, code
        if pid == 0:
            return False, code
        if pid == command_pid:
            code = os.waitstatus_to_exitcode(status)


def _clean_up(command_pid: int, grace: float, exit_code: int | None) -> int | None:
    """TERM the command's group and every descendant, KILL what is left after ``grace``; reap all."""
    signalled: set[int] = set()
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        _signal_all(command_pid, signal.SIGTERM, signalled)
        done, code = _reap(command_pid)
        exit_code = code if code is not None else exit_code
        if done:
            return exit_code
        time.sleep(POLL_SECONDS)
    deadline = time.monotonic() + KILL_WAIT_SECONDS
    while time.monotonic() < deadline:
        _signal_all(command_pid, signal.SIGKILL, None)
        done, code = _reap(command_pid)
        exit_code = code if code is not None else exit_code
        if done:
            return exit_code
        time.sleep(POLL_SECONDS)
    return exit_code


def main(arguments: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="command_shim")
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--grace", type=float, required=True)
    parser.add_argument("--status-fd", type=int, required=True)
    parser.add_argument("--nice", type=int, default=0, help="lower the command's CPU priority by this much")
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    options = parser.parse_args(arguments)
    argv = options.argv[1:] if options.argv[:1] == ["--"] else options.argv
    status = os.fdopen(options.status_fd, "w", buffering=1)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _request_stop)
    if LINUX:
        _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
    if os.getppid() != options.parent or _stop_requested:
        status.write("error the worker was gone before its command started\n")
        return 1
    if not argv:
        status.write("error no command given\n")
        return 1
    if options.nice:
        os.nice(options.nice)  # the shim's own, which the command inherits
    try:
        command = subprocess.Popen(argv, start_new_session=True, preexec_fn=_command_preexec)
    except OSError as exc:
        status.write(f"error {argv[0]}: {exc.strerror or exc}\n")
        return 1
    status.write(f"pid {command.pid}\n")
    exit_code = None
    while not _stop_requested and os.getppid() == options.parent:
        _, code = _reap(command.pid)
        if code is not None:
            exit_code = code
            break
        time.sleep(POLL_SECONDS)
    exit_code = _clean_up(command.pid, options.grace, exit_code)
    # Reaped here, not by Popen: tell it so it never waits on a recycled pid.
    command.returncode = exit_code if exit_code is not None else -signal.SIGKILL
    status.write(f"exit {command.returncode}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
