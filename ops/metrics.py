"""``GET /metrics``: the runtime's figures in the Prometheus text format (docs/production.md, "Metrics").

Two kinds of figure:

- **Read from the database at scrape time** (``DatabaseCollector``): what the slot loop and
  the run workers did is in the tables they write, so any HTTP worker of any ``runserve``
  answers the same figures. They are gauges, and the activity ones cover a **window**,
  the last ``FACTORY_METRICS_WINDOW_SECONDS`` (3,600) before the scrape: "ticks admitted in
  the last hour" rather than a counter since the beginning of time. A count over a window
  needs no scan of the history and does not drop when a retention prune deletes old rows
  (as long as the window is shorter than the retention, which ``prune`` checks). The
  histograms of a window are histograms of the rows in it: read them without ``rate()``
  (``histogram_quantile(0.9, factory_tick_lateness_seconds_bucket)``).
- **Counted by the HTTP workers themselves** (``ops.metrics_intake``): the intake doors'
  answers, a true counter, summed over the workers of one ``runserve``.

Every query is an aggregate over an index that exists: the window's rows are found by their
id (``window_start_id``: ids grow with admission time, so a binary search by primary key
finds the first row of the window in about twenty point reads whatever the table's size),
the pending and queued rows through their partial indexes (``proposal_pending_idx``,
``run_queued_idx``, ``event_unplanned_idx``). Labels are per loop at most — never per key —
and the histograms have none: a scrape of 100,000 loops is a few series per loop, not
a dozen buckets each.
"""

from collections.abc import Iterator
from datetime import datetime, timedelta
from functools import cached_property

from django.conf import settings
from django.db.models import Count, F, FloatField, Func, IntegerField, Min, Sum, Value
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast
from django.db.models.lookups import LessThanOrEqual
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric

from runtime.models import TERMINAL_RUN_STATUSES, Event, Proposal, ProposalStatus, Run, RunStatus
from schedules.models import LoopPause, SlotLoopStatus

from .doctor import FINDINGS, collect_status
from .loop_status import LOOP_NAME

#: Upper bounds of the histograms' buckets, in seconds. Tick lateness: a tick is admitted
#: within the slot loop's second; minutes mean a stopped or catching-up loop.
LATENESS_BUCKETS = (0.5, 1, 2, 5, 10, 30, 60, 300, 3600)
#: Planning latency (admitted → planned): the slot loop plans within its iteration.
PLANNING_BUCKETS = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 300)
#: Run durations (started → finished): seconds for a health report, an hour for an agent.
DURATION_BUCKETS = (1, 5, 10, 30, 60, 300, 900, 1800, 3600)
#: The label value of proposals, runs and events that belong to no loop.
NO_LOOP = "-"
#: The doctor's anomalies that are not in ``FINDINGS`` (ops.doctor).
DOCTOR_ANOMALIES = ("slotLoopStale", "stoppedSchedules", "proposalPileUps", "registryInvalid")


def window_start_id(model, field: str, since: datetime) -> int:
    """The smallest id from which every row of ``model`` has ``field`` at or after ``since``.

    Rows are inserted with ``field`` set to the instant of insertion (an event's
    ``admitted_at``, a run's ``queued_at``), so ``field`` grows with the id; a binary search
    over the id range reads one row by primary key per step (about log2 of the range). With
    no row at or after ``since``, one past the largest id (the window is empty)."""
    # Two one-row reads by primary key: SQLite answers MIN and MAX in one statement by a scan.
    low = model.objects.order_by("id").values_list("id", flat=True).first()
    if low is None:
        return 1
    high = model.objects.order_by("-id").values_list("id", flat=True).first() + 1
    while low < high:
        middle = (low + high) // 2
        row_id, value = model.objects.filter(id__gte=middle).order_by("id").values_list("id", field).first()
        if value >= since:
            high = middle
        else:
            low = row_id + 1
    return low


class Seconds(Func):
    """``end - start`` of two instants of a row, in seconds (a float; on SQLite to the
    millisecond), computed by the database itself: Django's own duration arithmetic on SQLite calls back into Python once
    a row and a bucket, which made a scrape over 100,000 recent events take 15 s."""

    output_field = FloatField()
    arity = 2

    def as_sqlite(self, compiler, connection, **extra):
        # julianday's double carries an instant to about 50 µs: rounded to the millisecond.
        return self.as_sql(
            compiler, connection, template="ROUND((julianday(%(expressions)s)) * 86400.0, 3)",
            arg_joiner=") - julianday(", **extra,
        )

    def as_postgresql(self, compiler, connection, **extra):
        return self.as_sql(
            compiler, connection, template="EXTRACT(EPOCH FROM (%(expressions)s))::float8", arg_joiner=" - ", **extra,
        )


