"""POST /github: GitHub deliveries as published, translated as docs/intake.md tables it.

Bodies are read byte for byte from ``../shared/fixtures/github`` and signed here with a
test secret (the ``signed/`` captures carry GitHub's own signature). Variants that GitHub
sends but no fixture holds (a second PR on one head, a deleted fork) are made from a real
body, re-serialised, and signed over those new bytes.
"""

import base64
import copy
import json
from urllib.parse import urlencode

import pytest
from django.test import Client
from django.utils import timezone

from intake.bodies import GITHUB_MAX_BODY_BYTES
from lib.signing import sign
from runtime.models import Event, JournalEntry
from tests.github import GITHUB, REPOS_YAML, SECRET, ignored, post

#: The test secret Cogni-DAO/cogni-git-review publishes for its captures (fixtures README).
CAPTURE_SECRET = "402786017574bd28f9d8f7a18648939751c47fe09077d56e10f0444f14fbb73b"
PR_HEAD = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
RUN_HEAD = "6f0b5a9c2c4caea39f73a4f5f4dbee093265ab2a"

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def github_door(settings, registry_files):
    settings.FACTORY_GITHUB_WEBHOOK_SECRET = SECRET
    registry_files.write_config("repos.yaml", REPOS_YAML)
    return registry_files


def fixture(name: str) -> bytes:
    return (GITHUB / name).read_bytes()


def only_event() -> Event:
    (event,) = Event.objects.all()
    return event


def assert_merge_requested(response, delivery: str, repo: str = "hello") -> None:
    """The delivery was admitted as the one stored event: a merge review of ``repo`` under the
    delivery's id, read back from the table (not only the answer's status)."""
    assert (response.status_code, response.json()) == (
        202, {"admitted": True, "duplicate": False, "eventId": delivery},
    )
    stored = only_event().envelope()
    assert (stored["type"], stored["eventId"], stored["subject"], stored["source"], stored["payload"]) == (
        "factory.merge.requested", delivery, repo, "github", {"repo": repo},
    )


# --- every fixture file, as published -------------------------------------------------------


@pytest.mark.parametrize("name, kind, reason", [
    ("ping.json", "ping", "unhandled_event"),
    ("push.json", "push", "unhandled_event"),
    ("issues.opened.json", "issues", "unhandled_event"),
    ("pull_request.closed.json", "pull_request", "unhandled_action"),
    ("pull_request.reopened.json", "pull_request", "unhandled_action"),
    ("workflow_run.in_progress.json", "workflow_run", "unhandled_action"),
    ("workflow_run.requested.json", "workflow_run", "unhandled_action"),
    ("workflow_run.completed.fork-empty-pull_requests.json", "workflow_run", "not_pull_request_head"),
    ("workflow_run.completed.with-pull-requests.json", "workflow_run", "not_pull_request_head"),
])
def test_fixture_is_ignored_with_its_reason(name, kind, reason):
    response = post(fixture(name), kind)
    assert (response.status_code, response.json()) == (200, ignored(reason))
    assert Event.objects.count() == 0


@pytest.mark.parametrize("name", [
    "pull_request.opened.json",
    "pull_request.opened.null-body.json",
    "pull_request.synchronize.json",
    "pull_request.ready_for_review.json",
])
def test_pull_request_against_the_base_requests_a_merge_review(name):
    body = fixture(name)
    response = post(body, "pull_request", delivery="72d3162e-cc78-11e3-81ab-4c9367dc0958")
    assert (response.status_code, response.json()) == (
        202, {"admitted": True, "duplicate": False, "eventId": "72d3162e-cc78-11e3-81ab-4c9367dc0958"},
    )
    event = only_event()
    assert event.envelope() == {
        "schemaVersion": "factory.event/v1",
        "eventId": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
        "type": "factory.merge.requested",
        "source": "github",
        "subject": "hello",
        "occurredAt": json.loads(body)["pull_request"]["updated_at"],
        "correlationId": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
        "payload": {"repo": "hello"},
    }
    assert event.door == "github"
    assert JournalEntry.objects.get(event=event, action="event_admitted").actor == "github"


