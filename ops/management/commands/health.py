"""``manage.py health``: the heartbeat loop's target — a read-only report on the runtime itself.

Prints one ``factory.command-result/v1`` line: ``HEALTHY`` or ``DEGRADED`` with the
registry digest, queue counts, the slot loop's age and free space in the runs dir.
It writes nothing, and exits 0 even when degraded: the report is the result.
"""

import json
import shutil

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import DatabaseError
from django.utils import timezone

from runtime.models import ProposalStatus, Proposal, Run, RunStatus
from runtime.registry import RegistryInvalid, load_registry

#: The slot loop turns every second; older than this, the clock is not turning (DESIGN §11).
SLOT_LOOP_STALE_SECONDS = 10


class Command(BaseCommand):
    help = "Report the runtime's own health as a factory.command-result/v1 line (read-only)."
    requires_system_checks = []

    def handle(self, *args, **options):
        from schedules.models import SlotLoopStatus

        now = timezone.now()
        problems, data = [], {}
        try:
            data["registryDigest"] = load_registry(settings.FACTORY_REGISTRY_DIR, settings.FACTORY_CONFIG_DIR).digest
        except RegistryInvalid as exc:
            problems.append(f"registry invalid ({len(exc.errors)} errors)")
        try:
            data["runsQueued"] = Run.objects.filter(status=RunStatus.QUEUED).count()
            data["runsRunning"] = Run.objects.filter(status__in=[RunStatus.CLAIMED, RunStatus.RUNNING]).count()
            data["pendingProposals"] = Proposal.objects.filter(status=ProposalStatus.PENDING).count()
            status = SlotLoopStatus.objects.order_by("-last_iteration_at").first()
            age = (now - status.last_iteration_at).total_seconds() if status else None
            data["slotLoopAgeSeconds"] = round(age, 1) if age is not None else None
            if age is None or age > SLOT_LOOP_STALE_SECONDS:
                problems.append("the slot loop is not turning")
        except DatabaseError as exc:
            problems.append(f"database unreachable: {exc.__class__.__name__}")
        runs_dir = settings.FACTORY_RUNS_DIR
        if runs_dir.exists():
            data["runsDirFreeBytes"] = shutil.disk_usage(runs_dir).free
        outcome = "DEGRADED" if problems else "HEALTHY"
        summary = "; ".join(problems) if problems else "registry valid, slot loop turning"
        self.stdout.write(json.dumps({
            "schemaVersion": "factory.command-result/v1", "outcome": outcome, "summary": summary, "data": data,
        }))
