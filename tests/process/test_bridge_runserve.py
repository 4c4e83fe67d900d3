"""The host clock bridge against a real ``runserve`` on loopback (docs/host-clock.md).

Each test runs a runtime in its own database (``ProcessRuntime``), serves it with
``runserve`` (slot loop on, so events are planned; no run workers) and runs
``manage.py bridge run`` / ``emit_event`` as the host timer would: separate processes
whose only link to the serve is the signed ``POST /events``.
"""


import pytest

from tests.conftest import PROJECT_DIR
from tests.processes import answers_http, free_port, stop, wait_for

pytestmark = [pytest.mark.process, pytest.mark.django_db]

SECRET = "bridge-process-secret"
EXAMPLE = (PROJECT_DIR / "config" / "factory-clocks.example.yaml").read_text()


@pytest.fixture
def serve(runtime):
    """Start ``runserve`` on a free loopback port once the test wrote its config; yields its URL."""
    processes = []

    def start() -> str:
        port = free_port()
        process = runtime.start("runserve", "--bind", f"127.0.0.1:{port}", "--http-workers", "1", "--run-workers", "0",
                                FACTORY_EVENTS_SECRET=SECRET)
        processes.append(process)

        def answering():
            assert process.poll() is None, process.communicate()[0]
            return answers_http(port)

        wait_for(answering, timeout=40, what="runserve answering HTTP")
        return f"http://127.0.0.1:{port}"

    yield start
    for process in processes:
        code, output = stop(process)
        assert code == 0, output


def bridge(runtime, url: str, *args, secret: str = SECRET):
    """Run a bridge command as a rendered timer does: default log level, its own process."""
    return runtime.manage(*args, check=False, FACTORY_SERVE_URL=url, FACTORY_EVENTS_SECRET=secret, FACTORY_LOG_LEVEL="INFO")


def events(runtime, prefix: str) -> list[dict]:
    return [e for e in runtime.listing("events") if e["eventId"].startswith(prefix)]


def test_a_timer_firing_twice_converges_on_one_event_planned_as_a_watched_proposal(runtime, serve):
    runtime.write_config("schedule.yaml", EXAMPLE)
    url = serve()
    first = bridge(runtime, url, "bridge", "run", "factory-triage")
    second = bridge(runtime, url, "bridge", "run", "factory-triage")
    assert (first.returncode, second.returncode) == (0, 0), first.stderr + second.stderr
    event_id = first.stdout.strip().removeprefix("admitted: ")
    assert event_id.startswith("bridge:factory-triage:") and event_id.endswith("T00:00:00Z")
    assert second.stdout.strip() == f"duplicate: {event_id} was already admitted"
    assert "factory-triage gate: triage gate: go: supply is low" in first.stderr
    assert "factory-triage dry: triage would look at F-101 (intake)" in first.stderr

    proposals = wait_for(lambda: [p for p in runtime.listing("proposals") if p["eventId"] == event_id],
                         timeout=30, what="the proposal of the bridge event")
    assert [(p["status"], p["decidedBy"], p["plan"]["definition"]) for p in proposals] == [("pending", None, "triage@1")]
    (event,) = events(runtime, "bridge:")
    assert (event["source"], event["payload"]["loop"], event["planning"]["outcome"]) == ("bridge", "factory-triage", "PROPOSED")
    admitted = [j for j in runtime.listing("journal") if j["eventId"] == event_id and j["action"] == "event_admitted"]
    assert [(j["actor"], j["data"]["door"], j["data"]["source"], j["data"]["job"]) for j in admitted] == [
        ("events", "events", "bridge", "factory-triage"),
    ]
    assert [r for r in runtime.listing("runs") if r["eventId"] == event_id] == []


def test_a_wrong_secret_is_refused_by_the_serve_with_a_one_line_reason(runtime, serve):
    runtime.write_config("schedule.yaml", EXAMPLE)
    url = serve()
    result = bridge(runtime, url, "bridge", "run", "factory-triage", secret="not-the-secret")
    assert result.returncode == 3
    assert result.stderr.splitlines()[-1] == (
        f"bridge: signature refused by {url}/events: bad_signature: "
        "the signature does not match the body under the configured secret"
    )
    assert events(runtime, "bridge:") == []


def test_an_event_type_the_serve_does_not_know_is_refused(runtime, serve):
    url = serve()
    result = bridge(runtime, url, "emit_event", "factory.retro.requested", "--payload", '{"repo": "factory"}',
                    "--event-id", "retro-1")
    assert result.returncode == 4
    assert result.stderr.strip() == (
        f"emit_event: event retro-1 refused by {url}/events (422): "
        "unregistered_type: event type 'factory.retro.requested' is not registered"
    )
    ok = bridge(runtime, url, "emit_event", "factory.warm.requested", "--payload", '{"repo": "factory"}',
                "--event-id", "warm-1")
    assert (ok.returncode, ok.stdout.strip()) == (0, "admitted: warm-1")


def test_disabling_the_native_loop_leaves_the_bridge_job_admitting(runtime, serve):
    runtime.write_config("schedule.yaml", EXAMPLE.replace(
        "  factory-reaper:\n    description: no gate; the strict stale-claim predicate lives inside the reaper\n"
        "    every: 60m\n    enabled: false",
        "  factory-reaper:\n    description: no gate; the strict stale-claim predicate lives inside the reaper\n"
        "    every: 60m\n    enabled: true",
    ) + "schedules:\n  reaper:\n    enabled: false\n")
    url = serve()
    result = bridge(runtime, url, "bridge", "run", "factory-reaper")
    assert result.returncode == 0, result.stderr
    event_id = result.stdout.strip().removeprefix("admitted: ")
    proposal = wait_for(lambda: [p for p in runtime.listing("proposals") if p["eventId"] == event_id],
                        timeout=30, what="the reaper proposal")[0]
    assert (proposal["status"], proposal["loop"], proposal["plan"]["input"]["loop"]) == ("pending", None, "factory-reaper")
    assert events(runtime, "clock:reaper:") == []


def test_disabling_the_bridge_job_leaves_the_native_loop_ticking(runtime, serve):
    runtime.write_config("schedule.yaml", EXAMPLE + "schedules:\n  reaper:\n    enabled: true\n")
    url = serve()
    result = bridge(runtime, url, "bridge", "run", "factory-reaper")
    assert result.returncode == 1
    assert "job factory-reaper is disabled" in result.stderr
    wait_for(lambda: events(runtime, "clock:reaper:"), timeout=30, what="the native reaper tick")
    assert events(runtime, "bridge:") == []
