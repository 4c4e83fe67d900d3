"""The copy of the shared fixtures in tests/fixtures/ is byte for byte the shared one."""

import pytest

from tests.conftest import SHARED_FIXTURES_DIR, VENDORED_FIXTURES_DIR


def files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.skipif(not SHARED_FIXTURES_DIR.is_dir(), reason="no shared fixtures beside this checkout")
def test_the_vendored_fixtures_equal_the_shared_ones():
    assert files(VENDORED_FIXTURES_DIR) == files(SHARED_FIXTURES_DIR)


def test_the_vendored_fixtures_exist():
    assert (VENDORED_FIXTURES_DIR / "github" / "pull_request.opened.json").is_file()
