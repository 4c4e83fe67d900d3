"""Who may use ``/api/`` and who may decide there (docs/api.md "Tokens", spec §6).

Three credentials:

- a **person's API token** (``ops.ApiToken``): ``Authorization: Bearer fct_…``; the request
  acts as that person (``request.auth`` is the token row);
- a **staff session** of the admin, with Django's CSRF check on every unsafe method;
- the shared **``FACTORY_API_TOKEN``**: ``request.auth == API_TOKEN_AUTH`` and no user. It
  reads, and never decides: a decision always names a person (spec §6), so a decision
  with it is 403 ``person_required``.

Reading takes any of the three (a person's must be an active staff user); deciding takes a
person, and the approval service then requires ``approve_proposal`` (403
``permission_denied``). A wrong, revoked or malformed bearer token is 401
``authentication_failed``; none at all is 401 ``not_authenticated``.
"""

import hmac

from django.conf import settings
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, SessionAuthentication
from rest_framework.permissions import BasePermission

from ops.auth import API_TOKEN_AUTH, bearer_token
from ops.models import ApiToken

from .tokens import live_token


class PersonTokenAuthentication(BaseAuthentication):
    """``Authorization: Bearer <token>``: a person's live API token, or ``FACTORY_API_TOKEN``.

    Returns ``(user, ApiToken)`` or ``(None, API_TOKEN_AUTH)``; None when the header holds
    no bearer token (a session may still authenticate). Raises AuthenticationFailed for a
    malformed header, an unknown or revoked token, or one whose person is inactive.
    """

    def authenticate(self, request):
        presented = bearer_token(request)
        if presented is None:
            return None
        shared = settings.FACTORY_API_TOKEN
        if shared and hmac.compare_digest(presented, shared.encode("utf-8")):
            return (None, API_TOKEN_AUTH)
        token = live_token(presented.decode("latin-1"))
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("the bearer token is neither a live API token nor FACTORY_API_TOKEN")
        return (token.user, token)

    def authenticate_header(self, request) -> str:
        # Makes DRF answer 401 rather than 403 to an anonymous request.
        return 'Bearer realm="factory"'


class CsrfSessionAuthentication(SessionAuthentication):
    """The admin's session; a POST without a valid CSRF token is 403 ``csrf_failed``."""

    def enforce_csrf(self, request):
        try:
            super().enforce_csrf(request)
        except exceptions.PermissionDenied as exc:
            raise exceptions.PermissionDenied(str(exc.detail), code="csrf_failed") from None


def token_label(request) -> str:
    """The label of the person's token the request came with; empty for a session."""
    return request.auth.label if isinstance(request.auth, ApiToken) else ""


class MayRead(BasePermission):
    """``FACTORY_API_TOKEN``, or an active staff user (by session or by their token)."""

    message = "only staff users, their API tokens and FACTORY_API_TOKEN may read the API"

    def has_permission(self, request, view) -> bool:
        if request.auth == API_TOKEN_AUTH:
            return True
        user = request.user
        return bool(user is not None and user.is_authenticated and user.is_active and user.is_staff)


class PersonRequired(BasePermission):
    """A decision names a person: ``FACTORY_API_TOKEN`` reads and never decides (spec §6)."""

    def has_permission(self, request, view) -> bool:
        if request.auth == API_TOKEN_AUTH:
            raise exceptions.PermissionDenied(
                "FACTORY_API_TOKEN is not a person: decide with your own API token (manage.py api_token create) "
                "or a session", code="person_required",
            )
        return True


AUTHENTICATION_CLASSES = [PersonTokenAuthentication, CsrfSessionAuthentication]
