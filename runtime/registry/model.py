"""The effective registry as immutable values (DESIGN §4).

Built by ``runtime.registry.loader``; read by the planner, the slot loop, the views and
the commands. Nothing here touches the database.
"""

import re
from dataclasses import dataclass, field
from typing import Any

from lib.refusals import Refused

LOOP_NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"

#: Payload fields the slot loop adds to every tick (DESIGN §5, §6); loop-target input
#: schemas must accept them.
TICK_BOOKKEEPING_FIELDS = ("loop", "key", "slot", "cadenceSeconds", "skippedSlots")

#: A placeholder in a command template: ``{name}`` or ``{payload.field}``; other braces
#: (JSON in a ``-c`` script, say) are literal text.
PLACEHOLDER = re.compile(r"\{([A-Za-z][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)?)\}")



def preview_template(argv: list[str] | tuple[str, ...], drop: tuple[str, ...], add: tuple[str, ...]) -> list[str]:
    """A command's dry run derived from the command itself: ``argv`` without every element
    equal to a flag in ``drop``, then the flags of ``add`` (docs/design.md §4, Previews). Pure."""
    return [arg for arg in argv if arg not in drop] + list(add)


def fill_argv(template: list[str], values: dict[str, str]) -> list[str]:
    """``template`` with each placeholder named in ``values`` replaced, in one pass over the
    template: a value is never searched for placeholders, so a payload value holding the
    text ``{runDir}`` stays that text (docs/design.md §8). Names not in ``values`` stay as written."""

    def fill(match: re.Match) -> str:
        return values.get(match.group(1), match.group(0))

    return [PLACEHOLDER.sub(fill, arg) for arg in template]


#: Placeholders a command template may use that the runtime, never an event, fills.
CLOSED_PLACEHOLDERS = frozenset({"factoryRoot", "runId", "runDir", "python", "manage"})

#: An approval policy, of an event type or a loop (DESIGN §4, §7).
APPROVALS = ("watched", "auto")

#: The slot a sample tick or a job's sample event carries: a load checks one against the
#: schemas every tick must pass, so that a loop or job that can never fire is a load error.
SAMPLE_SLOT = "2026-01-01T00:00:00Z"


@dataclass(frozen=True)
class RegistryError:
    """One reason the registry does not load: the file, the entry in it, the rule broken."""

    file: str
    entry: str
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.file}: {self.entry}: {self.rule}: {self.detail}"

    def as_dict(self) -> dict:
        return {"file": self.file, "entry": self.entry, "rule": self.rule, "detail": self.detail}


class RegistryInvalid(Refused):
    """The registry or overlay on disk does not validate; ``errors`` says why (DESIGN §4).

    A refusal with code ``registry_invalid`` whose ``detail`` (and ``str()``) is every
    error, ``file: entry: rule: detail``, joined by ``; ``. An HTTP door answers it 503:
    the runtime cannot take anything until the registry validates.
    """

    status = 503

    def __init__(self, errors: list[RegistryError]):
        self.errors = errors
        super().__init__("registry_invalid", "; ".join(str(e) for e in errors))

    def __str__(self) -> str:
        return self.detail


@dataclass(frozen=True)
class Definition:
    """``registry/definitions/<id>@<version>.json``: what a run executes."""

    id: str
    version: int
    adapter: str
    command: tuple[str, ...] | None
    capture_stdout: str | None
    output_contract: str
    mutating: bool
    input_schema: dict | None
    output_schema: dict | None
    timeout_seconds: int
    max_attempts: int
    allow_scheduled: bool
    #: The report a ``builtin`` definition runs in the worker (``health``), else None.
    builtin: str | None = None
    #: The domain idempotency key template (``runtime.registry.keys``), or None: the default key.
    idempotency_key: str | None = None
    #: Outcomes of a succeeded run that release its key: no final answer for it (DESIGN §7.2).
    release_key_on: tuple[str, ...] = ()
    #: The global barrier its runs hold while claimed or running, or None (DESIGN §8).
    barrier: str | None = None
    #: What the definition does, in plain words, for the person approving it.
    description: str = ""
    #: A mutating command's preview: the flags its dry run drops from and adds to its own
    #: command (``preview_template``), or None when it declares none (docs/design.md §4, Previews).
    preview_drop: tuple[str, ...] | None = None
    preview_add: tuple[str, ...] = ()
    #: How long a preview may take, in seconds; None without a preview.
    preview_timeout_seconds: int | None = None

    @property
    def has_preview(self) -> bool:
        return self.preview_drop is not None

    @property
    def ref(self) -> str:
        return f"{self.id}@{self.version}"


@dataclass(frozen=True)
class EventType:
    """One entry of ``registry/event-types.json``."""

    name: str
    target: str
    payload_schema: dict | None
    human_approval_only: bool
    approval: str | None


@dataclass(frozen=True)
class EdgeEmit:
    """One event an edge emits; values are ``{"pointer": "/output/data/x"}`` or ``{"value": v}``."""

    type: str
    payload: dict[str, dict]
    subject: dict | None


