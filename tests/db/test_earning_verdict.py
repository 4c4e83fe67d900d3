"""Has a loop earned auto? The verdict at each criterion's boundary (ops.earning_evidence; spec §6;
docs/schedules.md, "Earning auto"). The history is written as rows, each run with the actor and
status the criterion reads; time is passed in (``NOW``)."""

import json
from datetime import timedelta
from unittest import mock

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError, SystemCheckError
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ops.earning import earned_loops, earning_report
from runtime.registry import load_registry
from schedules.models import LoopChange
from tests.conftest import at
from tests.earning_history import NOW, SINCE, kernel_loops, rejected, runs, watched

pytestmark = pytest.mark.django_db


@pytest.fixture
def loops(registry_files):
    return kernel_loops(registry_files)

def report(files, loop: str, since=SINCE) -> dict:
    registry = load_registry(files.registry_dir, files.config_dir)
    return earning_report(registry, loop, since=since, now=NOW, registry_dir=files.registry_dir)


def unmet(document: dict) -> dict:
    return {c["criterion"]: (c["required"], c["observed"]) for c in document["evidence"] if not c["met"]}


@pytest.mark.parametrize("loop, n, verdict, failing", [
    ("scan", 9, "not-earned", {"succeededRuns": (10, 9)}),
    ("scan", 10, "earned", {}),
    ("reaper", 19, "not-earned", {"succeededRuns": (20, 19)}),
    ("reaper", 20, "earned", {}),
])
def test_a_loop_earns_auto_with_enough_runs_a_mutating_one_with_twice_as_many(loops, approver, loop, n, verdict, failing):
    watched(loop)
    runs(loop, n, approver)
    document = report(loops, loop)
    assert (document["verdict"], unmet(document)) == (verdict, failing)
    assert [c["criterion"] for c in document["evidence"]] == [
        "allowedByRegistry", "windowSeconds", "firstSlot", "unwatchedSeconds", "succeededRuns", "failedRuns",
        "rejectedProposals", "runsNotApprovedByPerson",
    ]
    if verdict == "earned":
        assert document["diff"].startswith("--- a/registry/schedules.json")
        assert '+    "approval": "auto",' in document["diff"].splitlines()
    else:
        assert document["diff"] is None


def test_one_rejection_one_failed_run_or_one_auto_approved_run_is_not_earned(loops, approver):
    for loop in ("scan", "reaper"):
        watched(loop)
    runs("scan", 10, approver)
    rejected("scan", approver)
    runs("reaper", 20, approver)
    runs("reaper", 1, approver, status="failed", start=SINCE + timedelta(days=3))
    assert unmet(report(loops, "scan")) == {"rejectedProposals": (0, 1)}
    failed = report(loops, "reaper")
    assert (failed["verdict"], unmet(failed)) == ("not-earned", {"failedRuns": (0, 1)})
    assert next(c["detail"] for c in failed["evidence"] if c["criterion"] == "failedRuns") == "failed 1"


def test_a_run_approved_by_the_schedule_is_not_a_persons_decision(loops, approver):
    watched("scan")
    runs("scan", 10, approver)
    runs("scan", 1, None, actor="schedule", start=SINCE + timedelta(days=3))
    document = report(loops, "scan")
    assert (document["verdict"], unmet(document)) == ("not-earned", {"runsNotApprovedByPerson": (0, 1)})
    detail = next(c["detail"] for c in document["evidence"] if c["criterion"] == "runsNotApprovedByPerson")
    assert detail == "approved by schedule 1: not a person's decision"


def test_a_window_one_second_short_is_not_earned(loops, approver):
    watched("scan", since=SINCE + timedelta(seconds=1))
    runs("scan", 10, approver)
    document = report(loops, "scan")
    assert (document["verdict"], unmet(document)) == ("not-earned", {
        "firstSlot": ("2026-12-03T12:00:00Z", "2026-12-03T12:00:01Z"), "unwatchedSeconds": (0, 1),
    })
    short = report(loops, "scan", since=NOW - timedelta(days=7) + timedelta(seconds=1))
    assert unmet(short) == {"windowSeconds": (604800, 604799)}
    assert "a shorter window cannot show auto earned, ask for --since 7d or more" in short["evidence"][1]["detail"]


def test_a_disabled_gap_in_the_window_is_not_earned(loops, approver):
    watched("scan", since=SINCE - timedelta(days=30))
    runs("scan", 10, approver)
    LoopChange.objects.create(loop="scan", at=at("2026-12-05T10:00:00Z"), kind="disabled")
    LoopChange.objects.create(loop="scan", at=at("2026-12-05T11:30:00Z"), kind="enabled")
    document = report(loops, "scan")
    assert (document["verdict"], unmet(document)) == ("not-earned", {"unwatchedSeconds": (0, 5400)})
    assert document["evidence"][3]["detail"] == "disabled from 2026-12-05T10:00:00Z to 2026-12-05T11:30:00Z (5400 s)"


