"""Chains: a finished run's outcome becomes the next events (docs/design.md §8; docs/demo.md).

``chain_envelopes`` turns the edges matching ``(definition, outcome)`` into envelopes,
pure computation over ``{"input": run input, "output": {outcome, summary?, data?}}``;
``finish_run`` writes them to the outbox (``runtime.services.outbox``) in the
transaction that records the run's end.

Every chained event gets the eventId ``chain:<run id>:<n>`` (``n`` from 0 in edge
order), the causing event's correlationId, and that event's eventId as causationId.
"""

from datetime import datetime

from lib.envelope import make_envelope
from lib.json_pointer import PointerNotFound, resolve_pointer
from lib.refusals import Refused
from runtime.models import Event, Run
from runtime.registry import Registry


class ChainBroken(Refused):
    """An edge could not be filled (code ``chain_broken``); ``problems`` is
    ``[{edge, emit, type, field, pointer, detail}]``."""

    code_in_message = False

    def __init__(self, problems: list[dict]):
        self.problems = problems
        super().__init__(
            "chain_broken", "; ".join(f"{p['edge']} → {p['type']} {p['field']}: {p['detail']}" for p in problems)
        )


def resolve_value(spec: dict, document):
    """One edge value (``registry/schemas/meta/edges.schema.json``): a pointer, a literal or a list."""
    if "pointer" in spec:
        return resolve_pointer(document, spec["pointer"])
    if "value" in spec:
        return spec["value"]
    return [resolve_value(item, document) for item in spec["items"]]


def chain_document(run_input: dict, outcome: str, summary: str, data: dict | None) -> dict:
    """What edge pointers read: ``/input/…`` the run's input, ``/output/…`` its result.

    ``summary`` and ``data`` appear only when the result gave them, so a pointer into a
    result without data finds nothing instead of a null.
    """
    output: dict = {"outcome": outcome}
    if summary:
        output["summary"] = summary
    if data is not None:
        output["data"] = data
    return {"input": run_input, "output": output}


def chain_envelopes(
    run: Run, event: Event, *, outcome: str, summary: str, data: dict | None, registry: Registry, now: datetime
) -> list[dict]:
    """The ``factory.event/v1`` envelopes the edges of ``(run.definition, outcome)`` emit.

    ``event`` is the run's event (its correlationId is inherited, its eventId becomes the
    causationId); ``now`` (aware UTC) is each envelope's ``occurredAt``. The subject is
    the edge's, else the causing event's. All or nothing: raises ChainBroken listing
    every pointer that found nothing and every subject that is not a string, so no
    half-filled event and no half of a fan-out is ever emitted.
    """
    document = chain_document(run.plan.get("input") or {}, outcome, summary, data)
    envelopes, problems = [], []
    for edge in registry.edges_for(run.definition, outcome):
        for index, emit in enumerate(edge.emit):
            where = {"edge": f"{edge.definition} {edge.outcome}", "emit": index, "type": emit.type}
            payload = {}
            for name, spec in emit.payload.items():
                try:
                    payload[name] = resolve_value(spec, document)
                except PointerNotFound as exc:
                    problems.append({**where, "field": f"payload.{name}", "pointer": exc.pointer, "detail": exc.detail})
            subject = event.subject
            if emit.subject is not None:
                try:
                    subject = resolve_value(emit.subject, document)
                except PointerNotFound as exc:
                    problems.append({**where, "field": "subject", "pointer": exc.pointer, "detail": exc.detail})
                else:
                    if not isinstance(subject, str) or not subject:
                        problems.append({
                            **where, "field": "subject", "pointer": emit.subject.get("pointer"),
                            "detail": f"a subject is a non-empty string, not {subject!r}",
                        })
            envelopes.append(make_envelope(
                event_id=f"chain:{run.pk}:{len(envelopes)}",
                type=emit.type,
                source="chain",
                subject=subject,
                occurred_at=now,
                correlation_id=event.correlation_id,
                causation_id=event.uid,
                payload=payload,
            ))
    if problems:
        raise ChainBroken(problems)
    return envelopes
