"""The pure parts of bench/intake_bench.py (issue 31): its arguments, the door ÷ floor ratio,
the CPU per answer. No database, no processes: the module is imported (`bench.intake_bench`) and only its
functions are called."""

import pytest

from bench import intake_bench


def test_defaults_run_the_floor_around_8_and_32_clients_on_sqlite():
    args = intake_bench.parse_args([])
    assert (args.clients, args.requests, args.duplicates, args.http_workers, args.no_floor, args.no_sqlite,
            args.repeat) == ([8, 32], 4000, [0.0, 0.5], 2, False, False, 1)
    assert args.database_url is None


def test_no_floor_skips_it_and_the_rest_parses():
    args = intake_bench.parse_args([
        "--no-floor", "--clients", "32", "--duplicates", "0", "--requests", "10000",
        "--database-url", "postgres://postgres@127.0.0.1:5432/bench_intake", "--no-sqlite", "--warmup", "0",
    ])
    assert args.no_floor and args.no_sqlite
    assert (args.clients, args.duplicates, args.requests, args.warmup) == ([32], [0.0], 10000, 0)


@pytest.mark.parametrize(
    "argv",
    [["--clients", "0"], ["--requests", "0"], ["--http-workers", "0"], ["--duplicates", "1"], ["--duplicates", "-0.1"],
     ["--clients", "many"], ["--repeat", "0"]],
)
def test_arguments_out_of_range_are_refused(argv):
    with pytest.raises(SystemExit):
        intake_bench.parse_args(argv)


def test_ratio_is_the_door_over_the_mean_of_the_floor_runs_around_it():
    assert intake_bench.floor_ratio(1200.0, [3000.0, 5000.0]) == pytest.approx(0.3)
    assert intake_bench.floor_ratio(2400.0, [4000.0]) == pytest.approx(0.6)
    assert intake_bench.percent(intake_bench.floor_ratio(2400.0, [4000.0])) == "60%"


def test_without_a_floor_run_there_is_no_ratio():
    assert intake_bench.floor_ratio(1200.0, []) is None
    assert intake_bench.floor_ratio(1200.0, [0.0]) is None
    assert intake_bench.percent(None) == "—"


def test_cpu_per_answer_is_milliseconds_of_the_difference_over_the_answers():
    assert intake_bench.cpu_ms_per_answer(10.0, 13.6, 4000) == pytest.approx(0.9)
    assert intake_bench.cpu_ms_per_answer(0.0, 1.0, 0) == 0.0


def test_the_table_names_both_sides():
    headers = intake_bench.HEADERS
    assert {"door admitted/s", "floor answers/s", "door ÷ floor", "door p99 ms", "floor p99 ms", "load (1 min)"} <= set(headers)


def test_repeated_runs_are_summed_up_by_their_median_and_range_and_single_runs_are_not():
    ratios = {
        ("SQLite 3.40.1", 32, "0%"): [0.47, 0.41, 0.55, 0.49],
        ("SQLite 3.40.1", 8, "0%"): [0.60],
        ("PostgreSQL 15.20", 32, "0%"): [0.38, 0.45, 0.35],
    }
    assert intake_bench.summary_rows(ratios) == [
        ["SQLite 3.40.1", 32, "0%", 4, "48%", "41%–55%"],
        ["PostgreSQL 15.20", 32, "0%", 3, "38%", "35%–45%"],
    ]
    assert intake_bench.summary_rows({}) == []
