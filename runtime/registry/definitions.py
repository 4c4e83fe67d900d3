"""Definitions, event types and edges of the kernel (DESIGN §4).

Each step takes the ``Load`` in progress, reports what is wrong through it and returns
the entries it could build; an entry that broke its file's schema is skipped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .keys import KeyTemplateError, parse_key_template
from .model import (
    APPROVALS,
    CLOSED_PLACEHOLDERS,
    PLACEHOLDER,
    Definition,
    Edge,
    EdgeEmit,
    EventType,
    preview_template,
)

if TYPE_CHECKING:
    from pathlib import Path

    from .loader import Load

ADAPTERS = ("command", "agent", "fake", "builtin")
#: The reports the ``builtin`` adapter runs inside the worker (docs/design.md §8).
BUILTINS = ("health",)
OUTPUT_CONTRACTS = ("factory.command-result/v1",)
#: A preview's time-out when its definition names none, in seconds (never above the definition's own).
PREVIEW_TIMEOUT_SECONDS = 60


def read_definitions(load: Load) -> dict[str, Definition]:
    """``registry/definitions/<id>@<version>.json`` as ``ref → Definition``.

    Rules: the file's shape (``schema``), its name (``definition_name_mismatch``), those
    of ``check_definition`` and ``check_key_template``; a definition's schemas must exist
    and be valid.
    """
    result: dict[str, Definition] = {}
    for path in load.glob(load.registry_dir / "definitions"):
        data = load.read_json(path)
        if data is None or not load.check_shape(path, data, "definition.schema.json", entry_level=False):
            # Reported once, here: what refers to it is not also told that it is missing.
            load.broken.add(("definitions", path.stem))
            continue
        ref = f"{data['id']}@{data['version']}"
        if path.name != f"{ref}.json":
            load.error(path, ref, "definition_name_mismatch", f"the file of {ref} must be named {ref}.json")
            continue
        check_definition(load, path, ref, data)
        check_preview(load, path, ref, data)
        input_schema = load.load_schema_file(data["inputSchema"], path, ref) if "inputSchema" in data else None
        if "idempotencyKey" in data and (input_schema is not None or "inputSchema" not in data):
            check_key_template(load, path, ref, data["idempotencyKey"], input_schema)
        result[ref] = Definition(
            id=data["id"],
            version=data["version"],
            adapter=data["adapter"],
            command=tuple(data["command"]) if "command" in data else None,
            capture_stdout=data.get("captureStdout"),
            output_contract=data["output_contract"],
            mutating=data["mutating"],
            input_schema=input_schema,
            output_schema=load.load_schema_file(data["outputSchema"], path, ref) if "outputSchema" in data else None,
            timeout_seconds=data["timeoutSeconds"],
            max_attempts=data["maxAttempts"],
            allow_scheduled=data.get("allowScheduled", False),
            builtin=data.get("builtin"),
            idempotency_key=data.get("idempotencyKey"),
            release_key_on=tuple(data.get("releaseKeyOn", ())),
            barrier=data.get("barrier"),
            description=data.get("description", ""),
            preview_drop=tuple(data["preview"].get("drop", ())) if "preview" in data else None,
            preview_add=tuple(data["preview"].get("add", ())) if "preview" in data else (),
            preview_timeout_seconds=(
                data.get("previewTimeoutSeconds", min(PREVIEW_TIMEOUT_SECONDS, data["timeoutSeconds"]))
                if "preview" in data else None
            ),
        )
    return result


def check_preview(load: Load, path: Path, ref: str, data: dict) -> None:
    """A preview is the definition's own command with declared flags dropped and/or added,
    never a separate command (docs/design.md §4, Previews). Rules:
    ``preview_not_allowed`` (a preview, or ``previewTimeoutSeconds``, on anything but a
    mutating ``command`` definition, or a time-out without a preview), ``preview_not_a_flag``
    (an item that does not begin with ``-``, or is ``-``/``--``), ``preview_flag_missing``
    (a flag to drop that the command lacks), ``preview_flag_placeholder`` (an added flag
    that holds a placeholder: the preview's argv is as closed as the command's),
    ``preview_same_as_command`` (the derived argv equals the command: the "preview" would
    act) and ``preview_timeout_too_long`` (above ``timeoutSeconds``)."""
    if "preview" not in data:
        if "previewTimeoutSeconds" in data:
            load.error(path, ref, "preview_not_allowed", "previewTimeoutSeconds without a preview to time")
        return
    if data["adapter"] != "command" or not data["mutating"] or "command" not in data:
        load.error(path, ref, "preview_not_allowed",
                   "a preview is the dry run of a mutating command: only an adapter command definition "
                   "with mutating: true may declare one")
        return
    command, drop, add = data["command"], data["preview"].get("drop", []), data["preview"].get("add", [])
    for flag in [*drop, *add]:
        if not flag.startswith("-") or flag in ("-", "--"):
            load.error(path, ref, "preview_not_a_flag", f"{flag!r} is not a flag: a preview drops or adds flags only")
    for flag in drop:
        if flag not in command:
            load.error(path, ref, "preview_flag_missing", f"the preview drops {flag!r}, which the command lacks")
    for flag in add:
        if PLACEHOLDER.search(flag):
            load.error(path, ref, "preview_flag_placeholder",
                       f"the preview adds {flag!r}, a placeholder: an added flag is literal text")
    if preview_template(command, tuple(drop), tuple(add)) == list(command):
        load.error(path, ref, "preview_same_as_command",
                   "the preview's argv equals the command: it would do what the run does")
    timeout = data.get("previewTimeoutSeconds")
    if timeout is not None and timeout > data["timeoutSeconds"]:
        load.error(path, ref, "preview_timeout_too_long",
                   f"previewTimeoutSeconds {timeout} is above the definition's timeoutSeconds {data['timeoutSeconds']}")


def check_key_template(load: Load, path: Path, ref: str, template: str, input_schema: dict | None) -> None:
    """``idempotency_key_malformed`` (``runtime.registry.keys.parse_key_template``),
    ``idempotency_key_unscoped`` (a template that does not begin with ``<definition id>:``)
    and ``idempotency_key_unknown_field``: a field the definition's input schema does not
    declare under ``properties``, so no valid input could ever carry it (DESIGN §7.2).
    A broken input schema is reported by itself and not checked against.

    The scope keeps the three kinds of key apart: a tick's begins with its loop's name (and
    no loop may be named as a definition with a template: ``loop_name_is_key_scope``), an
    eventId's with ``eventId:``, a template's with its definition's id."""
    try:
        fields = parse_key_template(template)
    except KeyTemplateError as exc:
        load.error(path, ref, "idempotency_key_malformed", f"idempotencyKey {template!r} is not a key template: {exc}")
        return
    scope = ref.split("@", 1)[0] + ":"
    if not template.startswith(scope):
        load.error(
            path, ref, "idempotency_key_unscoped",
            f"idempotencyKey {template!r} must begin with {scope!r}, so that no other definition, loop or eventId shares its keys",
        )
    declared = (input_schema or {}).get("properties", {})
    for name in fields:
        if name not in declared:
            load.error(
                path, ref, "idempotency_key_unknown_field",
                f"idempotencyKey names {{payload.{name}}}, which "
                + ("its inputSchema does not declare under properties" if input_schema is not None
                   else "no input can carry: the definition has no inputSchema"),
            )


