"""A proposal's plan: what will run, with what, under which registry (docs/design.md §7, §8).

``render_plan`` renders it from the event and its definition; the planner (``planning``)
stores it on the proposal and, when approved, on the run. ``plan_json`` is its JSON text as
a JSON column stores it on SQLite, built from a form kept per definition, registry digest,
adapter and argv: a chunk of 500 ticks has a few distinct plans but for each event's input
and eventId, and
encoding each plan whole, once for the proposal and once more for the run, was a tenth of
a planning chunk's client time (docs/performance.md, "Planning").
"""

import functools
import json
import sys

from django.conf import settings

from lib.refusals import Refused
from runtime.models import Event
from runtime.registry import Definition, Registry
from runtime.registry.model import PLACEHOLDER, fill_argv

from .bulk_rows import JSONText

#: Filled only when the run exists (by the worker); they stay as written in a proposal's plan.
RUN_TIME_PLACEHOLDERS = ("runId", "runDir")


class PlanRenderError(Refused):
    """A command template could not be filled from the event: code ``plan_render_failed``."""

    code_in_message = False

    def __init__(self, detail: str):
        super().__init__("plan_render_failed", detail)


def plan_time_values() -> dict[str, str]:
    """What ``{factoryRoot}``, ``{python}`` and ``{manage}`` stand for in this runtime."""
    return {
        "factoryRoot": str(settings.FACTORY_ROOT),
        "python": sys.executable,
        "manage": str(settings.BASE_DIR / "manage.py"),
    }


def argv_values(definition: Definition, payload: dict) -> dict[str, str]:
    """What each plan-time placeholder of the command template stands for (docs/design.md §8).

    ``{factoryRoot}``, ``{python}``, ``{manage}`` and, for non-mutating definitions only,
    ``{payload.<field>}``; ``{runId}``/``{runDir}`` are left for the worker, which fills
    them and these in one pass over the template. Raises PlanRenderError when a payload
    field is missing or not a scalar.
    """
    runtime = plan_time_values()
    values = {}
    for name in plan_time_names(definition.command):
        if name in runtime:
            values[name] = runtime[name]
            continue
        field = name.removeprefix("payload.")
        value = payload.get(field)
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise PlanRenderError(f"payload field {field!r} is missing or not a string or number")
        values[name] = str(value)
    return values


@functools.lru_cache(maxsize=1024)
def plan_time_names(command: tuple[str, ...]) -> tuple[str, ...]:
    """The placeholders of ``command`` planning fills, each once, in the template's order
    (``{runId}``/``{runDir}`` left out): read once per template, not once per event. Pure."""
    names = (name for arg in command for name in PLACEHOLDER.findall(arg) if name not in RUN_TIME_PLACEHOLDERS)
    return tuple(dict.fromkeys(names))


def filled_argv(command: tuple[str, ...], values: dict[str, str]) -> list[str]:
    """``fill_argv(command, values)``; remembered for a template that names no payload field,
    whose argv is the same for every event of its definition (a new list each call). Pure."""
    if any(name.startswith("payload.") for name in plan_time_names(command)):
        return fill_argv(command, values)
    return list(_filled_without_payload(command, tuple(values.items())))


@functools.lru_cache(maxsize=256)
def _filled_without_payload(command: tuple[str, ...], values: tuple) -> tuple[str, ...]:
    return tuple(fill_argv(command, dict(values)))


def plan_adapter(definition: Definition) -> str:
    """The adapter a plan names: the definition's, except that ``FACTORY_FAKE_AGENTS`` (the
    demo, tests) plays every ``agent`` definition with the ``fake`` adapter, in plain sight
    on the proposal (docs/design.md §8)."""
    if settings.FACTORY_FAKE_AGENTS and definition.adapter == "agent":
        return "fake"
    return definition.adapter


def render_plan(definition: Definition, event: Event, registry: Registry) -> dict:
    """The plan a proposal carries and a run executes: what will run, with what, under which registry.

    ``argv`` is what the command will run, ``{runId}``/``{runDir}`` as written; the worker
    runs ``argvTemplate`` filled in one pass with ``argvValues`` and those two, so a payload
    value is never expanded and what runs is ``argv`` with the run's id and directory.
    """
    values = argv_values(definition, event.payload) if definition.command is not None else None
    return {
        "definition": definition.ref,
        "adapter": plan_adapter(definition),
        "argv": filled_argv(definition.command, values) if values is not None else None,
        "argvTemplate": list(definition.command) if values is not None else None,
        "argvValues": values,
        "builtin": definition.builtin,
        "captureStdout": definition.capture_stdout,
        "input": event.payload,
        "mutating": definition.mutating,
        "timeoutSeconds": definition.timeout_seconds,
        "maxAttempts": definition.max_attempts,
        "eventId": event.uid,
        "registryDigest": registry.digest,
    }


#: The plan's entries that differ from event to event of one definition and argv.
PER_EVENT = ("input", "eventId")
#: Stands for each ``PER_EVENT`` entry in a form's text; a control character no plan holds.
_MARK = "\x00per-event\x00"
#: Forms kept: a registry's definitions times the distinct argvs a chunk renders.
FORMS_KEPT = 1024
_forms: dict[tuple, tuple[str, str, str]] = {}
_encode = json.JSONEncoder().encode
_encode_text = json.encoder.encode_basestring_ascii


def plan_json(plan: dict) -> JSONText:
    """``json.dumps(plan)`` of a plan ``render_plan`` rendered, as ``bulk_rows.insert_rows``
    stores a JSON column on SQLite: the form of the entries its definition, registry and
    runtime fix, kept per definition, registry digest, adapter and argv, with its
    ``PER_EVENT`` entries encoded into it (``json.dumps`` of a document is the same text
    whole or in parts). A plan whose argv values are not text is encoded whole."""
    argv, values = plan["argv"], plan["argvValues"]
    try:
        key = (plan["definition"], plan["registryDigest"], plan["adapter"], len(plan),
               None if argv is None else tuple(argv), None if values is None else tuple(values.items()))
        form = _forms.get(key) or _form(key, plan)
    except TypeError:
        return JSONText(_encode(plan))
    event_id = plan["eventId"]
    return JSONText(form[0] + _encode(plan["input"]) + form[1]
                    + (_encode_text(event_id) if type(event_id) is str else _encode(event_id)) + form[2])


def _form(key: tuple, plan: dict) -> tuple[str, str, str]:
    """The text of ``plan`` split where its ``PER_EVENT`` entries go, kept under ``key``.
    ``TypeError`` when the plan does not hold them, in that order."""
    if tuple(name for name in plan if name in PER_EVENT) != PER_EVENT:
        raise TypeError("a plan without its per-event entries in order")
    parts = tuple(_encode({**plan, "input": _MARK, "eventId": _MARK}).split(_encode(_MARK)))
    if len(parts) != 3:
        raise TypeError("a plan holding the per-event mark")
    if len(_forms) >= FORMS_KEPT:
        _forms.clear()
    _forms[key] = parts
    return parts