def test_green_pull_request_run_requests_a_scoped_review_keyed_by_pr_and_head():
    response = post(fixture("workflow_run.completed.pull_request-success.json"), "workflow_run")
    event_id = f"merge-pr:playground:46:{RUN_HEAD}"
    assert (response.status_code, response.json()) == (202, {"admitted": True, "duplicate": False, "eventId": event_id})
    event = only_event()
    assert (event.type, event.subject, event.source, event.correlation_id) == (
        "factory.merge.requested", "playground", "github", event_id,
    )
    assert event.payload == {"repo": "playground", "prNumbers": [46], "headSha": RUN_HEAD}
    assert event.envelope()["occurredAt"] == "2021-03-23T18:47:08Z"


def test_failed_run_delivered_through_probot_is_a_ci_failure_even_for_a_report_only_repo():
    # The file is probot's envelope {name, id, payload}: the delivery body is `payload`.
    envelope = json.loads(fixture("workflow_run.completed.failure-push.probot-envelope.json"))
    body = json.dumps(envelope["payload"]).encode()
    response = post(body, envelope["name"], delivery=envelope["id"])
    assert (response.status_code, response.json()) == (
        202, {"admitted": True, "duplicate": False, "eventId": "bfe22520-466a-11ed-8dae-4cb245a6a856"},
    )
    event = only_event()
    assert (event.type, event.subject) == ("github.workflow-run.failed", "ci")
    assert event.payload == {"repo": "clee2000/random-testing", "runId": 3206737417}


def test_captured_delivery_with_githubs_own_signature_is_admitted(settings):
    settings.FACTORY_GITHUB_WEBHOOK_SECRET = CAPTURE_SECRET
    capture = json.loads(fixture("signed/pull_request.opened.capture.json"))
    body = base64.b64decode(capture["body_raw_base64"])
    assert body == fixture("signed/pull_request.opened.body.json")
    headers = capture["headers"]
    response = post(
        body, headers["x-github-event"], delivery=headers["x-github-delivery"],
        signature=headers["x-hub-signature-256"], content_type=headers["content-type"],
    )
    assert (response.status_code, response.json()) == (
        202, {"admitted": True, "duplicate": False, "eventId": "f73f08d0-a995-11f0-8d11-0b9d0ae424e4"},
    )
    assert only_event().payload == {"repo": "test-repo"}


def test_captured_run_in_progress_with_githubs_signature_is_ignored(settings):
    settings.FACTORY_GITHUB_WEBHOOK_SECRET = CAPTURE_SECRET
    capture = json.loads(fixture("signed/workflow_run.in_progress.capture.json"))
    body = base64.b64decode(capture["body_raw_base64"])
    assert body == fixture("signed/workflow_run.in_progress.body.json")
    headers = capture["headers"]
    response = post(body, headers["x-github-event"], delivery=headers["x-github-delivery"],
                    signature=headers["x-hub-signature-256"])
    assert (response.status_code, response.json()) == (200, ignored("unhandled_action"))
    assert Event.objects.count() == 0


# --- the rows of the table that depend on configuration -----------------------------------------


def test_unconfigured_repo_is_ignored(github_door):
    github_door.write_config("repos.yaml", "repos: []\n")
    for name, kind in [("pull_request.opened.json", "pull_request"),
                       ("workflow_run.completed.pull_request-success.json", "workflow_run")]:
        response = post(fixture(name), kind)
        assert (response.status_code, response.json()) == (200, ignored("unconfigured_repo"))
    envelope = json.loads(fixture("workflow_run.completed.failure-push.probot-envelope.json"))
    response = post(json.dumps(envelope["payload"]).encode(), "workflow_run")
    assert (response.status_code, response.json()) == (200, ignored("unconfigured_repo"))
    assert Event.objects.count() == 0