def test_a_human_only_type_an_overlay_loop_and_an_auto_loop_are_never_earned(loops, approver):
    loops.update("event-types.json", lambda data: data["clock.tick.reaper"].update(humanApprovalOnly=True))
    loops.write_config("schedule.yaml", (
        "schedules:\n  nightly:\n    every: 24h\n    eventType: clock.tick.heartbeat\n    catchUp: none\n"
        "    singleton: true\n    approval: watched\n    enabled: true\n"
    ))
    for loop in ("reaper", "nightly"):
        watched(loop)
        runs(loop, 20, approver)
    human, overlay, auto = (report(loops, loop) for loop in ("reaper", "nightly", "heartbeat"))
    assert (human["verdict"], human["diff"]) == ("not-allowed", None)
    assert unmet(human) == {"allowedByRegistry": (True, False)}
    assert human["why"] == "clock.tick.reaper is humanApprovalOnly: every run needs a person, always"
    assert (overlay["verdict"], overlay["diff"], unmet(overlay)) == ("not-allowed", None, {"allowedByRegistry": (True, False)})
    assert overlay["why"].endswith("move the loop into registry/schedules.json with approval auto, in a reviewed commit")
    assert (auto["verdict"], auto["autoAllowed"], auto["diff"]) == ("already-auto", True, None)


def test_settings_tighten_the_criteria(loops, approver, settings):
    watched("scan", since=SINCE - timedelta(days=7))
    runs("scan", 10, approver)
    settings.FACTORY_EARN_MIN_RUNS = 12
    assert unmet(report(loops, "scan")) == {"succeededRuns": (12, 10)}
    settings.FACTORY_EARN_MIN_RUNS, settings.FACTORY_EARN_WINDOW_DAYS = 10, 14
    assert unmet(report(loops, "scan", since=NOW - timedelta(days=14))) == {}
    assert unmet(report(loops, "scan")) == {"windowSeconds": (1209600, 604800)}


@pytest.mark.parametrize("name, value, floor", [("FACTORY_EARN_WINDOW_DAYS", 6, 7), ("FACTORY_EARN_MIN_RUNS", 9, 10)])
def test_a_setting_below_its_floor_is_refused_at_start(settings, name, value, floor):
    setattr(settings, name, value)
    with pytest.raises(SystemCheckError, match=rf"runtime.E003.*{name}={value} is below {floor}"):
        call_command("check")


def test_the_report_costs_the_same_queries_whatever_the_history(loops, approver):
    watched("scan")
    runs("scan", 10, approver)
    with CaptureQueriesContext(connection) as small:
        report(loops, "scan")
    runs("scan", 60, approver, start=SINCE + timedelta(days=4))
    LoopChange.objects.bulk_create([LoopChange(loop="scan", at=SINCE - timedelta(days=d), kind="enabled") for d in range(1, 50)])
    with CaptureQueriesContext(connection) as large:
        report(loops, "scan")
    assert len(small) == len(large)


def test_the_dashboards_earned_loops_are_judged_together(loops, approver):
    for loop in ("scan", "reaper"):
        watched(loop)
        runs(loop, 10, approver)
    registry = load_registry(loops.registry_dir, loops.config_dir)
    with CaptureQueriesContext(connection) as queries:
        assert earned_loops(registry, ["heartbeat", "reaper", "scan"], now=NOW) == {"scan"}
    assert len(queries) == 4
    with CaptureQueriesContext(connection) as none:
        assert earned_loops(registry, ["heartbeat"], now=NOW) == set()
    assert len(none) == 0


def test_the_cli_exit_status_is_the_verdict(loops, approver, capsys):
    loops.update("event-types.json", lambda data: data["clock.tick.reaper"].update(humanApprovalOnly=True))
    watched("scan")
    runs("scan", 10, approver)
    with mock.patch("runtime.clock.database_now", lambda: NOW):
        call_command("schedule", "report", "scan", "--json")
        document = json.loads(capsys.readouterr().out)
        assert set(document) == {
            "loop", "approval", "source", "since", "until", "slots", "planning", "noopReasons", "proposals",
            "decidedBy", "runs", "durationSeconds", "mutating", "verdict", "evidence", "autoAllowed", "why", "diff",
        }
        assert set(document["evidence"][0]) == {"criterion", "required", "observed", "met", "detail"}
        assert (document["verdict"], document["since"]) == ("earned", "2026-12-03T12:00:00Z")
        for loop, code in (("scan --since 1d", 3), ("reaper", 4), ("heartbeat", 5)):
            with pytest.raises(SystemExit) as exited:
                call_command("schedule", "report", *loop.split())
            assert exited.value.code == code
        text = capsys.readouterr().out
        assert "verdict: already-auto: already auto" in text and "CRITERION" in text
        for args in (["nope"], ["scan", "--since", "soon"]):
            with pytest.raises(CommandError) as refused:
                call_command("schedule", "report", *args)
            assert refused.value.returncode == 2
