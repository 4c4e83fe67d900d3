"""The pure parts of the several-process, backlog and overload benchmarks (docs/performance.md, "Several processes
and a backlog"): their arguments, the slot they watch, the figures drawn from their polls, their tables."""

from datetime import UTC, datetime

import pytest

from bench import backlog_bench, claims_bench, overload_bench


def test_claims_bench_defaults_to_one_two_and_four_processes_of_one_run_worker():
    args = claims_bench.parse_args(["--database-url", "postgres://postgres@127.0.0.1:5432/bench_claims"])
    assert (args.processes, args.events, args.runs, args.run_workers, args.adapter) == (
        [1, 2, 4],
        5000,
        300,
        [1],
        "command",
    )


def test_claims_bench_measures_each_count_of_run_workers_and_may_skip_planning():
    args = claims_bench.parse_args(
        ["--database-url", "postgres://h/db", "--processes", "1", "--run-workers", "1", "4", "--events", "0"]
    )
    assert (args.processes, args.run_workers, args.events) == ([1], [1, 4], 0)


@pytest.mark.parametrize(
    "argv",
    [
        [],  # the processes share one PostgreSQL database: it must be named
        ["--database-url", "sqlite:///x.sqlite3"],
        ["--database-url", "postgres://h/db", "--processes", "0"],
        ["--database-url", "postgres://h/db", "--runs", "0"],
        ["--database-url", "postgres://h/db", "--events", "-1"],
        ["--database-url", "postgres://h/db", "--run-workers", "1", "0"],
        ["--database-url", "postgres://h/db", "--adapter", "agent"],
    ],
)
def test_claims_bench_refuses_what_it_cannot_measure(argv, capsys):
    with pytest.raises(SystemExit) as exit:
        claims_bench.parse_args(argv)
    assert exit.value.code == 2


def test_claims_bench_rows_give_rates_per_worker_and_ratios_to_the_first_row():
    results = [
        {
            "processes": 1,
            "runWorkers": 1,
            "events": 5000,
            "planSeconds": 10.0,
            "runs": 200,
            "claimSeconds": 80.0,
            "runSeconds": 0.2444,
            "statuses": {"succeeded": 200},
        },
        {
            "processes": 2,
            "runWorkers": 2,
            "events": 5000,
            "planSeconds": 6.25,
            "runs": 200,
            "claimSeconds": 40.0,
            "runSeconds": 0.31,
            "statuses": {"succeeded": 198, "failed": 2},
        },
    ]
    assert claims_bench.rows(results) == [
        [1, 1, 5000, "10.00", "500", "1.00", 200, "80.00", "2.5", "1.00", "2.5", "244.4", "none"],
        [2, 2, 5000, "6.25", "800", "1.60", 200, "40.00", "5.0", "2.00", "1.2", "310.0", "failed:2"],
    ]
    assert len(claims_bench.rows(results)[0]) == len(claims_bench.HEADERS)


def test_claims_bench_rows_without_planning_say_so():
    result = {
        "processes": 1, "runWorkers": 4, "events": 0, "planSeconds": None, "runs": 600,
        "claimSeconds": 12.0, "runSeconds": 0.0081, "statuses": {"succeeded": 600},
    }
    assert claims_bench.rows([result]) == [
        [1, 4, 0, "—", "—", "—", 600, "12.00", "50.0", "1.00", "12.5", "8.1", "none"]
    ]


def test_backlog_bench_defaults_to_the_issue_sizes():
    args = backlog_bench.parse_args([])
    assert (args.backlog, args.loops, args.lead, args.after, args.database_url) == (50_000, 10_000, 30.0, 10.0, None)


@pytest.mark.parametrize("argv", [["--no-sqlite"], ["--lead", "1"], ["--loops", "0"], ["--backlog", "-1"]])
def test_backlog_bench_refuses_what_it_cannot_measure(argv, capsys):
    with pytest.raises(SystemExit) as exit:
        backlog_bench.parse_args(argv)
    assert exit.value.code == 2


def test_the_watched_slot_is_the_first_minute_at_least_the_lead_away():
    assert backlog_bench.next_slot(datetime(2026, 12, 2, 1, 0, 30, tzinfo=UTC), 20) == datetime(
        2026, 12, 2, 1, 1, tzinfo=UTC
    )
    assert backlog_bench.next_slot(datetime(2026, 12, 2, 1, 0, 45, tzinfo=UTC), 20) == datetime(
        2026, 12, 2, 1, 2, tzinfo=UTC
    )
    assert backlog_bench.next_slot(datetime(2026, 12, 2, 1, 0, 40, tzinfo=UTC), 20) == datetime(
        2026, 12, 2, 1, 1, tzinfo=UTC
    )


