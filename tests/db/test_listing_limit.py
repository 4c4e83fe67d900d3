"""The listing commands' ``--limit``: a whole number from 1 to 100000, else a usage error (docs/design.md §10)."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError


@pytest.mark.django_db
@pytest.mark.parametrize("limit", ["0", "-1", "99999999999999999999", "abc"])
def test_a_bad_limit_is_a_usage_error(limit):
    with pytest.raises(CommandError, match="is not between 1 and 100000|is not a whole number"):
        call_command("events", "--limit", limit)


@pytest.mark.django_db
@pytest.mark.parametrize(("limit", "error"), [
    ("abc", "'abc' is not a whole number"),
    ("1_0", "'1_0' is not a whole number"),
    (" 5", "' 5' is not a whole number"),
    ("\u0661\u0662", "'\u0661\u0662' is not a whole number"),
    ("-1", "'-1' is not a whole number"),
    ("0", "0 is not between 1 and 100000"),
    ("100001", "100001 is not between 1 and 100000"),
    ("9" * 400, "9" * 40 + " is not between 1 and 100000"),
])
@pytest.mark.parametrize("command", ["events", "proposals", "runs", "journal"])
def test_a_limit_it_cannot_take_names_the_value_and_reads_only_ascii_digits(command, limit, error):
    with pytest.raises(CommandError) as refused:
        call_command(command, f"--limit={limit}")
    assert str(refused.value) == f"Error: argument --limit: {error}"
