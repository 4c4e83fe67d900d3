"""runserve's start-up: the checks split around the slot loop's go-ahead, and what a failed start does to the
children it had started (ops/management/commands/runserve.py)."""

import logging
import signal

import pytest
from django.core.checks import Error, Warning
from django.core.checks.registry import CheckRegistry
from django.core.management.base import SystemCheckError

from ops.management.commands import runserve


class FakeChild:
    def __init__(self):
        self.calls = []

    def send_signal(self, sig):
        self.calls.append(("signal", sig))

    def kill(self):
        self.calls.append(("kill",))

    def wait(self, timeout=None):
        self.calls.append(("wait",))
        return 0


@pytest.mark.parametrize("started", [False, True])
def test_a_failed_start_kills_a_slot_loop_still_waiting_and_terminates_one_that_may_be_working(tmp_path, started):
    command = runserve.Command()
    command.shared_dir = tmp_path / "factory-registry-x"
    command.shared_dir.mkdir()
    child = FakeChild()
    command.abort({"slot-loop": child}, started=started)
    assert child.calls == ([("signal", signal.SIGTERM), ("wait",)] if started else [("kill",), ("wait",)])
    assert not command.shared_dir.exists()


def test_the_urlconf_checks_run_apart_from_every_other(monkeypatch, caplog):
    checks = CheckRegistry()
    checks.register(lambda app_configs, **kwargs: [Warning("a url warning", id="urls.W1")], "urls")
    checks.register(lambda app_configs, **kwargs: [Error("a registry error", id="runtime.E001")])
    monkeypatch.setattr(runserve, "check_registry", checks)
    command = runserve.Command()
    with caplog.at_level(logging.WARNING, logger="ops.runserve"):
        command.run_checks(urls=True)
    assert [(r.levelname, r.getMessage(), r.action, r.check) for r in caplog.records] == [
        ("WARNING", "?: (urls.W1) a url warning", "system_check", "urls.W1"),
    ]
    with pytest.raises(SystemCheckError) as refused:
        command.run_checks(urls=False)
    assert str(refused.value) == "System check identified some issues:\n?: (runtime.E001) a registry error"
