"""``runtime.services.execution``'s ``execute_run`` and ``LeaseKeeper`` called directly, an adapter
of the test's own in place of the real ones: each way an attempt ends (its run's row, the
write's bound and name, the log), and the keeper's every answer — renewals, their failures,
the stop grace, the lease's end (docs/design.md §8)."""

import logging
import threading
from datetime import timedelta
from pathlib import Path
from unittest import mock

import pytest
from django.db import OperationalError

from lib.refusals import Refused
from runtime.adapters.base import CommandOutcome, RunDirUnwritable
from runtime.models import JournalEntry, Run
from runtime.services import execution
from runtime.services.execution import LeaseKeeper, execute_run, reset_connection
from runtime.services.planning import plan_pending
from runtime.services.runs import claim_next_run
from tests.conftest import at
from tests.helpers import inject

pytestmark = pytest.mark.django_db

NOW = at("2026-11-30T10:00:00Z")
LATER = at("2026-11-30T10:00:07Z")
NO_WORK = '{"schemaVersion": "factory.command-result/v1", "outcome": "NO_WORK"}\n'


def _logged(caplog):
    return [(r.levelname, r.getMessage(), getattr(r, "action", None), getattr(r, "run", None))
            for r in caplog.records if r.name == "runtime.services.execution"]


@pytest.fixture
def claimed(registry_files, settings, tmp_path):
    """work-scan's run (adapter ``agent``, read-only, 2 attempts, 600 s), claimed by ``w1``."""
    settings.FACTORY_RUNS_DIR = str(tmp_path / "runs")
    settings.FACTORY_LEASE_SECONDS = 90
    settings.FACTORY_STOP_GRACE_SECONDS = 7
    settings.FACTORY_STDOUT_CAP_BYTES = 4321
    inject("op-0", "factory.work.requested", {"repo": "alpha"}, instant="2026-11-30T10:00:00Z")
    plan_pending(now=NOW)
    return claim_next_run(worker="w1", now=NOW, lease_seconds=60)


class Adapter:
    """An adapter answering ``answer`` (raising it when an exception), keeping what it was given."""

    def __init__(self, answer=None, during=None):
        self.answer, self.during, self.given = answer, during, []

    def __call__(self, run_execution):
        self.given.append(run_execution)
        lease = run_execution.while_waiting
        self.watched_then = (lease.watched, lease.done.is_set())
        if self.during:
            self.during(lease)
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


def outcome(**changes) -> CommandOutcome:
    base = {"exit_code": 0, "timed_out": False, "stdout_tail": "", "stdout_path": "/tmp/out.log"}
    return CommandOutcome(**{**base, **changes})


def execute(run, adapter, *, worker="w1", stop=None, lease_started=1000.0, monotonic=1000.0):
    """``execute_run`` with ``adapter`` as the agent adapter, the database's clock at LATER and
    the monotonic clock at ``monotonic``; returns the writes handed to ``write_while_held``."""
    with mock.patch.dict(execution.ADAPTERS, {"agent": adapter}), \
            mock.patch.object(execution, "database_now", lambda: LATER), \
            mock.patch.object(execution.time, "monotonic", return_value=monotonic), \
            mock.patch.object(execution, "write_while_held", wraps=execution.write_while_held) as held:
        execute_run(run, worker=worker, stop=stop, lease_started=lease_started)
    return [call.kwargs for call in held.call_args_list]


def stored(run) -> tuple:
    row = Run.objects.get(pk=run.pk)
    return row.status, row.outcome, row.reason, row.summary, row.exit_code, row.stdout_path


def last_entry(run) -> tuple:
    entry = JournalEntry.objects.filter(run=run).order_by("id").last()
    return entry.action, entry.at, entry.data


