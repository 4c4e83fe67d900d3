"""Load, merge and validate the registry, fail closed (DESIGN §4).

``load_registry(registry_dir, config_dir)`` reads the tracked kernel (event types,
definitions, edges, schedules, schemas), the instance overlay ``schedule.yaml`` and
``repos.yaml``, and returns the effective ``Registry`` — or raises ``RegistryInvalid``
with every error found, each naming the file, the entry and the rule.

One load is a ``Load``: the directories, the errors found so far, the entries skipped as
broken, and the helpers every step shares (errors, shapes, schemas). The steps live
beside it: ``definitions`` (definitions, event types, edges), ``loops`` (repos, kernel
and repo loops, the overlay merge, sample ticks), ``slots`` (interval, time-of-day and
keyed slots) and ``jobs`` (the host-clock jobs).

A process loads a registry once per content: ``load_registry`` keeps the last few good
registries by their directories and the bytes of every file read.
"""

import gc
import threading
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin

from jsonschema.exceptions import SchemaError
from referencing import Registry as SchemaRegistry
from referencing import Resource

from lib.json_schema import Validator, validator_for
from lib.json_text import canonical_json

from .definitions import read_definitions, read_edges, read_event_types
from .files import Inputs, compute_digest, display_path, read_json, read_yaml
from .jobs import read_jobs
from .loops import (
    TOP_LEVEL,
    effective_loops,
    expand_repo_loops,
    merge_overlay,
    read_kernel_loops,
    read_overlay,
    read_repos,
)
from .model import Registry, RegistryError, RegistryInvalid

#: The keywords of a schema whose properties are each checked on their own (``Load.sample_error``).
SEPARABLE_KEYWORDS = frozenset(
    {"$schema", "$id", "title", "description", "type", "required", "properties", "additionalProperties"}
)
#: How many good registries a process keeps by content: the one in force and a few
#: before it (an edit undone, a test's directories), so that a long-running process
#: does not grow with every edit.
MEMO_SIZE = 8
_memo: OrderedDict[tuple, Registry] = OrderedDict()
_memo_lock = threading.Lock()


@dataclass(frozen=True)
class SchemaFile:
    """A schema file of ``registry/schemas/`` as one load found it: whether it ``exists``,
    the ``errors`` reading and checking it gave, and the ``schema`` (None when broken)."""

    exists: bool
    errors: tuple[RegistryError, ...]
    schema: dict | None


