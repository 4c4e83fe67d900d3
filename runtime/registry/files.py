"""Reading the registry and configuration files, and the registry digest (DESIGN §4)."""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import yaml
from django.conf import settings

from lib.json_text import canonical_json
from lib.strict_yaml import load_yaml

from .model import RegistryError


def display_path(path: Path) -> str:
    """How errors name a file: ``registry/<path>`` inside the registry directory, the
    project-relative path inside the project, the absolute path otherwise."""
    # The directory resolved, not the file: a file that is a symlink loop must still be named.
    resolved = path.parent.resolve() / path.name
    registry_dir = Path(settings.FACTORY_REGISTRY_DIR).resolve()
    if resolved == registry_dir or registry_dir in resolved.parents:
        return (Path("registry") / resolved.relative_to(registry_dir)).as_posix()
    try:
        return resolved.relative_to(Path(settings.BASE_DIR).resolve()).as_posix()
    except ValueError:
        return str(path)


def not_utf8(exc: UnicodeDecodeError) -> str:
    """What a configuration file that is not UTF-8 is told: the first bad byte and its offset."""
    return f"the file is not UTF-8: byte 0x{exc.object[exc.start]:02x} at offset {exc.start}"


def unreadable(path: Path, exc: OSError) -> RegistryError:
    """``unreadable_file``: the path exists but is not a file that can be read (a directory,
    a FIFO, a symlink loop, no permission); the registry in force stays (DESIGN §4)."""
    return RegistryError(display_path(path), "<file>", "unreadable_file", f"the file cannot be read: {exc.strerror or exc}")


def read_json(inputs: Inputs, path: Path, errors: list[RegistryError]):
    """Parse a JSON file; on failure append ``missing_file``, ``unreadable_file`` or
    ``invalid_json`` (bytes that are not UTF-8 included) and return None."""
    try:
        text = inputs.read_text(path)
    except FileNotFoundError:
        errors.append(RegistryError(display_path(path), "<file>", "missing_file", "the file does not exist"))
        return None
    except UnicodeDecodeError as exc:
        errors.append(RegistryError(display_path(path), "<file>", "invalid_json", not_utf8(exc)))
        return None
    except OSError as exc:
        errors.append(unreadable(path, exc))
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        errors.append(RegistryError(display_path(path), "<file>", "invalid_json", str(exc)))
        return None


def read_yaml(inputs: Inputs, path: Path, errors: list[RegistryError]):
    """Parse an optional YAML file: a missing file is ``{}``; bad YAML (bytes that are not
    UTF-8 included) appends ``invalid_yaml``, a path that cannot be read ``unreadable_file``."""
    try:
        text = inputs.read_text(path)
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError as exc:
        errors.append(RegistryError(display_path(path), "<file>", "invalid_yaml", not_utf8(exc)))
        return None
    except OSError as exc:
        errors.append(unreadable(path, exc))
        return None
    try:
        return load_yaml(text)
    except yaml.YAMLError as exc:
        errors.append(RegistryError(display_path(path), "<file>", "invalid_yaml", str(exc).replace("\n", " ")))
        return None


def kernel_files(registry_dir: Path) -> list[Path]:
    """Every tracked kernel file (``*.json`` under the registry directory), in path order."""
    return sorted(registry_dir.rglob("*.json"), key=lambda p: p.relative_to(registry_dir).as_posix())


