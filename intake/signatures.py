"""Signature checks of the two HTTP doors, over the raw bytes received (docs/design.md §10; docs/intake.md).

Both schemes are HMAC-SHA256 written ``sha256=<64 hex>`` and compared in constant time
(``hmac.compare_digest``) against the bytes exactly as they arrived — never a re-serialised
body, whose escapes and key order would differ.

- ``/events``: ``X-Factory-Signature`` over ``b"<X-Factory-Timestamp>." + body``, the
  timestamp in unix seconds and within ``TIMESTAMP_TOLERANCE_SECONDS`` of ``now``.
- ``/github``: GitHub's ``X-Hub-Signature-256`` over the body alone. GitHub signs no
  timestamp, so there is no staleness window; a replayed capture is bounded by the
  delivery-id deduplication instead (docs/intake.md).

Each check returns nothing or raises ``SignatureRefused(code, detail)``, which the views
answer with 401 ``{error: code, detail}``. The HMAC itself is ``lib.signing``.
"""

import re
from datetime import datetime

from lib.refusals import Refused
from lib.signing import signature_matches

#: ±300 s: the window a signed ``/events`` timestamp must fall in (docs/design.md §10).
TIMESTAMP_TOLERANCE_SECONDS = 300
#: Unix seconds as GitHub-style tools and ``date +%s`` write them: digits only, no sign.
TIMESTAMP_PATTERN = re.compile(r"^[0-9]{1,12}$")


class SignatureRefused(Refused):
    """The request is not authentic (401); ``code`` is the reason, ``detail`` says why in words."""

    status = 401


#: The one form a signature header takes (GitHub's, and ``lib.signing.sign``'s).
SIGNATURE_FORM = re.compile(r"sha256=[0-9a-f]{64}")


def _check(secret: str, message: bytes, provided: str, *, body: bytes) -> None:
    """Raise ``bad_signature`` unless ``provided`` signs ``message``; the detail says when the
    header is not of the one form, or the body arrived empty, rather than blame the secret."""
    if signature_matches(secret, message, provided):
        return
    if not SIGNATURE_FORM.fullmatch(provided.strip()):
        detail = "the signature is not sha256= followed by 64 lower-case hex digits"
    elif not body:
        detail = ("the body arrived empty, which no signature matches: a request without Content-Length "
                  "(chunked transfer encoding) is read as empty; send the length")
    else:
        detail = "the signature does not match the body under the configured secret"
    raise SignatureRefused("bad_signature", detail)


def verify_factory_signature(
    secret: str, *, timestamp: str | None, signature: str | None, body: bytes, now: datetime
) -> None:
    """Check a ``/events`` request: ``signature`` over ``"<timestamp>.<body>"``, ``timestamp`` ±300 s of ``now``.

    ``timestamp`` and ``signature`` are the raw header values (None when absent); ``now``
    is an aware instant. Raises ``SignatureRefused`` with ``route_disabled`` (no secret),
    ``missing_signature``, ``bad_timestamp``, ``stale_timestamp`` (past or future) or
    ``bad_signature``. The signature is checked before the window, so only a holder of
    the secret learns that a timestamp was out of range.
    """
    if not secret:
        raise SignatureRefused("route_disabled", "FACTORY_EVENTS_SECRET is not set, so /events accepts nothing")
    if not signature or not timestamp:
        raise SignatureRefused(
            "missing_signature", "X-Factory-Timestamp and X-Factory-Signature (sha256=<hex>) are both required"
        )
    timestamp = timestamp.strip()
    if not TIMESTAMP_PATTERN.fullmatch(timestamp):
        raise SignatureRefused("bad_timestamp", "X-Factory-Timestamp must be unix seconds: 1 to 12 digits, nothing else")
    _check(secret, timestamp.encode("ascii") + b"." + body, signature, body=body)
    skew = int(timestamp) - int(now.timestamp())
    if abs(skew) > TIMESTAMP_TOLERANCE_SECONDS:
        direction = "in the future" if skew > 0 else "old"
        raise SignatureRefused(
            "stale_timestamp",
            f"the timestamp is {abs(skew)} s {direction}; at most {TIMESTAMP_TOLERANCE_SECONDS} s either way is accepted",
        )


def verify_github_signature(secret: str, *, signature_256: str | None, signature_1: str | None, body: bytes) -> None:
    """Check a ``/github`` delivery: ``X-Hub-Signature-256`` over the raw body (docs/intake.md).

    ``signature_1`` is the legacy ``X-Hub-Signature`` (SHA-1): never enough on its own,
    it only sharpens the refusal. Raises ``SignatureRefused`` with ``route_disabled``,
    ``legacy_signature_only``, ``missing_signature`` or ``bad_signature``.
    """
    if not secret:
        raise SignatureRefused(
            "route_disabled", "FACTORY_GITHUB_WEBHOOK_SECRET is not set, so /github accepts nothing"
        )
    if not signature_256:
        if signature_1:
            raise SignatureRefused(
                "legacy_signature_only",
                "only the SHA-1 X-Hub-Signature was sent; X-Hub-Signature-256 is required "
                "(set a secret on the webhook so GitHub sends it)",
            )
        raise SignatureRefused("missing_signature", "X-Hub-Signature-256 (sha256=<hex>) is required")
    _check(secret, body, signature_256, body=body)
