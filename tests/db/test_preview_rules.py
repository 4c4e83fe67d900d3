"""Previews' services rule by rule (docs/design.md §8, Previews): the open-preview check built
afresh, a stopping preview thread, and what planning queues, a claim takes and a finish journals,
each with its exact rows."""

import logging
import sys
import threading
from unittest import mock

import pytest

from runtime.models import JournalEntry, Proposal
from runtime.preview_model import Preview
from runtime.registry import store
from runtime.services import previews
from runtime.services.preview_execution import preview_one
from runtime.services.previews import claim_preview
from tests.conftest import at
from tests.helpers import many_loops

pytestmark = pytest.mark.django_db

NOW = at("2026-11-30T21:08:00Z")


@pytest.fixture
def fresh_statement(monkeypatch):
    """No open-preview statement kept from an earlier call of this process: the next builds it."""
    monkeypatch.setattr(previews, "_open_sql", {})


def test_the_open_check_answers_for_each_status(registry_files, fresh_statement):
    """No preview, then a pending one, a running one: open; done, failed or not previewed: not."""
    assert previews._any_open() is False
    assert list(previews._open_sql.values()) == [
        'SELECT 1 FROM "runtime_preview" WHERE "status" IN (\'pending\', \'running\') LIMIT 1']
    many_loops(registry_files, 1)
    assert previews._any_open() is True
    for status, open_ in (("running", True), ("done", False), ("failed", False), ("not-previewed", False)):
        Preview.objects.update(status=status, worker="w", started_at=NOW, deadline_at=NOW,
                               finished_at=None if status == "running" else NOW)
        assert (status, previews._any_open()) == (status, open_)


def test_with_nothing_open_a_claim_reads_no_clock(registry_files, fresh_statement):
    """Nothing open: None, and the clock is not read."""
    def clock():
        raise AssertionError("the clock was read")
    assert claim_preview(worker="w", clock=clock) is None


def test_a_stopping_preview_thread_stops_its_preview_at_once(registry_files, settings, tmp_path, caplog):
    """``preview_one`` hands the worker's stop to the command: set, the preview is failed
    ``worker_stopped`` without waiting for the command (which would have exited 0); the log
    line of a result without an outcome leaves the outcome out."""
    settings.FACTORY_RUNS_DIR = str(tmp_path)
    many_loops(registry_files, 1)
    Preview.objects.update(argv=[sys.executable, "-c", "import time; time.sleep(3)"])
    stop = threading.Event()
    stop.set()
    with mock.patch("runtime.services.preview_execution.database_now", lambda: NOW), \
            caplog.at_level(logging.INFO, logger="runtime.services.preview_execution"):
        assert preview_one(worker="w", stop=stop) is True
    row = Preview.objects.get()
    assert (row.status, row.reason, row.worker) == ("failed", "worker_stopped", "w")
    assert JournalEntry.objects.get(action="proposal_previewed").data["reason"] == "worker_stopped"
    assert Proposal.objects.get().status == "pending"
    assert [r.getMessage() for r in caplog.records if r.name == "runtime.services.preview_execution"][-1] == (
        f"preview of proposal {row.proposal_id} failed:  worker_stopped")


def test_the_demos_stand_in_is_played_and_logged_without_a_reason(registry_files, caplog):
    """A ``fake`` plan's preview plays its script: done with the scripted outcome; the log
    line of a result without a reason leaves the reason out."""
    many_loops(registry_files, 1)
    proposal = Proposal.objects.get()
    Proposal.objects.filter(pk=proposal.pk).update(plan={**proposal.plan, "adapter": "fake"})
    with mock.patch("runtime.services.preview_execution.database_now", lambda: NOW), \
            mock.patch("runtime.services.preview_execution.scripted_preview",
                       lambda plan, definitions: {"outcome": "WOULD_RELEASE", "summary": "T-7"}), \
            caplog.at_level(logging.INFO, logger="runtime.services.preview_execution"):
        assert preview_one(worker="w") is True
    row = Preview.objects.get()
    assert (row.status, row.reason, row.outcome, row.summary, row.exit_code) == ("done", "", "WOULD_RELEASE", "T-7", 0)
    assert [r.getMessage() for r in caplog.records if r.name == "runtime.services.preview_execution"] == [
        f"preview {row.pk} of proposal {proposal.pk} started",
        f"preview of proposal {proposal.pk} done: WOULD_RELEASE ",
    ]


