"""The command spawner: a run's command starts without a new interpreter and never outlives
the worker that asked for it (docs/design.md §8).

A worker starts this file once (``python -I lib/command_spawner.py --control-fd FD``), in a
session of its own and with an empty environment, and sends it requests over a unix stream
socket (``lib.spawner_client``). A request is a 4-byte big-endian length and a JSON object,
sent with one ``sendmsg``:

- ``{"spawn": ID, "argv": […], "env": {…}, "cwd": PATH, "nice": N, "grace": S}``, with four
  descriptors (SCM_RIGHTS) on its first byte: the command's stdin, stdout and stderr and the
  write end of the run's status pipe. The spawner forks a *keeper* — a copy of itself, no new
  interpreter — that starts the command and watches it;
- ``{"stop": ID}``: SIGTERM to that run's keeper, which ends the command as below;
- ``{"kill": ID}``: SIGKILL to that run's keeper (the worker kills the command's group itself).

A keeper, on Linux, gets SIGTERM when the spawner dies (parent-death signal; SIGKILL included)
and is a *child subreaper*, so descendants that double-fork out of its command are re-parented
to it, not to init. It starts the command in a session of its own, ``N`` steps nicer, in ``cwd``
with exactly ``env``, and writes to the status pipe ``pid <command pid>`` (or ``error <argv0>:
<reason>`` when it cannot start it), ``lost`` when it is stopped because the spawner is gone,
and finally ``exit <code>`` (negative: killed by that signal). On SIGTERM, SIGINT or SIGHUP it
sends SIGTERM to the command's process group and to every descendant re-parented to it,
SIGKILL after ``grace`` seconds to all that are left, and exits once none is left; when the
command exits by itself, what it left behind gets the same treatment before the exit is
reported. The exit is noticed at once: the keeper sleeps on its signal wake-up pipe (SIGCHLD).

The spawner exits when the worker is gone — the kernel closes the worker's end of the socket
whatever ended it, SIGKILL included — after SIGTERM to every keeper. It keeps each run's status
pipe until it has reaped the keeper, so a keeper that died without reporting (the OOM killer)
is reported as ``exit <its status>``; being a subreaper itself, it then SIGKILLs what that
keeper left (its command and their descendants, re-parented to the spawner).

Elsewhere than Linux there is no parent-death signal and no subreaper: a keeper looks at its
parent every ``POLL_SECONDS`` instead, and a descendant that left the command's group escapes.
Only the standard library is imported, and the file imports nothing of its own (``-I``).
"""

import argparse
import contextlib
import json
import os
import select
import signal
import socket
import struct
import sys
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
POLL_SECONDS = 0.05
#: After SIGKILL, how long to wait for the last descendants (a process in uninterruptible sleep).
KILL_WAIT_SECONDS = 10.0
LINUX = sys.platform.startswith("linux")
HEADER = struct.Struct(">I")
#: The descriptors a spawn request carries: stdin, stdout, stderr, status.
SPAWN_FDS = 4
#: The largest request accepted, in bytes (an argv and an environment).
MAX_REQUEST_BYTES = 16 * 1024 * 1024

_stop_requested = False


def _libc_prctl():
    """libc's ``prctl`` on Linux (loaded once, in the spawner: a keeper or command forked from it
    must not pay for ``ctypes``), else None."""
    if not LINUX:
        return None
    import ctypes

    return ctypes.CDLL(None, use_errno=True).prctl


_PRCTL = _libc_prctl()


def _prctl(option: int, value: int) -> None:
    _PRCTL(option, value, 0, 0, 0)


def _request_stop(signum, frame) -> None:
    global _stop_requested
    _stop_requested = True


def _wake_on_signals() -> int:
    """Make SIGTERM, SIGINT and SIGHUP request a stop and every signal (SIGCHLD included) write
    to a new wake-up pipe; returns its read end, to sleep on with ``select``."""
    read, write = os.pipe()
    os.set_blocking(read, False)
    os.set_blocking(write, False)
    previous = signal.set_wakeup_fd(write)
    if previous != -1:  # a keeper's copy of the spawner's
        os.close(previous)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _request_stop)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # a handler, so that it wakes the pipe
    return read


def _sleep(wake: int, timeout: float | None) -> None:
    """Until a signal arrives or ``timeout`` seconds pass (None: no limit)."""
    select.select([wake], [], [], timeout)
    with contextlib.suppress(BlockingIOError):
        while os.read(wake, 512):
            pass


