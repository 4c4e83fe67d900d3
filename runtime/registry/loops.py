"""Loops: kernel loops, repo loops, the overlay merge and the effective entries (DESIGN §4, §5, §6).

The steps run in order: ``read_repos`` and ``read_kernel_loops`` read the tracked declarations,
``expand_repo_loops`` expands the ``repoLoops`` templates, ``read_overlay`` and
``merge_overlay`` apply ``config/schedule.yaml``, and ``effective_loops`` validates every
merged entry (its slots, checked by ``slots``; its policies, event type and a sample
tick) into a ``Loop``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lib.cadence import CadenceError, parse_every

from .model import (
    APPROVALS,
    LOOP_NAME_PATTERN,
    SAMPLE_SLOT,
    Definition,
    EventType,
    Loop,
    Repo,
)
from .slots import build_keyed, check_slots

if TYPE_CHECKING:
    from pathlib import Path

    from .loader import Load

#: ``Load.check_shape``'s ``entries`` for a file whose top level is the mapping of entries (``schedules.json``).
TOP_LEVEL = "<top level>"
CATCH_UP_POLICIES = ("none", "last", "all")
#: What an overlay may change on a kernel loop; everything else is pinned (DESIGN §4).
OVERLAY_OVERRIDABLE = ("enabled", "every", "payload")
#: What a new overlay loop must spell out, besides its slots (``every``, ``at`` or
#: ``keyed``); ``approval`` may only be ``watched``.
OVERLAY_NEW_LOOP_REQUIRED = ("eventType", "catchUp", "singleton", "enabled")
KERNEL_LOOP_REQUIRED = ("eventType",)
LOOP_DEFAULTS = {"catchUp": "none", "singleton": True, "approval": "watched", "enabled": False, "payload": {}}
#: The key a keyed loop's sample tick carries (DESIGN §6: ``key`` is a bookkeeping field).
SAMPLE_KEY = "sample-key"
#: The ``schedules.json`` key of the per-repo templates; loop names are lowercase, so it never collides.
REPO_LOOPS_KEY = "repoLoops"
#: The template whose cadence a repo's ``merge_every`` sets (spec §12).
MERGE_TEMPLATE = "merge-{repo}"


@dataclass(frozen=True)
class LoopDraft:
    """A loop entry on its way to a ``Loop``: the raw ``entry`` with the defaults filled
    in, its ``source`` (``kernel``, ``repos`` or ``overlay``) and the ``overrides``, the
    fields that the overlay or a repo's ``merge_every`` changed (DESIGN §4)."""

    entry: dict
    source: str
    overrides: tuple[str, ...] = ()


@dataclass(frozen=True)
class KernelLoops:
    """What ``schedules.json`` declares: its ``loops`` and its ``repoLoops`` ``templates``
    (template name → raw entry)."""

    loops: dict[str, LoopDraft]
    templates: dict[str, dict]


def read_repos(load: Load) -> tuple[Repo, ...]:
    """``config/repos.yaml`` (optional). Rules: ``duplicate_repo``, ``unparseable_every``
    (a ``merge_every`` outside the cadence grammar)."""
    path = load.config_dir / "repos.yaml"
    data = load.read_yaml(path)
    if data is None or not load.check_shape(path, data, "repos.schema.json", entry_level=False):
        return ()
    result, seen = [], set()
    for entry in (data or {}).get("repos") or []:
        if entry["name"] in seen:
            load.error(path, entry["name"], "duplicate_repo", "two repos share this short name")
            continue
        seen.add(entry["name"])
        if "merge_every" in entry:
            try:
                parse_every(entry["merge_every"])
            except CadenceError as exc:
                load.error(path, entry["name"], exc.code, str(exc))
                # Reported here, where it was written; the merge loop keeps its template's cadence.
                entry = {key: value for key, value in entry.items() if key != "merge_every"}
        result.append(Repo(**entry))
    return tuple(result)


def read_kernel_loops(load: Load) -> KernelLoops:
    """The kernel's loops (``source`` kernel, no overrides) and its ``repoLoops`` templates
    (DESIGN §4). Rules: the file's shape, ``invalid_loop_name`` and those of
    ``check_kernel_entry``."""
    path = load.registry_dir / "schedules.json"
    data = load.read_json(path)
    if data is None or not load.check_shape(path, data, "schedules.schema.json", entry_level=True, entries=TOP_LEVEL):
        return KernelLoops({}, {})
    templates = data.pop(REPO_LOOPS_KEY, {})
    result = {}
    for name, entry in data.items():
        if (path.name, name) in load.broken:
            continue
        if not re.fullmatch(LOOP_NAME_PATTERN, name):
            load.error(path, name, "invalid_loop_name", f"a loop name must match {LOOP_NAME_PATTERN}")
            continue
        if check_kernel_entry(load, path, name, entry):
            result[name] = LoopDraft({**LOOP_DEFAULTS, **entry}, "kernel")
    return KernelLoops(result, templates)


