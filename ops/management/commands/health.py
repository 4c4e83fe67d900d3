"""``manage.py health``: the heartbeat loop's target — a read-only report on the runtime itself.

Prints one ``factory.command-result/v1`` line: ``HEALTHY`` or ``DEGRADED`` with the
registry digest, queue counts, the slot loop's age, the doctor's anomalies and free
space in the runs dir. It renders the doctor's document (``ops.doctor.collect_status``),
so both judge the registry and the slot loop alike; a loop's own anomalies (stopped,
pile-up) are listed but leave the runtime ``HEALTHY``. It writes nothing, and exits 0
even when degraded: the report is the result.
"""

import json
import shutil

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import DatabaseError

from ops.doctor import collect_status
from runtime import clock
from runtime.models import Proposal, ProposalStatus


class Command(BaseCommand):
    help = "Report the runtime's own health as a factory.command-result/v1 line (read-only)."
    requires_system_checks = []

    def handle(self, *args, **options):
        problems, data = [], {}
        try:
            status = collect_status(now=clock.database_now())
            data["registryDigest"] = status["registryDigest"]
            data["runsQueued"] = status["runs"]["queued"]
            data["runsRunning"] = status["runs"]["running"]
            data["pendingProposals"] = Proposal.objects.filter(status=ProposalStatus.PENDING).count()
            data["slotLoopAgeSeconds"] = status["loop"]["ageSeconds"]
            data["anomalies"] = status["anomalies"]
            if status["registryInvalid"] or status["registryDigest"] is None:
                problems.append(f"registry invalid ({len(status['registryInvalid'])} error(s))")
            if not status["loop"]["turning"]:
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
