"""Pages that refresh themselves (docs/web.md): a run's live panel polls its fragment until the run
ends, the inbox list's watcher says when the pending proposals changed, and every operator page's
title starts with the pending count — in the fragments too, so that it follows."""

import re
from pathlib import Path

import pytest
from django.urls import reverse

from runtime.adapters.base import RunResult
from runtime.admin.live import INTERRUPTED_REFRESH_SECONDS, RUN_REFRESH_SECONDS, TAIL_BYTES, output_tail
from runtime.models import Proposal, Run
from runtime.services.approval import approve_proposal
from runtime.services.runs import claim_next_run, fail_attempt, finish_run, start_run
from tests.conftest import at
from tests.helpers import tick

pytestmark = pytest.mark.django_db

WORKER = "host-a:1:1"


def title(body: str) -> str:
    return re.search(r"<title>(.*?)</title>", body, re.S).group(1).strip()


@pytest.fixture
def running_run(proposals, approver, settings, tmp_path):
    """The 22:00 proposal approved (superseding 21:00), its run running with output written so far."""
    settings.FACTORY_RUNS_DIR = tmp_path
    run = approve_proposal(proposals[1].pk, user=approver, now=at("2026-11-30T22:01:00Z"))
    start_run(claim_next_run(worker=WORKER, now=at("2026-11-30T22:01:05Z"), lease_seconds=60),
              worker=WORKER, now=at("2026-11-30T22:01:06Z"))
    stdout = Path(tmp_path) / str(run.pk) / "reaper.log"  # the definition's captureStdout
    stdout.parent.mkdir(parents=True)
    stdout.write_text("starting\nreaping T-7\n")
    return Run.objects.get(pk=run.pk)


def fragment(run_id: int) -> str:
    return reverse("web:run-live", args=[run_id])


def test_a_running_runs_fragment_polls_and_says_its_state_and_output_so_far(client, viewer, running_run):
    client.force_login(viewer)
    response = client.get(fragment(running_run.pk))
    body = response.content.decode()
    assert response.status_code == 200 and "no-cache" in response["Cache-Control"]
    assert f'hx-trigger="every {RUN_REFRESH_SECONDS}s"' in body and f'hx-get="{fragment(running_run.pk)}"' in body
    assert '<span id="run-state" class="run-state run-state-running">running</span>' in body
    assert WORKER in body and "1 of 2" in body and "running for" in body
    assert "starting\nreaping T-7\n</pre>" in body
    assert '<div id="run-times" hx-swap-oob="true">' in body and "2026-11-30 22:01:06 UTC" in body
    assert '<div id="run-attempts" hx-swap-oob="true">' in body
    assert f'<h2 id="run-subtitle" hx-swap-oob="true">run {running_run.pk} (reaper@1, running)</h2>' in body


def test_a_run_page_opened_while_it_is_queued_polls_its_fragment(client, viewer, proposals, approver):
    run = approve_proposal(proposals[1].pk, user=approver, now=at("2026-11-30T22:01:00Z"))
    client.force_login(viewer)
    body = client.get(reverse("admin:runtime_run_change", args=[run.pk])).content.decode()
    assert f'hx-get="{fragment(run.pk)}" hx-trigger="every {RUN_REFRESH_SECONDS}s"' in body
    assert 'run-state-queued">queued</span>' in body and "Nothing captured yet." in body
    assert "htmx-2.0.11.min.js" in body


def test_a_succeeded_runs_fragment_stops_polling_and_offers_the_whole_page(client, viewer, running_run, settings):
    stdout = Path(settings.FACTORY_RUNS_DIR) / str(running_run.pk) / "reaper.log"
    finish_run(running_run, RunResult(outcome="NOTHING_TO_REAP", succeeded=True, summary="nothing to reap", exit_code=0,
                                      stdout_path=str(stdout)), worker=WORKER, now=at("2026-11-30T22:01:10Z"))
    client.force_login(viewer)
    body = client.get(fragment(running_run.pk)).content.decode()
    assert "hx-trigger" not in body.split('<div id="run-times"')[0] and "hx-get" not in body
    assert 'run-state-succeeded">succeeded</span>' in body and "NOTHING_TO_REAP" in body and "<td>4.0 s</td>" in body
    assert "The run ended while this page was open." in body and 'id="run-reload"' in body
    page = client.get(reverse("admin:runtime_run_change", args=[running_run.pk])).content.decode()
    assert "hx-trigger" not in page and "The run has ended: this page no longer changes." in page


