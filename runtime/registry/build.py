"""Load, merge and validate the registry, fail closed (DESIGN §4).

``load_registry(registry_dir, config_dir)`` reads the tracked kernel (event types,
definitions, edges, schedules, schemas), the instance overlay ``schedule.yaml`` and
``repos.yaml``, and returns the effective ``Registry`` — or raises ``RegistryInvalid``
with every error found, each naming the file, the entry and the rule.
"""

import re
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from referencing import Registry as SchemaRegistry
from referencing import Resource

from lib.cadence import CadenceError, parse_every, parse_wall_time
from .files import compute_digest, display_path, read_json, read_yaml
from .model import (
    CLOSED_PLACEHOLDERS,
    JOB_COMMAND_PLACEHOLDERS,
    JOB_PAYLOAD_FIELDS,
    LOOP_NAME_PATTERN,
    PLACEHOLDER,
    Definition,
    Edge,
    EdgeEmit,
    EventType,
    Job,
    Keyed,
    KeyedSetter,
    Loop,
    Registry,
    RegistryError,
    RegistryInvalid,
    Repo,
)

ADAPTERS = ("command", "agent", "fake")
APPROVALS = ("watched", "auto")
CATCH_UP_POLICIES = ("none", "last", "all")
OUTPUT_CONTRACTS = ("factory.command-result/v1",)
#: What an overlay may change on a kernel loop; everything else is pinned (DESIGN §4).
OVERLAY_OVERRIDABLE = ("enabled", "every", "payload")
#: What a new overlay loop must spell out, besides its slots (``every``, ``at`` or
#: ``keyed``); ``approval`` may only be ``watched``.
OVERLAY_NEW_LOOP_REQUIRED = ("eventType", "catchUp", "singleton", "enabled")
KERNEL_LOOP_REQUIRED = ("eventType",)
LOOP_DEFAULTS = {"catchUp": "none", "singleton": True, "approval": "watched", "enabled": False, "payload": {}}
SAMPLE_SLOT = "2026-01-01T00:00:00Z"
#: The key a keyed loop's sample tick carries (DESIGN §6: ``key`` is a bookkeeping field).
SAMPLE_KEY = "sample-key"
#: A setting event's rule: exactly one of these pointers (DESIGN §6).
KEYED_RULES = ("at", "every", "once")
#: The ``schedules.json`` key of the per-repo templates; loop names are lowercase, so it never collides.
REPO_LOOPS_KEY = "repoLoops"
#: The template whose cadence a repo's ``merge_every`` sets (spec §12).
MERGE_TEMPLATE = "merge-{repo}"


