"""``GET /metrics``: the Prometheus text format, who may read it, and figures that move (docs/production.md, "Metrics")."""

import re

import pytest
import time_machine
import yaml
from prometheus_client.parser import text_string_to_metric_families

from ops.loop_status import LOOP_NAME
from ops.slot_loop import iterate
from schedules.models import SlotLoopStatus
from tests.conftest import PROJECT_DIR, at
from tests.helpers import step, tick

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("host_clock_as_database_clock")]

TOKEN = "a-long-random-api-token"
HOURLY_HEARTBEAT = "schedules:\n  heartbeat:\n    every: 60m\n"


@pytest.fixture
def token(settings):
    settings.FACTORY_API_TOKEN = TOKEN
    return TOKEN


def scrape(client, instant: str) -> str:
    with time_machine.travel(at(instant), tick=False):
        response = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    return response.content.decode()


def samples(text: str, name: str) -> dict:
    """``{(sorted label pairs): value}`` of the samples called ``name``."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                found[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def test_anonymous_is_401_and_a_wrong_token_401(client, token):
    assert client.get("/metrics").status_code == 401
    response = client.get("/metrics", headers={"Authorization": "Bearer wrong"})
    assert (response.status_code, response.json()["error"]) == (401, "authentication_failed")


def test_a_signed_in_non_staff_user_is_403(client, token, django_user_model):
    client.force_login(django_user_model.objects.create_user("viewer", password="viewer-pass-123"))
    assert client.get("/metrics").status_code == 403


def test_a_tick_moves_the_tick_figures(client, token, registry_files):
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    before = scrape(client, "2026-11-30T21:00:03Z")
    assert "factory_ticks_admitted_recent{" not in before
    tick("2026-11-30T21:00:03Z")
    text = scrape(client, "2026-11-30T21:00:04Z")
    lines = text.splitlines()
    assert 'factory_ticks_admitted_recent{loop="heartbeat"} 1.0' in lines
    assert 'factory_ticks_skipped_recent{loop="heartbeat"} 0.0' in lines
    assert 'factory_tick_lateness_seconds_bucket{le="2.0"} 0.0' in lines
    assert 'factory_tick_lateness_seconds_bucket{le="5.0"} 1.0' in lines
    assert 'factory_tick_lateness_seconds_bucket{le="+Inf"} 1.0' in lines
    assert 'factory_tick_lateness_seconds_count 1.0' in lines
    assert 'factory_tick_lateness_seconds_sum 3.0' in lines
    assert 'factory_planning_backlog_events 0.0' in lines
    assert 'factory_run_queue_depth{source="schedule"} 1.0' in lines
    assert 'factory_run_queue_oldest_age_seconds{source="schedule"} 1.0' in lines
    assert 'factory_planning_latency_seconds_count 1.0' in lines
    assert 'factory_metrics_window_seconds 3600.0' in lines


def test_a_tick_outside_the_window_is_no_longer_counted(client, token, registry_files):
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    tick("2026-11-30T21:00:03Z")
    assert samples(scrape(client, "2026-11-30T22:00:02Z"), "factory_ticks_admitted_recent") == {
        (("loop", "heartbeat"),): 1.0,
    }
    assert samples(scrape(client, "2026-11-30T22:00:04Z"), "factory_ticks_admitted_recent") == {}


def test_a_finished_run_is_counted_by_outcome_with_its_duration(client, token, registry_files):
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    tick("2026-11-30T21:00:03Z")
    step("2026-11-30T21:00:10Z")
    text = scrape(client, "2026-11-30T21:00:11Z")
    assert samples(text, "factory_runs_finished_recent") == {
        (("loop", "heartbeat"), ("outcome", "DEGRADED"), ("status", "succeeded")): 1.0,
    }
    assert samples(text, "factory_run_duration_seconds_count") == {(): 1.0}
    assert samples(text, "factory_run_queue_depth") == {}


def test_pending_proposals_per_loop_with_the_oldest_age(client, token, registry_files):
    registry_files.write_config("schedule.yaml", "schedules:\n  reaper:\n    enabled: true\n    every: 1m\n")
    tick("2026-11-30T21:00:00Z")
    tick("2026-11-30T21:01:00Z")
    text = scrape(client, "2026-11-30T21:01:30Z")
    assert samples(text, "factory_proposals_pending") == {(("loop", "reaper"),): 2.0}
    assert samples(text, "factory_proposals_pending_oldest_age_seconds") == {(("loop", "reaper"),): 90.0}


def test_the_doctors_anomalies_are_gauges(client, token):
    text = scrape(client, "2026-11-30T21:00:00Z")
    anomalies = samples(text, "factory_doctor_anomaly")
    assert anomalies[(("anomaly", "slotLoopStale"),)] == 1.0
    assert {labels[0][1] for labels in anomalies} == {
        "slotLoopStale", "stoppedSchedules", "proposalPileUps", "registryInvalid", "expiredLeases",
        "interruptedRuns", "starvedQueue", "stuckLoops", "futureLastSlot", "clockSkew", "longPauses", "runBacklog",
    }
    assert anomalies[(("anomaly", "expiredLeases"),)] == 0.0
    assert samples(text, "factory_slot_loop_last_iteration_age_seconds") == {(): -1.0}
    assert samples(text, "factory_slot_loop_last_iteration_seconds") == {(): -1.0}
    assert samples(text, "factory_doctor_ok") == {(): 0.0}


def test_an_intake_answer_moves_the_intake_counter(client, token):
    name = "factory_intake_answers_total"
    key = (("door", "events"), ("status", "401"))
    before = samples(scrape(client, "2026-11-30T21:00:00Z"), name).get(key, 0.0)
    response = client.post("/events", data=b"{}", content_type="application/json")
    assert response.status_code == 401
    assert samples(scrape(client, "2026-11-30T21:00:00Z"), name)[key] == before + 1


def test_the_sample_alert_rules_name_only_metrics_that_exist(client, token, registry_files):
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    tick("2026-11-30T21:00:03Z")
    client.post("/events", data=b"{}", content_type="application/json")
    names = set()
    for family in text_string_to_metric_families(scrape(client, "2026-11-30T21:00:04Z")):
        names |= {sample.name for sample in family.samples}
    rules = yaml.safe_load((PROJECT_DIR / "config" / "prometheus-alerts.example.yml").read_text())
    alerts = [rule for group in rules["groups"] for rule in group["rules"]]
    used = {name for rule in alerts for name in re.findall(r"\bfactory_[a-z_]+", rule["expr"])}
    assert used - names == set()
    anomalies = {re.search(r'anomaly="(\w+)"', rule["expr"]).group(1) for rule in alerts if "anomaly=" in rule["expr"]}
    assert anomalies == {
        "slotLoopStale", "stoppedSchedules", "proposalPileUps", "registryInvalid", "expiredLeases",
        "interruptedRuns", "starvedQueue", "stuckLoops", "futureLastSlot", "clockSkew", "longPauses", "runBacklog",
    }
    assert all(set(rule) <= {"alert", "expr", "for", "labels", "annotations"} for rule in alerts)


def test_the_slot_loops_iteration_time_is_the_last_recorded(client, token, registry_files):
    registry_files.write_config("schedule.yaml", HOURLY_HEARTBEAT)
    with time_machine.travel(at("2026-11-30T21:00:01Z"), tick=False):
        iterate(now=at("2026-11-30T21:00:01Z"))
    (took,) = samples(scrape(client, "2026-11-30T21:00:02Z"), "factory_slot_loop_last_iteration_seconds").values()
    recorded = SlotLoopStatus.objects.get(name=LOOP_NAME).last_iteration_seconds
    assert took == recorded and 0 <= recorded < 30
    SlotLoopStatus.objects.filter(name=LOOP_NAME).update(last_iteration_seconds=0.25)
    assert samples(scrape(client, "2026-11-30T21:00:02Z"), "factory_slot_loop_last_iteration_seconds") == {(): 0.25}
