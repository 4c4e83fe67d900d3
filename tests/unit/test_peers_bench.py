"""The pure parts of bench/peers_bench.py: its arguments, its numbers and ratios, its tables.

No database, no network, no virtualenv: the module is imported (`bench.peers_bench`) and only its
functions are called (the peers are never installed by the test suite).
"""

import argparse

import pytest

from bench import peers_bench


def test_loops_are_a_comma_separated_list_of_counts():
    assert peers_bench.parse_loops("100,1000,10000") == [100, 1000, 10000]
    assert peers_bench.parse_loops("10_000") == [10000]


@pytest.mark.parametrize("text", ["", "ten", "100,", "100;1000", "0", "100,-5", "1.5"])
def test_loops_refuse_anything_but_positive_counts(text):
    with pytest.raises(argparse.ArgumentTypeError):
        peers_bench.parse_loops(text)


def test_databases_are_sqlite_and_postgresql_only():
    assert peers_bench.parse_databases("postgresql,sqlite") == ["postgresql", "sqlite"]
    with pytest.raises(
        argparse.ArgumentTypeError, match="'sqlite,mysql': a comma-separated list of sqlite, postgresql"
    ):
        peers_bench.parse_databases("sqlite,mysql")


def test_defaults_are_the_documented_run():
    args = peers_bench.parse_args([])
    assert (args.loops, args.databases, args.repeat, args.child_timeout) == (
        [100, 1000, 10000], ["sqlite", "postgresql"], 3, 600)
    assert args.postgres_url == "postgres://postgres@127.0.0.1:5432/postgres"


@pytest.mark.parametrize(
    "argv",
    [["--loops", "x"], ["--repeat", "0"], ["--databases", "oracle"], ["--postgres-url", "mysql://localhost/db"]],
)
def test_bad_arguments_exit_with_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        peers_bench.parse_args(argv)
    assert exited.value.code == 2
    assert "error: " in capsys.readouterr().err


def test_a_postgres_url_is_not_checked_for_a_sqlite_only_run():
    assert peers_bench.parse_args(["--databases", "sqlite", "--postgres-url", "x"]).databases == ["sqlite"]


@pytest.mark.parametrize(
    "value, text", [(0.02134, "0.021"), (1.456, "1.46"), (19.54, "19.5"), (103.4, "103"), (1234.5, "1,234")]
)
def test_numbers_keep_three_significant_figures(value, text):
    assert peers_bench.number(value) == text


@pytest.mark.parametrize(
    "peer, runtime, text",
    [
        (103.0, 13.9, "7.4×"),
        (1.41, 0.054, "26×"),
        (2140.0, 2.0, "1,070×"),
        (0.856, 19.5, "0.044×"),
        (1.0, 0.0, "—"),
        (None, 4.5, "—"),
    ],  # fmt: skip
)
def test_ratios_are_peer_over_this_runtime(peer, runtime, text):
    assert peers_bench.ratio(peer, runtime) == text


def result(system, loops, burst, idle, burst_statements, idle_statements, database="sqlite"):
    return {
        "system": system, "databaseKey": database, "loops": loops, "burstSeconds": burst,
        "idleMilliseconds": idle, "burstStatements": burst_statements, "idleStatements": idle_statements,
    }  # fmt: skip


ROUNDS = [
    result("runtime", 100, 0.05, 20.0, 7, 9),
    result("celery-beat", 100, 1.5, 0.9, 500, 1),
    result("apscheduler", 100, 0.6, 0.4, 102, 2),
    result("runtime", 100, 0.07, 18.0, 7, 9),
    result("celery-beat", 100, 1.3, 0.8, 500, 1),
    result("apscheduler", 100, 0.7, 0.5, 102, 2),
    result("runtime", 100, 0.06, 30.0, 7, 9),
    result("celery-beat", 100, 1.4, 1.0, 500, 1),
    result("apscheduler", 100, 0.8, 0.46, 102, 2),
]


def test_the_table_gives_the_rounds_medians_and_their_ratios():
    lines = peers_bench.figures_table(ROUNDS, {"sqlite": "SQLite 3.40.1"}).splitlines()
    assert [cell.strip() for cell in lines[0].strip("| ").split("|")] == [
        "database", "loops", "runtime burst s", "runtime idle ms", "celery-beat burst s", "celery-beat idle ms",
        "APScheduler burst s", "APScheduler idle ms", "celery-beat ÷ runtime burst", "celery-beat ÷ runtime idle",
        "APScheduler ÷ runtime burst", "APScheduler ÷ runtime idle",
    ]  # fmt: skip
    assert [cell.strip() for cell in lines[2].strip("| ").split("|")] == [
        "SQLite 3.40.1", "100", "0.060", "20.0", "1.40", "0.900", "0.700", "0.460", "23×", "0.045×", "12×", "0.023×",
    ]  # fmt: skip
    assert len(lines) == 3


def test_the_statements_table_counts_per_due_loop():
    lines = peers_bench.statements_table(ROUNDS, {}).splitlines()
    assert [cell.strip() for cell in lines[2].strip("| ").split("|")] == [
        "SQLite", "100", "0.07", "9", "5.00", "1", "1.02", "2",
    ]  # fmt: skip


def test_a_burst_longer_than_the_interval_has_no_idle_figure():
    rounds = [
        result("runtime", 10000, 2.26, 4.96, 100, 9),
        result("celery-beat", 10000, 75.0, None, 50000, None),
        result("apscheduler", 10000, 21.1, 0.536, 10002, 2),
    ]
    row = peers_bench.figures_table(rounds, {}).splitlines()[2]
    assert [cell.strip() for cell in row.strip("| ").split("|")] == [
        "SQLite", "10,000", "2.26", "4.96", "75.0", "—", "21.1", "0.536", "33×", "—", "9.3×", "0.11×",
    ]  # fmt: skip
    row = peers_bench.statements_table(rounds, {}).splitlines()[2]
    assert [cell.strip() for cell in row.strip("| ").split("|")][4:6] == ["5.00", "—"]


def test_a_system_stopped_at_its_time_limit_is_shown_as_longer_than_it():
    stopped = {**result("celery-beat", 10000, None, None, None, None), "stoppedAfter": 600}
    rounds = [result("runtime", 10000, 0.9, 0.7, 30, 2), stopped, result("apscheduler", 10000, 21.1, 0.536, 10002, 2)]
    row = peers_bench.figures_table(rounds, {}).splitlines()[2]
    assert [cell.strip() for cell in row.strip("| ").split("|")][4:10] == [
        "> 600 (stopped)", "—", "21.1", "0.536", "> 667×", "—",
    ]  # fmt: skip
    row = peers_bench.statements_table(rounds, {}).splitlines()[2]
    assert [cell.strip() for cell in row.strip("| ").split("|")][4:6] == ["—", "—"]


def test_a_child_past_its_time_limit_is_stopped_and_reported(monkeypatch, tmp_path):
    def too_slow(argv, **kwargs):
        raise peers_bench.subprocess.TimeoutExpired(argv, kwargs["timeout"])

    monkeypatch.setattr(peers_bench.subprocess, "run", too_slow)
    args = peers_bench.parse_args(["--databases", "sqlite", "--child-timeout", "5"])
    assert peers_bench.run_child("apscheduler", "sqlite", 100, args, tmp_path / "python") == {
        "system": "apscheduler", "databaseKey": "sqlite", "loops": 100, "stoppedAfter": 5,
        "burstSeconds": None, "idleMilliseconds": None, "burstStatements": None, "idleStatements": None,
    }  # fmt: skip
