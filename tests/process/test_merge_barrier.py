"""The global one-merge barrier across real worker processes: two approved merges of two repos,
two workers, and the merges never overlap (docs/design.md §7, Barriers; spec §14)."""

import json
from datetime import datetime

from tests.processes import wait_for

SHA = "3f786850e387550fdab836ed7e6dc881de23001b"
OUTCOMES = "outcomes:\n  merge-apply@1:\n    - results: [{outcome: MERGED, seconds: 2}]\n"


def test_two_workers_never_run_two_merges_at_once(runtime):
    runtime.env["FACTORY_FAKE_AGENTS"] = "true"
    runtime.write_config("schedule.yaml", "schedules:\n  heartbeat:\n    enabled: false\n")
    runtime.write_config("fake-outcomes.yaml", OUTCOMES)
    for repo, pr in (("alpha", 7), ("beta", 3)):
        event = runtime.root / f"{repo}.json"
        event.write_text(json.dumps({
            "schemaVersion": "factory.event/v1", "eventId": f"merge-{repo}", "type": "factory.merge-apply.requested",
            "source": "operator", "subject": repo, "occurredAt": "2026-11-30T10:00:00Z",
            "correlationId": f"merge-{repo}", "payload": {"repo": repo, "prNumber": pr, "headSha": SHA, "evidence": {}},
        }))
        runtime.manage("inject", str(event))
    runtime.manage("slot_loop", "--once")
    runtime.manage("ensure_operator")
    for proposal in runtime.listing("proposals", "--status", "pending"):
        runtime.manage("approve", str(proposal["id"]), "--as", "operator")

    for _ in range(2):
        runtime.start("worker")
    runs = wait_for(
        lambda: (runs := runtime.listing("runs")) and all(r["status"] == "succeeded" for r in runs) and runs,
        timeout=60, what="both merges to succeed",
    )
    assert sorted((r["definition"], r["outcome"], r["attempt"]) for r in runs) == [
        ("merge-apply@1", "MERGED", 1), ("merge-apply@1", "MERGED", 1),
    ]
    journal = runtime.listing("journal")
    spans = sorted(
        (entry("run_claimed", run["id"], journal), entry("run_succeeded", run["id"], journal)) for run in runs
    )
    (first_claimed, first_ended), (second_claimed, second_ended) = spans
    assert first_claimed < first_ended <= second_claimed < second_ended


def entry(action: str, run_id: int, journal: list[dict]) -> datetime:
    (at,) = [e["at"] for e in journal if e["action"] == action and e["runId"] == run_id]
    return datetime.fromisoformat(at)