def test_pull_request_against_another_branch_is_not_base_branch(github_door):
    github_door.write_config("repos.yaml", "repos:\n  - {name: hello, github: Codertocat/Hello-World, base: main}\n")
    response = post(fixture("pull_request.opened.json"), "pull_request")
    assert (response.status_code, response.json()) == (200, ignored("not_base_branch"))
    assert Event.objects.count() == 0


def test_report_only_repo_never_requests_a_merge(github_door):
    github_door.write_config("repos.yaml", """
repos:
  - {name: hello, github: Codertocat/Hello-World, base: master, report_only: true}
  - {name: playground, github: gsmet/quarkus-bot-java-playground, base: main, report_only: true}
""")
    assert post(fixture("pull_request.synchronize.json"), "pull_request").json() == ignored("repo_report_only")
    response = post(fixture("workflow_run.completed.pull_request-success.json"), "workflow_run")
    assert (response.status_code, response.json()) == (200, ignored("repo_report_only"))
    assert Event.objects.count() == 0


def test_repo_match_ignores_the_case_of_owner_and_name(github_door):
    github_door.write_config("repos.yaml", "repos:\n  - {name: hello, github: codertocat/hello-world, base: master}\n")
    response = post(fixture("pull_request.opened.json"), "pull_request", delivery="delivery-case")
    assert_merge_requested(response, "delivery-case")


def test_green_run_on_another_branch_is_not_base_branch(github_door):
    github_door.write_config(
        "repos.yaml", "repos:\n  - {name: playground, github: gsmet/quarkus-bot-java-playground, base: develop}\n",
    )
    response = post(fixture("workflow_run.completed.pull_request-success.json"), "workflow_run")
    assert (response.status_code, response.json()) == (200, ignored("not_base_branch"))


def test_green_run_listing_only_another_repositorys_pull_request_is_not_base_branch():
    # octokit's example lists Codertocat/Hello-World#2 on a run of octo-org/octo-repo.
    payload = json.loads(fixture("workflow_run.completed.with-pull-requests.json"))
    payload["workflow_run"]["event"] = "pull_request"
    response = post(json.dumps(payload).encode(), "workflow_run")
    assert (response.status_code, response.json()) == (200, ignored("not_base_branch"))
    assert Event.objects.count() == 0


def test_green_run_with_two_pull_requests_on_the_base_is_ambiguous():
    payload = json.loads(fixture("workflow_run.completed.pull_request-success.json"))
    second = copy.deepcopy(payload["workflow_run"]["pull_requests"][0])
    second["number"] = 47
    payload["workflow_run"]["pull_requests"].append(second)
    response = post(json.dumps(payload).encode(), "workflow_run")
    assert response.status_code == 422
    assert [e["code"] for e in response.json()["errors"]] == ["ambiguous_pull_request_head"]
    assert Event.objects.count() == 0


def test_green_run_with_one_of_two_pull_requests_on_the_base_is_translated():
    payload = json.loads(fixture("workflow_run.completed.pull_request-success.json"))
    other = copy.deepcopy(payload["workflow_run"]["pull_requests"][0])
    other["number"], other["base"]["ref"] = 47, "release"
    payload["workflow_run"]["pull_requests"].insert(0, other)
    response = post(json.dumps(payload).encode(), "workflow_run")
    assert response.json()["eventId"] == f"merge-pr:playground:46:{RUN_HEAD}"


@pytest.mark.parametrize("conclusion", ["cancelled", "skipped", "timed_out", "neutral", "action_required", None])
def test_completed_run_neither_green_nor_failed_is_unhandled_action(conclusion):
    payload = json.loads(fixture("workflow_run.completed.pull_request-success.json"))
    payload["workflow_run"]["conclusion"] = conclusion
    response = post(json.dumps(payload).encode(), "workflow_run")
    assert (response.status_code, response.json()) == (200, ignored("unhandled_action"))


