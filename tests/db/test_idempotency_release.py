"""``runtime.services.idempotency``'s own functions, one proposal beside another: which key is
held, what a release changes (that proposal and its run only, once) and journals, and when a
finished run releases its key (docs/design.md §7.2)."""

from datetime import timedelta
from types import SimpleNamespace

import pytest

from runtime.models import JournalEntry, Proposal, Run, RunStatus
from runtime.services.approval import approve_proposal
from runtime.services.idempotency import key_held, release_after_finish, release_idempotency_key
from runtime.services.planning import plan_pending
from tests.conftest import SHA, at
from tests.helpers import inject

pytestmark = pytest.mark.django_db

NOW = at("2026-11-30T10:00:00Z")
LATER = NOW + timedelta(minutes=5)


def apply(number: int) -> dict:
    return {"repo": "alpha", "prNumber": number, "headSha": SHA, "evidence": {"prNumber": number, "headSha": SHA}}


def key(number: int) -> str:
    return f"merge-apply:alpha:{number}:{SHA}"


@pytest.fixture
def two_runs(registry_files, approver) -> tuple[Proposal, Proposal]:
    """Two approved merge proposals (PR 7 and PR 8), each with its run, both holding their keys."""
    inject("op-merge-7", "factory.merge-apply.requested", apply(7))
    inject("op-merge-8", "factory.merge-apply.requested", apply(8))
    plan_pending(now=NOW)
    first, second = (Proposal.objects.get(event__uid=uid) for uid in ("op-merge-7", "op-merge-8"))
    for proposal in (first, second):
        approve_proposal(proposal.pk, user=approver, now=NOW + timedelta(minutes=1))
    return first, second


def released_at(proposal: Proposal) -> tuple:
    """When the proposal's key and its run's were released (None: held)."""
    proposal.refresh_from_db()
    return proposal.key_released_at, Run.objects.get(proposal=proposal).key_released_at


def releases() -> list[tuple]:
    return list(JournalEntry.objects.filter(action="idempotency_key_released").order_by("id").values_list(
        "proposal__event__uid", "actor", "at", "data"))


def test_a_key_is_held_only_by_a_proposal_that_has_not_released_it(two_runs):
    first, _ = two_runs
    assert (key_held(key(7)), key_held(key(8)), key_held(key(9))) == (True, True, False)
    release_idempotency_key(first, reason="rejected", now=LATER)
    assert (key_held(key(7)), key_held(key(8)), key_held(key(9))) == (False, True, False)


def test_a_release_touches_that_proposal_and_its_run_only_and_is_journaled(two_runs):
    first, second = two_runs
    assert release_idempotency_key(first, reason="abandoned", now=LATER) is True
    assert released_at(first) == (LATER, LATER)
    assert released_at(second) == (None, None)
    assert releases() == [("op-merge-7", "system", LATER, {"idempotencyKey": key(7), "reason": "abandoned"})]


def test_a_key_released_already_is_not_released_again(two_runs):
    first, _ = two_runs
    release_idempotency_key(first, reason="failed", now=LATER)
    assert release_idempotency_key(first, reason="closed", now=LATER + timedelta(hours=1)) is False
    assert released_at(first) == (LATER, LATER)
    assert releases() == [("op-merge-7", "system", LATER, {"idempotencyKey": key(7), "reason": "failed"})]


def test_a_run_that_released_its_key_keeps_the_instant_it_did(two_runs):
    first, _ = two_runs
    Run.objects.filter(proposal=first).update(key_released_at=NOW)
    assert release_idempotency_key(first, reason="failed", now=LATER) is True
    assert released_at(first) == (LATER, NOW)


def test_an_outcome_is_journaled_with_the_release(two_runs):
    first, _ = two_runs
    assert release_idempotency_key(first, reason="outcome", now=LATER, outcome="WAIT") is True
    assert releases() == [
        ("op-merge-7", "system", LATER, {"idempotencyKey": key(7), "reason": "outcome", "outcome": "WAIT"}),
    ]


def test_an_unknown_reason_is_refused_with_the_reasons(two_runs):
    first, _ = two_runs
    with pytest.raises(ValueError) as refused:
        release_idempotency_key(first, reason="bored", now=LATER)
    assert str(refused.value) == "'bored' is not a reason to release a key: rejected, failed, abandoned, closed, outcome"
    assert released_at(first) == (None, None) and releases() == []


def registry_releasing(definition: str, *outcomes: str) -> SimpleNamespace:
    """A registry whose ``definition`` releases its key on ``outcomes``."""
    return SimpleNamespace(definitions={definition: SimpleNamespace(release_key_on=outcomes)})


def test_a_run_that_succeeded_with_an_outcome_its_definition_lists_releases_its_key(two_runs):
    first, second = two_runs
    run = Run.objects.get(proposal=first)
    registry = registry_releasing(run.definition, "WAIT")
    assert release_after_finish(run, RunStatus.SUCCEEDED, "WAIT", now=LATER, registry=registry) is True
    assert release_after_finish(Run.objects.get(proposal=second), RunStatus.SUCCEEDED, "DONE", now=LATER,
                                registry=registry) is False
    assert (released_at(first), released_at(second)) == ((LATER, LATER), (None, None))
    assert releases() == [
        ("op-merge-7", "system", LATER, {"idempotencyKey": key(7), "reason": "outcome", "outcome": "WAIT"}),
    ]


def test_a_ticks_run_keeps_its_key_whatever_its_outcome(two_runs):
    first, _ = two_runs
    run = Run.objects.get(proposal=first)
    run.loop = "merge-scan"
    registry = registry_releasing(run.definition, "WAIT")
    assert release_after_finish(run, RunStatus.SUCCEEDED, "WAIT", now=LATER, registry=registry) is False
    assert released_at(first) == (None, None) and releases() == []
