"""Intake services shared by the HTTP doors and ``inject`` (docs/design.md §3; docs/intake.md).

``receive_github_delivery`` is what ``POST /github`` does after the signature and the body
checks, and what ``inject --github-event`` does with no signature: translate with the
repos in force, then admit through ``admit_at_door`` (grouped with the process's other
admissions at that moment). The door differs, nothing else.
"""

import logging
from datetime import datetime

from intake.door_admission import DoorAdmission, admit_at_door
from intake.github import Ignored, Malformed, Translated, translate_delivery
from runtime.models import Door
from runtime.registry import get_registry
from runtime.services.admission import AdmissionRefused

logger = logging.getLogger(__name__)


def receive_github_delivery(
    kind: str | None, delivery_id: str | None, payload, *, door: Door, now: datetime
) -> DoorAdmission | Ignored | Malformed:
    """Translate one parsed GitHub delivery at ``now`` (aware UTC: the fallback occurredAt)
    and admit it through ``door``.

    Returns the ``DoorAdmission`` (admitted or duplicate), the ``Ignored`` reason, or
    ``Malformed`` with ``[{code, detail}]`` — a translation refusal or the admission's own
    (``invalid_payload`` and the like, which a correct translation never produces).
    """
    registry = get_registry()
    result = translate_delivery(kind, delivery_id, payload, registry.repos, now=now)
    log = {"delivery": delivery_id, "kind": kind, "door": door.value}
    if isinstance(result, Ignored):
        logger.info(
            "github delivery %s (%s) ignored: %s: %s", delivery_id, kind, result.reason, result.detail,
            extra={"action": "github_delivery_ignored", "reason": result.reason, **log},
        )
        return result
    if isinstance(result, Malformed):
        logger.warning(
            "github delivery %s (%s) refused: %s", delivery_id, kind, result.errors,
            extra={"action": "github_delivery_refused", **log},
        )
        return result
    assert isinstance(result, Translated)
    try:
        return admit_at_door(result.envelope, door=door, registry=registry)
    except AdmissionRefused as exc:
        logger.warning(
            "github delivery %s (%s) translated to an envelope admission refused: %s", delivery_id, kind, exc,
            extra={"action": "github_delivery_refused", **log},
        )
        return Malformed(exc.errors)