class _Loader:
    """One load of the registry; collects errors instead of stopping at the first."""

    def __init__(self, registry_dir: Path, config_dir: Path):
        self.registry_dir = registry_dir
        self.config_dir = config_dir
        self.errors: list[RegistryError] = []
        self.broken: set[tuple[str, str]] = set()
        self.meta = self._meta_registry()
        #: The overlay as parsed by ``merge_overlay`` when its shape is valid; ``jobs()`` reads it.
        self.overlay: dict = {}

    # --- helpers ---------------------------------------------------------------------
    def error(self, path: Path, entry: str, rule: str, detail: str) -> None:
        self.errors.append(RegistryError(display_path(path), entry, rule, detail))

    def _meta_registry(self) -> SchemaRegistry:
        resources = []
        for path in sorted((self.registry_dir / "schemas" / "meta").glob("*.json")):
            contents = read_json(path, self.errors)
            if isinstance(contents, dict):
                resources.append((contents.get("$id", path.name), Resource.from_contents(contents)))
        return SchemaRegistry().with_resources(resources)

    def check_shape(self, path: Path, data, meta_name: str, entry_level: bool) -> bool:
        """Validate ``data`` against a meta-schema; unknown keys are errors.

        True when the file is usable: clean, or (``entry_level``) broken only inside
        some entries, whose names are added to ``self.broken`` so that they are skipped
        without cascading into errors about whatever refers to them.
        """
        meta_id = f"https://factory-runtime.invalid/meta/{meta_name}"
        try:
            schema = self.meta.contents(meta_id)
        except Exception:  # noqa: BLE001 - a missing meta-schema is itself a registry error
            self.error(path, "<file>", "missing_schema", f"meta-schema {meta_name} is not in registry/schemas/meta/")
            return False
        validator = Draft202012Validator(schema, registry=self.meta)
        usable = True
        for err in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
            parts = [str(p) for p in err.absolute_path]
            entry = parts[0] if entry_level and parts else "<top>"
            where = "/".join(parts) or "<top>"
            self.error(path, entry, "schema", f"at {where}: {err.message}")
            if entry == "<top>":
                usable = False
            else:
                self.broken.add((path.name, entry))
        return usable

    def load_schema_file(self, name: str, path: Path, entry: str) -> dict | None:
        """A payload/input/output schema from ``registry/schemas/``; errors name the referrer."""
        schema_path = self.registry_dir / "schemas" / name
        if not schema_path.is_file():
            self.error(path, entry, "missing_schema", f"schemas/{name} does not exist")
            return None
        errors: list[RegistryError] = []
        schema = read_json(schema_path, errors)
        self.errors.extend(errors)
        if schema is None:
            return None
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            self.error(schema_path, "<file>", "invalid_schema", exc.message)
            return None
        return schema

    # --- files -------------------------------------------------------------------------
    def definitions(self) -> dict[str, Definition]:
        result: dict[str, Definition] = {}
        for path in sorted((self.registry_dir / "definitions").glob("*.json")):
            data = read_json(path, self.errors)
            if data is None or not self.check_shape(path, data, "definition.schema.json", entry_level=False):
                continue
            ref = f"{data['id']}@{data['version']}"
            if path.name != f"{ref}.json":
                self.error(path, ref, "definition_name_mismatch", f"the file of {ref} must be named {ref}.json")
                continue
            self.check_definition(path, ref, data)
            result[ref] = Definition(
                id=data["id"],
                version=data["version"],
                adapter=data["adapter"],
                command=tuple(data["command"]) if "command" in data else None,
                capture_stdout=data.get("captureStdout"),
                output_contract=data["output_contract"],
                mutating=data["mutating"],
                input_schema=self.load_schema_file(data["inputSchema"], path, ref) if "inputSchema" in data else None,
                output_schema=self.load_schema_file(data["outputSchema"], path, ref) if "outputSchema" in data else None,
                timeout_seconds=data["timeoutSeconds"],
                max_attempts=data["maxAttempts"],
                allow_scheduled=data.get("allowScheduled", False),
            )
        return result

    def check_definition(self, path: Path, ref: str, data: dict) -> None:
        if data["adapter"] not in ADAPTERS:
            self.error(path, ref, "unknown_adapter", f"adapter {data['adapter']!r} is not one of {', '.join(ADAPTERS)}")
        if data["output_contract"] not in OUTPUT_CONTRACTS:
            self.error(path, ref, "unknown_output_contract", f"{data['output_contract']!r} is not a known contract")
        if data["adapter"] == "command" and "command" not in data:
            self.error(path, ref, "missing_command", "a command definition needs a command template")
        for arg in data.get("command", []):
            for name in PLACEHOLDER.findall(arg):
                if name in CLOSED_PLACEHOLDERS:
                    continue
                if name.startswith("payload.") and len(name) > len("payload."):
                    if data["mutating"]:
                        self.error(
                            path, ref, "open_template",
                            f"{{{name}}} lets an event fill the argv of a mutating command; "
                            "a mutating command must be a closed template (spec §7)",
                        )
                    continue
                self.error(
                    path, ref, "unknown_placeholder",
                    f"{{{name}}} is not a placeholder: use {', '.join(sorted(CLOSED_PLACEHOLDERS))} or payload.<field>",
                )

    def event_types(self, definitions: dict[str, Definition]) -> dict[str, EventType]:
        path = self.registry_dir / "event-types.json"
        data = read_json(path, self.errors)
        if data is None or not self.check_shape(path, data, "event-types.schema.json", entry_level=True):
            return {}
        result = {}
        for name, entry in data.items():
            if (path.name, name) in self.broken:
                continue
            target = definitions.get(entry["target"])
            if target is None:
                self.error(path, name, "missing_definition", f"target {entry['target']} has no file in definitions/")
            approval = entry.get("approval")
            if approval is not None and approval not in APPROVALS:
                self.error(path, name, "invalid_approval", f"approval {approval!r} is not watched or auto")
            if approval == "auto" and entry.get("humanApprovalOnly"):
                self.error(path, name, "auto_on_human_only", "a humanApprovalOnly type can never be auto-approved")
            if approval == "auto" and target is not None and target.mutating:
                self.error(
                    path, name, "auto_on_mutating_target",
                    f"approval auto is only for read-only targets; {target.ref} is mutating",
                )
            payload_schema = None
            if "payloadSchema" in entry:
                payload_schema = self.load_schema_file(entry["payloadSchema"], path, name)
            result[name] = EventType(
                name=name,
                target=entry["target"],
                payload_schema=payload_schema,
                human_approval_only=entry.get("humanApprovalOnly", False),
                approval=approval,
            )
        return result

    def edges(self, definitions: dict[str, Definition], event_types: dict[str, EventType]) -> tuple[Edge, ...]:
        path = self.registry_dir / "edges.json"
        data = read_json(path, self.errors)
        if data is None or not self.check_shape(path, data, "edges.schema.json", entry_level=True):
            return ()
        result = []
        for index, entry in enumerate(data):
            if (path.name, str(index)) in self.broken:
                continue
            label = f"[{index}] {entry['from']} {entry['outcome']}"
            if entry["from"] not in definitions:
                self.error(path, label, "missing_definition", f"{entry['from']} has no file in definitions/")
            for emit in entry["emit"]:
                if emit["type"] not in event_types:
                    self.error(path, label, "edge_unregistered_type", f"event type {emit['type']!r} is not registered")
            result.append(
                Edge(
                    definition=entry["from"],
                    outcome=entry["outcome"],
                    emit=tuple(EdgeEmit(e["type"], e["payload"], e.get("subject")) for e in entry["emit"]),
                )
            )
        return tuple(result)

    def repos(self) -> tuple[Repo, ...]:
        path = self.config_dir / "repos.yaml"
        data = read_yaml(path, self.errors)
        if data is None or not self.check_shape(path, data, "repos.schema.json", entry_level=False):
            return ()
        result, seen = [], set()
        for entry in (data or {}).get("repos") or []:
            if entry["name"] in seen:
                self.error(path, entry["name"], "duplicate_repo", "two repos share this short name")
                continue
            seen.add(entry["name"])
            if "merge_every" in entry:
                try:
                    parse_every(entry["merge_every"])
                except CadenceError as exc:
                    self.error(path, entry["name"], "unparseable_every", str(exc))
            result.append(Repo(**entry))
        return tuple(result)

    # --- schedules -----------------------------------------------------------------------
    def kernel_loops(self) -> tuple[dict[str, tuple[dict, str, tuple]], dict[str, dict]]:
        """The kernel's loops as ``name → (raw entry with defaults, "kernel", ())`` and its
        ``repoLoops`` templates as ``template name → raw entry`` (DESIGN §4)."""
        path = self.registry_dir / "schedules.json"
        data = read_json(path, self.errors)
        if data is None or not self.check_shape(path, data, "schedules.schema.json", entry_level=True):
            return {}, {}
        templates = data.pop(REPO_LOOPS_KEY, {})
        result = {}
        for name, entry in data.items():
            if (path.name, name) in self.broken:
                continue
            if not re.match(LOOP_NAME_PATTERN, name):
                self.error(path, name, "invalid_loop_name", f"a loop name must match {LOOP_NAME_PATTERN}")
                continue
            if self.check_kernel_entry(path, name, entry):
                result[name] = ({**LOOP_DEFAULTS, **entry}, "kernel", ())
        return result, templates

    def check_kernel_entry(self, path: Path, name: str, entry: dict) -> bool:
        """The rules a tracked declaration (loop or repo template) obeys before merging."""
        missing = [k for k in KERNEL_LOOP_REQUIRED if k not in entry]
        if missing:
            self.error(path, name, "incomplete_entry", f"missing {', '.join(missing)}")
            return False
        if entry.get("approval") == "auto" and entry.get("enabled") is not True:
            self.error(
                path, name, "auto_requires_enabled",
                "approval auto must be declared with enabled: true in the same entry",
            )
        return True

    def repo_loops(
        self, templates: dict[str, dict], repos: tuple[Repo, ...], kernel: dict[str, tuple[dict, str, tuple]]
    ) -> dict[str, tuple[dict, str, tuple]]:
        """Expand the ``repoLoops`` templates for every repo that is not ``report_only`` (spec §12).

        Each loop is ``name → (entry, "repos", overrides)``: the template with ``{repo}``
        replaced in its name and ``repo`` added to its payload. The ``merge-{repo}``
        template takes the repo's ``merge_every`` (reported in ``overrides`` as
        ``every``); an overlay override by loop name comes later and wins. Errors:
        ``template_payload_repo`` (a template may not pin the repo), ``invalid_loop_name``
        (an expanded name too long), ``repo_loop_collision`` (the name of a kernel loop).
        """
        path = self.registry_dir / "schedules.json"
        result: dict[str, tuple[dict, str, tuple]] = {}
        for template, raw in templates.items():
            label = f"{REPO_LOOPS_KEY}/{template}"
            if not self.check_kernel_entry(path, label, raw):
                continue
            if "repo" in (raw.get("payload") or {}):
                self.error(path, label, "template_payload_repo", "the expansion sets payload.repo; a template may not")
                continue
            for repo in repos:
                if repo.report_only:
                    continue
                name = template.replace("{repo}", repo.name)
                if not re.match(LOOP_NAME_PATTERN, name):
                    self.error(path, label, "invalid_loop_name", f"{name!r} (repo {repo.name}) must match {LOOP_NAME_PATTERN}")
                    continue
                if name in kernel:
                    self.error(path, label, "repo_loop_collision", f"{name!r} (repo {repo.name}) is also a kernel loop")
                    continue
                entry = {**LOOP_DEFAULTS, **raw, "payload": {**(raw.get("payload") or {}), "repo": repo.name}}
                overrides: tuple[str, ...] = ()
                if template == MERGE_TEMPLATE and repo.merge_every and repo.merge_every != raw["every"]:
                    entry["every"], overrides = repo.merge_every, ("every",)
                result[name] = (entry, "repos", overrides)
        return result

    def merge_overlay(self, loops: dict[str, tuple[dict, str, tuple]]) -> dict[str, tuple[dict, str, tuple]]:
        """Apply ``config/schedule.yaml`` over the kernel and repo loops (DESIGN §4 merge rules).

        ``overrides`` accumulates: a repo loop whose cadence came from ``merge_every``
        keeps ``every`` listed. The overlay may not move a repo loop to another repo.
        """
        path = self.config_dir / "schedule.yaml"
        merged = dict(loops)
        data = read_yaml(path, self.errors)
        if data is None or not self.check_shape(path, data, "overlay.schema.json", entry_level=False):
            return merged
        self.overlay = data or {}
        for name, entry in ((data or {}).get("schedules") or {}).items():
            if name in merged:
                base, source, base_overrides = merged[name]
                forbidden = [k for k in entry if k not in OVERLAY_OVERRIDABLE and entry[k] != base.get(k)]
                repo = base["payload"].get("repo") if source == "repos" else None
                if repo is not None and (entry.get("payload") or {}).get("repo", repo) != repo:
                    forbidden.append("payload.repo")
                if forbidden:
                    self.error(
                        path, name, "overlay_forbidden_override",
                        f"the overlay may change only {', '.join(OVERLAY_OVERRIDABLE)} of a kernel loop; "
                        f"{', '.join(forbidden)} stay pinned in the tracked registry",
                    )
                    continue
                overrides = tuple(
                    k for k in OVERLAY_OVERRIDABLE
                    if k in base_overrides or (k in entry and entry[k] != base.get(k))
                )
                effective = dict(base)
                effective.update({k: entry[k] for k in ("enabled", "every") if k in entry})
                if "payload" in entry:
                    effective["payload"] = {**base.get("payload", {}), **entry["payload"]}
                merged[name] = (effective, source, overrides)
                continue
            if not re.match(LOOP_NAME_PATTERN, name):
                self.error(path, name, "invalid_loop_name", f"a loop name must match {LOOP_NAME_PATTERN}")
                continue
            missing = [k for k in OVERLAY_NEW_LOOP_REQUIRED if k not in entry]
            if missing:
                self.error(path, name, "overlay_incomplete", f"a new overlay loop must declare {', '.join(missing)}")
                continue
            if entry.get("approval", "watched") == "auto":
                self.error(
                    path, name, "overlay_auto",
                    "approval auto is a tracked registry declaration, never local configuration",
                )
                continue
            merged[name] = ({**LOOP_DEFAULTS, **entry}, "overlay", ())
        return merged

    def effective_loops(
        self,
        merged: dict[str, tuple[dict, str, tuple]],
        event_types: dict[str, EventType],
        definitions: dict[str, Definition],
    ) -> dict[str, Loop]:
        result = {}
        for name, (entry, source, overrides) in sorted(merged.items()):
            path = self.config_dir / "schedule.yaml" if source == "overlay" else self.registry_dir / "schedules.json"
            overlay = self.config_dir / "schedule.yaml"
            # A value the overlay changed is reported against the overlay, where it was written.
            ok, cadence = self.check_slots(overlay if "every" in overrides else path, name, entry, event_types)
            if entry["catchUp"] not in CATCH_UP_POLICIES:
                self.error(path, name, "invalid_catch_up", f"catchUp {entry['catchUp']!r} is not none, last or all")
                ok = False
            if entry["approval"] not in APPROVALS:
                self.error(path, name, "invalid_approval", f"approval {entry['approval']!r} is not watched or auto")
                ok = False
            if entry["catchUp"] == "all" and entry["singleton"]:
                self.error(
                    path, name, "catch_up_all_singleton",
                    "catchUp all fires every missed slot, and a singleton loop would NOOP all but one",
                )
                ok = False
            etype = event_types.get(entry["eventType"])
            if etype is None and ("event-types.json", entry["eventType"]) in self.broken:
                continue
            if etype is None:
                self.error(path, name, "unregistered_event_type", f"{entry['eventType']!r} is not in event-types.json")
                ok = False
            else:
                if entry["approval"] == "auto" and etype.human_approval_only:
                    self.error(path, name, "auto_on_human_only", f"{etype.name} is humanApprovalOnly")
                    ok = False
                target = definitions.get(etype.target)
                if target is not None and target.adapter == "agent" and not target.allow_scheduled:
                    self.error(
                        path, name, "agent_not_schedulable",
                        f"{target.ref} is an agent without allowScheduled: true (spec §7)",
                    )
                    ok = False
                if ok:
                    ok = self.check_sample_tick(
                        overlay if "payload" in overrides else path, name, entry, cadence, etype, target
                    )
            if ok:
                result[name] = Loop(
                    name=name,
                    every=entry.get("every"),
                    cadence_seconds=cadence,
                    event_type=entry["eventType"],
                    catch_up=entry["catchUp"],
                    singleton=entry["singleton"],
                    approval=entry["approval"],
                    enabled=entry["enabled"],
                    payload=dict(entry.get("payload") or {}),
                    source=source,
                    overrides=overrides,
                    at=entry.get("at"),
                    timezone=entry.get("timezone") if "at" in entry else None,
                    days=tuple(entry.get("days", ())),
                    keyed=self.keyed(entry["keyed"]) if "keyed" in entry else None,
                )
        return result

    def check_slots(self, path: Path, name: str, entry: dict, event_types: dict[str, EventType]) -> tuple[bool, int | None]:
        """Check where a loop's slots come from; returns ``(ok, cadence seconds or None)``.

        Exactly one of ``every`` (DESIGN §5), ``at`` with ``timezone`` and optional
        ``days`` (DESIGN §6), or ``keyed`` (DESIGN §6, seed 000). Rules:
        ``cadence_conflict`` (two of them, or ``timezone``/``days`` without ``at``),
        ``unparseable_every``, ``invalid_time``, ``missing_timezone`` (no implicit server
        zone, ever), ``unknown_timezone``, ``never_ticks`` (nothing can ever tick the loop:
        no ``every``, no ``at``, no setting type — seed 000's load error), and the keyed
        rules of ``check_keyed``.
        """
        given = [k for k in ("every", "at", "keyed") if entry.get(k) is not None]
        if len(given) > 1:
            self.error(
                path, name, "cadence_conflict",
                f"give one of every, at or keyed, not {' and '.join(given)}"
                + (": a keyed loop takes each key's rule from its setting events" if "keyed" in given else ""),
            )
            return False, None
        if "at" not in entry and ("timezone" in entry or "days" in entry):
            self.error(path, name, "cadence_conflict", "timezone and days belong to a time of day (at)")
            return False, None
        if "every" in given:
            try:
                return True, parse_every(entry["every"])
            except CadenceError as exc:
                self.error(path, name, "unparseable_every", str(exc))
                return False, None
        if "at" in given:
            return self.check_time_of_day(path, name, entry), None
        if "keyed" in given and entry["keyed"].get("setBy"):
            return self.check_keyed(path, name, entry["keyed"], event_types), None
        self.error(
            path, name, "never_ticks",
            "nothing can ever tick this loop: give every, at with timezone, or keyed with at least one setBy type",
        )
        return False, None

    def check_time_of_day(self, path: Path, name: str, entry: dict) -> bool:
        ok = True
        try:
            parse_wall_time(entry["at"])
        except CadenceError as exc:
            self.error(path, name, "invalid_time", str(exc))
            ok = False
        if "timezone" not in entry:
            self.error(
                path, name, "missing_timezone",
                "a time of day needs its IANA timezone (e.g. Europe/Budapest); there is no implicit server zone",
            )
            return False
        try:
            ZoneInfo(entry["timezone"])
        except (ZoneInfoNotFoundError, ValueError):
            self.error(path, name, "unknown_timezone", f"{entry['timezone']!r} is not an IANA time zone")
            ok = False
        return ok

    def check_keyed(self, path: Path, name: str, keyed: dict, event_types: dict[str, EventType]) -> bool:
        """Every setting and clearing type is registered (``keyed_unregistered_type``); each
        setter points at exactly one rule, ``timezone`` with ``at`` and only with it (``keyed_rule``)."""
        ok = True
        for role, types in (("setBy", keyed.get("setBy") or {}), ("clearedBy", keyed.get("clearedBy") or {})):
            for event_type in types:
                if event_type not in event_types and ("event-types.json", event_type) not in self.broken:
                    self.error(
                        path, name, "keyed_unregistered_type",
                        f"keyed.{role}: {event_type!r} is not in event-types.json",
                    )
                    ok = False
        for event_type, setter in (keyed.get("setBy") or {}).items():
            rules = [r for r in KEYED_RULES if r in setter]
            if len(rules) != 1:
                self.error(
                    path, name, "keyed_rule",
                    f"keyed.setBy.{event_type}: point at exactly one of at, every, once (found {', '.join(rules) or 'none'})",
                )
                ok = False
            elif ("at" in setter) != ("timezone" in setter):
                self.error(
                    path, name, "keyed_rule",
                    f"keyed.setBy.{event_type}: at needs a timezone pointer, and timezone belongs to at",
                )
                ok = False
        return ok

    @staticmethod
    def keyed(keyed: dict) -> Keyed:
        return Keyed(
            set_by={
                event_type: KeyedSetter(event_type=event_type, **setter)
                for event_type, setter in (keyed.get("setBy") or {}).items()
            },
            cleared_by={event_type: spec["key"] for event_type, spec in (keyed.get("clearedBy") or {}).items()},
        )

    def check_sample_tick(self, path, name, entry, cadence, etype, target) -> bool:
        """A loop whose every tick would be refused is a load error, not a refusal per slot."""
        sample = {
            **(entry.get("payload") or {}),
            "loop": name,
            **({"key": SAMPLE_KEY} if "keyed" in entry else {}),
            "slot": SAMPLE_SLOT,
            "cadenceSeconds": cadence,
            "skippedSlots": 0,
        }
        for label, schema in (("payload schema of " + etype.name, etype.payload_schema),
                              ("input schema of " + (target.ref if target else "?"),
                               target.input_schema if target else None)):
            if schema is None:
                continue
            err = next(iter(Draft202012Validator(schema).iter_errors(sample)), None)
            if err is not None:
                where = "/".join(map(str, err.absolute_path)) or "<top>"
                self.error(path, name, "sample_tick_invalid", f"a tick of this loop fails the {label} at {where}: {err.message}")
                return False
        return True

    # --- host clock bridge jobs (issue 7; spec §15) ------------------------------------------
    def jobs(self, event_types: dict[str, EventType], definitions: dict[str, Definition]) -> dict[str, Job]:
        """The overlay's ``jobs:`` mapping (the host-clock registry), validated fail closed.

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
        path = self.config_dir / "schedule.yaml"
        result = {}
        for name, entry in sorted((self.overlay.get("jobs") or {}).items()):
            if not re.match(LOOP_NAME_PATTERN, name):
                self.error(path, f"jobs/{name}", "invalid_job_name", f"a job name must match {LOOP_NAME_PATTERN}")
                continue
            job = self.job(path, name, entry, event_types, definitions)
            if job is not None:
                result[name] = job
        return result

    def job(self, path: Path, name: str, entry: dict, event_types, definitions) -> Job | None:
        label = f"jobs/{name}"
        errors_before = len(self.errors)
        cadence = None
        if ("every" in entry) == ("at" in entry):
            self.error(path, label, "job_cadence", "give exactly one cadence: every (e.g. 60m) or at (HH:MM)")
        elif "every" in entry:
            try:
                cadence = parse_every(entry["every"])
            except CadenceError as exc:
                self.error(path, label, "unparseable_every", str(exc))
        if "at" in entry and "timezone" not in entry:
            self.error(path, label, "job_cadence", "a calendar time (at) needs its IANA timezone, e.g. Europe/Budapest")
        if "at" not in entry and ("timezone" in entry or "days" in entry):
            self.error(path, label, "job_cadence", "timezone and days belong to a calendar time (at)")
        if "timezone" in entry:
            try:
                ZoneInfo(entry["timezone"])
            except (ZoneInfoNotFoundError, ValueError):
                self.error(path, label, "unknown_timezone", f"{entry['timezone']!r} is not an IANA time zone")
        for key in ("gate_command", "dry_command"):
            for arg in entry.get(key, []):
                unknown = [n for n in PLACEHOLDER.findall(arg) if n not in JOB_COMMAND_PLACEHOLDERS]
                if unknown:
                    self.error(
                        path, label, "unknown_placeholder",
                        f"{key}: {{{unknown[0]}}} is not one of {', '.join(sorted(JOB_COMMAND_PLACEHOLDERS))}",
                    )
        payload = entry.get("payload") or {}
        reserved = [k for k in JOB_PAYLOAD_FIELDS if k in payload]
        if reserved:
            self.error(path, label, "job_payload_reserved", f"the bridge sets {', '.join(reserved)}; remove them")
        etype = event_types.get(entry["eventType"])
        if etype is None:
            if ("event-types.json", entry["eventType"]) not in self.broken:
                self.error(
                    path, label, "unregistered_event_type",
                    f"{entry['eventType']!r} is not in event-types.json; a job admits only a registered type",
                )
        elif len(self.errors) == errors_before:
            self.check_sample_event(path, label, name, payload, etype, definitions.get(etype.target))
        if len(self.errors) != errors_before:
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

    def check_sample_event(self, path, label, name, payload, etype, target) -> None:
        """A job whose every event would be refused or fail planning is a load error."""
        sample = {**payload, "loop": name, "slot": SAMPLE_SLOT}
        for what, schema in ((f"payload schema of {etype.name}", etype.payload_schema),
                             (f"input schema of {etype.target}", target.input_schema if target else None)):
            err = next(iter(Draft202012Validator(schema).iter_errors(sample)), None) if schema else None
            if err is not None:
                where = "/".join(map(str, err.absolute_path)) or "<top>"
                self.error(path, label, "sample_event_invalid", f"this job's event fails the {what} at {where}: {err.message}")
                return
    # --- end of host clock bridge jobs ---------------------------------------------------------

    def builtin_schema(self, name: str) -> dict:
        errors: list[RegistryError] = []
        schema = read_json(self.registry_dir / "schemas" / name, errors)
        self.errors.extend(errors)
        return schema or {}

    def load(self) -> Registry:
        definitions = self.definitions()
        event_types = self.event_types(definitions)
        edges = self.edges(definitions, event_types)
        repos = self.repos()
        kernel, templates = self.kernel_loops()
        loops = self.effective_loops(
            self.merge_overlay({**kernel, **self.repo_loops(templates, repos, kernel)}), event_types, definitions
        )
        jobs = self.jobs(event_types, definitions)
        envelope_schema = self.builtin_schema("factory.event.v1.json")
        command_result_schema = self.builtin_schema("factory.command-result.v1.json")
        if self.errors:
            raise RegistryInvalid(self.errors)
        try:
            digest = compute_digest(self.registry_dir)
        except (ValueError, OSError) as exc:
            raise RegistryInvalid([RegistryError(display_path(self.registry_dir), "<digest>", "unreadable", str(exc))])
        return Registry(
            digest=digest,
            event_types=event_types,
            definitions=definitions,
            edges=edges,
            loops=loops,
            repos=repos,
            envelope_schema=envelope_schema,
            command_result_schema=command_result_schema,
            jobs=jobs,
        )


def load_registry(registry_dir: Path, config_dir: Path) -> Registry:
    """Read and validate the kernel under ``registry_dir`` and the overlay under ``config_dir``.

    Returns the effective ``Registry``. Raises ``RegistryInvalid`` listing every error
    (file, entry, rule, detail); nothing partial is ever returned (fail closed).
    """
    return _Loader(registry_dir, config_dir).load()
