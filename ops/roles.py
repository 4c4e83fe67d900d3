"""The roles that ship: the groups ``Approvers`` and ``Viewers`` and their exact permissions
(docs/team.md).

- **Viewers** read: the view permission on every runtime table (events, proposals, runs, queue
  lanes, journal and outbox entries, previews; the schedules' rows, pauses and history; the
  processes, alerts and notifications). Not users, groups or other people's API tokens (a
  person sees and manages their own tokens without any permission: ``ops.admin``). The
  operator's pages need ``is_staff`` besides (``admin.site.admin_view``): ``manage.py team``
  sets it.
- **Approvers**: what Viewers have, plus ``runtime.approve_proposal`` (decide proposals, ask
  for a preview again, retry or close an interrupted run) and ``schedules.control_loop``
  (pause, resume and trigger loops).

Neither group ever holds a change or delete permission: the journal cannot be edited or
emptied from the admin. Django creates permissions only after migrating, so the groups are
written by a ``post_migrate`` handler (``sync_roles``), after every ``migrate`` — the test
database's too — and set to exactly these permissions each time: a permission added to a
group by hand is taken away again at the next migrate.
"""

from django.db import transaction

APPROVERS = "Approvers"
VIEWERS = "Viewers"
#: ``team add --role`` names → groups.
ROLES = {"approver": APPROVERS, "viewer": VIEWERS}

#: (app label, codename) of what Viewers may do.
VIEWER_PERMISSIONS = (
    *(("runtime", f"view_{model}") for model in (
        "event", "proposal", "run", "queuelane", "journalentry", "outboxentry", "preview")),
    *(("schedules", f"view_{model}") for model in (
        "schedulestate", "slotloopstatus", "schedulesync", "tickemitterlease", "keyedschedule",
        "keyedeventapplied", "loopchange", "looppause")),
    *(("ops", f"view_{model}") for model in ("processrecord", "alert", "notification")),
)
#: Approvers: Viewers' permissions and these.
APPROVER_PERMISSIONS = (
    *VIEWER_PERMISSIONS,
    ("runtime", "approve_proposal"),
    ("schedules", "control_loop"),
)
ROLE_PERMISSIONS = {VIEWERS: VIEWER_PERMISSIONS, APPROVERS: APPROVER_PERMISSIONS}
#: The apps whose permissions the roles use.
ROLE_APPS = ("runtime", "schedules", "ops")


def sync_roles(*, using: str = "default") -> dict[str, list[str]]:
    """Create or update both groups with exactly their permissions; returns
    ``{group name: sorted codenames}``. Idempotent. Creates the apps' permissions first
    (Django's own ``create_permissions``, which does nothing for those that exist), so it
    does not depend on the order of the apps' ``post_migrate`` handlers.
    Raises ``Permission.DoesNotExist`` only when a listed permission no longer exists
    (a model renamed without this list)."""
    from django.apps import apps
    from django.contrib.auth.management import create_permissions
    from django.contrib.auth.models import Group, Permission

    for label in ROLE_APPS:
        create_permissions(apps.get_app_config(label), verbosity=0, using=using)
    synced = {}
    with transaction.atomic(using=using):
        for name, wanted in ROLE_PERMISSIONS.items():
            group, _ = Group.objects.using(using).get_or_create(name=name)
            permissions = [
                Permission.objects.using(using).get(content_type__app_label=app, codename=codename)
                for app, codename in wanted
            ]
            group.permissions.set(permissions)
            synced[name] = sorted(p.codename for p in permissions)
    return synced


def sync_roles_after_migrate(sender, using="default", apps=None, **kwargs) -> None:
    """The ``post_migrate`` receiver (connected for the ops app, the last of the runtime's).
    Does nothing when a partial ``migrate`` left the auth tables or a role app's tables out."""
    if apps is not None:
        try:
            apps.get_model("auth", "Group")
            for label in ROLE_APPS:
                apps.get_app_config(label)
        except LookupError:
            return
    sync_roles(using=using)
