"""A stand-in for an external CLI agent (the agent adapter's tests, docs/design.md §8).

Reads the plan from stdin, keeps a copy as ``plan.json`` in its run directory (the
working directory the adapter gives it), and answers by ``factory.command-result/v1``
on its last stdout line. The run's input steers it: ``{"repo": "sleepy"}`` sleeps past
any time-out, ``{"repo": "garbled"}`` prints a result that breaks the contract, any
other repo gets ``NO_WORK`` naming the repo and the run id it was given.
"""

import json
import sys
import time
from pathlib import Path

plan = json.loads(sys.stdin.read())
Path("plan.json").write_text(json.dumps(plan))
repo = plan["input"].get("repo")
print(f"agent working on {plan['definition']} for {repo}")
if repo == "sleepy":
    time.sleep(60)
if repo == "garbled":
    print(json.dumps({"schemaVersion": "factory.command-result/v1", "outcome": "not upper"}))
else:
    print(json.dumps({
        "schemaVersion": "factory.command-result/v1", "outcome": "NO_WORK",
        "summary": f"nothing ready in {repo}", "data": {"runId": plan["runId"]},
    }))
