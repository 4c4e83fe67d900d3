"""Registry validation, fail closed, each rule with its exact error (docs/design.md §4)."""

import errno
import importlib
import json
import os
import time
import types

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from tests.registry_checks import errors, load, set_loop

REAPER_SPEC_ENTRY = {
    "every": "60m", "eventType": "clock.tick.reaper", "catchUp": "none",
    "singleton": True, "approval": "watched", "enabled": False,
}


def test_the_kernel_ships_the_specification_reaper_entry_verbatim(registry_files):
    assert registry_files.read("schedules.json")["reaper"] == REAPER_SPEC_ENTRY
    reaper = registry_files.read("definitions/reaper@1.json")
    assert reaper["mutating"] is True and "--apply" in reaper["command"]
    heartbeat = load(registry_files).loops["heartbeat"]
    assert (heartbeat.every, heartbeat.event_type, heartbeat.approval, heartbeat.enabled, heartbeat.singleton,
            heartbeat.catch_up, heartbeat.source) == ("5m", "clock.tick.heartbeat", "auto", True, True, "none", "kernel")


@pytest.mark.parametrize("every", ["60x", "0m", "1.5h", "60", " 5m", "5 m", "-5m"])
def test_an_unparseable_every_is_a_load_error(registry_files, every):
    set_loop(registry_files, "reaper", every=every)
    assert errors(registry_files) == [
        f"registry/schedules.json: reaper: unparseable_every: {every!r} is not a cadence: write a positive "
        "integer and one of s, m, h, d (e.g. 90s, 60m, 4h, 7d)"
    ]


def test_an_unregistered_event_type_is_a_load_error(registry_files):
    set_loop(registry_files, "reaper", eventType="clock.tick.nobody")
    assert errors(registry_files) == [
        "registry/schedules.json: reaper: unregistered_event_type: 'clock.tick.nobody' is not in event-types.json"
    ]


def test_unknown_keys_are_errors_a_typo_never_disables_a_rule(registry_files):
    set_loop(registry_files, "reaper", enabeld=True)
    assert errors(registry_files) == [
        "registry/schedules.json: reaper: schema: at reaper: Additional properties are not allowed ('enabeld' was unexpected)"
    ]


def test_auto_needs_enabled_true_in_the_same_declaration(registry_files):
    set_loop(registry_files, "reaper", approval="auto")
    assert "registry/schedules.json: reaper: auto_requires_enabled: approval auto must be declared with enabled: true in the same entry" in errors(registry_files)


def test_auto_on_a_human_approval_only_type_is_a_load_error(registry_files):
    registry_files.update("event-types.json", lambda t: t["clock.tick.heartbeat"].__setitem__("humanApprovalOnly", True))
    assert errors(registry_files) == [
        "registry/schedules.json: heartbeat: auto_on_human_only: clock.tick.heartbeat is humanApprovalOnly"
    ]


def test_catch_up_outside_the_policies_and_all_with_singleton_are_load_errors(registry_files):
    set_loop(registry_files, "reaper", catchUp="sometimes")
    assert errors(registry_files) == ["registry/schedules.json: reaper: invalid_catch_up: catchUp 'sometimes' is not none, last or all"]
    set_loop(registry_files, "reaper", catchUp="all")
    assert errors(registry_files) == [
        "registry/schedules.json: reaper: catch_up_all_singleton: catchUp all fires every missed slot, and a singleton loop would NOOP all but one"
    ]


def test_a_missing_target_definition_is_a_load_error(registry_files):
    registry_files.update("event-types.json", lambda t: t["clock.tick.reaper"].__setitem__("target", "reaper@9"))
    assert "registry/event-types.json: clock.tick.reaper: missing_definition: target reaper@9 has no file in definitions/" in errors(registry_files)


def test_an_edge_to_an_unregistered_type_is_a_load_error(registry_files):
    registry_files.write("edges.json", [{"from": "reaper@1", "outcome": "REAPED", "emit": [{"type": "nobody.listens", "payload": {}}]}])
    assert errors(registry_files) == [
        "registry/edges.json: [0] reaper@1 REAPED: edge_unregistered_type: event type 'nobody.listens' is not registered"
    ]


