"""The loops' enable/disable history (schedules.models.LoopChange): the state sync writes a change
whenever it sees a loop turned on or off, and schedules.history reads the gaps of a window."""

import pytest

from runtime.registry import store
from schedules.history import Gap, unwatched
from schedules.models import LoopChange
from schedules.state import sync_registry
from tests.conftest import at
from tests.helpers import tick

pytestmark = pytest.mark.django_db

REAPER_ONLY = "schedules:\n  heartbeat:\n    enabled: false\n  reaper:\n    enabled: true\n"
NOTHING = "schedules:\n  heartbeat:\n    enabled: false\n"


def changes(loop: str) -> list[tuple[str, str]]:
    return [(kind, when.strftime("%H:%M:%S")) for kind, when in LoopChange.objects.filter(loop=loop).values_list("kind", "at")]


def test_the_sync_records_first_seen_disabled_and_re_enabled_loops(registry_files):
    overlay = registry_files.config_dir / "schedule.yaml"
    overlay.write_text(REAPER_ONLY)
    tick("2026-11-30T20:00:02Z")
    tick("2026-11-30T21:00:02Z")  # same loops: no sync, no change
    overlay.write_text(NOTHING)
    tick("2026-11-30T22:00:02Z")
    overlay.write_text(REAPER_ONLY)
    tick("2026-11-30T23:30:00Z")
    assert changes("reaper") == [("enabled", "20:00:02"), ("disabled", "22:00:02"), ("enabled", "23:30:00")]
    assert changes("heartbeat") == []


def test_a_second_sync_before_the_re_enabled_loop_fires_records_nothing_more(registry_files):
    overlay = registry_files.config_dir / "schedule.yaml"
    overlay.write_text(REAPER_ONLY)
    tick("2026-11-30T20:00:02Z")
    overlay.write_text(NOTHING)
    tick("2026-11-30T21:00:02Z")
    overlay.write_text(REAPER_ONLY)
    store.reset()
    registry = store.current()
    sync_registry(registry, at("2026-11-30T21:30:00Z"))
    sync_registry(registry, at("2026-11-30T21:30:01Z"))
    assert changes("reaper") == [("enabled", "20:00:02"), ("disabled", "21:00:02"), ("enabled", "21:30:00")]


def test_the_gaps_of_a_window_are_read_from_the_history():
    LoopChange.objects.bulk_create([
        LoopChange(loop="a", at=at("2026-11-01T00:00:00Z"), kind="enabled"),
        LoopChange(loop="a", at=at("2026-11-02T00:00:00Z"), kind="disabled"),
        LoopChange(loop="a", at=at("2026-11-02T01:00:00Z"), kind="enabled"),
        LoopChange(loop="b", at=at("2026-11-01T12:00:00Z"), kind="enabled"),
    ])
    since, now = at("2026-11-01T06:00:00Z"), at("2026-11-03T00:00:00Z")
    assert unwatched(["a", "b", "c"], since=since, now=now) == {
        "a": [Gap(at("2026-11-02T00:00:00Z"), at("2026-11-02T01:00:00Z"), "disabled")],
        "b": [Gap(since, at("2026-11-01T12:00:00Z"), "never seen")],
        "c": [Gap(since, now, "never seen")],
    }
    assert unwatched(["a"], since=at("2026-11-02T00:30:00Z"), now=now)["a"] == [
        Gap(at("2026-11-02T00:30:00Z"), at("2026-11-02T01:00:00Z"), "disabled")
    ]