def test_an_interrupted_run_is_watched_slowly_and_says_who_must_act(client, viewer, running_run):
    Run.objects.filter(pk=running_run.pk).update(plan={**running_run.plan, "mutating": True})
    fail_attempt(running_run.pk, reason="lease_expired", now=at("2026-11-30T22:03:00Z"), interrupted=True)
    assert Run.objects.get(pk=running_run.pk).status == "interrupted"
    client.force_login(viewer)
    body = client.get(fragment(running_run.pk)).content.decode()
    assert f'hx-trigger="every {INTERRUPTED_REFRESH_SECONDS}s"' in body
    assert "It waits for a person" in body and "?status__exact=interrupted" in body


@pytest.mark.parametrize("path", ["/live/runs/1/", "/live/inbox/"])
def test_the_fragments_refuse_anyone_without_a_staff_session(client, outsider, path):
    answer = client.get(path)
    assert (answer.status_code, answer.content) == (403, b"sign in again at /admin/login/: the session has ended")
    client.force_login(outsider)
    assert client.get(path).status_code == 403
    assert client.post(path).status_code == 405


def test_an_unknown_runs_fragment_is_404(client, viewer):
    client.force_login(viewer)
    assert client.get(fragment(999_999)).status_code == 404


def test_the_inbox_watcher_counts_what_is_pending_and_what_arrived(client, viewer, proposals, registry_files):
    client.force_login(viewer)
    newest = proposals[1].pk
    page = client.get(reverse("admin:runtime_proposal_changelist") + "?status__exact=pending").content.decode()
    assert 'data-stale="false" data-pending="2"' in page and f"seen_pending=2&amp;seen_newest={newest}" in page
    seen = {"seen_pending": 2, "seen_newest": newest}
    body = client.get("/live/inbox/", seen).content.decode()
    assert 'data-stale="false" data-pending="2"' in body and 'hx-trigger="every 5s"' in body and "inbox-news" not in body
    tick("2026-11-30T23:00:10Z")
    body = client.get("/live/inbox/", seen).content.decode()
    assert 'data-stale="true" data-pending="3"' in body and f"seen_pending=2&amp;seen_newest={newest}" in body
    assert "1 new proposal since this list was shown" in body and "(3 pending now)" in body
    assert "rows you ticked are unticked and a search you have not sent is dropped" in body
    assert client.get("/live/inbox/?seen_newest=%00").status_code == 400
    assert 'data-stale="true"' in client.get("/live/inbox/", {"seen_pending": "x"}).content.decode()


def test_every_operator_page_title_starts_with_the_pending_count(client, viewer, proposals, running_run):
    login = client.get(reverse("admin:login")).content.decode()
    assert title(login).startswith("Log in |")
    client.force_login(viewer)
    # The approval superseded the 21:00 proposal; as if it were still waiting (the reaper's run holds
    # the loop: a tick would not propose).
    Proposal.objects.filter(pk=proposals[0].pk).update(status="pending", decided_at=None, actor="")
    inbox = reverse("admin:runtime_proposal_changelist")
    assert title(client.get(inbox).content.decode()) == "(1) Proposals | Factory runtime"
    assert title(client.get("/dashboard/").content.decode()) == "(1) Loops | Factory runtime"
    assert title(client.get("/dashboard/table/").content.decode()) == "(1) Loops | Factory runtime"
    assert title(client.get("/loops/reaper/").content.decode()).startswith("(1) ")
    assert title(client.get("/live/inbox/").content.decode()) == "(1) Proposals | Factory runtime"
    run_title = f"(1) run {running_run.pk} (reaper@1, running) | View run | Factory runtime"
    assert title(client.get(reverse("admin:runtime_run_change", args=[running_run.pk])).content.decode()) == run_title
    assert title(client.get(fragment(running_run.pk)).content.decode()) == run_title
    Proposal.objects.filter(status="pending").update(status="rejected", decided_at=at("2026-11-30T23:01:00Z"))
    assert title(client.get("/dashboard/").content.decode()) == "Loops | Factory runtime"


def test_the_tail_starts_at_a_line_and_reads_only_the_runs_directory(settings, tmp_path):
    settings.FACTORY_RUNS_DIR = tmp_path / "runs"
    log = tmp_path / "runs" / "7" / "stdout.log"
    log.parent.mkdir(parents=True)
    log.write_bytes(b"x" * TAIL_BYTES + b"\nlast line\n")
    assert output_tail(log) == {"text": "last line\n", "size": TAIL_BYTES + 11, "shown": 10}
    assert output_tail(tmp_path / "runs" / "8" / "stdout.log")["size"] is None
    outside = tmp_path / "elsewhere.log"
    outside.write_text("secret")
    assert output_tail(outside) == {"text": "", "size": None, "shown": 0}
