"""Signed requests to ``POST /events`` through the test client, as the bridge signs them
(docs/intake.md): the envelope, its body and the answer's codes, at a frozen ``NOW``."""

import json
from datetime import UTC, datetime

from django.test import Client

from lib.signing import sign

SECRET = "events-test-secret"
NOW = datetime(2026, 11, 30, 21, 0, 0, tzinfo=UTC)
NOW_TS = int(NOW.timestamp())


def envelope(**changes) -> dict:
    data = {
        "schemaVersion": "factory.event/v1",
        "eventId": "bridge:factory-triage:2026-11-30",
        "type": "factory.triage.requested",
        "source": "bridge",
        "subject": "factory",
        "occurredAt": "2026-11-30T20:59:58Z",
        "correlationId": "bridge:factory-triage:2026-11-30",
        "payload": {"repo": "factory"},
    }
    data.update(changes)
    return data


def body_of(data) -> bytes:
    return json.dumps(data).encode()


def post(body: bytes, *, timestamp: int | str | None = NOW_TS, secret: str = SECRET, signature: str | None = "auto",
         content_type: str = "application/json", client=None, **headers):
    """POST ``body`` to /events signed as the bridge signs it, unless told otherwise."""
    sent = dict(headers)
    if timestamp is not None:
        sent["X-Factory-Timestamp"] = str(timestamp)
    if signature is not None:
        sent["X-Factory-Signature"] = (
            sign(secret, f"{timestamp}.".encode() + body) if signature == "auto" else signature
        )
    # CONTENT_TYPE again as an extra: the test client drops the header of an empty body.
    return (client or Client()).post(
        "/events", data=body, content_type=content_type, headers=sent, CONTENT_TYPE=content_type,
    )


def error_of(response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]


def codes_of(response) -> tuple[int, list[str]]:
    return response.status_code, [e["code"] for e in response.json()["errors"]]
