#!/usr/bin/env python3
"""The deterministic maintenance jobs of the Factory (docs/host-clock.md), one subcommand each.

Every subcommand reads ``<root>/tickets/*.json`` (see ``tickets.py``) and, for
``reconcile`` and ``janitor-scan``, ``<root>/claims/``; its last output line is a
``factory.command-result/v1`` JSON object. Exit 0, or 2 (outcome ``FAILED``) when a
queue cannot be read.

- ``label-guard [--apply]``: every ticket carries exactly one ``status:<status>`` label,
  the one matching its status. Dry run by default (``WOULD_FIX`` / ``LABELS_OK``);
  ``--apply`` rewrites the queue files (``FIXED``). Mutating: its definition is a closed
  template over every queue of the root.
- ``reconcile [--apply]``: an ``in-progress`` ticket with no claim in ``claims/`` goes
  back to ``ready`` (``WOULD_RECONCILE`` / ``RECONCILED`` / ``IN_SYNC``). Mutating, closed.
- ``warm --repo R``: computes the dispatch order of a repo's ready tickets (oldest id
  first) so the next dispatch starts warm; writes nothing (``WARM``).
- ``unblock-digest --repo R``: a digest of a repo's blocked tickets and their reasons
  (``DIGEST`` / ``NOTHING_BLOCKED``); writes nothing.
- ``janitor-scan``: reports claim files that are unreadable or name no known ticket, and
  reaped claims (``LEFTOVERS`` / ``CLEAN``); moves nothing.
"""

import argparse
import json
import sys
from pathlib import Path

from tickets import QueueError, load_queue


def result(outcome: str, summary: str, data: dict) -> str:
    return json.dumps({"schemaVersion": "factory.command-result/v1", "outcome": outcome, "summary": summary, "data": data})


def queue_paths(root: Path) -> list[Path]:
    return sorted((root / "tickets").glob("*.json"))


def write_queue(path: Path, tickets: list[dict]) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    data["tickets"] = tickets
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def label_guard(root: Path, apply: bool) -> str:
    fixes = []
    for path in queue_paths(root):
        tickets = load_queue(root, path.stem)
        for ticket in tickets:
            labels = ticket.get("labels", [])
            wanted = [label for label in labels if not label.startswith("status:")] + [f"status:{ticket['status']}"]
            if labels != wanted:
                fixes.append({"repo": path.stem, "ticket": ticket["id"], "from": labels, "to": wanted})
                print(f"{'fixed' if apply else 'would fix'} {ticket['id']}: {labels} -> {wanted}")
                ticket["labels"] = wanted
        if apply and any(f["repo"] == path.stem for f in fixes):
            write_queue(path, tickets)
    data = {"mode": "apply" if apply else "dry-run", "fixes": fixes}
    if not fixes:
        return result("LABELS_OK", "every ticket carries its one status label", data)
    return result("FIXED" if apply else "WOULD_FIX", f"{len(fixes)} ticket(s) with wrong status labels", data)


def claimed_tickets(root: Path) -> tuple[set[str], list[str]]:
    """Ticket ids with a readable claim in ``claims/``, and the claim files that are unreadable."""
    claimed, unreadable = set(), []
    for path in sorted((root / "claims").glob("*.json")):
        try:
            claimed.add(str(json.loads(path.read_text(encoding="utf-8"))["ticket"]))
        except (OSError, ValueError, KeyError, TypeError):
            unreadable.append(path.name)
    return claimed, unreadable


def reconcile(root: Path, apply: bool) -> str:
    claimed, _ = claimed_tickets(root)
    moved = []
    for path in queue_paths(root):
        tickets = load_queue(root, path.stem)
        for ticket in tickets:
            if ticket["status"] == "in-progress" and ticket["id"] not in claimed:
                moved.append({"repo": path.stem, "ticket": ticket["id"]})
                print(f"{'returned' if apply else 'would return'} {ticket['id']} to ready: in progress with no claim")
                ticket["status"] = "ready"
        if apply and any(m["repo"] == path.stem for m in moved):
            write_queue(path, tickets)
    data = {"mode": "apply" if apply else "dry-run", "returnedToReady": moved}
    if not moved:
        return result("IN_SYNC", "every ticket in progress has a claim", data)
    return result("RECONCILED" if apply else "WOULD_RECONCILE", f"{len(moved)} unclaimed ticket(s) in progress", data)


def warm(root: Path, repo: str) -> str:
    order = sorted(t["id"] for t in load_queue(root, repo) if t["status"] == "ready")
    for position, ticket in enumerate(order, 1):
        print(f"{position}. {ticket}")
    return result("WARM", f"{len(order)} ready ticket(s) in dispatch order", {"repo": repo, "dispatchOrder": order})


def unblock_digest(root: Path, repo: str) -> str:
    blocked = [
        {"ticket": t["id"], "reason": t.get("blockedReason", "no reason recorded")}
        for t in load_queue(root, repo) if t["status"] == "blocked"
    ]
    for item in blocked:
        print(f"{item['ticket']}: {item['reason']}")
    if not blocked:
        return result("NOTHING_BLOCKED", f"{repo} has no blocked ticket", {"repo": repo, "blocked": []})
    return result("DIGEST", f"{len(blocked)} blocked ticket(s) in {repo}", {"repo": repo, "blocked": blocked})


def janitor_scan(root: Path) -> str:
    known = {t["id"] for path in queue_paths(root) for t in load_queue(root, path.stem)}
    claimed, unreadable = claimed_tickets(root)
    orphaned = sorted(claimed - known)
    reaped = sorted(p.name for p in (root / "claims" / "reaped").glob("*.json"))
    for name in unreadable:
        print(f"unreadable claim {name}")
    for ticket in orphaned:
        print(f"claim for unknown ticket {ticket}")
    for name in reaped:
        print(f"reaped claim {name} is still on disk")
    data = {"unreadableClaims": unreadable, "orphanedClaims": orphaned, "reapedClaims": reaped}
    count = len(unreadable) + len(orphaned) + len(reaped)
    if not count:
        return result("CLEAN", "no leftovers in claims/", data)
    return result("LEFTOVERS", f"{count} leftover(s) in claims/", data)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="the factory root holding tickets/ and claims/")
    sub = parser.add_subparsers(dest="job", required=True)
    for name in ("label-guard", "reconcile"):
        sub.add_parser(name).add_argument("--apply", action="store_true", help="change the queue (default: dry run)")
    for name in ("warm", "unblock-digest"):
        sub.add_parser(name).add_argument("--repo", required=True, help="the repo's short name")
    sub.add_parser("janitor-scan")
    args = parser.parse_args(argv)
    root = Path(args.root)
    try:
        line = {
            "label-guard": lambda: label_guard(root, args.apply),
            "reconcile": lambda: reconcile(root, args.apply),
            "warm": lambda: warm(root, args.repo),
            "unblock-digest": lambda: unblock_digest(root, args.repo),
            "janitor-scan": lambda: janitor_scan(root),
        }[args.job]()
    except QueueError as exc:
        print(result("FAILED", str(exc), {"job": args.job}))
        return 2
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
