"""Ticks written by the database: a chunk of due ticks as three statements (docs/performance.md, "Ticks").

A tick differs from its loop's other ticks only in its slot and its count of skipped
slots, so the slot loop does not build an envelope, an event row and a journal entry
per tick in Python. Each loop has a **form**, built once per registry in force: its
event type and subject and its payload's JSON text split around the two values a tick
fills in. A chunk goes to the database as two JSON parameters — one row per tick
``[loop, type, subject, head, middle, tail, slot index]`` made by joining the loop's
form with its slot's index, and the chunk's few distinct slots
``[slot text, stored slot, skipped slots, stored next due]`` — and the database builds
the rest:

1. the events, with ``INSERT … SELECT … ON CONFLICT (uid) DO NOTHING RETURNING id, uid``
   (eventId ``clock:<loop>:<slot>``, ``occurredAt`` and ``slot`` the slot, the payload
   text ``head + slot + middle + skipped + tail``), in the chunk's order;
2. the ``event_admitted`` journal entries of exactly the rows inserted (on PostgreSQL in
   the same statement, a data-modifying ``WITH``), in event id order;
3. the states' advance: last slot, last eventId, next due and ``last_tick_at``, only
   forward (``schedules.state``).

The rows are those ``admit_batch`` and ``advance_loops`` write for the same ticks,
column for column and in the same stored formats (a test compares the two row by row):
the payload text is ``json.dumps`` of the payload ``schedules.envelope.tick_envelope``
builds, split where its ``slot`` and ``skippedSlots`` values stand.
"""

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from json.encoder import encode_basestring_ascii

from django.db import connection

from lib.calendar import loop_rule
from lib.instants import format_instant
from lib.slots import DueSlot
from runtime.models import DOOR_ACTOR, Door, Event, JournalEntry
from runtime.registry import Loop, Registry
from runtime.services.admission import EVENT_COLUMNS
from runtime.services.bulk_rows import stored_instant
from runtime.services.journal import COLUMNS as JOURNAL_COLUMNS

from .models import ScheduleState

#: Stand-ins for a tick's slot and skipped count while its loop's payload is written as
#: JSON text; a static payload cannot hold U+0000 (a registry load refuses it), so each
#: is found exactly once.
_SLOT_MARK, _SKIPPED_MARK = "\x00slot\x00", "\x00skipped\x00"
#: Where they stand in the payload's text: the slot inside its quotes, the count as a whole value.
_SLOT_TEXT, _SKIPPED_TEXT = json.dumps(_SLOT_MARK)[1:-1], json.dumps(_SKIPPED_MARK)


@dataclass(frozen=True)
class TickForm:
    """What every tick of one loop shares, as the JSON text of the first six values of its
    chunk row (``[loop, type, subject, head, middle, tail``, without the closing bracket)."""

    loop: str
    row_head: str


def tick_form(loop: Loop) -> TickForm:
    """The form of ``loop``'s ticks (an interval or time-of-day loop): its payload as
    ``tick_envelope`` builds it, written by ``json.dumps`` with the slot and skipped count
    left out, so that ``head + slot + middle + skipped + tail`` is the payload's text."""
    payload = {**loop.payload, "loop": loop.name}
    payload.update(slot=_SLOT_MARK, cadenceSeconds=loop.cadence_seconds, skippedSlots=_SKIPPED_MARK)
    text = json.dumps(payload)
    head, rest = text.split(_SLOT_TEXT, 1)
    middle, tail = rest.split(_SKIPPED_TEXT, 1)
    row = ",".join(_as_json_text(value) for value in (loop.name, loop.event_type, loop.subject, head, middle, tail))
    return TickForm(loop.name, f"[{row}")


#: A string as ``json.dumps`` writes it (the encoder's own C function: a 100,000-loop
#: registry's forms are 600,000 strings).
_as_json_text = encode_basestring_ascii


def tick_forms(registry: Registry) -> dict[str, TickForm]:
    """``tick_form`` of every interval and time-of-day loop of ``registry``, by name, built
    once for the registry in force. The slot loop's tick thread asks for them as soon as it
    adopts a registry (``ops.slot_loop.emit_once``), so a burst does not wait on them
    (about 1 s at 100,000 loops)."""
    cached = _forms.get("registry")
    if cached is None or cached[0] is not registry:
        cached = (registry, {name: tick_form(loop) for name, loop in registry.loops.items() if loop.keyed is None})
        _forms["registry"] = cached
    return cached[1]


_forms: dict[str, tuple[Registry, dict[str, TickForm]]] = {}


class _Slots:
    """A chunk's distinct ``(slot, skipped slots, next due)``, each with its index."""

    def __init__(self):
        self.indexes: dict[tuple, int] = {}
        # ``ticks.due_ticks`` hands every loop of one rule and last slot the same ``DueSlot``
        # object, whose next due is then the same: found by identity, it is not worked out again.
        self._by_due: dict[int, tuple[DueSlot, int]] = {}

    def index(self, loop: Loop, due: DueSlot) -> int:
        found = self._by_due.get(id(due))
        if found is not None and found[0] is due:
            return found[1]
        rule = loop_rule(loop)
        key = (due.slot, due.skipped_slots, rule.after(rule.floor(due.slot)))
        index = self.indexes.setdefault(key, len(self.indexes))
        self._by_due[id(due)] = (due, index)
        return index


