"""Host-clock bridge jobs: the overlay's ``jobs:`` mapping (issue 7; spec §15; DESIGN §2).

Read from the overlay ``config/schedule.yaml`` as already parsed by ``loops.read_overlay``;
the jobs read no file of their own.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from lib.cadence import CadenceError, parse_every

from .model import (
    JOB_COMMAND_PLACEHOLDERS,
    JOB_PAYLOAD_FIELDS,
    LOOP_NAME_PATTERN,
    PLACEHOLDER,
    SAMPLE_SLOT,
    Definition,
    EventType,
    Job,
)

if TYPE_CHECKING:
    from pathlib import Path

    from .loader import Load


def read_jobs(
    load: Load, overlay: dict, event_types: dict[str, EventType], definitions: dict[str, Definition]
) -> dict[str, Job]:
    """The ``overlay``'s ``jobs:`` mapping (the host-clock registry), validated fail closed.

    Rules: a job name follows the loop grammar (``invalid_job_name``); exactly one of
    ``every`` and ``at`` (``job_cadence``), ``every`` in the cadence grammar
    (``unparseable_every``), ``timezone`` an IANA zone given with ``at`` and only
    with it (``unknown_timezone``, ``job_cadence``); the event type is registered
    (``unregistered_event_type`` — no job is silently mapped to another type, spec
    §15); gate and dry commands use only ``{factoryRoot}``, ``{python}``,
    ``{manage}`` (``unknown_placeholder``); the static payload leaves ``loop`` and
    ``slot`` to the bridge (``job_payload_reserved``); a sample event (payload plus
    ``loop`` and ``slot``) passes the type's payload schema and its target's input
    schema (``sample_event_invalid``).
    """
    path = load.config_dir / "schedule.yaml"
    result = {}
    for name, entry in sorted((overlay.get("jobs") or {}).items()):
        if not re.fullmatch(LOOP_NAME_PATTERN, name):
            load.error(path, f"jobs/{name}", "invalid_job_name", f"a job name must match {LOOP_NAME_PATTERN}")
            continue
        job = read_job(load, path, name, entry, event_types, definitions)
        if job is not None:
            result[name] = job
    return result


def read_job(load: Load, path: Path, name: str, entry: dict, event_types, definitions) -> Job | None:
    """One job, or None when it broke any rule of ``read_jobs`` (each is reported)."""
    label = f"jobs/{name}"
    errors_before = len(load.errors)
    cadence = None
    if ("every" in entry) == ("at" in entry):
        load.error(path, label, "job_cadence", "give exactly one cadence: every (e.g. 60m) or at (HH:MM)")
    elif "every" in entry:
        try:
            cadence = parse_every(entry["every"])
        except CadenceError as exc:
            load.error(path, label, exc.code, str(exc))
    if "at" in entry and "timezone" not in entry:
        load.error(path, label, "job_cadence", "a calendar time (at) needs its IANA timezone, e.g. Europe/Budapest")
    if "at" not in entry and ("timezone" in entry or "days" in entry):
        load.error(path, label, "job_cadence", "timezone and days belong to a calendar time (at)")
    if "timezone" in entry:
        try:
            ZoneInfo(entry["timezone"])
        except (ZoneInfoNotFoundError, ValueError):
            load.error(path, label, "unknown_timezone", f"{entry['timezone']!r} is not an IANA time zone")
    for key in ("gate_command", "dry_command"):
        for arg in entry.get(key, []):
            unknown = [n for n in PLACEHOLDER.findall(arg) if n not in JOB_COMMAND_PLACEHOLDERS]
            if unknown:
                load.error(
                    path, label, "unknown_placeholder",
                    f"{key}: {{{unknown[0]}}} is not one of {', '.join(sorted(JOB_COMMAND_PLACEHOLDERS))}",
                )
    payload = entry.get("payload") or {}
    reserved = [k for k in JOB_PAYLOAD_FIELDS if k in payload]
    if reserved:
        load.error(path, label, "job_payload_reserved", f"the bridge sets {', '.join(reserved)}; remove them")
    etype = event_types.get(entry["eventType"])
    if etype is None:
        if ("event-types.json", entry["eventType"]) not in load.broken:
            load.error(
                path, label, "unregistered_event_type",
                f"{entry['eventType']!r} is not in event-types.json; a job admits only a registered type",
            )
    elif len(load.errors) == errors_before:
        check_sample_event(load, path, label, name, payload, etype, definitions.get(etype.target))
    if len(load.errors) != errors_before:
        return None
    return Job(
        name=name,
        event_type=entry["eventType"],
        enabled=entry["enabled"],
        every=entry.get("every"),
        cadence_seconds=cadence,
        at=entry.get("at"),
        timezone=entry.get("timezone"),
        days=tuple(entry.get("days", ())),
        gate_command=tuple(entry["gate_command"]) if "gate_command" in entry else None,
        dry_command=tuple(entry["dry_command"]) if "dry_command" in entry else None,
        payload=dict(payload),
        description=entry.get("description", ""),
    )


def check_sample_event(load: Load, path, label, name, payload, etype, target) -> None:
    """A job whose every event would be refused or fail planning is a load error."""
    sample = {**payload, "loop": name, "slot": SAMPLE_SLOT}
    for what, schema in ((f"payload schema of {etype.name}", etype.payload_schema),
                         (f"input schema of {etype.target}", target.input_schema if target else None)):
        err = load.first_error(schema, sample) if schema else None
        if err is not None:
            where = "/".join(map(str, err.absolute_path)) or "<top>"
            load.error(path, label, "sample_event_invalid", f"this job's event fails the {what} at {where}: {err.message}")
            return