def test_green_run_not_triggered_by_a_pull_request_is_not_pull_request_head():
    payload = json.loads(fixture("workflow_run.completed.pull_request-success.json"))
    payload["workflow_run"]["event"] = "push"
    assert post(json.dumps(payload).encode(), "workflow_run").json() == ignored("not_pull_request_head")


def test_pull_request_from_a_fork_is_translated_like_any_other():
    payload = json.loads(fixture("pull_request.opened.json"))
    payload["pull_request"]["head"]["repo"]["full_name"] = "someone/Hello-World"
    payload["pull_request"]["head"]["label"] = "someone:changes"
    response = post(json.dumps(payload).encode(), "pull_request")
    assert response.status_code == 202
    assert only_event().payload == {"repo": "hello"}


def test_pull_request_whose_fork_was_deleted_is_translated():
    payload = json.loads(fixture("pull_request.synchronize.json"))
    payload["pull_request"]["head"]["repo"] = None
    response = post(json.dumps(payload).encode(), "pull_request", delivery="delivery-deleted-fork")
    assert_merge_requested(response, "delivery-deleted-fork")


@pytest.mark.parametrize("action", ["closed", "reopened", "edited", "labeled", "converted_to_draft", "assigned"])
def test_other_pull_request_actions_are_unhandled(action):
    payload = json.loads(fixture("pull_request.opened.json"))
    payload["action"] = action
    assert post(json.dumps(payload).encode(), "pull_request").json() == ignored("unhandled_action")


# --- malformed deliveries: 422 ----------------------------------------------------------------


def test_delivery_without_a_delivery_id_is_refused():
    response = post(fixture("pull_request.opened.json"), "pull_request", delivery=None)
    assert response.status_code == 422
    assert [e["code"] for e in response.json()["errors"]] == ["missing_delivery_id"]
    assert Event.objects.count() == 0


@pytest.mark.parametrize("kind, body", [
    ("pull_request", b"[1, 2, 3]"),
    ("pull_request", b'{"action": "opened"}'),
    ("pull_request", b'{"action": "opened", "repository": {"full_name": "Codertocat/Hello-World"}}'),
    ("pull_request", b'{"action": 7, "repository": {"full_name": "Codertocat/Hello-World"}}'),
    ("workflow_run", b'{"action": "completed", "repository": {"full_name": "Codertocat/Hello-World"}}'),
    ("workflow_run", b'{"repository": {"full_name": "Codertocat/Hello-World"}}'),
])
def test_delivery_missing_what_the_translation_needs_is_malformed_payload(kind, body):
    response = post(body, kind)
    assert response.status_code == 422
    assert [e["code"] for e in response.json()["errors"]] == ["malformed_payload"]
    assert Event.objects.count() == 0


def test_green_run_with_a_malformed_head_sha_is_malformed_payload():
    payload = json.loads(fixture("workflow_run.completed.pull_request-success.json"))
    payload["workflow_run"]["head_sha"] = "not-a-sha"
    assert post(json.dumps(payload).encode(), "workflow_run").json()["errors"][0]["code"] == "malformed_payload"


def malformed(detail: str) -> dict:
    return {"errors": [{"code": "malformed_payload", "detail": detail}]}


@pytest.mark.parametrize("number", [0, -1, 2**31, 2**63, 10**30])
def test_green_run_with_a_pull_request_number_outside_32_bits_is_malformed_and_stores_nothing(number):
    payload = json.loads(fixture("workflow_run.completed.pull_request-success.json"))
    payload["workflow_run"]["pull_requests"][0]["number"] = number
    response = post(json.dumps(payload).encode(), "workflow_run")
    assert (response.status_code, response.json()) == (422, malformed(
        "workflow_run delivery: a pull request's number is not an integer from 1 to 2147483647",
    ))
    assert Event.objects.count() == 0


def test_the_largest_32_bit_pull_request_number_is_translated():
    payload = json.loads(fixture("workflow_run.completed.pull_request-success.json"))
    payload["workflow_run"]["pull_requests"][0]["number"] = 2**31 - 1
    response = post(json.dumps(payload).encode(), "workflow_run")
    assert (response.status_code, response.json()["eventId"]) == (202, f"merge-pr:playground:2147483647:{RUN_HEAD}")
    assert only_event().payload["prNumbers"] == [2147483647]


