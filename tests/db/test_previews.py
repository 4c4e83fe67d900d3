"""Previews: a watched mutating command's dry run for the person deciding (docs/design.md §8, Previews)."""

from unittest import mock

import pytest

from runtime.models import JournalEntry, Proposal, Run
from runtime.preview_model import Preview
from runtime.registry import store
from runtime.services.approval import approve_proposal
from runtime.services.previews import PreviewRefused, claim_preview, request_preview
from tests.conftest import at
from tests.helpers import factory_root as planted
from tests.helpers import finish_active_runs, many_loops, run_previews, tick, work_all

pytestmark = pytest.mark.django_db

WATCHED_REAPER = "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n"


@pytest.fixture
def factory_root(settings, tmp_path):
    """A factory root of the tests' own with a claim of T-7 stale since 2026-11-30T18:00Z."""
    settings.FACTORY_ROOT = planted(tmp_path / "factory-root")
    return settings.FACTORY_ROOT


def test_a_watched_reaper_proposal_is_previewed_and_the_claim_stays_where_it_is(registry_files, factory_root):
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    proposal = Proposal.objects.get()
    waiting = Preview.objects.get()
    assert (waiting.proposal_id, waiting.status, waiting.timeout_seconds, waiting.requested_by) == (
        proposal.pk, "pending", 60, None)
    assert waiting.argv == proposal.plan["argv"][:-1] and proposal.plan["argv"][-1] == "--apply"
    assert run_previews("2026-11-30T21:00:12Z") == 1

    preview = Preview.objects.get()
    assert (preview.status, preview.outcome, preview.summary, preview.exit_code, preview.reason) == (
        "done", "WOULD_REAP", "1 stale claim(s) would be reaped", 0, "")
    assert preview.data["stale"] == [{"file": "T-7.json", "ticket": "T-7", "heartbeatAt": "2026-11-30T18:00:00Z"}]
    assert preview.data["mode"] == "dry-run"
    assert preview.stdout.startswith("would reap T-7 (T-7.json, last heartbeat 2026-11-30T18:00:00Z)\n")
    assert (preview.started_at, preview.finished_at) == (at("2026-11-30T21:00:12Z"), at("2026-11-30T21:00:12Z"))
    assert preview.registry_digest == proposal.registry_digest
    assert (factory_root / "claims" / "T-7.json").exists()
    assert Run.objects.count() == 0
    entry = JournalEntry.objects.get(action="proposal_previewed")
    assert (entry.actor, entry.proposal_id, entry.event_id) == ("system", proposal.pk, proposal.event_id)
    assert entry.data == {
        "status": "done", "reason": "", "outcome": "WOULD_REAP", "summary": "1 stale claim(s) would be reaped",
        "exitCode": 0, "durationSeconds": 0.0, "requestedBy": None, "registryDigest": proposal.registry_digest,
    }


def test_an_approval_journals_the_preview_its_approver_saw(registry_files, factory_root, approver):
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    run_previews("2026-11-30T21:00:12Z")
    proposal = Proposal.objects.get()
    approve_proposal(proposal.pk, user=approver, now=at("2026-11-30T21:01:00Z"))
    assert JournalEntry.objects.get(action="proposal_approved").data == {"via": "admin", "preview": {
        "status": "done", "reason": "", "outcome": "WOULD_REAP", "summary": "1 stale claim(s) would be reaped",
        "finishedAt": "2026-11-30T21:00:12Z",
    }}
    with mock.patch("runtime.services.execution.database_now", lambda: at("2026-11-30T21:01:05Z")):
        work_all(clock=lambda: at("2026-11-30T21:01:05Z"))
    assert Run.objects.get().outcome == "REAPED"
    assert not (factory_root / "claims" / "T-7.json").exists()


def test_only_the_newest_pending_proposal_of_a_loop_is_previewed(registry_files, factory_root):
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    for instant in ("2026-11-30T21:00:10Z", "2026-11-30T22:00:10Z", "2026-11-30T23:00:10Z"):
        tick(instant)
    rows = list(Preview.objects.order_by("proposal_id").values_list("status", "reason", "finished_at"))
    assert rows == [
        ("not-previewed", "newer_proposal", at("2026-11-30T22:00:10Z")),
        ("not-previewed", "newer_proposal", at("2026-11-30T23:00:10Z")),
        ("pending", "", None),
    ]
    assert run_previews("2026-11-30T23:00:12Z") == 1
    assert Preview.objects.filter(status="done").get().proposal_id == Proposal.objects.order_by("id").last().pk


