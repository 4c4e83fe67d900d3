"""``bridge run JOB`` and ``emit_event`` up to the POST: gate, dry, slots, failures (docs/host-clock.md).

The tests that need a serve process answering are in ``test_bridge_runserve.py``; here the
serve is absent (a free loopback port nobody listens on), which is itself a case to test.
None of these tests has database access: the bridge needs none.
"""

import io
import json
import logging

import pytest
from django.core.management import call_command

from runtime.registry import get_registry
from schedules.bridge import (
    EXIT_FAILED,
    EXIT_UNREACHABLE,
    bridge_envelope,
    calendar_slot,
    job_slot,
)
from tests.conftest import at
from tests.processes import free_port

SECRET = "bridge-test-secret"


def job_yaml(name: str = "work-hello", *, gate: str | None = None, dry: str | None = None, enabled: bool = True,
             cadence: str = "every: 5m") -> str:
    text = (f"jobs:\n  {name}:\n    {cadence}\n    enabled: {'true' if enabled else 'false'}\n"
            "    eventType: factory.work.requested\n    payload: {repo: hello}\n")
    if gate is not None:
        text += f"    gate_command: {gate}\n"
    if dry is not None:
        text += f"    dry_command: {dry}\n"
    return text


def python_exit(code: int, say: str) -> str:
    """A gate or dry command: the runtime's python printing ``say`` and exiting ``code``."""
    return json.dumps(["{python}", "-c", f"print({say!r}); raise SystemExit({code})"])


@pytest.fixture
def nobody_listening(settings):
    settings.FACTORY_EVENTS_SECRET = SECRET
    settings.FACTORY_SERVE_URL = f"http://127.0.0.1:{free_port()}"
    return settings.FACTORY_SERVE_URL


