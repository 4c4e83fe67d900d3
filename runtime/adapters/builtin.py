"""The builtin adapter: a report of the runtime's own, run inside the worker (docs/design.md §8).

A ``builtin`` definition names its report (``"builtin": "health"``; the names are
``runtime.registry.definitions.BUILTINS``). The report runs in the worker's process with
the worker's database connection, so it needs no command, no environment and no secret
handed to a child process. The layer that composes the runtime provides each report
(``ops`` registers ``health`` when its app is ready) through ``register_builtin``.

A report is ``report(now) → dict``: a ``factory.command-result/v1`` document. It is
written to the run's capture file as one JSON line and goes through the output contract
like a command's last stdout line, exit code 0.
"""

import json
from collections.abc import Callable
from datetime import datetime

from lib.refusals import Refused
from runtime.clock import database_now

from .base import CommandOutcome, Execution, preparing_run_dir

Report = Callable[[datetime], dict]

_reports: dict[str, Report] = {}


class BuiltinUnavailable(Refused):
    """No report is registered under the plan's ``builtin``: code ``builtin_unavailable``."""

    code_in_message = False

    def __init__(self, name):
        super().__init__("builtin_unavailable", f"no builtin report named {name!r} is provided in this process")


def register_builtin(name: str, report: Report) -> None:
    """Provide the report ``name`` (called once per process, by the app that owns it)."""
    _reports[name] = report


def execute_builtin(execution: Execution) -> CommandOutcome:
    """The ``builtin`` adapter: run the plan's report at the database's ``now`` and record its line.

    Raises BuiltinUnavailable when no report of that name is registered, RunDirUnwritable
    when the run's directory or capture file cannot be created or written.
    """
    name = execution.run.plan.get("builtin")
    report = _reports.get(name)
    if report is None:
        raise BuiltinUnavailable(name)
    document = report(database_now())
    text = json.dumps(document, ensure_ascii=False) + "\n"
    stdout_path = execution.run_dir / execution.capture_name
    with preparing_run_dir(execution.run_dir):
        execution.run_dir.mkdir(parents=True, exist_ok=True)
        stdout_path.write_text(text)
    return CommandOutcome(0, False, text, str(stdout_path))