def test_the_adapter_gets_the_run_its_directory_capture_limits_keeper_and_definitions(claimed, settings):
    """The execution names the run, ``FACTORY_RUNS_DIR/<id>``, ``stdout.log`` (the plan names no
    capture), the run's time-out, the stdout cap, the lease keeper (the lease's settings, from
    ``lease_started``, not from now; watching while the adapter runs, done after) and the
    definitions in force."""
    stop = threading.Event()
    adapter = Adapter(outcome(exit_code=3, stdout_tail="boom\n"))
    writes = execute(claimed, adapter, stop=stop, lease_started=1000.0, monotonic=1005.0)
    (given,) = adapter.given
    assert (given.run, given.run_dir, given.capture_name, given.timeout_seconds, given.stdout_cap) == (
        claimed, Path(settings.FACTORY_RUNS_DIR) / str(claimed.pk), "stdout.log", 600, 4321)
    assert "work-scan@1" in given.definitions
    keeper = given.while_waiting
    assert isinstance(keeper, LeaseKeeper)
    assert (keeper.run, keeper.worker, keeper.lease_seconds, keeper.stop, keeper.stop_grace) == (
        claimed, "w1", 90, stop, 7)
    assert (keeper.held_until, keeper.next_renewal, keeper.renew_every) == (1090.0, 1030.0, 30.0)
    assert adapter.watched_then == (True, False)
    assert keeper.done.is_set()
    assert writes == [{"until": 1090.0, "what": f"the end of run {claimed.pk}"}]
    assert stored(claimed) == ("failed", "FAILED", "exit_code_3", "", 3, "/tmp/out.log")


def test_the_lease_is_counted_from_now_without_a_start(claimed):
    """No ``lease_started``: the keeper's lease starts at the monotonic now."""
    adapter = Adapter(outcome(exit_code=3))
    execute(claimed, adapter, lease_started=None, monotonic=500.0)
    assert adapter.given[0].while_waiting.held_until == 590.0


def test_a_plans_capture_name_is_used(claimed):
    """``captureStdout`` in the plan names the capture file."""
    Run.objects.filter(pk=claimed.pk).update(plan={**claimed.plan, "captureStdout": "scan.json"})
    claimed.refresh_from_db()
    adapter = Adapter(outcome(exit_code=3))
    execute(claimed, adapter)
    assert adapter.given[0].capture_name == "scan.json"


def test_a_run_no_longer_claimed_by_this_worker_is_not_started(claimed):
    """``start_run`` refused (another worker's claim): no adapter, no write, the row untouched."""
    adapter = Adapter(outcome())
    assert execute(claimed, adapter, worker="w2") == []
    assert adapter.given == []
    assert Run.objects.get(pk=claimed.pk).status == "claimed"


def test_an_unknown_adapter_is_a_finished_failure(claimed):
    """A plan's adapter no one knows: failed ``unknown_adapter``, naming it; no adapter runs."""
    Run.objects.filter(pk=claimed.pk).update(plan={**claimed.plan, "adapter": "telepathy"})
    claimed.refresh_from_db()
    adapter = Adapter(outcome())
    writes = execute(claimed, adapter)
    assert adapter.given == []
    assert writes == [{"until": 1090.0, "what": f"the end of run {claimed.pk}"}]
    assert stored(claimed) == ("failed", "FAILED", "unknown_adapter", "no adapter named 'telepathy'", None, "")


def test_a_refusal_is_a_finished_failure_with_its_code_and_detail(claimed):
    """The adapter refuses (no agent command, say): failed with the refusal's code and words."""
    writes = execute(claimed, Adapter(Refused("agent_not_configured", "FACTORY_AGENT_COMMAND is not set")))
    assert writes == [{"until": 1090.0, "what": f"the end of run {claimed.pk}"}]
    assert stored(claimed) == ("failed", "FAILED", "agent_not_configured", "FACTORY_AGENT_COMMAND is not set", None, "")


def test_an_unwritable_run_directory_is_a_failed_attempt_requeued(claimed):
    """Nothing ran: an ordinary failed attempt, requeued within its budget, with the path and
    the OS error as its detail."""
    error = RunDirUnwritable("/runs/1", OSError(30, "Read-only file system"))
    writes = execute(claimed, Adapter(error))
    assert writes == [{"until": 1090.0, "what": f"the failed attempt of run {claimed.pk}"}]
    row = Run.objects.get(pk=claimed.pk)
    assert (row.status, row.reason, row.worker) == ("queued", "runs_dir_unwritable", "")
    action, at_, data = last_entry(claimed)
    assert (action, at_, data["reason"], data["detail"]) == (
        "run_requeued", LATER, "runs_dir_unwritable", "/runs/1: [Errno 30 EROFS] Read-only file system")


