"""Wall times of time-of-day loops, ``"HH:MM"`` (lib/cadence.py)."""

from datetime import time

import pytest

from lib.cadence import CadenceError, parse_wall_time


@pytest.mark.parametrize("at, wall_time", [("00:00", time(0, 0)), ("09:30", time(9, 30)), ("23:59", time(23, 59))])
def test_a_wall_time_is_its_hour_and_minute(at, wall_time):
    assert parse_wall_time(at) == wall_time


@pytest.mark.parametrize("at, shown", [(900, "900"), (None, "None"), ("9:00", "'9:00'"), ("24:00", "'24:00'")])
def test_anything_else_is_refused_by_name(at, shown):
    with pytest.raises(CadenceError) as raised:
        parse_wall_time(at)
    assert str(raised.value) == f"{shown} is not a wall time: write HH:MM, 00:00 to 23:59 (e.g. 09:00)"
