"""Property: no byte string sent to either door is a 5xx, and nothing unsigned is written (docs/design.md §12)."""

import json
import time

import pytest
from django.test import Client
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from lib.signing import sign
from runtime.models import Event, JournalEntry
from tests.github import GITHUB, REPOS_YAML

EVENTS_SECRET = "events-property-secret"
GITHUB_SECRET = "github-property-secret"
FIXTURE_BODIES = [path.read_bytes() for path in sorted(GITHUB.glob("*.json"))]

pytestmark = pytest.mark.django_db

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
envelopes = st.fixed_dictionaries(
    {
        "schemaVersion": st.sampled_from(["factory.event/v1", "factory.event/v0"]),
        "eventId": st.text(min_size=0, max_size=12),
        "type": st.sampled_from(["factory.work.requested", "github.workflow-run.failed", "nope"]),
        "source": st.text(max_size=6),
        "subject": st.text(max_size=6),
        "occurredAt": st.sampled_from(["2026-11-30T21:00:00Z", "9999-12-31T23:59:59-01:00", "yesterday"]),
        "correlationId": st.text(max_size=6),
        "payload": st.one_of(json_values, st.fixed_dictionaries({"repo": st.text(max_size=8)})),
    },
    optional={"causationId": st.text(max_size=6), "extra": json_values},
)


def mutated(data: st.DataObject) -> bytes:
    """A real delivery with a few bytes changed: near-misses that reach deep into the translation."""
    body = bytearray(data.draw(st.sampled_from(FIXTURE_BODIES)))
    for _ in range(data.draw(st.integers(0, 4))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    return bytes(body)


def bodies(data: st.DataObject) -> bytes:
    kind = data.draw(st.sampled_from(["bytes", "json", "envelope", "fixture"]))
    if kind == "bytes":
        return data.draw(st.binary(max_size=300))
    if kind == "json":
        return json.dumps(data.draw(json_values)).encode()
    if kind == "envelope":
        return json.dumps(data.draw(envelopes)).encode()
    return mutated(data)


@pytest.fixture
def doors(settings, registry_files):
    settings.FACTORY_EVENTS_SECRET = EVENTS_SECRET
    settings.FACTORY_GITHUB_WEBHOOK_SECRET = GITHUB_SECRET
    registry_files.write_config("repos.yaml", REPOS_YAML)


@hypothesis_settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_body_is_a_server_error_and_only_signed_bodies_write(doors, data):
    route = data.draw(st.sampled_from(["/events", "/github"]))
    body = bodies(data)
    signed = data.draw(st.booleans())
    content_type = data.draw(st.sampled_from(
        ["application/json", "application/x-www-form-urlencoded", "text/plain", "", "application/json; charset=latin-1"]
    ))
    headers = {
        "X-GitHub-Event": data.draw(st.sampled_from(["pull_request", "workflow_run", "ping", "push", ""])),
        "X-GitHub-Delivery": data.draw(st.sampled_from(["", "d-1", "has space"]) | st.uuids().map(str)),
    }
    if route == "/events":
        timestamp = str(int(time.time()))
        headers["X-Factory-Timestamp"] = timestamp
        headers["X-Factory-Signature"] = (
            sign(EVENTS_SECRET, f"{timestamp}.".encode() + body) if signed
            else data.draw(st.sampled_from(["", "sha256=00", sign("other", body)]) | st.text(max_size=70))
        )
    else:
        headers["X-Hub-Signature-256"] = (
            sign(GITHUB_SECRET, body) if signed
            else data.draw(st.sampled_from(["", "sha256=00", sign(EVENTS_SECRET, body)]) | st.text(max_size=70))
        )
    headers = {name: value for name, value in headers.items() if value.isprintable() and value.isascii()}
    before = (Event.objects.count(), JournalEntry.objects.count())
    # generic() sends the bytes as they are; post() would re-encode them for a declared charset.
    response = Client().generic("POST", route, body, content_type=content_type, headers=headers,
                                CONTENT_TYPE=content_type)
    assert response.status_code < 500
    assert response["Content-Type"] == "application/json"
    if not signed:
        assert response.status_code == 401
        assert (Event.objects.count(), JournalEntry.objects.count()) == before
    elif response.status_code not in (200, 202):
        assert (Event.objects.count(), JournalEntry.objects.count()) == before
