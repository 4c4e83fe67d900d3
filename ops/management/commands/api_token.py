"""``manage.py api_token create|list|revoke``: people's API tokens from a shell (docs/api.md "Tokens").

- ``create USERNAME --label LABEL [--as USERNAME]``: a new token of that person, printed once
  (only its SHA-256 is kept); ``--as`` is who creates it — the person (the default) or a superuser.
- ``list [USERNAME] [--json]``: the tokens, live and revoked, never the tokens themselves.
- ``revoke ID [--as USERNAME]``: refuse the token from now on; ``--as`` defaults to its owner.

Exit 2 when refused (``unknown_user`` and the codes of ``ops.api.tokens.TokenRefused``).
"""

import json
import sys

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from ops.api.tokens import TokenRefused, create_token, revoke_token, token_item
from ops.models import ApiToken
from runtime import clock

EXIT_REFUSED = 2


class Command(BaseCommand):
    help = "Create, list or revoke people's API tokens (a new token is shown once)."

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True)
        create = actions.add_parser("create", help="a new token of USERNAME, shown once")
        create.add_argument("username", help="the person the token acts as")
        create.add_argument("--label", required=True, help="what the token is for, e.g. phone; journaled with its decisions")
        create.add_argument("--as", dest="by", help="who creates it: the person (default) or a superuser")
        listing = actions.add_parser("list", help="the tokens, live and revoked")
        listing.add_argument("username", nargs="?", help="only this person's tokens (default: everyone's)")
        listing.add_argument("--json", action="store_true", help="one JSON array")
        revoke = actions.add_parser("revoke", help="refuse a token from now on")
        revoke.add_argument("token_id", type=int, help="the token's id (see `api_token list`)")
        revoke.add_argument("--as", dest="by", help="who revokes it: its person (default) or a superuser")

    def handle(self, *args, **options):
        try:
            getattr(self, f"_{options['action']}")(options)
        except TokenRefused as exc:
            self._refuse(exc.code, exc.detail)

    def _refuse(self, code: str, detail: str) -> None:
        self.stderr.write(f"refused: {code}: {detail}")
        sys.exit(EXIT_REFUSED)

    def _user(self, username: str):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            self._refuse("unknown_user", f"there is no user {username!r}")
        return user

    def _create(self, options) -> None:
        owner = self._user(options["username"])
        by = self._user(options["by"]) if options["by"] else owner
        token, raw = create_token(owner, options["label"], by=by, now=clock.database_now())
        self.stdout.write(f"API token {token.pk} of {owner.get_username()} labelled {token.label!r}; "
                          "it is shown only now:")
        self.stdout.write(raw)

    def _list(self, options) -> None:
        tokens = ApiToken.objects.select_related("user").order_by("id")
        if options["username"]:
            tokens = tokens.filter(user=self._user(options["username"]))
        items = [token_item(token) for token in tokens]
        if options["json"]:
            self.stdout.write(json.dumps(items))
            return
        for item in items:
            state = f"revoked {item['revokedAt']}" if item["revokedAt"] else "live"
            self.stdout.write(f"{item['id']}\t{item['user']}\t{item['label']}\t{item['prefix']}…\t"
                              f"created {item['createdAt']}\t{state}")

    def _revoke(self, options) -> None:
        token = ApiToken.objects.select_related("user").filter(pk=options["token_id"]).first()
        if token is None:
            self._refuse("not_found", f"there is no API token {options['token_id']}")
        by = self._user(options["by"]) if options["by"] else token.user
        revoke_token(token.pk, by=by, now=clock.database_now())
        self.stdout.write(f"revoked API token {token.pk} ({token.label!r}) of {token.user.get_username()}")
