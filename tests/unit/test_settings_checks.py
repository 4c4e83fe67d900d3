"""The start-up checks on the settings read from the environment."""

from io import StringIO
from pathlib import Path

import pytest
from django.core.checks import WARNING
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from runtime.checks import check_config_dir


@pytest.mark.parametrize("events,github,message", [
    ("same-secret", "same-secret", "are the same; use two different secrets"),
    ("  ", "", "FACTORY_EVENTS_SECRET is only whitespace"),
])
def test_intake_secrets_are_checked_at_start_up(settings, events, github, message):
    settings.FACTORY_EVENTS_SECRET, settings.FACTORY_GITHUB_WEBHOOK_SECRET = events, github
    with pytest.raises(SystemCheckError, match=f"runtime.E004.*{message}"):
        call_command("check")


def test_a_config_dir_that_does_not_exist_is_a_warning_naming_the_setting_and_the_path(settings, tmp_path):
    missing = tmp_path / "confg"  # a typo in a unit file
    settings.FACTORY_CONFIG_DIR = missing
    assert [(m.level, m.id, m.msg, m.hint) for m in check_config_dir()] == [(
        WARNING, "runtime.W002",
        f"FACTORY_CONFIG_DIR {missing} does not exist: the runtime runs without its overlay (schedule.yaml) "
        "and its repos (repos.yaml): no overlay loops, no repo loops, every GitHub delivery unconfigured_repo",
        "create the directory, or correct FACTORY_CONFIG_DIR in .env or the service's environment",
    )]
    out, err = StringIO(), StringIO()
    call_command("check", stdout=out, stderr=err)  # a warning: the runtime still starts
    assert err.getvalue().splitlines() == [
        "System check identified some issues:",
        "",
        "WARNINGS:",
        f"?: (runtime.W002) FACTORY_CONFIG_DIR {missing} does not exist: the runtime runs without its overlay "
        "(schedule.yaml) and its repos (repos.yaml): no overlay loops, no repo loops, every GitHub delivery "
        "unconfigured_repo",
        "\tHINT: create the directory, or correct FACTORY_CONFIG_DIR in .env or the service's environment",
        "",
        "System check identified 1 issue (0 silenced).",
    ]


def test_a_config_dir_that_is_a_file_names_the_setting_beside_the_registrys_errors(settings, tmp_path):
    a_file = tmp_path / "config"
    a_file.write_text("")
    settings.FACTORY_CONFIG_DIR = a_file
    assert [(m.level, m.id, m.msg) for m in check_config_dir()] == [(
        WARNING, "runtime.W002",
        f"FACTORY_CONFIG_DIR {a_file} is not a directory: its schedule.yaml and repos.yaml cannot be read "
        "(runtime.E001 names each)",
    )]
    with pytest.raises(SystemCheckError) as refused:
        call_command("check")
    assert f"(runtime.E001) {a_file}/repos.yaml: <file>: unreadable_file" in str(refused.value)
    assert f"(runtime.W002) FACTORY_CONFIG_DIR {a_file} is not a directory" in str(refused.value)


def test_the_default_config_dir_of_the_repository_is_quiet(settings):
    settings.FACTORY_CONFIG_DIR = Path(settings.BASE_DIR) / "config"
    assert check_config_dir() == []
