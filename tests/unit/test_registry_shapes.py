"""A large overlay loads fast and says the same (docs/design.md §4): its loop entries are checked
once per distinct entry and its sample ticks once per schema and payload shape."""

import json
from unittest import mock

from referencing import Registry, Resource

from lib.json_schema import Validator
from lib.strict_yaml import load_yaml
from runtime.registry.loader import Load
from tests.registry_checks import errors, load

ENTRY = "    eventType: clock.tick.reaper\n    every: 7m\n    catchUp: none\n    singleton: true\n    enabled: {enabled}\n"
BAD_OVERLAY = (
    "stray: 1\nschedules:\n"
    "  a-1:\n    evry: 5m\n    enabled: true\n"
    "  a-2:\n    evry: 5m\n    enabled: true\n"
    "  b-1:\n    enabled: 'yes'\n"
    "  reaper:\n    every: 1m\n"
)


def whole_document_errors(registry_files, data, meta_name: str, shown: str, entry_level: bool) -> list[str]:
    """The shape errors of ``data`` as one validation of the whole document finds them."""
    metas = registry_files.registry_dir / "schemas" / "meta"
    schemas = {p.name: json.loads(p.read_text()) for p in metas.glob("*.json")}
    registry = Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in schemas.values())
    validator = Validator(schemas[meta_name], registry=registry)
    found = []
    for e in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        parts = list(map(str, e.absolute_path))
        entry = parts[0] if entry_level and parts else "<top>"
        found.append(f"{shown}: {entry}: schema: at {'/'.join(parts) or '<top>'}: {e.message}")
    return found


def test_shared_bad_entries_get_the_errors_a_whole_document_check_gives(registry_files):
    registry_files.write_config("schedule.yaml", BAD_OVERLAY)
    overlay = registry_files.config_dir / "schedule.yaml"
    expected = whole_document_errors(registry_files, load_yaml(overlay.read_text()), "overlay.schema.json",
                                     str(overlay), entry_level=False)
    assert len(expected) == 4
    assert errors(registry_files) == expected


def test_shared_bad_kernel_loops_get_the_errors_a_whole_document_check_gives(registry_files):
    def change(loops):
        loops["x-1"] = loops["x-2"] = {"eventType": "clock.tick.reaper", "evry": "5m"}
        loops["x-3"] = {"eventType": 7}
        loops["repoLoops"]["merge-{repo}"]["stray"] = 1
    registry_files.update("schedules.json", change)
    data = registry_files.read("schedules.json")
    expected = whole_document_errors(registry_files, data, "schedules.schema.json", "registry/schedules.json",
                                     entry_level=True)
    assert len(expected) == 4
    assert [e for e in errors(registry_files) if ": schema: " in e] == expected


def test_a_thousand_loops_of_one_payload_shape_validate_one_sample_tick(registry_files):
    overlay = "schedules:\n" + "".join(f"  o-{i:04d}:\n" + ENTRY.format(enabled=str(i % 2 == 0).lower())
                                       for i in range(1000))
    registry_files.write_config("schedule.yaml", overlay)
    with mock.patch.object(Load, "first_error", autospec=True, side_effect=Load.first_error) as samples:
        registry = load(registry_files)
    assert len(registry.loops) == 1000 + 3
    # One sample for the thousand: the payload and input schemas are one file (clock-tick.json),
    # and the loops differ in name and enabled only; the kernel's loops have shapes of their own.
    assert [c.args[2]["loop"] for c in samples.call_args_list] == ["customer-digest", "heartbeat", "o-0000", "reaper"]
    assert {loop.every for name, loop in registry.loops.items() if name.startswith("o-")} == {"7m"}
