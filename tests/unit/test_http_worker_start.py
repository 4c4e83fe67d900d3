"""What an HTTP worker sets for itself at start (factory_site.http_worker): the read deadline, JSON
error answers, a 1 ms GIL switch interval instead of Python's 5 ms, and its slot in the map of
connection counts, held while its loop runs; and how long its loop waits on its poller."""

import os
import sys

from gunicorn import util
from gunicorn.workers.gthread import ThreadWorker

from factory_site import connection_shares, http_worker
from factory_site.connection_shares import ConnectionShares
from ops import process_rows


def test_an_http_worker_starts_with_a_one_millisecond_switch_interval(monkeypatch, settings):
    settings.FACTORY_HTTP_READ_SECONDS = 7
    monkeypatch.setattr(util, "write_error", util.write_error)  # restored after the test
    monkeypatch.setattr(process_rows, "keep_row", lambda role, stop: None)
    shares = ConnectionShares()
    monkeypatch.setattr(connection_shares, "SHARES", shares)
    seen = []
    # gunicorn's own start is its loop: while it runs, the worker holds its slot in the shared map.
    monkeypatch.setattr(ThreadWorker, "init_process", lambda self: seen.append(shares.fewest_elsewhere(0)))
    asked = []
    monkeypatch.setattr(http_worker, "die_with_parent", lambda: asked.append("PR_SET_PDEATHSIG"))
    before = sys.getswitchinterval()
    worker = object.__new__(http_worker.ReadDeadlineThreadWorker)
    worker.age, worker.pid, worker.ppid, worker.alive = 3, os.getpid(), os.getppid(), True
    try:
        worker.init_process()
        assert (sys.getswitchinterval(), worker.read_seconds, util.write_error, worker._share_slot, seen) == (
            0.001, 7, http_worker.write_json_error, 3, [0])
        assert (asked, worker.alive) == (["PR_SET_PDEATHSIG"], True)
        assert shares.fewest_elsewhere(0) is None   # the loop has ended: the slot is given up
    finally:
        sys.setswitchinterval(before)


def waits(monkeypatch, *, connections: int, heartbeat: float = 15.0, paused_for: float | None = None) -> list[float]:
    """The poller time-outs a worker holding ``connections`` asks gthread for when gthread asks 1 s."""
    asked = []
    monkeypatch.setattr(ThreadWorker, "wait_for_and_dispatch_events", lambda self, timeout: asked.append(timeout))
    worker = object.__new__(http_worker.ReadDeadlineThreadWorker)
    worker.nr_conns, worker.timeout = connections, heartbeat
    if paused_for is not None:
        worker._paused_until = http_worker.time.monotonic() + paused_for
    worker.wait_for_and_dispatch_events(1.0)
    return asked


def test_an_idle_http_worker_wakes_every_five_seconds_and_a_busy_one_every_second(monkeypatch):
    assert waits(monkeypatch, connections=0) == [5.0]
    assert waits(monkeypatch, connections=1) == [1.0]
    # The arbiter's heartbeat comes first: a worker whose time-out is shorter wakes within it.
    assert waits(monkeypatch, connections=0, heartbeat=2.0) == [2.0]
    # A pause of the balancing accept ends on time (factory_site.connection_shares).
    [paused] = waits(monkeypatch, connections=0, paused_for=0.3)
    assert 0.2 < paused <= 0.3


def test_a_worker_whose_arbiter_died_before_it_asked_the_kernel_stops_at_once(monkeypatch):
    monkeypatch.setattr(process_rows, "keep_row", lambda role, stop: None)
    monkeypatch.setattr(http_worker, "die_with_parent", lambda: None)
    monkeypatch.setattr(ThreadWorker, "init_process", lambda self: None)
    monkeypatch.setattr(util, "write_error", util.write_error)
    before = sys.getswitchinterval()
    worker = object.__new__(http_worker.ReadDeadlineThreadWorker)
    worker.age, worker.pid, worker.ppid, worker.alive = 3, os.getpid(), os.getppid() + 1, True
    try:
        worker.init_process()
    finally:
        sys.setswitchinterval(before)
    assert worker.alive is False
