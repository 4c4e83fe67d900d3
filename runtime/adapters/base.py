"""The adapter interface: what every adapter gets and returns (docs/design.md §8).

An adapter is a function ``Execution → CommandOutcome``: it executes one claimed run's
plan, calling ``execution.while_waiting`` about every 0.2 s (the worker renews the lease
there; False means stop), and reports how the command ended. A run that cannot start
(no agent command, no scripted outcome) raises a ``lib.refusals.Refused`` whose code
becomes the run's reason: a finished failure, never retried. ``runtime.adapters.ADAPTERS``
maps the plan's ``adapter`` name to its function.
"""

from collections.abc import Callable, Mapping
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
    """How a command ended: ``exit_code`` (None when killed for its time-out) and its output."""

    exit_code: int | None
    timed_out: bool
    stdout_tail: str
    stdout_path: str
    not_found: str = ""
    aborted: bool = False


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