def _histogram_aggregates(start: str, end: str, bounds) -> dict:
    """``total``, ``spent`` (the sum of ``end - start``, seconds) and the conditional counts
    ``le_<i>`` of the rows whose ``end - start`` is at most each bound: one aggregate query."""
    return {
        "total": Count("id"),
        "spent": Sum(Seconds(F(end), F(start))),
        **{
            f"le_{index}": Count("id", filter=LessThanOrEqual(Seconds(F(end), F(start)), Value(float(bound))))
            for index, bound in enumerate(bounds)
        },
    }


def _histogram(name: str, documentation: str, row: dict, bounds) -> HistogramMetricFamily:
    """A histogram family of no label from an aggregate row of ``_histogram_aggregates``."""
    buckets = [(str(float(bound)), row[f"le_{index}"]) for index, bound in enumerate(bounds)]
    buckets.append(("+Inf", row["total"]))
    spent = row["spent"]
    return HistogramMetricFamily(name, documentation, buckets=buckets, sum_value=float(spent) if spent is not None else 0.0)


def _age(now: datetime, instant: datetime | None) -> float:
    return round((now - instant).total_seconds(), 3) if instant is not None else 0.0


class DatabaseCollector:
    """The database's figures at ``now`` (the database's clock), over ``window_seconds``."""

    def __init__(self, *, now: datetime, window_seconds: int):
        self.now = now
        self.window_seconds = window_seconds
        self.since = now - timedelta(seconds=window_seconds)

    @cached_property
    def first_event_id(self) -> int:
        """The id of the window's first event (``window_start_id``), read once per scrape."""
        return window_start_id(Event, "admitted_at", self.since)

    def collect(self) -> Iterator[Metric]:
        yield from self.build()
        yield GaugeMetricFamily(
            "factory_metrics_window_seconds", "The window of the recent-activity figures, in seconds.",
            value=self.window_seconds,
        )
        yield from self.ticks()
        yield from self.planning()
        yield from self.proposals()
        yield from self.queue()
        yield from self.runs()
        yield from self.doctor()

    def ticks(self) -> Iterator[Metric]:
        first = self.first_event_id
        # Ticks are the events with a slot (their loop is set with it). Not ``loop IS NOT NULL``:
        # that would let SQLite walk the whole event_tick_idx for the GROUP BY instead of the
        # window's id range.
        ticks = Event.objects.filter(id__gte=first, slot__isnull=False)
        rows = (
            ticks.order_by().values("loop")
            .annotate(total=Count("id"), skipped=Sum(Cast(KeyTextTransform("skippedSlots", "payload"), IntegerField())))
            .order_by("loop")
        )
        admitted = GaugeMetricFamily(
            "factory_ticks_admitted_recent", "Ticks admitted in the window, per loop.", labels=["loop"])
        skipped = GaugeMetricFamily(
            "factory_ticks_skipped_recent",
            "Slots skipped by the catch-up policy of the ticks admitted in the window, per loop.", labels=["loop"])
        for row in rows:
            admitted.add_metric([row["loop"]], row["total"])
            skipped.add_metric([row["loop"]], row["skipped"] or 0)
        yield admitted
        yield skipped
        yield _histogram(
            "factory_tick_lateness_seconds", "Slot start to admission of the ticks admitted in the window.",
            ticks.aggregate(**_histogram_aggregates("slot", "admitted_at", LATENESS_BUCKETS)), LATENESS_BUCKETS)

    def planning(self) -> Iterator[Metric]:
        backlog = Event.objects.filter(planned_at__isnull=True).aggregate(n=Count("id"), oldest=Min("admitted_at"))
        yield GaugeMetricFamily("factory_planning_backlog_events", "Admitted events not planned yet.",
                                value=backlog["n"])
        yield GaugeMetricFamily("factory_planning_backlog_oldest_age_seconds",
                                "Age of the oldest event not planned yet (0: none).",
                                value=_age(self.now, backlog["oldest"]))
        first = self.first_event_id
        row = Event.objects.filter(id__gte=first, planned_at__isnull=False).aggregate(
            **_histogram_aggregates("admitted_at", "planned_at", PLANNING_BUCKETS))
        yield _histogram("factory_planning_latency_seconds",
                         "Admission to planning of the events admitted in the window.", row, PLANNING_BUCKETS)

    def proposals(self) -> Iterator[Metric]:
        rows = (
            Proposal.objects.filter(status=ProposalStatus.PENDING).order_by().values("loop")
            .annotate(n=Count("id"), oldest=Min("created_at")).order_by("loop")
        )
        pending = GaugeMetricFamily("factory_proposals_pending", "Pending proposals, per loop.", labels=["loop"])
        oldest = GaugeMetricFamily("factory_proposals_pending_oldest_age_seconds",
                                   "Age of the oldest pending proposal, per loop.", labels=["loop"])
        for row in rows:
            pending.add_metric([row["loop"] or NO_LOOP], row["n"])
            oldest.add_metric([row["loop"] or NO_LOOP], _age(self.now, row["oldest"]))
        yield pending
        yield oldest

    def queue(self) -> Iterator[Metric]:
        rows = (
            Run.objects.filter(status=RunStatus.QUEUED).order_by().values(source=F("event__source"))
            .annotate(n=Count("id"), oldest=Min("queued_at")).order_by("source")
        )
        depth = GaugeMetricFamily("factory_run_queue_depth", "Queued runs, per source of their event.",
                                  labels=["source"])
        oldest = GaugeMetricFamily("factory_run_queue_oldest_age_seconds",
                                   "Age of the oldest queued run, per source of its event.", labels=["source"])
        for row in rows:
            depth.add_metric([row["source"]], row["n"])
            oldest.add_metric([row["source"]], _age(self.now, row["oldest"]))
        yield depth
        yield oldest
        active = dict(
            Run.objects.filter(status__in=(RunStatus.CLAIMED, RunStatus.RUNNING, RunStatus.INTERRUPTED))
            .order_by().values_list("status").annotate(n=Count("id"))
        )
        held = GaugeMetricFamily("factory_runs_active", "Runs claimed, running or interrupted.", labels=["status"])
        for status in (RunStatus.CLAIMED, RunStatus.RUNNING, RunStatus.INTERRUPTED):
            held.add_metric([status.value], active.get(status, 0))
        yield held

    def runs(self) -> Iterator[Metric]:
        first = window_start_id(Run, "queued_at", self.since)
        recent = Run.objects.filter(id__gte=first, status__in=TERMINAL_RUN_STATUSES)
        finished = GaugeMetricFamily(
            "factory_runs_finished_recent", "Runs queued in the window and finished, per loop, status and outcome.",
            labels=["loop", "status", "outcome"])
        for row in recent.order_by().values("loop", "status", "outcome").annotate(n=Count("id")).order_by(
                "loop", "status", "outcome"):
            finished.add_metric([row["loop"] or NO_LOOP, row["status"], row["outcome"] or NO_LOOP], row["n"])
        yield finished
        row = recent.filter(started_at__isnull=False, finished_at__isnull=False).aggregate(
            **_histogram_aggregates("started_at", "finished_at", DURATION_BUCKETS))
        yield _histogram("factory_run_duration_seconds",
                         "Start to finish of the runs queued in the window and finished.", row, DURATION_BUCKETS)

    def build(self) -> Iterator[Metric]:
        info = GaugeMetricFamily("factory_build_info", "Always 1; the product's version is its label.",
                                 labels=["version"])
        info.add_metric([settings.PRODUCT_VERSION], 1)
        yield info

    def doctor(self) -> Iterator[Metric]:
        status = collect_status(now=self.now)
        age = status["loop"]["ageSeconds"]
        yield GaugeMetricFamily(
            "factory_slot_loop_last_iteration_age_seconds",
            "Seconds since the slot loop last completed an iteration (-1: it never ran).",
            value=age if age is not None else -1)
        took = SlotLoopStatus.objects.filter(name=LOOP_NAME).values_list("last_iteration_seconds", flat=True).first()
        yield GaugeMetricFamily(
            "factory_slot_loop_last_iteration_seconds",
            "How long the slot loop's last iteration took, in seconds: an idle one up to its last statement, one "
            "that fired ticks to its end (-1: none recorded).",
            value=took if took is not None else -1)
        anomaly = GaugeMetricFamily("factory_doctor_anomaly", "1 while the doctor reports this anomaly.",
                                    labels=["anomaly"])
        findings = GaugeMetricFamily("factory_doctor_findings",
                                     "How many items the doctor lists under this anomaly.", labels=["anomaly"])
        standing = set(status["anomalies"])
        for name in (*DOCTOR_ANOMALIES, *FINDINGS):
            anomaly.add_metric([name], 1 if name in standing else 0)
            listed = status.get(name)
            findings.add_metric([name], len(listed) if isinstance(listed, list) else int(name in standing))
        yield anomaly
        yield findings
        yield GaugeMetricFamily("factory_loops_paused", "How many loops are paused (schedule pause).",
                                value=LoopPause.objects.count())
        yield GaugeMetricFamily("factory_doctor_ok", "1 when the doctor reports no anomaly.",
                                value=1 if status["ok"] else 0)


def database_collector(*, now: datetime) -> DatabaseCollector:
    return DatabaseCollector(now=now, window_seconds=settings.FACTORY_METRICS_WINDOW_SECONDS)
