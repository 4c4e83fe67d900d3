"""``runserve`` listens before it starts anything, and says "serving on" when a client can connect
(lib.listen_address; docs/design.md §10, docs/production.md §9)."""

import json
import os
import selectors
import signal
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.processes import STOP_TIMEOUT_SECONDS, command_line, free_port, stop, wait_until_listening

pytestmark = [pytest.mark.process, pytest.mark.django_db]


def lines_until(process, marker: str, *, timeout: float = 40) -> list[str]:
    """The lines ``process`` writes up to the first holding ``marker``; fails after ``timeout`` seconds."""
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        if selector.select(timeout=0.5):
            line = process.stdout.readline()
            assert line, f"runserve exited before saying {marker!r}:\n{''.join(seen)}"
            seen.append(line)
            if marker in line:
                return seen
    raise AssertionError(f"runserve did not say {marker!r} within {timeout}s:\n{''.join(seen)}")


def test_a_request_made_as_soon_as_serving_on_is_said_is_answered_not_refused(runtime):
    port = free_port()
    served = runtime.start("runserve", "--bind", f"127.0.0.1:{port}", "--http-workers", "1", "--run-workers", "0",
                           "--no-loop", FACTORY_LOG_LEVEL="INFO", FACTORY_LOG_FORMAT="json")
    lines = lines_until(served, "serving on")
    # At once: gunicorn may still be loading the application; the request waits for it.
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=30)
        status = 200
    except urllib.error.HTTPError as exc:
        status = exc.code
    assert status == 401  # /status wants a token: an answer from the runtime, not a refused connection
    serving = json.loads(lines[-1])
    assert (serving["logger"], serving["level"], serving["action"], serving["bind"]) == (
        "ops.runserve", "INFO", "runtime_serving", f"127.0.0.1:{port}",
    )
    code, output = stop(served)
    assert code == 0, output
    documents = [json.loads(line) for line in [*lines, *output.splitlines()]]
    assert [d["action"] for d in documents if d["logger"] == "ops.runserve"] == [
        "operator_created", "registry_loaded", "runtime_serving", "runtime_stopped",
    ]
    (created,) = [d for d in documents if d.get("action") == "operator_created"]
    assert (created["level"], created["message"]) == (
        "WARNING", "operator account 'operator' created with the password from FACTORY_OPERATOR_PASSWORD",
    )


def test_a_child_that_dies_is_an_error_record_naming_it_and_the_runtime_stops(runtime):
    port = free_port()
    served = runtime.start("runserve", "--bind", f"127.0.0.1:{port}", "--http-workers", "1", "--run-workers", "0",
                           "--no-loop", FACTORY_LOG_FORMAT="json")
    wait_until_listening(port, served)
    children = (Path("/proc") / str(served.pid) / "task" / str(served.pid) / "children").read_text().split()
    (gunicorn,) = [int(pid) for pid in children if command_line(int(pid)).startswith("gunicorn: master")]
    os.kill(gunicorn, signal.SIGKILL)
    code, output = stop(served, sig=0, timeout=STOP_TIMEOUT_SECONDS)  # 0: no signal, only its end
    assert code == 1, output
    documents = [json.loads(line) for line in output.splitlines()]
    exited = [d for d in documents if d.get("action") == "child_exited"]
    assert [(d["logger"], d["level"], d["child"], d["status"], d["message"]) for d in exited] == [
        ("ops.runserve", "ERROR", "http", -9, "child http exited with status -9; stopping the runtime"),
    ]
    # FACTORY_LOG_LEVEL=WARNING (the test runtime's) holds for gunicorn's own lines too; the
    # access log is written whatever the level (docs/production.md §9).
    info = [(d["logger"], d["message"]) for d in documents if d["level"] == "INFO"]
    assert {logger for logger, _ in info} == {"gunicorn.access"}, info


def connectable(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def test_a_stop_during_the_start_stops_without_saying_serving_on(runtime):
    port = free_port()
    served = runtime.start("runserve", "--bind", f"127.0.0.1:{port}", "--http-workers", "1", "--run-workers", "0",
                           "--no-loop", FACTORY_LOG_LEVEL="INFO")
    # The address listens once the stop handlers are in, and a start has its checks, the
    # operator account, the registry and the URLs' checks still to do (half a second of CPU)
    # before it says "serving on": a stop sent at the first connection lands in the start.
    deadline = time.monotonic() + 40
    while not connectable(port):
        assert served.poll() is None and time.monotonic() < deadline, "runserve never listened"
        time.sleep(0.005)
    served.send_signal(signal.SIGTERM)
    code, output = stop(served, sig=0)
    assert code == 0, output
    said = output
    assert ("serving on" in said, "runtime stopped action=runtime_stopped" in said) == (False, True), said
