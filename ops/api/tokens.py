"""People's API tokens: create (shown once), list, revoke, and look one up (docs/api.md "Tokens").

A token is ``fct_`` followed by ``secrets.token_urlsafe(32)`` (256 random bits); only its
SHA-256 (hex) is stored, so a stolen table decides nothing. Creating and revoking are
journaled (``api_token_created`` / ``api_token_revoked``, ``actor: "operator"``). A person
creates and revokes their own tokens; a superuser may do so for anyone.
"""

import hashlib
import logging
import secrets
from datetime import datetime

from django.db import IntegrityError, transaction

from lib.instants import format_instant
from lib.refusals import Refused
from ops.models import ApiToken
from runtime.models import Actor
from runtime.services.journal import record

logger = logging.getLogger(__name__)

TOKEN_PREFIX = "fct_"
#: Characters of the token kept in clear, to tell a person's tokens apart ("fct_" and 8 more).
SHOWN_PREFIX_LENGTH = 12
LABEL_MAX_LENGTH = 100


class TokenRefused(Refused):
    """A token change that may not be made: ``label_invalid`` (400), ``permission_denied`` or
    ``cannot_use_api`` (403), ``not_found`` (404), ``label_taken`` or ``already_revoked`` (409)."""

    STATUS = {"label_invalid": 400, "permission_denied": 403, "cannot_use_api": 403, "not_found": 404,
              "label_taken": 409, "already_revoked": 409}

    def __init__(self, code: str, detail: str):
        super().__init__(code, detail, status=self.STATUS[code])


def token_digest(raw: str) -> str:
    """The stored form of a token: SHA-256 of its UTF-8 text, 64 hex digits."""
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def _may_manage(actor, owner) -> bool:
    return actor is not None and actor.is_active and (actor.pk == owner.pk or actor.is_superuser)


def _clean_label(label: str) -> str:
    label = label.strip()
    if not label or len(label) > LABEL_MAX_LENGTH or not label.isprintable():
        raise TokenRefused("label_invalid", f"a label is 1–{LABEL_MAX_LENGTH} printable characters, e.g. 'phone' or 'chat-bot'")
    return label


def create_token(owner, label: str, *, by, now: datetime) -> tuple[ApiToken, str]:
    """A new live token of ``owner`` named ``label``, made by ``by``; returns the row and the
    token itself, which is never stored and cannot be shown again.

    Raises TokenRefused: ``permission_denied`` (``by`` is neither ``owner`` nor a superuser),
    ``cannot_use_api`` (``owner`` is not an active staff user, whom ``ops.api.auth.MayRead``
    would refuse: the token could never be used), ``label_invalid``, ``label_taken``
    (``owner`` has a live token of that label).
    """
    if not _may_manage(by, owner):
        raise TokenRefused("permission_denied", f"only {owner.get_username()} or a superuser may create their tokens")
    if not (owner.is_active and owner.is_staff):
        raise TokenRefused("cannot_use_api", f"{owner.get_username()} is not an active staff user, so the API would "
                                             "refuse the token: give them a role first (manage.py team add)")
    label = _clean_label(label)
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    try:
        with transaction.atomic():
            token = ApiToken.objects.create(
                user=owner, label=label, prefix=raw[:SHOWN_PREFIX_LENGTH], digest=token_digest(raw),
                created_at=now, created_by=by,
            )
            record("api_token_created", Actor.OPERATOR, at=now, actor_name=by.get_username(),
                   data={"tokenId": token.pk, "owner": owner.get_username(), "label": label, "prefix": token.prefix})
    except IntegrityError:
        raise TokenRefused("label_taken", f"{owner.get_username()} already has a live token labelled {label!r}") from None
    logger.info("API token %s of %s created by %s", token.prefix, owner.get_username(), by.get_username(),
                extra={"action": "api_token_created", "token": token.pk})
    return token, raw


def revoke_token(token_id: int, *, by, now: datetime) -> ApiToken:
    """Revoke a live token for good, as ``by``; returns the row.

    Raises TokenRefused: ``not_found``, ``permission_denied``, ``already_revoked``.
    """
    token = ApiToken.objects.select_related("user").filter(pk=token_id).first()
    if token is None:
        raise TokenRefused("not_found", f"there is no API token {token_id}")
    if not _may_manage(by, token.user):
        raise TokenRefused("permission_denied", f"only {token.user.get_username()} or a superuser may revoke this token")
    with transaction.atomic():
        if not ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=now):
            raise TokenRefused("already_revoked", f"API token {token_id} is already revoked")
        record("api_token_revoked", Actor.OPERATOR, at=now, actor_name=by.get_username(),
               data={"tokenId": token.pk, "owner": token.user.get_username(), "label": token.label,
                     "prefix": token.prefix})
    token.refresh_from_db(fields=["revoked_at"])
    logger.info("API token %s of %s revoked by %s", token.prefix, token.user.get_username(), by.get_username(),
                extra={"action": "api_token_revoked", "token": token.pk})
    return token


def live_token(raw: str) -> ApiToken | None:
    """The live token whose digest is ``raw``'s, with its user, or None.

    The lookup is by digest through a unique index: equal digests are the only match, so
    no timing of the comparison tells anything about a stored token.
    """
    if not raw.startswith(TOKEN_PREFIX):
        return None
    return ApiToken.objects.select_related("user").filter(digest=token_digest(raw), revoked_at__isnull=True).first()


def token_item(token: ApiToken) -> dict:
    """A token as ``api_token list --json`` shows it: never the token, only its prefix."""
    return {
        "id": token.pk,
        "user": token.user.get_username(),
        "label": token.label,
        "prefix": token.prefix,
        "createdAt": format_instant(token.created_at),
        "revokedAt": format_instant(token.revoked_at) if token.revoked_at else None,
    }


def revoke_all_tokens(owner, *, now: datetime, data: dict | None = None) -> int:
    """Revoke every live token of ``owner`` (a person leaving the team, ``manage.py team
    remove``); returns how many. Each is journaled ``api_token_revoked`` with ``actor:
    "system"`` (a shell names no person of the runtime) and ``data`` added (e.g. ``{"via":
    "cli", "osUser": …}``). Call inside the transaction that removes the person."""
    tokens = list(ApiToken.objects.filter(user=owner, revoked_at__isnull=True).order_by("id"))
    ApiToken.objects.filter(pk__in=[t.pk for t in tokens], revoked_at__isnull=True).update(revoked_at=now)
    for token in tokens:
        record("api_token_revoked", Actor.SYSTEM, at=now,
               data={"tokenId": token.pk, "owner": owner.get_username(), "label": token.label,
                     "prefix": token.prefix, **(data or {})})
    return len(tokens)
