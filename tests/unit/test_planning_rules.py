"""The planner's pure rules (docs/design.md §7): a singleton key and the loop it names back."""

from runtime.services.planning import loop_of_singleton, singleton_key


def test_a_singleton_key_names_its_loop_back_whatever_its_key_holds():
    """Loop names hold no space; a key may hold several, and the loop is what comes before the first."""
    assert singleton_key("nightly", "acme corp west") == "nightly acme corp west"
    assert loop_of_singleton("nightly acme corp west") == "nightly"
    assert (singleton_key("reaper", None), loop_of_singleton("reaper")) == ("reaper", "reaper")