def test_at_most_the_preview_queue_waits_and_the_rest_are_not_previewed(registry_files, settings):
    settings.FACTORY_PREVIEW_QUEUE = 50
    many_loops(registry_files, 51)
    assert (Proposal.objects.count(), Preview.objects.filter(status="pending").count()) == (51, 50)
    newest_first = list(Proposal.objects.order_by("-id").values_list("id", flat=True))
    assert set(Preview.objects.values_list("proposal_id", flat=True)) == set(newest_first[:50])
    left_out = Proposal.objects.get(pk=newest_first[50])
    assert not Preview.objects.filter(proposal=left_out).exists()


def test_a_preview_of_a_proposal_decided_first_is_dropped_and_never_runs(registry_files, factory_root, approver):
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    approve_proposal(Proposal.objects.get().pk, user=approver, now=at("2026-11-30T21:00:20Z"))
    assert run_previews("2026-11-30T21:00:30Z") == 0
    preview = Preview.objects.get()
    assert (preview.status, preview.reason, preview.finished_at) == (
        "not-previewed", "decided_first", at("2026-11-30T21:00:30Z"))
    assert not JournalEntry.objects.filter(action="proposal_previewed").exists()


def test_a_run_worker_never_takes_a_preview_and_a_running_preview_holds_no_run_back(registry_files, factory_root, approver):
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    tick("2026-11-30T22:00:10Z")
    newest = Proposal.objects.order_by("id").last()
    assert claim_preview(worker="preview-thread", clock=lambda: at("2026-11-30T22:00:11Z")).proposal_id == newest.pk
    approve_proposal(newest.pk, user=approver, now=at("2026-11-30T22:00:12Z"))
    with mock.patch("runtime.services.execution.database_now", lambda: at("2026-11-30T22:00:13Z")):
        assert work_all(clock=lambda: at("2026-11-30T22:00:13Z")) == 1
    assert Run.objects.get().status == "succeeded"
    assert Preview.objects.get(proposal=newest).status == "running"


def test_a_preview_past_its_time_out_is_killed_and_shown_failed(registry_files, factory_root):
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    slow = ["{python}", "-c", "import sys, time; time.sleep(30 if '--apply' not in sys.argv else 0)", "--apply"]
    registry_files.update("definitions/reaper@1.json", lambda d: d.update(command=slow, previewTimeoutSeconds=1))
    tick("2026-11-30T21:00:10Z")
    assert run_previews("2026-11-30T21:00:12Z") == 1
    preview = Preview.objects.get()
    assert (preview.status, preview.reason, preview.detail, preview.outcome) == (
        "failed", "timeout", "killed at its time-out of 1 s", "")
    assert JournalEntry.objects.get(action="proposal_previewed").data["status"] == "failed"


def test_a_preview_whose_spawner_died_is_failed_and_says_so(registry_files, factory_root):
    from runtime.adapters.command import SPAWNER

    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    kills = ("import os, signal, time; keeper = os.getppid(); "
             "os.kill(int(open('/proc/%d/stat' % keeper).read().rsplit(')', 1)[1].split()[1]), signal.SIGKILL); "
             "time.sleep(60)")
    registry_files.update("definitions/reaper@1.json", lambda d: d.update(command=["{python}", "-c", kills, "--apply"]))
    tick("2026-11-30T21:00:10Z")
    assert run_previews("2026-11-30T21:00:12Z") == 1
    preview = Preview.objects.get()
    assert (preview.status, preview.reason, preview.detail) == (
        "failed", "spawner_died", f"the command spawner (pid {SPAWNER.pid}) died; its command was killed")


def test_a_preview_whose_worker_died_is_failed_once_past_its_deadline(registry_files, factory_root):
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    claimed = claim_preview(worker="gone:1:1", clock=lambda: at("2026-11-30T21:00:11Z"))
    assert claimed.deadline_at == at("2026-11-30T21:01:26Z")
    assert claim_preview(worker="w", clock=lambda: at("2026-11-30T21:01:26Z")) is None
    assert Preview.objects.get().status == "running"
    assert claim_preview(worker="w", clock=lambda: at("2026-11-30T21:01:27Z")) is None
    preview = Preview.objects.get()
    assert (preview.status, preview.reason, preview.finished_at) == ("failed", "worker_lost", at("2026-11-30T21:01:27Z"))
    assert JournalEntry.objects.get(action="proposal_previewed").data["reason"] == "worker_lost"


