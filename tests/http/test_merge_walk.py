"""Spec §14's walk with CI turning green: the dispatch chain's scoped merge request and GitHub's
green pull-request ``workflow_run`` for the same PR and head converge on one merge-scan and
one merge-apply proposal (docs/design.md §7.2; docs/demo.md).

The delivery is the vendored ``workflow_run.completed.pull_request-success.json``, byte for
byte, signed with the test secret: gsmet/quarkus-bot-java-playground (``playground``), PR #46,
head 6f0b5a9c….
"""

import pytest
import time_machine

from runtime.models import Event, Proposal, Run
from runtime.services.approval import approve_proposal
from tests.conftest import at
from tests.github import GITHUB, REPOS_YAML, SECRET, post
from tests.helpers import inject, step

pytestmark = pytest.mark.django_db

HEAD = "6f0b5a9c2c4caea39f73a4f5f4dbee093265ab2a"
GREEN = f"merge-pr:playground:46:{HEAD}"
SCAN_KEY = f"merge-scan:playground:46:{HEAD}"
APPLY_KEY = f"merge-apply:playground:46:{HEAD}"
OUTCOMES = f"""
outcomes:
  work-scan@1:
    - when: {{repo: playground}}
      results:
        - outcome: DISPATCH
          data: {{ticket: PLAY-46, ownedPaths: [src/bot.java]}}
        - outcome: NO_WORK
  dispatch@1:
    - results:
        - outcome: PR_OPEN
          data: {{prNumber: 46, headSha: {HEAD}}}
  merge-scan@1:
    - when: {{prNumbers: [46]}}
      results:
        - outcome: MERGE
          data: {{prNumber: 46, headSha: {HEAD}, checks: green}}
    - results: [{{outcome: WAIT}}]
  merge-apply@1:
    - results: [{{outcome: MERGED}}]
"""


@pytest.fixture
def walk(settings, fake_agents):
    settings.FACTORY_GITHUB_WEBHOOK_SECRET = SECRET
    fake_agents.write_config("repos.yaml", REPOS_YAML)
    fake_agents.write_config("fake-outcomes.yaml", OUTCOMES)
    return fake_agents


def green_ci() -> None:
    body = (GITHUB / "workflow_run.completed.pull_request-success.json").read_bytes()
    response = post(body, "workflow_run", delivery="2f1f4c00-8f2b-11eb-9a56-b6a1e8a3d0c4")
    assert (response.status_code, response.json()) == (202, {"admitted": True, "duplicate": False, "eventId": GREEN})


def dispatch_approved(approver) -> None:
    """The walk up to the approved dispatch: inject, work-scan DISPATCH, approval 1."""
    inject("op-1", "factory.work.requested", {"repo": "playground"})
    step("2026-11-30T10:00:00Z")
    step("2026-11-30T10:01:00Z")
    dispatch = Proposal.objects.get(definition="dispatch@1")
    with time_machine.travel(at("2026-11-30T10:02:00Z"), tick=False):
        approve_proposal(dispatch.pk, user=approver, now=at("2026-11-30T10:02:00Z"))


def scoped_scans() -> list[tuple[str, str, str]]:
    return [
        (p.event.uid, p.idempotency_key, p.run.outcome)
        for p in Proposal.objects.filter(definition="merge-scan@1", event__payload__has_key="prNumbers").order_by("id")
    ]