def test_a_loop_whose_sample_tick_fails_the_input_schema_is_a_load_error(registry_files):
    set_loop(registry_files, "reaper", payload={"repo": "hello"})
    assert errors(registry_files) == [
        "registry/schedules.json: reaper: sample_tick_invalid: a tick of this loop fails the payload schema of "
        "clock.tick.reaper at <top>: Additional properties are not allowed ('repo' was unexpected)"
    ]


def test_a_mutating_command_must_be_a_closed_template(registry_files):
    registry_files.update("definitions/reaper@1.json", lambda d: d["command"].append("--ticket={payload.ticket}"))
    assert errors(registry_files) == [
        "registry/definitions/reaper@1.json: reaper@1: open_template: {payload.ticket} lets an event fill the argv "
        "of a mutating command; a mutating command must be a closed template (spec §7)"
    ]


def test_a_scheduled_agent_needs_allow_scheduled(registry_files):
    registry_files.update("definitions/reaper@1.json", lambda d: (
        d.__setitem__("adapter", "agent"), d.pop("command"), d.pop("preview"), d.pop("previewTimeoutSeconds")))
    assert errors(registry_files) == [
        "registry/schedules.json: reaper: agent_not_schedulable: reaper@1 is an agent without allowScheduled: true (spec §7)"
    ]


def test_type_auto_only_for_read_only_targets(registry_files):
    registry_files.update("event-types.json", lambda t: t["clock.tick.reaper"].__setitem__("approval", "auto"))
    assert errors(registry_files) == [
        "registry/event-types.json: clock.tick.reaper: auto_on_mutating_target: approval auto is only for read-only targets; reaper@1 is mutating"
    ]


def test_invalid_json_names_the_file(registry_files):
    (registry_files.registry_dir / "edges.json").write_text("[")
    assert errors(registry_files) == ["registry/edges.json: <file>: invalid_json: Expecting value: line 1 column 2 (char 1)"]


def test_errors_are_all_reported_together(registry_files):
    set_loop(registry_files, "reaper", every="never")
    registry_files.update("event-types.json", lambda t: t["clock.tick.heartbeat"].__setitem__("approvl", "auto"))
    assert len(errors(registry_files)) == 2


# --- the overlay --------------------------------------------------------------------------

def test_the_overlay_may_enable_change_every_and_payload_and_reports_it(registry_files):
    registry_files.write_config("schedule.yaml", "schedules:\n  reaper:\n    enabled: true\n    every: 1m\n")
    reaper = load(registry_files).loops["reaper"]
    assert (reaper.enabled, reaper.every, reaper.cadence_seconds, reaper.source, reaper.overrides) == (
        True, "1m", 60, "kernel", ("enabled", "every")
    )


@pytest.mark.parametrize("field,value", [("approval", "auto"), ("eventType", "clock.tick.heartbeat"), ("singleton", "false"), ("catchUp", "last")])
def test_the_overlay_may_not_change_pinned_fields(registry_files, field, value):
    registry_files.write_config("schedule.yaml", f"schedules:\n  reaper:\n    {field}: {value}\n")
    assert errors(registry_files) == [
        f"{registry_files.config_dir / 'schedule.yaml'}: reaper: overlay_forbidden_override: the overlay may change "
        f"only enabled, every, payload of a kernel loop; {field} stays pinned in the tracked registry"
    ]


def test_the_overlay_names_every_pinned_field_it_tried_to_change(registry_files):
    registry_files.write_config("schedule.yaml", "schedules:\n  reaper:\n    approval: auto\n    catchUp: last\n")
    assert errors(registry_files) == [
        f"{registry_files.config_dir / 'schedule.yaml'}: reaper: overlay_forbidden_override: the overlay may change "
        f"only enabled, every, payload of a kernel loop; approval, catchUp stay pinned in the tracked registry"
    ]


def test_a_new_overlay_loop_must_be_complete_and_never_auto(registry_files):
    overlay = registry_files.config_dir / "schedule.yaml"
    registry_files.write_config("schedule.yaml", "schedules:\n  nightly:\n    every: 1d\n    eventType: clock.tick.heartbeat\n")
    assert errors(registry_files) == [f"{overlay}: nightly: overlay_incomplete: a new overlay loop must declare catchUp, singleton, enabled"]
    registry_files.write_config(
        "schedule.yaml",
        "schedules:\n  nightly:\n    every: 1d\n    eventType: clock.tick.heartbeat\n    catchUp: none\n"
        "    singleton: true\n    enabled: true\n    approval: auto\n",
    )
    assert errors(registry_files) == [f"{overlay}: nightly: overlay_auto: approval auto is a tracked registry declaration, never local configuration"]


