"""The listing commands' ``--limit``: a whole number from 1 to 100000, else a usage error (docs/design.md §10)."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError


@pytest.mark.django_db
@pytest.mark.parametrize("limit", ["0", "-1", "99999999999999999999", "abc"])
def test_a_bad_limit_is_a_usage_error(limit):
    with pytest.raises(CommandError, match="is not between 1 and 100000|is not a whole number"):
        call_command("events", "--limit", limit)
