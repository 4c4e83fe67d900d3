#!/usr/bin/env python3
"""Write a ticket claim into a factory root, optionally already stale — to watch the reaper work.

Example: ``python examples/factory/orchestrator/claim.py --root examples/factory --ticket T-7 --age-minutes 180``
"""

import argparse
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--ticket", required=True)
    parser.add_argument("--owner", default="agent-1")
    parser.add_argument("--age-minutes", type=int, default=0, help="how old the claim's last heartbeat is")
    args = parser.parse_args(argv)
    heartbeat = datetime.now(UTC) - timedelta(minutes=args.age_minutes)
    path = Path(args.root) / "claims" / f"{args.ticket}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "ticket": args.ticket, "owner": args.owner, "heartbeatAt": heartbeat.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }) + "\n")
    print(f"claim written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