def check_kernel_entry(load: Load, path: Path, name: str, entry: dict) -> bool:
    """The rules a tracked declaration (loop or repo template) obeys before merging."""
    missing = [k for k in KERNEL_LOOP_REQUIRED if k not in entry]
    if missing:
        load.error(path, name, "incomplete_entry", f"missing {', '.join(missing)}")
        return False
    if entry.get("approval") == "auto" and entry.get("enabled") is not True:
        load.error(
            path, name, "auto_requires_enabled",
            "approval auto must be declared with enabled: true in the same entry",
        )
    return True


def expand_repo_loops(load: Load, kernel: KernelLoops, repos: tuple[Repo, ...]) -> dict[str, LoopDraft]:
    """Expand the ``repoLoops`` templates for every repo that is not ``report_only`` (spec §12).

    Each loop (``source`` repos) is the template with ``{repo}`` replaced in its name
    and ``repo`` added to its payload. The ``merge-{repo}``
    template takes the repo's ``merge_every`` (reported in ``overrides`` as
    ``every``); an overlay override by loop name comes later and wins. Errors:
    ``template_payload_repo`` (a template may not pin the repo), ``invalid_loop_name``
    (an expanded name too long), ``repo_loop_collision`` (the name of a kernel loop).
    """
    path = load.registry_dir / "schedules.json"
    result: dict[str, LoopDraft] = {}
    for template, raw in kernel.templates.items():
        label = f"{REPO_LOOPS_KEY}/{template}"
        if not check_kernel_entry(load, path, label, raw):
            continue
        if "repo" in (raw.get("payload") or {}):
            load.error(path, label, "template_payload_repo", "the expansion sets payload.repo; a template may not")
            continue
        for repo in repos:
            if repo.report_only:
                continue
            name = template.replace("{repo}", repo.name)
            if not re.fullmatch(LOOP_NAME_PATTERN, name):
                load.error(path, label, "invalid_loop_name", f"{name!r} (repo {repo.name}) must match {LOOP_NAME_PATTERN}")
                continue
            if name in kernel.loops:
                load.error(path, label, "repo_loop_collision", f"{name!r} (repo {repo.name}) is also a kernel loop")
                continue
            entry = {**LOOP_DEFAULTS, **raw, "payload": {**(raw.get("payload") or {}), "repo": repo.name}}
            overrides: tuple[str, ...] = ()
            if template == MERGE_TEMPLATE and repo.merge_every and repo.merge_every != raw["every"]:
                entry["every"], overrides = repo.merge_every, ("every",)
            result[name] = LoopDraft(entry, "repos", overrides)
    return result


def read_overlay(load: Load) -> dict:
    """``config/schedule.yaml`` as parsed, or ``{}`` when it is absent, empty, not YAML or
    not of the overlay's shape (those errors are reported). Its ``schedules:`` are merged
    here; its ``jobs:`` are the host-clock jobs (``jobs.read_jobs``)."""
    path = load.config_dir / "schedule.yaml"
    data = load.read_yaml(path)
    if data is None or not load.check_shape(path, data, "overlay.schema.json", entry_level=False, entries="schedules"):
        return {}
    return data or {}


def merge_overlay(load: Load, loops: dict[str, LoopDraft], overlay: dict) -> dict[str, LoopDraft]:
    """Apply the overlay's ``schedules:`` over the kernel and repo loops (DESIGN §4 merge rules).

    ``overrides`` accumulates: a repo loop whose cadence came from ``merge_every``
    keeps ``every`` listed. The overlay may not move a repo loop to another repo.
    Rules: ``overlay_forbidden_override``, ``invalid_loop_name``, ``overlay_incomplete``,
    ``overlay_auto``.
    """
    path = load.config_dir / "schedule.yaml"
    merged = dict(loops)
    for name, entry in (overlay.get("schedules") or {}).items():
        if name in merged:
            draft = merged[name]
            base = draft.entry
            forbidden = [k for k in entry if k not in OVERLAY_OVERRIDABLE and entry[k] != base.get(k)]
            repo = base["payload"].get("repo") if draft.source == "repos" else None
            if repo is not None and (entry.get("payload") or {}).get("repo", repo) != repo:
                forbidden.append("payload.repo")
            if forbidden:
                load.error(
                    path, name, "overlay_forbidden_override",
                    f"the overlay may change only {', '.join(OVERLAY_OVERRIDABLE)} of a kernel loop; "
                    f"{', '.join(forbidden)} {'stays' if len(forbidden) == 1 else 'stay'} pinned in the tracked registry",
                )
                continue
            overrides = tuple(
                k for k in OVERLAY_OVERRIDABLE
                if k in draft.overrides or (k in entry and entry[k] != base.get(k))
            )
            effective = dict(base)
            effective.update({k: entry[k] for k in ("enabled", "every") if k in entry})
            if "payload" in entry:
                effective["payload"] = {**base.get("payload", {}), **entry["payload"]}
            merged[name] = LoopDraft(effective, draft.source, overrides)
            continue
        if not re.fullmatch(LOOP_NAME_PATTERN, name):
            load.error(path, name, "invalid_loop_name", f"a loop name must match {LOOP_NAME_PATTERN}")
            continue
        missing = [k for k in OVERLAY_NEW_LOOP_REQUIRED if k not in entry]
        if missing:
            load.error(path, name, "overlay_incomplete", f"a new overlay loop must declare {', '.join(missing)}")
            continue
        if entry.get("approval", "watched") == "auto":
            load.error(
                path, name, "overlay_auto",
                "approval auto is a tracked registry declaration, never local configuration",
            )
            continue
        merged[name] = LoopDraft({**LOOP_DEFAULTS, **entry}, "overlay")
    return merged


