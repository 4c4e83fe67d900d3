"""lib.processes outside ``ChildExits``: the stop event of ``stop_on_signals``, the supervisor
watch of ``_watch_parent`` (pidfd and polling), ``die_with_parent``'s parent-death signal and
``kill_process_group``'s TERM then KILL."""

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from lib import processes

PR_GET_PDEATHSIG = 2
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


@pytest.fixture
def stranger():
    """A live process that is not this process's parent."""
    process = subprocess.Popen(["sleep", "30"])
    yield process.pid
    process.kill()
    process.wait()


@pytest.fixture
def restored_handlers():
    """SIGTERM's and SIGINT's handlers put back after the test."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def watcher(supervisor_pid: int) -> tuple[threading.Event, threading.Thread]:
    stop = threading.Event()
    thread = threading.Thread(target=processes._watch_parent, args=(supervisor_pid, stop), daemon=True)
    thread.start()
    return stop, thread


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_and_sigint_set_the_stop_event(sig, restored_handlers, monkeypatch):
    monkeypatch.delenv(processes.SUPERVISOR_PID_VARIABLE, raising=False)
    stop = processes.stop_on_signals()
    assert isinstance(stop, threading.Event) and not stop.is_set()
    os.kill(os.getpid(), sig)
    assert stop.wait(5)


@pytest.mark.parametrize("value", ["", "abc", "-5"])
def test_a_missing_or_non_numeric_supervisor_starts_no_watch(value, restored_handlers, monkeypatch):
    monkeypatch.setenv(processes.SUPERVISOR_PID_VARIABLE, value)
    before = set(threading.enumerate())
    stop = processes.stop_on_signals()
    assert set(threading.enumerate()) == before
    assert not stop.is_set()


def test_a_supervisor_that_is_not_the_parent_sets_the_stop_event(stranger, restored_handlers, monkeypatch):
    monkeypatch.setenv(processes.SUPERVISOR_PID_VARIABLE, str(stranger))
    assert processes.stop_on_signals().wait(5)


def test_the_watch_of_a_living_supervisor_is_a_daemon_thread_that_waits(restored_handlers, monkeypatch):
    monkeypatch.setenv(processes.SUPERVISOR_PID_VARIABLE, str(os.getppid()))
    before = set(threading.enumerate())
    stop = processes.stop_on_signals()
    started = set(threading.enumerate()) - before
    assert len(started) == 1 and started.pop().daemon
    assert not stop.wait(0.3)


def test_the_watch_opens_the_supervisors_pidfd_and_closes_it(stranger, monkeypatch):
    opened = []
    real_open = os.pidfd_open

    def pidfd_open(pid, *args):
        fd = real_open(pid, *args)
        opened.append((pid, fd))
        return fd

    monkeypatch.setattr(os, "pidfd_open", pidfd_open)
    stop = threading.Event()
    processes._watch_parent(stranger, stop)
    assert stop.is_set()
    ((pid, fd),) = opened
    assert pid == stranger
    with pytest.raises(OSError):
        os.fstat(fd)  # closed


def test_a_supervisor_already_gone_sets_the_stop_event_at_once():
    gone = subprocess.Popen(["true"])
    gone.wait()
    stop = threading.Event()
    processes._watch_parent(gone.pid, stop)
    assert stop.is_set()


@pytest.fixture
def no_pidfds(monkeypatch):
    def pidfd_open(pid, *args):
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "pidfd_open", pidfd_open)
    monkeypatch.setattr(processes, "PARENT_POLL_SECONDS", 0.05)


def test_without_pidfds_the_watch_polls_and_stops_once_the_supervisor_is_not_the_parent(stranger, no_pidfds):
    stop, thread = watcher(stranger)
    assert stop.wait(5)
    thread.join(5)
    assert not thread.is_alive()


def test_without_pidfds_the_watch_polls_on_while_the_supervisor_is_the_parent(no_pidfds):
    stop, thread = watcher(os.getppid())
    assert not stop.wait(0.5)
    assert thread.is_alive()
    stop.set()
    thread.join(5)
    assert not thread.is_alive()


@linux_only
def test_a_child_that_dies_with_its_parent_gets_sigterm_as_its_parent_death_signal():
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its parent-death signal after die_with_parent
        code = 1
        try:
            os.close(read)
            processes.die_with_parent()
            value = ctypes.c_int(-1)
            ctypes.CDLL(None, use_errno=True).prctl(PR_GET_PDEATHSIG, ctypes.byref(value), 0, 0, 0)
            os.write(write, str(value.value).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as reader:
        reported = reader.read().decode()
    _, status = os.waitpid(pid, 0)
    assert (os.waitstatus_to_exitcode(status), reported) == (0, str(int(signal.SIGTERM)))


def test_killing_a_process_group_terminates_its_leader_with_sigterm():
    process = subprocess.Popen(["sleep", "30"], start_new_session=True)
    started = time.monotonic()
    processes.kill_process_group(process, grace_seconds=10)
    assert process.returncode == -signal.SIGTERM
    assert time.monotonic() - started < 5


def test_a_group_that_ignores_sigterm_is_killed_after_the_grace():
    process = subprocess.Popen(
        [sys.executable, "-c", "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                               "print('ready', flush=True)\ntime.sleep(30)"],
        start_new_session=True, stdout=subprocess.PIPE,
    )
    assert process.stdout.readline() == b"ready\n"
    process.stdout.close()
    started = time.monotonic()
    processes.kill_process_group(process, grace_seconds=0.3)
    assert process.returncode == -signal.SIGKILL
    assert 0.25 <= time.monotonic() - started < 5


def test_killing_a_group_that_is_gone_does_nothing():
    process = subprocess.Popen(["true"], start_new_session=True)
    process.wait()
    processes.kill_process_group(process, grace_seconds=0.1)
    assert process.returncode == 0
