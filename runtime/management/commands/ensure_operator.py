"""``manage.py ensure_operator``: make sure an operator account exists for the inbox.

Creates ``FACTORY_OPERATOR_USERNAME`` (default ``operator``) as a superuser on first
use, with ``FACTORY_OPERATOR_PASSWORD`` or, when unset, a generated password printed
once. An existing account is left as it is. ``runserve`` calls this at start.
"""

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import IntegrityError, transaction


def ensure_operator(write) -> bool:
    """Create the operator account if missing; ``write(line)`` reports it. True when created."""
    user_model = get_user_model()
    username = settings.FACTORY_OPERATOR_USERNAME
    if user_model.objects.filter(username=username).exists():
        return False
    password = settings.FACTORY_OPERATOR_PASSWORD or secrets.token_urlsafe(12)
    try:
        with transaction.atomic():
            user_model.objects.create_superuser(username=username, email="", password=password)
    except IntegrityError:
        # Another runserve starting at the same moment created it first.
        return False
    if settings.FACTORY_OPERATOR_PASSWORD:
        write(f"operator account {username!r} created with the password from FACTORY_OPERATOR_PASSWORD")
    else:
        write(
            f"operator account created: username {username!r}, password {password!r} "
            "(shown once; change it in the admin, or set FACTORY_OPERATOR_PASSWORD before the first start)"
        )
    return True


class Command(BaseCommand):
    help = "Create the operator account for the admin inbox if it does not exist."

    def handle(self, *args, **options):
        if not ensure_operator(self.stdout.write):
            self.stdout.write(f"operator account {settings.FACTORY_OPERATOR_USERNAME!r} exists")
