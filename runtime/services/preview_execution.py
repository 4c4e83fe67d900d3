"""Running one preview through the command adapter (docs/design.md §8, Previews).

A preview runs with a run's protections — its closed argv without a shell, an environment
with no secret, its own process group killed with its worker (even a SIGKILLed one) and at
its time-out — at a lower CPU priority (``PREVIEW_NICE``), and as its own kind of work: no lease, no singleton or barrier, no attempt,
never retried. Its output goes to ``FACTORY_RUNS_DIR/previews/<preview id>/``, removed once
the first ``PREVIEW_STDOUT_BYTES`` of it are on the row.
"""

import logging
import shutil
import threading
from pathlib import Path

from django.conf import settings

from runtime.adapters.base import RunDirUnwritable
from runtime.adapters.command import run_command
from runtime.adapters.fake import scripted_preview
from runtime.adapters.result import result_from_output
from runtime.clock import database_now
from runtime.preview_model import Preview, PreviewStatus
from runtime.registry import get_registry
from runtime.registry.model import fill_argv

from .previews import PREVIEW_STDOUT_BYTES, claim_preview, finish_preview

logger = logging.getLogger(__name__)

CAPTURE_NAME = "stdout.log"
#: How much nicer than its worker a preview's command runs: on a busy host the kernel gives
#: the CPU to ticks, intake and runs first (a burst of watched loops keeps the preview
#: threads busy back to back).
PREVIEW_NICE = 10


def preview_dir(preview_id: int) -> Path:
    """Where preview ``preview_id``'s command runs and writes its output."""
    return Path(settings.FACTORY_RUNS_DIR) / "previews" / str(preview_id)


def preview_one(*, worker: str, stop: threading.Event | None = None) -> bool:
    """Claim and run one waiting preview; True when one was handled. One query when none waits."""
    preview = claim_preview(worker=worker, clock=database_now)
    if preview is None:
        return False
    logger.info("preview %s of proposal %s started", preview.pk, preview.proposal_id,
                extra={"action": "preview_started", "proposal": preview.proposal_id})
    result = run_preview(preview, stop=stop)
    finish_preview(preview, worker=worker, now=database_now(), **result)
    logger.info("preview of proposal %s %s: %s %s", preview.proposal_id, result["status"],
                result.get("outcome", ""), result.get("reason", ""),
                extra={"action": "proposal_previewed", "proposal": preview.proposal_id})
    return True


def run_preview(preview: Preview, *, stop: threading.Event | None = None) -> dict:
    """Run ``preview``'s argv and say what it found, as ``finish_preview``'s fields: ``done``
    with the result's outcome, summary and data when the command met its output contract
    and exited 0; ``failed`` with the reason otherwise (``timeout``, ``worker_stopped`` —
    ``stop`` was set: a preview is advice, killed at once —, ``spawner_died``, ``command_not_found``,
    ``runs_dir_unwritable``, ``exit_code_<n>``, ``output_contract_violation``)."""
    if preview.proposal.plan.get("adapter") == "fake":
        return play_fake_preview(preview)
    run_dir = preview_dir(preview.pk)
    argv = fill_argv(preview.argv, {"runId": f"preview-{preview.pk}", "runDir": str(run_dir)})
    try:
        outcome = run_command(
            argv, run_id=f"preview-{preview.pk}", run_dir=run_dir, capture_name=CAPTURE_NAME,
            timeout_seconds=preview.timeout_seconds, stdout_cap=settings.FACTORY_STDOUT_CAP_BYTES,
            while_waiting=lambda: stop is None or not stop.is_set(), nice=PREVIEW_NICE,
        )
    except RunDirUnwritable as exc:
        return {"status": PreviewStatus.FAILED, "reason": exc.code, "detail": exc.detail}
    try:
        stdout = _first_bytes(run_dir / CAPTURE_NAME)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    if outcome.timed_out:
        return {"status": PreviewStatus.FAILED, "reason": "timeout", "stdout": stdout,
                "detail": f"killed at its time-out of {preview.timeout_seconds} s"}
    if outcome.aborted:
        return {"status": PreviewStatus.FAILED, "reason": "worker_stopped", "stdout": stdout,
                "detail": "its worker was stopping; a preview is advice and is not waited for"}
    if outcome.spawner_lost:
        return {"status": PreviewStatus.FAILED, "reason": "spawner_died", "stdout": stdout, "detail": outcome.spawner_lost}
    if outcome.not_found:
        return {"status": PreviewStatus.FAILED, "reason": "command_not_found", "detail": outcome.not_found}
    registry = get_registry()
    definition = registry.definitions.get(preview.proposal.definition)
    result = result_from_output(
        outcome.stdout_tail, outcome.exit_code, contract_schema=registry.command_result_schema,
        output_schema=definition.output_schema if definition else None,
    )
    return {
        "status": PreviewStatus.DONE if result.succeeded else PreviewStatus.FAILED,
        "reason": result.reason, "outcome": _storable(result.outcome), "summary": _storable(result.summary),
        "data": _storable(result.data), "exit_code": result.exit_code, "stdout": stdout,
        "detail": _storable("; ".join(result.extra.get("violations", []))) if not result.succeeded else "",
    }


def _storable(value):
    """``value`` with every NUL in its text written U+FFFD: PostgreSQL stores none in text or
    jsonb, and a command's result must not make its preview unrecordable."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, list):
        return [_storable(item) for item in value]
    if isinstance(value, dict):
        return {_storable(key): _storable(item) for key, item in value.items()}
    return value


def play_fake_preview(preview: Preview) -> dict:
    """The demo's stand-in previews by playing its script's ``preview`` for the plan's rule
    (``runtime.adapters.fake.scripted_preview``); failed ``fake_preview_missing`` when the
    script no longer has one."""
    scripted = scripted_preview(preview.proposal.plan, get_registry().definitions)
    if scripted is None:
        return {"status": PreviewStatus.FAILED, "reason": "fake_preview_missing",
                "detail": "the demo's fake-outcomes.yaml has no preview for this proposal's rule"}
    return {"status": PreviewStatus.DONE, "outcome": scripted["outcome"], "summary": scripted.get("summary", ""),
            "data": scripted.get("data"), "exit_code": 0}


def _first_bytes(path: Path) -> str:
    """The first ``PREVIEW_STDOUT_BYTES`` of a capture file as text (NUL written as U+FFFD:
    no database stores it in text); "" when it cannot be read."""
    try:
        with path.open("rb") as capture:
            head = capture.read(PREVIEW_STDOUT_BYTES)
    except OSError:
        return ""
    return head.decode("utf-8", errors="replace").replace("\x00", "\ufffd")