def test_the_overlay_may_disable_an_auto_loop_and_add_a_watched_one(registry_files):
    registry_files.write_config(
        "schedule.yaml",
        "schedules:\n  heartbeat:\n    enabled: false\n  nightly:\n    every: 1d\n    eventType: clock.tick.heartbeat\n"
        "    catchUp: none\n    singleton: true\n    enabled: true\n",
    )
    loops = load(registry_files).loops
    assert (loops["heartbeat"].enabled, loops["heartbeat"].overrides) == (False, ("enabled",))
    assert (loops["nightly"].source, loops["nightly"].approval, loops["nightly"].overrides) == ("overlay", "watched", ())


def test_an_unknown_overlay_key_and_bad_yaml_are_errors(registry_files):
    overlay = registry_files.config_dir / "schedule.yaml"
    registry_files.write_config("schedule.yaml", "schedule:\n  reaper:\n    enabled: true\n")
    assert errors(registry_files) == [f"{overlay}: <top>: schema: at <top>: Additional properties are not allowed ('schedule' was unexpected)"]
    registry_files.write_config("schedule.yaml", "schedules: [unclosed\n")
    assert errors(registry_files)[0].startswith(f"{overlay}: <file>: invalid_yaml:")


def test_the_digest_covers_the_kernel_and_never_the_overlay(registry_files):
    before = load(registry_files).digest
    registry_files.write_config("schedule.yaml", "schedules:\n  reaper:\n    enabled: true\n")
    assert load(registry_files).digest == before
    set_loop(registry_files, "reaper", every="30m")
    assert load(registry_files).digest != before


def test_registry_commands_and_the_system_check(registry_files, capsys):
    call_command("registry", "digest")
    assert capsys.readouterr().out.strip() == load(registry_files).digest
    set_loop(registry_files, "reaper", every="never")
    with pytest.raises(SystemExit) as exited:
        call_command("registry", "check")
    assert exited.value.code == 1
    assert "registry/schedules.json: reaper: unparseable_every:" in capsys.readouterr().err
    with pytest.raises(SystemCheckError, match="runtime.E001"):
        call_command("check")


def test_the_shipped_example_overlay_is_valid(registry_files):
    example = (settings.BASE_DIR / "config" / "schedule.example.yaml").read_text()
    registry_files.write_config("schedule.yaml", example)
    reaper = load(registry_files).loops["reaper"]
    assert (reaper.enabled, reaper.every, reaper.approval) == (True, "1m", "watched")
    json.dumps(reaper.payload)


def test_out_of_range_knobs_fail_the_system_check(settings):
    settings.FACTORY_LEASE_SECONDS = 1
    with pytest.raises(SystemCheckError, match=r"runtime.E003.*FACTORY_LEASE_SECONDS=1 is below 2"):
        call_command("check")


def test_a_running_process_sees_a_changed_registry_and_keeps_the_last_good_one(registry_files, monkeypatch):
    from runtime.registry import get_registry, store

    monkeypatch.setattr(importlib.import_module("runtime.registry.store"), "CHANGE_CHECK_SECONDS", 0)
    assert "reaper" in get_registry().loops
    (registry_files.config_dir / "schedule.yaml").write_text("schedules:\n  reaper:\n    enabled: true\n    every: 1m\n")
    assert get_registry().loops["reaper"].every == "1m"
    (registry_files.config_dir / "schedule.yaml").write_text("schedules:\n  reaper:\n    enabeld: true\n")
    assert get_registry().loops["reaper"].every == "1m"
    assert [e.rule for e in store.problems()] == ["schema"]


def test_get_registry_looks_at_the_files_at_most_once_a_second(registry_files, monkeypatch):
    from runtime.registry import get_registry

    store_module = importlib.import_module("runtime.registry.store")
    clock = [100.0]
    monkeypatch.setattr(store_module, "time", types.SimpleNamespace(monotonic=lambda: clock[0], time_ns=time.time_ns))
    looks = []
    real = store_module.watched_files
    monkeypatch.setattr(store_module, "watched_files", lambda *dirs: looks.append(clock[0]) or real(*dirs))
    overlay = registry_files.config_dir / "schedule.yaml"
    assert get_registry().loops["reaper"].every == "60m"
    overlay.write_text("schedules:\n  reaper:\n    every: 1m\n")
    clock[0] = 100.9
    assert [get_registry().loops["reaper"].every for _ in range(50)] == ["60m"] * 50
    clock[0] = 101.0
    assert get_registry().loops["reaper"].every == "1m"
    assert looks == [100.0, 101.0]