def _executable(name: str, env: dict[str, str]) -> str:
    """The file ``name`` runs: itself when it has a slash, else the first of that name in the
    ``PATH`` of ``env`` (as ``execvp`` looks); ``name`` when none is found, so that starting it
    fails with ENOENT."""
    if "/" in name:
        return name
    for directory in os.get_exec_path(env):
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate):
            return candidate
    return name


def _start(argv: list[str], env: dict[str, str], stdio: list[int]) -> int:
    """Start ``argv`` with exactly ``env`` in a session of its own, ``stdio`` as its 0, 1 and 2
    and no other descriptor of ours, the signals Python ignores back to their defaults;
    returns its pid. ``posix_spawn`` (a vfork): no copy of this process's memory is made."""
    # ``stdio`` are not inheritable (``_receive``): their copies on 0, 1 and 2 are the command's.
    return os.posix_spawn(
        _executable(argv[0], env), argv, env, setsid=True,
        file_actions=[(os.POSIX_SPAWN_DUP2, fd, number) for number, fd in enumerate(stdio)],
        setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
    )


def children_of(parent: int, *, live: bool = False) -> list[int]:
    """The children of process ``parent`` (Linux /proc), zombies left out when ``live``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == parent and not (live and fields[0] == "Z"):
            found.append(int(entry.name))
    return found


def _signal_all(command_pid: int, sig: int, signalled: set[int] | None) -> None:
    """Send ``sig`` to the command's process group (its pgid is its pid: a session of its
    own) and to each child of the keeper and its group — once each when ``signalled``
    tracks who already got it; never to the keeper's own group."""
    own_group = os.getpgrp()
    if signalled is None or 0 not in signalled:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(command_pid, sig)
        if signalled is not None:
            signalled.add(0)  # 0 is never a pid: it stands for the command's group
    for pid in children_of(os.getpid(), live=True) if LINUX else []:
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


def _signal_until_reaped(
    command_pid: int, sig: int, signalled: set[int] | None, seconds: float, exit_code: int | None,
) -> tuple[bool, int | None]:
    """``_signal_all`` and reap every ``POLL_SECONDS`` for at most ``seconds``; returns (no
    child is left, the command's exit code as far as known)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        _signal_all(command_pid, sig, signalled)
        done, code = _reap(command_pid)
        exit_code = code if code is not None else exit_code
        if done:
            return True, exit_code
        time.sleep(POLL_SECONDS)
    return False, exit_code


def _clean_up(command_pid: int, grace: float, exit_code: int | None) -> int | None:
    """TERM the command's group and every descendant, KILL what is left after ``grace``; reap all."""
    if LINUX and exit_code is not None and _reap(command_pid)[0]:
        return exit_code  # a subreaper with no child left has no descendant left either
    done, exit_code = _signal_until_reaped(command_pid, signal.SIGTERM, set(), grace, exit_code)
    if not done:
        _, exit_code = _signal_until_reaped(command_pid, signal.SIGKILL, None, KILL_WAIT_SECONDS, exit_code)
    return exit_code


def _report(status, line: str) -> None:
    """Write one status line; a worker gone (its end closed) must not stop the keeper's work."""
    with contextlib.suppress(OSError):
        status.write(line)


def _keep(request: dict, stdio: list[int], status, spawner: int) -> None:
    """The keeper of one run (a forked copy of the spawner): start the command, wait for it,
    end it and what it left behind, report on ``status`` (module docstring)."""
    wake = _wake_on_signals()
    if LINUX:
        _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
    if os.getppid() != spawner:
        _report(status, "error the spawner was gone before the command started\n")
        return
    if request.get("nice"):
        os.nice(request["nice"])  # the keeper's own, which the command inherits
    argv = request["argv"]
    try:
        os.chdir(request["cwd"])  # the keeper's own, which the command inherits
        command = _start(argv, request["env"], stdio)
    except OSError as exc:
        _report(status, f"error {argv[0]}: {exc.strerror or exc}\n")
        return
    finally:
        for fd in stdio:  # the command's now: its end of file must not wait for the keeper
            os.close(fd)
    _report(status, f"pid {command}\n")
    exit_code = None
    while not _stop_requested and (LINUX or os.getppid() == spawner):
        _, exit_code = _reap(command)
        if exit_code is not None:
            break
        _sleep(wake, None if LINUX else POLL_SECONDS)
    if exit_code is None and os.getppid() != spawner:
        _report(status, "lost\n")
    exit_code = _clean_up(command, request["grace"], exit_code)
    _report(status, f"exit {exit_code if exit_code is not None else -signal.SIGKILL}\n")


