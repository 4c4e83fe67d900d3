"""HMAC-SHA256 signatures written ``sha256=<hex>``, compared in constant time (docs/intake.md).

Both intake doors and the host clock bridge sign and check this way; the message is
always the raw bytes as sent, never a re-serialised body.
"""

import hashlib
import hmac

SIGNATURE_PREFIX = "sha256="


def sign(secret: str, message: bytes) -> str:
    """``sha256=<hex>``: HMAC-SHA256 of ``message`` under ``secret`` (UTF-8)."""
    return SIGNATURE_PREFIX + hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def signature_matches(secret: str, message: bytes, provided: str) -> bool:
    """Whether ``provided`` (a header value, surrounding blanks ignored) is the signature of
    ``message`` under ``secret``; compared in constant time, as bytes."""
    expected = sign(secret, message).encode("ascii")
    # A header is text; anything outside ASCII cannot match, and must not raise either.
    return hmac.compare_digest(expected, provided.strip().encode("utf-8", errors="replace"))
