"""runserve's gunicorn: its arbiter waits for a signal 5 s instead of a second
(factory_site.gunicorn_run; docs/performance.md, "An idle second")."""

from gunicorn.app import base
from gunicorn.arbiter import Arbiter

from factory_site import gunicorn_run


def waited(monkeypatch, *, heartbeat: float) -> list[float]:
    asked = []
    monkeypatch.setattr(Arbiter, "wait_for_signals", lambda self, timeout=1.0: asked.append(timeout) or [])
    arbiter = object.__new__(gunicorn_run.QuietArbiter)
    arbiter.timeout = heartbeat
    assert arbiter.wait_for_signals(timeout=1.0) == []
    return asked


def test_the_arbiter_waits_five_seconds_within_a_sixth_of_its_workers_time_out(monkeypatch):
    assert waited(monkeypatch, heartbeat=30) == [5.0]   # gunicorn's default --timeout
    assert waited(monkeypatch, heartbeat=12) == [2.0]
    assert waited(monkeypatch, heartbeat=3) == [1.0]    # never less often than gunicorn's own second


def test_the_command_line_is_gunicorns_with_the_quiet_arbiter(monkeypatch):
    monkeypatch.setattr(base, "Arbiter", base.Arbiter)  # restored after the test
    seen = []
    monkeypatch.setattr(gunicorn_run, "run", lambda prog: seen.append((prog, base.Arbiter)))
    gunicorn_run.main()
    assert seen == [("gunicorn", gunicorn_run.QuietArbiter)]
