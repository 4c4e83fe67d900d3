"""Comparison: the runtime's schema checks (issue 29, item 6) — json_schema_fast, jsonschema and jsonschema-rs.

Not a test. For the registry's real schemas (``registry/schemas/*.json``: the envelope, the
payload schemas ``registry/event-types.json`` names, the definitions' input, output and contract
schemas, and the meta-schemas the registry files are checked with) and a corpus of valid and
invalid documents, it prints each engine's verdict agreement with the reference, every
disagreement, and the time per validation of each, with the machine's load average.

The engines:

- ``reference``: ``lib.json_schema.Validator`` — jsonschema's Draft 2020-12 with the runtime's
  end-anchored ``pattern`` (docs/design.md §4). Its answer is the one every other must give.
- ``fast``: ``lib.json_schema_fast.compile_check`` (``n/a`` for a schema it leaves to jsonschema).
- ``rs``: ``jsonschema_rs.Draft202012Validator`` with its default options.
- ``plain``: jsonschema's Draft 2020-12 unextended (Python's ``$``), shown, never judged.

The documents: the registry's own files against their meta-schemas; one document made valid for
each schema (``example``) and its mutations (each leaf replaced by each of ``EDGE_VALUES``, each
key removed, a key added); the ``(schema, document, valid)`` cases of ``tests/unit/``; seeded
random plain schemas and documents (the pools of tests/unit/test_json_schema_fast.py); and
``PROBES``, the places where the engines may part: ``$`` before a final newline, ``\\S``/``\\d``/
``\\w`` outside ASCII, lookarounds and backreferences, Python-only regex syntax, ``format``, 1.0
as an integer, bools, big integers, NaN and infinity, unicode lengths and lone surrogates.

    .venv/bin/python bench/schema_bench.py [--random 3000] [--repeat 5] [--json]
"""

import argparse
import ast
import json
import math
import os
import random
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
META_BASE = "https://factory-runtime.invalid/meta/"

#: What a leaf of a valid document is replaced with, one at a time (``mutations``).
EDGE_VALUES: list[tuple[str, object]] = [
    ("null", None), ("true", True), ("false", False), ("0", 0), ("1", 1), ("1.0", 1.0), ("-1", -1),
    ("1.5", 1.5), ("2**64", 2**64), ("-2**63-1", -2**63 - 1), ("10**400", 10**400), ("''", ""),
    ("'a'", "a"), ("'é'", "é"), ("'x\\n'", "x\n"), ("[]", []), ("{}", {}),
    ("'\\x1c'", "\x1c"), ("'\\ufeff'", "\ufeff"), ("'\\ud800'", "\ud800"),
]

NOT_FROM_DECODE_JSON = "lib.json_text.decode_json refuses it, so no door hands it to a validator"

