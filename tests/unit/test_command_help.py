"""Every positional argument of every management command says what it is (``--help``)."""

import argparse

from django.core.management import get_commands, load_command_class

#: The project's apps: their commands, Django's own that they override (``migrate``, ``flush``) included.
OUR_APPS = {"intake", "ops", "runtime", "schedules"}


def positionals_without_help(parser: argparse.ArgumentParser, path: str) -> list[str]:
    """``"<command> [<subcommand>…] <dest>"`` of each positional under ``parser`` with no help;
    a subcommand counts as a positional of its parent, and its own parser is walked too."""
    missing = []
    for action in parser._actions:
        if action.option_strings:
            continue
        if isinstance(action, argparse._SubParsersAction):
            helped = {choice.dest for choice in action._choices_actions if choice.help}
            for name, subparser in action.choices.items():
                if name not in helped:
                    missing.append(f"{path} {name}")
                missing += positionals_without_help(subparser, f"{path} {name}")
        elif not action.help or action.help == argparse.SUPPRESS:
            missing.append(f"{path} {action.dest}")
    return missing


def test_every_positional_of_every_command_has_help():
    ours = {name: app for name, app in get_commands().items() if app in OUR_APPS}
    assert "schedule" in ours and "approve" in ours
    missing = []
    for name, app in sorted(ours.items()):
        command = load_command_class(app, name)
        missing += positionals_without_help(command.create_parser("manage.py", name), name)
    assert missing == []
