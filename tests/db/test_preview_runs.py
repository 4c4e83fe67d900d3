"""Running a preview's command (docs/design.md §8, Previews): what each way a command ends is
recorded as, the run's placeholders filled, its directory removed, and the preview thread's log."""

import logging
import sys
import threading
from unittest import mock

import pytest

from runtime.preview_model import Preview
from runtime.services.preview_execution import preview_dir, preview_one, run_preview
from runtime.services.previews import claim_preview
from tests.conftest import at
from tests.helpers import many_loops

pytestmark = pytest.mark.django_db

NOW = at("2026-11-30T21:08:00Z")


@pytest.fixture
def claimed(registry_files, settings, tmp_path):
    """One loop's preview, claimed by worker ``w``; previews run under ``tmp_path``."""
    settings.FACTORY_RUNS_DIR = str(tmp_path)
    many_loops(registry_files, 1)
    return claim_preview(worker="w", clock=lambda: NOW)


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_missing_command_is_failed_command_not_found(claimed):
    """No such executable: ``command_not_found`` with the adapter's words, no output kept."""
    claimed.argv = ["/nonexistent/preview-command"]
    assert run_preview(claimed) == {
        "status": "failed", "reason": "command_not_found",
        "detail": "/nonexistent/preview-command: No such file or directory"}


def test_a_failing_command_is_failed_with_its_exit_code_and_output(claimed):
    """A non-zero exit: ``exit_code_<n>``, its output kept, and its directory removed."""
    claimed.argv = python("import sys; print('hi'); sys.exit(3)")
    assert run_preview(claimed) == {
        "status": "failed", "reason": "exit_code_3", "outcome": "FAILED", "summary": "", "data": None,
        "exit_code": 3, "stdout": "hi\n", "detail": ""}
    assert not preview_dir(claimed.pk).exists()


def test_output_outside_the_contract_is_failed_with_its_violations_and_the_placeholders_filled(claimed):
    """Exit 0 without a result line: ``output_contract_violation``, the violations as the detail;
    ``{runId}`` and ``{runDir}`` are the preview's own."""
    line = '{"schemaVersion": "factory.command-result/v1", "outcome": 5, "summary": 6}'
    claimed.argv = [*python(f"import sys; print(sys.argv[1], sys.argv[2]); print({line!r})"), "{runId}", "{runDir}"]
    result = run_preview(claimed)
    assert result["stdout"] == f"preview-{claimed.pk} {preview_dir(claimed.pk)}\n{line}\n"
    assert (result["status"], result["reason"], result["exit_code"]) == ("failed", "output_contract_violation", 0)
    assert result["detail"] == "5 is not of type 'string'; 6 is not of type 'string'"


def test_a_done_preview_has_no_detail(claimed):
    """A result meeting the contract, exit 0: done with its outcome and summary, detail ""."""
    line = '{"schemaVersion": "factory.command-result/v1", "outcome": "OK", "summary": "s"}'
    claimed.argv = python(f"print({line!r})")
    assert run_preview(claimed) == {
        "status": "done", "reason": "", "outcome": "OK", "summary": "s", "data": None, "exit_code": 0,
        "stdout": line + "\n", "detail": ""}


def test_a_stopping_worker_kills_its_preview_at_once(claimed):
    """``stop`` set: failed ``worker_stopped``, without waiting for the command."""
    claimed.argv = python("import time; print('x', flush=True); time.sleep(30)")
    stop = threading.Event()
    stop.set()
    result = run_preview(claimed, stop=stop)
    assert (result["status"], result["reason"], result["detail"]) == (
        "failed", "worker_stopped", "its worker was stopping; a preview is advice and is not waited for")


def test_the_preview_thread_logs_the_start_and_the_result(claimed, caplog):
    """``preview_one`` logs the preview's start and what it found, and records it on the row."""
    Preview.objects.filter(pk=claimed.pk).update(status="pending", worker="", started_at=None, deadline_at=None,
                                                 argv=python("import sys; sys.exit(2)"))
    with (mock.patch("runtime.services.preview_execution.database_now", lambda: NOW),
          caplog.at_level(logging.INFO, logger="runtime.services.preview_execution")):
        assert preview_one(worker="w2") is True
        assert preview_one(worker="w2") is False
    assert [(r.levelname, r.getMessage(), r.action, r.proposal) for r in caplog.records
            if r.name == "runtime.services.preview_execution"] == [
        ("INFO", f"preview {claimed.pk} of proposal {claimed.proposal_id} started", "preview_started",
         claimed.proposal_id),
        ("INFO", f"preview of proposal {claimed.proposal_id} failed: FAILED exit_code_2", "proposal_previewed",
         claimed.proposal_id),
    ]
    row = Preview.objects.get()
    assert (row.status, row.reason, row.worker, row.finished_at) == ("failed", "exit_code_2", "w2", NOW)
