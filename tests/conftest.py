"""Shared fixtures: an isolated registry and config per test, the personas of the inbox, the fake
agents that walk the chain, and the repos of the repo loops."""

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import Permission
from django.test import override_settings
from django.utils import timezone
from hypothesis import HealthCheck, Phase
from hypothesis import settings as hypothesis_settings

from runtime import clock
from runtime.registry import store

#: The suite's property tests check answers, not speed: the machines are shared and a draw or
#: an example can stall for seconds (docs/testing.md), so no time-based check fails a test.
hypothesis_settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
hypothesis_settings.load_profile("suite")
#: Mutation testing (bin/mutation) runs a property test once per mutant: the same examples
#: every time (derandomize, no example database), and no shrinking, which on a mutant that
#: fails a property took tens of seconds for a verdict the first failing example already gave.
hypothesis_settings.register_profile(
    "mutation", parent=hypothesis_settings.get_profile("suite"), derandomize=True, database=None,
    phases=[Phase.explicit, Phase.generate],
)
if os.environ.get("FACTORY_HYPOTHESIS_PROFILE"):
    hypothesis_settings.load_profile(os.environ["FACTORY_HYPOTHESIS_PROFILE"])

#: The suite resets its databases with flush (transactional tests), the journal included,
#: through the journal guard's one door (runtime/management/commands/flush.py).
django_settings.FACTORY_FLUSH_EMPTIES_JOURNAL = True

PROJECT_DIR = Path(django_settings.BASE_DIR)
SHARED_FIXTURES_DIR = PROJECT_DIR.parent / "shared" / "fixtures"
VENDORED_FIXTURES_DIR = PROJECT_DIR / "tests" / "fixtures"
#: The tracked kernel registry: every test reads it until it writes its own copy; none writes it.
KERNEL_DIR = PROJECT_DIR / "registry"
#: Stand-ins for external programs the runtime starts (the agent CLI).
STAND_INS_DIR = PROJECT_DIR / "tests" / "stand_ins"


def fixtures_dir() -> Path:
    """Where the real inputs are read from: the shared fixtures beside the checkout when
    present, else the byte-for-byte copy in tests/fixtures/ (a clone elsewhere, CI)."""
    return SHARED_FIXTURES_DIR if SHARED_FIXTURES_DIR.is_dir() else VENDORED_FIXTURES_DIR


FIXTURES_DIR = fixtures_dir()


def at(text: str) -> datetime:
    """A named instant: ``at("2026-11-30T21:00:00Z")``."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


class RegistryFiles:
    """The registry and config directories of one test, copied on write.

    Until the test writes (``write``, ``update``, ``write_config``) or asks for a path
    (``registry_dir``, ``config_dir``), the settings point at the tracked kernel in
    ``registry/`` and at the session's empty config directory, which no test writes; then
    at the test's own copy of the kernel and its own empty config directory.
    """

    def __init__(self, settings, root: Path, shared_config_dir: Path):
        self._settings = settings
        self._root = root
        self._registry_dir = settings.FACTORY_REGISTRY_DIR = KERNEL_DIR
        self._config_dir = settings.FACTORY_CONFIG_DIR = shared_config_dir
        self._copied = False

    @property
    def registry_dir(self) -> Path:
        self._copy_for_paths()
        return self._registry_dir

    @property
    def config_dir(self) -> Path:
        self._copy_for_paths()
        return self._config_dir

    def read(self, relative: str):
        return json.loads((self._registry_dir / relative).read_text())

    def write(self, relative: str, data) -> None:
        self._copy()
        path = self._registry_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2))
        store.reset()

    def update(self, relative: str, change) -> None:
        data = self.read(relative)
        change(data)
        self.write(relative, data)

    def write_config(self, name: str, text: str) -> None:
        self._copy()
        (self._config_dir / name).write_text(text)
        store.reset()

    def _copy(self) -> None:
        """Point the settings at the test's own copy of the kernel and its own empty config directory."""
        if self._copied:
            return
        self._registry_dir = self._settings.FACTORY_REGISTRY_DIR = self._root / "registry"
        self._config_dir = self._settings.FACTORY_CONFIG_DIR = self._root / "config"
        shutil.copytree(KERNEL_DIR, self._registry_dir)
        self._config_dir.mkdir()
        self._copied = True
        store.reset()

    def _copy_for_paths(self) -> None:
        """The copy, for a test that may edit files behind the store's back as an operator's editor
        would: the copy's registry is in force at once, the last good one such an edit falls back on,
        as if the test had had its own directories from the start."""
        if not self._copied:
            self._copy()
            store.current()


