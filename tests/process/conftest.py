"""The real-process tests' runtimes: ``runtime`` (its own directories and database, its processes
killed after the test) and ``server`` (a migrated SQLite runtime served by ``runserve``), with the
helpers the tests that use ``server`` share."""

import os
import shutil
import signal
import subprocess
import sys
import uuid

import pytest

from tests.conftest import PROJECT_DIR
from tests.github import REPOS_YAML
from tests.processes import (
    EVENTS_SECRET,
    GITHUB_SECRET,
    MANAGE,
    STOP_TIMEOUT_SECONDS,
    ProcessRuntime,
    free_port,
    wait_until_listening,
)


@pytest.fixture
def runtime(tmp_path):
    process_runtime = ProcessRuntime(tmp_path / "proc")
    yield process_runtime
    process_runtime.close()


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
