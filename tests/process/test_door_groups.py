"""Concurrent signed admissions against a real ``runserve`` (docs/design.md §3, "The signed doors"):
requests that arrive together are admitted in groups, and each eventId is still admitted exactly
once — one 202, every other request carrying it 200 duplicate — with one journal entry."""

import json
import sqlite3
import threading

import pytest

from tests.process.conftest import serving
from tests.process.test_http_server import exchange, signed_event

pytestmark = pytest.mark.process

UNIQUE = 30
REPEATED = 10


def test_forty_simultaneous_requests_admit_thirty_event_ids_once_each(tmp_path):
    event_ids = [f"group-{n}" for n in range(UNIQUE)] + [f"group-{n}" for n in range(REPEATED)]
    answers: dict[int, tuple[int, dict]] = {}
    start = threading.Barrier(len(event_ids))

    def send(index: int, event_id: str) -> None:
        data = signed_event(event_id)
        start.wait(timeout=30)
        status, _, body = exchange(url, data)
        answers[index] = (status, json.loads(body))

    with serving(tmp_path) as (url, env):
        threads = [threading.Thread(target=send, args=pair) for pair in enumerate(event_ids)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert len(answers) == len(event_ids)
        database = env["DATABASE_URL"].removeprefix("sqlite:///")
        with sqlite3.connect(database) as db:
            stored = sorted(uid for (uid,) in db.execute("SELECT uid FROM runtime_event"))
            journaled = db.execute("SELECT count(*) FROM runtime_journalentry WHERE action = 'event_admitted'").fetchone()[0]

    by_event: dict[str, list[int]] = {}
    for index, (status, body) in answers.items():
        assert body["eventId"] == event_ids[index]
        assert (body["admitted"], body["duplicate"]) == ((True, False) if status == 202 else (False, True))
        by_event.setdefault(body["eventId"], []).append(status)
    assert {event_id: sorted(statuses) for event_id, statuses in by_event.items()} == {
        f"group-{n}": [200, 202] if n < REPEATED else [202] for n in range(UNIQUE)
    }
    assert stored == sorted(f"group-{n}" for n in range(UNIQUE))
    assert journaled == UNIQUE
