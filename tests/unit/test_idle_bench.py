"""The pure parts of the idle benchmark (docs/performance.md, "An idle second"): its arguments, the
overlay it writes, its reading of ``/proc`` lines and command lines, and the CPU per second drawn
from two samples."""

import pytest
import yaml

from bench import idle_bench


def test_loops_are_comma_separated_counts():
    assert idle_bench.parse_loops("100,10000,1e5") == [100, 10_000, 100_000]
    assert idle_bench.parse_loops("100_000") == [100_000]
    for bad in ("", "0", "10,-1"):
        with pytest.raises(ValueError):
            idle_bench.parse_loops(bad)


def test_the_overlay_declares_enabled_hourly_watched_loops():
    loops = yaml.safe_load(idle_bench.overlay_yaml(3))["schedules"]
    assert list(loops) == ["idle-000000", "idle-000001", "idle-000002"]
    assert loops["idle-000002"] == {
        "eventType": "clock.tick.reaper", "every": "60m", "catchUp": "none", "singleton": True, "enabled": True,
    }


def test_a_stat_line_gives_the_parent_and_every_cpu_tick_of_the_process_and_its_reaped_children():
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime …
    line = "4242 (python3 manage) S 4200 4200 4200 0 -1 4194560 100 0 0 0 70 11 5 3 20 0 3 0 12345 0"
    assert idle_bench.parse_stat(line) == (4200, 70 + 11 + 5 + 3)


@pytest.mark.parametrize(
    ("argv", "parent", "role"),
    [
        (["python", "/x/manage.py", "runserve", "--bind", "127.0.0.1:1"], None, "supervisor"),
        (["python /x/manage.py slot_loop --skip-checks"], None, "slot loop"),  # a rewritten title
        (["python", "/x/manage.py", "worker", "--skip-checks"], None, "run worker"),
        (["gunicorn: master [factory_site.wsgi:application]"], ["python /x/manage.py runserve"], "gunicorn master"),
        (["gunicorn: worker [factory_site.wsgi:application]"], ["gunicorn: master [x]"], "HTTP worker"),
        (["/bin/true"], ["python", "manage.py", "worker"], "other"),
    ],
)
def test_a_process_role_comes_from_its_command_line(argv, parent, role):
    assert idle_bench.role_of(argv, parent) == role


def test_cpu_per_second_is_per_role_over_the_window():
    ticks = idle_bench.CLOCK_TICKS
    before = idle_bench.Sample(10.0, {1: ("supervisor", 100, 0), 2: ("HTTP worker", 50, 10**9), 3: ("HTTP worker", 0, 0),
                                      4: ("other", 7, 7)})
    after = idle_bench.Sample(
        30.0,
        {1: ("supervisor", 100 + ticks, 0), 2: ("HTTP worker", 50 + ticks // 10, 10**9 + 2 * 10**7),
         3: ("HTTP worker", ticks // 10, 0), 5: ("slot loop", ticks // 2, 10**8)},
    )
    roles = idle_bench.cpu_per_second(before, after)
    assert roles["supervisor"] == (1, pytest.approx(50.0), 0.0)  # 1 s of CPU in 20 s
    assert roles["HTTP worker"] == (2, pytest.approx(10.0), pytest.approx(1.0))
    assert roles["slot loop"] == (1, pytest.approx(25.0), pytest.approx(5.0))  # started in the window: from 0
    assert roles["other"] == (0, 0.0, 0.0)  # gone: its parent's cutime has what it used
