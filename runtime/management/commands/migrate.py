"""``migrate`` that a bad registry does not stop (docs/design.md §4).

Django's ``migrate`` runs every system check first; the registry check must fail
``check``, ``runserve`` and ``worker`` but never block a schema migration, so this
command runs all checks except the registry's.
"""

from django.core import checks
from django.core.management.commands.migrate import Command as MigrateCommand

from runtime.checks import REGISTRY_TAG


class Command(MigrateCommand):
    def check(self, *args, tags=None, **kwargs):
        tags = tags or [t for t in checks.registry.registry.tags_available() if t != REGISTRY_TAG]
        return super().check(*args, tags=tags, **kwargs)
