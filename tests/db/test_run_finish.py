"""``runtime.services.runs.finish_run``: the stored row, the journal, the outbox and the log of a
run's end — a chained outcome's events, a broken chain, a key released by an outcome, a result
discarded after a lost lease — and the transitions of one run among two a worker holds
(docs/design.md §8)."""

import logging
from datetime import timedelta

import pytest

from runtime.adapters.base import RunResult
from runtime.models import JournalEntry, OutboxEntry, Proposal, Run
from runtime.registry import get_registry
from runtime.services.planning import plan_pending
from runtime.services.runs import claim_next_run, finish_run, renew_lease, start_run
from tests.conftest import SHA, at
from tests.helpers import inject

pytestmark = pytest.mark.django_db

NOW = at("2026-11-30T10:00:00Z")
END = NOW + timedelta(seconds=40)
TICKET = {"ticket": "T-1", "ownedPaths": ["src/a.py"]}


def _scans(*repos):
    """A work-scan run for each repo (injected, auto-approved), queued in that order."""
    for n, repo in enumerate(repos):
        inject(f"op-{n}", "factory.work.requested", {"repo": repo}, instant="2026-11-30T10:00:00Z")
    plan_pending(now=NOW)
    return [Run.objects.get(event__uid=f"op-{n}") for n in range(len(repos))]


def _running(worker="w1", count=1):
    """``count`` runs claimed and started by ``worker``, in queue order."""
    runs = [claim_next_run(worker=worker, now=NOW, lease_seconds=60) for _ in range(count)]
    for run in runs:
        assert start_run(run, worker=worker, now=NOW) is True
    return runs


def _journal(run):
    return [(e.action, e.actor, e.at, e.data) for e in JournalEntry.objects.filter(run=run).order_by("id")]


def _released():
    return [(e.proposal_id, e.at, e.data) for e in JournalEntry.objects.filter(action="idempotency_key_released")]


def _row(run):
    stored = Run.objects.get(pk=run.pk)
    return (stored.status, stored.finished_at, stored.lease_expires_at, stored.outcome, stored.reason,
            stored.summary, stored.result_data, stored.exit_code, stored.stdout_path)


def _finished(caplog):
    return [(r.levelname, r.getMessage(), r.action, r.run) for r in caplog.records if r.name == "runtime.services.runs"]


def test_a_chained_outcome_is_stored_journaled_and_queued_as_its_events(registry_files, caplog):
    """work-scan's DISPATCH, with the registry given: the row holds every field of the result, the
    journal the system's ``run_succeeded`` (its extra fields too) and the chain's ``chain_queued``,
    and the outbox the one envelope the edge fills from the run's input and result."""
    registry = get_registry()
    (run,) = _scans("alpha")
    (run,) = _running()
    result = RunResult(outcome="DISPATCH", succeeded=True, reason="", summary="one ticket", data=TICKET,
                       exit_code=0, stdout_path="/runs/1/out.log", extra={"durationMs": 12})
    with caplog.at_level(logging.INFO, logger="runtime.services.runs"):
        assert finish_run(run, result, worker="w1", now=END, registry=registry) is True
    assert _row(run) == ("succeeded", END, None, "DISPATCH", "", "one ticket", TICKET, 0, "/runs/1/out.log")
    assert _journal(run)[3:] == [
        ("run_succeeded", "system", END, {"outcome": "DISPATCH", "reason": "", "exitCode": 0, "durationMs": 12}),
        ("chain_queued", "chain", END, {"eventIds": [f"chain:{run.pk}:0"], "types": ["factory.dispatch.requested"]}),
    ]
    assert [(o.position, o.event_uid, o.status, o.created_at, o.envelope) for o in OutboxEntry.objects.all()] == [
        (0, f"chain:{run.pk}:0", "pending", END, {
            "schemaVersion": "factory.event/v1", "eventId": f"chain:{run.pk}:0", "type": "factory.dispatch.requested",
            "source": "chain", "subject": "alpha", "occurredAt": "2026-11-30T10:00:40Z", "correlationId": "op-0",
            "causationId": "op-0", "payload": {"repo": "alpha", "ticket": "T-1", "evidence": TICKET},
        }),
    ]
    assert _finished(caplog) == [("INFO", f"run {run.pk} succeeded: DISPATCH ", "run_succeeded", run.pk)]


