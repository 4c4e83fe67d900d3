"""The intake doors' answer counter and its multiprocess directory (ops.metrics_intake)."""

from prometheus_client import generate_latest

from ops import metrics_intake


def test_each_address_gets_its_own_emptied_directory(tmp_path):
    first = metrics_intake.prepare_multiprocess_dir(tmp_path, "127.0.0.1:7522")
    (first / "counter_123.db").write_bytes(b"old")
    again = metrics_intake.prepare_multiprocess_dir(tmp_path, "127.0.0.1:7522")
    socket = metrics_intake.prepare_multiprocess_dir(tmp_path, "unix:/run/factory.sock")
    assert (first, again, socket) == (tmp_path / "http-127-0-0-1-7522", first, tmp_path / "http-unix-run-factory-sock")
    assert list(again.iterdir()) == []


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
