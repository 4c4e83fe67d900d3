"""The roles that ship (docs/team.md): the groups Approvers and Viewers exist on a fresh database
with exactly their permissions, and writing them again changes nothing."""

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command

from ops.roles import sync_roles

pytestmark = pytest.mark.django_db

VIEWERS = [
    "view_alert", "view_event", "view_journalentry", "view_keyedeventapplied", "view_keyedschedule",
    "view_loopchange", "view_looppause", "view_notification", "view_outboxentry", "view_preview",
    "view_processrecord", "view_proposal", "view_queuelane", "view_run", "view_schedulestate",
    "view_schedulesync", "view_slotloopstatus", "view_tickemitterlease",
]
APPROVERS = sorted([*VIEWERS, "approve_proposal", "control_loop"])


def codenames(name: str) -> list[str]:
    return sorted(Group.objects.get(name=name).permissions.values_list("codename", flat=True))


def test_a_fresh_database_has_both_groups_with_their_exact_permissions():
    assert codenames("Viewers") == VIEWERS
    assert codenames("Approvers") == APPROVERS


def test_neither_group_may_change_or_delete_anything_nor_see_people_or_tokens():
    held = Permission.objects.filter(group__name__in=["Approvers", "Viewers"])
    assert not held.filter(codename__regex=r"^(add|change|delete)_").exists()
    assert not held.filter(content_type__app_label="auth").exists()
    assert not held.filter(codename="view_apitoken").exists()


def test_syncing_again_restores_the_exact_sets_and_is_idempotent():
    viewers = Group.objects.get(name="Viewers")
    viewers.permissions.add(Permission.objects.get(codename="delete_journalentry"))
    Group.objects.get(name="Approvers").permissions.remove(Permission.objects.get(codename="control_loop"))
    assert sync_roles() == {"Viewers": VIEWERS, "Approvers": APPROVERS}
    assert sync_roles() == {"Viewers": VIEWERS, "Approvers": APPROVERS}
    assert (codenames("Viewers"), codenames("Approvers")) == (VIEWERS, APPROVERS)
    assert Group.objects.filter(name__in=["Approvers", "Viewers"]).count() == 2


def test_migrate_writes_the_groups_again():
    Group.objects.filter(name="Viewers").delete()
    call_command("migrate", verbosity=0)
    assert codenames("Viewers") == VIEWERS
