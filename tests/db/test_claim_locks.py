"""On PostgreSQL a run's claim locks the row it picks and commits on its own (docs/design.md §6;
``runtime.services.runs.claim_next_run``): ``SELECT … FOR UPDATE SKIP LOCKED`` in the claim's one
statement (``run_statements.claim_in_one_statement``), so two workers
never pick one run and neither waits for the other, in a durable transaction, so a claim
returned is a lease already committed."""

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from runtime.clock import database_now
from runtime.models import Run, RunStatus
from runtime.registry import get_registry
from runtime.services.planning import plan_pending
from runtime.services.runs import claim_next_run
from schedules.ticks import emit_due_ticks
from tests.conftest import at

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite claims with a compare-and-swap")

NOW = at("2026-11-30T22:00:20Z")


def queued_heartbeat() -> Run:
    emit_due_ticks(now=NOW, registry=get_registry())
    plan_pending(now=NOW)
    return Run.objects.get(definition="heartbeat@1", status=RunStatus.QUEUED)


@pytest.mark.django_db
def test_a_claim_picks_its_run_with_a_row_lock_that_skips_locked_rows(registry_files):
    run = queued_heartbeat()
    with CaptureQueriesContext(connection) as queries:
        claimed = claim_next_run(worker="w1", now=database_now(), lease_seconds=60)
    assert (claimed.pk, claimed.status, claimed.worker, claimed.attempt) == (run.pk, RunStatus.CLAIMED, "w1", 1)
    # The pick, the update, the lane and the entry: one statement (beside the clock's and the
    # test's savepoints).
    [claim] = [q["sql"] for q in queries if q["sql"].startswith("WITH")]
    assert "ORDER BY COALESCE(lane.turn, 0), run.id LIMIT 1 FOR UPDATE OF run SKIP LOCKED)" in claim, claim


@pytest.mark.django_db(transaction=True)  # a real transaction around the call, not the test's own
def test_a_claim_inside_a_callers_transaction_is_refused_before_anything_is_claimed(registry_files):
    run = queued_heartbeat()
    with transaction.atomic(), pytest.raises(RuntimeError, match="durable"):
        claim_next_run(worker="w1", now=database_now(), lease_seconds=60)
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED
