"""The host clock bridge: a host timer's one permitted act is to admit a typed event (docs/host-clock.md).

``manage.py bridge run JOB`` is what a rendered launchd plist or systemd timer calls. For
one job of the overlay's ``jobs:`` mapping (``Registry.jobs``) it

1. runs the **gate command** (argv, no shell, ``GATE_TIMEOUT_SECONDS``): exit 0 goes on,
   exit 1 means nothing to do (logged; the bridge exits 0 without admitting), anything
   else — a missing executable or a time-out included — is an error;
2. runs the **dry command** and logs its output line by line; it must exit 0 (a dry
   command that fails leaves the operator without the preview it exists for, so the
   bridge stops before admitting);
3. POSTs the event, signed with ``FACTORY_EVENTS_SECRET`` as ``/events`` expects
   (docs/intake.md), to ``FACTORY_SERVE_URL``: eventId ``bridge:<job>:<slot>``,
   ``source: "bridge"``, payload = the job's payload plus ``loop`` (the job) and ``slot``.

A timer that fires twice in one slot converges on one event: the second POST is answered
200 duplicate, which is success. Planning, approval and execution stay the runtime's:
events of the ``events`` door follow their type's approval policy (watched by default),
so enabling a job never grants auto-approval (docs/host-clock.md).

Failures raise ``BridgeError`` with a one-line ``reason`` and the command's exit code:
``EXIT_FAILED`` (unknown or disabled job, gate or dry command failure, no secret),
``EXIT_UNREACHABLE``, ``EXIT_SIGNATURE_REFUSED`` (401), ``EXIT_EVENT_REFUSED`` (422 or
any other answer). Everything here takes ``now`` (aware UTC) from the caller.
"""

import json
import logging
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from django.conf import settings

from lib.calendar import calendar_slot
from lib.envelope import make_envelope
from lib.instants import format_instant
from lib.processes import kill_process_group
from lib.refusals import Refused
from lib.signing import sign
from lib.slots import slot_floor
from runtime.adapters.command import command_environment
from runtime.registry import Job
from runtime.registry.model import PLACEHOLDER
from runtime.services.plans import plan_time_values

logger = logging.getLogger(__name__)

#: A gate is meant to be cheap (docs/host-clock.md: "a frequent clock can still be cheap"); two
#: minutes is generous for reading a queue and short enough that a hung gate cannot
#: overlap the next 5-minute fire.
GATE_TIMEOUT_SECONDS = 120
DRY_TIMEOUT_SECONDS = 120
#: The serve process answers /events from its database in milliseconds; ten seconds
#: separates "slow" from "not there" without holding a timer's run open.
POST_TIMEOUT_SECONDS = 10
#: Gate exit statuses (docs/host-clock.md): 0 go on, 1 nothing to do; anything else is an error.
GATE_GO, GATE_NOTHING_TO_DO = 0, 1

EXIT_FAILED = 1
EXIT_UNREACHABLE = 2
EXIT_SIGNATURE_REFUSED = 3
EXIT_EVENT_REFUSED = 4

EVENT_ID_PREFIX = "bridge:"
SOURCE = "bridge"


#: The refusal code of each exit status, for logs and callers that read ``code``.
EXIT_CODES = {
    EXIT_FAILED: "bridge_failed",
    EXIT_UNREACHABLE: "serve_unreachable",
    EXIT_SIGNATURE_REFUSED: "signature_refused",
    EXIT_EVENT_REFUSED: "event_refused",
}


class BridgeError(Refused):
    """The bridge did not admit its event and the timer's run must show it: ``detail`` is
    one line, ``exit_code`` one of the ``EXIT_*`` constants (``code`` names it)."""

    code_in_message = False

    def __init__(self, exit_code: int, detail: str):
        self.exit_code = exit_code
        super().__init__(EXIT_CODES[exit_code], detail)


@dataclass(frozen=True)
class Emitted:
    """The serve's answer to an admitted POST: the eventId, and whether it was already there."""

    event_id: str
    duplicate: bool