def test_the_registry_given_decides_the_chain_not_the_one_in_force(registry_files):
    """The edges of the registry passed in chain, even when the registry in force (changed since)
    has none for that outcome; the summary reaches an edge that reads it."""
    def summary_edge(edges):
        for edge in edges:
            if (edge["from"], edge["outcome"]) == ("work-scan@1", "DISPATCH"):
                edge["emit"][0]["payload"]["ticket"] = {"pointer": "/output/summary"}
    registry_files.update("edges.json", summary_edge)
    given = get_registry()
    registry_files.update("edges.json", lambda edges: edges.__setitem__(slice(None), [
        edge for edge in edges if edge["from"] != "work-scan@1"]))
    assert not get_registry().edges_for("work-scan@1", "DISPATCH")
    (run,) = _scans("alpha")
    (run,) = _running()
    result = RunResult(outcome="DISPATCH", succeeded=True, summary="T-9", data=TICKET, exit_code=0)
    assert finish_run(run, result, worker="w1", now=END, registry=given) is True
    assert [o.envelope["payload"] for o in OutboxEntry.objects.all()] == [
        {"repo": "alpha", "ticket": "T-9", "evidence": TICKET}]


def test_a_chain_that_finds_nothing_emits_nothing_and_says_so(registry_files, caplog):
    """DISPATCH without data: the edge's pointers into the result find nothing, so the run keeps
    its status with reason ``chain_broken``, the chain journals the problems, nothing is queued,
    and an error names the run."""
    (run,) = _scans("alpha")
    (run,) = _running()
    result = RunResult(outcome="DISPATCH", succeeded=True, reason="as asked", exit_code=0)
    with caplog.at_level(logging.INFO, logger="runtime.services.runs"):
        assert finish_run(run, result, worker="w1", now=END) is True
    assert _row(run) == ("succeeded", END, None, "DISPATCH", "chain_broken", "", None, 0, "")
    entries = _journal(run)[3:]
    assert entries[0] == ("run_succeeded", "system", END, {"outcome": "DISPATCH", "reason": "as asked", "exitCode": 0})
    assert entries[1][:3] == ("chain_broken", "chain", END)
    assert sorted(entries[1][3]) == ["outcome", "problems"]
    assert entries[1][3]["outcome"] == "DISPATCH"
    assert [(p["field"], p["pointer"]) for p in entries[1][3]["problems"]] == [
        ("payload.ticket", "/output/data/ticket"), ("payload.evidence", "/output/data")]
    assert len(entries) == 2
    assert not OutboxEntry.objects.exists()
    logged = _finished(caplog)
    assert logged[0] == ("INFO", f"run {run.pk} succeeded: DISPATCH as asked", "run_succeeded", run.pk)
    problems = "; ".join(f"work-scan@1 DISPATCH → factory.dispatch.requested {p['field']}: {p['detail']}"
                         for p in entries[1][3]["problems"])
    assert logged[1:] == [("ERROR", f"run {run.pk} (work-scan@1 DISPATCH): chain broken, nothing emitted: {problems}",
                           "chain_broken", run.pk)]


def test_a_failed_run_chains_nothing_and_releases_its_key(registry_files):
    """A failure with an outcome that would chain had it succeeded: final, nothing queued, its
    event never read for a chain, and the key released (reason ``failed``)."""
    (run,) = _scans("alpha")
    (run,) = _running()
    result = RunResult(outcome="DISPATCH", succeeded=False, reason="exit_code_2", data=TICKET, exit_code=2)
    assert finish_run(run, result, worker="w1", now=END) is True
    assert _row(run) == ("failed", END, None, "DISPATCH", "exit_code_2", "", TICKET, 2, "")
    assert _journal(run)[3:] == [
        ("run_failed", "system", END, {"outcome": "DISPATCH", "reason": "exit_code_2", "exitCode": 2})]
    assert not OutboxEntry.objects.exists()
    proposal = Proposal.objects.get()
    assert (proposal.key_released_at, Run.objects.get(pk=run.pk).key_released_at) == (END, END)
    assert _released() == [(proposal.pk, END, {"idempotencyKey": proposal.idempotency_key, "reason": "failed"})]


