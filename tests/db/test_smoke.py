import pytest

from runtime.registry import get_registry


@pytest.mark.django_db
def test_kernel_registry_loads():
    assert set(get_registry().loops) == {"customer-digest", "heartbeat", "reaper"}
