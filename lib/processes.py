"""Processes: signal handling for long-running commands, children that die with their
parent, and killing a command's whole process group.

SIGTERM and SIGINT set a flag the loops check.

Children of ``runserve`` also stop when the supervisor is gone (killed with SIGKILL,
say): they would otherwise go on ticking and running work nobody supervises, and
hold the port a restarted runtime needs.
"""

import os
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
    while not stop.wait(PARENT_POLL_SECONDS):
        if os.getppid() != supervisor_pid:
            stop.set()


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
