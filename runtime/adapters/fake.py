"""The fake adapter: scripted outcomes per definition, for the demo and tests only (docs/design.md §8).

The script is ``<FACTORY_CONFIG_DIR>/fake-outcomes.yaml`` (schema:
``registry/schemas/meta/fake-outcomes.schema.json``; format in ``docs/demo.md``)::

    outcomes:
      work-scan@1:                      # a definition, id@version
        - when: {repo: alpha}           # optional: input fields that must be equal
          results:                      # the Nth run this rule answers gets the Nth
            - outcome: DISPATCH         #   result; the last one repeats
              data: {ticket: DEMO-1, ownedPaths: [src/]}
            - outcome: NO_WORK
        - results: [{outcome: NO_WORK}] # no when: any input

A run takes the first rule whose ``when`` its input matches; N counts the earlier runs
(lower ids) of the same definition that took the same rule, so a retried attempt gets
the same result. The result goes through the output contract exactly as a command's
last stdout line would (``exitCode`` defaults to 0); ``seconds`` makes the fake take
that long, on the same lease and time-out path as a command.
"""

import json
import time
from collections.abc import Callable
from pathlib import Path

import yaml
from django.conf import settings

from lib.json_schema import Validator
from lib.refusals import Refused
from lib.strict_yaml import load_yaml
from runtime.models import Run

from .base import CommandOutcome, Execution, preparing_run_dir
from .command import POLL_SECONDS
from .result import CONTRACT

SCRIPT_NAME = "fake-outcomes.yaml"
SCHEMA_PATH = Path("schemas") / "meta" / "fake-outcomes.schema.json"


class FakeScriptError(Refused):
    """The script cannot answer this run: code ``fake_outcomes_invalid`` or ``fake_outcome_missing``."""


def script_path() -> Path:
    return Path(settings.FACTORY_CONFIG_DIR) / SCRIPT_NAME


def load_script(known_definitions) -> dict[str, list[dict]]:
    """Read and validate the script; returns ``definition → rules``.

    Raises FakeScriptError(``fake_outcomes_invalid``) for a missing file, bad YAML, a
    schema violation or a definition the registry does not have (a typo must not make
    a rule silently never apply).
    """
    path = script_path()
    try:
        document = load_yaml(path.read_text())
    except OSError as exc:
        raise FakeScriptError("fake_outcomes_invalid", f"{path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise FakeScriptError("fake_outcomes_invalid", f"{path}: not YAML: {exc}") from None
    schema = json.loads((Path(settings.FACTORY_REGISTRY_DIR) / SCHEMA_PATH).read_text())
    errors = sorted(Validator(schema).iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        where = "/".join(map(str, errors[0].absolute_path)) or "<top>"
        raise FakeScriptError("fake_outcomes_invalid", f"{path}: at {where}: {errors[0].message}")
    unknown = sorted(set(document["outcomes"]) - set(known_definitions))
    if unknown:
        raise FakeScriptError("fake_outcomes_invalid", f"{path}: no such definition: {', '.join(unknown)}")
    return document["outcomes"]


def _rule_for(rules: list[dict], run_input: dict) -> int | None:
    for index, rule in enumerate(rules):
        if all(run_input.get(field) == value for field, value in (rule.get("when") or {}).items()):
            return index
    return None


def scripted_preview(plan: dict, known_definitions) -> dict | None:
    """The dry run the script declares for the rule a plan's input takes (``preview``:
    ``{outcome, summary?, data?}``), or None: no valid script, no rule, or no preview in it.
    Never raises: a demo without a scripted preview shows none."""
    try:
        rules = load_script(known_definitions).get(plan.get("definition", "")) or []
    except FakeScriptError:
        return None
    chosen = _rule_for(rules, plan.get("input") or {})
    return rules[chosen].get("preview") if chosen is not None else None


def scripted_result(run: Run, known_definitions) -> dict:
    """The scripted result for ``run``: ``{outcome, summary?, data?, exitCode?, seconds?}``.

    Raises FakeScriptError: ``fake_outcomes_invalid`` (see ``load_script``) or
    ``fake_outcome_missing`` when no rule of the run's definition matches its input.
    """
    rules = load_script(known_definitions).get(run.definition) or []
    run_input = run.plan.get("input") or {}
    chosen = _rule_for(rules, run_input)
    if chosen is None:
        raise FakeScriptError(
            "fake_outcome_missing", f"{script_path()} has no rule of {run.definition} for input {json.dumps(run_input)}"
        )
    earlier = Run.objects.filter(definition=run.definition, id__lt=run.pk).values_list("plan", flat=True)
    n = sum(1 for plan in earlier if _rule_for(rules, plan.get("input") or {}) == chosen)
    results = rules[chosen]["results"]
    return results[min(n, len(results) - 1)]


def run_fake(
    scripted: dict, *, run_dir: Path, capture_name: str, timeout_seconds: int,
    while_waiting: Callable[[], bool] = lambda: True,
) -> CommandOutcome:
    """Play one scripted result as if a command had printed it as its last stdout line.

    Waits ``seconds`` (polling ``while_waiting`` like ``run_command``): past
    ``timeout_seconds`` the outcome is ``timed_out``, and when ``while_waiting`` returns
    False it is ``aborted``. The contract line is written to ``run_dir/capture_name``.
    """
    with preparing_run_dir(run_dir):
        run_dir.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    deadline = start + timeout_seconds
    done = start + float(scripted.get("seconds", 0))
    while time.monotonic() < done:
        if time.monotonic() >= deadline:
            return CommandOutcome(None, True, "", "")
        if not while_waiting():
            return CommandOutcome(None, False, "", "", aborted=True)
        time.sleep(min(POLL_SECONDS, max(0.0, done - time.monotonic())))
    line = {"schemaVersion": CONTRACT, "outcome": scripted["outcome"]}
    line.update({key: scripted[key] for key in ("summary", "data") if key in scripted})
    text = json.dumps(line, ensure_ascii=False) + "\n"
    stdout_path = run_dir / capture_name
    with preparing_run_dir(run_dir):
        stdout_path.write_text(text)
    return CommandOutcome(scripted.get("exitCode", 0), False, text, str(stdout_path))


def execute_fake(execution: Execution) -> CommandOutcome:
    """The ``fake`` adapter: play the run's scripted result (docs/design.md §8).

    Raises FakeScriptError when the script is invalid or has no rule for the run.
    """
    return run_fake(
        scripted_result(execution.run, execution.definitions), run_dir=execution.run_dir,
        capture_name=execution.capture_name, timeout_seconds=execution.timeout_seconds,
        while_waiting=execution.while_waiting,
    )
