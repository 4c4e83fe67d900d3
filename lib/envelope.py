"""The event envelope ``factory.event/v1`` (docs/design.md §3): the one place it is written."""

from datetime import datetime

from .instants import format_instant

SCHEMA_VERSION = "factory.event/v1"


def make_envelope(
    *,
    event_id: str,
    type: str,
    source: str,
    subject: str,
    occurred_at: datetime,
    payload: dict,
    correlation_id: str | None = None,
    causation_id: str | None = None,
) -> dict:
    """A ``factory.event/v1`` envelope as a JSON-ready dict.

    ``occurred_at`` is an aware instant, written ``YYYY-MM-DDTHH:MM:SSZ``;
    ``correlation_id`` defaults to ``event_id`` (an event that starts its own story);
    ``causationId`` appears only when given. Raises ValueError for a naive instant.
    """
    envelope = {
        "schemaVersion": SCHEMA_VERSION,
        "eventId": event_id,
        "type": type,
        "source": source,
        "subject": subject,
        "occurredAt": format_instant(occurred_at),
        "correlationId": event_id if correlation_id is None else correlation_id,
        "payload": payload,
    }
    if causation_id:
        envelope["causationId"] = causation_id
    return envelope