def write_ticks(chunk: list[tuple[Loop, DueSlot, bool]], registry: Registry, now: datetime) -> set[str]:
    """Admit a chunk of due ticks ``(loop, due slot, fresh)`` at ``now`` and advance their
    loops' states; call inside the chunk's transaction. Returns the eventIds inserted (the
    others were already stored: another process or an earlier iteration fired them).

    The chunk's order is its admission order. A loop with several ticks in the chunk
    (``catchUp: all``) advances to the newest; a ``fresh`` loop is marked enabled since
    ``now`` (``schedules.state.mark_fresh``).
    """
    if not chunk:
        return set()
    forms, slots = tick_forms(registry), _Slots()
    rows, newest = [], {}
    for loop, due, _ in chunk:
        index = slots.index(loop, due)
        newest[loop.name] = len(rows)
        rows.append(f"{forms[loop.name].row_head},{index}]")
    slot_rows = json.dumps([
        [format_instant(slot), stored_instant(slot), skipped, stored_instant(next_due)]
        for slot, skipped, next_due in slots.indexes
    ])
    tick_rows = f"[{','.join(rows)}]"
    # Each loop's newest tick: a loop that fired several slots advances once, to the last.
    advance_rows = tick_rows if len(newest) == len(rows) else f"[{','.join(rows[i] for i in newest.values())}]"
    at, actor = stored_instant(now), DOOR_ACTOR[Door.SCHEDULE].value
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(_statements()["insert"], [at, tick_rows, slot_rows, at, actor])
            inserted = {uid for _, uid in cursor.fetchall()}
        else:
            cursor.execute(_statements()["insert"], [at, tick_rows, slot_rows])
            found = cursor.fetchall()
            if found:
                types = json.dumps({t: json.dumps(t) for t in {loop.event_type for loop, _, _ in chunk}})
                cursor.execute(_statements()["journal"], [at, actor, types, json.dumps([pk for pk, _ in found])])
            inserted = {uid for _, uid in found}
        cursor.execute(_statements()["advance"], [at, advance_rows, slot_rows])
    return inserted


def _statements() -> dict[str, str]:
    """The chunk's statements for this connection's database, built once."""
    vendor = connection.vendor
    if vendor not in _sql:
        _sql[vendor] = _postgres_statements() if vendor == "postgresql" else _sqlite_statements()
    return _sql[vendor]


_sql: dict[str, dict[str, str]] = {}


def _columns(names: Iterable[str]) -> str:
    quote = connection.ops.quote_name
    return ", ".join(quote(name) for name in names)


def _event_values(payload: str, now: str) -> str:
    """The ``EVENT_COLUMNS`` of a tick row ``r`` and its slot ``s`` (``payload``: its text or
    jsonb; ``now``: the placeholder of the admission instant)."""
    uid = "'clock:' || r.loop || ':' || s.slot_text"
    return (
        f"{uid}, r.type, 'schedule', r.subject, s.slot_at, {uid}, NULL, {payload}, '{Door.SCHEDULE.value}', {now},"
        " r.loop, NULL, s.slot_at, NULL, NULL, ''"
    )


#: The journal entry's data as text, in ``json.dumps``'s form, from an event row ``e`` and
#: its type's JSON text ``t.text`` (an eventId of a loop name and a slot needs no escape).
_ADMITTED_DATA = (
    "'{\"eventId\": \"' || e.uid || '\", \"type\": ' || t.text || "
    f"', \"source\": \"schedule\", \"door\": \"{Door.SCHEDULE.value}\"}}'"
)


def _advance_sql(state: str, advance_rows: str, slots: str, now: str, relaxed: str = "") -> str:
    """The states' advance from the rows ``r`` of ``advance_rows`` and their slots ``s``: last
    slot, last eventId, next due and ``last_tick_at`` (``now``: its placeholder), only where
    the last slot moves forward (a process that fired an older slot changes nothing);
    ``relaxed``, more of the ``FROM`` list (PostgreSQL's commit setting)."""
    last = f"{state}.\"last_slot\""
    return (
        f"UPDATE {state} SET \"last_slot\" = v.slot_at, \"last_event_id\" = 'clock:' || v.loop || ':' || v.slot_text,"
        f" \"next_due\" = v.next_due, \"last_tick_at\" = {now}"
        f" FROM (SELECT r.loop, s.slot_at, s.slot_text, s.next_due FROM {advance_rows} JOIN {slots} ON s.slot = r.slot) AS v"
        f"{relaxed} WHERE {state}.\"loop\" = v.loop AND ({last} IS NULL OR {last} < v.slot_at)"
    )


