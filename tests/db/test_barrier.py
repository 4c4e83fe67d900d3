"""The global one-merge barrier: one merge-apply claimed or running at a time, across repos
(docs/design.md §8; spec §14)."""

from datetime import timedelta
from unittest import mock

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.models import F

from runtime.adapters.base import RunResult
from runtime.models import JournalEntry, Proposal, Run
from runtime.services import barriers
from runtime.services.approval import approve_proposal
from runtime.services.interrupted import close_run
from runtime.services.planning import plan_pending
from runtime.services.run_statements import broke_barrier_constraint
from runtime.services.runs import claim_next_run, expire_leases, finish_run, start_run
from tests.conftest import SHA, at
from tests.helpers import inject

pytestmark = pytest.mark.django_db

NOW = at("2026-11-30T10:00:00Z")
OTHER_SHA = "0123456789abcdef0123456789abcdef01234567"


def two_approved_merges(approver) -> tuple[Run, Run]:
    """Approved merge-apply runs for alpha (older) and beta, both queued."""
    inject("merge-alpha-7", "factory.merge-apply.requested",
           {"repo": "alpha", "prNumber": 7, "headSha": SHA, "evidence": {}})
    inject("merge-beta-3", "factory.merge-apply.requested",
           {"repo": "beta", "prNumber": 3, "headSha": OTHER_SHA, "evidence": {}})
    plan_pending(now=NOW)
    alpha, beta = Proposal.objects.order_by("id")
    return (approve_proposal(alpha.pk, user=approver, now=NOW), approve_proposal(beta.pk, user=approver, now=NOW))


def claim(worker: str, seconds: int = 0) -> Run | None:
    return claim_next_run(worker=worker, now=NOW + timedelta(seconds=seconds), lease_seconds=60)


def test_the_second_merge_waits_queued_until_the_first_ends(registry_files, approver):
    alpha, beta = two_approved_merges(approver)
    assert (alpha.barrier, beta.barrier) == ("merge", "merge")
    assert claim("w1").pk == alpha.pk
    assert claim("w2", 1) is None                                  # beta waits, it is not dropped
    beta.refresh_from_db()
    assert (beta.status, beta.attempt) == ("queued", 0)

    inject("sweep-alpha", "factory.merge.requested", {"repo": "alpha"})
    plan_pending(now=NOW + timedelta(seconds=2))
    scan = claim("w2", 3)                                          # the barrier holds merges only
    assert (scan.definition, scan.barrier) == ("merge-scan@1", None)

    assert start_run(alpha, worker="w1", now=NOW + timedelta(seconds=4))
    assert claim("w3", 5) is None                                  # running holds it too
    assert finish_run(alpha, RunResult("MERGED", True, exit_code=0), worker="w1", now=NOW + timedelta(seconds=6))
    second = claim("w3", 7)
    assert (second.pk, second.status, second.attempt) == (beta.pk, "claimed", 1)
    claims = JournalEntry.objects.filter(action="run_claimed", run__definition="merge-apply@1").order_by("id")
    assert [(e.run_id, e.data["worker"], e.at) for e in claims] == [
        (alpha.pk, "w1", NOW), (beta.pk, "w3", NOW + timedelta(seconds=7)),
    ]


def test_an_interrupted_merge_holds_the_barrier_until_an_operator_closes_it(registry_files, approver):
    alpha, beta = two_approved_merges(approver)
    claim("w1")
    assert expire_leases(now=NOW + timedelta(seconds=61), margin=timedelta(0)) == 1
    alpha.refresh_from_db()
    assert (alpha.status, alpha.reason) == ("interrupted", "lease_expired")   # it may have merged part-way
    assert claim("w2", 62) is None
    close_run(alpha.pk, user=approver, now=NOW + timedelta(seconds=63))
    alpha.refresh_from_db()
    assert alpha.status == "abandoned"
    assert claim("w2", 64).pk == beta.pk


def test_the_database_refuses_a_second_holder_of_a_barrier(registry_files, approver):
    alpha, beta = two_approved_merges(approver)
    claim("w1")
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.filter(pk=beta.pk).update(status="running", worker="rogue")
    beta.refresh_from_db()
    assert beta.status == "queued"


def test_a_claim_that_saw_the_barrier_free_loses_the_race_and_claims_nothing(registry_files, approver):
    """Another worker took the barrier between this claim's read and its write: on SQLite the
    compare-and-swap update finds the barrier held, on PostgreSQL the constraint refuses the
    update; either way the claim moves on and the second merge stays queued."""
    alpha, beta = two_approved_merges(approver)
    claim("w1")
    views = ["(1 = 1)"]                                            # the first read sees every barrier free
    real = barriers.barrier_free_sql
    with mock.patch("runtime.services.queue.barrier_free_sql",
                    side_effect=lambda alias: views.pop() if views else real(alias)):
        assert claim("w2", 1) is None
    assert views == []
    beta.refresh_from_db()
    assert (beta.status, beta.attempt, beta.worker) == ("queued", 0, "")
    assert JournalEntry.objects.filter(action="run_claimed").count() == 1


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the constraint's name comes from PostgreSQL's diagnostics")
def test_a_claims_lost_barrier_race_is_told_from_any_other_refusal(registry_files, approver):
    alpha, beta = two_approved_merges(approver)
    claim("w1")
    with pytest.raises(IntegrityError) as barrier, transaction.atomic():
        Run.objects.filter(pk=beta.pk).update(status="running", worker="rogue")
    with pytest.raises(IntegrityError) as budget, transaction.atomic():
        Run.objects.filter(pk=beta.pk).update(attempt=F("max_attempts") + 1)
    assert (broke_barrier_constraint(barrier.value), broke_barrier_constraint(budget.value)) == (True, False)