def test_a_timed_out_command_is_an_interrupted_attempt_with_the_output_error(claimed):
    """Killed at its time-out: ``fail_attempt`` as interrupted (a read-only run is requeued),
    the capture's error as detail."""
    writes = execute(claimed, Adapter(outcome(exit_code=None, timed_out=True, output_error="disk full")))
    assert writes == [{"until": 1090.0, "what": f"the time-out of run {claimed.pk}"}]
    row = Run.objects.get(pk=claimed.pk)
    assert (row.status, row.reason) == ("queued", "timeout")
    action, at_, data = last_entry(claimed)
    assert (action, at_, data["reason"], data["detail"]) == ("run_requeued", LATER, "timeout", "disk full")


def test_a_dead_spawner_is_an_interrupted_attempt_logged(claimed, caplog):
    """The spawner died: logged as an error with its words, and an interrupted attempt
    ``spawner_died`` with them as detail."""
    with caplog.at_level(logging.INFO, logger="runtime.services.execution"):
        writes = execute(claimed, Adapter(outcome(exit_code=None, spawner_lost="the spawner exited (-9)")))
    assert writes == [{"until": 1090.0, "what": f"the interrupted attempt of run {claimed.pk}"}]
    assert _logged(caplog) == [("ERROR", f"run {claimed.pk}: the spawner exited (-9)", "spawner_died", claimed.pk)]
    action, at_, data = last_entry(claimed)
    assert (action, at_, data["reason"], data["detail"]) == (
        "run_requeued", LATER, "spawner_died", "the spawner exited (-9)")


def test_a_missing_command_is_a_finished_failure_with_the_adapters_words(claimed):
    """Not found: failed ``command_not_found``, the adapter's words as summary."""
    execute(claimed, Adapter(outcome(exit_code=None, not_found="no such file: scan")))
    assert stored(claimed) == ("failed", "FAILED", "command_not_found", "no such file: scan", None, "")


def test_a_contract_result_is_the_runs_end(claimed):
    """Exit 0 and a result line meeting the contract: succeeded with its outcome and summary,
    the capture's path kept; the end is written at the database's instant."""
    line = '{"schemaVersion": "factory.command-result/v1", "outcome": "NO_WORK", "summary": "nothing to do"}'
    execute(claimed, Adapter(outcome(stdout_tail=f"scanning\n{line}\n", stdout_path="/runs/x/stdout.log")))
    assert stored(claimed) == ("succeeded", "NO_WORK", "", "nothing to do", 0, "/runs/x/stdout.log")
    assert Run.objects.get(pk=claimed.pk).finished_at == LATER


def test_an_unwritable_capture_is_logged_and_named_in_the_result(claimed, caplog):
    """The output could not be written: an error logged, the result's reason
    ``output_unwritable`` when it has none, and ``outputError`` journaled with the end."""
    with caplog.at_level(logging.INFO, logger="runtime.services.execution"):
        execute(claimed, Adapter(outcome(exit_code=0, stdout_tail=NO_WORK, output_error="disk full")))
    assert _logged(caplog) == [(
        "ERROR", f"run {claimed.pk}: its output could not be written (disk full); read to the end and discarded",
        "output_unwritable", claimed.pk)]
    assert stored(claimed)[:3] == ("succeeded", "NO_WORK", "output_unwritable")
    action, _, data = last_entry(claimed)
    assert data.get("outputError") == "disk full", (action, data)


def test_a_failure_with_a_reason_keeps_it_beside_the_output_error(claimed):
    """A result with a reason of its own keeps it; ``outputError`` is still journaled."""
    execute(claimed, Adapter(outcome(exit_code=4, output_error="disk full")))
    assert stored(claimed)[:3] == ("failed", "FAILED", "exit_code_4")
    assert last_entry(claimed)[2].get("outputError") == "disk full"


