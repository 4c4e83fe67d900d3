"""Who may read ``GET /schedules`` and ``GET /status`` (docs/design.md §10).

A client presents ``Authorization: Bearer <FACTORY_API_TOKEN>`` (compared in constant
time); a person uses a staff session of the admin. Anonymous → 401, a signed-in
non-staff user → 403, both as ``{error, detail}``. With ``FACTORY_API_TOKEN`` unset,
every bearer token is refused: an empty setting never means "no password".
"""

import hmac

from django.conf import settings
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, SessionAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission

#: ``request.auth`` of a request authenticated by the API token.
API_TOKEN_AUTH = "api-token"
#: How a person's API token starts (``ops.api.tokens.TOKEN_PREFIX``), and what a refusal adds for one.
PERSONAL_PREFIX = b"fct_"
PERSONAL_HINT = "; a person's token (fct_…) is for the /api/ routes: read this one signed in or with FACTORY_API_TOKEN"


def bearer_token(request) -> bytes | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None when the header holds
    no bearer token. Raises AuthenticationFailed for a bearer header that is not two words."""
    parts = get_authorization_header(request).split()
    if not parts or parts[0].lower() != b"bearer":
        return None
    if len(parts) != 2:
        raise exceptions.AuthenticationFailed("write the header as: Authorization: Bearer <token>")
    return parts[1]


class BearerTokenAuthentication(BaseAuthentication):
    """``Authorization: Bearer <token>`` against ``FACTORY_API_TOKEN``.

    Returns ``(None, API_TOKEN_AUTH)`` for the right token and None when the header holds
    no bearer token (the session may still authenticate). Raises AuthenticationFailed
    for a wrong or malformed token, or any token while the setting is unset.
    """

    def authenticate(self, request):
        presented = bearer_token(request)
        if presented is None:
            return None
        expected = settings.FACTORY_API_TOKEN
        # A person's token (``fct_…``) is for the approval API: say so rather than only "wrong".
        personal = PERSONAL_HINT if presented.startswith(PERSONAL_PREFIX) else ""
        if not expected:
            raise exceptions.AuthenticationFailed(f"bearer tokens are refused: FACTORY_API_TOKEN is not set{personal}")
        if not hmac.compare_digest(presented, expected.encode("utf-8")):
            raise exceptions.AuthenticationFailed(f"the bearer token is not FACTORY_API_TOKEN{personal}")
        return (None, API_TOKEN_AUTH)

    def authenticate_header(self, request) -> str:
        # Makes DRF answer 401 rather than 403 to an anonymous request.
        return 'Bearer realm="factory"'


class TokenOrStaff(BasePermission):
    """The API token, or a signed-in staff user."""

    message = "only staff users and holders of FACTORY_API_TOKEN may read this"

    def has_permission(self, request, view) -> bool:
        if request.auth == API_TOKEN_AUTH:
            return True
        user = request.user
        return bool(user is not None and user.is_authenticated and user.is_staff)


AUTHENTICATION_CLASSES = [BearerTokenAuthentication, SessionAuthentication]