def effective_loops(
    load: Load,
    merged: dict[str, LoopDraft],
    event_types: dict[str, EventType],
    definitions: dict[str, Definition],
) -> dict[str, Loop]:
    """Validate every merged entry into a ``Loop``, in name order.

    Rules: ``loop_name_is_key_scope``, those of ``check_slots``, ``invalid_catch_up``, ``invalid_approval``,
    ``catch_up_all_singleton``, ``unregistered_event_type``, ``auto_on_human_only``,
    ``agent_not_schedulable`` and ``sample_tick_invalid``. A loop whose event type
    broke its file's schema is skipped without an error of its own.
    """
    result = {}
    key_scopes = {d.id for d in definitions.values() if d.idempotency_key is not None}
    for name, draft in sorted(merged.items()):
        entry, source, overrides = draft.entry, draft.source, draft.overrides
        path = load.config_dir / "schedule.yaml" if source == "overlay" else load.registry_dir / "schedules.json"
        if name in key_scopes:
            load.error(
                path, name, "loop_name_is_key_scope",
                f"definition {name!r} keys its runs {name}:…, and a loop's ticks are keyed by its name; rename the loop",
            )
            continue
        overlay = load.config_dir / "schedule.yaml"
        # A value the overlay changed is reported against the overlay, where it was written.
        ok, cadence = check_slots(load, overlay if "every" in overrides else path, name, entry, event_types)
        if entry["catchUp"] not in CATCH_UP_POLICIES:
            load.error(path, name, "invalid_catch_up", f"catchUp {entry['catchUp']!r} is not none, last or all")
            ok = False
        if entry["approval"] not in APPROVALS:
            load.error(path, name, "invalid_approval", f"approval {entry['approval']!r} is not watched or auto")
            ok = False
        if entry["catchUp"] == "all" and entry["singleton"]:
            load.error(
                path, name, "catch_up_all_singleton",
                "catchUp all fires every missed slot, and a singleton loop would NOOP all but one",
            )
            ok = False
        etype = event_types.get(entry["eventType"])
        if etype is None and ("event-types.json", entry["eventType"]) in load.broken:
            continue
        if etype is None:
            load.error(path, name, "unregistered_event_type", f"{entry['eventType']!r} is not in event-types.json")
            ok = False
        else:
            if entry["approval"] == "auto" and etype.human_approval_only:
                load.error(path, name, "auto_on_human_only", f"{etype.name} is humanApprovalOnly")
                ok = False
            target = definitions.get(etype.target)
            if target is not None and target.adapter == "agent" and not target.allow_scheduled:
                load.error(
                    path, name, "agent_not_schedulable",
                    f"{target.ref} is an agent without allowScheduled: true (spec §7)",
                )
                ok = False
            if ok:
                ok = check_sample_tick(
                    load, overlay if "payload" in overrides else path, name, entry, cadence, etype, target
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
                keyed=build_keyed(entry["keyed"]) if "keyed" in entry else None,
            )
    return result


def check_sample_tick(load: Load, path, name, entry, cadence, etype, target) -> bool:
    """A loop whose every tick would be refused is a load error, not a refusal per slot
    (validated once per schema and payload shape: ``Load.sample_error``)."""
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
        err = load.sample_error(schema, sample)
        if err is not None:
            where = "/".join(map(str, err.absolute_path)) or "<top>"
            load.error(path, name, "sample_tick_invalid", f"a tick of this loop fails the {label} at {where}: {err.message}")
            return False
    return True
