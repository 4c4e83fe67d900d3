"""Writing the append-only journal (docs/design.md §9)."""

from collections.abc import Iterable
from datetime import datetime

from runtime.models import Actor, Event, JournalEntry, Proposal, Run


def entry(
    action: str,
    actor: Actor | str,
    *,
    at: datetime,
    actor_name: str = "",
    event: Event | None = None,
    proposal: Proposal | None = None,
    run: Run | None = None,
    data: dict | None = None,
) -> JournalEntry:
    """One unsaved entry, for ``record_many``; the arguments are ``record``'s.

    The entry links the event of the run or proposal when ``event`` is not given, so a
    correlation's whole story can be read from the journal alone.
    """
    if event is not None:
        event_id = event.pk
    elif run is not None:
        event_id = run.event_id
    elif proposal is not None:
        event_id = proposal.event_id
    else:
        event_id = None
    return JournalEntry(
        at=at,
        action=action,
        actor=actor,
        actor_name=actor_name,
        event_id=event_id,
        proposal=proposal,
        run=run,
        data=data or {},
    )


def record(action: str, actor: Actor | str, *, at: datetime, **links) -> JournalEntry:
    """Append one entry (``entry``'s arguments); call inside the transaction that makes the
    change it records."""
    made = entry(action, actor, at=at, **links)
    made.save(force_insert=True)
    return made


def record_many(entries: Iterable[JournalEntry]) -> list[JournalEntry]:
    """Append many entries built by ``entry`` in one multi-row insert (the batched paths of
    admission and planning); call inside the transaction that makes the changes they record."""
    return JournalEntry.objects.bulk_create(list(entries))