def test_a_release_outcome_of_the_registry_given_releases_the_key(registry_files):
    """merge-scan lists ``WAIT`` in ``releaseKeyOn``: a succeeded WAIT releases the key by the
    registry passed in, though the one in force (changed since) lists nothing."""
    given = get_registry()
    registry_files.update("definitions/merge-scan@1.json", lambda d: d.pop("releaseKeyOn"))
    inject("op-0", "factory.merge.requested", {"repo": "alpha", "prNumbers": [7], "headSha": SHA})
    plan_pending(now=NOW)
    (run,) = _running()
    result = RunResult(outcome="WAIT", succeeded=True, data={"verdict": "wait"}, exit_code=0)
    assert finish_run(run, result, worker="w1", now=END, registry=given) is True
    proposal = Proposal.objects.get()
    assert proposal.key_released_at == END
    assert _released() == [(proposal.pk, END, {
        "idempotencyKey": f"merge-scan:alpha:7:{SHA}", "reason": "outcome", "outcome": "WAIT"})]


def test_a_result_after_the_lease_is_lost_is_discarded(registry_files, caplog):
    """Another worker, or a run no longer running (claimed, not started), finishes nothing: the
    row, the journal and the outbox stay as they were, and a warning names the run."""
    scan, other = _scans("alpha", "beta")
    running, claimed = claim_next_run(worker="w1", now=NOW, lease_seconds=60), claim_next_run(
        worker="w1", now=NOW, lease_seconds=60)
    assert start_run(running, worker="w1", now=NOW) is True
    result = RunResult(outcome="DISPATCH", succeeded=True, data=TICKET, exit_code=0)
    with caplog.at_level(logging.INFO, logger="runtime.services.runs"):
        assert finish_run(running, result, worker="w2", now=END) is False
        assert finish_run(claimed, result, worker="w1", now=END) is False
    assert Run.objects.get(pk=running.pk).status == "running"
    assert _row(claimed)[:4] == ("claimed", None, NOW + timedelta(seconds=60), "")
    assert [entry[0] for entry in _journal(running)] == ["run_queued", "run_claimed", "run_started"]
    assert [entry[0] for entry in _journal(claimed)] == ["run_queued", "run_claimed"]
    assert not OutboxEntry.objects.exists()
    assert _finished(caplog) == [
        ("WARNING", f"run {run.pk} finished after its lease was lost; result discarded", "run_result_discarded", run.pk)
        for run in (running, claimed)
    ]


def test_each_transition_of_a_worker_moves_only_the_run_it_names(registry_files):
    """One worker holding two runs: starting, renewing and finishing the first leaves the
    second as it was (claimed, its lease unchanged, then running)."""
    _scans("alpha", "beta")
    first, second = (claim_next_run(worker="w1", now=NOW, lease_seconds=60) for _ in range(2))
    assert start_run(first, worker="w1", now=NOW + timedelta(seconds=1)) is True
    assert Run.objects.get(pk=second.pk).status == "claimed"
    assert renew_lease(first.pk, worker="w1", now=NOW + timedelta(seconds=10), lease_seconds=60) is True
    assert Run.objects.get(pk=second.pk).lease_expires_at == NOW + timedelta(seconds=60)
    assert Run.objects.get(pk=first.pk).lease_expires_at == NOW + timedelta(seconds=70)
    assert start_run(second, worker="w1", now=NOW + timedelta(seconds=2)) is True
    result = RunResult(outcome="NO_WORK", succeeded=True, exit_code=0)
    assert finish_run(first, result, worker="w1", now=END) is True
    assert _row(second)[:3] == ("running", None, NOW + timedelta(seconds=60))
    assert [entry[0] for entry in _journal(second)] == ["run_queued", "run_claimed", "run_started"]