@pytest.mark.parametrize("green_first", [False, True], ids=["chain-then-green", "green-then-chain"])
def test_the_chain_and_a_green_ci_delivery_for_the_reviewed_head_yield_one_merge_apply(walk, approver, green_first):
    dispatch_approved(approver)
    if green_first:
        green_ci()                                            # CI is green before the chain's request is planned
    step("2026-11-30T10:03:00Z")                              # dispatch PR_OPEN → scoped merge request, planned
    if not green_first:
        green_ci()
    step("2026-11-30T10:04:00Z")                              # the one merge-scan MERGE → merge-apply proposal
    step("2026-11-30T10:05:00Z")

    dispatch = Run.objects.get(definition="dispatch@1")
    chained = f"chain:{dispatch.pk}:1"
    assert Event.objects.get(uid=chained).payload == {"repo": "playground", "prNumbers": [46], "headSha": HEAD}
    assert Event.objects.get(uid=GREEN).payload == {"repo": "playground", "prNumbers": [46], "headSha": HEAD}
    first, second = (GREEN, chained) if green_first else (chained, GREEN)
    assert scoped_scans() == [(first, SCAN_KEY, "MERGE")]
    duplicate = Event.objects.get(uid=second)
    assert (duplicate.planning_outcome, duplicate.planning_reason) == ("NOOP", "duplicate_idempotency_key")
    assert duplicate.journal.get(action="event_noop").data == {
        "reason": "duplicate_idempotency_key", "idempotencyKey": SCAN_KEY,
    }

    (apply_proposal,) = Proposal.objects.filter(definition="merge-apply@1")
    assert (apply_proposal.idempotency_key, apply_proposal.status, apply_proposal.barrier) == (
        APPLY_KEY, "pending", "merge",
    )
    approve_proposal(apply_proposal.pk, user=approver, now=at("2026-11-30T10:06:00Z"))
    step("2026-11-30T10:07:00Z")
    assert list(Run.objects.filter(definition="merge-apply@1").values_list("status", "outcome")) == [
        ("succeeded", "MERGED"),
    ]


def test_a_green_ci_delivery_for_a_newer_head_is_reviewed_again(walk, approver):
    dispatch_approved(approver)
    older = "a" * 40
    walk.write_config("fake-outcomes.yaml", OUTCOMES.replace(f"{{prNumber: 46, headSha: {HEAD}}}", f"{{prNumber: 46, headSha: {older}}}"))
    step("2026-11-30T10:03:00Z")                              # the PR opened at an older head
    green_ci()
    step("2026-11-30T10:04:00Z")
    assert [key for _, key, _ in scoped_scans()] == [f"merge-scan:playground:46:{older}", SCAN_KEY]
    # Both reviews pin the same head in their verdict: one merge-apply proposal still.
    assert list(Proposal.objects.filter(definition="merge-apply@1").values_list("idempotency_key", flat=True)) == [
        APPLY_KEY,
    ]


def test_a_green_ci_delivery_after_a_wait_at_the_same_head_is_reviewed_again(walk, approver):
    """The chain's scan ran before CI finished and answered WAIT, no final answer for the head
    (merge-scan's ``releaseKeyOn``): the green delivery is reviewed, and merges once."""
    walk.write_config("fake-outcomes.yaml", OUTCOMES.replace(
        "    - when: {prNumbers: [46]}\n      results:\n",
        "    - when: {prNumbers: [46]}\n      results:\n        - outcome: WAIT\n",
    ))
    dispatch_approved(approver)
    step("2026-11-30T10:03:00Z")
    step("2026-11-30T10:04:00Z")                              # the chain's scan: WAIT, its key released
    dispatch = Run.objects.get(definition="dispatch@1")
    chained = f"chain:{dispatch.pk}:1"
    assert [(e.action, e.actor, e.data) for e in Event.objects.get(uid=chained).journal.filter(
        action="idempotency_key_released")] == [
        ("idempotency_key_released", "system", {"idempotencyKey": SCAN_KEY, "reason": "outcome", "outcome": "WAIT"}),
    ]
    green_ci()
    step("2026-11-30T10:05:00Z")
    step("2026-11-30T10:06:00Z")
    assert scoped_scans() == [(chained, SCAN_KEY, "WAIT"), (GREEN, SCAN_KEY, "MERGE")]
    assert list(Proposal.objects.filter(definition="merge-apply@1").values_list("idempotency_key", flat=True)) == [
        APPLY_KEY,
    ]
