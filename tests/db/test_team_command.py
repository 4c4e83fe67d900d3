"""``manage.py team`` (docs/team.md): add a person as an approver or a viewer, move them, remove
them (tokens revoked), list the team; refusals exit 2."""

import json
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from ops.api.tokens import create_token, live_token
from runtime.models import JournalEntry
from tests.conftest import at

pytestmark = pytest.mark.django_db

NOW = at("2026-11-30T22:00:00Z")


def team(*argv) -> list[str]:
    out = StringIO()
    call_command("team", *argv, stdout=out)
    return out.getvalue().splitlines()


def groups(username: str) -> list[str]:
    return sorted(get_user_model().objects.get(username=username).groups.values_list("name", flat=True))


def test_adding_a_new_person_creates_them_without_a_password():
    assert team("add", "dora", "--role", "viewer", "--email", "dora@example.com") == [
        "created dora as a viewer",
        "dora has no password yet: set one with manage.py changepassword dora",
    ]
    dora = get_user_model().objects.get(username="dora")
    assert (dora.is_staff, dora.is_superuser, dora.is_active, dora.has_usable_password(), dora.email) == (
        True, False, True, False, "dora@example.com")
    assert groups("dora") == ["Viewers"]
    entry = JournalEntry.objects.get(action="team_member_added")
    assert (entry.actor, entry.data["user"], entry.data["role"], entry.data["previousRole"], entry.data["created"],
            entry.data["via"]) == ("system", "dora", "viewer", None, True, "cli")


def test_a_second_add_moves_an_existing_person_and_makes_them_staff(django_user_model):
    django_user_model.objects.create_user("eve", password="eve-pass-123")
    assert team("add", "eve", "--role", "viewer") == ["eve is now a viewer"]
    assert team("add", "eve", "--role", "approver") == ["eve is now an approver (was a viewer)"]
    assert team("add", "eve", "--role", "approver") == ["eve is already an approver"]
    eve = django_user_model.objects.get(username="eve")
    assert (eve.is_staff, eve.has_usable_password(), groups("eve")) == (True, True, ["Approvers"])
    assert eve.has_perm("runtime.approve_proposal") and eve.has_perm("schedules.control_loop")


def test_removing_takes_the_role_the_staff_flag_and_the_tokens():
    team("add", "dora", "--role", "approver")
    dora = get_user_model().objects.get(username="dora")
    _, raw = create_token(dora, "phone", by=dora, now=NOW)
    create_token(dora, "laptop", by=dora, now=NOW)
    assert team("remove", "dora") == [
        "removed dora from the team (was an approver): no longer staff, 2 API token(s) revoked"]
    dora.refresh_from_db()
    assert (dora.is_staff, groups("dora"), live_token(raw)) == (False, [], None)
    assert JournalEntry.objects.filter(action="api_token_revoked").count() == 2
    entry = JournalEntry.objects.get(action="team_member_removed")
    assert (entry.data["user"], entry.data["previousRole"], entry.data["revokedTokens"]) == ("dora", "approver", 2)
    assert team("remove", "dora") == ["removed dora from the team (was in no role): no longer staff, 0 API token(s) revoked"]


def test_listing_names_each_person_and_role(django_user_model):
    django_user_model.objects.create_superuser("root", email="root@example.com", password="root-pass-123")
    team("add", "zoe", "--role", "viewer")
    team("add", "bob", "--role", "approver", "--email", "bob@example.com")
    assert team("list") == [
        "root\tsuperuser\troot@example.com",
        "bob\tapprover\tbob@example.com\tno password",
        "zoe\tviewer\t-\tno password",
    ]
    assert json.loads(team("list", "--json")[0]) == [
        {"user": "root", "role": "superuser", "email": "root@example.com", "active": True, "staff": True,
         "usablePassword": True},
        {"user": "bob", "role": "approver", "email": "bob@example.com", "active": True, "staff": True,
         "usablePassword": False},
        {"user": "zoe", "role": "viewer", "email": "", "active": True, "staff": True, "usablePassword": False},
    ]


def test_an_empty_team_says_how_to_add_someone():
    assert team("list") == ["no one: add a person with manage.py team add USERNAME --role approver|viewer"]


@pytest.mark.parametrize("argv, message", [
    (["add", "dora", "--role", "admin"], "refused: unknown_role: 'admin' is not a role: approver or viewer"),
    (["add", "bad name", "--role", "viewer"],
     "refused: bad_username: 'bad name': a username is letters, digits and @ . + - _ only"),
    (["add", "x" * 151, "--role", "viewer"], "refused: bad_username: a username is 1–150 characters"),
    (["add", "dora", "--role", "viewer", "--email", "nope"], "refused: bad_email: 'nope' is not an e-mail address"),
    (["add", "root", "--role", "viewer"],
     "refused: superuser: root is a superuser, who may do everything whatever their role: "
     "change a superuser in the admin (Users)"),
    (["remove", "root"],
     "refused: superuser: root is a superuser, who may do everything whatever their role: "
     "change a superuser in the admin (Users)"),
    (["remove", "nobody"], "refused: unknown_user: there is no user 'nobody'"),
])
def test_refusals_exit_2_and_change_nothing(django_user_model, argv, message):
    django_user_model.objects.create_superuser("root", password="root-pass-123")
    err = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("team", *argv, stderr=err)
    assert (exited.value.code, err.getvalue().strip()) == (2, message)
    assert list(django_user_model.objects.values_list("username", flat=True)) == ["root"]
    assert groups("root") == []
    assert not JournalEntry.objects.filter(action__startswith="team_").exists()
