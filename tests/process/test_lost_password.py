"""A lost operator password, recovered with the README's commands on a fresh database
(README, "A lost operator password")."""

import subprocess
import sys

from tests.conftest import PROJECT_DIR
from tests.processes import MANAGE

NEW_PASSWORD = "a-new-operator-pass-789"


def can_sign_in(runtime, password: str) -> bool:
    code = ("from django.contrib.auth import authenticate; "
            f"print(authenticate(username='operator', password={password!r}) is not None)")
    return runtime.manage("shell", "-c", code).stdout.strip().splitlines()[-1] == "True"


def change_password(runtime, username: str, typed: str) -> subprocess.CompletedProcess:
    # A new session has no terminal: getpass reads the typed lines from stdin, as it would from a person.
    return subprocess.run(
        [sys.executable, MANAGE, "changepassword", username], input=typed, env=runtime.env, cwd=PROJECT_DIR,
        capture_output=True, text=True, timeout=60, start_new_session=True,
    )


def test_changepassword_sets_a_lost_operator_password_and_the_old_one_stops_working(runtime):
    assert runtime.manage("ensure_operator").stdout == (
        "operator account 'operator' created with the password from FACTORY_OPERATOR_PASSWORD\n")
    assert runtime.manage("team", "list").stdout.split() == ["operator", "superuser", "-"]
    changed = change_password(runtime, "operator", f"{NEW_PASSWORD}\n{NEW_PASSWORD}\n")
    assert (changed.returncode, changed.stdout.splitlines()[-1]) == (
        0, "Password changed successfully for user 'operator'")
    assert (can_sign_in(runtime, NEW_PASSWORD), can_sign_in(runtime, "operator-pass-123")) == (True, False)


def test_setting_the_operator_password_again_in_the_environment_changes_nothing(runtime):
    runtime.manage("ensure_operator")
    again = runtime.manage("ensure_operator", FACTORY_OPERATOR_PASSWORD=NEW_PASSWORD)
    assert again.stdout == "operator account 'operator' exists\n"
    assert (can_sign_in(runtime, NEW_PASSWORD), can_sign_in(runtime, "operator-pass-123")) == (False, True)

