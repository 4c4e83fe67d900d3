"""The README's quick start with a stale claim planted: before anyone approves, the pending reaper
proposal shows which claim it would reap, and the claim is still in place (docs/design.md §8, Previews)."""

import json
import shutil
import subprocess
import sys

import pytest

from tests.conftest import PROJECT_DIR
from tests.processes import MANAGE, wait_for

from .conftest import serving

pytestmark = pytest.mark.process


def test_the_pending_reaper_proposal_shows_it_would_reap_t7_and_approving_reaps_it(tmp_path):
    root = tmp_path / "factory"
    shutil.copytree(PROJECT_DIR / "examples" / "factory", root, ignore=shutil.ignore_patterns("*.json"))
    subprocess.run([sys.executable, str(root / "orchestrator" / "claim.py"), "--root", str(root), "--ticket", "T-7",
                    "--age-minutes", "180"], check=True, capture_output=True, timeout=30)
    overlay = (PROJECT_DIR / "config" / "schedule.example.yaml").read_text()
    with serving(tmp_path, run_workers=1, loop=True, config={"schedule.yaml": overlay}, FACTORY_ROOT=str(root)) as (
        _url, env
    ):
        def manage(*args):
            return subprocess.run([sys.executable, MANAGE, *args], env=env, cwd=PROJECT_DIR, check=True,
                                  capture_output=True, text=True, timeout=60).stdout

        def previewed():
            found = json.loads(manage("proposals", "--status", "pending", "--json"))
            return next((p for p in found if (p["preview"] or {}).get("status") == "done"), None)

        proposal = wait_for(previewed, timeout=30, what="a previewed pending reaper proposal", interval=0.5)
        preview = proposal["preview"]
        assert (preview["outcome"], preview["summary"]) == ("WOULD_REAP", "1 stale claim(s) would be reaped")
        assert [claim["ticket"] for claim in preview["data"]["stale"]] == ["T-7"]
        assert "would reap T-7 (T-7.json" in preview["stdout"]
        assert proposal["description"].startswith("Moves claim files whose heartbeat is older than the stale limit")
        assert (root / "claims" / "T-7.json").exists()

        manage("approve", str(proposal["id"]), "--as", "operator")

        def finished():
            runs = json.loads(manage("runs", "--json"))
            # The heartbeat (auto, every 5 minutes) runs beside it: only the reaper's run counts.
            return next((r for r in runs if r["definition"] == "reaper@1" and r["status"] in ("succeeded", "failed")),
                        None)

        run = wait_for(finished, timeout=30, what="the approved reaper run to end", interval=0.5)
        assert (run["status"], run["outcome"]) == ("succeeded", "REAPED")
        assert not (root / "claims" / "T-7.json").exists()
        assert (root / "claims" / "reaped" / "T-7.json").exists()
