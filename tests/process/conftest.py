"""The real-process tests' runtimes: ``runtime`` (its own directories and database, its processes
killed after the test) and ``server`` (a migrated SQLite runtime served by ``runserve``, through
``serving``), with the helpers the tests that use ``server`` share; and ``browser``, the headless
Chromium of the browser tests."""

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import uuid

import pytest

from lib.spawner_client import Spawner
from tests.browsers import CHROMIUM, CHROMIUM_ARGS, require_browser
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


@contextlib.contextmanager
def serving(root, *, run_workers: int = 0, http_workers: int = 1, config: dict[str, str] | None = None,
            loop: bool = False, **env):
    """A migrated SQLite runtime under ``root`` served by ``runserve --no-loop`` (with ``loop``: with its slot loop) on a free port,
    with ``http_workers`` HTTP workers and ``run_workers`` run workers, the files of ``config`` in its config directory (repos.yaml
    defaults to ``REPOS_YAML``) and ``env`` added to its environment. Yields ``(base URL, env)``:
    ``env`` runs ``manage.py`` against the same runtime. Stops it with SIGTERM and checks it exits 0."""
    registry_dir, config_dir = root / "registry", root / "config"
    shutil.copytree(PROJECT_DIR / "registry", registry_dir)
    config_dir.mkdir()
    for name, text in {"repos.yaml": REPOS_YAML, **(config or {})}.items():
        (config_dir / name).write_text(text)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("FACTORY_", "DJANGO_", "DATABASE_"))},
        "DATABASE_URL": f"sqlite:///{root / 'factory.sqlite3'}",
        "DJANGO_SECRET_KEY": "intake-process-test-" + uuid.uuid4().hex,
        "FACTORY_REGISTRY_DIR": str(registry_dir),
        "FACTORY_CONFIG_DIR": str(config_dir),
        "FACTORY_RUNS_DIR": str(root / "runs"),
        "FACTORY_EVENTS_SECRET": EVENTS_SECRET,
        "FACTORY_GITHUB_WEBHOOK_SECRET": GITHUB_SECRET,
        "FACTORY_OPERATOR_PASSWORD": "operator-pass-123",
        "FACTORY_LOG_LEVEL": "WARNING",
        **env,
    }
    subprocess.run([sys.executable, MANAGE, "migrate", "--no-input", "-v", "0"], env=env, cwd=PROJECT_DIR,
                   check=True, capture_output=True, timeout=120)
    port = free_port()
    # Its output goes to a file, not a pipe: every request writes an access-log line, and a
    # pipe nobody reads fills after a few hundred of them and blocks every HTTP thread.
    log_path = root / "runserve.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, MANAGE, "runserve", "--bind", f"127.0.0.1:{port}", "--http-workers", str(http_workers),
             "--run-workers", str(run_workers), *([] if loop else ["--no-loop"])],
            env=env, cwd=PROJECT_DIR, stdout=log, stderr=subprocess.STDOUT, text=True,
        )
    try:
        wait_until_listening(port, process, log_path)
        yield f"http://127.0.0.1:{port}", env
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            pytest.fail(f"runserve did not stop within {STOP_TIMEOUT_SECONDS}s after SIGTERM:\n{log_path.read_text()}")
    assert process.returncode == 0, log_path.read_text()


@contextlib.contextmanager
def serving_example_factory(root, schedule_overlay: str, *, run_workers: int):
    """``serving`` with a copy of the example factory root (``FACTORY_ROOT``) and
    ``schedule_overlay`` as config/schedule.yaml. Yields ``(base URL, manage)``: ``manage(*args,
    timeout=60)`` runs ``manage.py`` against that runtime and returns its standard output."""
    shutil.copytree(PROJECT_DIR / "examples" / "factory", root / "factory")
    with serving(root, run_workers=run_workers, config={"schedule.yaml": schedule_overlay},
                 FACTORY_ROOT=str(root / "factory")) as (url, env):
        def manage(*args, timeout=60):
            return subprocess.run([sys.executable, MANAGE, *args], env=env, cwd=PROJECT_DIR, check=True,
                                  capture_output=True, text=True, timeout=timeout).stdout

        yield url, manage


@pytest.fixture
def server(tmp_path):
    """A migrated SQLite runtime served by ``runserve`` on a free port; yields the base URL."""
    with serving(tmp_path) as (url, _):
        yield url


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for a test module (``tests.browsers``): skips when Chromium or
    Playwright is missing, except under ``CI=true``, where that fails the run."""
    require_browser(ci=os.environ.get("CI") == "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def spawner():
    """A command spawner of the test's own (lib/spawner_client.py), closed after it."""
    spawner = Spawner()
    yield spawner
    spawner.close()
