"""A keyed declaration that cannot work is a load error (docs/design.md §6)."""

import pytest

from runtime.registry import RegistryInvalid, load_registry


def errors(files):
    with pytest.raises(RegistryInvalid) as raised:
        load_registry(files.registry_dir, files.config_dir)
    return [str(e) for e in raised.value.errors]


def set_keyed(files, **keyed):
    files.update("schedules.json", lambda loops: loops["customer-digest"].__setitem__("keyed", keyed))


def test_keyed_load_errors(registry_files):
    entry = "registry/schedules.json: customer-digest"
    set_keyed(registry_files, setBy={"customer.chose": {"key": "/payload/customer", "every": "/payload/every"}},
              clearedBy={"customer.left": {"key": "/payload/customer"}})
    assert errors(registry_files) == [
        f"{entry}: keyed_unregistered_type: keyed.setBy: 'customer.chose' is not in event-types.json",
        f"{entry}: keyed_unregistered_type: keyed.clearedBy: 'customer.left' is not in event-types.json",
    ]
    set_keyed(registry_files, setBy={"customer.unsubscribed": {"key": "/payload/customer", "at": "/payload/at"}})
    assert errors(registry_files) == [
        f"{entry}: keyed_rule: keyed.setBy.customer.unsubscribed: at needs a timezone pointer, and timezone belongs to at",
    ]
    set_keyed(registry_files, setBy={"customer.unsubscribed": {"key": "/payload/customer", "every": "/a", "once": "/b"}})
    assert errors(registry_files) == [
        f"{entry}: keyed_rule: keyed.setBy.customer.unsubscribed: point at exactly one of at, every, once (found every, once)",
    ]
    set_keyed(registry_files, setBy={}, clearedBy={"customer.unsubscribed": {"key": "/payload/customer"}})
    assert errors(registry_files) == [
        f"{entry}: never_ticks: nothing can ever tick this loop: give every, at with timezone, or keyed with at least one setBy type",
    ]


def test_a_keyed_loop_with_its_own_cadence_is_a_load_error(registry_files):
    registry_files.update("schedules.json", lambda loops: loops["customer-digest"].__setitem__("every", "1d"))
    assert errors(registry_files) == [
        "registry/schedules.json: customer-digest: cadence_conflict: give one of every, at or keyed, not every and keyed: "
        "a keyed loop takes each key's rule from its setting events",
    ]
