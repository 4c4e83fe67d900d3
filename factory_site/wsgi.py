"""WSGI entry point (gunicorn: ``factory_site.wsgi:application``).

The registry is loaded here, at import: ``runserve`` starts gunicorn with ``--preload``,
so the master loads it once and every worker — including one forked later, while a
bad change sits on disk — starts with that good registry to fall back on (docs/design.md §4).
No database connection is opened here, so none crosses the fork.
"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "factory_site.settings")

application = get_wsgi_application()

from runtime.registry import get_registry  # noqa: E402  (needs the app registry ready)

get_registry()
