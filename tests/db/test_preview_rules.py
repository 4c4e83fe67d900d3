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
