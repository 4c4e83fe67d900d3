"""The doctor: the ``GET /status`` document and its anomalies (docs/design.md §10, §11; docs/schedules.md).

``status_document`` is pure: it takes ``now`` and rows already read. ``collect_status``
reads them — a constant number of queries, each narrowed by the database to the rows in
question (``schedules.findings``), so its cost follows the anomalies, not the loops — and
is what ``GET /status`` and ``manage.py doctor`` call, so both say the same thing.

The anomalies, each named in ``anomalies`` when it stands:

- ``slotLoopStale`` — the slot loop never ran, or its last iteration is older than
  ``SLOT_LOOP_STALE_SECONDS``: the clock is not turning;
- ``stoppedSchedules`` — an enabled loop with no admitted tick for more than two
  intervals (counted from ``enabledSince`` for a loop that never ticked);
- ``proposalPileUps`` — a watched loop with more than ``FACTORY_PILEUP_THRESHOLD``
  pending proposals: mis-cadenced, or nobody is watching it;
- ``registryInvalid`` — the registry or overlay on disk does not validate; the last good
  registry stays in force (docs/design.md §4);
- ``expiredLeases``, ``interruptedRuns``, ``starvedQueue``, ``stuckLoops``,
  ``futureLastSlot``, ``clockSkew`` — runs, loops and clocks (``ops.doctor_checks``);
- ``longPauses`` — a loop paused without ``--until`` for longer than
  ``FACTORY_PAUSE_WARN_SECONDS`` (``schedules.pausing.long_pauses``): a pause nobody lifted.
  A paused loop is never ``stoppedSchedules``;
- ``runBacklog`` — more than ``FACTORY_BACKLOG_WARN_RUNS`` runs queued, or the oldest queued
  longer than ``FACTORY_BACKLOG_WARN_SECONDS`` ago (``ops.doctor_checks.run_backlog``): the
  workers do not keep up, or none runs.

``processes`` lists the slot loops and workers seen recently (``ops.process_rows``); it is
information, not an anomaly.
"""

from datetime import datetime

from django.conf import settings
from django.db.models import Count, Min

from lib.instants import format_instant, rounded_seconds
from runtime.models import ACTIVE_RUN_STATUSES, Run, RunStatus
from runtime.registry import Registry, RegistryError, RegistryInvalid, store
from schedules.findings import pile_ups, stopped_schedules
from schedules.models import SlotLoopStatus
from schedules.pausing import long_pauses
from schedules.repair import future_last_slots

from .doctor_checks import (
    clock_skew,
    find_expired_leases,
    find_interrupted_runs,
    find_processes,
    find_starved_queue,
    find_stuck_loops,
    run_backlog,
)
from .loop_status import LOOP_NAME

#: The slot loop turns every second; a last iteration older than this means the clock
#: has stopped (docs/design.md §11). Ten seconds leave room for a slow iteration or a busy database.
SLOT_LOOP_STALE_SECONDS = 10
#: The keys of runs, loops and clocks, in the order ``anomalies`` names them (docs/schedules.md).
FINDINGS = (
    "expiredLeases", "interruptedRuns", "starvedQueue", "stuckLoops", "futureLastSlot", "clockSkew", "longPauses",
    "runBacklog",
)