def test_a_previews_command_is_run_with_its_own_id_directory_limits_and_priority(registry_files, settings, tmp_path):
    """The command adapter is given the preview's argv with ``{runId}``/``{runDir}`` filled,
    ``preview-<id>`` as run id, ``FACTORY_RUNS_DIR/previews/<id>``, ``stdout.log``, the preview's
    time-out, the stdout cap and ``PREVIEW_NICE``; it goes on while the worker is not stopping."""
    from runtime.adapters.base import CommandOutcome
    from runtime.services import preview_execution

    settings.FACTORY_RUNS_DIR = str(tmp_path)
    settings.FACTORY_STDOUT_CAP_BYTES = 777
    many_loops(registry_files, 1)
    Preview.objects.update(argv=["scan", "--id={runId}", "--dir={runDir}"], timeout_seconds=42)
    preview = claim_preview(worker="w", clock=lambda: NOW)
    given = []

    def run_command(argv, **kwargs):
        given.append((argv, kwargs))
        return CommandOutcome(0, False, "", "")
    stop = threading.Event()
    with mock.patch.object(preview_execution, "run_command", run_command):
        preview_execution.run_preview(preview, stop=stop)
        preview_execution.run_preview(preview)
    run_dir = tmp_path / "previews" / str(preview.pk)
    ((argv, kwargs), (_, unstopped)) = given
    assert argv == ["scan", f"--id=preview-{preview.pk}", f"--dir={run_dir}"]
    waiting = kwargs.pop("while_waiting")
    assert kwargs == {"run_id": f"preview-{preview.pk}", "run_dir": run_dir, "capture_name": "stdout.log",
                      "timeout_seconds": 42, "stdout_cap": 777, "nice": preview_execution.PREVIEW_NICE}
    assert preview_execution.PREVIEW_NICE == 10
    assert waiting() is True
    stop.set()
    assert waiting() is False
    assert unstopped["while_waiting"]() is True


@pytest.fixture
def previewing(registry_files, settings, tmp_path):
    """A claimed preview (time-out 42 s) and a command adapter of the test's own, which writes
    ``out`` to the capture file and answers the outcome given; returns (preview, run)."""
    from runtime.adapters.base import CommandOutcome
    from runtime.services import preview_execution

    settings.FACTORY_RUNS_DIR = str(tmp_path)
    many_loops(registry_files, 1)
    Preview.objects.update(timeout_seconds=42)
    preview = claim_preview(worker="w", clock=lambda: NOW)

    def run(answer, out="partial\x00out"):
        def run_command(argv, *, run_dir, capture_name, **kwargs):
            if isinstance(answer, BaseException):
                raise answer
            run_dir.mkdir(parents=True)
            (run_dir / capture_name).write_text(out)
            return CommandOutcome(**{"exit_code": None, "timed_out": False, "stdout_tail": "", "stdout_path": "",
                                     **answer})
        with mock.patch.object(preview_execution, "run_command", run_command):
            result = preview_execution.run_preview(preview)
        assert not (tmp_path / "previews" / str(preview.pk)).exists()
        return result
    return preview, run


