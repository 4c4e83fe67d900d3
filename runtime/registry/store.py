"""The registry in force in this process, re-read when a file changes (DESIGN §4).

A bad change on disk keeps the last good registry in force and is reported through
``problems()`` (the doctor's ``registryInvalid``); the first load of a process has no
last good registry, so it raises. A change is noticed by a cheap fingerprint (path,
mtime, size, inode, ctime: ``files.snapshot``); a reload whose bytes did not change costs
only reading them, since ``load_registry`` memoises by content.

``refresh()`` looks at the files every time it is called (the slot loop, once an
iteration; the doctor and the commands, once each), unless the kernel said nothing
changed since its last look (``change_notice``: inotify; a look at least every 5 s).
``get_registry()`` — the hot paths: every intake request, admission, the worker, the web
pages and the API — refreshes at most once every ``CHANGE_CHECK_SECONDS`` per process, and
``current()`` never does (it only loads the first registry), so a request does not walk
the registry directory.

A process started by ``runserve`` takes its first registry from the one its supervisor
loaded (``share``: a pickle in a private directory, named by ``SHARED_VARIABLE``) when
the files' fingerprint is still the one it was loaded from, instead of loading the files
again: at 10,000 loops that is 0.1 s instead of 1 s in each of four processes starting
at once (docs/performance.md, start-up). The slot loop is started before the supervisor
has loaded anything, so that its own start overlaps the supervisor's: a process whose
shared file is named, in a directory that exists, but not written yet waits for it
(``SHARED_WAIT_SECONDS`` at most, and only while its supervisor lives). The file is
also the supervisor's go-ahead: it is written once the database is found migrated and
the registry good, and a child waits for it before it touches the database.
"""

import logging
import os
import pickle
import threading
import time
from pathlib import Path

from django.conf import settings

from lib.processes import SUPERVISOR_PID_VARIABLE

from .change_notice import ChangeNotice
from .files import snapshot
from .loader import load_registry
from .model import Registry, RegistryError, RegistryInvalid

logger = logging.getLogger(__name__)

#: How often ``get_registry`` looks for changed files, at most, in seconds: an edit takes
#: effect in the serving processes within about a second, as in the slot loop.
CHANGE_CHECK_SECONDS = 1.0
#: The environment variable naming the supervisor's shared registry file (``share``).
SHARED_VARIABLE = "FACTORY_REGISTRY_SHARED_FILE"
#: How long a process waits for its supervisor's shared file to be written, at most: the
#: supervisor's own checks and registry load come first (about 15 s at 100,000 loops).
SHARED_WAIT_SECONDS = 120.0
#: How often a waiting process looks for the file: 10 ms of start-up at most.
SHARED_POLL_SECONDS = 0.01


#: A directory whose mtime is this recent (against this host's clock) is listed again
#: rather than trusted: two changes within one tick of the file system's clock leave one
#: mtime, and a file added while the directory was being listed may be in neither.
LISTING_TRUST_SECONDS = 2.0
#: The last listing of each registry directory: ``((directory, mtime_ns), …)`` and its files.
_listings: dict[str, tuple[tuple, list[str]]] = {}


def watched_files(registry_dir: Path, config_dir: Path) -> list[str]:
    """The files whose change triggers a reload, as paths: every ``*.json`` file under the
    registry directory (sorted), then the overlay files. ``os.walk`` and plain strings, not
    ``Path.rglob``: the slot loop looks every iteration, and pathlib's walk was most of an
    idle iteration's time (docs/performance.md). The last listing is kept while every
    directory it walked has the mtime it had then, older than ``LISTING_TRUST_SECONDS``
    (an entry added, removed or renamed changes its directory's mtime): then only the
    directories are looked at, not listed."""
    listing = _listings.get(str(registry_dir))
    if listing is None or not _settled(listing[0]):
        directories, paths = [], []
        for root, dirs, files in os.walk(registry_dir):
            dirs.sort()
            directories.append((root, os.stat(root).st_mtime_ns))
            paths += [os.path.join(root, name) for name in files if name.endswith(".json")]
        paths.sort()
        listing = _listings[str(registry_dir)] = (tuple(directories), paths)
    return listing[1] + [os.path.join(config_dir, "schedule.yaml"), os.path.join(config_dir, "repos.yaml")]