def status_document(
    *,
    now: datetime,
    registry: Registry | None,
    registry_errors: list[RegistryError],
    stopped: list[dict],
    pileups: list[dict],
    last_iteration_at: datetime | None,
    runs: dict[str, int],
    findings: dict[str, list] | None = None,
    processes: list[dict] | None = None,
) -> dict:
    """The ``/status`` document at ``now``. Pure.

    ``registry`` is the registry in force (None when none ever loaded); ``registry_errors``
    the errors of the newest load of the files on disk; ``stopped`` the stopped loops
    (``[{loop, lastTickAt, expectedBy}]``, ``schedules.findings.stopped_schedules``) and
    ``pileups`` the watched loops piling up (``[{loop, pending}]``, ``pile_ups``); ``last_iteration_at`` the slot loop's last completed
    iteration (None: it never ran); ``runs`` ``{"queued": n, "running": n}`` (running counts claimed runs too);
    ``findings`` the lists of ``FINDINGS`` by key (``ops.doctor_checks``), each an anomaly when
    not empty; ``processes`` the processes seen recently. ``ok`` is true exactly when
    ``anomalies`` is empty.
    """
    findings = {key: (findings or {}).get(key, []) for key in FINDINGS}
    age = (now - last_iteration_at).total_seconds() if last_iteration_at is not None else None
    turning = age is not None and age <= SLOT_LOOP_STALE_SECONDS
    anomalies = [
        name for name, present in (
            ("slotLoopStale", not turning),
            ("stoppedSchedules", bool(stopped)),
            ("proposalPileUps", bool(pileups)),
            ("registryInvalid", bool(registry_errors) or registry is None),
            *((key, bool(found)) for key, found in findings.items()),
        ) if present
    ]
    return {
        "ok": not anomalies,
        "anomalies": anomalies,
        "registryDigest": registry.digest if registry else None,
        "loop": {
            "lastIterationAt": format_instant(last_iteration_at) if last_iteration_at else None,
            "ageSeconds": rounded_seconds(age) if age is not None else None,
            "turning": turning,
        },
        "stoppedSchedules": stopped,
        "proposalPileUps": pileups,
        "registryInvalid": [error.as_dict() for error in registry_errors],
        "runs": runs,
        **findings,
        "processes": processes or [],
    }


def collect_status(*, now: datetime) -> dict:
    """Read what the doctor needs and return ``status_document`` at ``now``.

    Re-reads a changed registry first, as the slot loop does, so a bad edit on disk shows
    as ``registryInvalid`` while the last good registry keeps answering. When no registry
    ever loaded in this process, the loops cannot be judged: only the registry errors,
    the slot loop and the run counts are reported.
    """
    try:
        store.refresh()
        registry = store.current()
    except RegistryInvalid:
        registry = None
    stopped = stopped_schedules(registry, now=now) if registry else []
    pileups = pile_ups(registry, threshold=settings.FACTORY_PILEUP_THRESHOLD) if registry else []
    status = SlotLoopStatus.objects.filter(name=LOOP_NAME).values_list("last_iteration_at", flat=True).first()
    # Only active runs are counted: the partial indexes run_queued_idx and run_leased_idx
    # cover them, so the count does not grow with the history of finished runs. The same
    # statement gives the oldest queued run's age for runBacklog.
    active = {
        status: (n, oldest) for status, n, oldest in
        Run.objects.filter(status__in=ACTIVE_RUN_STATUSES).order_by().values_list("status")
        .annotate(n=Count("id"), oldest=Min("queued_at")).values_list("status", "n", "oldest")
    }
    queued, oldest_queued_at = active.get(RunStatus.QUEUED, (0, None))
    runs = {
        "queued": queued,
        "running": active.get(RunStatus.CLAIMED, (0,))[0] + active.get(RunStatus.RUNNING, (0,))[0],
    }
    processes = find_processes(now=now)
    findings = {
        "expiredLeases": find_expired_leases(now=now),
        "interruptedRuns": find_interrupted_runs(),
        "starvedQueue": find_starved_queue(registry, now=now),
        "stuckLoops": find_stuck_loops(),
        "futureLastSlot": future_last_slots(now=now),
        "clockSkew": clock_skew(processes),
        "longPauses": long_pauses(now=now, warn_seconds=settings.FACTORY_PAUSE_WARN_SECONDS),
        "runBacklog": run_backlog(
            queued=queued, oldest_queued_at=oldest_queued_at, now=now,
            warn_runs=settings.FACTORY_BACKLOG_WARN_RUNS, warn_seconds=settings.FACTORY_BACKLOG_WARN_SECONDS,
        ),
    }
    return status_document(
        now=now,
        registry=registry,
        registry_errors=store.problems(),
        stopped=stopped,
        pileups=pileups,
        last_iteration_at=status,
        runs=runs,
        findings=findings,
        processes=processes,
    )