def tree(directory: Path) -> list[tuple[str, int, int]]:
    """Every entry under ``directory`` with its modification time and size."""
    entries = []
    for path in sorted(directory.rglob("*")):
        stat = path.stat()
        entries.append((str(path), stat.st_mtime_ns, stat.st_size))
    return entries


@pytest.fixture(scope="session")
def shared_config_dir(tmp_path_factory) -> Path:
    """The empty config directory of the tests that never write one (one per xdist worker)."""
    return tmp_path_factory.mktemp("shared-config")


@pytest.fixture(autouse=True)
def isolated_runtime(settings, tmp_path, shared_config_dir):
    """Every test reads the tracked kernel and an empty config dir, gets its own copy of both when it
    writes (``RegistryFiles``), and has its own runs dir. No test may change the shared directories."""
    kernel = tree(KERNEL_DIR)
    files = RegistryFiles(settings, tmp_path / "factory", shared_config_dir)
    settings.FACTORY_RUNS_DIR = tmp_path / "runs"
    store.reset()
    clock.forget_reading()
    yield files
    store.reset()
    assert tree(KERNEL_DIR) == kernel, "a test changed the tracked registry/"
    assert tree(shared_config_dir) == [], f"a test wrote into the shared config directory {shared_config_dir}"


@pytest.fixture
def registry_files(isolated_runtime) -> RegistryFiles:
    return isolated_runtime


@pytest.fixture(scope="session", autouse=True)
def fast_password_hashing():
    """The personas' passwords are hashed with MD5: the production hasher is slow on purpose, and no
    test here checks a password, only who is signed in."""
    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture
def approver(django_user_model):
    user = django_user_model.objects.create_user("alice", password="alice-pass-123", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="approve_proposal"))
    return user


@pytest.fixture
def viewer(django_user_model):
    return django_user_model.objects.create_user("victor", password="victor-pass-123", is_staff=True)


@pytest.fixture
def outsider(django_user_model):
    return django_user_model.objects.create_user("oscar", password="oscar-pass-123")


#: The head the chain's merge-scan finds green and merge-apply merges.
SHA = "3f786850e387550fdab836ed7e6dc881de23001b"
NO_HEARTBEAT = "schedules:\n  heartbeat:\n    enabled: false\n"
#: The §14 walk: the first work-scan of alpha dispatches DEMO-1, the next finds no work.
OUTCOMES = f"""
outcomes:
  work-scan@1:
    - when: {{repo: alpha}}
      results:
        - outcome: DISPATCH
          summary: DEMO-1 is ready and its paths are free
          data: {{ticket: DEMO-1, ownedPaths: [src/greeting.py]}}
        - outcome: NO_WORK
  dispatch@1:
    - results:
        - outcome: PR_OPEN
          summary: opened PR 7
          data: {{prNumber: 7, headSha: {SHA}}}
  merge-scan@1:
    - when: {{prNumbers: [7]}}
      results:
        - outcome: MERGE
          data: {{prNumber: 7, headSha: {SHA}, checks: green}}
    - results: [{{outcome: WAIT}}]
  merge-apply@1:
    - results: [{{outcome: MERGED, summary: merged PR 7 at {SHA[:7]}}}]
"""


@pytest.fixture
def fake_agents(settings, registry_files):
    """Agent definitions play ``fake-outcomes.yaml``; the heartbeat loop stays quiet."""
    settings.FACTORY_FAKE_AGENTS = True
    registry_files.write_config("schedule.yaml", NO_HEARTBEAT)
    registry_files.write_config("fake-outcomes.yaml", OUTCOMES)
    return registry_files


#: Three repos for the repo-loop templates: hello, factory (its own merge cadence) and notes (report-only).
REPOS = """
repos:
  - name: hello
    github: Codertocat/Hello-World
    base: master
  - name: factory
    github: example/factory
    base: main
    merge_every: 4h
  - name: notes
    github: example/notes
    base: main
    report_only: true
"""


@pytest.fixture
def repos(registry_files):
    """``REPOS`` as config/repos.yaml."""
    registry_files.write_config("repos.yaml", REPOS)
    return registry_files


@pytest.fixture
def host_clock_as_database_clock(monkeypatch):
    """``runtime.clock.database_now`` reads the host's clock, so that ``time_machine`` pins the
    instant of operations that read the one clock (commands, views): the database's own clock
    cannot be moved. Callers look the function up on the module (``clock.database_now()``).
    ``recent_database_now`` then reads it at every call, so a jump of the pinned clock is seen
    at once."""
    monkeypatch.setattr(clock, "database_now", timezone.now)
    monkeypatch.setattr(clock, "READING_MAX_AGE_SECONDS", 0.0)
