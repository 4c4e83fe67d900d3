"""``runtime.services.chains``' pure computation, without a database: the document edge
pointers read, each edge value, and the envelopes a run's edges emit — or ``ChainBroken``
listing every pointer that found nothing (docs/design.md §8). The chain end to end:
tests/db/test_chain.py."""

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from lib.json_pointer import PointerNotFound
from runtime.services.chains import ChainBroken, chain_document, chain_envelopes, resolve_value

NOW = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


def test_the_document_holds_the_summary_and_data_only_when_the_result_gave_them():
    assert chain_document({"repo": "a"}, "OK", "", None) == {"input": {"repo": "a"}, "output": {"outcome": "OK"}}
    assert chain_document({}, "OK", "done", {}) == {
        "input": {}, "output": {"outcome": "OK", "summary": "done", "data": {}},
    }


def test_a_value_is_a_pointer_a_literal_or_a_list_of_values():
    document = {"input": {"repo": "alpha", "n": 7}, "output": {"outcome": "OK"}}
    assert resolve_value({"pointer": "/input/repo"}, document) == "alpha"
    assert resolve_value({"value": {"x": [1]}}, document) == {"x": [1]}
    assert resolve_value({"value": None}, document) is None
    assert resolve_value({"items": [{"pointer": "/input/n"}, {"value": "v"}, {"items": []}]}, document) == [7, "v", []]
    with pytest.raises(PointerNotFound):
        resolve_value({"pointer": "/input/missing"}, document)


def emit(type_: str, payload: dict, subject: dict | None = None) -> SimpleNamespace:
    return SimpleNamespace(type=type_, payload=payload, subject=subject)


class Edges:
    """A registry's ``edges_for``: the edges of one (definition, outcome), the calls recorded."""

    def __init__(self, *edges):
        self.edges = list(edges)
        self.asked = []

    def edges_for(self, definition, outcome):
        self.asked.append((definition, outcome))
        return self.edges


def edge(*emits, definition="review", outcome="APPROVE") -> SimpleNamespace:
    return SimpleNamespace(definition=definition, outcome=outcome, emit=list(emits))


RUN = SimpleNamespace(pk=42, definition="review", plan={"input": {"repo": "alpha", "prNumber": 7}})
EVENT = SimpleNamespace(uid="ev-1", subject="alpha#7", correlation_id="corr-1")


def envelopes(registry, *, outcome="APPROVE", summary="looks fine", data=None, run=RUN):
    return chain_envelopes(run, EVENT, outcome=outcome, summary=summary, data=data, registry=registry, now=NOW)


def test_each_emit_of_each_edge_is_an_envelope_numbered_in_order():
    registry = Edges(
        edge(emit("factory.merge.requested", {"repo": {"pointer": "/input/repo"}, "why": {"pointer": "/output/summary"}}),
             emit("factory.note", {"n": {"value": 1}}, subject={"pointer": "/output/data/where"})),
        edge(emit("factory.other", {}, subject={"value": "elsewhere"})),
    )
    made = envelopes(registry, data={"where": "beta"})
    assert registry.asked == [("review", "APPROVE")]
    common = {"schemaVersion": "factory.event/v1", "source": "chain", "occurredAt": "2026-11-30T10:00:00Z",
              "correlationId": "corr-1", "causationId": "ev-1"}
    assert made == [
        {**common, "eventId": "chain:42:0", "type": "factory.merge.requested", "subject": "alpha#7",
         "payload": {"repo": "alpha", "why": "looks fine"}},
        {**common, "eventId": "chain:42:1", "type": "factory.note", "subject": "beta", "payload": {"n": 1}},
        {**common, "eventId": "chain:42:2", "type": "factory.other", "subject": "elsewhere", "payload": {}},
    ]


def test_a_run_without_input_reads_an_empty_input():
    registry = Edges(edge(emit("factory.note", {"all": {"pointer": "/input"}, "outcome": {"pointer": "/output/outcome"}})))
    (made,) = envelopes(registry, run=SimpleNamespace(pk=3, definition="review", plan={}))
    assert made["payload"] == {"all": {}, "outcome": "APPROVE"}
    (made,) = envelopes(registry, run=SimpleNamespace(pk=3, definition="review", plan={"input": None}))
    assert made["payload"] == {"all": {}, "outcome": "APPROVE"}


def test_every_pointer_that_finds_nothing_and_every_bad_subject_is_listed_and_nothing_is_emitted():
    registry = Edges(
        edge(emit("factory.a", {"x": {"pointer": "/output/data/x"}, "ok": {"value": 1}, "y": {"pointer": "/input/nope"}})),
        edge(emit("factory.b", {}, subject={"pointer": "/output/summary"}),
             emit("factory.c", {}, subject={"pointer": "/input/prNumber"}),
             emit("factory.d", {}, subject={"value": ""}),
             definition="review", outcome="APPROVE"),
    )
    with pytest.raises(ChainBroken) as broken:
        envelopes(registry, summary="")
    problems = broken.value.problems
    assert [(p["emit"], p["type"], p["field"], p["pointer"]) for p in problems] == [
        (0, "factory.a", "payload.x", "/output/data/x"),
        (0, "factory.a", "payload.y", "/input/nope"),
        (0, "factory.b", "subject", "/output/summary"),
        (1, "factory.c", "subject", "/input/prNumber"),
        (2, "factory.d", "subject", None),
    ]
    assert all(p["edge"] == "review APPROVE" for p in problems)
    assert problems[3]["detail"] == "a subject is a non-empty string, not 7"
    assert problems[4]["detail"] == "a subject is a non-empty string, not ''"
    assert [p["detail"] for p in problems[:3]] == [
        "/output has no member 'data'", "/input has no member 'nope'", "/output has no member 'summary'",
    ]
    assert broken.value.code == "chain_broken"
    assert str(broken.value) == "; ".join(f"review APPROVE → {p['type']} {p['field']}: {p['detail']}" for p in problems)
    assert str(broken.value).startswith("review APPROVE → factory.a payload.x: ")


def test_no_edge_emits_nothing():
    registry = Edges()
    assert envelopes(registry, outcome="REJECT") == []
    assert registry.asked == [("review", "REJECT")]