def test_two_pull_requests_on_the_base_with_a_number_out_of_range_are_malformed_before_ambiguous():
    payload = json.loads(fixture("workflow_run.completed.pull_request-success.json"))
    second = copy.deepcopy(payload["workflow_run"]["pull_requests"][0])
    second["number"] = 10**30
    payload["workflow_run"]["pull_requests"].append(second)
    response = post(json.dumps(payload).encode(), "workflow_run")
    assert (response.status_code, response.json()) == (422, malformed(
        "workflow_run delivery: a pull request's number is not an integer from 1 to 2147483647",
    ))


@pytest.mark.parametrize("name, place, detail", [
    ("workflow_run.completed.failure-push.probot-envelope.json", ("workflow_run", "id"), "workflow_run.id"),
    ("workflow_run.completed.pull_request-success.json", ("workflow_run", "id"), "workflow_run.id"),
    ("workflow_run.completed.pull_request-success.json", ("repository", "id"), "repository.id"),
    ("workflow_run.completed.pull_request-success.json", ("workflow_run", "pull_requests", 0, "base", "repo", "id"),
     "a pull request's base.repo.id"),
])
@pytest.mark.parametrize("number", [0, 2**63, 10**30])
def test_an_id_outside_64_bits_is_malformed_and_stores_nothing(name, place, detail, number):
    body = json.loads(fixture(name))
    payload = body.get("payload", body)  # the probot capture wraps the delivery body
    node = payload
    for step in place[:-1]:
        node = node[step]
    node[place[-1]] = number
    response = post(json.dumps(payload).encode(), "workflow_run")
    assert (response.status_code, response.json()) == (422, malformed(
        f"workflow_run delivery: {detail} is not an integer from 1 to 9223372036854775807",
    ))
    assert Event.objects.count() == 0


def test_the_largest_64_bit_run_id_is_stored_as_sent():
    payload = json.loads(fixture("workflow_run.completed.failure-push.probot-envelope.json"))["payload"]
    payload["workflow_run"]["id"] = 2**63 - 1
    assert post(json.dumps(payload).encode(), "workflow_run").status_code == 202
    assert only_event().payload == {"repo": "clee2000/random-testing", "runId": 9223372036854775807}


@pytest.mark.parametrize("body", [b"", b"{", b"not json", b"\xff\xfe{}", b'{"a": NaN}'])
def test_signed_body_that_is_not_json_is_invalid_json(body):
    response = post(body, "pull_request")
    assert response.status_code == 422
    assert [e["code"] for e in response.json()["errors"]] == ["invalid_json"]
    assert Event.objects.count() == 0


# --- signatures -------------------------------------------------------------------------------


def test_unset_secret_disables_the_route(settings):
    settings.FACTORY_GITHUB_WEBHOOK_SECRET = ""
    response = post(fixture("pull_request.opened.json"), "pull_request", secret="")
    assert (response.status_code, response.json()["error"]) == (401, "route_disabled")
    assert Event.objects.count() == 0


def test_signature_under_another_secret_is_refused():
    response = post(fixture("pull_request.opened.json"), "pull_request", secret="not-the-secret")
    assert (response.status_code, response.json()["error"]) == (401, "bad_signature")
    assert Event.objects.count() == 0


def test_events_secret_does_not_sign_github_deliveries(settings):
    settings.FACTORY_EVENTS_SECRET = "events-secret"
    response = post(fixture("pull_request.opened.json"), "pull_request", secret="events-secret")
    assert (response.status_code, response.json()["error"]) == (401, "bad_signature")


def test_signature_over_a_re_encoded_body_is_refused():
    body = fixture("pull_request.opened.json")
    re_encoded = json.dumps(json.loads(body), separators=(",", ":")).encode()
    response = post(body, "pull_request", signature=sign(SECRET, re_encoded))
    assert (response.status_code, response.json()["error"]) == (401, "bad_signature")
    assert Event.objects.count() == 0


