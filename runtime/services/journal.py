"""Writing the append-only journal (docs/design.md §9)."""

from datetime import datetime

from runtime.models import Actor, Event, JournalEntry, Proposal, Run


def record(
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
    """Append one entry; call inside the transaction that makes the change it records.

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
    return JournalEntry.objects.create(
        at=at,
        action=action,
        actor=actor,
        actor_name=actor_name,
        event_id=event_id,
        proposal=proposal,
        run=run,
        data=data or {},
    )
