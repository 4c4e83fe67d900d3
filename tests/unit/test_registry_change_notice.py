"""The slot loop's registry check: the files are looked at only when the kernel reports a change
(inotify), at least every LOOK_ANYWAY_SECONDS, and every time where no notice can be had
(runtime/registry/change_notice.py; docs/design.md §4)."""

import errno
import importlib
import os

import pytest

from runtime.registry import store

store_module = importlib.import_module("runtime.registry.store")
notice_module = importlib.import_module("runtime.registry.change_notice")


@pytest.fixture
def looks(monkeypatch):
    """The looks at the files (``watched_files`` calls) the store makes, as a list of their registry dirs."""
    made = []
    real = store_module.watched_files
    monkeypatch.setattr(store_module, "watched_files", lambda *dirs: made.append(str(dirs[0])) or real(*dirs))
    return made


def own_copy(registry_files) -> None:
    """The test's own copy of the kernel and config directory, in force (``RegistryFiles``)."""
    assert registry_files.config_dir.is_dir()


def settle(registry_files) -> None:
    """The store's registry loaded and its watches in place, as after a slot loop's first seconds."""
    own_copy(registry_files)
    store.refresh()  # the watches are new: this look may have missed a change
    store.refresh()  # the look that the new watches cover


def test_an_unchanged_registry_is_not_looked_at_again(registry_files, looks):
    settle(registry_files)
    looks.clear()
    assert [store.refresh() for _ in range(20)] == [False] * 20
    assert looks == []


def test_the_first_look_is_repeated_once_as_its_watches_were_new(registry_files, looks):
    own_copy(registry_files)
    looks.clear()
    store.refresh(), store.refresh(), store.refresh()
    assert looks == [str(registry_files.registry_dir)] * 2


def test_an_overlay_written_in_place_is_seen_at_the_next_refresh(registry_files, looks):
    settle(registry_files)
    (registry_files.config_dir / "schedule.yaml").write_text("schedules:\n  reaper:\n    every: 1m\n")
    assert store.refresh() is True
    assert store.current().loops["reaper"].every == "1m"
    assert store.refresh() is False


def test_a_definition_replaced_by_rename_is_seen(registry_files):
    settle(registry_files)
    definition = registry_files.registry_dir / "definitions" / "reaper@1.json"
    aside = definition.with_suffix(".tmp")
    aside.write_text(definition.read_text().replace('"timeoutSeconds": 600', '"timeoutSeconds": 300'))
    os.replace(aside, definition)
    assert store.refresh() is True
    assert store.current().definitions["reaper@1"].timeout_seconds == 300


def test_a_file_only_touched_is_looked_at_and_changes_nothing(registry_files, looks):
    settle(registry_files)
    looks.clear()
    before = store.current()
    os.utime(registry_files.registry_dir / "schedules.json")
    store.refresh()
    assert looks == [str(registry_files.registry_dir)]
    assert store.current() == before


def test_a_new_subdirectory_of_the_registry_is_watched_after_its_first_look(registry_files, looks):
    settle(registry_files)
    extra = registry_files.registry_dir / "schemas" / "extra"
    extra.mkdir()
    store.refresh()
    looks.clear()
    (extra / "note.json").write_text("{}")
    store.refresh()
    assert looks == [str(registry_files.registry_dir)]


def test_an_overlay_kept_elsewhere_and_linked_in_is_watched_where_it_is(registry_files, tmp_path):
    elsewhere = tmp_path / "etc-factory"
    elsewhere.mkdir()
    (elsewhere / "schedule.yaml").write_text("schedules:\n  reaper:\n    every: 2m\n")
    (registry_files.config_dir / "schedule.yaml").symlink_to(elsewhere / "schedule.yaml")
    settle(registry_files)
    assert store.current().loops["reaper"].every == "2m"
    (elsewhere / "schedule.yaml").write_text("schedules:\n  reaper:\n    every: 3m\n")
    assert store.refresh() is True
    assert store.current().loops["reaper"].every == "3m"


