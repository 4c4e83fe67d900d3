"""The host-clock registry: the overlay's ``jobs:`` mapping, validated fail closed at load (docs/host-clock.md)."""

from pathlib import Path

import pytest

from runtime.registry import RegistryInvalid, get_registry
from tests.conftest import PROJECT_DIR

EXAMPLE = PROJECT_DIR / "config" / "factory-clocks.example.yaml"


def load_errors(registry_files, text: str) -> list[tuple[str, str]]:
    registry_files.write_config("schedule.yaml", text)
    with pytest.raises(RegistryInvalid) as info:
        get_registry()
    return [(e.entry, e.rule) for e in info.value.errors]


def test_the_factory_clocks_example_loads_with_the_spec_15_clocks(registry_files):
    registry_files.write_config("schedule.yaml", EXAMPLE.read_text())
    jobs = get_registry().jobs
    assert {name: (job.every, job.enabled, job.event_type) for name, job in jobs.items() if name in {
        "factory-triage", "factory-dispatch", "factory-merge", "factory-reaper"}} == {
        "factory-triage": ("24h", True, "factory.triage.requested"),
        "factory-dispatch": ("5m", False, "factory.work.requested"),
        "factory-merge": ("10m", False, "factory.merge.requested"),
        "factory-reaper": ("60m", False, "clock.tick.reaper"),
    }
    assert {job.event_type for job in jobs.values()} == {
        "factory.triage.requested", "factory.work.requested", "factory.merge.requested", "clock.tick.reaper",
        "factory.unblock.requested", "factory.label-guard.requested", "factory.warm.requested",
        "factory.reconcile.requested", "factory.unblock-digest.requested", "factory.janitor-scan.requested",
    }
    assert jobs["factory-reaper"].gate_command is None
    assert jobs["factory-warm"].at == "06:00" and jobs["factory-warm"].days == ("mon", "tue", "wed", "thu", "fri")


def test_every_command_of_the_example_names_a_script_bundled_in_the_example_factory_root(registry_files, settings):
    registry_files.write_config("schedule.yaml", EXAMPLE.read_text())
    jobs = get_registry().jobs
    # The loop below checks something only if the example has commands: these are its jobs with each.
    assert sorted(name for name, job in jobs.items() if job.gate_command) == [
        "factory-dispatch", "factory-merge", "factory-triage", "factory-unblock", "factory-unblock-digest",
    ]
    assert sorted(name for name, job in jobs.items() if job.dry_command) == [
        "factory-dispatch", "factory-label-guard", "factory-merge", "factory-reaper", "factory-reconcile",
        "factory-triage", "factory-unblock",
    ]
    for job in jobs.values():
        for argv in filter(None, (job.gate_command, job.dry_command)):
            script = argv[1].replace("{factoryRoot}", str(settings.FACTORY_ROOT))
            assert argv[0] == "{python}" and Path(script).is_file(), (job.name, argv)


def test_a_job_whose_event_type_is_not_registered_is_a_load_error(registry_files):
    errors = load_errors(registry_files, "jobs:\n  factory-retro:\n    every: 24h\n    enabled: false\n"
                                         "    eventType: factory.retro.requested\n")
    assert errors == [("jobs/factory-retro", "unregistered_event_type")]


@pytest.mark.parametrize(("entry", "rule"), [
    ("every: 5m\n    at: '09:00'\n    timezone: UTC", "job_cadence"),
    ("timezone: UTC", "job_cadence"),
    ("at: '09:00'", "job_cadence"),
    ("every: 5x", "unparseable_every"),
    ("at: '09:00'\n    timezone: Mars/Olympus", "unknown_timezone"),
    ("every: 5m\n    gate_command: ['{payload.repo}']", "unknown_placeholder"),
    ("every: 5m\n    dry_command: ['{runDir}/x']", "unknown_placeholder"),
    ("every: 5m\n    payload: {repo: hello, slot: x}", "job_payload_reserved"),
    ("every: 5m\n    payload: {}", "sample_event_invalid"),
    ("every: 5m\n    enabeld: true", "schema"),
    ("every: 5m\n    gate_command: 'tickets.py --gate triage'", "schema"),
])
def test_a_bad_job_fails_the_load_with_its_rule(registry_files, entry, rule):
    text = f"jobs:\n  work-hello:\n    enabled: true\n    eventType: factory.work.requested\n    {entry}\n"
    if "payload" not in entry:
        text += "    payload: {repo: hello}\n"
    assert rule in {r for _, r in load_errors(registry_files, text)}


def test_a_job_name_follows_the_loop_grammar(registry_files):
    errors = load_errors(registry_files, "jobs:\n  Bad_Name:\n    every: 5m\n    enabled: true\n"
                                         "    eventType: factory.work.requested\n    payload: {repo: hello}\n")
    assert errors == [("jobs/Bad_Name", "invalid_job_name")]


def test_a_registry_without_jobs_has_none_and_loops_are_unaffected(registry_files):
    registry_files.write_config("schedule.yaml", "schedules:\n  reaper:\n    enabled: true\n")
    registry = get_registry()
    assert registry.jobs == {} and registry.loops["reaper"].enabled