def test_each_way_a_previews_command_ends_is_its_result(previewing):
    """Time-out, a stopping worker, a dead spawner, no such command, an unwritable directory:
    each failed with its reason and words, the output's first bytes kept (NUL written U+FFFD)
    where the command ran."""
    from runtime.adapters.base import RunDirUnwritable

    preview, run = previewing
    out = "partial\ufffdout"
    assert run({"timed_out": True}) == {
        "status": "failed", "reason": "timeout", "stdout": out, "detail": "killed at its time-out of 42 s"}
    assert run({"aborted": True}) == {
        "status": "failed", "reason": "worker_stopped", "stdout": out,
        "detail": "its worker was stopping; a preview is advice and is not waited for"}
    assert run({"spawner_lost": "the spawner exited"}) == {
        "status": "failed", "reason": "spawner_died", "stdout": out, "detail": "the spawner exited"}
    assert run({"not_found": "no such file: scan"}) == {
        "status": "failed", "reason": "command_not_found", "detail": "no such file: scan"}
    assert run(RunDirUnwritable("/runs/previews/1", OSError(30, "Read-only file system"))) == {
        "status": "failed", "reason": "runs_dir_unwritable",
        "detail": "/runs/previews/1: [Errno 30 EROFS] Read-only file system"}


def test_a_finished_previews_result_is_read_against_the_contract(previewing):
    """Exit 0 with a result line: done, its outcome, summary and data (NUL written U+FFFD),
    exit code and output, no detail; outside the contract: failed with the violations."""
    preview, run = previewing
    line = '{"schemaVersion": "factory.command-result/v1", "outcome": "WOULD_RELEASE", "summary": "T\\u00007", "data": {"k\\u0000": ["v\\u0000"]}}'
    assert run({"exit_code": 0, "stdout_tail": line}, out="ok") == {
        "status": "done", "reason": "", "outcome": "WOULD_RELEASE", "summary": "T\ufffd7",
        "data": {"k\ufffd": ["v\ufffd"]}, "exit_code": 0, "stdout": "ok", "detail": ""}
    bad = '{"schemaVersion": "factory.command-result/v1", "outcome": 5}'
    result = run({"exit_code": 0, "stdout_tail": bad}, out="")
    assert (result["status"], result["reason"], result["exit_code"], result["stdout"]) == (
        "failed", "output_contract_violation", 0, "")
    assert result["detail"] == "5 is not of type 'string'"
    assert run({"exit_code": 3}, out="x")["reason"] == "exit_code_3"


def test_a_result_is_read_against_the_definitions_output_schema_too(previewing):
    """A result line meeting the contract but not the definition's ``outputSchema``
    (work-scan's outcomes) is failed ``output_contract_violation``."""
    preview, run = previewing
    preview.proposal.definition = "work-scan@1"
    line = '{"schemaVersion": "factory.command-result/v1", "outcome": "WOULD_RELEASE"}'
    result = run({"exit_code": 0, "stdout_tail": line}, out="")
    assert (result["status"], result["reason"]) == ("failed", "output_contract_violation")
    assert result["detail"] == "'WOULD_RELEASE' is not one of ['DISPATCH', 'NO_WORK', 'LOW_SUPPLY']"


def test_a_definition_gone_from_the_registry_leaves_only_the_contract(previewing):
    """The proposal's definition no longer in the registry in force: the contract alone decides."""
    preview, run = previewing
    preview.proposal.definition = "gone@1"
    line = '{"schemaVersion": "factory.command-result/v1", "outcome": "WOULD_RELEASE"}'
    assert run({"exit_code": 0, "stdout_tail": line}, out="")["status"] == "done"


