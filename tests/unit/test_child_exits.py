"""Waiting for a child's exit or a signal without polling (lib.processes.ChildExits, _watch_parent)."""

import os
import signal
import subprocess
import threading
import time

import pytest

from lib import processes


def test_a_childs_exit_ends_the_wait_at_once():
    child = subprocess.Popen(["sleep", "0.3"])
    exits = processes.ChildExits([child.pid])
    try:
        started = time.monotonic()
        exits.wait(10)
        assert time.monotonic() - started < 5
        assert child.wait(timeout=5) == 0
    finally:
        exits.close()


def test_a_signal_ends_the_wait_and_the_previous_wakeup_fd_comes_back(monkeypatch):
    seen = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: seen.append(signum))
    child = subprocess.Popen(["sleep", "30"])
    before = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(before)
    exits = processes.ChildExits([child.pid])
    try:
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGUSR1)).start()
        started = time.monotonic()
        exits.wait(10)
        assert time.monotonic() - started < 5 and seen == [signal.SIGUSR1]
    finally:
        exits.close()
        child.kill()
        child.wait()
        signal.signal(signal.SIGUSR1, previous)
    assert signal.set_wakeup_fd(before) == before


def test_with_nothing_happening_the_wait_lasts_its_timeout():
    child = subprocess.Popen(["sleep", "30"])
    exits = processes.ChildExits([child.pid])
    try:
        started = time.monotonic()
        exits.wait(0.3)
        assert time.monotonic() - started >= 0.25
    finally:
        exits.close()
        child.kill()
        child.wait()


def test_a_gone_child_is_refused_at_once():
    child = subprocess.Popen(["true"])
    child.wait()
    with pytest.raises(ProcessLookupError):
        processes.ChildExits([child.pid])


def test_the_parent_watch_stops_when_the_supervisor_is_not_the_parent_and_waits_while_it_is():
    stranger = subprocess.Popen(["sleep", "30"])
    try:
        stop = threading.Event()
        processes._watch_parent(stranger.pid, stop)  # alive, but not this process's parent
        assert stop.is_set()
    finally:
        stranger.kill()
        stranger.wait()
    stop = threading.Event()
    threading.Thread(target=processes._watch_parent, args=(os.getppid(), stop), daemon=True).start()
    assert not stop.wait(0.3)
