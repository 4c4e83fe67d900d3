"""The base refusal (lib/refusals.py): its message, its errors list, and a copy of it."""

import copy
import pickle

from lib.refusals import Refused


class WholeMessage(Refused):
    code_in_message = False


def test_a_refusals_message_starts_with_its_code():
    assert str(Refused("bad_signature", "the signature does not match")) == "bad_signature: the signature does not match"


def test_a_refusal_whose_detail_is_the_whole_message_reads_as_its_detail():
    assert str(WholeMessage("fold_refused", "the key is unknown")) == "the key is unknown"


def test_a_refusal_keeps_the_status_it_is_given_and_its_class_status_otherwise():
    assert (Refused("a", "b").status, Refused("a", "b", status=409).status) == (None, 409)


def test_a_refusal_survives_a_pickle_and_a_copy_with_its_code_detail_and_status():
    # Exception pickling and copying call the class again with ``args``: they must be (code, detail).
    refusal = Refused("not_pending", "the proposal was approved already", status=409)
    for again in (pickle.loads(pickle.dumps(refusal)), copy.copy(refusal)):
        assert (type(again), again.args, again.code, again.detail, again.status, str(again)) == (
            Refused, ("not_pending", "the proposal was approved already"), "not_pending",
            "the proposal was approved already", 409, "not_pending: the proposal was approved already",
        )


def test_a_refusal_is_the_doors_errors_list():
    assert Refused("invalid_payload", "payload: repo is required").as_errors() == [
        {"code": "invalid_payload", "detail": "payload: repo is required"},
    ]
