"""The pages on any screen (docs/web.md, "Any screen"): at 390 × 844 (a phone) and 1400 × 900 (a
desk) the dashboard, the pending proposals, a proposal, its confirmation and a run read without
sideways scrolling (no element wider than the window) and carry the navigation; on a phone a
person finds the pending proposal from the navigation, reads it and approves it. Debian's
headless Chromium against a live ``runserve``; screenshots under ``ARTIFACTS_DIR``."""

import json
import shutil
import subprocess
import sys

import pytest

from tests.browsers import NARROW, WIDE, Shots, fits, signed_in
from tests.conftest import PROJECT_DIR
from tests.processes import MANAGE, wait_for

from .conftest import serving

pytestmark = pytest.mark.process

OVERLAY = "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n"
OPERATOR = ("operator", "operator-pass-123")


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    root = tmp_path_factory.mktemp("browser-screens")
    shutil.copytree(PROJECT_DIR / "examples" / "factory", root / "factory")
    with serving(root, run_workers=1, config={"schedule.yaml": OVERLAY}, FACTORY_ROOT=str(root / "factory")) as (
        url, env
    ):
        def manage(*args, timeout=60):
            return subprocess.run([sys.executable, MANAGE, *args], env=env, cwd=PROJECT_DIR, check=True,
                                  capture_output=True, text=True, timeout=timeout).stdout

        manage("schedule", "tick")
        yield url, manage


def pending(manage) -> list[dict]:
    return json.loads(manage("proposals", "--status", "pending", "--json"))


@pytest.mark.parametrize("width", [WIDE, NARROW])
def test_the_five_pages_fit_and_carry_the_navigation(browser, live, width):
    base, manage = live
    shot = Shots(f"screens-{width}")
    proposal = wait_for(lambda: pending(manage), timeout=20, what="a pending reaper proposal")[0]["id"]
    runs = json.loads(manage("runs", "--json"))
    page = signed_in(browser, base, OPERATOR, width)
    paths = {
        "dashboard": "/dashboard/", "pending": "/admin/runtime/proposal/?status__exact=pending",
        "proposal": f"/admin/runtime/proposal/{proposal}/change/",
        "confirmation": f"/admin/runtime/proposal/{proposal}/decide/approve/",
    }
    if runs:
        paths["run"] = f"/admin/runtime/run/{runs[0]['id']}/change/"
    for name, path in paths.items():
        page.goto(base + path)
        assert fits(page), name
        assert page.locator("#ops-nav a").all_inner_texts()[:2] == ["Loops", f"Pending {len(pending(manage))}"], name
        shot(page, name)
    page.context.close()


def test_on_a_phone_a_person_finds_reads_and_approves_the_pending_proposal(browser, live):
    base, manage = live
    shot = Shots("phone-approval")
    proposal = wait_for(lambda: pending(manage), timeout=20, what="a pending reaper proposal")[0]["id"]
    page = signed_in(browser, base, OPERATOR, NARROW)
    page.click("#ops-nav a:has-text('Pending')")
    page.click(f"#result_list a[href^='/admin/runtime/proposal/{proposal}/change/']")
    assert "What it does" in page.inner_text("#content")
    assert fits(page)
    shot(page, "proposal")
    page.click("a.decide-approve")
    page.wait_for_url(f"**/proposal/{proposal}/decide/approve/")
    box = page.locator("input[value='Yes, approve and run']").bounding_box()
    assert box["height"] >= 44 and box["x"] + box["width"] <= NARROW
    page.click("input[value='Yes, approve and run']")
    page.wait_for_url("**/admin/runtime/run/*/change/")
    assert fits(page)
    shot(page, "run")
    page.context.close()