def test_an_attempt_the_keeper_ended_is_recorded_as_aborted(claimed):
    """The keeper said stop (the stop grace over) while the adapter ran: an interrupted attempt
    with the keeper's reason, the write bounded a renewal interval past the lease's end."""
    writes = execute(claimed, Adapter(outcome(exit_code=None, aborted=True),
                                      during=lambda lease: setattr(lease, "ended", "worker_stopped")))
    assert writes == [{"until": 1090.0 + 30.0, "what": f"the interrupted attempt of run {claimed.pk}"}]
    assert Run.objects.get(pk=claimed.pk).reason == "worker_stopped"


def test_a_keeper_that_ended_counts_even_when_the_command_was_not_aborted(claimed):
    """The command came back on its own, but the lease was lost meanwhile: the loss is
    journaled, the run left to its new holder."""
    execute(claimed, Adapter(outcome(exit_code=0), during=lambda lease: setattr(lease, "ended", "lease_lost")))
    assert Run.objects.get(pk=claimed.pk).status == "running"
    assert last_entry(claimed) == ("run_lease_lost", LATER, {"worker": "w1", "attempt": 1})


# LeaseKeeper: its every answer, the clocks and the renewal the test's own.


@pytest.fixture
def keeper(claimed):
    """A keeper of a 90 s lease from monotonic 1000 (renewals every 30 s), grace 7 s."""
    return LeaseKeeper(claimed, worker="w1", lease_seconds=90, lease_started=1000.0, stop=threading.Event(),
                       stop_grace=7.0)


def ask(keeper, moment, *, renew=True, now=LATER):
    """The keeper's answer at monotonic ``moment``; ``renew`` what ``renew_lease`` answers (an
    exception is raised); returns (answer, the renewals' arguments)."""
    calls = []

    def renewing(run_id, **kwargs):
        calls.append((run_id, kwargs, keeper.renewing))
        if callable(renew):
            return renew()
        if isinstance(renew, BaseException):
            raise renew
        return renew
    with mock.patch.object(execution.time, "monotonic", return_value=moment), \
            mock.patch.object(execution, "renew_lease", renewing), \
            mock.patch.object(execution, "database_now", lambda: now):
        return keeper(), calls


def test_before_the_next_renewal_the_command_goes_on_without_a_query(keeper):
    """Short of ``next_renewal``: go on, no renewal asked."""
    assert ask(keeper, 1029.9) == (True, [])


def test_a_renewal_is_asked_at_its_instant_and_moves_the_lease_from_that_moment(keeper, caplog):
    """At ``next_renewal`` exactly: one renewal of this run by this worker at the database's
    instant for the lease's seconds, ``renewing`` while it runs; the lease then holds
    ``lease_seconds`` from the moment asked, the next renewal ``renew_every`` later."""
    with caplog.at_level(logging.INFO, logger="runtime.services.execution"):
        assert ask(keeper, 1030.0) == (True, [(keeper.run.pk, {"worker": "w1", "now": LATER, "lease_seconds": 90}, True)])
    assert (keeper.held_until, keeper.next_renewal, keeper.renewing, keeper.ended) == (1120.0, 1060.0, False, "")
    assert keeper.watchdog is None  # not watching: no watchdog
    assert _logged(caplog) == []


def test_a_watched_keeper_starts_one_watchdog_at_its_first_renewal(keeper):
    """Inside ``watching``: the first renewal starts the watchdog (a daemon named after the run),
    the next one keeps it."""
    with mock.patch.object(execution, "WATCHDOG_SECONDS", 0.01), keeper.watching():
        ask(keeper, 1030.0)
        first = keeper.watchdog
        assert (first.name, first.daemon, first.is_alive()) == (f"lease-watchdog-{keeper.run.pk}", True, True)
        ask(keeper, 1060.0)
        assert keeper.watchdog is first
    assert not first.is_alive()


def test_a_lost_lease_stops_the_command(keeper, caplog):
    """The renewal finds the run no longer this worker's: stop, ``lease_lost``."""
    with caplog.at_level(logging.INFO, logger="runtime.services.execution"):
        assert ask(keeper, 1030.0, renew=False)[0] is False
    assert keeper.ended == "lease_lost"
    assert _logged(caplog) == [("WARNING", f"run {keeper.run.pk}: lease lost; killing its command", "lease_lost",
                                keeper.run.pk)]


