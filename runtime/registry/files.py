"""Reading the registry and configuration files, and the registry digest (DESIGN §4)."""

import hashlib
import json
from pathlib import Path

import yaml
from django.conf import settings

from lib.json_text import canonical_json
from lib.strict_yaml import load_yaml

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
