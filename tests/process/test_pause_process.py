"""A pause from the CLI stops the slot loops of other processes from their next iteration, and a
resume starts them again (docs/schedules.md, "Pausing a loop"). Real processes on the suite's
database kind."""

import time

import pytest

from tests.processes import stop, wait_for

pytestmark = [pytest.mark.process, pytest.mark.django_db]

EVERY_SECOND = (
    "schedules:\n  heartbeat:\n    enabled: false\n"
    "  fast:\n    eventType: clock.tick.heartbeat\n    catchUp: none\n    singleton: false\n"
    "    enabled: true\n    every: 1s\n"
)
CONTROLLER = (
    "from django.contrib.auth.models import Permission, User\n"
    "u = User.objects.create_user('carol', password='carol-pass-123')\n"
    "u.user_permissions.add(Permission.objects.get(codename='control_loop'))\n"
)


def fast_ticks(runtime) -> list[dict]:
    return [e for e in runtime.listing("events") if e["eventId"].startswith("clock:fast:")]


def test_a_pause_from_the_cli_stops_the_other_processes_slot_loops_and_a_resume_restarts_them(runtime):
    runtime.write_config("schedule.yaml", EVERY_SECOND)
    runtime.manage("shell", "-v", "0", "-c", CONTROLLER)
    loops = [runtime.start("slot_loop"), runtime.start("slot_loop")]
    try:
        wait_for(lambda: len(fast_ticks(runtime)) >= 2, timeout=40, what="two ticks")
        paused = runtime.manage("schedule", "pause", "fast", "--note", "flooding", "--as", "carol")
        assert paused.stdout.startswith("paused fast until resumed"), paused.stdout
        time.sleep(1.5)  # an iteration already past its checks may still admit its slot
        count = len(fast_ticks(runtime))
        time.sleep(3)
        assert len(fast_ticks(runtime)) == count
        resumed = runtime.manage("schedule", "resume", "fast", "--as", "carol", "--json")
        assert '"paused":false' in resumed.stdout
        wait_for(lambda: len(fast_ticks(runtime)) > count, timeout=15, what="a tick after the resume")
    finally:
        results = [stop(process) for process in loops]
    assert [code for code, _ in results] == [0, 0], results
    refused = runtime.manage("schedule", "resume", "fast", "--as", "carol", check=False)
    assert (refused.returncode, refused.stderr.strip()) == (2, "refused: not_paused: fast is not paused")