def bridge(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("bridge", *args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exc:
        code = exc.code
    return code, out.getvalue(), err.getvalue()


def test_a_gate_that_says_nothing_to_do_is_logged_and_exits_0_without_posting(registry_files, nobody_listening, caplog):
    registry_files.write_config("schedule.yaml", job_yaml(gate=python_exit(1, "supply is full")))
    caplog.set_level(logging.INFO, logger="schedules.bridge")
    code, out, err = bridge("run", "work-hello")
    assert (code, err) == (0, "")  # nothing was posted: the serve is not even there
    assert out.strip() == "skipped: work-hello: the gate says nothing to do: supply is full"
    assert any(r.action == "bridge_gate_skipped" for r in caplog.records)


@pytest.mark.parametrize(("gate", "reason"), [
    (python_exit(2, "queue unreadable"), "gate command of work-hello exited 2: queue unreadable"),
    ('["/nonexistent/gate"]', "gate command of work-hello cannot start: /nonexistent/gate: No such file or directory"),
])
def test_a_gate_that_fails_or_is_missing_exits_non_zero_with_one_line(registry_files, nobody_listening, gate, reason):
    registry_files.write_config("schedule.yaml", job_yaml(gate=gate))
    code, out, err = bridge("run", "work-hello")
    assert (code, out, err) == (EXIT_FAILED, "", f"bridge: {reason}\n")


def test_a_gate_that_hangs_is_killed_at_its_time_out(registry_files, nobody_listening, monkeypatch):
    monkeypatch.setattr("schedules.bridge.GATE_TIMEOUT_SECONDS", 1)
    registry_files.write_config("schedule.yaml", job_yaml(gate='["{python}", "-c", "import time; time.sleep(30)"]'))
    code, _, err = bridge("run", "work-hello")
    assert (code, err) == (EXIT_FAILED, "bridge: gate command of work-hello timed out after 1 s\n")


def test_the_dry_command_output_is_logged_before_the_post(registry_files, nobody_listening, caplog):
    registry_files.write_config("schedule.yaml", job_yaml(
        gate=python_exit(0, "go"), dry=json.dumps(["{python}", "-c", "print('would look at T-1'); print('would look at T-2')"]),
    ))
    caplog.set_level(logging.INFO, logger="schedules.bridge")
    code, _, _ = bridge("run", "work-hello")
    assert code == EXIT_UNREACHABLE
    dry = [r.getMessage() for r in caplog.records if r.action == "bridge_dry_output"]
    assert dry == ["work-hello dry: would look at T-1", "work-hello dry: would look at T-2"]
    assert [r.getMessage() for r in caplog.records if r.action == "bridge_gate_output"] == ["work-hello gate: go"]


def test_a_failing_dry_command_stops_the_bridge_before_admission(registry_files, nobody_listening):
    registry_files.write_config("schedule.yaml", job_yaml(dry=python_exit(3, "no preview")))
    assert bridge("run", "work-hello") == (EXIT_FAILED, "", "bridge: dry command of work-hello exited 3: no preview\n")


def test_an_unreachable_serve_exits_non_zero_with_a_one_line_reason(registry_files, nobody_listening):
    registry_files.write_config("schedule.yaml", job_yaml())
    code, out, err = bridge("run", "work-hello")
    assert (code, out) == (EXIT_UNREACHABLE, "")
    assert err.startswith(f"bridge: serve unreachable at {nobody_listening}/events: ")
    assert err.count("\n") == 1


def test_emit_event_alone_reports_an_unreachable_serve_the_same_way(nobody_listening):
    err = io.StringIO()
    with pytest.raises(SystemExit) as info:
        call_command("emit_event", "factory.work.requested", "--payload", '{"repo": "hello"}', stderr=err)
    assert info.value.code == EXIT_UNREACHABLE
    assert err.getvalue().startswith(f"emit_event: serve unreachable at {nobody_listening}/events: ")


def test_without_a_secret_nothing_is_sent(registry_files, nobody_listening, settings):
    settings.FACTORY_EVENTS_SECRET = ""
    registry_files.write_config("schedule.yaml", job_yaml())
    assert bridge("run", "work-hello") == (
        EXIT_FAILED, "", "bridge: FACTORY_EVENTS_SECRET is not set: the bridge cannot sign its event\n",
    )


def test_a_disabled_job_admits_nothing_even_if_its_timer_is_still_installed(registry_files, nobody_listening):
    registry_files.write_config("schedule.yaml", job_yaml(enabled=False, gate='["/nonexistent/gate"]'))
    code, _, err = bridge("run", "work-hello")
    assert code == EXIT_FAILED
    assert err.startswith("bridge: job work-hello is disabled in config/schedule.yaml; nothing admitted")


def test_an_unknown_job_names_the_known_ones(registry_files, nobody_listening):
    registry_files.write_config("schedule.yaml", job_yaml())
    assert bridge("run", "nope") == (EXIT_FAILED, "", "bridge: no job 'nope' in config/schedule.yaml (jobs: work-hello)\n")


def test_an_invalid_registry_refuses_to_run_any_job(registry_files, nobody_listening):
    registry_files.write_config("schedule.yaml", job_yaml().replace("factory.work.requested", "factory.retro.requested"))
    code, _, err = bridge("run", "work-hello")
    assert code == EXIT_FAILED and err.startswith("bridge: the registry does not load (1 error(s); first: ")


def test_fires_within_one_slot_build_byte_identical_envelopes(registry_files):
    registry_files.write_config("schedule.yaml", job_yaml())
    job = get_registry().jobs["work-hello"]
    first = bridge_envelope(job, job_slot(job, at("2026-11-30T21:00:01Z")))
    assert first == bridge_envelope(job, job_slot(job, at("2026-11-30T21:04:59Z")))
    assert first == {
        "schemaVersion": "factory.event/v1",
        "eventId": "bridge:work-hello:2026-11-30T21:00:00Z",
        "type": "factory.work.requested",
        "source": "bridge",
        "subject": "hello",
        "occurredAt": "2026-11-30T21:00:00Z",
        "correlationId": "bridge:work-hello:2026-11-30T21:00:00Z",
        "payload": {"repo": "hello", "loop": "work-hello", "slot": "2026-11-30T21:00:00Z"},
    }
    assert job_slot(job, at("2026-11-30T21:05:00Z")) == at("2026-11-30T21:05:00Z")


@pytest.mark.parametrize(("at_text", "days", "now", "slot"), [
    ("02:30", (), "2026-03-29T12:00:00Z", "2026-03-29T01:00:00Z"),   # spring forward: the end of the gap
    ("02:30", (), "2026-10-25T12:00:00Z", "2026-10-25T00:30:00Z"),   # fall back: the first occurrence
    ("09:00", (), "2026-11-30T07:59:59Z", "2026-11-29T08:00:00Z"),   # before today's time: yesterday's
    ("09:00", ("mon",), "2026-11-29T12:00:00Z", "2026-11-23T08:00:00Z"),  # a Sunday: last Monday's
])
def test_a_calendar_job_slot_is_its_latest_wall_time_in_its_zone(at_text, days, now, slot):
    assert calendar_slot(at_text, "Europe/Budapest", days, at(now)) == at(slot)


def test_a_missing_factory_root_is_named_as_the_reason(settings, tmp_path):
    from types import SimpleNamespace

    from schedules.bridge import BridgeError, run_command

    settings.FACTORY_ROOT = tmp_path / "nowhere"
    with pytest.raises(BridgeError, match=f"FACTORY_ROOT {tmp_path / 'nowhere'} is not a directory"):
        run_command("gate", SimpleNamespace(name="triage-job"), ("{python}", "-c", "pass"), 10)