@dataclass(frozen=True)
class Edge:
    """``(definition, outcome) → events`` from ``registry/edges.json``."""

    definition: str
    outcome: str
    emit: tuple[EdgeEmit, ...]


@dataclass(frozen=True)
class Repo:
    """One repository of ``config/repos.yaml``."""

    name: str
    github: str
    base: str
    report_only: bool = False
    merge_every: str | None = None


@dataclass(frozen=True)
class KeyedSetter:
    """How one event type sets a key of a keyed loop (DESIGN §6; seed 000).

    Every field is an RFC 6901 JSON Pointer into the admitted event (its envelope):
    ``key`` finds the key; exactly one of ``at`` (with ``timezone``), ``every`` and
    ``once`` finds the key's rule — a wall time "HH:MM" in an IANA zone, a cadence in
    the ``every`` grammar, or a one-time RFC 3339 instant.
    """

    event_type: str
    key: str
    at: str | None = None
    timezone: str | None = None
    every: str | None = None
    once: str | None = None


@dataclass(frozen=True)
class Keyed:
    """A keyed loop's ``keyed`` declaration: the setting types and the clearing types
    (event type → JSON Pointer to the key)."""

    set_by: dict[str, KeyedSetter]
    cleared_by: dict[str, str]

    @property
    def event_types(self) -> tuple[str, ...]:
        """Every type that sets or clears a key, sorted."""
        return tuple(sorted({*self.set_by, *self.cleared_by}))


@dataclass(frozen=True)
class Loop:
    """An effective schedule entry: kernel, overlay or repo template, merged (DESIGN §4, §5, §6).

    Its slots are an interval (``every``, ``cadence_seconds``), a time of day (``at`` in
    the IANA ``timezone``, on ``days`` or every day; ``cadence_seconds`` None), or, for a
    keyed loop (``keyed`` set, no loop-level cadence), each key's own rule.
    """

    name: str
    every: str | None
    cadence_seconds: int | None
    event_type: str
    catch_up: str
    singleton: bool
    approval: str
    enabled: bool
    payload: dict[str, Any] = field(default_factory=dict)
    source: str = "kernel"
    overrides: tuple[str, ...] = ()
    at: str | None = None
    timezone: str | None = None
    days: tuple[str, ...] = ()
    keyed: Keyed | None = None

    @property
    def subject(self) -> str:
        """A tick's subject: the loop's repo when it has one, else the loop name (DESIGN §5)."""
        repo = self.payload.get("repo")
        return repo if isinstance(repo, str) and repo else self.name


#: Placeholders a bridge job's gate and dry commands may use: filled by the bridge from
#: the runtime's settings, never from an event (spec §15: the commands run before admission).
JOB_COMMAND_PLACEHOLDERS = frozenset({"factoryRoot", "python", "manage"})
#: Payload fields the host clock bridge adds to every event it admits: the job and its slot
#: (spec §15, "an explicit loop/slot payload"); a job's static payload may not set them.
JOB_PAYLOAD_FIELDS = ("loop", "slot")


@dataclass(frozen=True)
class Job:
    """A host clock bridge job from the overlay's ``jobs:`` mapping (spec §15, DESIGN §2).

    Its cadence is ``every`` (``cadence_seconds`` set) or a calendar time ``at`` ("HH:MM")
    in the IANA ``timezone``, optionally on ``days`` only. ``gate_command`` and
    ``dry_command`` are argv tuples run without a shell before admission; the job admits
    one ``event_type`` event whose payload is ``payload`` plus ``loop`` (the job) and
    ``slot``. ``enabled`` is the job's own switch, independent of every native loop.
    """

    name: str
    event_type: str
    enabled: bool
    every: str | None = None
    cadence_seconds: int | None = None
    at: str | None = None
    timezone: str | None = None
    days: tuple[str, ...] = ()
    gate_command: tuple[str, ...] | None = None
    dry_command: tuple[str, ...] | None = None
    payload: dict[str, Any] = field(default_factory=dict)
    description: str = ""

    @property
    def subject(self) -> str:
        """The admitted event's subject: the payload's repo when it has one, else the job name."""
        repo = self.payload.get("repo")
        return repo if isinstance(repo, str) and repo else self.name


@dataclass(frozen=True)
class Registry:
    """The effective registry in force; ``digest`` covers only the tracked kernel files."""

    digest: str
    event_types: dict[str, EventType]
    definitions: dict[str, Definition]
    edges: tuple[Edge, ...]
    loops: dict[str, Loop]
    repos: tuple[Repo, ...]
    envelope_schema: dict
    command_result_schema: dict
    jobs: dict[str, Job] = field(default_factory=dict)

    def definition_for(self, event_type: str) -> Definition | None:
        etype = self.event_types.get(event_type)
        return self.definitions.get(etype.target) if etype else None

    def edges_for(self, definition: str, outcome: str) -> list[Edge]:
        return [e for e in self.edges if e.definition == definition and e.outcome == outcome]