#: (label, schema, document, note): where Python's jsonschema and jsonschema-rs may part.
PROBES: list[tuple[str, object, object, str]] = [
    ("$ before a final newline", {"pattern": "^[a-z]+$"}, "abc\n", ""),
    ("$ at the end", {"pattern": "^[a-z]+$"}, "abc", ""),
    ("escaped \\$ and [$]", {"pattern": "^a\\$[$]$"}, "a$$", ""),
    ("patternProperties $", {"patternProperties": {"^x$": {"type": "integer"}}}, {"x\n": "s"}, ""),
    ("\\S on U+001C", {"pattern": "^\\S+$"}, "\x1c", "clock-tick.json's key pattern"),
    ("\\S on U+0085", {"pattern": "^\\S+$"}, "\x85", "clock-tick.json's key pattern"),
    ("\\S on U+FEFF", {"pattern": "^\\S+$"}, "\ufeff", "clock-tick.json's key pattern"),
    ("\\S on U+00A0", {"pattern": "^\\S+$"}, "\xa0", "clock-tick.json's key pattern"),
    ("\\d on U+0663", {"pattern": "^\\d+$"}, "\u0663", "no registry pattern uses \\d"),
    ("\\w on é", {"pattern": "^\\w+$"}, "é", "no registry pattern uses \\w"),
    ("[a-z] on é", {"pattern": "^[a-z]+$"}, "é", ""),
    ("lookahead", {"pattern": "^(?=a)a$"}, "a", "no registry pattern uses one"),
    ("negative lookbehind", {"pattern": "^.*(?<!x)$"}, "ax", "no registry pattern uses one"),
    ("backreference", {"pattern": "^(a)\\1$"}, "aa", "no registry pattern uses one"),
    ("Python-only \\Z", {"pattern": "a\\Z"}, "a", "not ECMA-262"),
    ("Python-only (?P<n>)", {"pattern": "(?P<n>a)"}, "a", "not ECMA-262"),
    ("format date-time, bad", {"format": "date-time"}, "yesterday", "the envelope's occurredAt"),
    ("format date-time, good", {"format": "date-time"}, "2026-11-30T20:59:58Z", ""),
    ("format unknown", {"format": "no-such-format"}, "x", ""),
    ("integer 1.0", {"type": "integer"}, 1.0, ""),
    ("integer 1.5", {"type": "integer"}, 1.5, ""),
    ("integer true", {"type": "integer"}, True, ""),
    ("number false", {"type": "number"}, False, ""),
    ("minimum on true", {"minimum": 5}, True, ""),
    ("const 1 vs true", {"const": 1}, True, ""),
    ("const 1 vs 1.0", {"const": 1}, 1.0, ""),
    ("enum [0] vs false", {"enum": [0]}, False, ""),
    ("uniqueItems [1, true]", {"uniqueItems": True}, [1, True], ""),
    ("uniqueItems [1, 1.0]", {"uniqueItems": True}, [1, 1.0], ""),
    ("integer 2**64", {"type": "integer"}, 2**64, ""),
    ("integer 2**70", {"type": "integer"}, 2**70, ""),
    ("maximum 5 vs 2**70", {"maximum": 5}, 2**70, ""),
    ("minimum 5 vs 10**400", {"minimum": 5}, 10**400, "decode_json takes up to 4,300 digits"),
    ("maximum 5 vs -10**400", {"maximum": 5}, -10**400, "decode_json takes up to 4,300 digits"),
    ("maximum 2**64 vs 2**64+1", {"maximum": 2**64}, 2**64 + 1, ""),
    ("number NaN", {"type": "number"}, math.nan, NOT_FROM_DECODE_JSON),
    ("minimum 0 vs NaN", {"minimum": 0}, math.nan, NOT_FROM_DECODE_JSON),
    ("number Infinity", {"type": "number"}, math.inf, NOT_FROM_DECODE_JSON),
    ("maximum 0 vs Infinity", {"maximum": 0}, math.inf, NOT_FROM_DECODE_JSON),
    ("maxLength 1 vs é", {"maxLength": 1}, "é", ""),
    ("maxLength 1 vs U+1F600", {"maxLength": 1}, "\U0001f600", ""),
    ("maxLength 1 vs e + U+0301", {"maxLength": 1}, "e\u0301", ""),
    ("string, a lone surrogate", {"type": "string"}, "\ud800", "decode_json takes '\"\\ud800\"'"),
    ("key, a lone surrogate", {"type": "object"}, {"\udc00": 1}, "decode_json takes it"),
    ("duplicate keys", {"type": "object", "maxProperties": 1}, json.loads('{"a": 1, "a": 2}'),
     "a dict holds one; " + NOT_FROM_DECODE_JSON),
]

# The pools of tests/unit/test_json_schema_fast.py, for seeded random cases.
RANDOM_NAMES = ["repo", "prNumbers", "headSha", "x", "x\n", ""]
RANDOM_TEXT = ["", "a", "hello", "hello\n", "Hello", "a b", "é", "abcdefghij" * 5, "1.0"]
RANDOM_TYPES = ["string", "object", "array", "boolean", "null", "integer", "number"]
RANDOM_PATTERNS = ["^[a-z]+$", "^h", "o$", "[0-9]"]

#: Strings tried, in order, for a string a schema wants (``example``); the first that passes wins.
STRING_CANDIDATES = [
    "hello", "a", "T-7", "OK", "0123456789abcdef0123456789abcdef01234567", "2026-11-30T20:59:58Z",
    "owner/repo", "x.json", "12:30", "/input/x", "/a", "merge-scan@1", "work-{repo}", "hello-1", "HELLO",
]


