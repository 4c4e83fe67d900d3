"""``runserve`` runs the notifier as a child when a channel is configured (docs/notifications.md):
a live server with no slot loop raises ``anomaly:slotLoopStale`` and the loopback webhook gets
it, signed, within seconds; SIGTERM stops the notifier with the rest."""

import json
import os
import signal
import subprocess
import sys
import time
import uuid

from lib.signing import sign
from tests.conftest import PROJECT_DIR
from tests.processes import MANAGE, STOP_TIMEOUT_SECONDS, free_port, wait_until_listening
from tests.receiver import Receiver

SECRET = "notify-process-secret"


def test_runserve_starts_the_notifier_which_posts_a_signed_alert(tmp_path):
    receiver = Receiver()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("FACTORY_", "DJANGO_", "DATABASE_"))},
        "DATABASE_URL": f"sqlite:///{tmp_path / 'factory.sqlite3'}",
        "DJANGO_SECRET_KEY": "notify-" + uuid.uuid4().hex,
        "FACTORY_CONFIG_DIR": str(tmp_path),
        "FACTORY_RUNS_DIR": str(tmp_path / "runs"),
        "FACTORY_OPERATOR_PASSWORD": "operator-pass-123",
        "FACTORY_NOTIFY_WEBHOOK_URL": receiver.url,
        "FACTORY_NOTIFY_SECRET": SECRET,
        "FACTORY_LOG_LEVEL": "WARNING",
    }
    subprocess.run([sys.executable, MANAGE, "migrate", "--no-input", "-v", "0"], env=env, cwd=PROJECT_DIR,
                   check=True, capture_output=True, timeout=120)
    port = free_port()
    log = tmp_path / "runserve.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, MANAGE, "runserve", "--bind", f"127.0.0.1:{port}", "--http-workers", "1",
             "--run-workers", "0", "--no-loop"], env=env, cwd=PROJECT_DIR, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until_listening(port, process)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not receiver.requests:
            time.sleep(0.2)
        assert receiver.requests, log.read_text()
        headers, body = receiver.requests[0]
        assert headers["X-Factory-Signature"] == sign(SECRET, headers["X-Factory-Timestamp"].encode() + b"." + body)
        message = json.loads(body)
        assert (message["schemaVersion"], message["state"]) == ("factory.notification/v1", "raised")
        assert message["alert"].startswith("anomaly:")
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        receiver.close()
    assert process.returncode == 0, log.read_text()
