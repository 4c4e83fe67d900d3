"""The dashboard's order, problems first, sliced without sorting every loop (``ops.web.dashboard.RankedNames``; docs/web.md)."""

from django.core.paginator import Paginator

from ops.web.dashboard import RankedNames

ENABLED = tuple(f"loop-{i:03d}" for i in range(120))
DISABLED = ("off-a", "off-b", "off-c")


def test_the_problems_come_first_then_the_enabled_by_name_then_the_disabled():
    names = RankedNames(["loop-050", "loop-007"], ENABLED, DISABLED)
    assert len(names) == 123
    assert names[0:5] == ["loop-050", "loop-007", "loop-000", "loop-001", "loop-002"]
    assert names[50:53] == ["loop-049", "loop-051", "loop-052"]  # loop-050 is not shown twice
    assert names[118:123] == ["loop-118", "loop-119", "off-a", "off-b", "off-c"]


def test_the_paginator_pages_it_as_a_list_of_the_same_names():
    problems = ["loop-119", "loop-003"]
    listed = problems + [name for name in ENABLED if name not in problems] + list(DISABLED)
    pages = Paginator(RankedNames(problems, ENABLED, DISABLED), 50)
    assert (pages.count, pages.num_pages) == (123, 3)
    assert [list(pages.page(n)) for n in (1, 2, 3)] == [listed[0:50], listed[50:100], listed[100:123]]
