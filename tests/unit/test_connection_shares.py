"""The balancing accept (factory_site.connection_shares, factory_site.http_worker; docs/design.md
§10, "The HTTP server"): a worker holding more connections than another live worker leaves a new
connection to it, for at most ``ACCEPT_WAIT_SECONDS``."""

import os
import selectors
import socket
import subprocess
import sys
from collections import deque
from types import SimpleNamespace

import pytest
from gunicorn.config import Config

from factory_site import connection_shares, http_worker
from factory_site.connection_shares import SLOTS, AcceptTurn, ConnectionShares


def finished_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", ""])
    child.wait()
    return child.pid


def test_the_fewest_connections_elsewhere_count_live_workers_only():
    shares = ConnectionShares()
    mine = shares.claim(1, os.getpid())
    assert shares.fewest_elsewhere(mine) is None
    other = shares.claim(2, os.getppid())
    gone = shares.claim(3, finished_pid())
    shares.publish(mine, 9)
    shares.publish(other, 5)
    shares.publish(gone, 0)                               # a killed worker's slot: ignored
    assert (mine, other, gone, shares.fewest_elsewhere(mine), shares.fewest_elsewhere(other)) == (1, 2, 3, 5, 9)
    shares.release(other, os.getppid())
    assert shares.fewest_elsewhere(mine) is None


def test_a_slot_taken_over_by_a_later_worker_is_not_released_by_the_earlier_one():
    shares = ConnectionShares()
    first = shares.claim(5, finished_pid())
    later = shares.claim(5 + SLOTS, os.getppid())         # the same slot, numbered SLOTS workers later
    shares.release(first, 1)                              # the earlier worker's pid no longer holds it
    mine = shares.claim(6, os.getpid())
    shares.publish(later, 4)
    assert (first, later, shares.fewest_elsewhere(mine)) == (5, 5, 4)


def test_a_worker_waits_while_it_holds_more_then_takes_the_connection_after_the_wait():
    turn = AcceptTurn(wait_seconds=0.05, pause_seconds=0.002)
    assert [turn.decide(3, None, 10.0), turn.decide(3, 3, 10.0), turn.decide(2, 3, 10.0)] == [True, True, True]
    # Holding more: left alone on every look, 2 ms apart, within 50 ms of the first; taken at 50 ms.
    assert {turn.decide(4, 3, 20 + step / 500) for step in range(25)} == {False}
    assert turn.decide(4, 3, 20.05) is True
    # A look more than five pauses after the last one starts a new wait.
    turn = AcceptTurn(wait_seconds=0.25, pause_seconds=0.0625)
    assert [turn.decide(5, 3, t) for t in (30.0, 30.5, 30.625, 30.75)] == [False, False, False, True]
    # Once the others hold as many, the wait is over.
    assert [turn.decide(5, 3, 40.0), turn.decide(3, 3, 40.001), turn.decide(5, 3, 40.003)] == [False, True, False]


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def worker(monkeypatch, settings):
    """A ``ReadDeadlineThreadWorker`` with a real listening socket on loopback and its poller,
    sharing a fresh map with one other live worker that holds no connection."""
    shares = ConnectionShares()
    clock = FakeClock()
    monkeypatch.setattr(connection_shares, "SHARES", shares)
    monkeypatch.setattr(connection_shares, "time", SimpleNamespace(monotonic=clock.monotonic))
    monkeypatch.setattr(http_worker, "time", SimpleNamespace(monotonic=clock.monotonic))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    worker = object.__new__(http_worker.ReadDeadlineThreadWorker)
    worker.cfg, worker.sockets, worker.poller = Config(), [listener], selectors.DefaultSelector()
    worker._accepting, worker.pending_conns, worker.read_seconds = False, deque(), 5
    worker.accept_turn = AcceptTurn(wait_seconds=0.05, pause_seconds=0.002)
    worker._share_slot = shares.claim(1, os.getpid())
    worker.nr_conns = 3
    shares.publish(shares.claim(2, os.getppid()), 0)
    worker.set_accept_enabled(True)
    client = socket.create_connection(listener.getsockname())
    yield SimpleNamespace(worker=worker, shares=shares, clock=clock, listener=listener)
    client.close()
    for conn in worker.pending_conns:
        conn.sock.close()
    worker.poller.close()
    listener.close()


def listening(worker) -> bool:
    return any(key.fileobj is worker.sockets[0] for key in worker.poller.get_map().values())


def test_a_busier_worker_leaves_a_new_connection_alone_and_stops_looking_for_a_pause(worker):
    w = worker.worker
    w.accept(worker.listener)
    assert (w.nr_conns, len(w.pending_conns), listening(w), w._paused_until) == (3, 0, False, 0.002)
    w.set_accept_enabled(True)                            # gthread's loop has room: still paused
    assert listening(w) is False
    worker.clock.now = 0.002
    w.set_accept_enabled(True)
    assert (listening(w), w._paused_until) == (True, None)


def test_a_busier_worker_takes_the_connection_once_nobody_did_within_the_wait(worker):
    w = worker.worker
    for step in range(25):                                # a look every 2 ms for 48 ms: left alone
        worker.clock.now = step / 500
        w.set_accept_enabled(True)
        w.accept(worker.listener)
        assert (w.nr_conns, listening(w)) == (3, False)
    worker.clock.now = 0.05
    w.set_accept_enabled(True)
    w.accept(worker.listener)
    assert (w.nr_conns, len(w.pending_conns), worker.shares.fewest_elsewhere(2)) == (4, 1, 4)


def test_a_worker_holding_no_more_than_the_others_accepts_at_once(worker):
    w = worker.worker
    w.nr_conns = 0
    w.accept(worker.listener)
    assert (w.nr_conns, len(w.pending_conns), listening(w), w._paused_until) == (1, 1, True, None)


def test_the_map_is_created_once_per_server_before_the_workers_fork():
    assert isinstance(connection_shares.SHARES, ConnectionShares)
    assert issubclass(http_worker.ReadDeadlineThreadWorker, connection_shares.BalancedAccept)
