"""``runtime.services.runs.waiting_work``'s statement, built afresh (it is built once a process and
kept): each status it reads — a queued run, a claimed or a running run past its lease, a pending
or a running preview — answers as it should (docs/design.md §8)."""

from datetime import timedelta

import pytest

from runtime.models import Proposal, Run
from runtime.preview_model import Preview
from runtime.services import runs
from runtime.services.approval import approve_proposal
from runtime.services.runs import claim_next_run, start_run, waiting_work
from tests.conftest import at
from tests.helpers import tick

pytestmark = pytest.mark.django_db

WATCHED_REAPER = "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n"
NOW = at("2026-11-30T21:01:00Z")
MARGIN = timedelta(seconds=10)


@pytest.fixture
def fresh_statement(monkeypatch):
    """No statement kept from an earlier call of this process: the next call builds it."""
    monkeypatch.setattr(runs, "_waiting_sql", {})


def _answer(at_):
    answer = waiting_work(margin=MARGIN, clock=lambda: at_)
    return answer.now, answer.queued, answer.expired, answer.previews


def test_each_status_the_statement_reads_answers(registry_files, approver, fresh_statement):
    """Nothing at first; a pending then a running preview; a queued run; a claimed run, then a
    running one, expired only past its lease plus the margin; a finished preview is not open."""
    assert _answer(NOW) == (NOW, False, False, False)
    assert runs._waiting_sql
    registry_files.write_config("schedule.yaml", WATCHED_REAPER)
    tick("2026-11-30T21:00:10Z")
    preview = Preview.objects.get()
    assert preview.status == "pending"
    assert _answer(NOW) == (NOW, False, False, True)
    Preview.objects.filter(pk=preview.pk).update(status="running", deadline_at=NOW + timedelta(minutes=5))
    assert _answer(NOW) == (NOW, False, False, True)
    Preview.objects.filter(pk=preview.pk).update(status="done")
    assert _answer(NOW) == (NOW, False, False, False)

    approve_proposal(Proposal.objects.get().pk, user=approver, now=NOW)
    assert _answer(NOW) == (NOW, True, False, False)
    run = claim_next_run(worker="w1", now=NOW, lease_seconds=60)
    end = NOW + timedelta(seconds=60)
    assert _answer(end + MARGIN) == (end + MARGIN, False, False, False)
    assert _answer(end + MARGIN + timedelta(seconds=1)) == (end + MARGIN + timedelta(seconds=1), False, True, False)
    assert start_run(run, worker="w1", now=NOW) is True
    assert Run.objects.get(pk=run.pk).status == "running"
    assert _answer(end + MARGIN) == (end + MARGIN, False, False, False)
    assert _answer(end + MARGIN + timedelta(seconds=1)) == (end + MARGIN + timedelta(seconds=1), False, True, False)
