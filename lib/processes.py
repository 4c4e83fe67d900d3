"""Processes: signal handling for long-running commands, children that die with their
parent, waiting for a child's exit without polling, and killing a command's whole process group.

SIGTERM and SIGINT set a flag the loops check.

Children of ``runserve`` also stop when the supervisor is gone (killed with SIGKILL,
say): they would otherwise go on ticking and running work nobody supervises, and
hold the port a restarted runtime needs.
"""

import os
import select
import selectors
import signal
import subprocess
import sys
import threading

#: Set by ``runserve`` in its children's environment: the pid they must outlive no longer.
SUPERVISOR_PID_VARIABLE = "FACTORY_SUPERVISOR_PID"
PARENT_POLL_SECONDS = 1.0
PR_SET_PDEATHSIG = 1


def stop_on_signals() -> threading.Event:
    """Return an event that SIGTERM, SIGINT or the supervisor's death sets.

    Loops check the event and sleep on it.
    """
    stop = threading.Event()

    def handle(signum, frame):
        stop.set()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    supervisor = os.environ.get(SUPERVISOR_PID_VARIABLE)
    if supervisor and supervisor.isdigit():
        threading.Thread(target=_watch_parent, args=(int(supervisor), stop), daemon=True).start()
    return stop


def _watch_parent(supervisor_pid: int, stop: threading.Event) -> None:
    """Set ``stop`` once the supervisor is gone. Waits on its pidfd, which becomes readable when
    it exits: no wake-up while it lives (an idle runtime's second costs nothing here). Where
    pidfds are missing (Linux before 5.3, another system), looks once every ``PARENT_POLL_SECONDS``."""
    try:
        pidfd = os.pidfd_open(supervisor_pid)
    except ProcessLookupError:
        stop.set()
        return
    except (AttributeError, OSError):
        pidfd = None
    if pidfd is not None:
        try:
            # Still this process's parent after the open: the pidfd is the supervisor's, not a
            # process that took its pid after it died.
            if os.getppid() == supervisor_pid:
                select.select([pidfd], [], [])
        finally:
            os.close(pidfd)
        stop.set()
        return
    while not stop.wait(PARENT_POLL_SECONDS):
        if os.getppid() != supervisor_pid:
            stop.set()


class ChildExits:
    """Waits until one of some children exits or a signal arrives, without waking up meanwhile:
    each child's pidfd and the signal wake-up pipe (``signal.set_wakeup_fd``) in one selector.
    Made in the main thread (the only one that may set the wake-up fd); ``close()`` puts the
    previous wake-up fd back. Raises OSError (or AttributeError) where pidfds are missing: the
    caller then polls."""

    def __init__(self, pids: list[int]):
        self._selector = selectors.DefaultSelector()
        self._fds: list[int] = []
        try:
            for pid in pids:
                self._add(os.pidfd_open(pid))
            read, write = os.pipe()
            self._fds.append(write)
            self._add(read)
            os.set_blocking(read, False)
            os.set_blocking(write, False)
            self._wake = read
            self._previous = signal.set_wakeup_fd(write)
        except BaseException:
            self._release()
            raise

    def _add(self, fd: int) -> None:
        self._fds.append(fd)
        self._selector.register(fd, selectors.EVENT_READ)

    def wait(self, timeout: float) -> None:
        """Return once a child has exited, a signal arrived or ``timeout`` seconds passed."""
        self._selector.select(timeout)
        try:
            while os.read(self._wake, 512):
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        signal.set_wakeup_fd(self._previous)
        self._release()

    def _release(self) -> None:
        self._selector.close()
        for fd in self._fds:
            os.close(fd)
        self._fds = []


def die_with_parent() -> None:
    """``preexec_fn`` for children: on Linux the kernel sends SIGTERM when the parent dies.

    Covers children that do not run our loops (gunicorn); elsewhere it does nothing and
    the parent watch of ``stop_on_signals`` is the guard.
    """
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def kill_process_group(process: subprocess.Popen, *, grace_seconds: float) -> None:
    """SIGTERM to the process group led by ``process`` (started with ``start_new_session``),
    then SIGKILL after ``grace_seconds`` if it has not exited; a no-op once the group is empty."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace_seconds)
            return
        except subprocess.TimeoutExpired:
            continue