def test_a_bad_value_written_in_the_overlay_is_reported_against_the_overlay(registry_files):
    overlay = registry_files.config_dir / "schedule.yaml"
    registry_files.write_config("schedule.yaml", "schedules:\n  reaper:\n    every: 1x\n")
    assert errors(registry_files) == [
        f"{overlay}: reaper: unparseable_every: '1x' is not a cadence: write a positive integer and one of s, m, h, d "
        "(e.g. 90s, 60m, 4h, 7d)"
    ]
    registry_files.write_config("schedule.yaml", "schedules:\n  reaper:\n    payload:\n      stray: 1\n")
    assert errors(registry_files)[0].startswith(f"{overlay}: reaper: sample_tick_invalid: ")


def test_a_key_twice_in_the_overlay_is_an_error_not_a_silent_override(registry_files):
    overlay = registry_files.config_dir / "schedule.yaml"
    registry_files.write_config("schedule.yaml", "schedules:\n  reaper:\n    enabled: true\nschedules:\n  heartbeat:\n    enabled: false\n")
    (error,) = errors(registry_files)
    assert error.startswith(f"{overlay}: <file>: invalid_yaml: while constructing a mapping")
    assert "found the key 'schedules' twice" in error


def test_an_unquoted_wall_time_is_the_time_it_looks_like(registry_files):
    registry_files.write_config(
        "schedule.yaml",
        "schedules:\n  nightly:\n    at: 12:00\n    timezone: Europe/Budapest\n    eventType: clock.tick.heartbeat\n"
        "    catchUp: none\n    singleton: true\n    enabled: true\n",
    )
    assert load(registry_files).loops["nightly"].at == "12:00"


def test_files_that_are_not_utf8_are_load_errors_and_the_last_good_registry_stays(registry_files):
    from runtime.registry import store

    registry_files.write_config("schedule.yaml", "schedules:\n  reaper:\n    enabled: true\n")
    store.refresh()
    good = store.current()
    overlay = registry_files.config_dir / "schedule.yaml"
    overlay.write_bytes(b"schedules:\n  reaper:\n    enabled: true # caf\xe9\n")
    assert errors(registry_files) == [f"{overlay}: <file>: invalid_yaml: the file is not UTF-8: byte 0xe9 at offset 44"]
    store.refresh()  # what the slot loop does each second: no exception, the last good stays
    assert store.current() is good and good.loops["reaper"].enabled
    definition = registry_files.registry_dir / "definitions" / "reaper@1.json"
    registry_files.write_config("schedule.yaml", "")
    definition.write_bytes(b"\xff\xfe{}")
    assert errors(registry_files) == [
        "registry/definitions/reaper@1.json: <file>: invalid_json: the file is not UTF-8: byte 0xff at offset 0"
    ]


@pytest.mark.parametrize("make", ["directory", "fifo", "symlink loop"])
def test_a_config_path_that_cannot_be_read_is_a_load_error_and_the_last_good_registry_stays(registry_files, make):
    from runtime.registry import store
    from runtime.registry.files import snapshot

    registry_files.write_config("schedule.yaml", "schedules:\n  reaper:\n    enabled: true\n")
    store.refresh()
    good = store.current()
    overlay = registry_files.config_dir / "schedule.yaml"
    overlay.unlink()
    {"directory": overlay.mkdir, "fifo": lambda: os.mkfifo(overlay), "symlink loop": lambda: overlay.symlink_to(overlay)}[make]()
    detail = "Too many levels of symbolic links" if make == "symlink loop" else (
        "not a regular file (a directory, a FIFO or a device)")
    assert errors(registry_files) == [f"{overlay}: <file>: unreadable_file: the file cannot be read: {detail}"]
    looked = snapshot([str(overlay)])[0]  # the change check each second
    if make == "symlink loop":
        assert looked == (str(overlay), "unreadable", errno.ELOOP)
    else:
        assert looked[0] == str(overlay) and isinstance(looked[1], int)
    store.refresh()  # what the slot loop and the workers do each second: no exception, the last good stays
    assert store.current() is good and good.loops["reaper"].enabled


