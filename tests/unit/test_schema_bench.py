"""The pure parts of bench/schema_bench.py (issue 29, item 6): the documents it makes, how it judges and
sums up the engines' verdicts, and its table; no engine but the runtime's own is built here."""

import math

from bench import schema_bench
from lib.json_schema import Validator
from lib.json_schema_fast import compile_check
from tests.conftest import PROJECT_DIR


def test_leaf_paths_reach_every_scalar_and_every_empty_container():
    document = {"a": 1, "b": [True, {"c": None}], "d": {}, "e": []}
    assert list(schema_bench.leaf_paths(document)) == [("a",), ("b", 0), ("b", 1, "c"), ("d",), ("e",)]
    assert list(schema_bench.leaf_paths("x")) == [()]


def test_replaced_and_removed_copy_and_leave_the_document_alone():
    document = {"a": {"b": [1, 2]}, "c": 3}
    assert schema_bench.replaced(document, ("a", "b", 1), "x") == {"a": {"b": [1, "x"]}, "c": 3}
    assert schema_bench.removed(document, ("a", "b")) == {"a": {}, "c": 3}
    assert schema_bench.removed(document, ("c",)) == {"a": {"b": [1, 2]}}
    assert schema_bench.replaced(document, (), 5) == 5
    assert document == {"a": {"b": [1, 2]}, "c": 3}


def test_a_path_is_written_as_a_json_pointer():
    assert [schema_bench.pointer(p) for p in [(), ("a",), ("a", 0, "b")]] == ["", "/a", "/a/0/b"]


def test_mutations_put_each_edge_value_in_each_leaf_remove_each_member_and_add_one():
    found = dict(schema_bench.mutations({"s": "v"}))
    edges = len(schema_bench.EDGE_VALUES)
    assert len(found) == edges + 1 + 1 + 1  # each edge value, the newline, one removal, one addition
    assert found["/s = 1.0"] == {"s": 1.0} and found["/s = true"] == {"s": True}
    assert found["/s += '\\n'"] == {"s": "v\n"}
    assert found["/s removed"] == {} and found["/zz-unknown added"] == {"s": "v", "zz-unknown": 1}


def test_verdict_keeps_answers_and_names_what_was_raised():
    assert schema_bench.verdict(lambda d: True, 1) is True
    assert schema_bench.verdict(lambda d: "n/a", 1) == "n/a"
    assert schema_bench.verdict(lambda d: "error: ValidationError building", 1) == "error: ValidationError building"
    assert schema_bench.verdict(lambda d: "\ud800".encode(), 1) == "error: UnicodeEncodeError"
    assert schema_bench.verdict(lambda d: 0, 1) == "error: answered 0"


def rows():
    return [
        {"group": "probe", "case": "\\S on U+001C", "reference": False, "fast": "n/a", "rs": True},
        {"group": "example mutated", "case": "clock-tick.json /key = '\\x1c'", "reference": False, "fast": False,
         "rs": True},
        {"group": "example mutated", "case": "clock-tick.json /slot = '\\ud800'", "reference": False, "fast": False,
         "rs": "error: UnicodeEncodeError"},
        {"group": "random", "case": "random #1", "reference": True, "fast": True, "rs": True},
    ]


def test_disagreements_and_agreement_judge_against_the_reference_and_never_count_n_a():
    assert [row["case"] for row in schema_bench.disagreements(rows(), ["fast"])] == []
    assert len(schema_bench.disagreements(rows(), ["rs"])) == 3
    assert schema_bench.agreement(rows(), "fast") == (3, 3)
    assert schema_bench.agreement(rows(), "rs") == (1, 4)


def test_a_disagreement_is_summed_up_by_what_its_document_differs_by():
    assert [schema_bench.cause(row) for row in rows()] == [
        "\\S on U+001C", "= '\\x1c'", "= '\\ud800'", "random #1"]
    assert schema_bench.cause({"case": "edges.json /merge-scan@1 removed"}) == "/merge-scan@1 removed"
    summed = schema_bench.by_cause(schema_bench.disagreements(rows(), ["rs"]), "rs")
    assert summed == [["= '\\ud800'", False, "error: UnicodeEncodeError", 1, "clock-tick.json"],
                      ["= '\\x1c'", False, True, 1, "clock-tick.json"],
                      ["\\S on U+001C", False, True, 1, "probe"]]


def test_the_table_aligns_its_columns_and_writes_a_missing_figure_as_a_dash():
    assert schema_bench.table(["schema", "µs"], [["a.json", 1.25], ["long-name.json", math.nan]]) == (
        "schema          µs\n"
        "--------------  ---\n"
        "a.json          1.2\n"
        "long-name.json  -")
    assert schema_bench.per_validation_us(0.5, 1000) == 500.0 and math.isnan(schema_bench.per_validation_us(1, 0))


def test_the_unit_tests_cases_are_read_from_their_parametrize_lists():
    cases = schema_bench.test_cases(PROJECT_DIR / "tests" / "unit")
    ours = [case for case in cases if case[0].startswith("test_json_schema_fast.py")]
    assert len(ours) >= 18
    assert ("test_json_schema_fast.py #3", {"type": "integer"}, 1.0, True) in ours


def test_random_cases_are_the_same_for_the_same_seed():
    assert schema_bench.random_cases(50) == schema_bench.random_cases(50)
    assert schema_bench.random_cases(50, seed=1) != schema_bench.random_cases(50)


def test_every_example_of_a_payload_schema_is_valid_and_the_registrys_files_are():
    def is_valid(schema, document):
        return Validator(schema).is_valid(document)

    schemas = schema_bench.schema_files(PROJECT_DIR / "registry")
    for name in ("factory.event.v1.json", "clock-tick.json", "merge-request.json", "factory.command-result.v1.json"):
        assert is_valid(schemas[name], schema_bench.example(schemas[name], is_valid)), name
    users = schema_bench.schema_users(PROJECT_DIR / "registry")
    assert users["factory.event.v1.json"] == ["envelope"] and "payload of clock.tick.reaper" in users["clock-tick.json"]
    labels = [label for _, label, _ in schema_bench.registry_documents(PROJECT_DIR / "registry")]
    assert labels[:3] == ["event-types.json", "schedules.json", "edges.json"] and "definitions/reaper@1.json" in labels


def test_the_fast_check_answers_every_probe_it_takes_as_the_reference_does():
    for label, schema, document, _ in schema_bench.PROBES:
        check = compile_check(schema)
        if check is not None:
            assert check(document) is Validator(schema).is_valid(document), label