def check_definition(load: Load, path: Path, ref: str, data: dict) -> None:
    """``unknown_adapter``, ``unknown_output_contract``, ``missing_command``, ``unknown_builtin``,
    ``builtin_with_command`` (a builtin has no command, is read-only, and only a builtin
    names one), and a command
    template's placeholders: ``open_template`` (a mutating command an event could fill,
    spec §7) and ``unknown_placeholder``."""
    if data["adapter"] not in ADAPTERS:
        load.error(path, ref, "unknown_adapter", f"adapter {data['adapter']!r} is not one of {', '.join(ADAPTERS)}")
    if data["output_contract"] not in OUTPUT_CONTRACTS:
        load.error(path, ref, "unknown_output_contract", f"{data['output_contract']!r} is not a known contract")
    if data["adapter"] == "command" and "command" not in data:
        load.error(path, ref, "missing_command", "a command definition needs a command template")
    if data["adapter"] == "builtin":
        if data.get("builtin") not in BUILTINS:
            load.error(path, ref, "unknown_builtin",
                       f"a builtin definition names one of {', '.join(BUILTINS)} as builtin, not {data.get('builtin')!r}")
        if "command" in data or data["mutating"]:
            load.error(path, ref, "builtin_with_command",
                       "a builtin runs inside the worker: no command, and mutating: false")
    elif "builtin" in data:
        load.error(path, ref, "builtin_with_command", "builtin belongs to a definition whose adapter is builtin")
    for arg in data.get("command", []):
        for name in PLACEHOLDER.findall(arg):
            if name in CLOSED_PLACEHOLDERS:
                continue
            if name.startswith("payload.") and len(name) > len("payload."):
                if data["mutating"]:
                    load.error(
                        path, ref, "open_template",
                        f"{{{name}}} lets an event fill the argv of a mutating command; "
                        "a mutating command must be a closed template (spec §7)",
                    )
                continue
            load.error(
                path, ref, "unknown_placeholder",
                f"{{{name}}} is not a placeholder: use {', '.join(sorted(CLOSED_PLACEHOLDERS))} or payload.<field>",
            )


