"""The earning report (ops.earning; spec §6): a watched loop's history over a window, whether
auto is permitted by the registry's rules, and the exact registry diff that flips a kernel loop
(given only once the loop earned it: tests/db/test_earning_verdict.py)."""

import json
import subprocess
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from ops.earning import earning_report, kernel_flip_diff, window_start
from runtime.models import Proposal
from runtime.registry import load_registry
from runtime.services.approval import approve_proposal, reject_proposal
from tests.conftest import at
from tests.helpers import finish_active_runs, tick

pytestmark = pytest.mark.django_db

WATCHED_REAPER = "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n"


@pytest.fixture
def history(registry_files, approver):
    """Four reaper slots: one approved (ran 65 s), one rejected, one superseded, one pending."""
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    for hour in (18, 19, 20):
        tick(f"2026-11-30T{hour}:00:10Z")
    first, second, third = Proposal.objects.order_by("id")
    reject_proposal(first.pk, user=approver, now=at("2026-11-30T20:30:00Z"))
    run = approve_proposal(third.pk, user=approver, now=at("2026-11-30T20:31:00Z"))
    finish_active_runs()
    run.__class__.objects.filter(pk=run.pk).update(
        started_at=at("2026-11-30T20:31:05Z"), finished_at=at("2026-11-30T20:32:10Z")
    )
    tick("2026-11-30T21:00:10Z")
    return registry_files


def test_the_report_counts_slots_decisions_and_runs_in_the_window(history):
    registry = load_registry(history.registry_dir, history.config_dir)
    report = earning_report(
        registry, "reaper", since=at("2026-11-30T18:30:00Z"), now=at("2026-11-30T21:30:00Z"),
        registry_dir=history.registry_dir,
    )
    evidence = {c["criterion"]: (c["required"], c["observed"], c["met"]) for c in report.pop("evidence")}
    assert report == {
        "loop": "reaper", "approval": "watched", "source": "kernel",
        "since": "2026-11-30T18:30:00Z", "until": "2026-11-30T21:30:00Z",
        "slots": 3, "planning": {"PROPOSED": 3}, "noopReasons": {},
        "proposals": {"approved": 1, "pending": 1, "superseded": 1},
        # As the timeline says it: alice approved one; approving it superseded one (by system).
        "decidedBy": {"alice": 1, "system": 1},
        "runs": {"succeeded": 1}, "durationSeconds": {"median": 65.0, "worst": 65.0},
        "mutating": True, "verdict": "not-earned", "autoAllowed": True,
        "why": "a kernel loop: registry/schedules.json may declare it auto, in a reviewed commit",
        "diff": None,
    }
    # Three hours of history, one run: permitted is not earned.
    assert evidence == {
        "allowedByRegistry": (True, True, True),
        "windowSeconds": (604800, 10800, False),
        "firstSlot": ("2026-11-30T18:30:00Z", "2026-11-30T18:00:00Z", True),
        "unwatchedSeconds": (0, 0, True),
        "succeededRuns": (20, 1, False),
        "failedRuns": (0, 0, True),
        "rejectedProposals": (0, 0, True),
        "runsNotApprovedByPerson": (0, 0, True),
    }


def test_auto_approved_ticks_are_counted_as_decided_by_their_door(registry_files):
    tick("2026-11-30T21:00:10Z")
    finish_active_runs()
    tick("2026-11-30T21:05:10Z")
    registry = load_registry(registry_files.registry_dir, registry_files.config_dir)
    report = earning_report(
        registry, "heartbeat", since=at("2026-11-30T20:30:00Z"), now=at("2026-11-30T21:30:00Z"),
        registry_dir=registry_files.registry_dir,
    )
    assert (report["proposals"], report["decidedBy"]) == ({"approved": 2}, {"schedule": 2})


def test_the_diff_applies_with_git_and_flips_only_that_loop(registry_files, tmp_path):
    diff = kernel_flip_diff(registry_files.registry_dir, "reaper")
    work = tmp_path / "repo"
    (work / "registry").mkdir(parents=True)
    original = (registry_files.registry_dir / "schedules.json").read_text()
    (work / "registry" / "schedules.json").write_text(original)
    subprocess.run(["git", "apply", "-"], input=diff, text=True, cwd=work, check=True)
    before, after = json.loads(original), json.loads((work / "registry" / "schedules.json").read_text())
    assert (after["reaper"]["approval"], after["reaper"]["enabled"]) == ("auto", True)
    assert {k: v for k, v in after.items() if k != "reaper"} == {k: v for k, v in before.items() if k != "reaper"}
    assert kernel_flip_diff(registry_files.registry_dir, "no-such-loop") == ""


def test_overlay_repo_and_human_only_loops_are_told_what_would_have_to_move(repos):
    repos.write_config("schedule.yaml", (
        "schedules:\n  nightly:\n    every: 24h\n    eventType: clock.tick.reaper\n    catchUp: none\n"
        "    singleton: true\n    approval: watched\n    enabled: true\n"
    ))
    registry = load_registry(repos.registry_dir, repos.config_dir)
    now = at("2026-11-30T21:30:00Z")
    verdicts = {
        name: (r["verdict"], r["autoAllowed"], r["why"].split(":")[0], r["diff"])
        for name in ("nightly", "work-hello")
        for r in [earning_report(registry, name, since=now - timedelta(days=7), now=now, registry_dir=repos.registry_dir)]
    }
    assert verdicts == {
        "nightly": ("not-allowed", False, "an overlay loop may never be auto (approval is a tracked declaration)", None),
        "work-hello": ("not-allowed", False, "a repo loop is a repoLoops template in registry/schedules.json", None),
    }


@pytest.mark.parametrize("since, start", [("90m", "2026-11-30T20:00:00Z"), ("2026-11-29T00:00:00+01:00", "2026-11-28T23:00:00Z")])
def test_the_window_is_a_span_or_a_past_instant(since, start):
    assert window_start(since, now=at("2026-11-30T21:30:00Z")) == at(start)


def test_the_cli_refuses_an_unknown_loop_and_a_future_window_with_exit_2(history, capsys):
    for args in (["report", "nope"], ["report", "reaper", "--since", "2099-01-01T00:00:00Z"], ["report", "reaper", "--since", "soon"],
                 ["report", "reaper", "--since", ""]):
        with pytest.raises(CommandError) as refused:
            call_command("schedule", *args)
        assert refused.value.returncode == 2
    with pytest.raises(SystemExit) as exited:
        call_command("schedule", "report", "reaper", "--since", "366d", "--json")
    document = json.loads(capsys.readouterr().out)
    assert (exited.value.code, document["loop"], document["verdict"], document["autoAllowed"], document["diff"]) == (
        3, "reaper", "not-earned", True, None
    )
