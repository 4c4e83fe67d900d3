"""What an HTTP worker sets for itself at start (factory_site.http_worker): the read deadline, JSON
error answers, and a 1 ms GIL switch interval instead of Python's 5 ms."""

import sys

from gunicorn import util
from gunicorn.workers.gthread import ThreadWorker

from factory_site import http_worker
from ops import process_rows


def test_an_http_worker_starts_with_a_one_millisecond_switch_interval(monkeypatch, settings):
    settings.FACTORY_HTTP_READ_SECONDS = 7
    monkeypatch.setattr(util, "write_error", util.write_error)  # restored after the test
    monkeypatch.setattr(process_rows, "keep_row", lambda role, stop: None)
    monkeypatch.setattr(ThreadWorker, "init_process", lambda self: None)  # gunicorn's own start: its loop
    before = sys.getswitchinterval()
    worker = object.__new__(http_worker.ReadDeadlineThreadWorker)
    try:
        worker.init_process()
        assert (sys.getswitchinterval(), worker.read_seconds, util.write_error) == (
            0.001, 7, http_worker.write_json_error)
    finally:
        sys.setswitchinterval(before)
