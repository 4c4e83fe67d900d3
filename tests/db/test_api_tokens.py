"""People's API tokens (docs/api.md "Tokens"): created by the person or a superuser, shown once,
stored hashed, labelled, revoked for good; journaled."""

import hashlib
import json
from io import StringIO

import pytest
from django.core.management import call_command

from ops.api.tokens import TokenRefused, create_token, live_token, revoke_token
from ops.models import ApiToken
from runtime.models import JournalEntry
from tests.conftest import at

pytestmark = pytest.mark.django_db

NOW = at("2026-11-30T22:00:00Z")


def test_a_token_is_stored_as_its_sha256_only(approver):
    token, raw = create_token(approver, " phone ", by=approver, now=NOW)
    assert raw.startswith("fct_") and len(raw) == 4 + 43
    assert (token.label, token.prefix, token.digest) == ("phone", raw[:12], hashlib.sha256(raw.encode()).hexdigest())
    assert raw not in json.dumps(list(ApiToken.objects.values()), default=str)
    assert live_token(raw) == token
    entry = JournalEntry.objects.get(action="api_token_created")
    assert (entry.actor, entry.actor_name, entry.data) == (
        "operator", "alice", {"tokenId": token.pk, "owner": "alice", "label": "phone", "prefix": token.prefix})


def test_only_the_person_or_a_superuser_manages_a_token(approver, viewer, django_user_model):
    with pytest.raises(TokenRefused) as refused:
        create_token(approver, "phone", by=viewer, now=NOW)
    assert (refused.value.code, refused.value.status) == ("permission_denied", 403)
    root = django_user_model.objects.create_superuser("root", password="root-pass-123")
    token, _ = create_token(approver, "phone", by=root, now=NOW)
    with pytest.raises(TokenRefused) as refused:
        revoke_token(token.pk, by=viewer, now=NOW)
    assert refused.value.code == "permission_denied"
    assert revoke_token(token.pk, by=root, now=NOW).revoked_at == NOW


def test_a_person_who_cannot_use_the_api_gets_no_token(outsider, approver, django_user_model):
    root = django_user_model.objects.create_superuser("root", password="root-pass-123")
    approver.is_active = False
    approver.save(update_fields=["is_active"])
    for person in (outsider, approver):
        with pytest.raises(TokenRefused) as refused:
            create_token(person, "phone", by=root, now=NOW)
        assert (refused.value.code, refused.value.status, refused.value.detail) == (
            "cannot_use_api", 403, f"{person.username} is not an active staff user, so the API would refuse the "
                                   "token: give them a role first (manage.py team add)")
    assert not ApiToken.objects.exists()
    assert not JournalEntry.objects.filter(action="api_token_created").exists()


def test_labels_are_checked_and_unique_among_live_tokens(approver):
    for bad in ("", "   ", "x" * 101, "tab\there"):
        with pytest.raises(TokenRefused) as refused:
            create_token(approver, bad, by=approver, now=NOW)
        assert (refused.value.code, refused.value.status) == ("label_invalid", 400)
    token, _ = create_token(approver, "phone", by=approver, now=NOW)
    with pytest.raises(TokenRefused) as refused:
        create_token(approver, "phone", by=approver, now=NOW)
    assert (refused.value.code, refused.value.status) == ("label_taken", 409)
    revoke_token(token.pk, by=approver, now=NOW)
    create_token(approver, "phone", by=approver, now=NOW)
    assert ApiToken.objects.filter(label="phone").count() == 2


def test_a_revoked_token_stays_and_no_longer_authenticates(approver):
    token, raw = create_token(approver, "phone", by=approver, now=NOW)
    revoke_token(token.pk, by=approver, now=NOW)
    assert live_token(raw) is None
    with pytest.raises(TokenRefused) as refused:
        revoke_token(token.pk, by=approver, now=NOW)
    assert (refused.value.code, refused.value.status) == ("already_revoked", 409)
    with pytest.raises(TokenRefused) as refused:
        revoke_token(999, by=approver, now=NOW)
    assert (refused.value.code, refused.value.status) == ("not_found", 404)
    assert JournalEntry.objects.get(action="api_token_revoked").data["label"] == "phone"


def test_the_command_creates_lists_and_revokes(approver):
    out = StringIO()
    call_command("api_token", "create", "alice", "--label", "phone", stdout=out)
    lines = out.getvalue().splitlines()
    token = ApiToken.objects.get()
    assert lines[0] == f"API token {token.pk} of alice labelled 'phone'; it is shown only now:"
    assert live_token(lines[1]) == token
    listing = StringIO()
    call_command("api_token", "list", "--json", stdout=listing)
    assert json.loads(listing.getvalue()) == [{
        "id": token.pk, "user": "alice", "label": "phone", "prefix": token.prefix,
        "createdAt": json.loads(listing.getvalue())[0]["createdAt"], "revokedAt": None}]
    out = StringIO()
    call_command("api_token", "revoke", str(token.pk), stdout=out)
    assert out.getvalue().strip() == f"revoked API token {token.pk} ('phone') of alice"
    assert live_token(lines[1]) is None


@pytest.mark.parametrize("argv, message", [
    (["create", "nobody", "--label", "x"], "refused: unknown_user: there is no user 'nobody'"),
    (["create", "alice", "--label", "x", "--as", "victor"],
     "refused: permission_denied: only alice or a superuser may create their tokens"),
    (["revoke", "999"], "refused: not_found: there is no API token 999"),
    (["create", "oscar", "--label", "x"],
     "refused: cannot_use_api: oscar is not an active staff user, so the API would refuse the token: "
     "give them a role first (manage.py team add)"),
])
def test_the_command_exits_2_when_refused(approver, viewer, outsider, argv, message):
    err = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("api_token", *argv, stderr=err)
    assert (exited.value.code, err.getvalue().strip()) == (2, message)


def test_the_admin_shows_a_new_token_once_and_lists_only_ones_own(client, approver, viewer):
    create_token(viewer, "laptop", by=viewer, now=NOW)
    client.force_login(approver)
    response = client.post("/admin/ops/apitoken/add/", {"label": "phone"}, follow=True)
    token = ApiToken.objects.get(user=approver)
    shown = [str(m) for m in response.context["messages"]]
    raw = shown[0].split(": ", 1)[1].split(" — ")[0]
    assert live_token(raw) == token
    assert shown == [f"API token 'phone' of alice: {raw} — copy it now, it is not shown again"]
    listing = client.get("/admin/ops/apitoken/")
    assert [t.label for t in listing.context["cl"].result_list] == ["phone"]
    client.post("/admin/ops/apitoken/", {"action": "revoke_selected", "_selected_action": [token.pk]})
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None
