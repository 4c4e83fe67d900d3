"""The intake doors' answers, counted by the HTTP workers that give them (docs/production.md, "Metrics").

``factory_intake_answers_total{door, status}`` counts every answer of ``POST /events`` and
``POST /github`` by HTTP status (202 admitted, 200 duplicate or ignored, 401, 408, 422, …),
as it leaves Django (``factory_site.door_route``; ``IntakeAnswersMiddleware`` for an answer
that did not come that way). Answers gunicorn gives itself before
Django runs (a malformed request line, a head that never arrived) are not counted.

gunicorn runs several worker processes, and a scrape reaches one of them: under ``runserve``
each worker writes its counts to prometheus_client's multiprocess files in
``FACTORY_METRICS_DIR/http-<bind>/`` (``PROMETHEUS_MULTIPROC_DIR``, set by runserve for
gunicorn, emptied at its start and removed at its stop), and ``/metrics`` sums the files of
every worker, past ones included. So the counter is per ``runserve``: it starts at 0 when that runserve starts
(a counter reset to Prometheus), and several runserves are summed with
``sum without (instance)``. Outside runserve (tests, a development server) the counter is
the process's own.
"""

import fcntl
import os
import re
import shutil
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.multiprocess import MultiProcessCollector

#: The doors whose answers are counted, by path.
DOORS = {"/events": "events", "/github": "github"}
#: prometheus_client reads this variable when it is imported (runserve sets it for gunicorn).
MULTIPROCESS_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"

#: The process's own registry: in multiprocess mode the values live in the files instead.
_registry = CollectorRegistry()
INTAKE_ANSWERS = Counter(
    "factory_intake_answers", "Answers of the intake doors, by door and HTTP status.",
    labelnames=["door", "status"], registry=_registry,
)


#: The counter's child of each (path, status) seen so far: ``labels`` checks and locks on every call.
_children: dict[tuple[str, int], object] = {}


def count_answer(path: str, status: int) -> None:
    """Count one answer of the door at ``path``; any other path is not a door and is ignored."""
    child = _children.get((path, status))
    if child is None:
        door = DOORS.get(path)
        if door is None:
            return
        child = _children.setdefault((path, status), INTAKE_ANSWERS.labels(door=door, status=str(status)))
    child.inc()


class IntakeAnswersMiddleware:
    """Counts each answer of the intake doors once it is made (``count_answer``)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        count_answer(request.path, response.status_code)
        return response


def multiprocess_dir() -> str | None:
    """The multiprocess directory this process counts into, or None (counting in memory)."""
    return os.environ.get(MULTIPROCESS_VARIABLE) or None


def intake_registry() -> CollectorRegistry:
    """What a scrape reports of the intake counter: every worker's files, or this process's own."""
    directory = multiprocess_dir()
    if directory is None:
        return _registry
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=directory)
    return registry


class MultiprocessDirInUse(Exception):
    """Another runserve on this address holds the directory: it is left as it is."""


def prepare_multiprocess_dir(root: Path, bind: str) -> Path:
    """An empty directory for the HTTP workers of the runserve bound to ``bind``
    (``HOST:PORT``): ``<root>/http-<bind>``, every run of characters other than letters and
    digits a dash (``http-127-0-0-1-7522``), its old files (of an earlier runserve on that
    address) removed. This process holds ``<directory>.lock`` (``flock``) until
    ``release_multiprocess_dir`` or its exit; raises ``MultiprocessDirInUse``, touching
    nothing, when another process holds it — removing the directory under a running
    runserve's workers made each of its door answers a 500."""
    directory = root / ("http-" + re.sub(r"[^A-Za-z0-9]+", "-", bind).strip("-"))
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    held = os.open(f"{directory}.lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(held)
        raise MultiprocessDirInUse(f"{directory} is in use by another runserve on {bind}") from None
    _held[directory] = held
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(mode=0o700)
    return directory


def release_multiprocess_dir(directory: Path) -> None:
    """Remove ``directory`` (the counters die with their runserve) and give its lock back."""
    shutil.rmtree(directory, ignore_errors=True)
    held = _held.pop(directory, None)
    if held is not None:
        # Removed while still held, so a runserve starting now either finds it held or makes a new one.
        Path(f"{directory}.lock").unlink(missing_ok=True)
        os.close(held)


#: The lock descriptor of each directory this process prepared.
_held: dict[Path, int] = {}