def test_a_person_asks_again_journaled_with_their_name_at_most_every_10_s(registry_files, factory_root, approver, viewer):
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    proposal = Proposal.objects.get()
    registry = store.current()
    with pytest.raises(PreviewRefused) as waiting:
        request_preview(proposal.pk, user=approver, now=at("2026-11-30T21:00:11Z"), registry=registry)
    assert (waiting.value.code, waiting.value.status) == ("preview_in_progress", 409)
    run_previews("2026-11-30T21:00:12Z")

    again = request_preview(proposal.pk, user=approver, now=at("2026-11-30T21:00:15Z"), registry=registry, via="cli",
                            os_user="root")
    assert (again.status, again.requested_by, again.outcome, again.requested_at) == (
        "pending", approver, "", at("2026-11-30T21:00:15Z"))
    entry = JournalEntry.objects.get(action="proposal_preview_requested")
    assert (entry.actor, entry.actor_name, entry.proposal_id, entry.data) == (
        "operator", "alice", proposal.pk, {"via": "cli", "osUser": "root"})
    run_previews("2026-11-30T21:00:16Z")
    assert JournalEntry.objects.filter(action="proposal_previewed").order_by("id").last().data["requestedBy"] == "alice"

    with pytest.raises(PreviewRefused) as soon:
        request_preview(proposal.pk, user=approver, now=at("2026-11-30T21:00:24Z"), registry=registry)
    assert (soon.value.code, soon.value.status, soon.value.detail) == (
        "preview_too_soon", 429,
        f"proposal {proposal.pk} was previewed on request less than 10 s ago; ask again in 2 s")
    assert request_preview(proposal.pk, user=approver, now=at("2026-11-30T21:00:25Z"), registry=registry).status == "pending"

    with pytest.raises(PreviewRefused) as denied:
        request_preview(proposal.pk, user=viewer, now=at("2026-11-30T21:00:40Z"), registry=registry)
    assert (denied.value.code, denied.value.status) == ("permission_denied", 403)
    with pytest.raises(PreviewRefused) as missing:
        request_preview(10**6, user=approver, now=at("2026-11-30T21:00:40Z"), registry=registry)
    assert (missing.value.code, missing.value.status) == ("not_found", 404)


def test_asking_for_a_preview_of_a_decided_or_preview_less_proposal_is_refused(registry_files, factory_root, approver):
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    proposal = Proposal.objects.get()
    approve_proposal(proposal.pk, user=approver, now=at("2026-11-30T21:00:20Z"))
    with pytest.raises(PreviewRefused) as decided:
        request_preview(proposal.pk, user=approver, now=at("2026-11-30T21:00:30Z"), registry=store.current())
    assert (decided.value.code, decided.value.detail) == (
        "not_pending", f"proposal {proposal.pk} is approved: only a pending one is previewed")

    registry_files.update("definitions/reaper@1.json", lambda d: (d.pop("preview"), d.pop("previewTimeoutSeconds")))
    finish_active_runs()
    tick("2026-11-30T22:00:10Z")
    plain = Proposal.objects.order_by("id").last()
    assert not Preview.objects.filter(proposal=plain).exists()
    with pytest.raises(PreviewRefused) as none:
        request_preview(plain.pk, user=approver, now=at("2026-11-30T22:00:30Z"), registry=store.current())
    assert (none.value.code, none.value.detail) == ("no_preview", "reaper@1 declares no preview in the registry in force")


def test_a_result_with_nul_in_its_text_is_recorded_with_it_replaced(registry_files, factory_root):
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    line = ('{"schemaVersion": "factory.command-result/v1", "outcome": "WOULD_REAP", "summary": "a\\u0000b", '
            '"data": {"k\\u0000": ["v\\u0000"]}}')
    command = ["{python}", "-c", f"print({line!r})", "--apply"]
    registry_files.update("definitions/reaper@1.json", lambda d: d.update(command=command))
    tick("2026-11-30T21:00:10Z")
    assert run_previews("2026-11-30T21:00:12Z") == 1
    preview = Preview.objects.get()
    assert (preview.status, preview.summary, preview.data) == ("done", "a\ufffdb", {"k\ufffd": ["v\ufffd"]})


def test_a_preview_runs_nicer_than_its_worker(registry_files, factory_root):
    import os

    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    line = '{"schemaVersion": "factory.command-result/v1", "outcome": "NICE", "data": {"nice": %d}}'
    command = ["{python}", "-c", f"import os; print({line!r} % os.nice(0))", "--apply"]
    registry_files.update("definitions/reaper@1.json", lambda d: d.update(command=command))
    tick("2026-11-30T21:00:10Z")
    run_previews("2026-11-30T21:00:12Z")
    assert Preview.objects.get().data == {"nice": min(19, os.nice(0) + 10)}
