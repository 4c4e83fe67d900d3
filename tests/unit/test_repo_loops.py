"""Repo loops: ``repoLoops`` templates expanded per repo of ``config/repos.yaml`` (docs/design.md §4).

Their ticks are ``db/test_repo_loop_ticks.py``.
"""

import pytest

from runtime.registry import RegistryInvalid, get_registry


def rules(exc: RegistryInvalid) -> set[tuple[str, str]]:
    return {(e.entry, e.rule) for e in exc.errors}


def test_templates_expand_for_every_repo_that_is_not_report_only(repos):
    loops = get_registry().loops
    assert sorted(loops) == [
        "customer-digest", "heartbeat", "merge-factory", "merge-hello", "reaper",
        "ship-factory", "ship-hello", "work-factory", "work-hello",
    ]
    assert not [name for name in loops if name.endswith("-notes")]


def test_no_repos_file_means_no_repo_loops():
    assert sorted(get_registry().loops) == ["customer-digest", "heartbeat", "reaper"]


def test_expanded_loops_follow_their_template(repos):
    loops = get_registry().loops
    work, merge, ship = loops["work-hello"], loops["merge-hello"], loops["ship-hello"]
    assert (work.every, work.event_type, work.enabled, work.approval) == ("30m", "factory.work.requested", False, "watched")
    assert (ship.every, ship.event_type, ship.enabled, ship.approval) == ("7d", "factory.ship.requested", False, "watched")
    # The merge-loop exception (docs/demo.md): enabled, auto — it approves only the read-only scan.
    assert (merge.every, merge.event_type, merge.enabled, merge.approval) == ("30m", "factory.merge.requested", True, "auto")
    for loop in (work, merge, ship):
        assert (loop.singleton, loop.catch_up, loop.source, loop.overrides) == (True, "none", "repos", ())
        assert loop.payload == {"repo": "hello"}
        assert loop.subject == "hello"
    assert get_registry().definitions["merge-scan@1"].mutating is False


def test_merge_cadence_precedence_template_then_repo_then_overlay(repos):
    loops = get_registry().loops
    assert loops["merge-hello"].every == "30m"
    assert (loops["merge-factory"].every, loops["merge-factory"].cadence_seconds) == ("4h", 14400)
    assert loops["merge-factory"].overrides == ("every",)
    assert loops["work-factory"].every == "30m"  # merge_every is the merge loop's alone

    repos.write_config("schedule.yaml", "schedules:\n  merge-factory:\n    every: 2h\n  merge-hello:\n    every: 1h\n")
    loops = get_registry().loops
    assert (loops["merge-factory"].every, loops["merge-factory"].overrides) == ("2h", ("every",))
    assert (loops["merge-hello"].every, loops["merge-hello"].overrides) == ("1h", ("every",))
    assert loops["merge-factory"].source == "repos"


def test_overlay_may_enable_work_and_disable_the_auto_merge_loop(repos):
    repos.write_config("schedule.yaml", "schedules:\n  work-hello:\n    enabled: true\n  merge-hello:\n    enabled: false\n")
    loops = get_registry().loops
    assert (loops["work-hello"].enabled, loops["work-hello"].overrides) == (True, ("enabled",))
    assert (loops["merge-hello"].enabled, loops["merge-hello"].approval) == (False, "auto")


def test_overlay_may_not_make_a_repo_loop_auto_or_move_it_to_another_repo(repos):
    repos.write_config("schedule.yaml", "schedules:\n  work-hello:\n    approval: auto\n    enabled: true\n")
    with pytest.raises(RegistryInvalid) as caught:
        get_registry()
    assert ("work-hello", "overlay_forbidden_override") in rules(caught.value)

    repos.write_config("schedule.yaml", "schedules:\n  merge-hello:\n    payload:\n      repo: notes\n")
    with pytest.raises(RegistryInvalid) as caught:
        get_registry()
    assert ("merge-hello", "overlay_forbidden_override") in rules(caught.value)


def test_auto_on_a_human_approval_only_type_is_a_load_error(repos):
    repos.update("event-types.json", lambda d: d["factory.ship.requested"].update(humanApprovalOnly=True))
    repos.update("schedules.json", lambda d: d["repoLoops"]["ship-{repo}"].update(approval="auto", enabled=True))
    with pytest.raises(RegistryInvalid) as caught:
        get_registry()
    assert {("ship-hello", "auto_on_human_only"), ("ship-factory", "auto_on_human_only")} <= rules(caught.value)


def test_an_auto_template_must_be_declared_enabled(repos):
    repos.update("schedules.json", lambda d: d["repoLoops"]["merge-{repo}"].update(enabled=False))
    with pytest.raises(RegistryInvalid) as caught:
        get_registry()
    assert ("repoLoops/merge-{repo}", "auto_requires_enabled") in rules(caught.value)


def test_a_template_whose_sample_tick_fails_the_payload_schema_is_a_load_error(repos):
    repos.update("schedules.json", lambda d: d["repoLoops"]["work-{repo}"].update(payload={"branch": "main"}))
    with pytest.raises(RegistryInvalid) as caught:
        get_registry()
    assert ("work-hello", "sample_tick_invalid") in rules(caught.value)


def test_a_template_may_not_pin_the_repo(repos):
    repos.update("schedules.json", lambda d: d["repoLoops"]["work-{repo}"].update(payload={"repo": "hello"}))
    with pytest.raises(RegistryInvalid) as caught:
        get_registry()
    assert ("repoLoops/work-{repo}", "template_payload_repo") in rules(caught.value)


def test_an_expanded_name_may_not_collide_with_a_kernel_loop(repos):
    repos.update("schedules.json", lambda d: d.update({"work-hello": dict(d["reaper"])}))
    with pytest.raises(RegistryInvalid) as caught:
        get_registry()
    assert ("repoLoops/work-{repo}", "repo_loop_collision") in rules(caught.value)


def test_a_template_name_without_the_repo_placeholder_is_a_load_error(repos):
    repos.update("schedules.json", lambda d: d["repoLoops"].update({"work": d["repoLoops"]["work-{repo}"]}))
    with pytest.raises(RegistryInvalid) as caught:
        get_registry()
    assert ("repoLoops", "schema") in rules(caught.value)
