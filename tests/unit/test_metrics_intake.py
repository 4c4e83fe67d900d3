"""The intake doors' answer counter and its multiprocess directory (ops.metrics_intake)."""

import pytest
from prometheus_client import generate_latest

from ops import metrics_intake


def test_each_address_gets_its_own_emptied_directory(tmp_path):
    first = metrics_intake.prepare_multiprocess_dir(tmp_path, "127.0.0.1:7522")
    (first / "counter_123.db").write_bytes(b"old")
    other = metrics_intake.prepare_multiprocess_dir(tmp_path, "127.0.0.1:7600")
    assert (first, other) == (tmp_path / "http-127-0-0-1-7522", tmp_path / "http-127-0-0-1-7600")
    metrics_intake.release_multiprocess_dir(first)
    again = metrics_intake.prepare_multiprocess_dir(tmp_path, "127.0.0.1:7522")
    assert again == first and list(again.iterdir()) == []
    for directory in (again, other):
        metrics_intake.release_multiprocess_dir(directory)
    assert list(tmp_path.iterdir()) == []


def test_a_directory_another_runserve_holds_is_left_as_it_is(tmp_path):
    held = metrics_intake.prepare_multiprocess_dir(tmp_path, "127.0.0.1:7522")
    (held / "counter_123.db").write_bytes(b"live")
    with pytest.raises(metrics_intake.MultiprocessDirInUse, match=f"{held} is in use by another runserve on 127.0.0.1:7522"):
        metrics_intake.prepare_multiprocess_dir(tmp_path, "127.0.0.1:7522")
    assert (held / "counter_123.db").read_bytes() == b"live"
    metrics_intake.release_multiprocess_dir(held)


def test_only_the_doors_are_counted():
    def count(door, status):
        sample = f'factory_intake_answers_total{{door="{door}",status="{status}"}}'
        lines = [line for line in generate_latest(metrics_intake.intake_registry()).decode().splitlines()
                 if line.startswith(sample + " ")]
        return float(lines[0].split()[-1]) if lines else 0.0

    before = count("github", "200")
    metrics_intake.count_answer("/github", 200)
    metrics_intake.count_answer("/status", 200)
    metrics_intake.count_answer("/github/", 200)
    assert count("github", "200") == before + 1
    assert "/status" not in generate_latest(metrics_intake.intake_registry()).decode()