def compute_digest(inputs: Inputs) -> str:
    """SHA-256 hex over the canonical JSON (sorted keys, no whitespace) of the kernel files.

    The document hashed is ``{relative path: parsed content}``, whose sorted keys put the
    files in path order. The overlay and repos files are outside it (DESIGN §4).
    Raises ValueError if a file is not valid JSON, OSError if one cannot be read.
    """
    document = {
        path.relative_to(inputs.registry_dir).as_posix(): json.loads(inputs.read_text(path))
        for path in inputs.kernel_files
    }
    return hashlib.sha256(canonical_json(document).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class _File:
    """One file as a snapshot found it: ``is_file`` as ``Path.is_file`` said, and its
    bytes, or the OSError reading them raised."""

    is_file: bool
    data: bytes | OSError


class Inputs:
    """The bytes of every file one load reads, each read once (DESIGN §4).

    ``Inputs.read(registry_dir, config_dir)`` lists and reads the kernel (every ``*.json``
    under the registry directory, and those of ``definitions/``, ``schemas/`` and
    ``schemas/meta/`` again, since ``rglob`` does not descend into a symlinked
    directory), the overlay ``schedule.yaml`` and ``repos.yaml``; ``fake-outcomes.yaml``
    is the fake adapter's, not the registry's. A load reads only through the snapshot,
    so ``key`` names exactly what was validated. A file outside it (a schema name that a
    changed meta-schema let out of ``schemas/``) is read from disk, and the snapshot is
    then no longer ``complete``.
    """

    #: The files a load reads by name, whether or not they exist.
    KERNEL_NAMED = (
        "event-types.json",
        "edges.json",
        "schedules.json",
        "schemas/factory.event.v1.json",
        "schemas/factory.command-result.v1.json",
    )
    CONFIG_NAMED = ("schedule.yaml", "repos.yaml")
    #: The directories whose ``*.json`` a load lists.
    LISTED = ("definitions", "schemas/meta")
    #: Where the schemas that entries name by file name live.
    SCHEMAS = "schemas"

    def __init__(self, registry_dir: Path, config_dir: Path, kernel_files: list[Path],
                 listings: dict[Path, list[Path]], files: dict[Path, _File]):
        self.registry_dir = registry_dir
        self.config_dir = config_dir
        self.kernel_files = kernel_files
        self._listings = listings
        self._files = files
        self.complete = True

    @classmethod
    def read(cls, registry_dir: Path, config_dir: Path) -> Inputs:
        """Snapshot the inputs of a load of ``registry_dir`` and ``config_dir``."""
        kernel = kernel_files(registry_dir)
        listings = {registry_dir / name: sorted((registry_dir / name).glob("*.json")) for name in cls.LISTED}
        paths = {
            *kernel,
            *(path for listed in listings.values() for path in listed),
            *(registry_dir / cls.SCHEMAS).glob("*.json"),
            *(registry_dir / name for name in cls.KERNEL_NAMED),
            *(config_dir / name for name in cls.CONFIG_NAMED),
        }
        return cls(registry_dir, config_dir, kernel, listings, {path: _snapshot_file(path) for path in paths})

    def glob(self, directory: Path) -> list[Path]:
        """``sorted(directory.glob("*.json"))`` as the snapshot listed it."""
        if directory not in self._listings:
            self.complete = False
            return sorted(directory.glob("*.json"))
        return self._listings[directory]

    def is_file(self, path: Path) -> bool:
        """``path.is_file()`` as the snapshot found it."""
        if path not in self._files:
            self.complete = False
            return path.is_file()
        return self._files[path].is_file

    def read_text(self, path: Path) -> str:
        """``path.read_text(encoding="utf-8")`` of the snapshot's bytes: the same text
        (universal newlines), the same UnicodeDecodeError, the same OSError."""
        if path not in self._files:
            self.complete = False
            return path.read_text(encoding="utf-8")
        data = self._files[path].data
        if isinstance(data, OSError):
            raise data
        return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8").read()

    def key(self) -> tuple | None:
        """The directories, and every file's path, ``is_file`` and bytes (None for a
        missing file); None when a file exists but could not be read, since a load
        that reads it raises instead of returning a registry."""
        files = []
        for path, found in sorted(self._files.items()):
            if isinstance(found.data, FileNotFoundError):
                files.append((str(path), found.is_file, None))
            elif isinstance(found.data, OSError):
                return None
            else:
                files.append((str(path), found.is_file, found.data))
        return (str(self.registry_dir), str(self.config_dir), tuple(files))


class NotARegularFile(OSError):
    """A configuration path that is a directory, a FIFO, a socket or a device."""


def _snapshot_file(path: Path) -> _File:
    """The file's bytes, or the OSError that reading them raised. Only a regular file is
    read: reading a FIFO would wait for a writer, for ever."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:  # missing, or a symlink loop
        return _File(is_file=False, data=exc)
    if not stat.S_ISREG(mode):
        return _File(is_file=False, data=NotARegularFile(
            errno.EINVAL, "not a regular file (a directory, a FIFO or a device)", str(path)))
    try:
        return _File(is_file=True, data=path.read_bytes())
    except OSError as exc:
        return _File(is_file=True, data=exc)


def snapshot(paths: list[str]) -> tuple:
    """A cheap fingerprint ``(path, mtime_ns, size, inode, ctime_ns)`` of files (``None, None``
    for a missing one, ``"unreadable", errno`` for one that cannot be looked at), to notice a
    change on disk. The inode and the change time catch what size and modification time
    cannot: a file replaced by one of the same size and a pinned modification time (``tar``,
    ``rsync -t``, ``cp -p``, a symlink switched between two such files); nobody can set a
    change time."""
    result = []
    for path in paths:
        try:
            found = os.stat(path)
            result.append((path, found.st_mtime_ns, found.st_size, found.st_ino, found.st_ctime_ns))
        except FileNotFoundError:
            result.append((path, None, None))
        except OSError as exc:  # a symlink loop, a denied directory: a change all the same
            result.append((path, "unreadable", exc.errno))
    return tuple(result)