def test_a_claim_drops_the_waiting_previews_of_decided_proposals(registry_files, approver):
    """A decided proposal's waiting preview is ``not-previewed`` (``decided_first``, the claim's
    instant, the reason in words) and journals nothing; its running one is left to end; the
    next waiting preview of a pending proposal is taken."""
    from runtime.services.approval import reject_proposal

    many_loops(registry_files, 3)
    first, second, third = Proposal.objects.order_by("id")
    # Planning wrote the newest proposal's row first: the oldest row, third's, runs.
    assert claim_preview(worker="w0", clock=lambda: NOW).proposal_id == third.pk
    reject_proposal(first.pk, user=approver, now=NOW)
    reject_proposal(third.pk, user=approver, now=NOW)
    later = at("2026-11-30T21:08:05Z")
    taken = claim_preview(worker="w1", clock=lambda: later)
    assert (taken.proposal_id, taken.status, taken.worker, taken.started_at) == (second.pk, "running", "w1", later)
    assert list(Preview.objects.order_by("proposal_id").values_list("status", "reason", "detail", "finished_at")) == [
        ("not-previewed", "decided_first", "the proposal was decided before its preview ran", later),
        ("running", "", "", None),
        ("running", "", "", None),
    ]
    assert not JournalEntry.objects.filter(action="proposal_previewed").exists()


def test_a_preview_another_claim_dropped_meanwhile_keeps_that_claims_instant(registry_files, approver):
    """Two preview threads drop a decided proposal's preview at once: the one whose update comes
    second changes nothing (the row is no longer pending), so the row keeps the first's instant."""
    from runtime.services.approval import reject_proposal

    many_loops(registry_files, 1)
    reject_proposal(Proposal.objects.get().pk, user=approver, now=NOW)
    first = at("2026-11-30T21:08:01Z")

    def clock():
        """The other thread's drop lands between this claim's read and its update."""
        Preview.objects.update(status="not-previewed", reason="decided_first", finished_at=first,
                               detail="the proposal was decided before its preview ran")
        return at("2026-11-30T21:08:02Z")
    assert claim_preview(worker="w", clock=clock) is None
    assert Preview.objects.values_list("status", "finished_at").get() == ("not-previewed", first)


def test_a_preview_another_thread_claimed_meanwhile_is_not_taken_again(registry_files):
    """The claim is a compare-and-swap: a row another thread took between this claim's read and
    its update stays that thread's, and this claim takes nothing."""
    many_loops(registry_files, 1)
    deadline = at("2026-11-30T21:09:15Z")

    def clock():
        Preview.objects.update(status="running", worker="other", started_at=NOW, deadline_at=deadline)
        return at("2026-11-30T21:08:01Z")
    assert claim_preview(worker="w", clock=clock) is None
    assert Preview.objects.values_list("worker", "started_at").get() == ("other", NOW)


def test_a_finish_records_that_preview_only(registry_files):
    """Two previews running for one worker name: finishing one leaves the other running."""
    from runtime.services.previews import finish_preview

    many_loops(registry_files, 2)
    one = claim_preview(worker="w", clock=lambda: NOW)
    other = claim_preview(worker="w", clock=lambda: NOW)
    assert finish_preview(one, worker="w", now=at("2026-11-30T21:08:03Z"), status="done", outcome="OK") is True
    assert dict(Preview.objects.values_list("pk", "status")) == {one.pk: "done", other.pk: "running"}
    assert JournalEntry.objects.get(action="proposal_previewed").proposal_id == one.proposal_id