# --- documents -------------------------------------------------------------------------------

def load_json(path: Path):
    return json.loads(path.read_text())


def schema_files(registry_dir: Path) -> dict[str, object]:
    """``registry/schemas``' schemas by name (meta-schemas as ``meta/<name>``)."""
    found = {path.name: load_json(path) for path in sorted((registry_dir / "schemas").glob("*.json"))}
    found.update({f"meta/{path.name}": load_json(path) for path in sorted((registry_dir / "schemas" / "meta").glob("*.json"))})
    return found


def schema_users(registry_dir: Path) -> dict[str, list[str]]:
    """Who checks with each payload, input, output and contract schema: event types and definitions."""
    users: dict[str, list[str]] = {"factory.event.v1.json": ["envelope"]}
    for name, entry in load_json(registry_dir / "event-types.json").items():
        if isinstance(entry, dict) and entry.get("payloadSchema"):
            users.setdefault(entry["payloadSchema"], []).append(f"payload of {name}")
    for path in sorted((registry_dir / "definitions").glob("*.json")):
        definition = load_json(path)
        for key in ("inputSchema", "outputSchema"):
            if isinstance(definition.get(key), str):
                users.setdefault(definition[key], []).append(f"{key} of {path.stem}")
    return users


def registry_documents(registry_dir: Path) -> list[tuple[str, str, object]]:
    """(meta-schema, label, document): the registry's tracked files as the loader checks them."""
    out = [("meta/event-types.schema.json", "event-types.json", load_json(registry_dir / "event-types.json")),
           ("meta/schedules.schema.json", "schedules.json", load_json(registry_dir / "schedules.json")),
           ("meta/edges.schema.json", "edges.json", load_json(registry_dir / "edges.json"))]
    for path in sorted((registry_dir / "definitions").glob("*.json")):
        out.append(("meta/definition.schema.json", f"definitions/{path.name}", load_json(path)))
    return out