#: PostgreSQL: the chunk's commit does not wait for the WAL's flush (docs/design.md §5: a
#: tick is flushed before anything acts on it outside the database, and one lost with the
#: server is due again, under the same eventId). Evaluated once, with the states' advance.
_RELAXED = ", (SELECT set_config('synchronous_commit', 'off', true)) AS relaxed"


def _sqlite_statements() -> dict[str, str]:
    event, journal, state = (
        connection.ops.quote_name(m._meta.db_table) for m in (Event, JournalEntry, ScheduleState)
    )
    rows = (
        "(SELECT CAST(j.key AS INTEGER) AS ord, json_extract(j.value, '$[0]') AS loop,"
        " json_extract(j.value, '$[1]') AS type, json_extract(j.value, '$[2]') AS subject,"
        " json_extract(j.value, '$[3]') AS head, json_extract(j.value, '$[4]') AS middle,"
        " json_extract(j.value, '$[5]') AS tail, json_extract(j.value, '$[6]') AS slot FROM json_each(%s) AS j) AS r"
    )
    slots = (
        "(SELECT CAST(j.key AS INTEGER) AS slot, json_extract(j.value, '$[0]') AS slot_text,"
        " json_extract(j.value, '$[1]') AS slot_at, json_extract(j.value, '$[2]') AS skipped,"
        " json_extract(j.value, '$[3]') AS next_due FROM json_each(%s) AS j) AS s"
    )
    payload = "r.head || s.slot_text || r.middle || s.skipped || r.tail"
    advance_rows = (
        "(SELECT json_extract(j.value, '$[0]') AS loop, json_extract(j.value, '$[6]') AS slot FROM json_each(%s) AS j) AS r"
    )
    return {
        # ``WHERE true``: SQLite's parser would read ``ON CONFLICT`` as the join's condition.
        "insert": (
            f"INSERT INTO {event} ({_columns(EVENT_COLUMNS)}) SELECT {_event_values(payload, '%s')} FROM {rows}"
            f" JOIN {slots} ON s.slot = r.slot WHERE true ORDER BY r.ord"
            " ON CONFLICT (\"uid\") DO NOTHING RETURNING \"id\", \"uid\""
        ),
        "journal": (
            f"INSERT INTO {journal} ({_columns(JOURNAL_COLUMNS)}) SELECT %s, 'event_admitted', %s, '', e.id, NULL, NULL,"
            f" {_ADMITTED_DATA} FROM {event} AS e JOIN (SELECT j.key AS type, j.value AS text FROM json_each(%s) AS j) AS t"
            " ON t.type = e.type WHERE e.id IN (SELECT value FROM json_each(%s)) ORDER BY e.id"
        ),
        "advance": _advance_sql(state, advance_rows, slots, "%s"),
    }


def _postgres_statements() -> dict[str, str]:
    event, journal, state = (
        connection.ops.quote_name(m._meta.db_table) for m in (Event, JournalEntry, ScheduleState)
    )
    rows = (
        "(SELECT j.ord, j.e ->> 0 AS loop, j.e ->> 1 AS type, j.e ->> 2 AS subject, j.e ->> 3 AS head,"
        " j.e ->> 4 AS middle, j.e ->> 5 AS tail, (j.e ->> 6)::int AS slot"
        " FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS j(e, ord)) AS r"
    )
    slots = (
        "(SELECT (j.ord - 1)::int AS slot, j.e ->> 0 AS slot_text, (j.e ->> 1)::timestamptz AS slot_at,"
        " j.e ->> 2 AS skipped, (j.e ->> 3)::timestamptz AS next_due"
        " FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS j(e, ord)) AS s"
    )
    payload = "(r.head || s.slot_text || r.middle || s.skipped || r.tail)::jsonb"
    advance_rows = "(SELECT j.e ->> 0 AS loop, (j.e ->> 6)::int AS slot FROM jsonb_array_elements(%s::jsonb) AS j(e)) AS r"
    return {
        "insert": (
            f"WITH n AS (INSERT INTO {event} ({_columns(EVENT_COLUMNS)}) SELECT {_event_values(payload, '%s::timestamptz')}"
            f" FROM {rows}"
            f" JOIN {slots} ON s.slot = r.slot ORDER BY r.ord"
            " ON CONFLICT (\"uid\") DO NOTHING RETURNING \"id\", \"uid\", \"type\"),"
            f" j AS (INSERT INTO {journal} ({_columns(JOURNAL_COLUMNS)}) SELECT %s::timestamptz, 'event_admitted', %s, '', n.id,"
            " NULL, NULL, jsonb_build_object('eventId', n.uid, 'type', n.type, 'source', 'schedule',"
            f" 'door', '{Door.SCHEDULE.value}') FROM n ORDER BY n.id)"
            " SELECT id, uid FROM n"
        ),
        "advance": _advance_sql(state, advance_rows, slots, "%s::timestamptz", _RELAXED),
    }
