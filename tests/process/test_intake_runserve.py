"""Both doors answer from a real ``runserve`` (gunicorn) as from the test client.

The server runs in its own process on a free loopback port, against its own SQLite file
migrated first (the ``server`` fixture, tests/process/conftest.py), and is stopped with
SIGTERM within a bounded time.
"""

import json
import subprocess
import sys
import time

import pytest

from lib.signing import sign
from tests.conftest import PROJECT_DIR
from tests.github import GITHUB
from tests.process.conftest import serving
from tests.processes import EVENTS_SECRET, GITHUB_SECRET, send

pytestmark = pytest.mark.process


def signed_event(event_id: str) -> tuple[bytes, dict]:
    """A ``factory.work.requested`` envelope with ``event_id`` and its signed headers for ``/events``."""
    envelope = json.dumps({
        "schemaVersion": "factory.event/v1", "eventId": event_id, "type": "factory.work.requested",
        "source": "bridge", "subject": "hello", "occurredAt": "2026-11-30T21:00:00Z",
        "correlationId": event_id, "payload": {"repo": "hello"},
    }).encode()
    timestamp = str(int(time.time()))
    return envelope, {
        "Content-Type": "application/json",
        "X-Factory-Timestamp": timestamp,
        "X-Factory-Signature": sign(EVENTS_SECRET, f"{timestamp}.".encode() + envelope),
    }


def test_signed_event_and_github_delivery_are_admitted_by_a_running_runserve(server):
    envelope, event_headers = signed_event("process-test-1")
    assert send(f"{server}/events", envelope, event_headers) == (
        202, {"admitted": True, "duplicate": False, "eventId": "process-test-1"},
    )
    assert send(f"{server}/events", envelope, event_headers)[0] == 200

    body = (GITHUB / "pull_request.opened.json").read_bytes()
    github_headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": "pull_request",
        "X-GitHub-Delivery": "process-delivery-1",
        "X-Hub-Signature-256": sign(GITHUB_SECRET, body),
        "User-Agent": "GitHub-Hookshot/test",
    }
    assert send(f"{server}/github", body, github_headers) == (
        202, {"admitted": True, "duplicate": False, "eventId": "process-delivery-1"},
    )
    assert send(f"{server}/github", body, github_headers) == (
        200, {"admitted": False, "duplicate": True, "eventId": "process-delivery-1"},
    )
    unsigned = {**github_headers, "X-Hub-Signature-256": sign("wrong", body)}
    assert send(f"{server}/github", body, unsigned)[0] == 401
    big = body + b" " * (5 * 1024 * 1024)  # over Django's 2.5 MB in-memory limit, under GitHub's cap
    assert send(f"{server}/github", big, {**github_headers, "X-Hub-Signature-256": sign(GITHUB_SECRET, big)})[0] == 200


def test_a_second_runserve_on_the_address_is_refused_and_the_first_goes_on_answering(tmp_path):
    with serving(tmp_path / "first") as (url, env):
        second = subprocess.run(
            [sys.executable, str(PROJECT_DIR / "manage.py"), "runserve", "--bind", url.removeprefix("http://"),
             "--no-loop", "--run-workers", "0"],
            env=env, cwd=PROJECT_DIR, capture_output=True, text=True, timeout=60,
        )
        assert (second.returncode, second.stderr.strip().splitlines()[-1]) == (
            1, f"CommandError: {url.removeprefix('http://')} is in use: another runserve (or another server) "
               "listens there; nothing was started",
        )
        assert send(f"{url}/events", *signed_event("after-second-start")) == (
            202, {"admitted": True, "duplicate": False, "eventId": "after-second-start"},
        )
