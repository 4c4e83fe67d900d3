"""Keyed schedules: one row per key, set and cleared by events, fired per key (docs/design.md §6).

A keyed loop declares ``keyed: {setBy: {type: {key, at+timezone | every | once}},
clearedBy: {type: {key}}}`` — JSON Pointers into the admitted event. Each slot-loop
iteration, for every enabled keyed loop:

1. ``apply_keyed_events`` applies the admitted setting and clearing events in admission
   order: a setting event replaces the key's row, a clearing event deletes it. A setting
   event whose values do not validate changes nothing: the old row stays and the journal
   records ``keyed_set_refused`` with the reasons (the event's own planning, against its
   type's target, is separate). Each event is marked applied in the transaction that
   applies it (``KeyedEventApplied``); ``ScheduleState.keyed_cursor`` covers the settled
   past so that the markers stay few.
2. ``emit_keyed_ticks`` fetches only the due rows (``keyed_due_idx``), in batches, and
   admits ``clock:<loop>:<key>:<slot>`` through the ``schedule`` door; in the same
   transaction (one per batch) the row advances to its next slot, or, for a ``once``
   row, is deleted.

The row fold (``schedules.keyed.fold``: ``apply_setting``, ``apply_tick``, ``fold``) is pure and shared
with ``rebuild``, which empties the rows and replays the setting and clearing events and
the loop's admitted ticks in admission order; a tick changes a row only when its slot is
one the row would fire (a slot of its rule, not before its next due), so the replay
gives the rows the live path gave, whatever order concurrent admissions committed in
(``schedules.keyed.rebuild``). The steps are in ``schedules.keyed.firing``.
"""

from .firing import apply_keyed_events, emit_keyed_ticks
from .fold import KeyedValueError, Row, fold
from .rebuild import RebuildReport, rebuild

__all__ = [
    "KeyedValueError",
    "RebuildReport",
    "Row",
    "apply_keyed_events",
    "emit_keyed_ticks",
    "fold",
    "rebuild",
]
