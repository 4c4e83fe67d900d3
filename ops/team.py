"""Who is on the team and in which role (docs/team.md): ``manage.py team add|remove|list``.

A member is a staff user in exactly one of the groups ``Approvers`` and ``Viewers``
(``ops.roles``). Adding creates the person when missing (an unusable password: they set one
with ``manage.py changepassword``) or moves them to the new role; removing takes them out of
both groups, clears ``is_staff`` and revokes their live API tokens. Both are journaled
(``team_member_added``, ``team_member_removed``) with ``actor: "system"``, as ``prune`` is —
a shell names no person of the runtime — and ``via: "cli"`` with the OS user in ``data``. A superuser may do everything whatever their groups, so they are refused here:
make or unmake superusers in the admin.
"""

from datetime import datetime

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction

from lib.refusals import Refused
from runtime.models import Actor
from runtime.services.journal import record

from .api.tokens import revoke_all_tokens
from .roles import APPROVERS, ROLES, VIEWERS

USERNAME_MAX_LENGTH = 150
#: Group name → role name, for listings.
ROLE_OF_GROUP = {group: role for role, group in ROLES.items()}


class TeamRefused(Refused):
    """A team change that may not be made: ``unknown_role``, ``bad_username``, ``bad_email``,
    ``unknown_user``, ``superuser``."""


def _role_of(user) -> str | None:
    names = set(user.groups.filter(name__in=[APPROVERS, VIEWERS]).values_list("name", flat=True))
    return "approver" if APPROVERS in names else ("viewer" if VIEWERS in names else None)


def _refuse_superuser(user) -> None:
    if user.is_superuser:
        raise TeamRefused("superuser", f"{user.get_username()} is a superuser, who may do everything whatever their "
                                       "role: change a superuser in the admin (Users)")


def add_member(username: str, role: str, *, email: str = "", now: datetime, os_user: str) -> dict:
    """Put ``username`` in ``role``'s group (and out of the other), as staff; create the person
    with an unusable password when missing. Returns ``{"user", "role", "previousRole",
    "created"}``. Raises TeamRefused: ``unknown_role``, ``bad_username``, ``bad_email``,
    ``superuser``."""
    if role not in ROLES:
        raise TeamRefused("unknown_role", f"{role[:300]!r} is not a role: {' or '.join(sorted(ROLES))}")
    if not username or len(username) > USERNAME_MAX_LENGTH:
        raise TeamRefused("bad_username", f"a username is 1–{USERNAME_MAX_LENGTH} characters")
    try:
        UnicodeUsernameValidator()(username)
    except ValidationError:
        raise TeamRefused("bad_username", f"{username[:300]!r}: a username is letters, digits and @ . + - _ only") from None
    if email:
        try:
            validate_email(email)
        except ValidationError:
            raise TeamRefused("bad_email", f"{email[:300]!r} is not an e-mail address") from None
    users = get_user_model().objects
    with transaction.atomic():
        user = users.select_for_update().filter(username=username).first()
        created = user is None
        if created:
            user = users.create_user(username, email=email, password=None, is_staff=True)
            previous = None
        else:
            _refuse_superuser(user)
            previous = _role_of(user)
            user.is_staff = True
            fields = ["is_staff"]
            if email:
                user.email = email
                fields.append("email")
            user.save(update_fields=fields)
        user.groups.remove(*Group.objects.filter(name__in=[APPROVERS, VIEWERS]))
        user.groups.add(Group.objects.get(name=ROLES[role]))
        outcome = {"user": username, "role": role, "previousRole": previous, "created": created}
        record("team_member_added", Actor.SYSTEM, at=now, data={**outcome, "via": "cli", "osUser": os_user})
    return outcome


def remove_member(username: str, *, now: datetime, os_user: str) -> dict:
    """Take ``username`` out of both groups, clear ``is_staff``, revoke their live API tokens.
    The account stays (the journal names it). Returns ``{"user", "previousRole",
    "revokedTokens"}``. Raises TeamRefused: ``unknown_user``, ``superuser``."""
    with transaction.atomic():
        user = get_user_model().objects.select_for_update().filter(username=username).first()
        if user is None:
            raise TeamRefused("unknown_user", f"there is no user {username[:300]!r}")
        _refuse_superuser(user)
        previous = _role_of(user)
        user.groups.remove(*Group.objects.filter(name__in=[APPROVERS, VIEWERS]))
        user.is_staff = False
        user.save(update_fields=["is_staff"])
        via = {"via": "cli", "osUser": os_user}
        revoked = revoke_all_tokens(user, now=now, data=via)
        outcome = {"user": username, "previousRole": previous, "revokedTokens": revoked}
        record("team_member_removed", Actor.SYSTEM, at=now, data={**outcome, **via})
    return outcome


def members() -> list[dict]:
    """Everyone in a role, and the superusers, by role (superuser, approver, viewer) then name:
    ``[{"user", "role", "email", "active", "staff", "usablePassword"}]``."""
    people = (get_user_model().objects.filter(is_superuser=True)
              | get_user_model().objects.filter(groups__name__in=[APPROVERS, VIEWERS])).distinct()
    rows = []
    for user in people.prefetch_related("groups"):
        groups = {group.name for group in user.groups.all()}
        role = "superuser" if user.is_superuser else ("approver" if APPROVERS in groups else "viewer")
        rows.append({"user": user.get_username(), "role": role, "email": user.email, "active": user.is_active,
                     "staff": user.is_staff, "usablePassword": user.has_usable_password()})
    order = {"superuser": 0, "approver": 1, "viewer": 2}
    return sorted(rows, key=lambda row: (order[row["role"]], row["user"]))