def test_a_failed_renewal_is_retried_a_second_later_on_a_fresh_connection(keeper, caplog):
    """A database error: warned with the error, the connection reset, the next try
    ``RETRY_SECONDS`` after the failure; the command goes on, the lease unchanged."""
    with caplog.at_level(logging.INFO, logger="runtime.services.execution"), \
            mock.patch.object(execution, "reset_connection") as reset:
        assert ask(keeper, 1030.0, renew=OperationalError("server closed the connection"))[0] is True
    assert (reset.call_count, keeper.next_renewal, keeper.held_until, keeper.renewing, keeper.ended) == (
        1, 1031.0, 1090.0, False, "")
    assert _logged(caplog) == [(
        "WARNING", f"run {keeper.run.pk}: lease renewal failed (server closed the connection); retrying",
        "lease_renewal_failed", keeper.run.pk)]


def test_a_renewal_that_came_back_after_the_watchdog_ended_the_lease_stops(keeper):
    """The watchdog ended the lease while the renewal hung: its late answer does not revive it."""
    def hung():
        keeper.ended = "lease_renewal_failed"
        return True
    assert ask(keeper, 1030.0, renew=hung)[0] is False
    assert (keeper.ended, keeper.held_until) == ("lease_renewal_failed", 1090.0)


def test_at_the_leases_end_the_command_is_stopped(keeper, caplog):
    """At ``held_until`` exactly, no renewal got through: stop, ``lease_renewal_failed``, no query."""
    with caplog.at_level(logging.INFO, logger="runtime.services.execution"):
        assert ask(keeper, 1090.0) == (False, [])
    assert keeper.ended == "lease_renewal_failed"
    assert _logged(caplog) == [("WARNING", f"run {keeper.run.pk}: lease renewal failed; killing its command",
                                "lease_renewal_failed", keeper.run.pk)]
    assert ask(keeper, 1089.0)[0] is False  # once ended, always ended


def test_an_ended_keeper_says_its_own_reason(keeper):
    """Ended already (the watchdog, say): stop with that reason, whatever the clock, no query."""
    keeper.ended = "lease_lost"
    assert ask(keeper, 1001.0) == (False, [])
    assert keeper.ended == "lease_lost"


def test_a_stop_gives_the_command_its_grace_then_stops_it(keeper, caplog):
    """The worker asked to stop: warned once with the grace; the command goes on until
    ``stop_grace`` after the first look, then stops ``worker_stopped``."""
    keeper.stop.set()
    with caplog.at_level(logging.INFO, logger="runtime.services.execution"):
        assert ask(keeper, 1001.0) == (True, [])
        assert keeper.stop_deadline == 1008.0
        assert ask(keeper, 1007.9) == (True, [])
        assert keeper.stop_deadline == 1008.0
        assert ask(keeper, 1008.0) == (False, [])
    assert keeper.ended == "worker_stopped"
    assert _logged(caplog) == [
        ("WARNING", f"run {keeper.run.pk}: stopping; its command gets 7.0s to finish", "run_stop_grace", keeper.run.pk),
        ("WARNING", f"run {keeper.run.pk}: worker stopped; killing its command", "worker_stopped", keeper.run.pk),
    ]


def test_a_stopping_keeper_still_renews_within_the_grace(keeper):
    """Within the grace the lease is kept as usual."""
    keeper.stop.set()
    assert ask(keeper, 1030.0)[0] is True
    assert keeper.held_until == 1120.0


def test_a_keeper_without_a_stop_event_never_stops_for_it(claimed):
    """No stop event (a worker that is never asked to stop): no grace, no deadline."""
    keeper = LeaseKeeper(claimed, worker="w1", lease_seconds=90, lease_started=1000.0, stop=None, stop_grace=0.0)
    assert ask(keeper, 1010.0) == (True, [])
    assert keeper.stop_deadline is None


def test_a_broken_connection_is_dropped_quietly():
    """``reset_connection`` swallows the database's error in closing a broken connection."""
    with mock.patch.object(execution.connection, "close", side_effect=OperationalError("already gone")) as close:
        reset_connection()
    assert close.call_count == 1


