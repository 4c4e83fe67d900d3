#!/usr/bin/env python3
"""Read a repo's ticket queue and answer a host-clock gate, or show what a stage would see (docs/host-clock.md).

The queue is ``<root>/tickets/<repo>.json``: ``{"repo": "factory", "tickets": [{"id",
"title", "status", "labels", "blockedReason"?, "pr"?}]}`` with status one of
``intake``, ``ready``, ``in-progress``, ``blocked``, ``review``, ``done``.

``--gate STAGE`` is a gate command: exit 0 when the stage has something to do, exit 1
when it has nothing to do, exit 2 when the queue cannot be read; one line says why.

- ``triage``: supply is low (fewer than ``--low-supply`` ready tickets, default 3) and
  intake has something Triage can promote;
- ``dispatch``: at least one ready ticket; ``merge``: at least one ticket in review
  (a pull request open); ``unblock``: at least one blocked ticket.

``--show STAGE`` is a dry command: it lists the tickets the stage would look at and
exits 0 (2 when the queue cannot be read). It never changes anything.
"""

import argparse
import json
import sys
from pathlib import Path

STATUSES = ("intake", "ready", "in-progress", "blocked", "review", "done")
#: Fewer ready tickets than this is "low supply" (spec §15, work-scan's LOW_SUPPLY).
DEFAULT_LOW_SUPPLY = 3
EXIT_GO, EXIT_NOTHING_TO_DO, EXIT_ERROR = 0, 1, 2


class QueueError(Exception):
    """The queue file is missing or malformed."""


def load_queue(root: Path, repo: str) -> list[dict]:
    """The tickets of ``<root>/tickets/<repo>.json``; raises QueueError when unreadable."""
    path = root / "tickets" / f"{repo}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        tickets = data["tickets"]
        if not all(isinstance(t, dict) and t.get("status") in STATUSES and "id" in t for t in tickets):
            raise ValueError("every ticket needs an id and a known status")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise QueueError(f"cannot read the queue {path}: {exc}") from None
    return tickets


def by_status(tickets: list[dict], status: str) -> list[dict]:
    return [t for t in tickets if t["status"] == status]


def gate(stage: str, tickets: list[dict], low_supply: int) -> tuple[bool, str]:
    """``(go, reason)`` for one stage."""
    ready, intake = len(by_status(tickets, "ready")), len(by_status(tickets, "intake"))
    if stage == "triage":
        if ready >= low_supply:
            return False, f"supply is full: {ready} ready ticket(s), low supply is under {low_supply}"
        if not intake:
            return False, f"supply is low ({ready} ready) but intake is empty: nothing for triage to promote"
        return True, f"supply is low: {ready} ready ticket(s) and {intake} in intake"
    status = {"dispatch": "ready", "merge": "review", "unblock": "blocked"}[stage]
    count = len(by_status(tickets, status))
    return count > 0, f"{count} {status} ticket(s)"


def show(stage: str, tickets: list[dict]) -> list[str]:
    """The lines a dry run prints: the tickets the stage would look at."""
    statuses = {"triage": ("intake",), "dispatch": ("ready",), "merge": ("review",), "unblock": ("blocked",)}[stage]
    lines = []
    for ticket in tickets:
        if ticket["status"] in statuses:
            extra = ticket.get("blockedReason") or (f"PR #{ticket['pr']}" if "pr" in ticket else "")
            lines.append(f"{stage} would look at {ticket['id']} ({ticket['status']}): {ticket.get('title', '')}"
                         + (f" — {extra}" if extra else ""))
    return lines or [f"{stage} would find nothing"]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="the factory root holding tickets/")
    parser.add_argument("--repo", required=True, help="the repo's short name: reads tickets/<repo>.json")
    stages = ("triage", "dispatch", "merge", "unblock")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--gate", choices=stages, help="answer the gate: exit 0 go, 1 nothing to do, 2 error")
    mode.add_argument("--show", choices=stages, help="print what the stage would look at (dry command)")
    parser.add_argument("--low-supply", type=int, default=DEFAULT_LOW_SUPPLY, help="triage: ready tickets below this are low supply")
    args = parser.parse_args(argv)
    try:
        tickets = load_queue(Path(args.root), args.repo)
    except QueueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if args.show:
        print("\n".join(show(args.show, tickets)))
        return EXIT_GO
    go, reason = gate(args.gate, tickets, args.low_supply)
    print(f"{args.gate} gate: {'go' if go else 'nothing to do'}: {reason}")
    return EXIT_GO if go else EXIT_NOTHING_TO_DO


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
