"""A runs directory that cannot be written, or a full disk (docs/design.md §8, docs/operations.md).

A run whose directory cannot be created or written never starts its command: the attempt
fails at once with reason ``runs_dir_unwritable`` (requeued within its budget, else
abandoned — a mutating run too, since nothing ran) and the worker goes on. A capture file
that fails mid-run (ENOSPC) is read to its end and discarded: the command is never held
up to its time-out, and the run says ``output_unwritable``.
"""

import errno
import time
from pathlib import Path

import pytest

from runtime.models import JournalEntry, Run
from runtime.services.execution import work_one
from tests.db.test_runs import CONTRACT_LINE, queue
from tests.helpers import tick

pytestmark = pytest.mark.django_db


def actions(run):
    return [e.action for e in JournalEntry.objects.filter(run=run).order_by("id")]


def journaled(run, action):
    return JournalEntry.objects.get(run=run, action=action).data


@pytest.fixture
def runs_under_a_file(settings, tmp_path):
    """FACTORY_RUNS_DIR below a regular file: no directory can be made there, even as root."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    settings.FACTORY_RUNS_DIR = blocker / "runs"
    return blocker


def test_a_runs_directory_that_cannot_be_made_fails_the_attempt_and_the_run_goes_on_after_the_fix(
    registry_files, settings, runs_under_a_file, tmp_path
):
    run = queue(registry_files, f"print({CONTRACT_LINE!r})", attempts=2)
    assert work_one(worker="w1")  # no exception: the worker lives on
    run.refresh_from_db()
    assert (run.status, run.reason, run.attempt, run.worker) == ("queued", "runs_dir_unwritable", 1, "")
    assert actions(run) == ["run_queued", "run_claimed", "run_started", "run_requeued"]
    assert journaled(run, "run_requeued") == {
        "reason": "runs_dir_unwritable", "attempt": 1, "maxAttempts": 2,
        "detail": f"{runs_under_a_file / 'runs' / str(run.pk)}: [Errno 20 ENOTDIR] Not a directory",
    }
    settings.FACTORY_RUNS_DIR = tmp_path / "runs"  # the operator fixed it
    assert work_one(worker="w1")
    run.refresh_from_db()
    assert (run.status, run.outcome, run.reason, run.attempt) == ("succeeded", "DONE", "", 2)
    assert not work_one(worker="w1")


def test_a_read_only_runs_directory_abandons_a_mutating_run_without_interrupting_it_and_the_next_run_runs(
    registry_files, settings, approver, monkeypatch
):
    first = queue(registry_files, f"print({CONTRACT_LINE!r})", mutating=True, attempts=1, approver=approver)
    real_mkdir = Path.mkdir

    def read_only(self, *args, **kwargs):
        if str(self).startswith(str(settings.FACTORY_RUNS_DIR)):
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", read_only)
    assert work_one(worker="w1")
    first.refresh_from_db()
    assert (first.status, first.reason, first.attempt) == ("abandoned", "runs_dir_unwritable", 1)
    assert actions(first) == ["run_queued", "run_claimed", "run_started", "run_abandoned"]
    assert journaled(first, "run_abandoned") == {
        "reason": "runs_dir_unwritable", "attempt": 1, "maxAttempts": 1,
        "detail": f"{Path(settings.FACTORY_RUNS_DIR) / str(first.pk)}: [Errno 30 EROFS] Read-only file system",
    }
    assert not Run.objects.filter(status="interrupted").exists()
    monkeypatch.undo()
    second = queue(registry_files, f"print({CONTRACT_LINE!r})", mutating=True, attempts=1, approver=approver,
                   event_id="ev-2")
    assert work_one(worker="w1")
    second.refresh_from_db()
    assert (second.status, second.outcome, second.attempt) == ("succeeded", "DONE", 1)
    assert actions(second) == ["run_queued", "run_claimed", "run_started", "run_succeeded"]


def opening_captures(monkeypatch, settings, opened):
    """Path.open of a file under the runs directory for writing answers ``opened(path, real_open)``."""
    real_open = Path.open

    def open_(self, mode="r", *args, **kwargs):
        if "w" in mode and str(self).startswith(str(settings.FACTORY_RUNS_DIR)):
            return opened(self, lambda: real_open(self, mode, *args, **kwargs))
        return real_open(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", open_)


def test_a_capture_file_that_cannot_be_opened_never_starts_the_command(registry_files, monkeypatch, settings, tmp_path):
    marker = tmp_path / "ran"
    run = queue(registry_files, f"open({str(marker)!r}, 'w').write('ran')", attempts=1)

    def unwritable(path, real_open):
        raise OSError(errno.EACCES, "Permission denied", str(path))

    opening_captures(monkeypatch, settings, unwritable)
    assert work_one(worker="w1")
    run.refresh_from_db()
    assert (run.status, run.reason, run.attempt) == ("abandoned", "runs_dir_unwritable", 1)
    assert journaled(run, "run_abandoned")["detail"].endswith("/out.log: [Errno 13 EACCES] Permission denied")
    assert not marker.exists()


def test_the_builtin_adapter_fails_the_attempt_when_its_directory_cannot_be_made(registry_files, runs_under_a_file):
    tick("2026-11-30T10:00:00Z")
    run = Run.objects.get(definition="heartbeat@1")
    assert work_one(worker="w1")
    run.refresh_from_db()
    assert (run.status, run.reason, run.attempt, run.max_attempts) == ("abandoned", "runs_dir_unwritable", 1, 1)
    assert journaled(run, "run_abandoned") == {
        "reason": "runs_dir_unwritable", "attempt": 1, "maxAttempts": 1,
        "detail": f"{runs_under_a_file / 'runs' / str(run.pk)}: [Errno 20 ENOTDIR] Not a directory",
    }


class FillsUp:
    """A capture file on a disk that is full after ``room`` bytes."""

    def __init__(self, file, room):
        self.file, self.room = file, room

    def write(self, data):
        if len(data) > self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(data)
        return self.file.write(data)

    def close(self):
        self.file.close()


def test_a_full_disk_does_not_hold_a_command_to_its_time_out(registry_files, monkeypatch, settings):
    settings.FACTORY_STDOUT_CAP_BYTES = 8 * 1024 * 1024
    opening_captures(monkeypatch, settings, lambda path, real_open: FillsUp(real_open(), 100_000))
    script = f"import sys; [sys.stdout.write('y' * 99 + '\\n') for _ in range(20_000)]; print({CONTRACT_LINE!r})"
    run = queue(registry_files, script, timeout=20, attempts=1, mutating=False)
    started = time.monotonic()
    assert work_one(worker="w1")
    elapsed = time.monotonic() - started
    run.refresh_from_db()
    assert elapsed < 10, elapsed
    assert (run.status, run.outcome, run.reason, run.attempt, run.exit_code) == (
        "succeeded", "DONE", "output_unwritable", 1, 0,
    )
    data = journaled(run, "run_succeeded")
    assert data["outputError"] == f"{run.stdout_path}: [Errno 28 ENOSPC] No space left on device"
    assert actions(run) == ["run_queued", "run_claimed", "run_started", "run_succeeded"]
    assert Path(run.stdout_path).stat().st_size <= 100_000
