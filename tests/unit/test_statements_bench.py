"""The pure parts of bench/statements.py (issue 29, "round trips, counted"): what a count adds up
to and the rows the intake and claims benches print. No database: only its functions are called."""

from collections import Counter

from bench import statements


def test_round_trips_add_begin_and_commit_on_postgresql_and_the_commit_on_sqlite():
    postgresql = statements.Count("postgresql", statements=Counter({("claim", "SELECT"): 5, ("claim", "UPDATE"): 1}),
                                  commits=Counter({"claim": 1}), health_checks=1)
    assert (postgresql.total(), postgresql.round_trips("claim"), postgresql.round_trips()) == (6, 8, 9)
    sqlite = statements.Count("sqlite", statements=Counter({("all", "BEGIN"): 1, ("all", "INSERT"): 2}),
                              commits=Counter({"all": 1}))
    assert (sqlite.total(), sqlite.round_trips(), sqlite.verbs()) == (3, 4, "BEGIN 1, INSERT 2")
    assert statements.Count("sqlite").verbs() == "none"


def test_the_door_rows_say_per_request_and_per_admission_of_a_group():
    result = {
        "vendor": "postgresql",
        "request": {"statements": 1, "verbs": "WITH 1", "roundTrips": 1, "min": 1, "max": 2, "median": 1},
        "duplicate": {"statements": 2, "verbs": "SELECT 1, WITH 1", "roundTrips": 2},
        "group": {"admissions": 16, "statements": 1, "verbs": "WITH 1", "roundTrips": 1},
    }
    rows = statements.door_rows(result)
    assert [row[1] for row in rows] == [
        "signed POST /events, admitted (a group of one)", "signed POST /events, duplicate",
        "one group commit of 16 admissions",
    ]
    assert (rows[0][4], rows[2][4]) == ("1 (min 1, max 2)", "1 (0.06 an admission)")
    assert all(len(row) == len(statements.DOOR_HEADERS) for row in rows)


def test_the_run_rows_give_each_phase_then_the_whole_run():
    phase = {"statements": 1, "verbs": "SELECT 1", "roundTrips": 1}
    result = {"vendor": "postgresql", "runs": 5, "idle": phase, **{p: phase for p in statements.RUN_PHASES},
              "run": {"statements": 4, "verbs": "SELECT 4", "roundTrips": 6, "min": 6, "max": 7, "texts": []}}
    rows = statements.run_rows(result)
    assert len(rows) == 2 + len(statements.RUN_PHASES)
    assert rows[-1][1:] == ["a whole run, claim to finish (median of 5)", 4, "SELECT 4", "6 (min 6, max 7)"]
