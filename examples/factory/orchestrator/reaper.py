#!/usr/bin/env python3
"""Reap stale ticket claims in a factory root — the reaper the `reaper` loop runs (spec §7).

A claim is ``<root>/claims/<name>.json``: ``{"ticket": "T-12", "owner": "agent-3",
"heartbeatAt": "<RFC 3339 instant>"}``. A claim is stale when its heartbeat is older
than ``--stale-minutes`` (default 120). The predicate is strict on purpose: a claim
file that cannot be read or has no valid heartbeat is reported, never reaped.

Without ``--apply`` it only reports what it would reap (a dry run); with ``--apply``
it moves each stale claim to ``<root>/claims/reaped/``. The last line of its output is
a ``factory.command-result/v1`` JSON object: ``REAPED``, ``WOULD_REAP`` or
``NOTHING_TO_REAP``; ``FAILED`` (exit 2) when the root has no claims directory.
"""

import argparse
import json
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path


def parse_instant(text: str) -> datetime:
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError("no UTC offset")
    return value.astimezone(UTC)


def result(outcome: str, summary: str, data: dict) -> str:
    return json.dumps({"schemaVersion": "factory.command-result/v1", "outcome": outcome, "summary": summary, "data": data})


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="the factory root holding claims/")
    parser.add_argument("--apply", action="store_true", help="move stale claims to claims/reaped/ (default: dry run)")
    parser.add_argument("--stale-minutes", type=int, default=120, help="heartbeat age that makes a claim stale")
    parser.add_argument("--now", help="the instant to judge staleness at (RFC 3339; default: the clock)")
    args = parser.parse_args(argv)

    claims_dir = Path(args.root) / "claims"
    mode = "apply" if args.apply else "dry-run"
    if not claims_dir.is_dir():
        print(result("FAILED", f"{claims_dir} is not a directory", {"mode": mode}))
        return 2
    now = parse_instant(args.now) if args.now else datetime.now(UTC)
    limit = now - timedelta(minutes=args.stale_minutes)
    stale, kept, unreadable = [], [], []
    for path in sorted(claims_dir.glob("*.json")):
        try:
            claim = json.loads(path.read_text(encoding="utf-8"))
            heartbeat = parse_instant(claim["heartbeatAt"])
            ticket = str(claim["ticket"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            unreadable.append(path.name)
            print(f"unreadable claim {path.name}: {exc}; left alone")
            continue
        if heartbeat < limit:
            stale.append({"file": path.name, "ticket": ticket, "heartbeatAt": claim["heartbeatAt"]})
        else:
            kept.append(path.name)

    if args.apply and stale:
        reaped_dir = claims_dir / "reaped"
        reaped_dir.mkdir(exist_ok=True)
        for claim in stale:
            os.replace(claims_dir / claim["file"], reaped_dir / claim["file"])
            print(f"reaped {claim['ticket']} ({claim['file']}, last heartbeat {claim['heartbeatAt']})")
    else:
        for claim in stale:
            print(f"would reap {claim['ticket']} ({claim['file']}, last heartbeat {claim['heartbeatAt']})")

    data = {"mode": mode, "staleMinutes": args.stale_minutes, "stale": stale, "kept": len(kept), "unreadable": unreadable}
    if not stale:
        print(result("NOTHING_TO_REAP", f"{len(kept)} live claim(s), none stale", data))
    elif args.apply:
        print(result("REAPED", f"reaped {len(stale)} stale claim(s)", data))
    else:
        print(result("WOULD_REAP", f"{len(stale)} stale claim(s) would be reaped", data))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