def example(schema, is_valid: Callable[[object, object], bool], root=None, depth: int = 0):
    """A document ``schema`` probably accepts, built from its keywords (checked by the caller)."""
    root = schema if root is None else root
    if depth > 8 or not isinstance(schema, dict):
        return {}
    if isinstance(schema.get("$ref"), str) and schema["$ref"].startswith("#/"):
        target = root
        for part in schema["$ref"][2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return example(target, is_valid, root, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for combinator in ("allOf", "anyOf", "oneOf"):
        if schema.get(combinator):
            merged = {}
            for part in (schema[combinator] if combinator == "allOf" else schema[combinator][:1]):
                merged.update(part if isinstance(part, dict) else {})
            return example({**{k: v for k, v in schema.items() if k != combinator}, **merged}, is_valid, root, depth + 1)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    kind = next((k for k in kind if k != "null"), "null") if isinstance(kind, list) else kind
    if kind == "object":
        properties = schema.get("properties", {})
        return {name: example(properties.get(name, {}), is_valid, root, depth + 1)
                for name in list(properties) if name in schema.get("required", []) or depth < 6}
    if kind == "array":
        return [example(schema.get("items", {}), is_valid, root, depth + 1)
                for _ in range(max(1, schema.get("minItems", 1)))]
    if kind in ("integer", "number"):
        return max(schema.get("minimum", 1), 1)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return next((s for s in STRING_CANDIDATES if is_valid(schema, s)), "hello")


def leaf_paths(document, path=()) -> Iterable[tuple]:
    """Every path to a leaf (a scalar, an empty list or object) of ``document``."""
    if isinstance(document, dict) and document:
        for key, value in document.items():
            yield from leaf_paths(value, (*path, key))
    elif isinstance(document, list) and document:
        for index, value in enumerate(document):
            yield from leaf_paths(value, (*path, index))
    else:
        yield path


def replaced(document, path: tuple, value):
    """A copy of ``document`` with what ``path`` leads to replaced by ``value``."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(document, dict):
        return {**document, head: replaced(document[head], rest, value)}
    return [replaced(item, rest, value) if index == head else item for index, item in enumerate(document)]


def removed(document, path: tuple):
    """A copy of ``document`` without the member ``path`` leads to (a list item stays)."""
    if len(path) == 1:
        return {k: v for k, v in document.items() if k != path[0]} if isinstance(document, dict) else document
    head = path[0]
    if isinstance(document, dict):
        return {**document, head: removed(document[head], path[1:])}
    return [removed(item, path[1:]) if index == head else item for index, item in enumerate(document)]


def mutations(document) -> Iterable[tuple[str, object]]:
    """(label, document): each leaf replaced by each edge value and, for a string, with ``\\n``
    appended; each object member removed; an unknown member added to each object."""
    for path in leaf_paths(document):
        where = pointer(path)
        for label, value in EDGE_VALUES:
            yield f"{where} = {label}", replaced(document, path, value)
        leaf = _at(document, path)
        if isinstance(leaf, str):
            yield f"{where} += '\\n'", replaced(document, path, leaf + "\n")
    for path in _object_paths(document):
        where = pointer(path)
        target = _at(document, path)
        for key in target:
            yield f"{where}/{key} removed", removed(document, (*path, key))
        yield f"{where}/zz-unknown added", replaced(document, path, {**target, "zz-unknown": 1})


def pointer(path: tuple) -> str:
    """``path`` as a JSON Pointer (RFC 6901 without escaping: labels only); the root is ``""``."""
    return "".join(f"/{part}" for part in path)


def _at(document, path):
    for part in path:
        document = document[part]
    return document


def _object_paths(document, path=()) -> Iterable[tuple]:
    if isinstance(document, dict):
        yield path
        for key, value in document.items():
            yield from _object_paths(value, (*path, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            yield from _object_paths(value, (*path, index))


def test_cases(tests_dir: Path) -> list[tuple[str, object, object, bool]]:
    """The literal ``(schema, document, valid)`` cases parametrized in ``tests_dir``'s files."""
    out = []
    for path in sorted(tests_dir.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "parametrize"
                    and len(node.args) == 2):
                continue
            try:
                names, rows = ast.literal_eval(node.args[0]), ast.literal_eval(node.args[1])
            except ValueError:
                continue
            names = tuple(n.strip() for n in names.split(",")) if isinstance(names, str) else tuple(names)
            if names[:2] == ("schema", "document"):
                out.extend((f"{path.name} #{i}", *row[:2], row[2] if len(row) > 2 else None) for i, row in enumerate(rows))
    return out


def random_cases(count: int, seed: int = 29) -> list[tuple[str, object, object]]:
    """``count`` seeded (label, plain schema, document) pairs from the fast check's test pools."""
    rng = random.Random(seed)

    def scalar():
        return rng.choice([None, True, False, rng.randint(-3, 3), rng.choice([0.0, 1.0, -1.5, 2.5, 1e300]),
                           rng.choice(RANDOM_TEXT)])

    def document(depth=0):
        roll = rng.random()
        if depth > 2 or roll < 0.5:
            return scalar()
        if roll < 0.75:
            return [document(depth + 1) for _ in range(rng.randint(0, 4))]
        return {rng.choice(RANDOM_NAMES): document(depth + 1) for _ in range(rng.randint(0, 4))}

    def schema(depth=2):
        if rng.random() < 0.1:
            return rng.choice([True, False])
        out = {}
        optional = {
            "type": lambda: rng.choice(RANDOM_TYPES) if rng.random() < 0.7 else rng.sample(RANDOM_TYPES, rng.randint(1, 3)),
            "minLength": lambda: rng.randint(0, 3), "maxLength": lambda: rng.randint(0, 6),
            "pattern": lambda: rng.choice(RANDOM_PATTERNS), "minimum": lambda: rng.choice([0, 1, -1.5]),
            "maximum": lambda: rng.choice([0, 2, 2.5]), "const": lambda: rng.choice(RANDOM_TEXT),
            "enum": lambda: rng.sample(RANDOM_TEXT, rng.randint(1, 3)), "minItems": lambda: rng.randint(0, 2),
            "maxItems": lambda: rng.randint(0, 3), "required": lambda: rng.sample(RANDOM_NAMES, rng.randint(0, 2)),
            "format": lambda: "date-time",
        }
        for key, make in optional.items():
            if rng.random() < 0.15:
                out[key] = make()
        if depth and rng.random() < 0.5:
            if rng.random() < 0.5:
                out["properties"] = {rng.choice(RANDOM_NAMES): schema(depth - 1) for _ in range(rng.randint(0, 3))}
            if rng.random() < 0.3:
                out["additionalProperties"] = schema(depth - 1)
            if rng.random() < 0.3:
                out["items"] = schema(depth - 1)
        return out

    return [(f"random #{i}", schema(), document()) for i in range(count)]


# --- judging ---------------------------------------------------------------------------------

def verdict(judge: Callable[[object], object], document) -> object:
    """True or False, ``"n/a"`` when the engine does not take the schema, or ``"error: …"``."""
    try:
        answer = judge(document)
    except Exception as exc:  # noqa: BLE001 - an engine that raises is a finding, not a crash
        return f"error: {type(exc).__name__}"
    if answer is True or answer is False or (isinstance(answer, str) and (answer == "n/a" or answer.startswith("error: "))):
        return answer
    return f"error: answered {answer!r}"


def disagreements(rows: list[dict], judged: Iterable[str]) -> list[dict]:
    """The rows where an engine of ``judged`` answered other than ``reference`` (``n/a`` never disagrees)."""
    return [row for row in rows if any(row[name] != "n/a" and row[name] != row["reference"] for name in judged)]


def agreement(rows: list[dict], name: str) -> tuple[int, int]:
    """(agreeing, judged): how many of the rows ``name`` judged it answered as ``reference`` did."""
    judged = [row for row in rows if row[name] != "n/a"]
    return sum(row[name] == row["reference"] for row in judged), len(judged)


def cause(row: dict) -> str:
    """What a row's document differs by: the edge value a mutation put in, or the case itself."""
    for mark in (" = ", " += "):
        if mark in row["case"]:
            return mark.strip() + " " + row["case"].rsplit(mark, 1)[1]
    if row["case"].endswith((" removed", " added")):
        return row["case"].rsplit(" ", 2)[-2] + " " + row["case"].rsplit(" ", 1)[1]
    return row["case"]


def by_cause(rows: list[dict], name: str) -> list[list[object]]:
    """(cause, reference's verdict, ``name``'s verdict, rows, schemas or groups): the disagreements summed up."""
    found: dict[tuple, list[dict]] = {}
    for row in rows:
        found.setdefault((cause(row), row["reference"], row[name]), []).append(row)
    return [[what, reference, answer, len(group), ", ".join(sorted({r["case"].split(" ")[0] if "mutated" in r["group"] else r["group"] for r in group}))[:80]]
            for (what, reference, answer), group in sorted(found.items(), key=lambda item: (-len(item[1]), str(item[0])))]


def per_validation_us(seconds: float, count: int) -> float:
    return seconds / count * 1e6 if count else math.nan


def load_line() -> str:
    one, five, fifteen = os.getloadavg()
    return f"machine: {os.cpu_count()} CPUs, load average {one:.2f} {five:.2f} {fifteen:.2f}"


def table(header: list[str], rows: list[list[object]]) -> str:
    """A plain text table, columns as wide as their widest cell."""
    cells = [header] + [[_cell(value) for value in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def _cell(value) -> str:
    if isinstance(value, float):
        return "-" if math.isnan(value) else f"{value:,.1f}"
    return str(value)


def short(document, width: int = 60) -> str:
    text = json.dumps(document, ensure_ascii=True, default=repr)
    return text if len(text) <= width else text[: width - 1] + "…"


# --- the run ---------------------------------------------------------------------------------

class Engines:
    """Each engine's validator per schema, built once (as ``validator_for`` does in the runtime)."""

    def __init__(self, meta_schemas: dict[str, object]):
        import jsonschema
        import jsonschema_rs
        from referencing import Registry, Resource

        from lib.json_schema import Validator
        from lib.json_schema_fast import compile_check

        self.jsonschema, self.rs, self.Validator, self.compile_check = jsonschema, jsonschema_rs, Validator, compile_check
        self.meta = Registry().with_resources(
            [(s["$id"], Resource.from_contents(s)) for s in meta_schemas.values() if isinstance(s, dict)])
        self.rs_meta = jsonschema_rs.Registry([(s["$id"], s) for s in meta_schemas.values() if isinstance(s, dict)])
        self._built: dict[tuple[int, str], object] = {}
        self._keep: list[object] = []

    def build(self, schema, name: str):
        key = (id(schema), name)
        if key not in self._built:
            self._keep.append(schema)
            self._built[key] = self._make(schema, name)
        return self._built[key]

    def _make(self, schema, name: str):
        meta = isinstance(schema, dict) and "$id" in schema
        try:
            if name == "reference":
                return self.Validator(schema, registry=self.meta).is_valid
            if name == "plain":
                return self.jsonschema.Draft202012Validator(schema, registry=self.meta).is_valid
            if name == "fast":
                check = self.compile_check(schema)
                return check if check is not None else (lambda document: "n/a")
            if name == "rs":
                options = {"registry": self.rs_meta} if meta else {}
                return self.rs.Draft202012Validator(schema, **options).is_valid
        except Exception as exc:  # noqa: BLE001 - a schema an engine refuses is a finding
            failure = f"error: {type(exc).__name__} building"
            return lambda document: failure
        raise ValueError(name)

    def row(self, group: str, label: str, schema, document, note: str = "") -> dict:
        row = {"group": group, "case": label, "document": document, "note": note}
        for name in ("reference", "fast", "rs", "plain"):
            judge = self.build(schema, name)
            row[name] = verdict(judge, document)
        return row


def gather(engines: Engines, registry_dir: Path, tests_dir: Path, random_count: int) -> tuple[list[dict], dict]:
    """Every (schema, document) row with each engine's verdict, and the valid/invalid documents per schema."""
    schemas = schema_files(registry_dir)
    rows: list[dict] = []
    corpus: dict[str, dict[str, list]] = {}

    def reference_is_valid(schema, document):
        return engines.build(schema, "reference")(document) is True

    def add(group, label, schema_name, document, note=""):
        row = engines.row(group, label, schemas[schema_name], document, note)
        rows.append(row)
        if all(row[name] in (True, False) for name in ("reference", "rs")):
            corpus.setdefault(schema_name, {True: [], False: []})[row["reference"]].append(document)

    for meta_name, label, document in registry_documents(registry_dir):
        add("registry file", f"{label} vs {meta_name}", meta_name, document)
        for mutation, changed in mutations(document):
            add("registry file mutated", f"{label} {mutation}", meta_name, changed)
    for name in [n for n in schemas if not n.startswith("meta/")]:
        document = example(schemas[name], reference_is_valid)
        add("example", name, name, document)
        for mutation, changed in mutations(document):
            add("example mutated", f"{name} {mutation}", name, changed)
    for label, schema, document, expected in test_cases(tests_dir):
        row = engines.row("tests/unit case", label, schema, document, f"the test expects {expected}")
        rows.append(row)
    for label, schema, document, note in PROBES:
        rows.append(engines.row("probe", label, schema, document, note))
    for label, schema, document in random_cases(random_count):
        rows.append(engines.row("random", label, schema, document))
    return rows, corpus


def time_engines(engines: Engines, schemas: dict[str, object], corpus: dict, repeat: int) -> list[list[object]]:
    """Per schema and verdict: µs per validation of each engine (best of ``repeat`` passes), and of
    the two production paths: ``validator_for`` today (fast, then jsonschema) and jsonschema-rs
    first with jsonschema's errors on a refusal."""
    from lib.json_schema import validator_for

    lines = []
    for name in sorted(corpus):
        schema = schemas[name]
        for valid in (True, False):
            documents = corpus[name][valid]
            if not documents:
                continue
            reference, rs, fast = (engines.build(schema, n) for n in ("reference", "rs", "fast"))
            meta = isinstance(schema, dict) and "$id" in schema
            errors = engines.Validator(schema, registry=engines.meta).iter_errors
            today = errors_of(validator_for(schema).iter_errors) if not meta else None
            with_rs = errors_after(rs, errors)
            figures = [name, "valid" if valid else "invalid", len(documents)]
            for judge in (reference, fast if fast(documents[0]) != "n/a" else None, rs, today, with_rs):
                figures.append(_best(judge, documents, repeat) if judge is not None else math.nan)
            lines.append(figures)
    return lines


def errors_of(iter_errors: Callable) -> Callable[[object], list]:
    """What admission does with a validator: every error of a document (none for a valid one)."""
    return lambda document: list(iter_errors(document))


def errors_after(is_valid: Callable, iter_errors: Callable) -> Callable[[object], list]:
    """The same with ``is_valid`` asked first, and ``iter_errors`` only for a document it refuses."""
    return lambda document: [] if is_valid(document) is True else list(iter_errors(document))


def _best(judge, documents: list, repeat: int) -> float:
    loops = max(1, 1000 // len(documents))
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(loops):
            for document in documents:
                judge(document)
        best = min(best, time.perf_counter() - start)
    return per_validation_us(best, loops * len(documents))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--random", type=int, default=3000, help="seeded random plain schema/document pairs")
    parser.add_argument("--repeat", type=int, default=5, help="timing passes; the best is shown")
    parser.add_argument("--json", action="store_true", help="the disagreements as JSON lines too")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(BASE_DIR))
    registry_dir = BASE_DIR / "registry"
    schemas = schema_files(registry_dir)
    engines = Engines({k: v for k, v in schemas.items() if k.startswith("meta/")})
    rows, corpus = gather(engines, registry_dir, BASE_DIR / "tests" / "unit", args.random)

    print(f"jsonschema {_version('jsonschema')}, jsonschema-rs {_version('jsonschema_rs')}, Python {sys.version.split()[0]}")
    print(load_line())
    users = schema_users(registry_dir)
    print(f"\n{len(schemas)} schemas ({sum(1 for n in schemas if n.startswith('meta/'))} meta), "
          f"{sum(1 for n in schemas if engines.compile_check(schemas[n]) is not None)} compiled by json_schema_fast; "
          f"{len(users)} named by the envelope, event types and definitions")

    print("\nverdicts: agreeing with the reference / judged")
    groups = sorted({row["group"] for row in rows})
    lines = []
    for group in groups + ["all"]:
        chosen = [row for row in rows if group in ("all", row["group"])]
        valid = sum(row["reference"] is True for row in chosen)
        lines.append([group, len(chosen), valid] + [
            "{}/{}".format(*agreement(chosen, name)) for name in ("fast", "rs", "plain")])
    print(table(["documents", "rows", "valid", "fast", "rs", "plain (not judged)"], lines))

    for name in ("fast", "rs"):
        found = disagreements(rows, [name])
        print(f"\ndisagreements of {name} with the reference: {len(found)}")
        if found:
            print(table(["cause", "reference", name, "rows", "where"], by_cause(found, name)))
            print()
            print(table(["group", "case", "document", "reference", name, "plain", "note"],
                        [[row["group"], row["case"][:70], short(row["document"], 40), row["reference"], row[name],
                          row["plain"], row["note"]] for row in found]))

    print(f"\nµs per validation (best of {args.repeat} passes), per schema and reference verdict")
    print("  today = validator_for: the fast check, then jsonschema's walk and its errors for a refusal")
    print("  rs+errors = jsonschema-rs, then jsonschema's errors for a refusal (the replacement's path)")
    print(table(["schema", "documents", "n", "jsonschema", "fast", "rs", "today", "rs+errors"],
                time_engines(engines, schemas, corpus, args.repeat)))
    print(load_line())
    if args.json:
        for row in disagreements(rows, ["fast", "rs"]):
            print(json.dumps({k: v for k, v in row.items()}, default=repr, ensure_ascii=True))
    return 0


def _version(distribution: str) -> str:
    from importlib.metadata import version

    return version(distribution)


if __name__ == "__main__":
    raise SystemExit(main())
