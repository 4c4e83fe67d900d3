"""The real-process tests' runtime: its own directories and database, its processes killed after the test."""

import pytest

from tests.processes import ProcessRuntime


@pytest.fixture
def runtime(tmp_path):
    process_runtime = ProcessRuntime(tmp_path / "proc")
    yield process_runtime
    process_runtime.close()
