"""Both doors answer from a real ``runserve`` (gunicorn) as from the test client.

The server runs in its own process on a free loopback port, against its own SQLite file
migrated first, and is stopped with SIGTERM within a bounded time.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

import pytest

from lib.signing import sign
from tests.conftest import PROJECT_DIR
from tests.github import GITHUB, REPOS_YAML
from tests.processes import free_port

pytestmark = pytest.mark.process

MANAGE = str(PROJECT_DIR / "manage.py")
EVENTS_SECRET = "events-process-secret"
GITHUB_SECRET = "github-process-secret"
START_TIMEOUT_SECONDS = 40
STOP_TIMEOUT_SECONDS = 30


def send(url: str, body: bytes, headers: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def wait_until_listening(port: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[0]
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"runserve did not listen on port {port} within {START_TIMEOUT_SECONDS}s")


@pytest.fixture
def server(tmp_path):
    """A migrated SQLite runtime served by ``runserve`` on a free port; yields the base URL."""
    registry_dir, config_dir = tmp_path / "registry", tmp_path / "config"
    shutil.copytree(PROJECT_DIR / "registry", registry_dir)
    config_dir.mkdir()
    (config_dir / "repos.yaml").write_text(REPOS_YAML)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("FACTORY_", "DJANGO_", "DATABASE_"))},
        "DATABASE_URL": f"sqlite:///{tmp_path / 'factory.sqlite3'}",
        "DJANGO_SECRET_KEY": "intake-process-test-" + uuid.uuid4().hex,
        "FACTORY_REGISTRY_DIR": str(registry_dir),
        "FACTORY_CONFIG_DIR": str(config_dir),
        "FACTORY_RUNS_DIR": str(tmp_path / "runs"),
        "FACTORY_EVENTS_SECRET": EVENTS_SECRET,
        "FACTORY_GITHUB_WEBHOOK_SECRET": GITHUB_SECRET,
        "FACTORY_OPERATOR_PASSWORD": "operator-pass-123",
        "FACTORY_LOG_LEVEL": "WARNING",
    }
    subprocess.run([sys.executable, MANAGE, "migrate", "--no-input", "-v", "0"], env=env, cwd=PROJECT_DIR,
                   check=True, capture_output=True, timeout=120)
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, MANAGE, "runserve", "--bind", f"127.0.0.1:{port}", "--http-workers", "1",
         "--run-workers", "0", "--no-loop"],
        env=env, cwd=PROJECT_DIR, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        wait_until_listening(port, process)
        yield f"http://127.0.0.1:{port}"
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            output, _ = process.communicate(timeout=STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
            pytest.fail(f"runserve did not stop within {STOP_TIMEOUT_SECONDS}s after SIGTERM:\n{output}")
    assert process.returncode == 0, output


def test_signed_event_and_github_delivery_are_admitted_by_a_running_runserve(server):
    envelope = json.dumps({
        "schemaVersion": "factory.event/v1", "eventId": "process-test-1", "type": "factory.work.requested",
        "source": "bridge", "subject": "hello", "occurredAt": "2026-11-30T21:00:00Z",
        "correlationId": "process-test-1", "payload": {"repo": "hello"},
    }).encode()
    timestamp = str(int(time.time()))
    event_headers = {
        "Content-Type": "application/json",
        "X-Factory-Timestamp": timestamp,
        "X-Factory-Signature": sign(EVENTS_SECRET, f"{timestamp}.".encode() + envelope),
    }
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
