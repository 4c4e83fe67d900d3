"""The gate, dry and maintenance scripts bundled in the example factory root (docs/host-clock.md)."""

import json
import shutil
import subprocess
import sys

import pytest

from tests.conftest import PROJECT_DIR

EXAMPLE_ROOT = PROJECT_DIR / "examples" / "factory"


@pytest.fixture
def root(tmp_path):
    """A copy of the example factory root, so mutating scripts leave the tracked queue alone."""
    copy = tmp_path / "factory-root"
    shutil.copytree(EXAMPLE_ROOT, copy, ignore=shutil.ignore_patterns("claims"))
    (copy / "claims").mkdir()
    return copy


def run(root, script: str, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(root / "orchestrator" / script), "--root", str(root), *args],
                          capture_output=True, text=True, timeout=60)


def contract(result: subprocess.CompletedProcess) -> dict:
    line = json.loads(result.stdout.strip().splitlines()[-1])
    assert line["schemaVersion"] == "factory.command-result/v1"
    return line


@pytest.mark.parametrize(("stage", "low_supply", "code"), [
    ("triage", "3", 0), ("triage", "1", 1), ("dispatch", "3", 0), ("merge", "3", 0), ("unblock", "3", 0),
])
def test_the_queue_gate_says_go_or_nothing_to_do(root, stage, low_supply, code):
    result = run(root, "tickets.py", "--repo", "factory", "--gate", stage, "--low-supply", low_supply)
    assert result.returncode == code, result.stdout + result.stderr


def test_an_unreadable_queue_is_a_gate_error_not_a_skip(root):
    assert run(root, "tickets.py", "--repo", "missing", "--gate", "triage").returncode == 2


def test_the_mutating_maintenance_jobs_act_only_with_apply(root):
    before = (root / "tickets" / "factory.json").read_text()
    assert contract(run(root, "maintenance.py", "label-guard"))["outcome"] == "WOULD_FIX"
    assert contract(run(root, "maintenance.py", "reconcile"))["outcome"] == "WOULD_RECONCILE"
    assert (root / "tickets" / "factory.json").read_text() == before
    # reconcile first: the ticket it returns to ready then needs label-guard's fix too
    assert contract(run(root, "maintenance.py", "reconcile", "--apply"))["outcome"] == "RECONCILED"
    assert contract(run(root, "maintenance.py", "label-guard", "--apply"))["data"]["fixes"][0]["ticket"] == "F-104"
    assert contract(run(root, "maintenance.py", "label-guard"))["outcome"] == "LABELS_OK"
    assert contract(run(root, "maintenance.py", "reconcile"))["outcome"] == "IN_SYNC"


def test_the_read_only_maintenance_jobs_report(root):
    assert contract(run(root, "maintenance.py", "warm", "--repo", "factory"))["data"]["dispatchOrder"] == ["F-103"]
    assert contract(run(root, "maintenance.py", "unblock-digest", "--repo", "factory"))["outcome"] == "DIGEST"
    (root / "claims" / "x.json").write_text("{not json")
    assert contract(run(root, "maintenance.py", "janitor-scan"))["data"]["unreadableClaims"] == ["x.json"]
    failed = run(root, "maintenance.py", "warm", "--repo", "missing")
    assert (failed.returncode, contract(failed)["outcome"]) == (2, "FAILED")