def read_event_types(load: Load, definitions: dict[str, Definition]) -> dict[str, EventType]:
    """``registry/event-types.json`` as ``type → EventType``, given the ``definitions`` read.

    Rules: ``missing_definition`` (the target has no file), ``invalid_approval``,
    ``auto_on_human_only``, ``auto_on_mutating_target`` (type-level auto is for
    read-only targets only); a payload schema must exist and be valid.
    """
    path = load.registry_dir / "event-types.json"
    data = load.read_json(path)
    if data is None or not load.check_shape(path, data, "event-types.schema.json", entry_level=True):
        return {}
    result = {}
    for name, entry in data.items():
        if (path.name, name) in load.broken:
            continue
        target = definitions.get(entry["target"])
        if target is None and ("definitions", entry["target"]) not in load.broken:
            load.error(path, name, "missing_definition", f"target {entry['target']} has no file in definitions/")
        approval = entry.get("approval")
        if approval is not None and approval not in APPROVALS:
            load.error(path, name, "invalid_approval", f"approval {approval!r} is not watched or auto")
        if approval == "auto" and entry.get("humanApprovalOnly"):
            load.error(path, name, "auto_on_human_only", "a humanApprovalOnly type can never be auto-approved")
        if approval == "auto" and target is not None and target.mutating:
            load.error(
                path, name, "auto_on_mutating_target",
                f"approval auto is only for read-only targets; {target.ref} is mutating",
            )
        payload_schema = None
        if "payloadSchema" in entry:
            payload_schema = load.load_schema_file(entry["payloadSchema"], path, name)
        result[name] = EventType(
            name=name,
            target=entry["target"],
            payload_schema=payload_schema,
            human_approval_only=entry.get("humanApprovalOnly", False),
            approval=approval,
        )
    return result


def read_edges(load: Load, definitions: dict[str, Definition], event_types: dict[str, EventType]) -> tuple[Edge, ...]:
    """``registry/edges.json`` in file order. Rules: ``missing_definition`` (the edge's
    definition has no file), ``edge_unregistered_type`` (it emits an unregistered type)."""
    path = load.registry_dir / "edges.json"
    data = load.read_json(path)
    if data is None or not load.check_shape(path, data, "edges.schema.json", entry_level=True):
        return ()
    result = []
    for index, entry in enumerate(data):
        if (path.name, str(index)) in load.broken:
            continue
        label = f"[{index}] {entry['from']} {entry['outcome']}"
        if entry["from"] not in definitions and ("definitions", entry["from"]) not in load.broken:
            load.error(path, label, "missing_definition", f"{entry['from']} has no file in definitions/")
        for emit in entry["emit"]:
            if emit["type"] not in event_types and ("event-types.json", emit["type"]) not in load.broken:
                load.error(path, label, "edge_unregistered_type", f"event type {emit['type']!r} is not registered")
        result.append(
            Edge(
                definition=entry["from"],
                outcome=entry["outcome"],
                emit=tuple(EdgeEmit(e["type"], e["payload"], e.get("subject")) for e in entry["emit"]),
            )
        )
    return tuple(result)
