"""A plan in words, for the person about to approve it (docs/design.md §7, §10).

A proposal's plan (``runtime.services.plans.render_plan``) is JSON; an operator
approving it reads, for every adapter, what will run: the command line of a command, the
report of a builtin, or for an agent its definition and the work it is handed — repo, pull
request, head SHA, ticket — then the whole input, whether it mutates, and its limits.
"""

import json
import shlex

#: Input fields an agent's work is named by, in the order a person reads them, with their labels.
WORK_FIELDS = (
    ("repo", "repository"),
    ("prNumber", "pull request"),
    ("prNumbers", "pull requests"),
    ("headSha", "head SHA"),
    ("ticket", "ticket"),
    ("key", "key"),
    ("slot", "slot"),
)


def _written(value) -> str:
    if isinstance(value, list):
        return ", ".join(_written(item) for item in value) or "(none)"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def what_runs(plan: dict) -> str:
    """One line: the command line (``{runId}``/``{runDir}`` as written: the worker fills
    them), the builtin report, or which agent. Pure."""
    adapter = plan.get("adapter")
    definition = plan.get("definition", "?")
    if adapter == "command" and plan.get("argv"):
        return shlex.join(plan["argv"])
    if adapter == "builtin":
        return f"the built-in {plan.get('builtin')} report, inside the worker ({definition})"
    if adapter == "fake":
        return (f"the demo's stand-in for the agent {definition} (FACTORY_FAKE_AGENTS): it plays a scripted "
                "outcome and changes nothing outside the runtime")
    if adapter == "agent":
        return f"the agent {definition}"
    return f"{adapter} {definition}"


def what_it_does(plan: dict, description: str) -> str:
    """The definition's ``description`` as a page shows it above the plan: for the demo's
    stand-in, what the real agent would do in production, and that the stand-in does not. Pure."""
    if not description or plan.get("adapter") != "fake":
        return description
    return (f"In production: {description} Here the demo's stand-in plays a scripted outcome and changes "
            "nothing outside the runtime.")


def describe_plan(plan: dict) -> list[tuple[str, str]]:
    """``[(label, text)]`` in reading order: what runs, the work's named fields, the input,
    whether it mutates, the time-out (seconds) and the attempt budget. Pure."""
    fake = plan.get("adapter") == "fake"
    lines = [("what runs", what_runs(plan))]
    payload = plan.get("input") or {}
    if plan.get("adapter") != "command":
        lines += [(label, _written(payload[field])) for field, label in WORK_FIELDS if field in payload]
    lines.append(("input", json.dumps(payload, ensure_ascii=False, sort_keys=True)))
    if not plan.get("mutating", True):
        mutates = "no: read-only"
    elif fake:
        mutates = ("yes, in production: the real agent changes things outside the runtime; the demo's stand-in "
                   "does not, but its run is handled as mutating (an interrupted attempt waits for a person)")
    else:
        mutates = "yes: it changes things outside the runtime; an interrupted attempt waits for a person"
    lines.append(("mutates", mutates))
    if plan.get("timeoutSeconds") is not None:
        lines.append(("time-out", f"{plan['timeoutSeconds']} s"))
    if plan.get("maxAttempts") is not None:
        lines.append(("attempts", str(plan["maxAttempts"])))
    return lines