class Load:
    """One load of the registry; collects errors instead of stopping at the first.

    ``broken`` holds ``(file name, entry)`` pairs whose entry broke its file's schema (and
    ``("definitions", ref)`` for a definition file that broke its own):
    they are skipped without cascading into errors about whatever refers to them
    (docs/decisions.md, Registry). A schema file is read and checked once, and its
    validator built once (``lib.json_schema.validator_for``), however many entries refer to it.
    """

    def __init__(self, inputs: Inputs):
        self.inputs = inputs
        self.registry_dir = inputs.registry_dir
        self.config_dir = inputs.config_dir
        self.errors: list[RegistryError] = []
        self.broken: set[tuple[str, str]] = set()
        self.meta = self._meta_registry()
        self._shape_validators: dict[str, Validator] = {}
        self._schema_files: dict[str, SchemaFile] = {}
        # (id(schema), the sample less its loop) → its first error: see sample_error.
        self._sample_errors: dict[tuple[int, str], object] = {}

    def error(self, path: Path, entry: str, rule: str, detail: str) -> None:
        self.errors.append(RegistryError(display_path(path), entry, rule, detail))

    def read_json(self, path: Path):
        """The parsed JSON file, or None (its error reported)."""
        return read_json(self.inputs, path, self.errors)

    def read_yaml(self, path: Path):
        """The parsed optional YAML file (``{}`` when absent), or None (its error reported)."""
        return read_yaml(self.inputs, path, self.errors)

    def glob(self, directory: Path) -> list[Path]:
        """The ``*.json`` files in ``directory``, sorted."""
        return self.inputs.glob(directory)

    def _meta_registry(self) -> SchemaRegistry:
        resources = []
        for path in self.glob(self.registry_dir / "schemas" / "meta"):
            contents = self.read_json(path)
            if isinstance(contents, dict):
                resources.append((contents.get("$id", path.name), Resource.from_contents(contents)))
        return SchemaRegistry().with_resources(resources)

    def check_shape(self, path: Path, data, meta_name: str, entry_level: bool, entries: str | None = None) -> bool:
        """Validate ``data`` against a meta-schema; unknown keys are errors.

        True when the file is usable: clean, or (``entry_level``) broken only inside
        some entries, whose names are added to ``self.broken`` so that they are skipped
        without cascading into errors about whatever refers to them.

        ``entries`` names a mapping of entries in ``data`` — a property (the overlay's
        ``schedules``) or ``TOP_LEVEL`` (``schedules.json``, whose every key not in the
        meta-schema's ``properties`` is a loop) — whose values the meta-schema checks
        against one referenced subschema and nothing else: each distinct value is then
        checked once, however many loops share it, with the same errors at the same places
        as checking the whole document. A meta-schema of any other shape is checked whole.
        """
        meta_id = f"https://factory-runtime.invalid/meta/{meta_name}"
        try:
            schema = self.meta.contents(meta_id)
        except Exception:  # noqa: BLE001 - a missing meta-schema is itself a registry error
            self.error(path, "<file>", "missing_schema", f"meta-schema {meta_name} is not in registry/schemas/meta/")
            return False
        if meta_name not in self._shape_validators:
            self._shape_validators[meta_name] = Validator(schema, registry=self.meta)
        validator = self._shape_validators[meta_name]
        usable = True
        for where_parts, message in sorted(self._shape_errors(validator, data, meta_id, entries), key=lambda e: e[0]):
            parts = where_parts
            entry = parts[0] if entry_level and parts else "<top>"
            where = "/".join(parts) or "<top>"
            self.error(path, entry, "schema", f"at {where}: {message}")
            if entry == "<top>":
                usable = False
            else:
                self.broken.add((path.name, entry))
        return usable

    def _shape_errors(self, validator, data, meta_id: str, entries: str | None) -> list[tuple[list[str], str]]:
        """``(path parts, message)`` of every error of ``data`` (see ``check_shape``)."""
        def found(errors, prefix=()):
            return [([*prefix, *map(str, e.absolute_path)], e.message) for e in errors]

        split = _split_entries(validator.schema, data, entries)
        if split is None:
            return found(validator.iter_errors(data))
        rest, mapping, prefix, reference = split
        errors = found(validator.iter_errors(rest))
        entry_validator = Validator({"$ref": urljoin(meta_id, reference)}, registry=self.meta)
        by_content: dict[str, list] = {}
        for key, value in mapping.items():
            content = canonical_json(value) if _plain_json(value) else None
            if content is None or content not in by_content:
                entry_errors = list(entry_validator.iter_errors(value))
                if content is not None:
                    by_content[content] = entry_errors
            else:
                entry_errors = by_content[content]
            errors += found(entry_errors, (*prefix, str(key)))
        return errors

    def load_schema_file(self, name: str, path: Path, entry: str) -> dict | None:
        """A payload/input/output schema from ``registry/schemas/``, or None when it is
        missing (``missing_schema``, naming the referrer ``path`` and ``entry``) or broken
        (``missing_file``, ``invalid_json``, ``invalid_schema``, naming the schema file).
        Every referrer gets the file's errors, as if it had read the file itself."""
        if name not in self._schema_files:
            self._schema_files[name] = self._read_schema_file(self.registry_dir / "schemas" / name)
        found = self._schema_files[name]
        if not found.exists:
            self.error(path, entry, "missing_schema", f"schemas/{name} does not exist")
            return None
        self.errors.extend(found.errors)
        return found.schema

    def _read_schema_file(self, schema_path: Path) -> SchemaFile:
        if not self.inputs.is_file(schema_path):
            return SchemaFile(exists=False, errors=(), schema=None)
        errors: list[RegistryError] = []
        schema = read_json(self.inputs, schema_path, errors)
        if schema is not None:
            try:
                Validator.check_schema(schema)
            except SchemaError as exc:
                errors.append(RegistryError(display_path(schema_path), "<file>", "invalid_schema", exc.message))
                schema = None
        return SchemaFile(exists=True, errors=tuple(errors), schema=schema)

    def first_error(self, schema: dict, instance):
        """The first error of ``instance`` against a payload or input ``schema``, or None."""
        return next(iter(validator_for(schema).iter_errors(instance)), None)

    def sample_error(self, schema: dict, sample: dict):
        """``first_error(schema, sample)`` for a loop's sample tick, validated once per schema
        and payload shape: the sample less its ``loop`` (payload, key, cadence).

        Loops differ in their name only, and a schema built of ``type``, ``required``,
        ``properties`` and a boolean ``additionalProperties`` checks each property on its
        own; so when the name passes the schema's ``properties.loop``, the sample's first
        error is that of any other loop with the same rest. Any other schema, or a name
        its ``properties.loop`` refuses, is validated in full.
        """
        if not isinstance(schema, dict) or not set(schema) <= SEPARABLE_KEYWORDS or not isinstance(
            schema.get("additionalProperties", True), bool
        ):
            return self.first_error(schema, sample)
        loop_schema = (schema.get("properties") or {}).get("loop")
        if loop_schema is not None and not validator_for(loop_schema).is_valid(sample.get("loop")):
            return self.first_error(schema, sample)
        key = (id(schema), canonical_json({k: v for k, v in sample.items() if k != "loop"}))
        if key not in self._sample_errors:
            self._sample_errors[key] = self.first_error(schema, sample)
        return self._sample_errors[key]

    def builtin_schema(self, name: str) -> dict:
        return self.read_json(self.registry_dir / "schemas" / name) or {}

    def registry(self) -> Registry:
        """Run every step in order (the order of the errors) and assemble the ``Registry``.

        Raises ``RegistryInvalid`` when any step found an error, or when the digest
        cannot be computed; nothing partial is returned.
        """
        definitions = read_definitions(self)
        event_types = read_event_types(self, definitions)
        edges = read_edges(self, definitions, event_types)
        repos = read_repos(self)
        kernel = read_kernel_loops(self)
        drafts = {**kernel.loops, **expand_repo_loops(self, kernel, repos)}
        overlay = read_overlay(self)
        loops = effective_loops(self, merge_overlay(self, drafts, overlay), event_types, definitions)
        jobs = read_jobs(self, overlay, event_types, definitions)
        envelope_schema = self.builtin_schema("factory.event.v1.json")
        command_result_schema = self.builtin_schema("factory.command-result.v1.json")
        if self.errors:
            raise RegistryInvalid(self.errors)
        try:
            digest = compute_digest(self.inputs)
        except (ValueError, OSError) as exc:
            raise RegistryInvalid([RegistryError(display_path(self.registry_dir), "<digest>", "unreadable", str(exc))]) from None
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