@dataclass(frozen=True)
class BridgeOutcome:
    """What one ``bridge run`` did: ``skipped`` (gate said nothing to do) or ``emitted``."""

    job: str
    slot: datetime
    skipped: bool
    gate_reason: str = ""
    emitted: Emitted | None = None


# --- slots ---------------------------------------------------------------------------------
def job_slot(job: Job, now: datetime) -> datetime:
    """The slot a fire of ``job`` at ``now`` belongs to: the epoch floor by the job's
    cadence (docs/design.md §5), or its latest calendar time; every fire within one slot gives
    the same eventId."""
    if job.cadence_seconds is not None:
        return slot_floor(now, job.cadence_seconds)
    return calendar_slot(job.at, job.timezone, job.days, now)


# --- gate and dry commands -------------------------------------------------------------------
def fill_command(argv: tuple[str, ...]) -> list[str]:
    """Fill ``{factoryRoot}``, ``{python}`` and ``{manage}`` (the loader allows no others)."""
    values = plan_time_values()
    return [PLACEHOLDER.sub(lambda m: values[m.group(1)], arg) for arg in argv]


def run_command(kind: str, job: Job, argv: tuple[str, ...], timeout_seconds: int) -> tuple[int, str]:
    """Run a gate or dry command without a shell in its own process group; return
    ``(exit status, combined output)``. Each output line is logged. A command that cannot
    start or outlives ``timeout_seconds`` (its whole group is killed) raises BridgeError."""
    filled = fill_command(argv)
    if not Path(settings.FACTORY_ROOT).is_dir():
        # The commands run in the factory root; Popen would blame the executable instead.
        raise BridgeError(EXIT_FAILED, f"{kind} command of {job.name} cannot start: FACTORY_ROOT {settings.FACTORY_ROOT} is not a directory")
    try:
        process = subprocess.Popen(
            filled, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            cwd=settings.FACTORY_ROOT, env=command_environment(), start_new_session=True,
        )
    except OSError as exc:
        raise BridgeError(EXIT_FAILED, f"{kind} command of {job.name} cannot start: {filled[0]}: {exc.strerror or exc}") from None
    try:
        output, _ = process.communicate(timeout=timeout_seconds)
    except subprocess.TimeoutExpired:
        kill_process_group(process, grace_seconds=0)
        process.communicate()
        raise BridgeError(EXIT_FAILED, f"{kind} command of {job.name} timed out after {timeout_seconds} s") from None
    text = output.decode("utf-8", errors="replace")
    for line in text.splitlines():
        logger.info("%s %s: %s", job.name, kind, line, extra={"action": f"bridge_{kind}_output", "job": job.name})
    return process.returncode, text


def last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else "(no output)"


# --- the event -------------------------------------------------------------------------------
def bridge_envelope(job: Job, slot: datetime) -> dict:
    """The ``factory.event/v1`` envelope of one job and slot; identical for every fire of
    the slot (``occurredAt`` is the slot, as for ticks), so a second POST is a duplicate."""
    slot_text = format_instant(slot)
    return make_envelope(
        event_id=f"{EVENT_ID_PREFIX}{job.name}:{slot_text}",
        type=job.event_type,
        source=SOURCE,
        subject=job.subject,
        occurred_at=slot,
        payload={**job.payload, "loop": job.name, "slot": slot_text},
    )


def _answer_detail(body: bytes) -> str:
    """One line from a refusal body: ``{error, detail}`` or ``{errors: [{code, detail}]}``."""
    try:
        answer = json.loads(body)
    except ValueError:
        return body[:200].decode("utf-8", errors="replace").replace("\n", " ")
    if isinstance(answer, dict) and "error" in answer:
        return f"{answer['error']}: {answer.get('detail', '')}"
    if isinstance(answer, dict) and isinstance(answer.get("errors"), list):
        return "; ".join(f"{e.get('code')}: {e.get('detail')}" for e in answer["errors"] if isinstance(e, dict))
    return json.dumps(answer)[:200]