def test_legacy_sha1_signature_alone_is_refused():
    response = post(fixture("pull_request.opened.json"), "pull_request", signature=None,
                    **{"X-Hub-Signature": "sha1=1ed655f84c2168b0830754eb39c1ae5f442e6b69"})
    assert (response.status_code, response.json()["error"]) == (401, "legacy_signature_only")
    assert Event.objects.count() == 0


def test_sha1_prefixed_value_in_the_sha256_header_is_refused():
    response = post(fixture("pull_request.opened.json"), "pull_request",
                    signature="sha1=1ed655f84c2168b0830754eb39c1ae5f442e6b69")
    assert (response.status_code, response.json()["error"]) == (401, "bad_signature")


def test_missing_signature_is_refused_before_anything_is_parsed():
    response = post(b"not json at all", "pull_request", signature=None, content_type="text/plain")
    assert (response.status_code, response.json()["error"]) == (401, "missing_signature")


def test_githubs_published_test_vector_passes_the_signature_check(settings):
    # GitHub Docs: secret "It's a Secret to Everybody", body "Hello, World!". The body is not
    # JSON, so getting past 401 to 422 invalid_json proves the signature was accepted.
    settings.FACTORY_GITHUB_WEBHOOK_SECRET = "It's a Secret to Everybody"
    signature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    response = post(b"Hello, World!", "ping", signature=signature)
    assert response.status_code == 422
    assert response.json()["errors"][0]["code"] == "invalid_json"
    response = post(b"Hello, World!", "ping", signature=signature.replace("7571", "7570"))
    assert response.status_code == 401


def test_octokit_test_vector_passes_the_signature_check(settings):
    settings.FACTORY_GITHUB_WEBHOOK_SECRET = "mysecret"
    signature = "sha256=4864d2759938a15468b5df9ade20bf161da9b4f737ea61794142f3484236bda3"
    response = post(b'{"foo":"bar"}', "ping", signature=signature)
    assert (response.status_code, response.json()) == (200, ignored("unhandled_event"))



@pytest.mark.parametrize("body", [b"false", b"[]", b'"ping"', b"7", b"null"])
@pytest.mark.parametrize("kind", ["ping", "push", "pull_request"])
def test_a_body_that_is_not_an_object_is_refused_whatever_the_kind(body, kind):
    response = post(body, kind)
    assert response.status_code == 422
    assert [e["code"] for e in response.json()["errors"]] == ["malformed_payload"]


@pytest.mark.parametrize("updated_at", ["x\u0000", "2026-12-01T00:00:00+00:00\n", 5, "2026-12-01"])
def test_an_updated_at_that_is_not_an_instant_is_malformed_not_replaced_by_the_receipt_time(updated_at):
    payload = json.loads(fixture("pull_request.opened.json"))
    payload["pull_request"]["updated_at"] = updated_at
    response = post(json.dumps(payload).encode(), "pull_request")
    assert response.status_code == 422
    assert [e["code"] for e in response.json()["errors"]] == ["malformed_payload"]
    assert "pull_request.updated_at" in response.json()["errors"][0]["detail"]
    if updated_at == 5:
        assert response.json()["errors"][0]["detail"] == "pull_request delivery: pull_request.updated_at is not a string"


@pytest.mark.parametrize("missing", [True, False])
def test_a_missing_or_null_updated_at_is_the_receipt_time(missing):
    payload = json.loads(fixture("pull_request.opened.json"))
    if missing:
        del payload["pull_request"]["updated_at"]
    else:
        payload["pull_request"]["updated_at"] = None
    before = timezone.now().replace(microsecond=0)
    assert post(json.dumps(payload).encode(), "pull_request").status_code == 202
    assert only_event().occurred_at >= before

# --- transport: content types, sizes, CSRF ----------------------------------------------------------