def test_a_process_starts_from_its_supervisors_registry_while_the_files_are_the_ones_it_came_from(
    registry_files, monkeypatch, tmp_path,
):
    from runtime.registry.store import SHARED_VARIABLE, store

    store_module = importlib.import_module("runtime.registry.store")
    registry_files.write_config("schedule.yaml", "schedules:\n  reaper:\n    every: 1m\n")
    supervisor = store.current()
    shared = tmp_path / "registry.pickle"
    store.share(shared)
    assert oct(shared.stat().st_mode & 0o777) == "0o600"
    monkeypatch.setenv(SHARED_VARIABLE, str(shared))
    loads = []
    real = store_module.load_registry
    monkeypatch.setattr(store_module, "load_registry", lambda *dirs: loads.append(dirs) or real(*dirs))

    store.reset()  # a child process: nothing loaded yet
    child = store.current()
    assert (child.digest, child.loops["reaper"].every, loads) == (supervisor.digest, "1m", [])

    store.reset()
    registry_files.write_config("schedule.yaml", "schedules:\n  reaper:\n    every: 2m\n")
    assert store.current().loops["reaper"].every == "2m"  # other files: loaded from them
    assert len(loads) == 1

    store.reset()
    shared.write_bytes(b"not a pickle")
    assert store.current().loops["reaper"].every == "2m"
    assert len(loads) == 2


def shared_setup(registry_files, monkeypatch, shared):
    """The supervisor's registry pickled aside (``share``), ``SHARED_VARIABLE`` naming ``shared``,
    the store reset as in a new child, and the list of the child's loads from the files."""
    from runtime.registry.store import SHARED_VARIABLE, store

    store_module = importlib.import_module("runtime.registry.store")
    supervisor = store.current()
    store.share(shared.parent.parent / "aside.pickle")
    monkeypatch.setenv(SHARED_VARIABLE, str(shared))
    loads = []
    real = store_module.load_registry
    monkeypatch.setattr(store_module, "load_registry", lambda *dirs: loads.append(dirs) or real(*dirs))
    store.reset()
    return supervisor, loads


def test_a_child_started_before_its_supervisor_shared_the_registry_waits_for_it(registry_files, monkeypatch, tmp_path):
    import threading

    from runtime.registry.store import store

    (tmp_path / "private").mkdir()
    shared = tmp_path / "private" / "registry.pickle"
    supervisor, loads = shared_setup(registry_files, monkeypatch, shared)
    started = time.monotonic()
    threading.Timer(0.3, lambda: (tmp_path / "aside.pickle").rename(shared)).start()
    child = store.current()
    assert (child.digest, loads) == (supervisor.digest, [])
    assert time.monotonic() - started >= 0.3


@pytest.mark.parametrize("case", ["directory removed", "supervisor gone"])
def test_a_child_does_not_wait_for_a_supervisor_that_is_gone(registry_files, monkeypatch, tmp_path, case):
    import os

    from lib.processes import SUPERVISOR_PID_VARIABLE
    from runtime.registry.store import store

    (tmp_path / "private").mkdir()
    shared = tmp_path / "private" / "registry.pickle"
    supervisor, loads = shared_setup(registry_files, monkeypatch, shared)
    if case == "directory removed":
        (tmp_path / "private").rmdir()
    else:
        monkeypatch.setenv(SUPERVISOR_PID_VARIABLE, str(os.getppid() + 1))
    started = time.monotonic()
    assert store.current().digest == supervisor.digest
    assert (len(loads), time.monotonic() - started < 5) == (1, True)


def test_the_registry_in_force_follows_the_directories_the_settings_name(registry_files, settings, tmp_path):
    from runtime.registry import store

    kernel = store.current()
    assert store.current() is kernel and kernel.loops["reaper"].every == "60m"
    other = tmp_path / "other-config"
    other.mkdir()
    (other / "schedule.yaml").write_text("schedules:\n  reaper:\n    every: 2m\n")
    settings.FACTORY_CONFIG_DIR = other  # no reset: the store sees the settings name other files
    moved = store.current()
    assert moved is not kernel and moved.loops["reaper"].every == "2m"
    assert store.current() is moved