def test_planning_queues_the_demos_stand_in_only_for_a_mutating_definition(registry_files, caplog, monkeypatch):
    """A ``fake`` plan of a mutating definition without a preview of its own (label-guard) is
    queued with no command (its script has a preview); a ``fake`` plan of a read-only one, or a
    real plan of a definition without a preview, is not even counted: no row, no log line, the
    loop's waiting preview is not dropped for it, and the proposals after it are still queued."""
    from runtime.services.previews import preview_timeout, queue_previews

    asked = []
    monkeypatch.setattr(previews, "scripted_preview",
                        lambda plan, definitions: asked.append(definitions) or {"outcome": "WOULD_LABEL"})
    many_loops(registry_files, 2)
    first, second = Proposal.objects.order_by("id")
    Preview.objects.filter(proposal=second).delete()
    registry = store.current()
    with caplog.at_level(logging.INFO, logger="runtime.services.previews"):
        assert queue_previews([
            (second.pk, first.loop, first.loop_key, {"definition": "label-guard@1", "adapter": "command",
                                                     "argvTemplate": ["guard"]}),
            (second.pk, first.loop, first.loop_key, {"definition": "work-scan@1", "adapter": "fake"}),
        ], registry=registry, now=NOW) == 0
        assert Preview.objects.values_list("proposal_id", "status").get() == (first.pk, "pending")
        assert queue_previews([(first.pk, None, None, {"definition": "work-scan@1", "adapter": "fake"}),
                               (second.pk, None, None, {"definition": "label-guard@1", "adapter": "fake"})],
                              registry=registry, now=NOW) == 1
    assert [r.getMessage() for r in caplog.records if r.name == "runtime.services.previews"] == []
    row = Preview.objects.get(proposal=second)
    assert (row.status, row.argv, row.timeout_seconds, row.requested_at) == (
        "pending", [], preview_timeout(registry.definitions["label-guard@1"]), NOW)
    assert asked == [registry.definitions]  # the script read against the registry in force


def test_a_full_queue_takes_no_more(registry_files, settings, caplog):
    """As many previews waiting as ``FACTORY_PREVIEW_QUEUE``: a new proposal gets no row, logged
    with the count waiting."""
    from runtime.services.previews import queue_previews

    settings.FACTORY_PREVIEW_QUEUE = 1
    many_loops(registry_files, 2)
    first, second = Proposal.objects.order_by("id")
    Preview.objects.filter(proposal=first).delete()
    assert Preview.objects.filter(status="pending").count() == 1
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="runtime.services.previews"):
        assert queue_previews([(first.pk, None, None, first.plan)], registry=store.current(), now=NOW) == 0
    assert list(Preview.objects.values_list("proposal_id", flat=True)) == [second.pk]
    assert [r.getMessage() for r in caplog.records if r.name == "runtime.services.previews"] == [
        "1 proposal(s) not previewed: 1 preview(s) wait (FACTORY_PREVIEW_QUEUE=1)"]


def test_a_plan_the_preview_cannot_be_derived_from_is_skipped_not_the_ones_after_it(registry_files, approver):
    """The newest proposal's plan has no command template (no argv to derive): it gets no row,
    and the older one after it in the queue's order still gets its own."""
    from runtime.services.previews import queue_previews

    many_loops(registry_files, 2)
    first, second = Proposal.objects.order_by("id")
    Preview.objects.all().delete()
    templateless = {key: value for key, value in second.plan.items() if key != "argvTemplate"}
    assert queue_previews([(first.pk, None, None, first.plan), (second.pk, None, None, templateless)],
                          registry=store.current(), now=NOW) == 1
    assert list(Preview.objects.values_list("proposal_id", flat=True)) == [first.pk]


def test_a_request_racing_another_for_a_new_row_is_refused_in_progress(registry_files, approver, monkeypatch):
    """Two people ask at once for a proposal without a preview row: the one whose insert comes
    second is refused ``preview_in_progress`` (409), saying it was just asked for, and journals
    nothing."""
    from runtime.services.previews import PreviewRefused, request_preview

    many_loops(registry_files, 1)
    proposal = Proposal.objects.get()
    Preview.objects.all().delete()
    real = Preview.objects.create

    def racing(**fields):
        real(**fields)  # the other request's row, inserted first
        return real(**fields)
    monkeypatch.setattr(Preview.objects, "create", racing)
    with pytest.raises(PreviewRefused) as refused:
        request_preview(proposal.pk, user=approver, now=NOW, registry=store.current())
    assert (refused.value.code, refused.value.status, refused.value.detail) == (
        "preview_in_progress", 409, f"proposal {proposal.pk}'s preview was just asked for")
    assert not JournalEntry.objects.filter(action="proposal_preview_requested").exists()
