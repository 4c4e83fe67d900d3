"""The health report: the heartbeat loop's result, a read-only report on the runtime itself.

``health_report(now)`` is a ``factory.command-result/v1`` document: ``HEALTHY`` or
``DEGRADED`` with the registry digest, queue counts, the slot loop's age, the doctor's
anomalies and free space in the runs dir. It renders the doctor's document
(``ops.doctor.collect_status``), so both judge the registry and the slot loop alike; a
loop's own anomalies (stopped, pile-up) are listed but leave the runtime ``HEALTHY``. It
writes nothing. The heartbeat runs it inside the worker as the builtin ``health``
(docs/design.md §8); ``manage.py health`` prints it.
"""

import shutil
from datetime import datetime

from django.conf import settings
from django.db import DatabaseError

from runtime.models import Proposal, ProposalStatus

from .doctor import collect_status


def health_report(now: datetime) -> dict:
    """The report at ``now``; a database it cannot read makes it ``DEGRADED``, never an error."""
    problems, data = [], {}
    try:
        status = collect_status(now=now)
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
    return {
        "schemaVersion": "factory.command-result/v1",
        "outcome": "DEGRADED" if problems else "HEALTHY",
        "summary": "; ".join(problems) if problems else "registry valid, slot loop turning",
        "data": data,
    }
