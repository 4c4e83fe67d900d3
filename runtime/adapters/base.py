"""The adapter interface: what every adapter gets and returns (docs/design.md §8).

An adapter is a function ``Execution → CommandOutcome``: it executes one claimed run's
plan, calling ``execution.while_waiting`` about every 0.2 s (the worker renews the lease
there; False means stop), and reports how the command ended. A run that cannot start
(no agent command, no scripted outcome) raises a ``lib.refusals.Refused`` whose code
becomes the run's reason: a finished failure, never retried. ``runtime.adapters.ADAPTERS``
maps the plan's ``adapter`` name to its function.
"""

import contextlib
import errno
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from runtime.models import Run
from runtime.registry import Definition


@dataclass(frozen=True)
class Execution:
    """One claimed run to execute: where its output goes, how long it may take (seconds),
    the stdout cap (bytes) and the definitions in force (the fake adapter reads them)."""

    run: Run
    run_dir: Path
    capture_name: str
    timeout_seconds: int
    stdout_cap: int
    while_waiting: Callable[[], bool]
    definitions: Mapping[str, Definition]


@dataclass(frozen=True)
class CommandOutcome:
    """How a command ended: ``exit_code`` (None when killed for its time-out) and its output.

    ``output_error`` says which capture file could not be written, and why (a full disk):
    the output was still read to its end, so the command was not held up by it.
    ``spawner_lost`` says that the command spawner died before the command was done (its
    command was killed with it, or never started): the runtime cut the attempt short."""

    exit_code: int | None
    timed_out: bool
    stdout_tail: str
    stdout_path: str
    not_found: str = ""
    aborted: bool = False
    output_error: str = ""
    spawner_lost: str = ""


def describe_os_error(path, error: OSError) -> str:
    """``<path>: [Errno 30 EROFS] Read-only file system`` — the path and the OS error, for a reason's detail."""
    name = errno.errorcode.get(error.errno, "") if error.errno is not None else ""
    code = f"[Errno {error.errno} {name}] " if error.errno is not None else ""
    return f"{error.filename or path}: {code}{error.strerror or error}"


class RunDirUnwritable(Exception):
    """The run's directory, or a file in it, could not be created or written before the
    command started: the attempt fails with reason ``runs_dir_unwritable`` (docs/design.md §8)."""

    code = "runs_dir_unwritable"

    def __init__(self, path, error: OSError):
        self.detail = describe_os_error(path, error)
        super().__init__(self.detail)


@contextlib.contextmanager
def preparing_run_dir(path) -> Iterator[None]:
    """Turn an OSError raised in the block (creating the run directory, opening or writing a
    file in it) into ``RunDirUnwritable`` naming ``path`` when the error names no file."""
    try:
        yield
    except OSError as exc:
        raise RunDirUnwritable(path, exc) from exc


class Adapter(Protocol):
    def __call__(self, execution: Execution) -> "CommandOutcome": ...


@dataclass(frozen=True)
class RunResult:
    """What an adapter reports when a command finished (not for time-outs or lost leases)."""

    outcome: str
    succeeded: bool
    reason: str = ""
    summary: str = ""
    data: dict | None = None
    exit_code: int | None = None
    stdout_path: str = ""
    extra: dict = field(default_factory=dict)
