"""The agent adapter: an external CLI agent, given the run's plan on stdin (docs/design.md §8).

``FACTORY_AGENT_COMMAND`` is split like a shell would (``shlex``, no shell runs it) and
executed by ``run_command`` — same minimal environment, process group, time-out, lease
renewal and captured stdout as the command adapter. Its stdin is the plan as one JSON
document (UTF-8): ``{definition, adapter, argv, argvTemplate, argvValues, builtin,
captureStdout, input, mutating, timeoutSeconds, maxAttempts, eventId, registryDigest}``
plus ``runId``. Its result is
read from its last non-empty stdout line by the same ``factory.command-result/v1``
contract and the definition's output schema.
"""

import json
import shlex

from django.conf import settings

from lib.refusals import Refused

from .base import CommandOutcome, Execution
from .command import run_command


class AgentUnavailable(Refused):
    """``FACTORY_AGENT_COMMAND`` is unset or cannot be split: code ``agent_command_unset``."""

    code_in_message = False

    def __init__(self, detail: str):
        super().__init__("agent_command_unset", detail)


def agent_argv() -> list[str]:
    """The agent command as argv. Raises AgentUnavailable when it is unset or malformed."""
    text = settings.FACTORY_AGENT_COMMAND.strip()
    if not text:
        raise AgentUnavailable("FACTORY_AGENT_COMMAND is not set: this runtime has no agent to run")
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise AgentUnavailable(f"FACTORY_AGENT_COMMAND cannot be split into arguments: {exc}") from None


def agent_stdin(plan: dict, run_id: int) -> bytes:
    """The agent's input: the plan as JSON with the run's id."""
    return json.dumps({**plan, "runId": run_id}, ensure_ascii=False).encode("utf-8")


def execute_agent(execution: Execution) -> CommandOutcome:
    """The ``agent`` adapter: run ``FACTORY_AGENT_COMMAND`` with the plan on stdin (docs/design.md §8).

    Raises AgentUnavailable when no agent command is set.
    """
    run = execution.run
    return run_command(
        agent_argv(), run_id=run.pk, run_dir=execution.run_dir, capture_name=execution.capture_name,
        timeout_seconds=execution.timeout_seconds, stdout_cap=execution.stdout_cap,
        while_waiting=execution.while_waiting, stdin_data=agent_stdin(run.plan, run.pk),
    )