def test_form_encoded_delivery_is_verified_over_the_form_body_and_translated():
    form = urlencode({"payload": fixture("pull_request.opened.json").decode()}).encode()
    response = post(form, "pull_request", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 202
    assert only_event().payload == {"repo": "hello"}


def test_form_encoded_delivery_signed_over_the_json_alone_is_refused():
    body = fixture("pull_request.opened.json")
    form = urlencode({"payload": body.decode()}).encode()
    response = post(form, "pull_request", content_type="application/x-www-form-urlencoded",
                    signature=sign(SECRET, body))
    assert (response.status_code, response.json()["error"]) == (401, "bad_signature")
    assert Event.objects.count() == 0


def test_form_encoded_delivery_without_a_payload_field_is_malformed():
    response = post(b"data=%7B%7D", "pull_request", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 422
    assert response.json()["errors"][0]["code"] == "malformed_payload"


def test_signed_delivery_of_another_content_type_is_415():
    response = post(fixture("pull_request.opened.json"), "pull_request", content_type="text/plain")
    assert (response.status_code, response.json()["error"]) == (415, "unsupported_media_type")
    assert Event.objects.count() == 0


def test_json_content_type_with_charset_is_accepted():
    response = post(fixture("pull_request.opened.json"), "pull_request", content_type="application/json; charset=utf-8",
                    delivery="delivery-charset")
    assert_merge_requested(response, "delivery-charset")


def test_large_delivery_under_githubs_cap_is_verified_and_translated():
    # 20 MB, over Django's 2.5 MB DATA_UPLOAD_MAX_MEMORY_SIZE: JSON allows the trailing spaces.
    body = fixture("pull_request.opened.json") + b" " * (20 * 1024 * 1024)
    response = post(body, "pull_request", delivery="delivery-large")
    assert_merge_requested(response, "delivery-large")


def test_delivery_over_githubs_cap_is_413_before_the_signature():
    body = b" " * (GITHUB_MAX_BODY_BYTES + 1)
    response = post(body, "pull_request", signature=None)
    assert (response.status_code, response.json()["error"]) == (413, "payload_too_large")
    assert Event.objects.count() == 0


def test_declared_length_over_the_cap_is_413_without_reading():
    response = post(fixture("ping.json"), "ping", CONTENT_LENGTH=str(GITHUB_MAX_BODY_BYTES + 1))
    assert (response.status_code, response.json()["error"]) == (413, "payload_too_large")


def test_route_needs_no_csrf_token_session_or_login(approver):
    client = Client(enforce_csrf_checks=True)
    client.force_login(approver)
    assert post(fixture("pull_request.opened.json"), "pull_request", client=client).status_code == 202
    response = post(fixture("pull_request.opened.json"), "pull_request", client=client, secret="wrong")
    assert response.status_code == 401


def test_answer_is_json_whatever_the_client_accepts():
    response = post(fixture("ping.json"), "ping", Accept="text/html")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"


# --- redeliveries and replays ---------------------------------------------------------------------


def test_redelivered_delivery_is_a_duplicate_and_admits_nothing():
    body = fixture("pull_request.opened.json")
    answers = [post(body, "pull_request", delivery="d-1") for _ in range(3)]
    assert [a.status_code for a in answers] == [202, 200, 200]
    assert answers[1].json() == {"admitted": False, "duplicate": True, "eventId": "d-1"}
    assert Event.objects.count() == 1
    assert JournalEntry.objects.filter(action="event_admitted").count() == 1


def test_green_notifications_of_one_head_converge_on_one_event():
    body = fixture("workflow_run.completed.pull_request-success.json")
    first = post(body, "workflow_run")  # a fresh delivery id each time: redeliveries and re-runs
    again = post(body, "workflow_run")
    assert (first.status_code, again.status_code) == (202, 200)
    assert again.json() == {"admitted": False, "duplicate": True, "eventId": f"merge-pr:playground:46:{RUN_HEAD}"}
    assert Event.objects.count() == 1