def _listing_directories(registry_dir: str) -> list[str]:
    """The directories ``watched_files`` last listed under ``registry_dir``."""
    listing = _listings.get(registry_dir)
    return [] if listing is None else [directory for directory, _ in listing[0]]


def _settled(directories: tuple) -> bool:
    """Every directory still has its recorded mtime, older than ``LISTING_TRUST_SECONDS``."""
    trusted_before = time.time_ns() - int(LISTING_TRUST_SECONDS * 1e9)
    try:
        return bool(directories) and all(
            os.stat(directory).st_mtime_ns == mtime < trusted_before for directory, mtime in directories
        )
    except OSError:  # a directory gone
        return False


class RegistryStore:
    """Holds the last good registry and the errors of the newest bad one, per process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._registry: Registry | None = None
        self._fingerprint: tuple | None = None
        self._errors: list[RegistryError] = []
        # time.monotonic() of the last look at the files; -inf: never looked.
        self._checked_at = float("-inf")
        # The settings' two directories, as written, that ``_registry`` was last returned for.
        self._served_for: tuple | None = None
        self._notice = ChangeNotice()

    def _dirs(self) -> tuple[Path, Path]:
        return Path(settings.FACTORY_REGISTRY_DIR), Path(settings.FACTORY_CONFIG_DIR)

    def _fingerprint_now(self) -> tuple:
        registry_dir, config_dir = self._dirs()
        return (str(registry_dir), str(config_dir), snapshot(watched_files(registry_dir, config_dir)))

    def current(self) -> Registry:
        """The registry in force; loads it on first use (or when the settings name other
        directories). Raises RegistryInvalid if none is good. Does not look for changed files."""
        registry, directories = self._registry, (settings.FACTORY_REGISTRY_DIR, settings.FACTORY_CONFIG_DIR)
        if registry is not None and directories == self._served_for:
            # Every request asks: no lock and no Path while the settings name the same directories.
            return registry
        with self._lock:
            registry_dir, config_dir = self._dirs()
            if self._registry is None or (str(registry_dir), str(config_dir)) != (self._fingerprint or (None, None))[:2]:
                self._checked_at = time.monotonic()
                fingerprint = self._fingerprint_now()
                shared = _shared_registry(fingerprint)
                if shared is not None:
                    self._registry, self._fingerprint, self._errors = shared, fingerprint, []
                else:
                    self._load(fingerprint, keep_last_good=False)
            self._served_for = directories
            return self._registry

    def share(self, path: Path) -> None:
        """Write the registry in force, with the fingerprint of the files it came from, to
        ``path`` (created 0600; a process given it in ``SHARED_VARIABLE`` starts from it)."""
        with self._lock:
            data = pickle.dumps((self._fingerprint, self._registry), protocol=pickle.HIGHEST_PROTOCOL)
        # Written aside and renamed: a child waiting for the file never reads half of it.
        partial = f"{path}.partial"
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as out:
            out.write(data)
        os.replace(partial, path)

    def refresh(self) -> bool:
        """Re-read the files if they changed. Returns True when a new registry took effect.
        The files are looked at unless the kernel said nothing changed since the last look
        (``ChangeNotice``: a watch of their directories; at least every ``LOOK_ANYWAY_SECONDS``)."""
        with self._lock:
            self._checked_at = now = time.monotonic()
            directories = (str(settings.FACTORY_REGISTRY_DIR), str(settings.FACTORY_CONFIG_DIR))
            if self._registry is not None and self._notice.quiet(directories, now):
                return False
            fingerprint = self._fingerprint_now()
            found = [path for path, mtime, *_ in fingerprint[2] if isinstance(mtime, int)]
            self._notice.looked(directories, _listing_directories(fingerprint[0]), found, now)
            if fingerprint == self._fingerprint and self._registry is not None:
                return False
            return self._load(fingerprint, keep_last_good=self._registry is not None)

    def refresh_if_due(self, seconds: float | None = None) -> bool:
        """``refresh()`` when the last look at the files is ``seconds`` old (``CHANGE_CHECK_SECONDS``
        unless given); else nothing."""
        if time.monotonic() - self._checked_at < (CHANGE_CHECK_SECONDS if seconds is None else seconds):
            return False
        return self.refresh()

    def _load(self, fingerprint: tuple, keep_last_good: bool) -> bool:
        self._fingerprint = fingerprint
        registry_dir, config_dir = self._dirs()
        try:
            registry = load_registry(registry_dir, config_dir)
        except RegistryInvalid as exc:
            self._errors = exc.errors
            if not keep_last_good:
                self._registry = None
                raise
            logger.error(
                "registry on disk is invalid; the last good registry %s stays in force: %s",
                self._registry.digest[:12], exc,
                extra={"action": "registry_invalid"},
            )
            return False
        changed = self._registry is not None and registry != self._registry
        self._registry, self._errors = registry, []
        if changed:
            logger.info("registry reloaded: digest %s", registry.digest[:12], extra={"action": "registry_reloaded"})
        return True

    def problems(self) -> list[RegistryError]:
        """The errors of the newest load attempt; empty when the files on disk are good."""
        with self._lock:
            return list(self._errors)

    def reset(self) -> None:
        """Forget everything (tests that change the registry directories)."""
        with self._lock:
            self._registry, self._fingerprint, self._errors = None, None, []
            self._checked_at, self._served_for = float("-inf"), None
            self._notice.close()
            self._notice = ChangeNotice()


store = RegistryStore()


def _shared_registry(fingerprint: tuple) -> Registry | None:
    """The supervisor's registry (``RegistryStore.share``) when it was loaded from files with
    ``fingerprint``; None when there is none, it came from other files, or it cannot be read
    (then the files are loaded as usual)."""
    path = os.environ.get(SHARED_VARIABLE)
    if not path or not _written(path):
        return None
    try:
        with open(path, "rb") as shared:
            # Written by this process's own supervisor, 0600 in its private directory.
            loaded_from, registry = pickle.load(shared)
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as exc:
        logger.warning("the supervisor's registry could not be read (%s); loading the files", exc,
                       extra={"action": "registry_shared_unreadable"})
        return None
    if loaded_from != fingerprint or not isinstance(registry, Registry):
        return None
    return registry


def _written(path: str) -> bool:
    """Wait for the supervisor to write ``path`` (``share``) while its directory exists and
    the supervisor is this process's parent, ``SHARED_WAIT_SECONDS`` at most; True once
    the file is there. A directory already removed (the supervisor stopped) is not waited for."""
    supervisor = os.environ.get(SUPERVISOR_PID_VARIABLE, "")
    deadline = time.monotonic() + SHARED_WAIT_SECONDS
    while not os.path.exists(path):
        gone = supervisor.isdigit() and os.getppid() != int(supervisor)
        if gone or not os.path.isdir(os.path.dirname(path)) or time.monotonic() > deadline:
            return False
        time.sleep(SHARED_POLL_SECONDS)
    return True


def get_registry() -> Registry:
    """The registry in force in this process, re-read first when a file changed (looked at
    at most once every ``CHANGE_CHECK_SECONDS``).

    A bad change keeps the last good registry (``store.problems()`` says why); raises
    RegistryInvalid only when this process never had a good one.
    """
    store.refresh_if_due()
    return store.current()
