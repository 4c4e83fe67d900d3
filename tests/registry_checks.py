"""Loading the tests' registry copy (the ``registry_files`` fixture) and reading its errors."""

import pytest

from runtime.registry import RegistryInvalid, load_registry


def errors(files) -> list[str]:
    """The load errors of ``files``' registry and config, as text; fails the test when it loads."""
    with pytest.raises(RegistryInvalid) as raised:
        load_registry(files.registry_dir, files.config_dir)
    return [str(e) for e in raised.value.errors]


def load(files):
    """``files``' registry and config, loaded."""
    return load_registry(files.registry_dir, files.config_dir)


def set_loop(files, name, **entry):
    """Merge ``entry`` into the kernel loop ``name`` (created when missing)."""
    files.update("schedules.json", lambda loops: loops.__setitem__(name, {**loops.get(name, {}), **entry}))
