"""The start-up checks on the settings read from the environment."""

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError


@pytest.mark.parametrize("events,github,message", [
    ("same-secret", "same-secret", "are the same; use two different secrets"),
    ("  ", "", "FACTORY_EVENTS_SECRET is only whitespace"),
])
def test_intake_secrets_are_checked_at_start_up(settings, events, github, message):
    settings.FACTORY_EVENTS_SECRET, settings.FACTORY_GITHUB_WEBHOOK_SECRET = events, github
    with pytest.raises(SystemCheckError, match=f"runtime.E004.*{message}"):
        call_command("check")