#: The keywords a meta-schema may hold beside a mapping of entries (``_split_entries``).
_PLAIN_KEYWORDS = frozenset({"$schema", "$id", "$defs", "title", "description", "type", "properties"})


def _split_entries(schema, data, entries: str | None):
    """``(data less the entries, the entries, their path, their subschema reference)``, or None
    when ``entries`` is None, absent from ``data``, or not a mapping that ``schema`` checks
    with ``additionalProperties: {"$ref": …}`` alone."""
    if entries is None or not isinstance(schema, dict) or not isinstance(data, dict):
        return None
    if entries == TOP_LEVEL:
        holder, prefix = schema, ()
        declared = set(schema.get("properties") or {})
        mapping = {k: v for k, v in data.items() if k not in declared}
        rest = {k: v for k, v in data.items() if k in declared}
    else:
        holder, prefix = (schema.get("properties") or {}).get(entries), (entries,)
        mapping = data.get(entries)
        rest = {**data, entries: {}}
    if not isinstance(holder, dict) or not isinstance(mapping, dict) or not set(holder) <= _PLAIN_KEYWORDS | {
        "additionalProperties"
    }:
        return None
    target = holder.get("additionalProperties")
    if not isinstance(target, dict) or set(target) != {"$ref"}:
        return None
    # A named mapping is replaced by {}: it must be a type that {} satisfies.
    if entries != TOP_LEVEL and holder.get("type", "object") not in ("object", ["object", "null"]):
        return None
    return rest, mapping, prefix, target["$ref"]


@contextmanager
def _collector_paused():
    """Python's cyclic garbage collector off for the duration (and back on if it was on).

    A load allocates millions of small objects (YAML nodes, entries, loops) and frees none
    of them meanwhile, and every collection the allocations trigger walks them all: with
    the collector on, 100,000 overlay loops took 10 s to parse instead of 1.5 s. What a
    load leaves behind is acyclic and freed by reference counting as usual."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _plain_json(value) -> bool:
    """Whether ``value`` is text, numbers, booleans, null, lists and string-keyed objects only:
    what its canonical JSON tells apart from every other value (YAML also gives dates and
    non-string keys, which it would not)."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain_json(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain_json(v) for v in value)
    return value is None or isinstance(value, (str, int, float))


def load_registry(registry_dir: Path, config_dir: Path) -> Registry:
    """Read and validate the kernel under ``registry_dir`` and the overlay under ``config_dir``.

    Returns the effective ``Registry``. Raises ``RegistryInvalid`` listing every error
    (file, entry, rule, detail); nothing partial is ever returned (fail closed).

    Memoised by content: when the directories and the bytes of every file the load
    reads (``files.Inputs``) equal those of one of the last ``MEMO_SIZE`` good loads,
    that ``Registry`` is returned without validating again. A failed load is not kept:
    it validates, and fails the same way, each time.
    """
    inputs = Inputs.read(registry_dir, config_dir)
    key = inputs.key()
    if key is not None:
        with _memo_lock:
            if key in _memo:
                _memo.move_to_end(key)
                return _memo[key]
    with _collector_paused():
        registry = Load(inputs).registry()
    # A load that read a file outside the snapshot depends on more than the key says.
    if key is not None and inputs.complete:
        with _memo_lock:
            _memo[key] = registry
            _memo.move_to_end(key)
            while len(_memo) > MEMO_SIZE:
                _memo.popitem(last=False)
    return registry