def test_the_polls_give_when_the_last_tick_was_seen_and_the_planning_rate_around_it():
    polls = [(100.05, 0, 50_000), (101.0, 4_000, 50_000), (102.5, 10_000, 49_000), (112.5, 10_000, 39_000)]
    assert backlog_bench.summarize(polls, loops=10_000, slot_start=100.0) == {
        "visible": 2.5,
        "backlogAtStart": 50_000,
        "backlogAtLastTick": 49_000,
        "plannedPerSecondDuring": pytest.approx(1000 / 2.45),
        "plannedPerSecondAfter": 1000.0,
        "ticksSeen": 10_000,
    }


def test_a_slot_whose_ticks_never_all_came_says_never():
    summary = backlog_bench.summarize([(100.1, 0, 500), (220.0, 9_000, 100)], loops=10_000, slot_start=100.0)
    assert summary["visible"] is None and summary["ticksSeen"] == 9_000
    row = backlog_bench.rows([{"database": "SQLite 3.40.1", "loops": 10_000, "lastAdmittedLate": 0.3, **summary}])
    assert row == [["SQLite 3.40.1", "10,000", "500", "9,000", "0.30", "never", "—", "—", "—", "missed"]]


def test_backlog_bench_row_says_met_within_one_second():
    result = {
        "database": "PostgreSQL 15.20",
        "loops": 10_000,
        "lastAdmittedLate": 0.12,
        "visible": 0.9,
        "backlogAtStart": 50_000,
        "backlogAtLastTick": 49_750,
        "plannedPerSecondDuring": 277.8,
        "plannedPerSecondAfter": 1012.4,
        "ticksSeen": 10_000,
    }
    assert backlog_bench.rows([result]) == [
        ["PostgreSQL 15.20", "10,000", "50,000", "10,000", "0.12", "0.90", "49,750", "278", "1,012", "met"]
    ]


def test_the_backlog_is_topped_up_by_what_the_planner_drains_before_the_slot_starts():
    # 1,000 a second for the last 1.7 s (the quiet 1.5 s and one look): 1,700 more than the gap.
    assert backlog_bench.top_up(50_000, 49_000, 1000.0, 10.0) == 2_700
    assert backlog_bench.top_up(50_000, 49_000, 1000.0, 1.6) == 2_600
    assert backlog_bench.top_up(50_000, 55_000, 1000.0, 10.0) == 0
    assert backlog_bench.top_up(50_000, 50_000, -20.0, 5.0) == 0


def test_overload_bench_figures_split_lateness_by_the_loops_names_and_keep_the_backlog_s_peak():
    # 8 loops, 2 slots: o-00000/o-00001 are the first quarter of names, o-00006/o-00007 the last.
    ticks = [(f"o-{i:05d}", 0.01 * i + slot, 1 if (i, slot) == (3, 1) else 0) for slot in (0, 1) for i in range(8)]
    ticks.pop()                                           # o-00007's second tick never came
    summary = overload_bench.summarize(ticks, loops=8, slots=2, backlog=[8, 3, 16, 0])
    assert summary == {
        "expected": 16, "admitted": 15, "skipped": 1, "p50": pytest.approx(0.07), "p99": 1.06, "max": 1.06,
        "firstNames": pytest.approx(0.505), "lastNames": pytest.approx(0.07),
        "backlogMax": 16, "backlogEnd": 0,
    }
    row = overload_bench.rows([{"database": "SQLite 3.40.1", "loops": 8, "every": 5, "slots": 2, "workers": 2,
                                "previews": 1234, **summary}])
    assert row == [["SQLite 3.40.1", "8 every 5 s", 2, "1,234", 2, "15 / 16", 1, "0.07", "1.06", "1.06", "0.51 / 0.07",
                    "16 / 0"]]
    assert len(row[0]) == len(overload_bench.HEADERS)


@pytest.mark.parametrize("argv", [["--loops", "3"], ["--every", "0"], ["--every", "5", "--seconds", "9"], ["--no-sqlite"]])
def test_overload_bench_refuses_what_it_cannot_measure(argv):
    with pytest.raises(SystemExit) as exit:
        overload_bench.parse_args(argv)
    assert exit.value.code == 2
