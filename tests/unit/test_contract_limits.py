"""The documented limits of registry input (issue 11, list 5): a cadence is at most 366 days
(``cadence_too_long``), and a JSON Schema ``pattern``'s ``$`` is the end of the text, never
the place before a final newline (docs/design.md §4)."""

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from lib.cadence import MAX_CADENCE_SECONDS, CadenceError, CadenceTooLong, parse_every
from lib.json_schema import Validator, python_pattern
from tests.registry_checks import errors, load, set_loop


def test_the_longest_cadence_is_366_days():
    assert parse_every("366d") == MAX_CADENCE_SECONDS == 31_622_400
    assert parse_every("8784h") == MAX_CADENCE_SECONDS


@pytest.mark.parametrize("every", ["367d", "8785h", "999999999d", "99999999999999d", "31622401s"])
def test_a_longer_cadence_is_cadence_too_long(every):
    with pytest.raises(CadenceTooLong) as raised:
        parse_every(every)
    assert (raised.value.code, str(raised.value)) == (
        "cadence_too_long", f"{every!r} is longer than the longest cadence, 366d (31622400s)",
    )


def test_a_cadence_with_a_trailing_newline_is_unparseable():
    with pytest.raises(CadenceError) as raised:
        parse_every("5m\n")
    assert raised.value.code == "unparseable_every"


@pytest.mark.parametrize(("every", "shown"), [(90, "90"), (None, "None"), (["5m"], "['5m']")])
def test_an_every_that_is_not_text_is_unparseable(every, shown):
    with pytest.raises(CadenceError) as raised:
        parse_every(every)
    assert (raised.value.code, str(raised.value)) == (
        "unparseable_every",
        f"{shown} is not a cadence: write a positive integer and one of s, m, h, d (e.g. 90s, 60m, 4h, 7d)",
    )


def test_a_kernel_loop_longer_than_366_days_is_a_load_error(registry_files):
    set_loop(registry_files, "reaper", every="999999999d")
    assert errors(registry_files) == [
        "registry/schedules.json: reaper: cadence_too_long: '999999999d' is longer than the longest cadence, "
        "366d (31622400s)"
    ]


def test_an_overlay_and_a_repo_cadence_longer_than_366_days_are_load_errors(registry_files):
    registry_files.write_config("schedule.yaml", "schedules:\n  reaper:\n    every: 367d\n")
    registry_files.write_config(
        "repos.yaml", "repos:\n  - {name: hello, github: o/hello, base: main, merge_every: 400d}\n",
    )
    config = registry_files.config_dir
    assert errors(registry_files) == [
        f"{config}/repos.yaml: hello: cadence_too_long: '400d' is longer than the longest cadence, 366d (31622400s)",
        f"{config}/schedule.yaml: reaper: cadence_too_long: '367d' is longer than the longest cadence, "
        "366d (31622400s)",
    ]


def test_registry_check_exits_non_zero_with_cadence_too_long(registry_files, capsys):
    set_loop(registry_files, "reaper", every="999999999d")
    with pytest.raises(SystemExit) as exited:
        call_command("registry", "check")
    assert exited.value.code == 1
    assert "registry/schedules.json: reaper: cadence_too_long:" in capsys.readouterr().err


def test_a_366_day_loop_loads(registry_files):
    set_loop(registry_files, "reaper", every="366d")
    assert load(registry_files).loops["reaper"].every == "366d"


@pytest.mark.parametrize("pattern, expected", [
    ("^a$", r"^a\Z"),
    ("^(a|b$)$", r"^(a|b\Z)\Z"),
    (r"^a\$$", r"^a\$\Z"),
    ("^[$]+$", r"^[$]+\Z"),
    (r"^[\]$]$", r"^[\]$]\Z"),
    (r"^\\$", r"^\\\Z"),
    ("^[a$]$", r"^[a$]\Z"),
    ("abc", "abc"),
])
def test_an_unescaped_dollar_outside_a_class_is_the_end_of_the_text(pattern, expected):
    assert python_pattern(pattern) == expected


@pytest.mark.parametrize("text, valid", [("hello", True), ("hello\n", False), ("he\nllo", False)])
def test_pattern_and_pattern_properties_never_match_before_a_final_newline(text, valid):
    schema = {"type": "object", "properties": {"repo": {"pattern": "^[a-z]+$"}},
              "patternProperties": {"^x$": {"type": "integer"}}}
    assert Validator(schema).is_valid({"repo": text}) is valid
    assert Validator(schema).is_valid({"x\n": "not an integer"}) is True
    assert Validator(schema).is_valid({"x": "not an integer"}) is False


def test_a_pattern_properties_error_names_the_key_and_the_pattern():
    schema = {"patternProperties": {"^x": {"type": "integer"}}}
    assert [(error.message, list(error.absolute_path), list(error.absolute_schema_path))
            for error in Validator(schema).iter_errors({"xa": "s", "y": "t"})] == [
        ("'s' is not of type 'integer'", ["xa"], ["patternProperties", "^x", "type"]),
    ]


def test_a_read_deadline_under_a_second_fails_the_system_check(settings):
    settings.FACTORY_HTTP_READ_SECONDS = 0.5
    with pytest.raises(SystemCheckError, match=r"runtime.E003.*FACTORY_HTTP_READ_SECONDS=0.5 is below 1"):
        call_command("check")
