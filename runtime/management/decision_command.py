"""What ``approve``, ``reject`` and ``preview`` share: the operator named by ``--as``, the OS user, exit 2 when refused."""

import getpass
import sys

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from lib.refusals import Refused

EXIT_REFUSED = 2


class DecisionCommand(BaseCommand):
    # A decision replays the plan recorded on the proposal; a typo in the overlay must
    # not stop an operator from deciding (the running service keeps its last good registry).
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("proposal_id", type=int, help="the proposal's id (see `manage.py proposals`)")
        parser.add_argument("--as", dest="username", required=True, help="the operator (needs approve_proposal)")

    def operator(self, username: str):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            self.refuse("unknown_user", f"there is no user {username!r}")
        return user

    @staticmethod
    def os_user() -> str:
        try:
            return getpass.getuser()
        except (KeyError, OSError):
            return "unknown"

    def refuse(self, reason: str, detail: str) -> None:
        self.stderr.write(f"refused: {reason}: {detail}")
        sys.exit(EXIT_REFUSED)

    def decide(self, decision):
        try:
            return decision()
        except Refused as exc:
            self.refuse(exc.code, exc.detail)
