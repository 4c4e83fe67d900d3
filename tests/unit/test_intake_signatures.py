"""The signature functions on their own: published vectors, the window, the refusal codes (docs/design.md §10; docs/intake.md)."""

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest

from intake.signatures import SignatureRefused, verify_factory_signature, verify_github_signature
from lib.signing import sign, signature_matches
from tests.conftest import FIXTURES_DIR

NOW = datetime(2026, 11, 30, 21, 0, 0, tzinfo=UTC)


def refusal(check, *args, **kwargs) -> str:
    with pytest.raises(SignatureRefused) as caught:
        check(*args, **kwargs)
    return caught.value.code


@pytest.mark.parametrize("secret, body, expected", [
    # GitHub Docs, "Validating webhook deliveries".
    ("It's a Secret to Everybody", b"Hello, World!",
     "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"),
    # octokit/webhooks-methods.js tests.
    ("mysecret", b'{"foo":"bar"}', "sha256=4864d2759938a15468b5df9ade20bf161da9b4f737ea61794142f3484236bda3"),
])
def test_published_test_vectors(secret, body, expected):
    assert sign(secret, body) == expected
    verify_github_signature(secret, signature_256=expected, signature_1=None, body=body)


@pytest.mark.parametrize("name", ["pull_request.opened", "workflow_run.in_progress"])
def test_captured_deliveries_verify_with_the_published_capture_secret(name):
    capture = json.loads((FIXTURES_DIR / "github" / "signed" / f"{name}.capture.json").read_bytes())
    body = base64.b64decode(capture["body_raw_base64"])
    secret = "402786017574bd28f9d8f7a18648939751c47fe09077d56e10f0444f14fbb73b"
    verify_github_signature(secret, signature_256=capture["headers"]["x-hub-signature-256"], signature_1=None, body=body)
    assert refusal(
        verify_github_signature, secret, signature_256=capture["headers"]["x-hub-signature-256"],
        signature_1=None, body=body + b"\n",
    ) == "bad_signature"


def test_github_refusal_codes():
    body = b"{}"
    assert refusal(verify_github_signature, "", signature_256=sign("", body), signature_1=None, body=body) == "route_disabled"
    assert refusal(verify_github_signature, "s", signature_256=None, signature_1=None, body=body) == "missing_signature"
    assert refusal(verify_github_signature, "s", signature_256="", signature_1="sha1=00", body=body) == "legacy_signature_only"
    assert refusal(verify_github_signature, "s", signature_256=sign("t", body), signature_1=None, body=body) == "bad_signature"
    assert refusal(verify_github_signature, "s", signature_256="sha256=\u00e9\u20ac", signature_1=None, body=body) == "bad_signature"


def test_factory_signature_covers_the_timestamp_and_the_body():
    ts = str(int(NOW.timestamp()))
    signature = sign("s", f"{ts}.".encode() + b"{}")
    verify_factory_signature("s", timestamp=ts, signature=signature, body=b"{}", now=NOW)
    assert refusal(verify_factory_signature, "s", timestamp=str(int(ts) + 1), signature=signature, body=b"{}",
                   now=NOW) == "bad_signature"
    assert refusal(verify_factory_signature, "s", timestamp=ts, signature=signature, body=b"{} ",
                   now=NOW) == "bad_signature"


@pytest.mark.parametrize("seconds, accepted", [(-301, False), (-300, True), (0, True), (300, True), (301, False)])
def test_factory_timestamp_window_is_300_seconds_either_way(seconds, accepted):
    ts = str(int((NOW + timedelta(seconds=seconds)).timestamp()))
    signature = sign("s", f"{ts}.".encode())
    if accepted:
        verify_factory_signature("s", timestamp=ts, signature=signature, body=b"", now=NOW)
    else:
        assert refusal(verify_factory_signature, "s", timestamp=ts, signature=signature, body=b"",
                       now=NOW) == "stale_timestamp"


def test_factory_refusal_codes():
    ts = str(int(NOW.timestamp()))
    assert refusal(verify_factory_signature, "", timestamp=ts, signature="sha256=00", body=b"", now=NOW) == "route_disabled"
    assert refusal(verify_factory_signature, "s", timestamp=None, signature="sha256=00", body=b"", now=NOW) == "missing_signature"
    assert refusal(verify_factory_signature, "s", timestamp=ts, signature=None, body=b"", now=NOW) == "missing_signature"
    assert refusal(verify_factory_signature, "s", timestamp="12e3", signature="sha256=00", body=b"", now=NOW) == "bad_timestamp"


def test_stale_timestamp_is_only_told_to_a_holder_of_the_secret():
    ts = str(int(NOW.timestamp()) - 3600)
    assert refusal(verify_factory_signature, "s", timestamp=ts, signature=sign("t", f"{ts}.".encode()),
                   body=b"", now=NOW) == "bad_signature"


def test_a_timestamp_of_too_many_digits_is_told_how_many_are_allowed():
    ts = "0" * 300 + str(int(NOW.timestamp()))
    with pytest.raises(SignatureRefused) as caught:
        verify_factory_signature("s", timestamp=ts, signature="sha256=00", body=b"", now=NOW)
    assert (caught.value.code, caught.value.detail) == (
        "bad_timestamp", "X-Factory-Timestamp must be unix seconds: 1 to 12 digits, nothing else",
    )


@pytest.mark.parametrize("provided", ["sha256=\udcff", "\ud800", "sha256=é"])
def test_a_signature_that_is_not_ascii_or_not_even_encodable_is_no_match_never_an_error(provided):
    # A lone surrogate (from a header decoded with surrogateescape) is replaced, not raised on.
    assert signature_matches("secret", b"body", provided) is False


def test_a_signature_matches_with_blanks_around_it():
    assert signature_matches("s", b"body", f"  {sign('s', b'body')}\n") is True


def refusal_detail(check, *args, **kwargs) -> tuple[str, str]:
    with pytest.raises(SignatureRefused) as caught:
        check(*args, **kwargs)
    return caught.value.code, caught.value.detail


@pytest.mark.parametrize("provided", [
    "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",  # no sha256=
    "sha256=757107EA0EB2509FC211221CCE984B8A37570B6D7586C22C46F4379C8B043E17",  # upper case
    "sha1=757107ea0eb2509fc211221cce984b8a37570b6d",
    "sha256=757107ea",
])
def test_a_signature_of_another_form_is_refused_for_its_form_not_the_secret(provided):
    assert refusal_detail(verify_github_signature, "It's a Secret to Everybody", signature_256=provided,
                          signature_1=None, body=b"Hello, World!") == (
        "bad_signature", "the signature is not sha256= followed by 64 lower-case hex digits")


def test_an_empty_body_is_named_as_the_likely_cause():
    signature = sign("s", b"1764536400.{}")
    assert refusal_detail(verify_factory_signature, "s", timestamp="1764536400", signature=signature, body=b"",
                          now=NOW) == (
        "bad_signature", "the body arrived empty, which no signature matches: a request without Content-Length "
        "(chunked transfer encoding) is read as empty; send the length")
    assert refusal_detail(verify_github_signature, "s", signature_256=sign("t", b"x"), signature_1=None, body=b"x") == (
        "bad_signature", "the signature does not match the body under the configured secret")