def _fork_keeper(request: dict, fds: list[int], spawner: int, inherited: list[int]) -> int:
    """Fork the keeper of ``request``; returns its pid (in the spawner). The keeper never returns."""
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        for fd in inherited:  # the spawner's socket, wake-up pipe and other runs' status pipes
            os.close(fd)
        status = os.fdopen(fds[3], "w", buffering=1, encoding="utf-8", errors="replace")
        _keep(request, fds[:3], status, spawner)
        code = 0
    finally:
        os._exit(code)


def _receive(control: socket.socket) -> tuple[dict, list[int]] | None:
    """The next request and its descriptors, made not inheritable (a descriptor received is
    inheritable: the command got its run's status pipe and could write status lines of its
    own); None when the worker's end is closed."""
    try:
        head, fds, _flags, _address = socket.recv_fds(control, HEADER.size, SPAWN_FDS)
    except ConnectionError:
        return None
    for fd in fds:
        os.set_inheritable(fd, False)
    while head and len(head) < HEADER.size:
        more = control.recv(HEADER.size - len(head))
        if not more:
            return None
        head += more
    if not head:
        return None
    (length,) = HEADER.unpack(head)
    if length > MAX_REQUEST_BYTES:
        raise ValueError(f"a request of {length} bytes")
    body = b""
    while len(body) < length:
        more = control.recv(length - len(body))
        if not more:
            return None
        body += more
    return json.loads(body), fds


def _close_all(fds) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


class _Keepers:
    """The spawner's live keepers: request id → (pid, the status pipe's write end)."""

    def __init__(self):
        self.by_id: dict[int, tuple[int, int]] = {}

    def signal(self, request_id: int, sig: int) -> None:
        if request_id in self.by_id:  # not reaped yet: its pid is still its own
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.by_id[request_id][0], sig)

    def reap(self) -> None:
        """Reap exited keepers (and orphans); report a keeper that died without reporting
        (status not 0) and kill what it left: its command, re-parented here, and then what each
        orphan reaped leaves."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            request_id = next((rid for rid, (kid, _) in self.by_id.items() if kid == pid), None)
            if request_id is None:
                # An orphan of a dead keeper: what it left (its children, out of its group) is
                # re-parented here as it dies.
                self._kill_orphans()
                continue
            _, status_fd = self.by_id.pop(request_id)
            code = os.waitstatus_to_exitcode(status)
            if code != 0:
                self._kill_orphans()
                with contextlib.suppress(OSError):
                    os.write(status_fd, f"exit {code}\n".encode())
            os.close(status_fd)

    def _kill_orphans(self) -> None:
        """SIGKILL every child that is not a live keeper, and its process group: the spawner is a
        subreaper, so a command whose keeper was killed outright (the OOM killer) lands here."""
        keepers = {pid for pid, _ in self.by_id.values()}
        for pid in children_of(os.getpid(), live=True) if LINUX else []:
            if pid in keepers:
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if os.getpgid(pid) == pid:  # a command leads its own group
                    os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):  # another user's (set-user-ID)
                os.kill(pid, signal.SIGKILL)


def serve(control: socket.socket) -> None:
    """Answer the worker's requests until its end of ``control`` closes or a stop signal."""
    wake = _wake_on_signals()
    if LINUX:
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
    keepers = _Keepers()
    me = os.getpid()
    try:
        while not _stop_requested:
            readable, _, _ = select.select([control, wake], [], [])
            _sleep(wake, 0)
            keepers.reap()
            if control not in readable:
                continue
            received = _receive(control)
            if received is None:
                return
            request, fds = received
            if "spawn" in request and len(fds) == SPAWN_FDS:
                try:
                    inherited = [control.fileno(), wake, *(fd for _, fd in keepers.by_id.values())]
                    pid = _fork_keeper(request, fds, me, inherited)
                except OSError as exc:
                    with contextlib.suppress(OSError):
                        os.write(fds[3], f"error cannot start a keeper: {exc.strerror or exc}\n".encode())
                    _close_all(fds)
                    continue
                _close_all(fds[:3])
                keepers.by_id[request["spawn"]] = (pid, fds[3])
            elif "stop" in request or "kill" in request:
                _close_all(fds)
                keepers.signal(request.get("stop", request.get("kill")),
                               signal.SIGTERM if "stop" in request else signal.SIGKILL)
            else:
                _close_all(fds)
                raise ValueError(f"a request the spawner does not know: {sorted(request)}")
    finally:
        for pid, _ in keepers.by_id.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)


def main(arguments: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="command_spawner")
    parser.add_argument("--control-fd", type=int, required=True)
    options = parser.parse_args(arguments)
    with socket.socket(fileno=options.control_fd) as control:
        serve(control)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
