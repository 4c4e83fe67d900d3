"""What an HTTP worker sets for itself at start (factory_site.http_worker): the read deadline, JSON
error answers, a 1 ms GIL switch interval instead of Python's 5 ms, and its slot in the map of
connection counts, held while its loop runs."""

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
    before = sys.getswitchinterval()
    worker = object.__new__(http_worker.ReadDeadlineThreadWorker)
    worker.age, worker.pid = 3, os.getpid()
    try:
        worker.init_process()
        assert (sys.getswitchinterval(), worker.read_seconds, util.write_error, worker._share_slot, seen) == (
            0.001, 7, http_worker.write_json_error, 3, [0])
        assert shares.fewest_elsewhere(0) is None   # the loop has ended: the slot is given up
    finally:
        sys.setswitchinterval(before)
