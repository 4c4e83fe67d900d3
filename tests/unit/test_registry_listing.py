"""The registry's change check lists its directories only when one of them changed (runtime.registry.store)."""

import importlib
import os
import time

from runtime.registry.store import LISTING_TRUST_SECONDS, watched_files

OLD = 1_700_000_000 * 10**9  # 2023-11-14, nanoseconds: long settled


def make_registry(tmp_path):
    registry_dir = tmp_path / "registry"
    (registry_dir / "definitions").mkdir(parents=True)
    (registry_dir / "edges.json").write_text("{}")
    (registry_dir / "definitions" / "a@1.json").write_text("{}")
    return registry_dir


def stamp(directory, mtime_ns: int) -> None:
    os.utime(directory, ns=(mtime_ns, mtime_ns))


def names(paths) -> list[str]:
    return [os.path.relpath(path, paths[0].rsplit("/registry/", 1)[0]) for path in paths]


def test_a_settled_listing_is_kept_until_a_directory_changes(tmp_path):
    registry_dir = make_registry(tmp_path)
    for directory in (registry_dir, registry_dir / "definitions"):
        stamp(directory, OLD)
    first = watched_files(registry_dir, tmp_path / "config")
    assert names(first) == [
        "registry/definitions/a@1.json", "registry/edges.json", "config/schedule.yaml", "config/repos.yaml",
    ]
    # A file added under an unchanged mtime (as within one tick of a coarse clock) is not
    # looked for: the listing was kept.
    (registry_dir / "definitions" / "b@1.json").write_text("{}")
    stamp(registry_dir / "definitions", OLD)
    assert watched_files(registry_dir, tmp_path / "config") == first
    # The directory's mtime moved: listed again.
    stamp(registry_dir / "definitions", OLD + 1)
    assert names(watched_files(registry_dir, tmp_path / "config"))[:3] == [
        "registry/definitions/a@1.json", "registry/definitions/b@1.json", "registry/edges.json",
    ]


def test_a_directory_changed_within_the_trust_window_is_listed_every_time(tmp_path):
    registry_dir = make_registry(tmp_path)
    recent = time.time_ns() - int(LISTING_TRUST_SECONDS * 1e9) // 2
    stamp(registry_dir, OLD)
    stamp(registry_dir / "definitions", recent)
    watched_files(registry_dir, tmp_path / "config")
    (registry_dir / "definitions" / "b@1.json").write_text("{}")
    stamp(registry_dir / "definitions", recent)  # the same mtime: only its age says "list again"
    assert "registry/definitions/b@1.json" in names(watched_files(registry_dir, tmp_path / "config"))


def test_a_removed_directory_is_listed_again(tmp_path):
    registry_dir = make_registry(tmp_path)
    for directory in (registry_dir, registry_dir / "definitions"):
        stamp(directory, OLD)
    watched_files(registry_dir, tmp_path / "config")
    (registry_dir / "definitions" / "a@1.json").unlink()
    (registry_dir / "definitions").rmdir()
    stamp(registry_dir, OLD)
    assert names(watched_files(registry_dir, tmp_path / "config")) == [
        "registry/edges.json", "config/schedule.yaml", "config/repos.yaml",
    ]
    assert importlib.import_module("runtime.registry.store")._listings[str(registry_dir)][0] == ((str(registry_dir), OLD),)