def test_a_config_directory_swapped_by_a_symlink_is_seen(registry_files, settings, tmp_path):
    releases = tmp_path / "releases"
    for name, every in (("one", "4m"), ("two", "5m")):
        (releases / name).mkdir(parents=True)
        (releases / name / "schedule.yaml").write_text(f"schedules:\n  reaper:\n    every: {every}\n")
    current = tmp_path / "deploy" / "config"
    current.parent.mkdir()
    current.symlink_to(releases / "one")
    own_copy(registry_files)
    settings.FACTORY_CONFIG_DIR = current
    store.reset()
    settle(registry_files)
    assert store.current().loops["reaper"].every == "4m"
    swap = current.with_name("config.new")
    swap.symlink_to(releases / "two")
    os.replace(swap, current)  # as `ln -sfn` through a rename: atomic
    assert store.refresh() is True
    assert store.current().loops["reaper"].every == "5m"


def test_the_files_are_looked_at_anyway_after_look_anyway_seconds(registry_files, looks, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(store_module.time, "monotonic", lambda: clock[0])
    settle(registry_files)
    looks.clear()
    clock[0] += notice_module.LOOK_ANYWAY_SECONDS - 0.1
    store.refresh()
    assert looks == []
    clock[0] += 0.1
    store.refresh()
    clock[0] += 1
    store.refresh()
    assert looks == [str(registry_files.registry_dir)]


def refreshed_without_watches(registry_files, looks, caplog, times: int) -> list[str]:
    """Refresh ``times`` times on the test's own copy; asserts each refresh looked, and returns
    the warnings logged that the notice is unavailable."""
    own_copy(registry_files)
    looks.clear()
    for _ in range(times):
        store.refresh()
    assert looks == [str(registry_files.registry_dir)] * times
    return [r.getMessage() for r in caplog.records if getattr(r, "action", "") == "registry_notice_unavailable"]


@pytest.mark.parametrize("failure", [OSError(errno.ENOSPC, "No space left on device"), AttributeError("inotify_init1")])
def test_without_inotify_every_refresh_looks_and_says_so_once(registry_files, looks, monkeypatch, caplog, failure):
    def unavailable():
        raise failure

    monkeypatch.setattr(notice_module, "INotify", unavailable)
    assert refreshed_without_watches(registry_files, looks, caplog, 5) == [
        f"registry changes are looked for at every refresh in this process: {failure}"
    ]


def test_a_watch_refused_for_a_passing_reason_is_tried_again_at_the_next_look(registry_files, looks, monkeypatch):
    real = notice_module.INotify
    refusals = [OSError(errno.ENOENT, "No such file or directory")]

    def sometimes():
        if refusals:
            raise refusals.pop()
        return real()

    monkeypatch.setattr(notice_module, "INotify", sometimes)
    own_copy(registry_files)
    looks.clear()
    store.refresh(), store.refresh(), store.refresh(), store.refresh()
    assert looks == [str(registry_files.registry_dir)] * 3  # refused, then the two looks of a new watch


def test_a_forked_process_does_not_trust_its_parents_watches(registry_files, looks, monkeypatch):
    settle(registry_files)
    looks.clear()
    monkeypatch.setattr(notice_module.os, "getpid", lambda: -1)
    store.refresh()
    assert looks == [str(registry_files.registry_dir)]


def test_other_directories_in_the_settings_are_looked_at(registry_files, looks, settings, tmp_path):
    settle(registry_files)
    looks.clear()
    other = tmp_path / "other-config"
    other.mkdir()
    (other / "schedule.yaml").write_text("schedules:\n  reaper:\n    every: 7m\n")
    settings.FACTORY_CONFIG_DIR = other
    assert store.refresh() is True
    assert store.current().loops["reaper"].every == "7m"


def test_a_file_replaced_by_one_of_the_same_size_and_modification_time_is_seen(registry_files, tmp_path):
    pinned = tmp_path / "pinned"
    pinned.mkdir()
    (pinned / "on.yaml").write_text("schedules:\n  reaper:\n    enabled: true \n    every: 1m\n")
    (pinned / "off.yaml").write_text("schedules:\n  reaper:\n    enabled: false\n    every: 1m\n")
    for name in ("on.yaml", "off.yaml"):
        os.utime(pinned / name, ns=(1_767_225_600_000_000_000, 1_767_225_600_000_000_000))
    overlay = registry_files.config_dir / "schedule.yaml"
    overlay.symlink_to(pinned / "on.yaml")
    settle(registry_files)
    assert store.current().loops["reaper"].enabled is True
    switch = overlay.with_name("schedule.new")
    switch.symlink_to(pinned / "off.yaml")
    os.replace(switch, overlay)
    assert store.refresh() is True
    assert store.current().loops["reaper"].enabled is False


def test_a_release_link_switched_outside_the_watched_directories_is_seen_at_once(registry_files, tmp_path):
    releases = tmp_path / "ext"
    for name, every in (("rel1", "4m"), ("rel2", "5m")):
        (releases / name).mkdir(parents=True)
        (releases / name / "schedule.yaml").write_text(f"schedules:\n  reaper:\n    every: {every}\n")
    (releases / "current").symlink_to("rel1")
    (releases / "cur.yaml").symlink_to(releases / "current" / "schedule.yaml")
    (registry_files.config_dir / "schedule.yaml").symlink_to(releases / "cur.yaml")
    settle(registry_files)
    assert store.current().loops["reaper"].every == "4m"
    switch = releases / "current.new"
    switch.symlink_to("rel2")
    os.replace(switch, releases / "current")  # ln -sfn rel2 current
    assert store.refresh() is True
    assert store.current().loops["reaper"].every == "5m"


def test_link_directories_names_each_directory_holding_a_link_on_the_way(tmp_path):
    (tmp_path / "releases" / "7" / "config").mkdir(parents=True)
    (tmp_path / "srv").mkdir()
    (tmp_path / "srv" / "app").symlink_to(tmp_path / "releases" / "7")
    (tmp_path / "releases" / "7" / "latest").symlink_to("config")
    assert notice_module.link_directories(str(tmp_path / "srv" / "app" / "latest" / "x.yaml")) == {
        str(tmp_path / "srv"), str(tmp_path / "releases" / "7")}
    assert notice_module.link_directories(str(tmp_path / "releases" / "7" / "config")) == set()
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    assert notice_module.link_directories(str(tmp_path / "loop" / "x")) == {str(tmp_path)}


def test_a_config_directory_removed_and_made_again_is_seen_without_a_warning(registry_files, looks, caplog):
    import shutil

    settle(registry_files)
    shutil.rmtree(registry_files.config_dir)
    store.refresh()
    looks.clear()
    assert [store.refresh() for _ in range(3)] == [False] * 3
    assert looks == []  # its parent's watch says nothing happened
    registry_files.config_dir.mkdir()
    (registry_files.config_dir / "schedule.yaml").write_text("schedules:\n  reaper:\n    every: 9m\n")
    store.refresh()
    assert store.current().loops["reaper"].every == "9m"
    assert [r for r in caplog.records if getattr(r, "action", "") == "registry_notice_unavailable"] == []


def test_a_watch_refused_again_and_again_is_said_once(registry_files, looks, monkeypatch, caplog):
    real = notice_module.INotify

    class Refusing(real):
        def add_watch(self, path, mask):
            raise OSError(errno.ENOENT, "No such file or directory")

    monkeypatch.setattr(notice_module, "INotify", Refusing)
    assert refreshed_without_watches(registry_files, looks, caplog, 4) == ["registry changes are looked for at every refresh in this process until a watch can be set: "
                        "[Errno 2] No such file or directory"]