def emit_envelope(envelope: dict, *, now: datetime, serve_url: str, secret: str) -> Emitted:
    """POST ``envelope`` to ``<serve_url>/events``, signed for ``now`` (docs/intake.md).

    Returns ``Emitted`` for 202 (admitted) and 200 duplicate. Raises BridgeError:
    ``EXIT_FAILED`` without a secret or an http(s) URL, ``EXIT_UNREACHABLE`` when nothing answers,
    ``EXIT_SIGNATURE_REFUSED`` on 401, ``EXIT_EVENT_REFUSED`` on 422 or any other answer.
    """
    if not secret:
        raise BridgeError(EXIT_FAILED, "FACTORY_EVENTS_SECRET is not set: the bridge cannot sign its event")
    if not serve_url.startswith(("http://", "https://")):
        raise BridgeError(EXIT_FAILED, f"FACTORY_SERVE_URL {serve_url!r} is not an http(s) URL")
    body = json.dumps(envelope, sort_keys=True, separators=(",", ":")).encode("utf-8")
    timestamp = str(int(now.timestamp()))
    url = serve_url.rstrip("/") + "/events"
    request = urllib.request.Request(
        url, data=body, method="POST",
        headers={
            "Content-Type": "application/json",
            "X-Factory-Timestamp": timestamp,
            "X-Factory-Signature": sign(secret, timestamp.encode("ascii") + b"." + body),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=POST_TIMEOUT_SECONDS) as response:
            status, answer_body = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, answer_body = exc.code, exc.read()
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise BridgeError(EXIT_UNREACHABLE, f"serve unreachable at {url}: {reason}") from None
    if status == 401:
        raise BridgeError(EXIT_SIGNATURE_REFUSED, f"signature refused by {url}: {_answer_detail(answer_body)}")
    try:
        answer = json.loads(answer_body)
    except ValueError:
        answer = None
    if status in (200, 202) and isinstance(answer, dict) and answer.get("eventId") == envelope["eventId"]:
        return Emitted(event_id=envelope["eventId"], duplicate=bool(answer.get("duplicate")))
    raise BridgeError(EXIT_EVENT_REFUSED, f"event {envelope['eventId']} refused by {url} ({status}): {_answer_detail(answer_body)}")


def run_job(job: Job, *, now: datetime, serve_url: str, secret: str) -> BridgeOutcome:
    """Gate, dry, then admit one job's event for the slot of ``now`` (module docstring).

    Raises BridgeError; a disabled job is refused (``EXIT_FAILED``): a timer left
    installed after its job was disabled must not admit anything.
    """
    log = {"job": job.name}
    if not job.enabled:
        raise BridgeError(EXIT_FAILED, f"job {job.name} is disabled in config/schedule.yaml; nothing admitted (remove its timer)")
    slot = job_slot(job, now)
    if job.gate_command:
        status, output = run_command("gate", job, job.gate_command, GATE_TIMEOUT_SECONDS)
        if status == GATE_NOTHING_TO_DO:
            logger.info(
                "%s: the gate says nothing to do (%s); nothing admitted", job.name, last_line(output),
                extra={"action": "bridge_gate_skipped", **log},
            )
            return BridgeOutcome(job.name, slot, skipped=True, gate_reason=last_line(output))
        if status != GATE_GO:
            raise BridgeError(EXIT_FAILED, f"gate command of {job.name} exited {status}: {last_line(output)}")
    if job.dry_command:
        status, output = run_command("dry", job, job.dry_command, DRY_TIMEOUT_SECONDS)
        if status != 0:
            raise BridgeError(EXIT_FAILED, f"dry command of {job.name} exited {status}: {last_line(output)}")
    emitted = emit_envelope(bridge_envelope(job, slot), now=now, serve_url=serve_url, secret=secret)
    logger.info(
        "%s: %s %s", job.name, "duplicate" if emitted.duplicate else "admitted", emitted.event_id,
        extra={"action": "bridge_event_duplicate" if emitted.duplicate else "bridge_event_admitted",
               "eventId": emitted.event_id, **log},
    )
    return BridgeOutcome(job.name, slot, skipped=False, emitted=emitted)
