"""Template context shared by every page the site renders with a request."""

from django.conf import settings
from django.http import HttpRequest


def product_version(request: HttpRequest) -> dict:
    """Context processor: ``product_version``, e.g. ``"0.9.0"`` (the admin's footer)."""
    return {"product_version": settings.PRODUCT_VERSION}
