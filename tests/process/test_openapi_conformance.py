"""Schemathesis against a live ``runserve`` (docs/api.md "Checking the description"): every
operation of ``/api/schema/`` is sent generated requests — the doors' bodies signed with the
test secrets so they reach past the signature check — and no answer is a 5xx or a status,
header or body the description does not list."""

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from lib.signing import sign
from tests.conftest import PROJECT_DIR
from tests.processes import (
    EVENTS_SECRET,
    GITHUB_SECRET,
    MANAGE,
    STOP_TIMEOUT_SECONDS,
    free_port,
    wait_until_listening,
)

SHARED_TOKEN = "schemathesis-shared-token"
#: Generated requests per operation and mode (positive, negative): enough to try the refusals of
#: a route, few enough that the whole run (14 operations, a runserve started) stays near a minute.
EXAMPLES = 12
DOORS = ("/events", "/github")
#: The keyword arguments of requests.Request among the transport's serialisation of a case.
REQUEST_KEYS = ("method", "url", "headers", "params", "cookies", "data", "json", "files")


class Live:
    """A migrated runtime served by ``runserve``: its URL, an operator's own token, one session."""

    def __init__(self, root):
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("FACTORY_", "DJANGO_", "DATABASE_"))},
            "DATABASE_URL": f"sqlite:///{root / 'factory.sqlite3'}",
            "DJANGO_SECRET_KEY": "schemathesis-" + uuid.uuid4().hex,
            "FACTORY_CONFIG_DIR": str(root),
            "FACTORY_RUNS_DIR": str(root / "runs"),
            "FACTORY_EVENTS_SECRET": EVENTS_SECRET,
            "FACTORY_GITHUB_WEBHOOK_SECRET": GITHUB_SECRET,
            "FACTORY_API_TOKEN": SHARED_TOKEN,
            "FACTORY_OPERATOR_PASSWORD": "operator-pass-123",
            "FACTORY_LOG_LEVEL": "ERROR",
        }
        self.manage("migrate", "--no-input", "-v", "0")
        self.manage("ensure_operator")
        # Rows to decide and read: one slot-loop iteration admits the loops' ticks and plans them
        # (the watched reaper's a pending proposal, the heartbeat's a queued run).
        (root / "schedule.yaml").write_text("schedules:\n  reaper:\n    enabled: true\n")
        self.manage("schedule", "tick")
        self.person_token = self.manage("api_token", "create", "operator", "--label", "schemathesis").splitlines()[1]
        # A file, not a pipe: nothing reads the output until the end, and a full pipe would block
        # the server's logging (gunicorn's access line for every request) and so the server.
        self.log = root / "runserve.log"
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [sys.executable, MANAGE, "runserve", "--bind", f"127.0.0.1:{port}", "--http-workers", "1",
                 "--run-workers", "0", "--no-loop"],
                env=self.env, cwd=PROJECT_DIR, stdout=log, stderr=subprocess.STDOUT,
            )
        wait_until_listening(port, self.process, self.log)
        self.session = requests.Session()

    def manage(self, *argv) -> str:
        return subprocess.run([sys.executable, MANAGE, *argv], env=self.env, cwd=PROJECT_DIR, check=True,
                              capture_output=True, text=True, timeout=120).stdout

    def stop(self) -> str:
        self.session.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        return self.log.read_text()

    def credentials(self, path: str, method: str) -> dict:
        """A person's token where the route decides, the shared token for the reads, none on the doors."""
        if path in DOORS:
            return {}
        token = self.person_token if method == "POST" else SHARED_TOKEN
        return {"Authorization": f"Bearer {token}"}


def signed(prepared: requests.PreparedRequest, path: str, generated: dict) -> requests.PreparedRequest:
    """The doors' signatures over the body exactly as it will be sent (docs/intake.md), in
    the signature headers the case carries: a negative case that left one out is sent
    without it, and must be refused for it."""
    body = prepared.body or b""
    body = body.encode("utf-8") if isinstance(body, str) else body
    present = {name.lower() for name in generated}
    if path == "/events":
        timestamp = str(int(time.time()))
        if "x-factory-timestamp" in present:
            prepared.headers["X-Factory-Timestamp"] = timestamp
        if "x-factory-signature" in present:
            prepared.headers["X-Factory-Signature"] = sign(EVENTS_SECRET, timestamp.encode() + b"." + body)
    elif path == "/github" and "x-hub-signature-256" in present:
        prepared.headers["X-Hub-Signature-256"] = sign(GITHUB_SECRET, body)
    return prepared


@pytest.fixture
def live(tmp_path):
    runtime = Live(tmp_path)
    yield runtime
    output = runtime.stop()
    assert runtime.process.returncode == 0, output
    assert "Internal Server Error" not in output, output


def answer(live: Live, case, seen: dict) -> None:
    """Send one generated case, signed where it is a door's, and hold the answer to the description."""
    sent = live.credentials(case.path, case.method)
    kwargs = case.as_transport_kwargs(base_url=live.url, headers=sent)
    prepared = signed(live.session.prepare_request(requests.Request(
        **{key: kwargs[key] for key in REQUEST_KEYS if key in kwargs})), case.path, case.headers or {})
    response = live.session.send(prepared, timeout=10)
    seen.setdefault(case.path, set()).add(response.status_code)
    # A door refuses an envelope or delivery that fits its shape but not the registry (an
    # unregistered type, a payload its type's schema refuses, an unconfigured repo: 422, or
    # 200 ignored): what it admits depends on the registry, which the description cannot
    # carry. Every answer is still held to the statuses and bodies it lists.
    excluded = [positive_data_acceptance] if case.path in DOORS else []
    case.validate_response(response, headers=sent, excluded_checks=excluded,
                           transport_kwargs={"base_url": live.url, "headers": sent})


def test_every_answer_is_one_the_description_lists(live):
    schema = schemathesis.openapi.from_url(f"{live.url}/api/schema/?format=json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 19
    failures = []
    seen: dict[str, set[int]] = {}
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            @given(case=operation.as_strategy(generation_mode=mode))
            # No shrinking: a failure is reported as found, so the run's time stays bounded.
            @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                      phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
            def check(case):
                answer(live, case, seen)

            started = time.monotonic()
            try:
                check()
            except (Exception, BaseExceptionGroup) as exc:  # every operation is tried; all failures reported
                failures.append(f"{operation.method.upper()} {operation.path} ({mode}): {exc}")
            print(f"{operation.method.upper()} {operation.path} {mode}: {time.monotonic() - started:.1f} s, "
                  f"statuses {sorted(seen.get(operation.path, ()))}")
    assert failures == [], "\n\n".join(failures)
    # The signing reached past the signature check: the doors answered the bodies themselves.
    assert 422 in seen["/events"] and 422 in seen["/github"], seen
    assert not any(status >= 500 for statuses in seen.values() for status in statuses), seen
