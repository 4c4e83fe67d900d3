"""The admin as the operator's home: the runtime's models before Authentication and
authorization, in the index and the sidebar alike (docs/web.md)."""

#: These apps first, in this order; the others after them, as the admin sorts them.
FIRST_APPS = ("runtime", "schedules", "ops")


def runtime_first(app_list: list[dict]) -> list[dict]:
    """The admin's app list (``AdminSite.get_app_list``) with ``FIRST_APPS`` first. Pure; stable."""
    return sorted(app_list, key=lambda app: FIRST_APPS.index(app["app_label"]) if app["app_label"] in FIRST_APPS else len(FIRST_APPS))


def put_runtime_first(site) -> None:
    """Make ``site`` list its apps with ``runtime_first``."""
    listing = site.get_app_list

    def get_app_list(request, app_label=None):
        return runtime_first(listing(request, app_label))

    site.get_app_list = get_app_list
