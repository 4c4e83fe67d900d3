"""The output contract ``factory.command-result/v1`` (docs/design.md §8)."""

import json

from lib.json_schema import validator_for

from .base import RunResult

CONTRACT = "factory.command-result/v1"


def last_nonempty_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()
    return ""


def result_from_output(
    stdout_tail: str, exit_code: int, *, contract_schema: dict, output_schema: dict | None, stdout_path: str = ""
) -> RunResult:
    """Read a finished command's result from its last non-empty stdout line and exit code.

    A line that is a JSON object naming ``schemaVersion`` is the result and must satisfy
    the contract (and the definition's ``outputSchema`` when it has one), else the run
    fails with ``output_contract_violation``. Without such a line the outcome is derived:
    ``SUCCEEDED`` for exit 0, ``FAILED`` with reason ``exit_code_<n>`` otherwise.
    """
    line = last_nonempty_line(stdout_tail)
    try:
        document = json.loads(line) if line.startswith("{") else None
    except json.JSONDecodeError:
        document = None
    if not isinstance(document, dict) or "schemaVersion" not in document:
        if exit_code == 0:
            return RunResult("SUCCEEDED", True, exit_code=0, stdout_path=stdout_path)
        return RunResult("FAILED", False, reason=f"exit_code_{exit_code}", exit_code=exit_code, stdout_path=stdout_path)
    problems = [e.message for e in validator_for(contract_schema).iter_errors(document)]
    if output_schema is not None and not problems:
        problems = [e.message for e in validator_for(output_schema).iter_errors(document)]
    if problems:
        return RunResult(
            "FAILED", False, reason="output_contract_violation", exit_code=exit_code, stdout_path=stdout_path,
            extra={"violations": problems[:10]},
        )
    return RunResult(
        document["outcome"],
        exit_code == 0,
        reason="" if exit_code == 0 else f"exit_code_{exit_code}",
        summary=document.get("summary", ""),
        data=document.get("data"),
        exit_code=exit_code,
        stdout_path=stdout_path,
    )
