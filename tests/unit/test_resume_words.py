"""What resuming a loop does, in the words the command, the API's pages and the loop page use
(schedules.pausing.resume_words; docs/schedules.md, "Pausing a loop")."""

from types import SimpleNamespace

from schedules.pausing import resume_words

PLAIN = SimpleNamespace(keyed=None, catch_up="all")
KEYED = SimpleNamespace(keyed=object(), catch_up="last")


def test_a_loop_fires_its_current_slot_and_says_how_many_the_pause_covered():
    assert resume_words(PLAIN, 6) == "the pause covered 6 slot(s); its current slot fires at the next iteration, with no skips"
    assert resume_words(PLAIN) == (
        "its current slot fires at the next iteration, with no skips; the slots the pause covered are not fired")


def test_a_keyed_loops_rows_fire_as_its_catch_up_policy_says_whatever_was_covered():
    words = "each of its keys' rows that came due fires at the next iteration as its catch-up policy (last) says"
    assert resume_words(KEYED, 0) == resume_words(KEYED) == words


def test_a_loop_gone_from_the_registry_is_spoken_of_as_a_plain_loop():
    assert resume_words(None, 0).startswith("the pause covered 0 slot(s)")
