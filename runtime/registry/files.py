"""Reading the registry and configuration files, and the registry digest (DESIGN §4)."""

import hashlib
import json
import re
from pathlib import Path

import yaml
from django.conf import settings

from .model import RegistryError


def display_path(path: Path) -> str:
    """How errors name a file: ``registry/<path>`` inside the registry directory, the
    project-relative path inside the project, the absolute path otherwise."""
    resolved = path.resolve()
    registry_dir = Path(settings.FACTORY_REGISTRY_DIR).resolve()
    if resolved == registry_dir or registry_dir in resolved.parents:
        return (Path("registry") / resolved.relative_to(registry_dir)).as_posix()
    try:
        return resolved.relative_to(Path(settings.BASE_DIR).resolve()).as_posix()
    except ValueError:
        return str(path)


def read_json(path: Path, errors: list[RegistryError]):
    """Parse a JSON file; on failure append ``missing_file`` or ``invalid_json`` and return None."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        errors.append(RegistryError(display_path(path), "<file>", "missing_file", "the file does not exist"))
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        errors.append(RegistryError(display_path(path), "<file>", "invalid_json", str(exc)))
        return None


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` without YAML 1.1's traps for configuration files.

    A key twice in one mapping is an error (PyYAML silently keeps the last one, so a
    second ``schedules:`` appended to an overlay would drop the first); and ``12:00`` is
    the string it looks like, not the base-60 integer 720 of YAML 1.1.
    """

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark, f"found the key {key!r} twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:int",
    re.compile(r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$"),
    list("-+0123456789"),
)
StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9_]+(?:[eE][-+][0-9]+)?"
               r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    list("-+0123456789."),
)


def load_yaml(text: str):
    """Parse configuration YAML with ``StrictLoader``; raises yaml.YAMLError."""
    return yaml.load(text, Loader=StrictLoader)  # noqa: S506 - StrictLoader is a SafeLoader


def read_yaml(path: Path, errors: list[RegistryError]):
    """Parse an optional YAML file: a missing file is ``{}``; bad YAML appends ``invalid_yaml``."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        return load_yaml(text)
    except yaml.YAMLError as exc:
        errors.append(RegistryError(display_path(path), "<file>", "invalid_yaml", str(exc).replace("\n", " ")))
        return None


def canonical_json(data) -> str:
    """Sorted keys, no whitespace: the form the digest and content comparisons use."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def kernel_files(registry_dir: Path) -> list[Path]:
    """Every tracked kernel file (``*.json`` under the registry directory), in path order."""
    return sorted(registry_dir.rglob("*.json"), key=lambda p: p.relative_to(registry_dir).as_posix())


def compute_digest(registry_dir: Path) -> str:
    """SHA-256 hex over the canonical JSON (sorted keys, no whitespace) of the kernel files.

    The document hashed is ``{relative path: parsed content}``, whose sorted keys put the
    files in path order. The overlay and repos files are outside it (DESIGN §4).
    Raises ValueError if a file is not valid JSON.
    """
    document = {
        path.relative_to(registry_dir).as_posix(): json.loads(path.read_text(encoding="utf-8"))
        for path in kernel_files(registry_dir)
    }
    return hashlib.sha256(canonical_json(document).encode("utf-8")).hexdigest()


def snapshot(paths: list[Path]) -> tuple:
    """A cheap fingerprint (path, mtime_ns, size) of files, to notice a change on disk."""
    result = []
    for path in paths:
        try:
            stat = path.stat()
            result.append((str(path), stat.st_mtime_ns, stat.st_size))
        except FileNotFoundError:
            result.append((str(path), None, None))
    return tuple(result)
