"""The agent and fake adapters on the worker's path: plan on stdin, scripted outcomes, time-outs (docs/design.md §8)."""

import json
import sys
from pathlib import Path

import pytest

from runtime.models import JournalEntry, Run
from runtime.services.execution import work_one
from tests.conftest import NO_HEARTBEAT, STAND_INS_DIR
from tests.helpers import inject, tick, work_all

pytestmark = pytest.mark.django_db

STAND_IN = STAND_INS_DIR / "agent.py"
NOW = "2026-11-30T10:00:00Z"


@pytest.fixture
def agent(settings, registry_files):
    settings.FACTORY_AGENT_COMMAND = f"{sys.executable} {STAND_IN}"
    registry_files.write_config("schedule.yaml", NO_HEARTBEAT)
    return registry_files


def scan(repo: str, event_id: str = "op-1") -> Run:
    """Inject a work request for ``repo`` and plan it into its auto-approved work-scan run."""
    inject(event_id, "factory.work.requested", {"repo": repo})
    tick(NOW)
    return Run.objects.get(event__uid=event_id)


def test_the_agent_gets_the_plan_on_stdin_and_answers_by_the_contract(agent, settings):
    run = scan("alpha")
    assert run.plan["adapter"] == "agent"
    assert work_one(worker="w1")
    run.refresh_from_db()
    assert (run.status, run.outcome, run.summary, run.result_data) == (
        "succeeded", "NO_WORK", "nothing ready in alpha", {"runId": run.pk}
    )
    given = json.loads((Path(settings.FACTORY_RUNS_DIR) / str(run.pk) / "plan.json").read_text())
    assert given == {**run.plan, "runId": run.pk}
    assert Path(run.stdout_path).read_text().startswith("agent working on work-scan@1 for alpha\n")


def test_an_agent_result_that_breaks_the_contract_fails_the_run(agent):
    run = scan("garbled")
    work_one(worker="w1")
    run.refresh_from_db()
    assert (run.status, run.reason) == ("failed", "output_contract_violation")


def test_without_an_agent_command_the_run_is_a_finished_failure(agent, settings):
    settings.FACTORY_AGENT_COMMAND = ""
    run = scan("alpha")
    work_one(worker="w1")
    run.refresh_from_db()
    assert (run.status, run.outcome, run.reason, run.attempt) == ("failed", "FAILED", "agent_command_unset", 1)
    assert not work_one(worker="w1")                                  # never retried


def test_an_agent_past_its_time_out_is_a_failed_attempt(agent):
    agent.update("definitions/work-scan@1.json", lambda d: d.update(timeoutSeconds=1, maxAttempts=1))
    run = scan("sleepy")
    work_one(worker="w1")
    run.refresh_from_db()
    assert (run.status, run.reason) == ("abandoned", "timeout")


@pytest.fixture
def fake(settings, registry_files):
    settings.FACTORY_FAKE_AGENTS = True
    registry_files.write_config("schedule.yaml", NO_HEARTBEAT)
    return registry_files


def test_the_fake_plays_each_rules_results_in_order_and_repeats_the_last(fake):
    fake.write_config("fake-outcomes.yaml", """
outcomes:
  work-scan@1:
    - when: {repo: alpha}
      results: [{outcome: LOW_SUPPLY}, {outcome: NO_WORK, summary: then nothing}]
    - results: [{outcome: NO_WORK, summary: any other repo}]
  triage@1:
    - results: [{outcome: NOTHING_TO_PROMOTE}]
""")
    for n, repo in enumerate(["alpha", "beta", "alpha", "alpha"]):
        inject(f"op-{n}", "factory.work.requested", {"repo": repo})
    tick(NOW)
    work_all()
    scans = Run.objects.filter(definition="work-scan@1").order_by("id")
    assert [(r.plan["adapter"], r.outcome, r.summary) for r in scans] == [
        ("fake", "LOW_SUPPLY", ""), ("fake", "NO_WORK", "any other repo"),
        ("fake", "NO_WORK", "then nothing"), ("fake", "NO_WORK", "then nothing"),
    ]
    assert json.loads(Path(scans[0].stdout_path).read_text()) == {
        "schemaVersion": "factory.command-result/v1", "outcome": "LOW_SUPPLY",
    }


@pytest.mark.parametrize("script, reason, detail", [
    (None, "fake_outcomes_invalid", "No such file"),
    ("outcomes: [", "fake_outcomes_invalid", "not YAML"),
    ("outcomes:\n  work-scan@1:\n    - when: {repo: alpha}\n", "fake_outcomes_invalid", "'results' is a required property"),
    ("outcomes:\n  work-scna@1:\n    - results: [{outcome: NO_WORK}]\n", "fake_outcomes_invalid", "no such definition: work-scna@1"),
    ("outcomes:\n  work-scan@1:\n    - when: {repo: beta}\n      results: [{outcome: NO_WORK}]\n", "fake_outcome_missing", "no rule of work-scan@1"),
])
def test_a_fake_run_without_a_valid_scripted_outcome_fails_and_says_why(fake, script, reason, detail):
    if script is not None:
        fake.write_config("fake-outcomes.yaml", script)
    run = scan("alpha")
    work_one(worker="w1")
    run.refresh_from_db()
    assert (run.status, run.reason) == ("failed", reason)
    assert detail in run.summary


def test_a_fake_past_its_time_out_is_a_failed_attempt_and_requeued(fake):
    fake.update("definitions/work-scan@1.json", lambda d: d.update(timeoutSeconds=1, maxAttempts=2))
    fake.write_config("fake-outcomes.yaml", "outcomes:\n  work-scan@1:\n    - results: [{outcome: NO_WORK, seconds: 3}]\n")
    run = scan("alpha")
    work_one(worker="w1")
    run.refresh_from_db()
    assert (run.status, run.reason, run.attempt) == ("queued", "timeout", 1)
    assert JournalEntry.objects.filter(run=run, action="run_requeued").exists()


def test_fake_agents_leave_other_definitions_as_they_are(fake):
    fake.write_config("schedule.yaml", "schedules: {}\n")
    tick("2026-11-30T10:00:00Z")
    assert Run.objects.get(definition="heartbeat@1").plan["adapter"] == "builtin"