def test_a_renewal_interval_is_a_third_of_the_lease():
    """The keeper renews every ``renewal_interval`` of its lease (30 s of 90 s)."""
    assert execution.renewal_interval(90) == 30.0
    assert timedelta(seconds=execution.renewal_interval(60)) == timedelta(seconds=20)


def test_a_result_outside_the_definitions_output_schema_fails_the_run(claimed):
    """A result line meeting the contract but not work-scan's ``outputSchema``: failed
    ``output_contract_violation``."""
    execute(claimed, Adapter(outcome(stdout_tail='{"schemaVersion": "factory.command-result/v1", "outcome": "MAYBE"}')))
    assert stored(claimed)[:3] == ("failed", "FAILED", "output_contract_violation")


def test_a_definition_gone_from_the_registry_leaves_only_the_contract(claimed):
    """The run's definition no longer in the registry in force: the contract alone decides."""
    Run.objects.filter(pk=claimed.pk).update(definition="gone@1")
    claimed.refresh_from_db()
    execute(claimed, Adapter(outcome(stdout_tail='{"schemaVersion": "factory.command-result/v1", "outcome": "MAYBE"}')))
    assert stored(claimed)[:3] == ("succeeded", "MAYBE", "")


def test_the_end_is_chained_by_the_registry_read_at_the_start(claimed):
    """``finish_run`` is handed the registry ``execute_run`` read before the command: the one in
    force at the end (a file changed meanwhile) is not read again."""
    def read_again():
        raise AssertionError("the registry in force was read again at the end")
    with mock.patch("runtime.services.runs.get_registry", read_again):
        execute(claimed, Adapter(outcome(stdout_tail=NO_WORK)))
    assert stored(claimed)[:2] == ("succeeded", "NO_WORK")


def _taken_by_w2(lease):
    """Another worker took the run while the command ran (its lease expired and was swept)."""
    Run.objects.filter(pk=lease.run.pk).update(worker="w2")


@pytest.mark.parametrize("answer", [
    RunDirUnwritable("/runs/1", OSError(30, "Read-only file system")),
    outcome(exit_code=None, timed_out=True),
    outcome(exit_code=None, spawner_lost="the spawner exited (-9)"),
], ids=["unwritable", "timeout", "spawner"])
def test_a_failed_attempt_is_recorded_by_the_worker_that_held_the_run_only(claimed, answer):
    """A failed or interrupted attempt is written for this worker's run only: a run another
    worker took meanwhile is left as that worker has it."""
    execute(claimed, Adapter(answer, during=_taken_by_w2))
    row = Run.objects.get(pk=claimed.pk)
    assert (row.status, row.worker, row.reason) == ("running", "w2", "")


@pytest.mark.parametrize(("answer", "during", "status", "reason"), [
    (outcome(exit_code=None, timed_out=True), None, "interrupted", "timeout"),
    (outcome(exit_code=None, spawner_lost="the spawner exited (-9)"), None, "interrupted", "spawner_died"),
    (outcome(exit_code=None, aborted=True), lambda lease: setattr(lease, "ended", "worker_stopped"),
     "interrupted", "worker_stopped"),
    (RunDirUnwritable("/runs/1", OSError(30, "Read-only file system")), None, "queued", "runs_dir_unwritable"),
], ids=["timeout", "spawner", "stopped", "unwritable"])
def test_a_mutating_runs_cut_attempt_waits_interrupted_but_one_that_never_started(claimed, answer, during, status,
                                                                                  reason):
    """A mutating run cut short (time-out, dead spawner, a stopped worker) may have done part of
    its work: it waits ``interrupted`` with its worker; one whose directory was unwritable never
    started its command and is requeued."""
    Run.objects.filter(pk=claimed.pk).update(plan={**claimed.plan, "mutating": True})
    claimed.refresh_from_db()
    execute(claimed, Adapter(answer, during=during))
    row = Run.objects.get(pk=claimed.pk)
    assert (row.status, row.reason, row.worker) == (status, reason, "w1" if status == "interrupted" else "")
