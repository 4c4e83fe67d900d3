"""``manage.py team add|remove|list``: who may read and who may decide (docs/team.md).

- ``add USERNAME --role approver|viewer [--email E]``: into that role (out of the other),
  as staff; a new person gets an unusable password and the line that says how to set one.
- ``remove USERNAME``: out of both roles, not staff, their API tokens revoked.
- ``list [--json]``: the superusers and everyone in a role.

Exit 2 on a refusal, with ``refused: <code>: <detail>`` (``ops.team.TeamRefused``:
``unknown_role``, ``bad_username``, ``bad_email``, ``unknown_user``, ``superuser``).
"""

import getpass
import json
import sys

from django.core.management.base import BaseCommand

from ops.team import TeamRefused, add_member, members, remove_member
from runtime import clock

EXIT_REFUSED = 2
A_ROLE = {"approver": "an approver", "viewer": "a viewer"}


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


class Command(BaseCommand):
    help = "Add a person to the team as an approver or a viewer, remove them, or list the team."

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True)
        add = actions.add_parser("add", help="put a person in a role (created when missing), as staff")
        add.add_argument("username", help="the person's username (created when missing)")
        # Not argparse's choices: a wrong role is a refusal like any other (exit 2, refused: …).
        add.add_argument("--role", required=True, help="approver (reads and decides) or viewer (reads)")
        add.add_argument("--email", default="", help="their e-mail address (set or changed)")
        remove = actions.add_parser("remove", help="out of both roles, not staff, API tokens revoked")
        remove.add_argument("username", help="the person's username")
        listing = actions.add_parser("list", help="the superusers and everyone in a role")
        listing.add_argument("--json", action="store_true", help="one JSON array")

    def handle(self, *args, **options):
        try:
            getattr(self, f"_{options['action']}")(options)
        except TeamRefused as exc:
            self.stderr.write(f"refused: {exc.code}: {exc.detail}")
            sys.exit(EXIT_REFUSED)

    def _add(self, options) -> None:
        done = add_member(options["username"], options["role"], email=options["email"],
                          now=clock.database_now(), os_user=_os_user())
        user, role = done["user"], A_ROLE[done["role"]]
        if done["created"]:
            self.stdout.write(f"created {user} as {role}")
            self.stdout.write(f"{user} has no password yet: set one with manage.py changepassword {user}")
        elif done["previousRole"] == done["role"]:
            self.stdout.write(f"{user} is already {role}")
        else:
            was = f" (was {A_ROLE[done['previousRole']]})" if done["previousRole"] else ""
            self.stdout.write(f"{user} is now {role}{was}")

    def _remove(self, options) -> None:
        done = remove_member(options["username"], now=clock.database_now(), os_user=_os_user())
        was = A_ROLE[done["previousRole"]] if done["previousRole"] else "in no role"
        self.stdout.write(f"removed {done['user']} from the team (was {was}): no longer staff, "
                          f"{done['revokedTokens']} API token(s) revoked")

    def _list(self, options) -> None:
        rows = members()
        if options["json"]:
            self.stdout.write(json.dumps(rows))
            return
        if not rows:
            self.stdout.write("no one: add a person with manage.py team add USERNAME --role approver|viewer")
        for row in rows:
            notes = [note for note, shown in (("inactive", not row["active"]), ("not staff", not row["staff"]),
                                              ("no password", not row["usablePassword"])) if shown]
            self.stdout.write(f"{row['user']}\t{row['role']}\t{row['email'] or '-'}" + (f"\t{', '.join(notes)}" if notes else ""))
